//===- ReferenceTest.cpp - The f64 reference against finite differences ---===//
//
// The kernels are only as well checked as the reference they are compared
// with, so the reference is checked on its own: every backward function and
// every per-sample parameter gradient against central finite differences of
// its forward function, whole models (the MLP classifier and a two-block
// transformer LM) per sample and per parameter element, and the DP step's
// clipping, masking and update against their definitions.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"
#include "reference/Models.h"

#include <functional>

using namespace dpc::test;
using dprt::Activation;
using dprt::ClipMode;
using dprt::DType;
using dprt::Reduction;
namespace ref = dpc::reference;

namespace {

/// Central differences of f at x, one element at a time.
Vec numericGradient(const std::function<double(const Vec &)> &f, Vec x) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double xi = x[i], h = 1e-6 * std::max(1.0, std::fabs(xi));
    x[i] = xi + h;
    double up = f(x);
    x[i] = xi - h;
    double down = f(x);
    x[i] = xi;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

double dot(const Vec &a, const Vec &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

Vec sumOverSamples(const ref::PerSample &g) {
  return ref::weightedSum(g, Vec(g.size(), 1.0));
}

/// Finite differences at h = 1e-6 carry ~1e-10 relative truncation error
/// and ~1e-10 absolute rounding noise (eps * f / h); the error is measured
/// against |numeric| + 1e-3 so that a gradient that is exactly zero (a
/// query at token 0 of causal attention has nothing to attend to but
/// itself) does not compare noise with noise.
constexpr double kFdTolerance = 1e-6;

::testing::AssertionResult fdClose(const Vec &analytic, const Vec &numeric) {
  Vec scale(numeric.size());
  for (size_t i = 0; i < numeric.size(); ++i)
    scale[i] = std::fabs(numeric[i]) + 1e-3;
  return closeTo(analytic, numeric, kFdTolerance, DType::F64, &scale);
}

#define EXPECT_FD(analytic, numeric)                                           \
  EXPECT_TRUE(fdClose((analytic), (numeric))) << #analytic

TEST(ReferenceLayers, LinearGradientsMatchFiniteDifferences) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 3, in = 4, out = 5, rows = batch * tokens;
    Vec x = normal(rng, rows * in), w = normal(rng, out * in),
        b = normal(rng, out), dy = normal(rng, rows * out);
    EXPECT_FD(ref::linearBackwardInput(dy, w, rows, in, out),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::linearForward(v, w, &b, rows, in, out));
                  },
                  x));
    EXPECT_FD(sumOverSamples(ref::linearWeightGradPerSample(x, dy, batch,
                                                            tokens, in, out)),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::linearForward(x, v, &b, rows, in, out));
                  },
                  w));
    EXPECT_FD(sumOverSamples(ref::biasGradPerSample(dy, batch, tokens, out)),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::linearForward(x, w, &v, rows, in, out));
                  },
                  b));
  });
}

TEST(ReferenceLayers, EmbeddingGradientMatchesFiniteDifferences) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 5, vocab = 3, dim = 4;
    ref::Tokens tok = randomTokens(rng, batch * tokens, vocab);
    Vec table = normal(rng, vocab * dim),
        dy = normal(rng, batch * tokens * dim);
    EXPECT_FD(sumOverSamples(ref::embeddingGradPerSample(tok, dy, batch, tokens,
                                                         vocab, dim)),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::embeddingForward(tok, v, dim));
                  },
                  table));
  });
}

