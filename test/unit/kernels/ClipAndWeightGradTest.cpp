//===- ClipAndWeightGradTest.cpp - Clip factors and clipped gradients -----===//
//
// clip_factors against the formula of kernels.h; the clipped weight-gradient
// kernels against sum_b c_b grad_b with grad_b formed by the reference.
// Sample 0 always has c = 0 and NaN in its data: a masked sample must add
// nothing, whatever its buffers hold.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <cmath>
#include <limits>
#include <stdexcept>

using namespace dpc::test;
using dprt::accOf;
using dprt::ClipMode;
using dprt::DType;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Clip factors in [0, 1.5] with c[0] = 0, rounded to the acc type.
Vec randomClipFactors(Rng &rng, DType dt, int64_t batch) {
  Vec c = uniform(rng, batch, 0, 1.5);
  c[0] = 0;
  for (int64_t b = 1; b < batch; ++b)
    if (uniformInt(rng, 0, 4) == 0)
      c[b] = uniformInt(rng, 0, 1); // masked or unclipped
  return rounded(accOf(dt), c);
}

/// Sets sample 0's elements (the first `elements`) of buf to NaN.
void poisonSample0(Buffer &buf, int64_t elements) {
  for (int64_t i = 0; i < elements; ++i)
    buf.set(i, kNaN);
}

/// sum_b c_b g_b over the samples b > 0 (sample 0's data is NaN and its
/// clip factor 0).
Vec clippedSum(ref::PerSample g, const Vec &c) {
  std::fill(g[0].begin(), g[0].end(), 0.0);
  return ref::weightedSum(g, c);
}

TEST(ClipFactors, MatchFormulaForEveryModeWithMaskAndRelErr) {
  for (ClipMode mode :
       {ClipMode::Flat, ClipMode::PerLayer, ClipMode::Automatic}) {
    SCOPED_TRACE("mode " + std::to_string(int(mode)));
    forEachCaseAndDType(12, [&](Rng &rng, DType dt) {
      int64_t batch = uniformInt(rng, 1, 40);
      // The run's C comes from the StepState; the call gives the factor's
      // share of it (1 / sqrt(L) for per-layer clipping of L parameters).
      double clipNorm = uniformScalar(rng, 0.1, 5);
      double share = mode == ClipMode::PerLayer
                         ? 1 / std::sqrt(double(uniformInt(rng, 1, 9)))
                         : 1.0;
      double maxNorm = clipNorm * share;
      double gamma = 0.01;
      double relErr = uniformInt(rng, 0, 1) ? 0.0 : 1e-3;
      // Norms from far below to far above the bound (log-uniform).
      Vec n2v(batch), maskv(batch);
      for (int64_t b = 0; b < batch; ++b) {
        double n = maxNorm * std::pow(10.0, uniformScalar(rng, -4, 4));
        n2v[b] = n * n;
        maskv[b] = uniformInt(rng, 0, 3) == 0 ? 0.0 : 1.0;
      }
      DType acc = accOf(dt);
      Buffer n2(acc, n2v), mask(acc, maskv), c(acc, batch);
      TestRank r;
      r.state().clipNorm = clipNorm;
      cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), batch,
                        1, mode, share, gamma, relErr);
      Vec want(batch);
      for (int64_t b = 0; b < batch; ++b)
        want[b] = maskv[b] *
                  ref::clipFactor(mode, std::sqrt(n2.get(b)) * (1 + relErr),
                                  maxNorm, gamma);
      EXPECT_CLOSE(c.values(), want, accTolerance(dt), dt);
      // Storing c in f32 rounds toward zero: never above the f64 factor.
      for (int64_t b = 0; b < batch; ++b)
        EXPECT_LE(c.get(b), want[b]) << "sample " << b;
    });
  }
}

TEST(ClipFactors, NaNNormOrZeroMaskGivesZero) {
  // min(1, C / NaN) must not let a sample through unclipped.
  for (DType acc : {DType::F64, DType::F32}) {
    Buffer n2(acc, Vec{kNaN, 4.0, kNaN, 0.0}), mask(acc, Vec{1, 0, 0, 1}),
        c(acc, 4);
    TestRank r;
    cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), 4, 1,
                      ClipMode::Flat, 1.0, 0.01, 0.0);
    EXPECT_EQ(c.values(), (Vec{0, 0, 0, 1}));
  }
}

