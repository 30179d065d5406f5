//===- KernelTestSupport.h - Buffers, seeds and tolerances ------*- C++ -*-===//
//
// What every kernel test uses: typed buffers that start poisoned with NaN
// (an element a kernel forgets to write stays NaN and fails the
// comparison), random data with a fresh logged seed per case, the rounding
// to bf16 done independently of the runtime, and the per-dtype tolerances:
//
//   F64   1e-10  relative error in norm, ||out - ref|| / ||ref||.
//   F32   1e-5   f32 carries 2^-24 ~ 6e-8 per operation; sums of up to a
//                few hundred terms stay far below 1e-5.
//   BF16  1e-2   inputs are exact bf16 values (the reference sees the same
//                values), each output is computed in f32 or f64 and rounded
//                once to bf16, which costs at most 2^-9 ~ 2e-3 relative per
//                element; 1e-2 leaves room for the f32 accumulation
//                without letting a 1% error through unnoticed for long.
// Per-sample norms and clip factors are acc (f32) results even for bf16
// operands and are checked at the F32 tolerance for both.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_KERNEL_TEST_SUPPORT_H
#define DPC_TEST_KERNEL_TEST_SUPPORT_H

#include "dprt/kernels.h"
#include "reference/Layers.h"
#include "reference/Models.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace dpc::test {

using reference::Vec;
using Rng = std::mt19937_64;

inline const std::vector<dprt::DType> &allDTypes() {
  static const std::vector<dprt::DType> all = {
      dprt::DType::F64, dprt::DType::F32, dprt::DType::BF16};
  return all;
}

/// Relative error allowed for a kernel's output in compute type `dt`.
double tolerance(dprt::DType dt);
/// Relative error allowed for acc results (norms, clip factors, acc
/// gradients) of a model computing in `dt`: 1e-10 for f64, 1e-5 otherwise.
double accTolerance(dprt::DType dt);
/// Relative error allowed for acc results stored rounded once in the
/// compute type `dt` (materialized per-sample weight gradients): one
/// rounding to bf16 (8-bit significand) is at most 2^-8 relative per
/// element, so 2^-8 plus the acc error for bf16, accTolerance otherwise.
double storedTolerance(dprt::DType dt);

/// The nearest bf16 value to d (ties to even), found by comparing the
/// candidates around it in f64; independent of the runtime's bit trick.
uint16_t bf16Bits(double d);
double bf16Value(uint16_t bits);

/// Elements of one DType, stored as the runtime stores them.
class Buffer {
public:
  /// n elements of NaN. MXFP8 buffers hold rows of `row` elements (0: one
  /// row of n), each its elements then its scales (types.h).
  Buffer(dprt::DType dt, int64_t n, int64_t row = 0);
  /// The values of v, rounded to dt (MXFP8: block by block).
  Buffer(dprt::DType dt, const Vec &v, int64_t row = 0);

  void *data() { return bytes_.data(); }
  const void *data() const { return bytes_.data(); }
  int64_t size() const { return n_; }
  dprt::DType dtype() const { return dt_; }
  double get(int64_t i) const;
  void set(int64_t i, double v);
  Vec values() const;
  void poison();

private:
  /// MXFP8: the byte of element i and of its block's scale.
  unsigned char &elementByte(int64_t i);
  unsigned char &scaleByte(int64_t i);
  unsigned char elementByte(int64_t i) const;
  unsigned char scaleByte(int64_t i) const;

  dprt::DType dt_;
  int64_t n_, row_;
  std::vector<unsigned char> bytes_;
};

/// MXFP8 (types.h) by an independent route, for the tests' buffers: e4m3
/// values from their definition, rounding by a search over every code.
namespace mx {
double e4m3Value(uint8_t code);
/// Nearest, ties to the even code, saturating at 448; NaN gives 0x7F.
uint8_t e4m3Code(double v);
/// The smallest E in [-126, 127] with amax <= 448 * 2^E.
int blockExponent(double amax);
} // namespace mx

/// v rounded to dt (what a kernel reads after v is stored as dt).
Vec rounded(dprt::DType dt, const Vec &v);

