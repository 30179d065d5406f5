//===- ForwardKernelTest.cpp - Forward kernels against the f64 reference --===//
//
// Each test draws random shapes and data per case and dtype, runs one CPU
// kernel on NaN-poisoned outputs and compares with the reference layer fed
// the same (rounded) inputs.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

using namespace dpc::test;
using dprt::accOf;
using dprt::Activation;
using dprt::DType;
using dprt::Reduction;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

TEST(EmbeddingForward, CopiesTheTokensRows) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    int64_t rows = uniformInt(rng, 1, 30), vocab = uniformInt(rng, 1, 12),
            dim = uniformInt(rng, 1, 20);
    ref::Tokens tok = randomTokens(rng, rows, vocab);
    Buffer table(dt, uniform(rng, vocab * dim)), out(dt, rows * dim);
    TestRank r;
    cpu::embedding_forward(r.get(), dt, tok.data(), table.data(), out.data(),
                           rows, vocab, dim);
    EXPECT_CLOSE(out.values(), ref::embeddingForward(tok, table.values(), dim),
                 0.0, dt);
  });
}

TEST(LinearForward, MatchesReferenceWithAndWithoutBiasAndAddend) {
  // The addend (a fused residual connection) apart from y or in place.
  enum class Addend { None, Apart, InPlace };
  forEachCaseAndDType(24, [](Rng &rng, DType dt) {
    int64_t rows = uniformInt(rng, 1, 24), in = uniformInt(rng, 1, 40),
            out = uniformInt(rng, 1, 40);
    bool hasBias = uniformInt(rng, 0, 1);
    auto addend = Addend(uniformInt(rng, 0, 2));
    Buffer x(dt, uniform(rng, rows * in)), w(dt, uniform(rng, out * in)),
        b(dt, uniform(rng, out)), r(dt, uniform(rng, rows * out, -4, 4));
    // NaN where y is only written: a read of it would show.
    Buffer y = addend == Addend::InPlace ? Buffer(dt, r.values())
                                         : Buffer(dt, rows * out);
    TestRank rank;
    cpu::linear_forward(rank.get(), dt, x.data(), w.data(),
                        hasBias ? b.data() : nullptr,
                        addend == Addend::Apart     ? r.data()
                        : addend == Addend::InPlace ? y.data()
                                                    : nullptr,
                        y.data(), rows, in, out);
    Vec bias = b.values();
    Vec expected = ref::linearForward(x.values(), w.values(),
                                      hasBias ? &bias : nullptr, rows, in, out);
    if (addend != Addend::None)
      for (size_t i = 0; i < expected.size(); ++i)
        expected[i] += r.values()[i];
    EXPECT_CLOSE(y.values(), expected, tolerance(dt), dt);
  });
}

TEST(RmsNormForward, MatchesReferenceOutputAndRstd) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t rows = uniformInt(rng, 1, 20), dim = uniformInt(rng, 1, 48);
    double eps = std::pow(10.0, -double(uniformInt(rng, 3, 8)));
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2));
    Buffer y(dt, rows * dim), rstd(accOf(dt), rows);
    TestRank r;
    cpu::rms_norm_forward(r.get(), dt, x.data(), gamma.data(), y.data(),
                          rstd.data(), rows, dim, eps);
    Vec refRstd;
    Vec refY = ref::rmsNormForward(x.values(), gamma.values(), rows, dim, eps,
                                   &refRstd);
    EXPECT_CLOSE(y.values(), refY, tolerance(dt), dt);
    EXPECT_CLOSE(rstd.values(), refRstd, accTolerance(dt), dt);
  });
}

TEST(LayerNormForward, MatchesReferenceOutputAndStatistics) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t rows = uniformInt(rng, 1, 20), dim = uniformInt(rng, 2, 48);
    bool hasBeta = uniformInt(rng, 0, 1);
    double eps = 1e-5;
    // An offset mean checks the centring.
    Vec xv = normal(rng, rows * dim);
    for (double &e : xv)
      e += 0.5;
    Buffer x(dt, xv), gamma(dt, uniform(rng, dim, 0.5, 2)),
        beta(dt, uniform(rng, dim));
    Buffer y(dt, rows * dim), mean(accOf(dt), rows), rstd(accOf(dt), rows);
    TestRank r;
    cpu::layer_norm_forward(r.get(), dt, x.data(), gamma.data(),
                            hasBeta ? beta.data() : nullptr, y.data(),
                            mean.data(), rstd.data(), rows, dim, eps);
    Vec betaV = beta.values(), refMean, refRstd;
    Vec refY = ref::layerNormForward(x.values(), gamma.values(),
                                     hasBeta ? &betaV : nullptr, rows, dim, eps,
                                     &refMean, &refRstd);
    EXPECT_CLOSE(y.values(), refY, tolerance(dt), dt);
    EXPECT_CLOSE(mean.values(), refMean, accTolerance(dt), dt);
    EXPECT_CLOSE(rstd.values(), refRstd, accTolerance(dt), dt);
  });
}

