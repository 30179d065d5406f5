//===- RngDeviceCompile.cu - dprt/rng.h compiles as device code -----------===//
//
// Compiled (not run) by the test `rng-compiles-under-nvcc` when nvcc is found:
// every entry point of rng.h must be usable inside a kernel.
//
//===----------------------------------------------------------------------===//

#include "dprt/rng.h"

using namespace dprt;

/// Adds sigma * C * N(0, 1) to the elements [first, first + n) of the flat
/// parameter buffer that this rank owns, as the runtime's noise kernel will.
__global__ void addNoise(float *shard, NoiseKey key, NoiseGenerator generator,
                         uint64_t step, uint64_t first, uint64_t n,
                         float noiseStd) {
  uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  shard[i] += noiseStd * gradientNoiseF32(generator, key, step, first + i);
  float z[4];
  gradientNoiseQuadF32(generator, key, step, first + i, z);
  shard[i] += 0.0f * z[3];
}

__global__ void drawDouble(double *out, NoiseKey key, uint64_t step,
                           uint64_t n) {
  uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  if (i >= n)
    return;
  out[i] = gaussianF64(NoiseGenerator::ChaCha20, key, step, i,
                       kParameterInitStream) +
           uniformF64(NoiseGenerator::Philox, key, step, i, kSamplingStream) +
           static_cast<double>(
               randomBits64(NoiseGenerator::Philox, key, step, i, 3) >> 40);
  if (i == 0)
    out[0] += NoiseKey::fromSeed(step).chachaKey[0];
}
