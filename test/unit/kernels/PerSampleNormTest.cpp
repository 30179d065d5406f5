//===- PerSampleNormTest.cpp - Per-sample norms vs explicit gradients -----===//
//
// Every norm method against ||grad_b||^2 of the per-sample gradient the
// reference forms explicitly. n2 starts with random values: norm kernels
// add. Norms are acc results, checked at 1e-5 even for bf16 operands, which
// fails if a kernel accumulates in bf16.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include <cmath>

using namespace dpc::test;
using dprt::accOf;
using dprt::DType;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

/// A random n2 buffer to add into; `init` receives its values.
Buffer startingNorms(Rng &rng, DType dt, int64_t batch, Vec &init) {
  Buffer n2 = outputBuffer(rng, accOf(dt), batch, /*accumulate=*/true, 0, 3);
  init = n2.values();
  return n2;
}

/// Expects `n2` to hold `init` plus the per-sample squared norms `want`,
/// at the acc type's tolerance.
void expectAdded(const Buffer &n2, const Vec &init, const Vec &want,
                 DType dt) {
  EXPECT_CLOSE(n2.values(), ref::addForward(init, want), accTolerance(dt), dt);
}

/// A linear layer's per-sample problem at random sizes: x [rows, in] and dy
/// [rows, out] with rows = batch * tokens (tokens = 1 where maxTokens is
/// 1), and n2 to add into.
struct LinearCase {
  int64_t batch, tokens, in, out;
  Buffer x, dy;
  Vec init; ///< n2 before the kernel (declared first: n2's initializer sets it)
  Buffer n2;

  LinearCase(Rng &rng, DType dt, int64_t maxBatch, int64_t maxTokens)
      : batch(uniformInt(rng, 1, maxBatch)),
        tokens(maxTokens > 1 ? uniformInt(rng, 1, maxTokens) : 1),
        in(uniformInt(rng, 1, 40)), out(uniformInt(rng, 1, 40)),
        x(dt, uniform(rng, batch * tokens * in)),
        dy(dt, uniform(rng, batch * tokens * out)),
        n2(startingNorms(rng, dt, batch, init)) {}

  /// The reference's per-sample weight gradients.
  ref::PerSample weightGradients() const {
    return ref::linearWeightGradPerSample(x.values(), dy.values(), batch,
                                          tokens, in, out);
  }
  /// Their squared norms, plus the bias's where `withBias`.
  Vec norms(bool withBias = false) const {
    Vec want = squaredNorms(weightGradients());
    if (withBias)
      want = ref::addForward(
          want,
          squaredNorms(ref::biasGradPerSample(dy.values(), batch, tokens, out)));
    return want;
  }
};

TEST(Rank1Norm, MatchesNaivePerSampleGradient) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 12, 1);
    TestRank r;
    cpu::norm_rank1(r.get(), dt, c.x.data(), c.dy.data(), c.n2.data(), c.batch,
                    c.in, c.out);
    expectAdded(c.n2, c.init, c.norms(), dt);
  });
}

TEST(Gram, IsEachSamplesMatrixOfRowInnerProducts) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 12),
            dim = uniformInt(rng, 1, 40);
    bool acc = uniformInt(rng, 0, 1);
    Buffer x(dt, uniform(rng, batch * tokens * dim));
    int64_t tt = tokens * tokens;
    // A symmetric starting K, as an earlier gram call leaves it.
    Vec kInit(batch * tt);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t s = 0; s <= t; ++s)
          kInit[b * tt + t * tokens + s] = kInit[b * tt + s * tokens + t] =
              uniformScalar(rng, -1, 1);
    Buffer K = acc ? Buffer(accOf(dt), kInit) : Buffer(accOf(dt), batch * tt);
    Vec init = K.values();
    TestRank r;
    cpu::gram(r.get(), dt, x.data(), K.data(), batch, tokens, dim, acc);
    Vec xv = x.values(), want(batch * tt, 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t s = 0; s < tokens; ++s) {
          double d = acc ? init[b * tt + t * tokens + s] : 0.0;
          for (int64_t j = 0; j < dim; ++j)
            d +=
                xv[(b * tokens + t) * dim + j] * xv[(b * tokens + s) * dim + j];
          want[b * tt + t * tokens + s] = d;
        }
    EXPECT_CLOSE(K.values(), want, accTolerance(dt), dt);
  });
}

