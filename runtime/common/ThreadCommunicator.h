//===- ThreadCommunicator.h - Collectives between threads -------*- C++ -*-===//
//
// The communicator of the CPU backend: the ranks are threads of one process
// and exchange data through each other's host memory. Each collective is
//   publish my pointer -> barrier -> read the others' buffers -> barrier,
// so that no rank overwrites a buffer another rank is still reading and the
// same communicators can be used for any number of collectives in a row.
// Sums run in rank order 0, 1, ..., so a run gives the same bits every time.
//
// When one rank fails (an exception), the driver calls `abort` (comm.h) so
// that the ranks blocked in a collective throw CommunicatorAborted instead
// of waiting forever.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMMON_THREADCOMMUNICATOR_H
#define DPRT_COMMON_THREADCOMMUNICATOR_H

#include "dprt/comm.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace dprt {

/// Thrown by a collective of a group that another rank aborted.
class CommunicatorAborted : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct ThreadGroup;

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int index);

  void allGather(Rank *rank, DType dt, const void *shard, void *full,
                 int64_t shardElems, int32_t stream) override;
  void reduceScatter(Rank *rank, DType acc, const void *full, void *shard,
                     int64_t shardElems, bool accumulate,
                     int32_t stream) override;
  void allReduceHost(double *values, int count) override;
  void barrier() override;

  /// Wakes every rank of the group waiting in a collective, and makes every
  /// later collective of the group, throw CommunicatorAborted with `reason`.
  /// Safe to call from any thread, more than once (the first reason stays).
  void abort(const std::string &reason) override;

  int index() const { return index_; }
  int world() const;

private:
  std::shared_ptr<ThreadGroup> group_;
  int index_;
};

} // namespace dprt

#endif // DPRT_COMMON_THREADCOMMUNICATOR_H