TEST(ReferenceLayers, NormGradientsMatchFiniteDifferences) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 2, dim = 6, rows = batch * tokens;
    double eps = 1e-5;
    Vec x = normal(rng, rows * dim), gamma = uniform(rng, dim, 0.5, 2),
        beta = normal(rng, dim), dy = normal(rng, rows * dim);
    EXPECT_FD(ref::rmsNormBackward(x, gamma, dy, rows, dim, eps),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy,
                               ref::rmsNormForward(v, gamma, rows, dim, eps));
                  },
                  x));
    EXPECT_FD(sumOverSamples(ref::rmsNormGammaGradPerSample(x, dy, batch,
                                                            tokens, dim, eps)),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::rmsNormForward(x, v, rows, dim, eps));
                  },
                  gamma));
    auto ln = [&](const Vec &xv, const Vec &g, const Vec &bv) {
      return dot(dy, ref::layerNormForward(xv, g, &bv, rows, dim, eps));
    };
    EXPECT_FD(
        ref::layerNormBackward(x, gamma, dy, rows, dim, eps),
        numericGradient([&](const Vec &v) { return ln(v, gamma, beta); }, x));
    EXPECT_FD(
        sumOverSamples(
            ref::layerNormGammaGradPerSample(x, dy, batch, tokens, dim, eps)),
        numericGradient([&](const Vec &v) { return ln(x, v, beta); }, gamma));
    EXPECT_FD(
        sumOverSamples(ref::biasGradPerSample(dy, batch, tokens, dim)),
        numericGradient([&](const Vec &v) { return ln(x, gamma, v); }, beta));
  });
}

TEST(ReferenceLayers, RopeBackwardIsTheGradientAndRopePreservesNorms) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 5, heads = 2, headDim = 6;
    int64_t n = batch * tokens * heads * headDim;
    Vec x = normal(rng, n), dy = normal(rng, n);
    EXPECT_FD(ref::ropeBackward(dy, batch, tokens, heads, headDim, 100.0),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::ropeForward(v, batch, tokens, heads,
                                                    headDim, 100.0));
                  },
                  x));
    // A rotation: norms are kept, and token 0 is not rotated.
    Vec y = ref::ropeForward(x, batch, tokens, heads, headDim, 100.0);
    EXPECT_NEAR(ref::sumSquares(y), ref::sumSquares(x),
                1e-12 * ref::sumSquares(x));
    for (int64_t j = 0; j < heads * headDim; ++j)
      EXPECT_DOUBLE_EQ(y[j], x[j]);
  });
}

TEST(ReferenceLayers, AttentionGradientsMatchFiniteDifferences) {
  forEachCase(4, [](Rng &rng) {
    ref::AttentionShape s{2, 4, 4, 2, 2, bool(uniformInt(rng, 0, 1))};
    int64_t nq = s.batch * s.tokens * s.heads * s.headDim;
    int64_t nk = s.batch * s.tokens * s.kvHeads * s.headDim;
    Vec q = normal(rng, nq), k = normal(rng, nk), v = normal(rng, nk),
        dout = normal(rng, nq);
    ref::AttentionGrads g = ref::attentionBackward(q, k, v, dout, s);
    auto f = [&](const Vec &qq, const Vec &kk, const Vec &vv) {
      return dot(dout, ref::attentionForward(qq, kk, vv, s));
    };
    EXPECT_FD(g.dq,
              numericGradient([&](const Vec &x) { return f(x, k, v); }, q));
    EXPECT_FD(g.dk,
              numericGradient([&](const Vec &x) { return f(q, x, v); }, k));
    EXPECT_FD(g.dv,
              numericGradient([&](const Vec &x) { return f(q, k, x); }, v));
  });
}

TEST(ReferenceLayers, ActivationDerivativesMatchFiniteDifferences) {
  for (Activation act : {Activation::Relu, Activation::Silu,
                         Activation::GeluErf, Activation::GeluTanh})
    forEachCase(2, [&](Rng &rng) {
      Vec x = normal(rng, 40, 3.0), dy = normal(rng, 40);
      for (double &e : x) // keep clear of relu's kink
        if (std::fabs(e) < 1e-3)
          e = 0.5;
      EXPECT_FD(ref::activationBackward(act, x, dy),
                numericGradient(
                    [&](const Vec &v) {
                      return dot(dy, ref::activationForward(act, v));
                    },
                    x));
    });
  // Known values: gelu(1) = Phi(1) = 0.8413447460685429, silu(1) = 1/(1+e^-1).
  EXPECT_NEAR(ref::activation(Activation::GeluErf, 1.0), 0.8413447460685429,
              1e-15);
  EXPECT_NEAR(ref::activation(Activation::Silu, 1.0), 0.7310585786300049,
              1e-15);
  EXPECT_NEAR(ref::activation(Activation::GeluTanh, 1.0), 0.8411919906082768,
              1e-15);
}