TEST(ClipFactors, FollowTheRunsBoundFromTheStepState) {
  // The same call clips to whatever C the driver wrote: a norm of 3 is
  // scaled to C = 1 and C = 2 but left whole at C = 4, and a per-layer share
  // of 1/2 halves each bound.
  for (DType acc : {DType::F64, DType::F32}) {
    Buffer n2(acc, Vec{9.0}), mask(acc, Vec{1.0}), c(acc, 1);
    TestRank r;
    for (double clipNorm : {1.0, 2.0, 4.0})
      for (double share : {1.0, 0.5}) {
        r.state().clipNorm = clipNorm;
        cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), 1, 1,
                          ClipMode::Flat, share, 0.01, 0.0);
        const double bound = clipNorm * share;
        EXPECT_NEAR(c.get(0), std::min(1.0, bound / (3.0 + 1e-6)), 1e-7)
            << "C = " << clipNorm << ", share " << share;
      }
  }
}

TEST(ClipFactors, UserLevelSlotsTakeTheirUsersFactor) {
  // unitRecords = 3: slot b takes the factor of user b / 3 from n2[b / 3]
  // (only n2[0, 2) is read; the NaNs after it would zero a slot that read
  // them), times its own mask.
  for (DType acc : {DType::F64, DType::F32}) {
    Buffer n2(acc, Vec{9.0, 0.25, kNaN, kNaN, kNaN, kNaN}),
        mask(acc, Vec{1, 1, 0, 1, 0, 1}), c(acc, 6);
    TestRank r;
    cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), 6, 3,
                      ClipMode::Flat, 1.0, 0.01, 0.0);
    const double first = 1.0 / (3.0 + 1e-6);
    const Vec want{first, first, 0, 1, 0, 1};
    for (int64_t b = 0; b < 6; ++b)
      EXPECT_NEAR(c.get(b), want[b], 1e-7) << "slot " << b;
    EXPECT_THROW(cpu::clip_factors(r.get(), acc, n2.data(), mask.data(),
                                   c.data(), 5, 3, ClipMode::Flat, 1.0, 0.01,
                                   0.0),
                 std::invalid_argument);
  }
}

/// linear_weight_grad on random data (sample 0 poisoned with NaN: its
/// clip factor may be 0) against the f64 clipped sum of per-sample
/// gradients, added to what dW held or (accumulate = false) in place of a
/// dW of NaN.
void checkLinearWeightGrad(Rng &rng, DType dt, int64_t batch, int64_t tokens,
                           int64_t in, int64_t out, bool accumulate = true) {
  int64_t rows = batch * tokens;
  Buffer x(dt, uniform(rng, rows * in)), dy(dt, uniform(rng, rows * out));
  Vec xv = x.values(), dyv = dy.values();
  poisonSample0(x, tokens * in);
  poisonSample0(dy, tokens * out);
  Vec cv = randomClipFactors(rng, dt, batch);
  Buffer c(accOf(dt), cv),
      dw(accOf(dt),
         accumulate ? uniform(rng, out * in) : Vec(out * in, std::nan("")));
  Vec init = dw.values();
  std::vector<unsigned char> workspace(
      dprt::weightGradWorkspaceBytes(dt, batch, tokens, out));
  TestRank r;
  cpu::linear_weight_grad(r.get(), dt, x.data(), dy.data(), c.data(), dw.data(),
                          batch, tokens, in, out, workspace.data(), accumulate);
  Vec want = clippedSum(
      ref::linearWeightGradPerSample(xv, dyv, batch, tokens, in, out), cv);
  EXPECT_CLOSE(dw.values(), accumulate ? ref::addForward(init, want) : want,
               accTolerance(dt), dt);
}

TEST(LinearWeightGrad, EqualsClippedSumOfPerSampleGradients) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    checkLinearWeightGrad(rng, dt, uniformInt(rng, 1, 6),
                          uniformInt(rng, 1, 10), uniformInt(rng, 1, 40),
                          uniformInt(rng, 1, 40));
  });
}

