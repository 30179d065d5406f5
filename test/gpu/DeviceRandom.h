//===- DeviceRandom.h - Random device buffers for timing --------*- C++ -*-===//
//
// Fills device memory with pseudo-random values without a host copy: the
// timing cases of dpc-gpu-check use buffers of hundreds of megabytes, and
// timing must not run on zeros.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_DEVICERANDOM_H
#define DPC_TEST_GPU_DEVICERANDOM_H

#include "dprt/types.h"

#include <cstdint>

namespace dpc::gpucheck {

/// p[i] = uniform in [lo, hi), as f32 or bf16, from a hash of (seed, i).
void deviceUniform(void *p, dprt::DType dt, int64_t n, uint64_t seed, double lo,
                   double hi);

/// p[i] = a token in [0, vocab) from a hash of (seed, i).
void deviceTokens(int32_t *p, int64_t n, uint64_t seed, int32_t vocab);

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_DEVICERANDOM_H
