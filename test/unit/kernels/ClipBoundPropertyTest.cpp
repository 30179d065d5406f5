//===- ClipBoundPropertyTest.cpp - ||c_b grad_b|| <= C, always ------------===//
//
// The privacy guarantee rests on one inequality: every clipped per-sample
// gradient has norm at most C. Random "models" of linear layers (each with a
// randomly chosen norm method: rank-1, Gram, shared Gram, direct), biases,
// embeddings and norm-layer gammas, at gradient scales from 1e-20 to 1e20,
// get their norms and clip factors from the kernels; the reference then
// forms every per-sample gradient in f64 and measures the clipped norm.
//
// f64 runs with relErr = 0: the kernels' norm error (~1e-15) is covered by
// the 1e-6 in min(1, C / (n + 1e-6)) for norms of order C and is far below
// the 1e-12 slack otherwise. f32 and bf16 operands (norms accumulated in f32)
// run at scales 1e-6 to 1e6 (squares of 1e20 overflow f32) with relErr =
// 1e-3, the slack this test grants an f32 norm of random data; the bound
// the compiler must pass is derived in docs/privacy.md.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

using namespace dpc::test;
using dprt::accOf;
using dprt::ClipMode;
using dprt::DType;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

/// One trainable parameter: its per-sample gradients (reference) and the
/// kernel calls that add its squared norms into an n2 buffer.
struct Param {
  ref::PerSample grads;
};

/// The rows of a [batch, n] buffer as per-sample gradients.
ref::PerSample slices(const Buffer &g, int64_t batch) {
  Vec all = g.values();
  int64_t n = g.size() / batch;
  ref::PerSample out(batch);
  for (int64_t b = 0; b < batch; ++b)
    out[b].assign(all.begin() + b * n, all.begin() + (b + 1) * n);
  return out;
}

/// Builds one random parameter group, adds its norms into n2 (acc, [batch])
/// with the kernels and returns the reference gradients of its parameters.
std::vector<Param> randomGroup(Rng &rng, DType dt, int64_t batch,
                               int64_t tokens, double scale, Buffer &n2) {
  TestRank r;
  int64_t rows = batch * tokens;
  std::vector<Param> params;
  switch (uniformInt(rng, 0, 3)) {
  case 0: { // linear (+ bias)
    int64_t in = uniformInt(rng, 1, 24), out = uniformInt(rng, 1, 24);
    Buffer x(dt, normal(rng, rows * in, scale)),
        dy(dt, normal(rng, rows * out, scale));
    int64_t method = uniformInt(rng, tokens == 1 ? 0 : 1, 3);
    if (method == 0) {
      cpu::norm_rank1(r.get(), dt, x.data(), dy.data(), n2.data(), batch, in,
                      out);
    } else if (method == 1) {
      Buffer ka(accOf(dt), batch * tokens * tokens),
          kg(accOf(dt), batch * tokens * tokens);
      cpu::gram(r.get(), dt, x.data(), ka.data(), batch, tokens, in, false);
      cpu::gram(r.get(), dt, dy.data(), kg.data(), batch, tokens, out, false);
      cpu::gram_dot(r.get(), accOf(dt), ka.data(), kg.data(), n2.data(), batch,
                    tokens);
    } else if (method == 3) {
      // Materialized: the clipped sum adds the stored slices (bf16 for
      // bf16 operands), so the bound must hold for them.
      Buffer g(dt, batch * out * in);
      cpu::linear_per_sample_grad(r.get(), dt, dt, x.data(), dy.data(), g.data(),
                                  n2.data(), batch, tokens, in, out);
      params.push_back({slices(g, batch)});
    } else {
      std::vector<unsigned char> ws(
          dprt::normDirectWorkspaceBytes(dt, in, out));
      cpu::norm_direct(r.get(), dt, x.data(), dy.data(), n2.data(), batch,
                       tokens, in, out, ws.data());
    }
    if (method != 3)
      params.push_back({ref::linearWeightGradPerSample(
          x.values(), dy.values(), batch, tokens, in, out)});
    if (uniformInt(rng, 0, 1)) {
      cpu::norm_bias(r.get(), dt, dy.data(), n2.data(), batch, tokens, out);
      params.push_back(
          {ref::biasGradPerSample(dy.values(), batch, tokens, out)});
    }
    break;
  }
  case 1: { // q/k/v sharing one Gram of x
    int64_t in = uniformInt(rng, 1, 24);
    Buffer x(dt, normal(rng, rows * in, scale));
    Buffer ka(accOf(dt), batch * tokens * tokens),
        kg(accOf(dt), batch * tokens * tokens);
    cpu::gram(r.get(), dt, x.data(), ka.data(), batch, tokens, in, false);
    for (int l = 0; l < 3; ++l) {
      int64_t out = uniformInt(rng, 1, 16);
      Buffer dy(dt, normal(rng, rows * out, scale));
      cpu::gram(r.get(), dt, dy.data(), kg.data(), batch, tokens, out, l > 0);
      params.push_back({ref::linearWeightGradPerSample(
          x.values(), dy.values(), batch, tokens, in, out)});
    }
    cpu::gram_dot(r.get(), accOf(dt), ka.data(), kg.data(), n2.data(), batch,
                  tokens);
    break;
  }
  case 2: { // embedding with repeated tokens
    int64_t vocab = uniformInt(rng, 1, 6), dim = uniformInt(rng, 1, 16);
    ref::Tokens tok = randomTokens(rng, rows, vocab);
    Buffer dy(dt, normal(rng, rows * dim, scale));
    cpu::norm_embedding(r.get(), dt, tok.data(), dy.data(), n2.data(), batch,
                        tokens, dim);
    params.push_back({ref::embeddingGradPerSample(tok, dy.values(), batch,
                                                  tokens, vocab, dim)});
    break;
  }
  default: { // materialized per-sample gradients: a norm gamma's (acc) or
             // a weight's slices (compute type)
    int64_t dim = uniformInt(rng, 1, 32);
    DType rows = uniformInt(rng, 0, 1) ? dt : accOf(dt);
    Buffer g(rows, normal(rng, batch * dim, scale * scale));
    cpu::norm_rows(r.get(), rows, g.data(), n2.data(), batch, dim);
    ref::PerSample ps(batch);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < dim; ++j)
        ps[b].push_back(g.get(b * dim + j));
    params.push_back({ps});
    break;
  }
  }
  return params;
}