TEST(GramNorm, MatchesNaivePerSampleGradient) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 5, 12);
    Buffer ka(accOf(dt), c.batch * c.tokens * c.tokens),
        kg(accOf(dt), c.batch * c.tokens * c.tokens);
    TestRank r;
    cpu::gram(r.get(), dt, c.x.data(), ka.data(), c.batch, c.tokens, c.in,
              false);
    cpu::gram_norm(r.get(), dt, c.dy.data(), ka.data(), kg.data(), c.n2.data(),
                   c.batch, c.tokens, c.out);
    expectAdded(c.n2, c.init, c.norms(), dt);
  });
}

TEST(SharedGramNorm, EqualsNormOfTheConcatenatedWeight) {
  // q, k, v read the same activation: one Gram of x, then each layer's
  // gram_norm adds its share; the sum of the three layers' norms is the
  // norm of the per-sample gradient of [Wq; Wk; Wv].
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 10),
            in = uniformInt(rng, 1, 32), layers = uniformInt(rng, 2, 3);
    int64_t rows = batch * tokens;
    Buffer x(dt, uniform(rng, rows * in));
    std::vector<int64_t> outs;
    std::vector<Buffer> dys;
    for (int64_t l = 0; l < layers; ++l) {
      outs.push_back(uniformInt(rng, 1, 24));
      dys.emplace_back(dt, uniform(rng, rows * outs.back()));
    }
    Buffer ka(accOf(dt), batch * tokens * tokens),
        kg(accOf(dt), batch * tokens * tokens);
    Vec init;
    Buffer n2 = startingNorms(rng, dt, batch, init);
    TestRank r;
    cpu::gram(r.get(), dt, x.data(), ka.data(), batch, tokens, in, false);
    for (int64_t l = 0; l < layers; ++l)
      cpu::gram_norm(r.get(), dt, dys[l].data(), ka.data(), kg.data(),
                     n2.data(), batch, tokens, outs[l]);

    // dy of the concatenated layer: the layers' dy side by side.
    int64_t total = 0;
    for (int64_t o : outs)
      total += o;
    Vec cat(rows * total);
    Vec perLayerSum(batch, 0.0);
    for (int64_t l = 0, col = 0; l < layers; col += outs[l], ++l) {
      Vec dyl = dys[l].values();
      for (int64_t rr = 0; rr < rows; ++rr)
        for (int64_t j = 0; j < outs[l]; ++j)
          cat[rr * total + col + j] = dyl[rr * outs[l] + j];
      perLayerSum = ref::addForward(
          perLayerSum, squaredNorms(ref::linearWeightGradPerSample(
                           x.values(), dyl, batch, tokens, in, outs[l])));
    }
    Vec want = squaredNorms(ref::linearWeightGradPerSample(
        x.values(), cat, batch, tokens, in, total));
    EXPECT_CLOSE(perLayerSum, want, 1e-12, DType::F64);
    expectAdded(n2, init, want, dt);
  });
}

TEST(DirectNorm, MatchesNaivePerSampleGradient) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 5, 12);
    std::vector<unsigned char> workspace(
        dprt::normDirectWorkspaceBytes(dt, c.in, c.out));
    TestRank r;
    cpu::norm_direct(r.get(), dt, c.x.data(), c.dy.data(), c.n2.data(),
                     c.batch, c.tokens, c.in, c.out, workspace.data());
    expectAdded(c.n2, c.init, c.norms(), dt);
  });
}