TEST(PositionEmbeddingForward, AddsTheRowOfEachPosition) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 20),
            dim = uniformInt(rng, 1, 40);
    int64_t positions = tokens + uniformInt(rng, 0, 5);
    Buffer x(dt, uniform(rng, batch * tokens * dim)),
        table(dt, uniform(rng, positions * dim)), y(dt, batch * tokens * dim);
    TestRank r;
    cpu::position_embedding_forward(r.get(), dt, x.data(), table.data(),
                                    y.data(), batch, tokens, dim);
    EXPECT_CLOSE(y.values(),
                 ref::positionEmbeddingForward(x.values(), table.values(),
                                               batch, tokens, dim),
                 tolerance(dt), dt);
  });
}

TEST(RopeForward, MatchesReferenceOutOfPlaceAndInPlace) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 3), tokens = uniformInt(rng, 1, 20),
            heads = uniformInt(rng, 1, 3), headDim = 2 * uniformInt(rng, 1, 8);
    double theta = uniformInt(rng, 0, 1) ? 10000.0 : 500000.0;
    int64_t n = batch * tokens * heads * headDim;
    Buffer x(dt, uniform(rng, n));
    Vec xv = x.values();
    bool inPlace = uniformInt(rng, 0, 1);
    Buffer y = inPlace ? x : Buffer(dt, n);
    TestRank r;
    cpu::rope_forward(r.get(), dt, inPlace ? y.data() : x.data(), y.data(),
                      nullptr, batch, tokens, heads, headDim, theta);
    EXPECT_CLOSE(y.values(),
                 ref::ropeForward(xv, batch, tokens, heads, headDim, theta),
                 tolerance(dt), dt);
  });
}

TEST(RopeLlama3Frequencies, MatchReferenceInEveryBand) {
  // Original contexts from 8 to 8192 put the head's frequencies in all
  // three bands (kept, blended, divided) across the cases.
  forEachCase(24, [](Rng &rng) {
    int64_t headDim = 2 * uniformInt(rng, 1, 64);
    double theta = uniformInt(rng, 0, 1) ? 10000.0 : 500000.0;
    double low = uniformScalar(rng, 0.5, 2.0);
    ref::Llama3RopeScaling s{uniformScalar(rng, 1.5, 32.0), low,
                             low + uniformScalar(rng, 0.5, 4.0),
                             int64_t(8) << uniformInt(rng, 0, 10)};
    std::vector<double> table(headDim / 2, -1.0);
    TestRank r;
    cpu::rope_llama3_frequencies(r.get(), table.data(), headDim, theta,
                                 s.factor, s.lowFreqFactor, s.highFreqFactor,
                                 s.originalMaxPositions);
    Vec want = ref::llama3InverseFrequencies(theta, headDim, s);
    EXPECT_CLOSE(Vec(table.begin(), table.end()), want, 1e-14, DType::F64);
  });
}

TEST(RopeForward, WithAFrequencyTableMatchesReference) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 3), tokens = uniformInt(rng, 1, 40),
            heads = uniformInt(rng, 1, 3), headDim = 2 * uniformInt(rng, 1, 8);
    ref::Llama3RopeScaling s{8.0, 1.0, 4.0, 16};
    Vec invFreq = ref::llama3InverseFrequencies(500000.0, headDim, s);
    int64_t n = batch * tokens * heads * headDim;
    Buffer x(dt, uniform(rng, n));
    Vec xv = x.values();
    bool backward = uniformInt(rng, 0, 1);
    Buffer y(dt, n);
    TestRank r;
    if (backward)
      cpu::rope_backward(r.get(), dt, x.data(), y.data(), invFreq.data(), batch,
                         tokens, heads, headDim, 500000.0, false);
    else
      cpu::rope_forward(r.get(), dt, x.data(), y.data(), invFreq.data(), batch,
                        tokens, heads, headDim, 500000.0);
    Vec want =
        backward ? ref::ropeBackward(xv, batch, tokens, heads, headDim, invFreq)
                 : ref::ropeForward(xv, batch, tokens, heads, headDim, invFreq);
    EXPECT_CLOSE(y.values(), want, tolerance(dt), dt);
  });
}

TEST(AttentionForward, MatchesReferenceCausalAndGroupedQuery) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    int64_t kvHeads = uniformInt(rng, 1, 2);
    ref::AttentionShape s{
        uniformInt(rng, 1, 3),           uniformInt(rng, 1, 12),
        kvHeads * uniformInt(rng, 1, 3), kvHeads,
        2 * uniformInt(rng, 1, 8),       bool(uniformInt(rng, 0, 1))};
    int64_t nq = s.batch * s.tokens * s.heads * s.headDim;
    int64_t nk = s.batch * s.tokens * s.kvHeads * s.headDim;
    Buffer q(dt, uniform(rng, nq, -2, 2)), k(dt, uniform(rng, nk, -2, 2)),
        v(dt, uniform(rng, nk));
    Buffer o(dt, nq), lse(accOf(dt), s.batch * s.heads * s.tokens);
    TestRank r;
    cpu::attention_forward(r.get(), dt, q.data(), k.data(), v.data(), o.data(),
                           lse.data(), s.batch, s.tokens, s.heads, s.kvHeads,
                           s.headDim, s.causal);
    Vec refLse;
    Vec refO =
        ref::attentionForward(q.values(), k.values(), v.values(), s, &refLse);
    EXPECT_CLOSE(o.values(), refO, tolerance(dt), dt);
    EXPECT_CLOSE(lse.values(), refLse, accTolerance(dt), dt);
  });
}