// accumulate = false (a gradient only this call writes, in a program of one
// micro-step a step): the sum replaces dW, NaN there included.
TEST(LinearWeightGrad, OverwritesWhatTheGradientHeld) {
  forEachCaseAndDType(8, [](Rng &rng, DType dt) {
    checkLinearWeightGrad(rng, dt, uniformInt(rng, 1, 6),
                          uniformInt(rng, 1, 10), uniformInt(rng, 1, 40),
                          uniformInt(rng, 1, 40), false);
  });
}

// DP off's form (c = nullptr, no workspace): every sample with weight 1,
// against the f64 sum of the per-sample gradients.
TEST(LinearWeightGrad, UnweightedIsThePlainSum) {
  forEachCaseAndDType(8, [](Rng &rng, DType dt) {
    const int64_t batch = uniformInt(rng, 1, 6),
                  tokens = uniformInt(rng, 1, 10), in = uniformInt(rng, 1, 40),
                  out = uniformInt(rng, 1, 40);
    const int64_t rows = batch * tokens;
    Buffer x(dt, uniform(rng, rows * in)), dy(dt, uniform(rng, rows * out));
    // Every other case overwrites a dW of NaN (DP off's gradients in a
    // program of one micro-step a step).
    const bool accumulate = rng() % 2 == 0;
    Buffer dw(accOf(dt), accumulate ? uniform(rng, out * in)
                                    : Vec(out * in, std::nan("")));
    Vec init = dw.values();
    TestRank r;
    cpu::linear_weight_grad(r.get(), dt, x.data(), dy.data(), nullptr,
                            dw.data(), batch, tokens, in, out, nullptr,
                            accumulate);
    Vec want =
        ref::weightedSum(ref::linearWeightGradPerSample(x.values(), dy.values(),
                                                        batch, tokens, in, out),
                         Vec(batch, 1.0));
    EXPECT_CLOSE(dw.values(), accumulate ? ref::addForward(init, want) : want,
                 accTolerance(dt), dt);
  });
}

TEST(LinearWeightGrad, ChunksOfSamplesForWideGradients) {
  // A sample's gradient of 64 MiB: two samples a chunk (the workspace holds
  // two), so three samples take two products.
  forEachCase(1, [](Rng &rng) {
    for (auto [dt, tokens] : {std::pair{DType::F64, int64_t(256)},
                              std::pair{DType::F32, int64_t(512)}}) {
      const int64_t batch = 3, in = 3, out = 32768;
      ASSERT_EQ(dprt::weightGradChunkSamples(dt, batch, tokens, out), 2);
      ASSERT_EQ(dprt::weightGradWorkspaceBytes(dt, batch, tokens, out),
                2 * tokens * out * int64_t(dprt::sizeOf(dt)));
      checkLinearWeightGrad(rng, dt, batch, tokens, in, out);
    }
  });
}

TEST(MaterializedWeightGrad, EqualsClippedSumOfPerSampleGradients) {
  // The materialized method's clipped gradient: the per-sample gradients
  // formed by linear_per_sample_grad, then rows_weighted_sum over them.
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 6), tokens = uniformInt(rng, 1, 10),
            in = uniformInt(rng, 1, 30), out = uniformInt(rng, 1, 30);
    int64_t rows = batch * tokens;
    DType acc = accOf(dt);
    Buffer x(dt, uniform(rng, rows * in)), dy(dt, uniform(rng, rows * out));
    ref::PerSample perSample = ref::linearWeightGradPerSample(
        x.values(), dy.values(), batch, tokens, in, out);
    poisonSample0(x, tokens * in);
    Vec cv = randomClipFactors(rng, dt, batch);
    Buffer c(acc, cv), g(dt, batch * out * in), dw(acc, uniform(rng, out * in));
    Vec init = dw.values();
    TestRank r;
    cpu::linear_per_sample_grad(r.get(), dt, dt, x.data(), dy.data(), g.data(),
                                nullptr, batch, tokens, in, out);
    cpu::rows_weighted_sum(r.get(), dt, g.data(), c.data(), dw.data(), batch,
                           out * in);
    // The clipped sum of the stored slices, which are within a rounding of
    // the f64 per-sample gradients.
    ref::PerSample stored(batch);
    Vec gv = g.values();
    for (int64_t b = 0; b < batch; ++b)
      stored[b].assign(gv.begin() + b * out * in,
                       gv.begin() + (b + 1) * out * in);
    EXPECT_CLOSE(dw.values(), ref::addForward(init, clippedSum(stored, cv)),
                 accTolerance(dt), dt);
    // Relative to the size of the terms: the sum can cancel, the rounding
    // of each slice does not.
    ref::PerSample sizes = perSample;
    for (Vec &v : sizes)
      for (double &e : v)
        e = std::fabs(e);
    Vec scale = clippedSum(sizes, cv);
    EXPECT_CLOSE_TO_SCALE(dw.values(),
                          ref::addForward(init, clippedSum(perSample, cv)),
                          scale, storedTolerance(dt), dt);
  });
}