TEST(LinearPerSampleGrad, FormsEachSamplesGradientAndAddsItsNorm) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 5, 12);
    const int64_t batch = c.batch, in = c.in, out = c.out;
    // NaN before: every element must be written. Stored in the compute
    // type, rounded once from the acc type.
    Buffer g(dt, batch * out * in), alone(dt, batch * out * in);
    TestRank r;
    cpu::linear_per_sample_grad(r.get(), dt, dt, c.x.data(), c.dy.data(),
                                g.data(), c.n2.data(), batch, c.tokens, in,
                                out);
    // Without n2 it forms the same gradients and adds nothing anywhere.
    cpu::linear_per_sample_grad(r.get(), dt, dt, c.x.data(), c.dy.data(),
                                alone.data(), nullptr, batch, c.tokens, in,
                                out);
    ref::PerSample want = c.weightGradients();
    Vec flat;
    for (const Vec &w : want)
      flat.insert(flat.end(), w.begin(), w.end());
    EXPECT_CLOSE(g.values(), flat, storedTolerance(dt), dt);
    EXPECT_EQ(alone.values(), g.values());
    // The norms are those of the stored values (what the clipped sum adds),
    // which are within a rounding of the f64 norms.
    Vec stored = g.values(), storedNorms(batch, 0.0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < out * in; ++i)
        storedNorms[b] += stored[b * out * in + i] * stored[b * out * in + i];
    expectAdded(c.n2, c.init, storedNorms, dt);
    EXPECT_CLOSE(c.n2.values(), ref::addForward(c.init, squaredNorms(want)),
                 2 * storedTolerance(dt), dt);
  });
}

TEST(BiasNorm, MatchesNaivePerSampleGradient) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 6), tokens = uniformInt(rng, 1, 12),
            out = uniformInt(rng, 1, 40);
    Buffer dy(dt, uniform(rng, batch * tokens * out));
    Vec init;
    Buffer n2 = startingNorms(rng, dt, batch, init);
    TestRank r;
    cpu::norm_bias(r.get(), dt, dy.data(), n2.data(), batch, tokens, out);
    Vec want =
        squaredNorms(ref::biasGradPerSample(dy.values(), batch, tokens, out));
    expectAdded(n2, init, want, dt);
  });
}

TEST(EmbeddingNorm, MatchesNaivePerSampleGradientWithRepeatedTokens) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    // A small vocabulary makes tokens repeat within a sample.
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 20),
            vocab = uniformInt(rng, 1, 6), dim = uniformInt(rng, 1, 24);
    ref::Tokens tok = randomTokens(rng, batch * tokens, vocab);
    Buffer dy(dt, uniform(rng, batch * tokens * dim));
    Vec init;
    Buffer n2 = startingNorms(rng, dt, batch, init);
    TestRank r;
    cpu::norm_embedding(r.get(), dt, tok.data(), dy.data(), n2.data(), batch,
                        tokens, dim);
    Vec want = squaredNorms(ref::embeddingGradPerSample(tok, dy.values(), batch,
                                                        tokens, vocab, dim));
    expectAdded(n2, init, want, dt);
  });
}

TEST(PositionEmbeddingNorm, MatchesNaivePerSampleGradient) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 20),
            dim = uniformInt(rng, 1, 24);
    int64_t positions = tokens + uniformInt(rng, 0, 4);
    Buffer dy(dt, uniform(rng, batch * tokens * dim));
    Vec init;
    Buffer n2 = startingNorms(rng, dt, batch, init);
    TestRank r;
    cpu::norm_position_embedding(r.get(), dt, dy.data(), n2.data(), batch,
                                 tokens, dim);
    Vec want = squaredNorms(ref::positionEmbeddingGradPerSample(
        dy.values(), batch, tokens, positions, dim));
    expectAdded(n2, init, want, dt);
  });
}

