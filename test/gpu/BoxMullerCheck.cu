//===- BoxMullerCheck.cu - The GPU's Box-Muller against libm's ------------===//

#include "BoxMullerCheck.h"

#include "Check.h"

#include "dprt/rng.h"

#include <cuda_runtime.h>

namespace dpc::gpucheck {

namespace {

enum Counter { kRadius, kSine, kCosine, kPairs, kFirst, kCounters };

__device__ void count(unsigned long long *counters, Counter c, uint32_t bits) {
  atomicAdd(&counters[c], 1ull);
  atomicCAS(&counters[kFirst], 0ull, 0x100000000ull | bits);
}

/// Every one of the 2^24 values of a word's top 24 bits (the bits the
/// uniforms keep), its low 8 bits (which they drop) varied too, as u
/// against sqrtf(-2 logf(u)) and as v against sincospif(2 v).
__global__ void everyUniform(unsigned long long *counters) {
  for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < (1u << 24);
       j += gridDim.x * blockDim.x) {
    const uint32_t bits = (j << 8) | (j * 0x9Du & 0xffu);
    const float u = dprt::uniformOpenClosedF32(bits);
    const float radius = sqrtf(-2.0f * logf(u));
    if (__float_as_uint(radius) !=
        __float_as_uint(dprt::sqrtNormalF32(dprt::minusTwoLogUniformF32(u))))
      count(counters, kRadius, bits);
    float sn, cs, sn2, cs2;
    sincospif(2.0f * dprt::uniformClosedOpenF32(bits), &sn, &cs);
    dprt::sinCosTwoPiUniformF32(bits, sn2, cs2);
    if (__float_as_uint(sn) != __float_as_uint(sn2))
      count(counters, kSine, bits);
    if (__float_as_uint(cs) != __float_as_uint(cs2))
      count(counters, kCosine, bits);
  }
}

/// Whole pairs: boxMullerPairF32 of the uniforms against
/// boxMullerPairBitsF32 of their bits, for `n` pairs from Philox blocks.
__global__ void pairs(unsigned long long *counters, uint64_t n) {
  const dprt::NoiseKey key = dprt::NoiseKey::fromSeed(0x5eed);
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t w[4];
    dprt::randomBlock(dprt::NoiseGenerator::Philox, key, 1, i,
                      dprt::kGradientNoiseF32Stream, w);
    float c, s, c2, s2;
    dprt::boxMullerPairF32(dprt::uniformOpenClosedF32(w[0]),
                           dprt::uniformClosedOpenF32(w[1]), c, s);
    dprt::boxMullerPairBitsF32(w[0], w[1], c2, s2);
    if (__float_as_uint(c) != __float_as_uint(c2) ||
        __float_as_uint(s) != __float_as_uint(s2))
      count(counters, kPairs, w[0]);
  }
}

} // namespace

BoxMullerMismatches boxMullerMismatches() {
  unsigned long long *counters = nullptr;
  cudaCheck(cudaMalloc(&counters, kCounters * sizeof(unsigned long long)),
            "cudaMalloc");
  cudaCheck(cudaMemset(counters, 0, kCounters * sizeof(unsigned long long)),
            "cudaMemset");
  constexpr uint64_t kPairsTried = uint64_t(1) << 26;
  everyUniform<<<1024, 256>>>(counters);
  pairs<<<1024, 256>>>(counters, kPairsTried);
  cudaCheck(cudaGetLastError(), "box-muller check launch");
  unsigned long long host[kCounters];
  cudaCheck(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost),
            "cudaMemcpy");
  cudaFree(counters);
  BoxMullerMismatches m;
  m.radius = host[kRadius];
  m.sine = host[kSine];
  m.cosine = host[kCosine];
  m.pairs = host[kPairs];
  m.pairsTried = kPairsTried;
  m.firstBits = uint32_t(host[kFirst]);
  return m;
}

} // namespace dpc::gpucheck