TEST(ReferenceLayers, LossGradientsMatchFiniteDifferences) {
  forEachCase(4, [](Rng &rng) {
    int64_t batch = 3, tokens = 4, classes = 5;
    Reduction red = uniformInt(rng, 0, 1) ? Reduction::Mean : Reduction::Sum;
    ref::Tokens targets = randomTargets(rng, batch * tokens, classes, -1, 4);
    Vec logits = normal(rng, batch * tokens * classes),
        dloss = normal(rng, batch);
    EXPECT_FD(ref::crossEntropyBackward(logits, targets, dloss, batch, tokens,
                                        classes, true, -1, red),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dloss, ref::crossEntropyForward(
                                          v, targets, batch, tokens, classes,
                                          true, -1, red));
                  },
                  logits));
    Vec p = normal(rng, batch * 3), t = normal(rng, batch * 3);
    EXPECT_FD(ref::mseBackward(p, t, dloss, batch, 3, red),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dloss, ref::mseForward(v, t, batch, 3, red));
                  },
                  p));
  });
  // A sample whose tokens are all ignored has loss 0 (mean over none).
  Vec logits(2 * 3, 0.5);
  EXPECT_EQ(ref::crossEntropyForward(logits, {-1, -1}, 1, 2, 3, true, -1,
                                     Reduction::Mean)[0],
            0.0);
}

/// Every per-sample gradient element of every parameter against finite
/// differences of that sample's loss.
void expectPerSampleGradientsMatchFiniteDifferences(ref::Model &m,
                                                    const ref::Batch &batch) {
  ref::StepResult r = m.perSampleGradients(batch);
  for (int64_t b = 0; b < batch.size; ++b)
    for (const std::string &p : m.trainableParams()) {
      SCOPED_TRACE("parameter " + p + ", sample " + std::to_string(b));
      Vec saved = m.param(p);
      Vec numeric = numericGradient(
          [&](const Vec &v) {
            m.param(p) = v;
            return m.losses(batch)[b];
          },
          saved);
      m.param(p) = saved;
      EXPECT_FD(r.grads.at(p)[b], numeric);
    }
}

TEST(ReferenceModel, MlpPerSampleGradientsMatchFiniteDifferences) {
  forEachCase(2, [](Rng &rng) {
    ref::Model m = ref::mlpClassifier(5, 7, 3);
    randomizeParams(m, rng, 0.5);
    expectPerSampleGradientsMatchFiniteDifferences(m, mlpBatch(rng, 3, 5, 3));
  });
}

TEST(ReferenceModel, TransformerLmPerSampleGradientsMatchFiniteDifferences) {
  forEachCase(1, [](Rng &rng) {
    ref::TinyLmShape s;
    s.vocab = 7;
    s.tokens = 5;
    s.width = 8;
    s.blocks = 2;
    s.heads = 2;
    s.kvHeads = 1;
    s.ffn = 6;
    ref::Model m = ref::tinyLm(s);
    randomizeParams(m, rng, 0.4);
    m.setTrainable("b1.n2", false); // a frozen parameter gets no gradient
    expectPerSampleGradientsMatchFiniteDifferences(m, lmBatch(rng, 2, s));
    EXPECT_EQ(m.perSampleGradients(lmBatch(rng, 1, s)).grads.count("b1.n2"),
              0u);
  });
}