/// A table [vocab, dim] read by an embedding of tokensEmb tokens and as the
/// weight of a head of tokensHead rows: its per-sample gradients E_b + L_b,
/// formed by the reference, and the parts.
struct TiedCase {
  int64_t batch, tokensEmb, tokensHead, vocab, dim;
  ref::Tokens tok;
  Buffer dyEmb, x, dyHead;
  ref::PerSample emb, head, tied;
};

TiedCase tiedCase(Rng &rng, DType dt) {
  // A small vocabulary makes tokens repeat within a sample.
  int64_t batch = uniformInt(rng, 1, 4), tokensEmb = uniformInt(rng, 1, 12),
          tokensHead = uniformInt(rng, 1, 12), vocab = uniformInt(rng, 1, 20),
          dim = uniformInt(rng, 1, 24);
  TiedCase c{batch,
             tokensEmb,
             tokensHead,
             vocab,
             dim,
             randomTokens(rng, batch * tokensEmb, vocab),
             Buffer(dt, uniform(rng, batch * tokensEmb * dim)),
             Buffer(dt, uniform(rng, batch * tokensHead * dim)),
             Buffer(dt, uniform(rng, batch * tokensHead * vocab)),
             {},
             {},
             {}};
  c.emb = ref::embeddingGradPerSample(c.tok, c.dyEmb.values(), batch, tokensEmb,
                                      vocab, dim);
  c.head = ref::linearWeightGradPerSample(c.x.values(), c.dyHead.values(),
                                          batch, tokensHead, dim, vocab);
  c.tied = c.emb;
  for (int64_t b = 0; b < batch; ++b)
    for (size_t i = 0; i < c.tied[b].size(); ++i)
      c.tied[b][i] += c.head[b][i];
  return c;
}

TEST(TiedNorm, HeadEmbeddingAndCrossTermMakeTheTiedNorm) {
  // What dp-clip-plan emits for a tied table: the head's norm (direct here),
  // the embedding's and norm_tied_cross, into one n2: ||E_b + L_b||^2.
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    TiedCase c = tiedCase(rng, dt);
    Vec init;
    Buffer n2 = startingNorms(rng, dt, c.batch, init);
    std::vector<unsigned char> direct(
        dprt::normDirectWorkspaceBytes(dt, c.dim, c.vocab));
    Buffer m(accOf(dt), c.batch * c.tokensHead * c.tokensEmb);
    TestRank r;
    cpu::norm_direct(r.get(), dt, c.x.data(), c.dyHead.data(), n2.data(),
                     c.batch, c.tokensHead, c.dim, c.vocab, direct.data());
    cpu::norm_embedding(r.get(), dt, c.tok.data(), c.dyEmb.data(), n2.data(),
                        c.batch, c.tokensEmb, c.dim);
    cpu::norm_tied_cross(r.get(), dt, c.tok.data(), c.dyEmb.data(), c.x.data(),
                         c.dyHead.data(), n2.data(), c.batch, c.tokensEmb,
                         c.tokensHead, c.vocab, c.dim, m.data());
    // The cross term cancels against the two norms: the error is measured
    // against ||E_b||^2 + ||L_b||^2, the size of the terms.
    Vec want = ref::addForward(init, squaredNorms(c.tied));
    Vec scale = ref::addForward(ref::addForward(init, squaredNorms(c.emb)),
                                squaredNorms(c.head));
    EXPECT_CLOSE_TO_SCALE(n2.values(), want, scale, accTolerance(dt), dt);
  });
}

