//===- Element.h - Element types of the CPU kernels -------------*- C++ -*-===//
//
// Internal to runtime/cpu. Maps a DType to a C++ storage type, converts bf16
// to and from f32 (round to nearest even), dispatches a generic kernel body
// on the DType, and wraps the BLAS GEMM so that a kernel is written once for
// f64, f32 and bf16:
//   storage   compute   acc (buffers marked `acc` in kernels.h)
//   double    double    double
//   float     float     float
//   BF16      float     float
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CPU_ELEMENT_H
#define DPRT_CPU_ELEMENT_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace dprt::cpu {

/// A bf16 value: the upper half of an IEEE f32.
struct BF16 {
  uint16_t bits;
};
static_assert(sizeof(BF16) == 2, "bf16 is stored in two bytes");

inline float bf16ToFloat(BF16 v) {
  uint32_t bits = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// Round to nearest even; NaN stays a (quiet) NaN, overflow gives infinity.
inline BF16 floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f))
    return BF16{uint16_t((bits >> 16) | 0x40)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return BF16{uint16_t(bits >> 16)};
}

/// Round to nearest even straight from f64. Rounding to f32 first could round
/// twice: an f32 that lands exactly halfway between two bf16 values has lost
/// which side of the tie the f64 value was on, so such ties are resolved
/// against the f64 value.
inline BF16 doubleToBf16(double d) {
  float f = float(d);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0xffffu) == 0x8000u && std::isfinite(f) && double(f) != d) {
    // |d| above the tie rounds the magnitude up, below it truncates.
    if (std::fabs(d) > std::fabs(double(f)))
      bits += 0x10000u;
    return BF16{uint16_t(bits >> 16)};
  }
  return floatToBf16(f);
}

/// Compute type of a storage type.
template <class T> struct ComputeOfT { using type = T; };
template <> struct ComputeOfT<BF16> { using type = float; };
template <class T> using ComputeOf = typename ComputeOfT<T>::type;

/// The acc type (kernels.h) of a storage type equals its compute type.
template <class T> using AccOf = ComputeOf<T>;

inline double load(const double *p, int64_t i) { return p[i]; }
inline float load(const float *p, int64_t i) { return p[i]; }
inline float load(const BF16 *p, int64_t i) { return bf16ToFloat(p[i]); }

/// Stores a value computed in f64 (reductions) or in the compute type; the
/// value is rounded once, to the storage type.
inline void store(double *p, int64_t i, double v) { p[i] = v; }
inline void store(float *p, int64_t i, double v) { p[i] = float(v); }
inline void store(BF16 *p, int64_t i, double v) { p[i] = doubleToBf16(v); }
inline void store(BF16 *p, int64_t i, float v) { p[i] = floatToBf16(v); }

/// Calls fn(T{}) with T the storage type of `dt`.
template <class Fn> void dispatch(DType dt, Fn &&fn) {
  switch (dt) {
  case DType::F64:
    fn(double{});
    return;
  case DType::F32:
    fn(float{});
    return;
  case DType::BF16:
    fn(BF16{});
    return;
  }
  throw std::invalid_argument("dprt::cpu: unknown DType");
}

/// Calls fn(T{}) with T the acc type `acc` (F64 or F32).
template <class Fn> void dispatchAcc(DType acc, Fn &&fn) {
  switch (acc) {
  case DType::F64:
    fn(double{});
    return;
  case DType::F32:
    fn(float{});
    return;
  case DType::BF16:
    break;
  }
  throw std::invalid_argument("dprt::cpu: an acc buffer is f64 or f32");
}

/// Scratch memory reused across calls of one thread (each rank is one
/// thread), so that kernels do not allocate on every call. Slots let one
/// kernel hold several buffers at once.
constexpr int kScratchSlots = 12;
template <class C> C *scratch(int slot, int64_t n) {
  thread_local std::vector<C> buffers[kScratchSlots];
  std::vector<C> &b = buffers[slot];
  if (int64_t(b.size()) < n)
    b.resize(n);
  return b.data();
}

/// Operand in the compute type: the buffer itself for f64/f32, a converted
/// copy (in scratch slot `slot`) for bf16.
inline const double *asCompute(const double *p, int64_t, int) { return p; }
inline const float *asCompute(const float *p, int64_t, int) { return p; }
inline const float *asCompute(const BF16 *p, int64_t n, int slot) {
  float *c = scratch<float>(slot, n);
  for (int64_t i = 0; i < n; ++i)
    c[i] = bf16ToFloat(p[i]);
  return c;
}

/// Result buffer in the compute type: the output itself for f64/f32, a
/// scratch buffer (slot `slot`) for bf16, holding the output's current values
/// when `keep` (an accumulating kernel). `finishOutput` rounds the scratch
/// buffer into the bf16 output.
inline double *asComputeOutput(double *p, int64_t, int, bool) { return p; }
inline float *asComputeOutput(float *p, int64_t, int, bool) { return p; }
inline float *asComputeOutput(BF16 *p, int64_t n, int slot, bool keep) {
  float *c = scratch<float>(slot, n);
  if (keep)
    for (int64_t i = 0; i < n; ++i)
      c[i] = bf16ToFloat(p[i]);
  return c;
}
inline void finishOutput(double *, const double *, int64_t) {}
inline void finishOutput(float *, const float *, int64_t) {}
inline void finishOutput(BF16 *p, const float *c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    p[i] = floatToBf16(c[i]);
}

/// Row-major C = alpha op(A) op(B) + beta C.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 double alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, double beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, float(alpha), a, lda,
              b, ldb, float(beta), c, ldc);
}

/// Copies the lower triangle of the n x n matrix c onto its upper one.
template <class C> void mirrorLower(C *c, int64_t n, int64_t ldc) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j)
      c[i * ldc + j] = c[j * ldc + i];
}

/// Row-major C = alpha A A^T + beta C for A [n, k], C [n, n]; both triangles
/// of C are written (syrk updates the lower one, which is then mirrored, so
/// with beta != 0 C must be symmetric on entry).
inline void syrk(int64_t n, int64_t k, double alpha, const double *a,
                 int64_t lda, double beta, double *c, int64_t ldc) {
  cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, k, alpha, a, lda,
              beta, c, ldc);
  mirrorLower(c, n, ldc);
}
inline void syrk(int64_t n, int64_t k, double alpha, const float *a,
                 int64_t lda, double beta, float *c, int64_t ldc) {
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, n, k, float(alpha), a,
              lda, float(beta), c, ldc);
  mirrorLower(c, n, ldc);
}

/// The StepState the driver uploaded into the rank's arena.
inline const StepState &stepState(const Rank *rank) {
  return *reinterpret_cast<const StepState *>(rank->arena + rank->stateOffset);
}

/// The same StepState, for the one field the kernels write: the optimizer
/// updates' StepState::nonFiniteGradient.
inline StepState &mutableStepState(Rank *rank) {
  return *reinterpret_cast<StepState *>(rank->arena + rank->stateOffset);
}

} // namespace dprt::cpu

#endif // DPRT_CPU_ELEMENT_H
