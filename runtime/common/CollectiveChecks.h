//===- CollectiveChecks.h - Shared by the host communicators ----*- C++ -*-===//
//
// What the thread communicator (ThreadCommunicator.cpp) and the MPI one
// (runtime/cpu/services/MpiCommunicator.cpp) check and say alike: which
// buffers a sum takes, and how a list of ranks reads in an error.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMMON_COLLECTIVECHECKS_H
#define DPRT_COMMON_COLLECTIVECHECKS_H

#include "dprt/types.h"

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dprt {

/// Sums run on accumulation buffers only (f32 or f64).
inline void requireAcc(DType acc, const char *collective) {
  if (acc != DType::F32 && acc != DType::F64)
    throw std::invalid_argument(std::string(collective) +
                                " sums accumulation buffers (f32 or f64), "
                                "got " +
                                nameOf(acc));
}

/// "2", "2 and 5", "1, 2 and 5".
inline std::string listOf(const std::vector<int> &ranks) {
  std::ostringstream os;
  for (size_t i = 0; i < ranks.size(); ++i)
    os << (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") << ranks[i];
  return os.str();
}

} // namespace dprt

#endif // DPRT_COMMON_COLLECTIVECHECKS_H