TEST(ReferenceDpStep, ClipsMasksSumsAndStepsAsDefined) {
  for (ClipMode mode :
       {ClipMode::Flat, ClipMode::PerLayer, ClipMode::Automatic})
    forEachCase(2, [&](Rng &rng) {
      ref::Model m = ref::mlpClassifier(4, 6, 3);
      randomizeParams(m, rng, 1.0);
      ref::Batch batch = mlpBatch(rng, 5, 4, 3);
      Vec mask{1, 0, 1, 1, 1};
      ref::Recipe recipe;
      recipe.clip = mode;
      recipe.maxNorm = 0.3;
      recipe.lr = 0.5;
      recipe.expectedBatch = 4;
      std::map<std::string, Vec> before;
      for (const std::string &p : m.paramNames())
        before[p] = m.param(p);
      ref::StepResult r = m.dpStep(batch, mask, recipe);

      double bound = mode == ClipMode::PerLayer
                         ? recipe.maxNorm / std::sqrt(6.0)
                         : recipe.maxNorm;
      for (int64_t b = 0; b < batch.size; ++b) {
        double total = 0;
        for (const std::string &p : m.trainableParams()) {
          double c = r.clip[p][b];
          if (mask[b] == 0) {
            EXPECT_EQ(c, 0.0);
            continue;
          }
          double n = std::sqrt(r.norm2[p][b]);
          double want = mode == ClipMode::PerLayer
                            ? std::min(1.0, bound / (n + 1e-6))
                        : mode == ClipMode::Flat
                            ? std::min(1.0, bound / (r.norm[b] + 1e-6))
                            : bound / (r.norm[b] + recipe.gamma);
          EXPECT_DOUBLE_EQ(c, want);
          if (mode == ClipMode::PerLayer)
            EXPECT_LE(c * n, bound);
          total += c * c * r.norm2[p][b];
        }
        if (mode == ClipMode::Flat)
          EXPECT_LE(std::sqrt(total), recipe.maxNorm);
      }
      // The clipped sum skips the masked sample; SGD steps by it / B.
      for (const std::string &p : m.trainableParams()) {
        Vec want(m.param(p).size(), 0.0);
        for (int64_t b = 0; b < batch.size; ++b)
          for (size_t i = 0; i < want.size(); ++i)
            want[i] += mask[b] * r.clip[p][b] * r.grads[p][b][i];
        EXPECT_CLOSE(r.clippedSum[p], want, 1e-14, DType::F64);
        Vec stepped = before[p];
        for (size_t i = 0; i < want.size(); ++i)
          stepped[i] -= recipe.lr * want[i] / recipe.expectedBatch;
        EXPECT_CLOSE(m.param(p), stepped, 1e-14, DType::F64);
      }
    });
}

TEST(ReferenceDpStep, ScalesNormsByTheRoundingSlack) {
  for (ClipMode mode :
       {ClipMode::Flat, ClipMode::PerLayer, ClipMode::Automatic})
    forEachCase(1, [&](Rng &rng) {
      ref::Model m = ref::mlpClassifier(4, 6, 3);
      randomizeParams(m, rng, 1.0);
      ref::Batch batch = mlpBatch(rng, 3, 4, 3);
      ref::Recipe recipe;
      recipe.clip = mode;
      recipe.maxNorm = 0.3;
      recipe.normRelErr = 1e-3;
      ref::StepResult r = m.dpStep(batch, Vec(3, 1.0), recipe);
      double bound = mode == ClipMode::PerLayer
                         ? recipe.maxNorm / std::sqrt(6.0)
                         : recipe.maxNorm;
      for (const std::string &p : m.trainableParams())
        for (int64_t b = 0; b < batch.size; ++b) {
          double n = (mode == ClipMode::PerLayer ? std::sqrt(r.norm2[p][b])
                                                 : r.norm[b]) *
                     (1 + recipe.normRelErr);
          double want = mode == ClipMode::Automatic
                            ? bound / (n + recipe.gamma)
                            : std::min(1.0, bound / (n + 1e-6));
          EXPECT_DOUBLE_EQ(r.clip[p][b], want);
        }
    });
}

TEST(ReferenceDpStep, EmptyBatchStepsByWeightDecayOnly) {
  forEachCase(1, [](Rng &rng) {
    ref::Model m = ref::mlpClassifier(4, 6, 3);
    randomizeParams(m, rng, 1.0);
    ref::Batch empty; // size 0, no rows
    ref::Recipe recipe;
    recipe.lr = 0.5;
    recipe.weightDecay = 0.1;
    std::map<std::string, Vec> before;
    for (const std::string &p : m.paramNames())
      before[p] = m.param(p);
    ref::StepResult r = m.dpStep(empty, Vec(), recipe);
    for (const std::string &p : m.trainableParams()) {
      EXPECT_EQ(r.clippedSum[p], Vec(before[p].size(), 0.0)) << p;
      Vec want = before[p];
      for (double &w : want)
        w -= recipe.lr * recipe.weightDecay * w;
      EXPECT_CLOSE(m.param(p), want, 1e-15, DType::F64);
    }
  });
}

} // namespace