TEST(TiedNorm, CrossTermIsTwiceTheInnerProductOfTheTwoGradients) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    TiedCase c = tiedCase(rng, dt);
    Buffer n2(accOf(dt), Vec(c.batch, 0.0));
    Buffer m(accOf(dt), c.batch * c.tokensHead * c.tokensEmb);
    TestRank r;
    cpu::norm_tied_cross(r.get(), dt, c.tok.data(), c.dyEmb.data(), c.x.data(),
                         c.dyHead.data(), n2.data(), c.batch, c.tokensEmb,
                         c.tokensHead, c.vocab, c.dim, m.data());
    Vec want(c.batch, 0.0), scale(c.batch, 0.0);
    for (int64_t b = 0; b < c.batch; ++b)
      for (size_t i = 0; i < c.emb[b].size(); ++i) {
        want[b] += 2 * c.emb[b][i] * c.head[b][i];
        scale[b] += 2 * std::fabs(c.emb[b][i] * c.head[b][i]);
      }
    EXPECT_CLOSE_TO_SCALE(n2.values(), want, scale, accTolerance(dt), dt);
  });
}

TEST(TiedNorm, FormedTiedGradientMatchesNaivePerSampleGradient) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    TiedCase c = tiedCase(rng, dt);
    Vec init;
    Buffer n2 = startingNorms(rng, dt, c.batch, init);
    std::vector<unsigned char> ws(
        dprt::normDirectWorkspaceBytes(dt, c.dim, c.vocab));
    TestRank r;
    cpu::norm_tied_direct(r.get(), dt, c.tok.data(), c.dyEmb.data(), c.x.data(),
                          c.dyHead.data(), n2.data(), c.batch, c.tokensEmb,
                          c.tokensHead, c.vocab, c.dim, ws.data());
    EXPECT_CLOSE(n2.values(), ref::addForward(init, squaredNorms(c.tied)),
                 accTolerance(dt), dt);
  });
}

TEST(NormLayerNorms, NormRowsOfPerSampleGammaAndBetaGradients) {
  // RMSNorm's gamma and LayerNorm's gamma and beta: the backward kernels
  // materialize the per-sample gradients, norm_rows adds their norms.
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 8),
            dim = uniformInt(rng, 2, 32), rows = batch * tokens;
    double eps = 1e-5;
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2)),
        dy(dt, normal(rng, rows * dim));
    Vec rmsRstd, lnMean, lnRstd;
    ref::rmsNormForward(x.values(), gamma.values(), rows, dim, eps, &rmsRstd);
    ref::layerNormForward(x.values(), gamma.values(), nullptr, rows, dim, eps,
                          &lnMean, &lnRstd);
    Buffer rstd(accOf(dt), rmsRstd), mean2(accOf(dt), lnMean),
        rstd2(accOf(dt), lnRstd);
    Buffer dx(dt, rows * dim), dgamma(accOf(dt), batch * dim),
        dgamma2(accOf(dt), batch * dim), dbeta2(accOf(dt), batch * dim);
    Vec init;
    Buffer n2 = startingNorms(rng, dt, batch, init);
    TestRank r;
    cpu::rms_norm_backward(r.get(), dt, x.data(), gamma.data(), rstd.data(),
                           dy.data(), dx.data(), dgamma.data(), nullptr, batch,
                           tokens, dim, false);
    cpu::layer_norm_backward(r.get(), dt, x.data(), gamma.data(), mean2.data(),
                             rstd2.data(), dy.data(), dx.data(), dgamma2.data(),
                             dbeta2.data(), batch, tokens, dim, false);
    for (Buffer *g : {&dgamma, &dgamma2, &dbeta2})
      cpu::norm_rows(r.get(), accOf(dt), g->data(), n2.data(), batch, dim);
    Vec want = squaredNorms(ref::rmsNormGammaGradPerSample(
        x.values(), dy.values(), batch, tokens, dim, eps));
    want = ref::addForward(
        want, squaredNorms(ref::layerNormGammaGradPerSample(
                  x.values(), dy.values(), batch, tokens, dim, eps)));
    want = ref::addForward(want, squaredNorms(ref::biasGradPerSample(
                                     dy.values(), batch, tokens, dim)));
    // The gamma gradients may cancel far below their terms (see
    // gammaGradTermSize); their squared norms are measured against the
    // squared norms of the terms.
    Vec scale = ref::addForward(init, want);
    for (bool centre : {false, true}) {
      Vec terms = gammaGradTermSize(x.values(), dy.values(), batch, tokens, dim,
                                    eps, centre);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < dim; ++j)
          scale[b] += terms[b * dim + j] * terms[b * dim + j];
    }
    EXPECT_CLOSE_TO_SCALE(n2.values(), ref::addForward(init, want), scale,
                          accTolerance(dt), dt);
  });
}

} // namespace