TEST(BiasGrad, EqualsClippedSumOfPerSampleGradients) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 6), tokens = uniformInt(rng, 1, 10),
            out = uniformInt(rng, 1, 40);
    Buffer dy(dt, uniform(rng, batch * tokens * out));
    Vec dyv = dy.values();
    poisonSample0(dy, tokens * out);
    Vec cv = randomClipFactors(rng, dt, batch);
    Buffer c(accOf(dt), cv), db(accOf(dt), uniform(rng, out));
    Vec init = db.values();
    TestRank r;
    cpu::bias_grad(r.get(), dt, dy.data(), c.data(), db.data(), batch, tokens,
                   out);
    Vec want = clippedSum(ref::biasGradPerSample(dyv, batch, tokens, out), cv);
    EXPECT_CLOSE(db.values(), ref::addForward(init, want), accTolerance(dt),
                 dt);
  });
}

TEST(EmbeddingGrad, EqualsClippedSumOfPerSampleGradientsWithRepeats) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 6), tokens = uniformInt(rng, 1, 16),
            vocab = uniformInt(rng, 1, 8), dim = uniformInt(rng, 1, 24);
    ref::Tokens tok = randomTokens(rng, batch * tokens, vocab);
    Buffer dy(dt, uniform(rng, batch * tokens * dim));
    Vec dyv = dy.values();
    poisonSample0(dy, tokens * dim);
    Vec cv = randomClipFactors(rng, dt, batch);
    Buffer c(accOf(dt), cv), dtable(accOf(dt), uniform(rng, vocab * dim));
    Vec init = dtable.values();
    TestRank r;
    cpu::embedding_grad(r.get(), dt, tok.data(), dy.data(), c.data(),
                        dtable.data(), batch, tokens, vocab, dim);
    Vec want = clippedSum(
        ref::embeddingGradPerSample(tok, dyv, batch, tokens, vocab, dim), cv);
    EXPECT_CLOSE(dtable.values(), ref::addForward(init, want), accTolerance(dt),
                 dt);
  });
}

TEST(RowsWeightedSum, EqualsClippedSumOfMaterializedGradients) {
  // Rows in the acc type (normalization gradients) and in the compute type
  // (materialized weight gradients); c and out in the acc type.
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 12), dim = uniformInt(rng, 1, 64);
    DType acc = accOf(dt);
    DType rows = uniformInt(rng, 0, 1) ? dt : acc;
    Buffer g(rows, uniform(rng, batch * dim));
    ref::PerSample perSample(batch);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < dim; ++j)
        perSample[b].push_back(g.get(b * dim + j));
    poisonSample0(g, dim);
    Vec cv = randomClipFactors(rng, dt, batch);
    Buffer c(acc, cv), out(acc, uniform(rng, dim));
    Vec init = out.values();
    TestRank r;
    cpu::rows_weighted_sum(r.get(), rows, g.data(), c.data(), out.data(), batch,
                           dim);
    EXPECT_CLOSE(out.values(), ref::addForward(init, clippedSum(perSample, cv)),
                 accTolerance(dt), dt);
  });
}

} // namespace