TEST(ClipBound, EveryClippedPerSampleGradientHasNormAtMostC) {
  forEachCase(1000, [](Rng &rng) {
    DType dt = allDTypes()[uniformInt(rng, 0, 2)];
    bool wide = dt == DType::F64;
    double relErr = wide ? 0.0 : 1e-3;
    ClipMode mode = ClipMode(uniformInt(rng, 0, 2));
    double maxNorm = std::pow(10.0, uniformScalar(rng, -2, 2));
    int64_t batch = uniformInt(rng, 1, 6), tokens = uniformInt(rng, 1, 8);
    int64_t groups = uniformInt(rng, 1, 4);
    SCOPED_TRACE(std::string(dprt::nameOf(dt)) + ", mode " +
                 std::to_string(int(mode)));
    DType acc = accOf(dt);
    Vec maskv(batch);
    for (double &m : maskv)
      m = uniformInt(rng, 0, 4) == 0 ? 0.0 : 1.0;
    Buffer mask(acc, maskv);
    TestRank r;

    // Per group: n2 accumulated over its parameters; flat and automatic
    // clipping sum the groups, per-layer clipping clips each group.
    std::vector<std::vector<Param>> model;
    std::vector<Buffer> groupN2;
    for (int64_t l = 0; l < groups; ++l) {
      // Each group at its own scale: 10^[-10, 10] per operand (f64).
      double scale = std::pow(10.0, wide ? uniformScalar(rng, -10, 10)
                                         : uniformScalar(rng, -3, 3));
      groupN2.emplace_back(acc, Vec(batch, 0.0));
      model.push_back(
          randomGroup(rng, dt, batch, tokens, scale, groupN2.back()));
    }
    // The run's C in the StepState, and each factor's share of it as the
    // compiler passes it (dp.clip_factor's bound over the recipe's C).
    r.state().clipNorm = maxNorm;
    auto clip = [&](Buffer &n2, double bound) {
      Buffer c(acc, batch);
      cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), batch,
                        1, mode, bound / maxNorm, 0.01, relErr);
      return c.values();
    };
    auto clippedNorm2 = [&](const std::vector<Param> &group, int64_t b,
                            double c) {
      double s = 0;
      for (const Param &p : group) {
        Vec g = p.grads[b];
        for (double &e : g)
          e *= c;
        s += ref::sumSquares(g);
      }
      return s;
    };

    if (mode == ClipMode::PerLayer) {
      // One bound per group: C_l = C / sqrt(groups).
      double bound = maxNorm / std::sqrt(double(groups));
      for (int64_t l = 0; l < groups; ++l) {
        Vec c = clip(groupN2[l], bound);
        for (int64_t b = 0; b < batch; ++b) {
          double n = std::sqrt(clippedNorm2(model[l], b, c[b]));
          EXPECT_LE(n, bound * (1 + 1e-12)) << "group " << l << " sample " << b;
          if (maskv[b] == 0)
            EXPECT_EQ(c[b], 0.0);
        }
      }
      return;
    }
    Buffer total(acc, Vec(batch, 0.0));
    for (int64_t l = 0; l < groups; ++l)
      cpu::accumulate(r.get(), acc, groupN2[l].data(), total.data(), batch);
    Vec c = clip(total, maxNorm);
    for (int64_t b = 0; b < batch; ++b) {
      double s = 0;
      for (int64_t l = 0; l < groups; ++l)
        s += clippedNorm2(model[l], b, c[b]);
      EXPECT_LE(std::sqrt(s), maxNorm * (1 + 1e-12)) << "sample " << b;
      if (maskv[b] == 0)
        EXPECT_EQ(c[b], 0.0);
    }
  });
}

