//===- MxScaleByteCheck.cu - The branch-free MXFP8 scale byte -------------===//

#include "MxScaleByteCheck.h"

#include "cuda/Mxfp8.cuh"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace dpc::gpucheck {

namespace {

/// counters[0]: the amax bits below 0x7F800000 (every finite amax >= 0)
/// where mxScaleByte differs from mxBlockExponent + 127; counters[1]: one
/// of them, with bit 32 set.
__global__ void everyAmax(unsigned long long *counters) {
  for (uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;
       bits < 0x7F800000u; bits += gridDim.x * blockDim.x) {
    const float amax = __uint_as_float(bits);
    if (dprt::cuda::mxScaleByte(amax) !=
        uint32_t(dprt::cuda::mxBlockExponent(amax) + 127)) {
      atomicAdd(&counters[0], 1ull);
      atomicCAS(&counters[1], 0ull, 0x100000000ull | bits);
    }
  }
}

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(status));
}

} // namespace

MxScaleByteMismatches mxScaleByteMismatches() {
  unsigned long long *counters = nullptr;
  check(cudaMalloc(&counters, 2 * sizeof(unsigned long long)), "cudaMalloc");
  check(cudaMemset(counters, 0, 2 * sizeof(unsigned long long)), "cudaMemset");
  everyAmax<<<1024, 256>>>(counters);
  check(cudaGetLastError(), "mx scale byte check launch");
  unsigned long long host[2];
  check(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  cudaFree(counters);
  MxScaleByteMismatches m;
  m.differ = host[0];
  m.tried = 0x7F800000u;
  m.firstBits = uint32_t(host[1]);
  return m;
}

} // namespace dpc::gpucheck