Vec uniform(Rng &rng, int64_t n, double lo = -1.0, double hi = 1.0);
Vec normal(Rng &rng, int64_t n, double stddev = 1.0);
int64_t uniformInt(Rng &rng, int64_t lo, int64_t hi); ///< in [lo, hi]
double uniformScalar(Rng &rng, double lo, double hi); ///< in [lo, hi)

/// n token ids in [0, vocab).
reference::Tokens randomTokens(Rng &rng, int64_t n, int64_t vocab);
/// n targets in [0, classes), each one `ignoreIndex` instead with probability
/// 1 / ignoreOneIn (never when ignoreOneIn is 0).
reference::Tokens randomTargets(Rng &rng, int64_t n, int64_t classes,
                                int32_t ignoreIndex, int64_t ignoreOneIn);

/// An output buffer of n elements: random values in [lo, hi) for a kernel
/// that accumulates into it, NaN for one that writes it.
Buffer outputBuffer(Rng &rng, dprt::DType dt, int64_t n, bool accumulate,
                    double lo = -1.0, double hi = 1.0);

/// ||g_b||^2 for every sample b.
Vec squaredNorms(const reference::PerSample &g);

/// Random parameters of a model fresh from reference/Models.h: N(0, scale^2)
/// for weights, 1 + N(0, 0.1^2) for the normalization gammas (which start at
/// one).
void randomizeParams(reference::Model &m, Rng &rng, double scale);
/// A batch of examples/mlp.mlir's inputs: features ~ N(0, 1) and labels.
reference::Batch mlpBatch(Rng &rng, int64_t size, int64_t features,
                          int64_t classes);
/// A batch of examples/tinylm.mlir's inputs: tokens, and targets of which
/// one in five is ignored (-1).
reference::Batch lmBatch(Rng &rng, int64_t size,
                         const reference::TinyLmShape &s);

/// ||out - ref|| / ||scale|| (||out - ref|| when scale is 0); infinity when
/// any element of out is NaN or infinite. `scale` is ref unless a result is
/// formed by cancellation, where it is the size of the cancelling terms.
double relativeError(const Vec &out, const Vec &ref, const Vec &scale);

/// Records the error in the per-dtype summary printed at the end of the run
/// and returns a gtest assertion result against `tol`.
::testing::AssertionResult closeTo(const Vec &out, const Vec &ref, double tol,
                                   dprt::DType dt, const Vec *scale = nullptr);

#define EXPECT_CLOSE(out, ref, tol, dt)                                        \
  EXPECT_TRUE(::dpc::test::closeTo((out), (ref), (tol), (dt))) << #out

/// EXPECT_CLOSE with the error relative to ||scale|| instead of ||ref||.
#define EXPECT_CLOSE_TO_SCALE(out, ref, scale, tol, dt)                        \
  EXPECT_TRUE(::dpc::test::closeTo((out), (ref), (tol), (dt), &(scale))) << #out

/// sum_t |dy * xhat| per sample and feature ([batch, dim]), xhat = x / rms
/// (or (x - mean) / std with `centre`): the size of the terms of a norm
/// layer's per-sample gamma gradient. The kernels form xhat from rstd as
/// stored in the acc type (f32), an error of an ulp per term, and the sum
/// over tokens can cancel far below the terms, so the error of that
/// gradient is measured against this.
Vec gammaGradTermSize(const Vec &x, const Vec &dy, int64_t batch,
                      int64_t tokens, int64_t dim, double eps, bool centre);

/// Runs fn(rng) for `cases` random cases. Each case has its own seed, drawn
/// fresh per run (or derived from DPC_TEST_SEED when set, to reproduce a
/// failure), which gtest prints with any failure of the case.
void forEachCase(int cases, const std::function<void(Rng &)> &fn);

/// forEachCase for every dtype; fn(rng, dt).
void forEachCaseAndDType(int cases,
                         const std::function<void(Rng &, dprt::DType)> &fn);

/// A rank whose arena holds a StepState, as the driver sets one up.
class TestRank {
public:
  TestRank();
  dprt::Rank *get() { return &rank_; }
  dprt::StepState &state();

private:
  std::vector<char> arena_;
  dprt::Rank rank_;
};

} // namespace dpc::test

#endif // DPC_TEST_KERNEL_TEST_SUPPORT_H