TEST(ClipBound, MaterializedGradientsClippedAtTheBoundary) {
  // The materialized method end to end (linear_per_sample_grad with its
  // norms, clip_factors, rows_weighted_sum) with C at exactly sample 1's
  // norm: sample 1 sits on the boundary, sample 0 (half its size) is not
  // clipped, sample 2 (twice) is. Every clipped gradient has norm at most
  // C, and the sum is the reference's sum_b c_b g_b with the reference's
  // factors min(1, C / (n_b (1 + relErr) + 1e-6)). With MXFP8 rows
  // (f32 and bf16 operands, in a multiple of 32) the same holds for the
  // values the rows hold, each within 2^-4 of the f64 gradient.
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
   for (DType rowType : {dt, DType::MXFP8}) {
    if (rowType == DType::MXFP8 && dt == DType::F64)
      continue;
    SCOPED_TRACE(dprt::nameOf(rowType));
    const bool mx = rowType == DType::MXFP8;
    int64_t batch = 3, tokens = uniformInt(rng, 1, 8),
            in = mx ? 32 * uniformInt(rng, 1, 2) : uniformInt(rng, 1, 24),
            out = uniformInt(rng, 1, 24);
    DType acc = accOf(dt);
    double relErr = dt == DType::F64 ? 0.0 : 1e-4;
    Vec xv = normal(rng, batch * tokens * in), dyv;
    Vec base = normal(rng, tokens * out);
    for (double f : {0.5, 1.0, 2.0})
      for (double v : base)
        dyv.push_back(f * v);
    // Sample b's x is sample 1's: the norms are in ratio 1 : 2 : 4.
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tokens * in; ++i)
        xv[b * tokens * in + i] = xv[tokens * in + i];
    Buffer x(dt, xv), dy(dt, dyv);
    ref::PerSample exact = ref::linearWeightGradPerSample(
        x.values(), dy.values(), batch, tokens, in, out);
    TestRank r;
    Buffer g(rowType, batch * out * in, out * in), n2(acc, Vec(batch, 0.0)),
        mask(acc, Vec(batch, 1.0)), c(acc, batch), dw(acc, Vec(out * in, 0.0));
    cpu::linear_per_sample_grad(r.get(), dt, rowType, x.data(), dy.data(),
                                g.data(), n2.data(), batch, tokens, in, out);
    // The slices as stored (rounded once to bf16 for bf16 operands) are what
    // the clipped sum adds: C is sample 1's stored norm, and they are within
    // a rounding of the f64 gradients.
    ref::PerSample grads = slices(g, batch);
    for (int64_t b = 0; b < batch; ++b)
      EXPECT_CLOSE(grads[b], exact[b],
                   (mx ? 1.0 / 16 : 0.0) + storedTolerance(dt), dt);
    double maxNorm = std::sqrt(ref::sumSquares(grads[1]));
    r.state().clipNorm = maxNorm;
    cpu::clip_factors(r.get(), acc, n2.data(), mask.data(), c.data(), batch, 1,
                      ClipMode::Flat, 1.0, 0.01, relErr);
    cpu::rows_weighted_sum(r.get(), rowType, g.data(), c.data(), dw.data(),
                           batch, out * in);
    Vec cv = c.values(), want(batch);
    for (int64_t b = 0; b < batch; ++b) {
      double n = std::sqrt(ref::sumSquares(grads[b]));
      want[b] = std::min(1.0, maxNorm / (n * (1 + relErr) + 1e-6));
      Vec clipped = grads[b];
      for (double &e : clipped)
        e *= cv[b];
      EXPECT_LE(std::sqrt(ref::sumSquares(clipped)), maxNorm * (1 + 1e-12))
          << "sample " << b;
    }
    EXPECT_EQ(cv[0], 1.0);
    EXPECT_LT(cv[1], 1.0);
    EXPECT_GT(cv[1], 1.0 - 2 * relErr - 2e-6 / maxNorm);
    EXPECT_LT(cv[2], 0.5 + 1e-6);
    EXPECT_CLOSE(cv, want, accTolerance(dt), dt);
    EXPECT_CLOSE(dw.values(), ref::weightedSum(grads, want), accTolerance(dt),
                 dt);
   }
  });
}

} // namespace