namespace {

TEST(FusedNorms, Rank1WithBiasIsWeightPlusBiasNorm) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 12, 1);
    TestRank r;
    cpu::norm_rank1_bias(r.get(), dt, c.x.data(), c.dy.data(), c.n2.data(),
                         c.batch, c.in, c.out);
    expectAdded(c.n2, c.init, c.norms(/*withBias=*/true), dt);
  });
}

TEST(FusedNorms, DirectWithBiasIsWeightPlusBiasNorm) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    LinearCase c(rng, dt, 5, 12);
    std::vector<unsigned char> workspace(
        dprt::normDirectWorkspaceBytes(dt, c.in, c.out));
    TestRank r;
    cpu::norm_direct_bias(r.get(), dt, c.x.data(), c.dy.data(), c.n2.data(),
                          c.batch, c.tokens, c.in, c.out, workspace.data());
    expectAdded(c.n2, c.init, c.norms(/*withBias=*/true), dt);
  });
}

TEST(FusedNorms, NormBackwardAddsTheNormOfItsPerSampleGradients) {
  // The fused backward kernels add the same norms that norm_rows adds after
  // the unfused ones, and write the same dx and per-sample gradients.
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 8),
            dim = uniformInt(rng, 2, 32), rows = batch * tokens;
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2)),
        dy(dt, normal(rng, rows * dim));
    Buffer mean(accOf(dt), normal(rng, rows)),
        rstd(accOf(dt), uniform(rng, rows, 0.5, 2));
    Vec init;
    Buffer fused = startingNorms(rng, dt, batch, init);
    Buffer unfused(accOf(dt), init);
    Buffer dx1(dt, rows * dim), dx2(dt, rows * dim);
    Buffer g1(accOf(dt), batch * dim), g2(accOf(dt), batch * dim),
        b1(accOf(dt), batch * dim), b2(accOf(dt), batch * dim);
    TestRank r;
    for (bool layerNorm : {false, true}) {
      if (layerNorm) {
        cpu::layer_norm_backward_norm(r.get(), dt, x.data(), gamma.data(),
                                      mean.data(), rstd.data(), dy.data(),
                                      dx1.data(), g1.data(), b1.data(),
                                      fused.data(), batch, tokens, dim, false);
        cpu::layer_norm_backward(r.get(), dt, x.data(), gamma.data(),
                                 mean.data(), rstd.data(), dy.data(),
                                 dx2.data(), g2.data(), b2.data(), batch,
                                 tokens, dim, false);
        cpu::norm_rows(r.get(), accOf(dt), b2.data(), unfused.data(), batch,
                       dim);
        EXPECT_EQ(b1.values(), b2.values());
      } else {
        cpu::rms_norm_backward_norm(
            r.get(), dt, x.data(), gamma.data(), rstd.data(), dy.data(),
            dx1.data(), g1.data(), fused.data(), nullptr, batch, tokens, dim,
            false);
        cpu::rms_norm_backward(r.get(), dt, x.data(), gamma.data(), rstd.data(),
                               dy.data(), dx2.data(), g2.data(), nullptr, batch,
                               tokens, dim, false);
      }
      cpu::norm_rows(r.get(), accOf(dt), g2.data(), unfused.data(), batch, dim);
      EXPECT_EQ(dx1.values(), dx2.values());
      EXPECT_EQ(g1.values(), g2.values());
      EXPECT_CLOSE(fused.values(), unfused.values(), accTolerance(dt), dt);
    }
  });
}

} // namespace
