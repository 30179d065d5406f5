//===- Check.h - Shared pieces of dpc-gpu-check -----------------*- C++ -*-===//
//
// Host buffers mirrored on the device, bf16 conversion on the host, the
// result table and the comparison of a GPU output with the CPU backend's.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_CHECK_H
#define DPC_TEST_GPU_CHECK_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpc::gpucheck {

using dprt::DType;

/// Throws with the call's name unless `status` is cudaSuccess.
void cudaCheck(cudaError_t status, const char *call);

inline float bf16ToFloat(uint16_t v) {
  uint32_t bits = uint32_t(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round to nearest even, as the backends do.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// `n` elements of `dt` in host memory (what the CPU backend reads and
/// writes) and on the device (what the CUDA backend reads and writes). The
/// device pointer can sit `misalign` elements past an aligned allocation, to
/// exercise the unaligned paths.
class Buffer {
public:
  /// MXFP8 buffers hold rows of `row` elements (0: one row of n), each its
  /// elements then its scales (types.h).
  Buffer(DType dt, int64_t n, int64_t misalign = 0, int64_t row = 0);
  ~Buffer();
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  DType type() const { return dt_; }
  int64_t size() const { return n_; }
  void *h() { return host_.data(); }
  void *d() { return dev_; }

  double get(int64_t i) const;
  /// Rounds to the element type.
  void set(int64_t i, double v);
  /// Normal(0, scale^2) values on both sides (MXFP8: quantized a block at
  /// a time, as linear_per_sample_grad does).
  void randn(std::mt19937_64 &rng, double scale = 1.0);
  /// Uniform values in [lo, hi) on both sides.
  void uniform(std::mt19937_64 &rng, double lo, double hi);
  /// All bits set (NaN in f32 and bf16) on both sides, for outputs that
  /// must be written everywhere.
  void poison();
  /// Host to device.
  void upload();
  /// Values from `draw` on both sides.
  void fill(const std::function<double()> &draw);
  /// The device's values.
  std::vector<double> download() const;
  std::vector<double> hostValues() const;

private:
  DType dt_;
  int64_t n_, row_;
  std::vector<uint8_t> host_;
  void *base_ = nullptr;
  void *dev_ = nullptr;
};

/// int32 tokens or targets on both sides.
class IntBuffer {
public:
  explicit IntBuffer(int64_t n);
  ~IntBuffer();
  IntBuffer(const IntBuffer &) = delete;
  IntBuffer &operator=(const IntBuffer &) = delete;
  int32_t *h() { return host_.data(); }
  int32_t *d() { return dev_; }
  int32_t &operator[](int64_t i) { return host_[size_t(i)]; }
  void upload();

private:
  std::vector<int32_t> host_;
  int32_t *dev_ = nullptr;
};

/// Sets an environment variable for the life of the object.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    if (value)
      setenv(name, value, 1);
    else
      name_ = nullptr;
  }
  ~ScopedEnv() {
    if (name_)
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

private:
  const char *name_;
};

/// One line of the result table.
struct Row {
  std::string kernel, dtype, shape;
  uint64_t seed = 0;
  double maxAbs = 0, rel = 0, tol = 0;
  bool pass = false;
  std::string note;
};

/// One line of the timing table.
struct Timing {
  std::string kernel, dtype, shape;
  double microseconds = 0;
  double rate = 0; ///< TFLOP/s or GB/s
  std::string unit;
};

/// Rows from several threads.
class Report {
public:
  void add(const Row &row);
  void addTiming(const Timing &t);
  /// Prints both tables; returns the number of failed rows.
  int print();

private:
  std::mutex mutex_;
  std::vector<Row> rows_;
  std::vector<Timing> timings_;
};

/// Compares a GPU output with the CPU's: max |g - c| and ||g - c|| / ||c||;
/// a NaN or infinity where the CPU has a finite value fails; NaN == NaN.
/// "call N (warm-up)", "(capture)" or "(replay)": what runCaptured does on
/// its Nth call of a step function (docs/cuda-backend.md).
std::string capturedCallLabel(int call);

Row compareValues(const std::vector<double> &gpu,
                  const std::vector<double> &cpu, double tol);

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_CHECK_H
