//===- backend.h - Services a backend gives the driver ----------*- C++ -*-===//
//
// Launch and communicators, memory, copies, synchronization and step
// capture, per backend. As with the kernels, each backend defines these in
// its own namespace and the driver, compiled once per backend, picks one.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_BACKEND_H
#define DPRT_BACKEND_H

#include "dprt/comm.h"
#include "dprt/rank.h"

namespace dprt {
namespace cpu {
#include "dprt/backend.inc"
} // namespace cpu
namespace cuda {
#include "dprt/backend.inc"
} // namespace cuda
#if defined(DPRT_BACKEND_CUDA)
using namespace cuda;
#else
using namespace cpu;
#endif
} // namespace dprt

#endif // DPRT_BACKEND_H
