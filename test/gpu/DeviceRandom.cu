//===- DeviceRandom.cu - Random device buffers for timing -----------------===//

#include "DeviceRandom.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace dpc::gpucheck {

namespace {

__device__ uint64_t splitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void uniformKernel(void *p, bool bf16, int64_t n, uint64_t seed,
                              float lo, float hi) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t z = splitMix64(seed ^ splitMix64(uint64_t(i)));
    float u = float(z >> 40) * (1.0f / 16777216.0f);
    float v = lo + (hi - lo) * u;
    if (bf16)
      static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    else
      static_cast<float *>(p)[i] = v;
  }
}

__global__ void tokensKernel(int32_t *p, int64_t n, uint64_t seed,
                             int32_t vocab) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] =
        int32_t(splitMix64(seed ^ splitMix64(uint64_t(i))) % uint64_t(vocab));
}

void check(const char *what) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess)
    status = cudaDeviceSynchronize();
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " +
                             cudaGetErrorString(status));
}

} // namespace

void deviceUniform(void *p, dprt::DType dt, int64_t n, uint64_t seed, double lo,
                   double hi) {
  if (dt == dprt::DType::F64)
    throw std::runtime_error("deviceUniform: f64");
  if (n <= 0)
    return;
  uniformKernel<<<1024, 256>>>(p, dt == dprt::DType::BF16, n, seed, float(lo),
                               float(hi));
  check("deviceUniform");
}

void deviceTokens(int32_t *p, int64_t n, uint64_t seed, int32_t vocab) {
  if (n <= 0)
    return;
  tokensKernel<<<1024, 256>>>(p, n, seed, vocab);
  check("deviceTokens");
}

} // namespace dpc::gpucheck
