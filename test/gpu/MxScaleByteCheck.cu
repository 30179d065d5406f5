//===- MxScaleByteCheck.cu - The branch-free MXFP8 scale byte -------------===//

#include "MxScaleByteCheck.h"

#include "Check.h"

#include "cuda/Mxfp8.cuh"

#include <cuda_runtime.h>

namespace dpc::gpucheck {

namespace {

/// The rule's scale byte E + 127 (types.h; runtime/cpu/Mxfp8.h's
/// mxBlockExponent) for a finite amax >= 0 = f 2^k, f in [0.5, 1): E = k -
/// 9 where f <= 0.875, else k - 8, clamped to [-126, 127]; -126 for a
/// subnormal or zero amax.
__device__ uint32_t ruleScaleByte(float amax) {
  const uint32_t bits = __float_as_uint(amax);
  const int biased = int(bits >> 23) & 0xFF;
  if (biased == 0)
    return 1;
  const int k = biased - 126;
  const int e = (bits & 0x7FFFFFu) <= 0x600000u ? k - 9 : k - 8;
  return uint32_t((e < -126 ? -126 : e > 127 ? 127 : e) + 127);
}

/// counters[0]: the amax bits below 0x7F800000 (every finite amax >= 0)
/// where mxScaleByte differs from the rule; counters[1]: one of them, with
/// bit 32 set.
__global__ void everyAmax(unsigned long long *counters) {
  for (uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;
       bits < 0x7F800000u; bits += gridDim.x * blockDim.x) {
    const float amax = __uint_as_float(bits);
    if (dprt::cuda::mxScaleByte(amax) != ruleScaleByte(amax)) {
      atomicAdd(&counters[0], 1ull);
      atomicCAS(&counters[1], 0ull, 0x100000000ull | bits);
    }
  }
}

} // namespace

MxScaleByteMismatches mxScaleByteMismatches() {
  unsigned long long *counters = nullptr;
  cudaCheck(cudaMalloc(&counters, 2 * sizeof(unsigned long long)),
            "cudaMalloc");
  cudaCheck(cudaMemset(counters, 0, 2 * sizeof(unsigned long long)),
            "cudaMemset");
  everyAmax<<<1024, 256>>>(counters);
  cudaCheck(cudaGetLastError(), "mx scale byte check launch");
  unsigned long long host[2];
  cudaCheck(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost),
            "cudaMemcpy");
  cudaFree(counters);
  MxScaleByteMismatches m;
  m.differ = host[0];
  m.tried = 0x7F800000u;
  m.firstBits = uint32_t(host[1]);
  return m;
}

} // namespace dpc::gpucheck