TEST(ActivationForward, MatchesReferenceForEveryActivation) {
  for (Activation act : {Activation::Relu, Activation::Silu,
                         Activation::GeluErf, Activation::GeluTanh}) {
    SCOPED_TRACE("activation " + std::to_string(int(act)));
    forEachCaseAndDType(8, [&](Rng &rng, DType dt) {
      int64_t n = uniformInt(rng, 1, 300);
      Buffer x(dt, normal(rng, n, 3.0)), y(dt, n);
      TestRank r;
      cpu::activation_forward(r.get(), dt, act, x.data(), y.data(), n);
      EXPECT_CLOSE(y.values(), ref::activationForward(act, x.values()),
                   tolerance(dt), dt);
    });
  }
}

TEST(GluForward, MatchesActivationTimesUpForEveryActivation) {
  // The fused gated unit against act(gate) * up from the f64 reference
  // activation: one rounding, at the output.
  for (Activation act : {Activation::Relu, Activation::Silu,
                         Activation::GeluErf, Activation::GeluTanh}) {
    SCOPED_TRACE("activation " + std::to_string(int(act)));
    forEachCaseAndDType(8, [&](Rng &rng, DType dt) {
      int64_t n = uniformInt(rng, 1, 300);
      Buffer gate(dt, normal(rng, n, 3.0)), up(dt, normal(rng, n)), y(dt, n);
      TestRank r;
      cpu::glu_forward(r.get(), dt, act, gate.data(), up.data(), y.data(), n);
      Vec want = ref::activationForward(act, gate.values());
      Vec u = up.values();
      for (int64_t i = 0; i < n; ++i)
        want[i] *= u[i];
      EXPECT_CLOSE(y.values(), want, tolerance(dt), dt);
    });
  }
}

TEST(MulAddForward, MatchElementwiseReference) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    int64_t n = uniformInt(rng, 1, 300);
    Buffer a(dt, normal(rng, n)), b(dt, normal(rng, n)), y(dt, n), z(dt, n);
    TestRank r;
    cpu::mul_forward(r.get(), dt, a.data(), b.data(), y.data(), n);
    cpu::add_forward(r.get(), dt, a.data(), b.data(), z.data(), n);
    EXPECT_CLOSE(y.values(), ref::mulForward(a.values(), b.values()),
                 tolerance(dt), dt);
    EXPECT_CLOSE(z.values(), ref::addForward(a.values(), b.values()),
                 tolerance(dt), dt);
  });
}

TEST(CrossEntropyForward, MatchesReferenceWithIgnoredTokensMeanAndSum) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 8),
            classes = uniformInt(rng, 2, 40);
    bool hasIgnore = uniformInt(rng, 0, 1);
    int64_t ignoreIndex = uniformInt(rng, 0, 1) ? -1 : -100;
    Reduction red = uniformInt(rng, 0, 1) ? Reduction::Mean : Reduction::Sum;
    ref::Tokens targets = randomTargets(
        rng, batch * tokens, classes, int32_t(ignoreIndex), hasIgnore ? 4 : 0);
    // One sample with no counted token: its loss is 0.
    if (hasIgnore)
      for (int64_t t = 0; t < tokens; ++t)
        targets[t] = int32_t(ignoreIndex);
    Buffer logits(dt, normal(rng, batch * tokens * classes, 2.0));
    Buffer loss(accOf(dt), batch), lse(accOf(dt), batch * tokens);
    TestRank r;
    cpu::cross_entropy_forward(r.get(), dt, logits.data(), targets.data(),
                               loss.data(), lse.data(), batch, tokens, classes,
                               hasIgnore, ignoreIndex, red);
    Vec refLse;
    Vec refLoss =
        ref::crossEntropyForward(logits.values(), targets, batch, tokens,
                                 classes, hasIgnore, ignoreIndex, red, &refLse);
    EXPECT_CLOSE(loss.values(), refLoss, accTolerance(dt), dt);
    EXPECT_CLOSE(lse.values(), refLse, accTolerance(dt), dt);
  });
}

TEST(MseForward, MatchesReferenceMeanAndSum) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 8), features = uniformInt(rng, 1, 12);
    Reduction red = uniformInt(rng, 0, 1) ? Reduction::Mean : Reduction::Sum;
    Buffer p(dt, normal(rng, batch * features)),
        t(dt, normal(rng, batch * features)), loss(accOf(dt), batch);
    TestRank r;
    cpu::mse_forward(r.get(), dt, p.data(), t.data(), loss.data(), batch,
                     features, red);
    EXPECT_CLOSE(loss.values(),
                 ref::mseForward(p.values(), t.values(), batch, features, red),
                 accTolerance(dt), dt);
  });
}

} // namespace
