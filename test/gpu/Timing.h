//===- Timing.h - What dpc-gpu-check's timing tables share ------*- C++ -*-===//
//
// The 1.1B Llama model's sizes, device buffers of random values and the
// timing of one launch (Timings.cpp says how kernels are timed).
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_TIMING_H
#define DPC_TEST_GPU_TIMING_H

#include "Cases.h"
#include "DeviceRandom.h"

#include <functional>
#include <string>

namespace dpc::gpucheck {

constexpr int64_t kB = 8, kT = 1024, kRows = kB * kT, kD = 2048, kH = 32,
                  kKV = 8, kHd = 64, kFF = 8192, kVocab = 32000;

/// Device memory filled with random values (uniform in [lo, hi)).
class DeviceBuffer {
public:
  DeviceBuffer(DType dt, int64_t n, uint64_t seed, double lo = -1.0,
               double hi = 1.0)
      : bytes_(size_t(dprt::storageBytes(dt, n))) {
    cudaCheck(cudaMalloc(&p_, bytes_ ? bytes_ : 1), "cudaMalloc(timing)");
    // MXFP8: random bytes (elements and scales) suffice for timings.
    if (dt == DType::MXFP8)
      deviceUniform(p_, DType::BF16, int64_t(bytes_ / 2), seed, lo, hi);
    else
      deviceUniform(p_, dt, n, seed, lo, hi);
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void *p() const { return p_; }
  template <class T> T *p() const { return static_cast<T *>(p_); }

private:
  size_t bytes_;
  void *p_ = nullptr;
};

class DeviceTokens {
public:
  DeviceTokens(int64_t n, uint64_t seed, int32_t vocab) {
    cudaCheck(cudaMalloc(&p_, size_t(n) * sizeof(int32_t)),
              "cudaMalloc(tokens)");
    deviceTokens(p_, n, seed, vocab);
  }
  ~DeviceTokens() { cudaFree(p_); }
  DeviceTokens(const DeviceTokens &) = delete;
  DeviceTokens &operator=(const DeviceTokens &) = delete;
  int32_t *p() const { return p_; }

private:
  int32_t *p_ = nullptr;
};

/// Times `launch` and adds a row; `work` is FLOPs when `flops`, else bytes.
void timeKernel(Context &ctx, const std::string &kernel, DType dt,
                const std::string &shape, double work, bool flops,
                const std::function<void()> &launch);

/// "rows x in -> out", a product's shape.
std::string mk(int64_t rows, int64_t in, int64_t out);

/// Attention's rows of the timing table (AttentionTimings.cpp).
void attentionTimings(Context &ctx, uint64_t &seed);

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_TIMING_H
