//===- BackwardKernelTest.cpp - Input-gradient kernels vs the reference ---===//
//
// The reference derives its input gradients independently (explicit
// Jacobians for the norms, the softmax Jacobian for attention). Outputs a
// kernel writes start as NaN; outputs it accumulates into start as random
// values that the expected result includes.
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

/// init + v when accumulating, v otherwise.
Vec expected(bool accumulate, const Vec &init, const Vec &v) {
  return accumulate ? ref::addForward(init, v) : v;
}

/// The size of the terms a norm's dx sums before they cancel: per element
///   rstd (|g| + |mean_j g| + |xhat| |mean_j(g xhat)|), g = dy * gamma,
/// (no mean_j g for RMSNorm) plus |init| when accumulating. dx is a
/// projection of g that can cancel to far below these terms (almost
/// entirely at dim 1 or 2, where the exact dx is of order eps), so an error
/// of a few ulps of the terms, e.g. from rstd stored in f32, is measured
/// against them rather than against dx.
Vec normBackwardScale(const Vec &x, const Vec &gamma, const Vec &dy,
                      int64_t rows, int64_t dim, double eps, bool centre,
                      const Vec *init) {
  Vec scale(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < dim; ++j)
      mu += x[r * dim + j] / dim;
    if (!centre)
      mu = 0;
    for (int64_t j = 0; j < dim; ++j)
      var += (x[r * dim + j] - mu) * (x[r * dim + j] - mu) / dim;
    double rstd = 1 / std::sqrt(var + eps), meanG = 0, meanGX = 0;
    for (int64_t j = 0; j < dim; ++j) {
      double g = dy[r * dim + j] * gamma[j];
      meanG += g / dim;
      meanGX += g * (x[r * dim + j] - mu) * rstd / dim;
    }
    for (int64_t j = 0; j < dim; ++j) {
      int64_t i = r * dim + j;
      double xhat = (x[i] - mu) * rstd;
      scale[i] = rstd * (std::fabs(dy[i] * gamma[j]) +
                         (centre ? std::fabs(meanG) : 0.0) +
                         std::fabs(xhat * meanGX)) +
                 (init ? std::fabs((*init)[i]) : 0.0);
    }
  }
  return scale;
}

/// The size of the two terms an activation's derivative sums, times |dy|,
/// plus |init| when accumulating: s + x s (1 - s) (SiLU), Phi + x phi
/// (GELU) and 0.5 (1 + tanh u) + 0.5 x sech^2(u) u' (tanh GELU) have a
/// root near x = -0.75 (GELU) or -1.28 (SiLU), where the derivative cancels
/// to far below its terms; a few ulps of the terms is measured against
/// these rather than against dx.
Vec activationBackwardScale(Activation act, const Vec &x, const Vec &dy,
                            const Vec *init) {
  Vec scale(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i], terms = 1;
    if (act == Activation::Silu) {
      double s = 1 / (1 + std::exp(-v));
      terms = s + std::fabs(v * s * (1 - s));
    } else if (act == Activation::GeluErf) {
      terms = 0.5 * std::erfc(-v / std::sqrt(2.0)) +
              std::fabs(v) * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
    } else if (act == Activation::GeluTanh) {
      double c = std::sqrt(2 / M_PI), u = c * (v + 0.044715 * v * v * v);
      double sech = 1 / std::cosh(u);
      terms = 0.5 * (1 + std::tanh(u)) +
              std::fabs(0.5 * v * sech * sech * c * (1 + 3 * 0.044715 * v * v));
    }
    scale[i] = std::fabs(dy[i]) * terms + (init ? std::fabs((*init)[i]) : 0);
  }
  return scale;
}

/// The size of the terms attention's backward sums, per output element:
/// with |dP|[t,s] = sum_j |dO_t,j V_s,j|, |D|_t = sum_s P |dP| and
/// A = P (|dP| + |D|) (the size of dS = P (dP - D)),
///   dQ: scale sum_s A |K_s|,  dK: scale sum_t A |Q_t|,  dV: sum_t P |dO_t|.
/// dS cancels wherever a row of dP is nearly constant, so the gradients
/// are measured against these.
ref::AttentionGrads attentionTermSize(const Vec &q, const Vec &k, const Vec &v,
                                      const Vec &dout,
                                      const ref::AttentionShape &s) {
  ref::AttentionGrads g{Vec(q.size(), 0.0), Vec(k.size(), 0.0),
                        Vec(v.size(), 0.0)};
  int64_t T = s.tokens, dh = s.headDim;
  double scale = 1 / std::sqrt(double(dh));
  auto qi = [&](int64_t b, int64_t t, int64_t h, int64_t j) {
    return ((b * T + t) * s.heads + h) * dh + j;
  };
  auto ki = [&](int64_t b, int64_t t, int64_t h, int64_t j) {
    return ((b * T + t) * s.kvHeads + h) * dh + j;
  };
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      int64_t kv = h / (s.heads / s.kvHeads);
      for (int64_t t = 0; t < T; ++t) {
        int64_t last = s.causal ? t : T - 1;
        Vec p(T, 0.0), adp(T, 0.0);
        double mx = -INFINITY, z = 0, ad = 0;
        for (int64_t u = 0; u <= last; ++u) {
          double sc = 0;
          for (int64_t j = 0; j < dh; ++j) {
            sc += q[qi(b, t, h, j)] * k[ki(b, u, kv, j)] * scale;
            adp[u] += std::fabs(dout[qi(b, t, h, j)] * v[ki(b, u, kv, j)]);
          }
          p[u] = sc;
          mx = std::max(mx, sc);
        }
        for (int64_t u = 0; u <= last; ++u)
          z += std::exp(p[u] - mx);
        for (int64_t u = 0; u <= last; ++u) {
          p[u] = std::exp(p[u] - mx) / z;
          ad += p[u] * adp[u];
        }
        for (int64_t u = 0; u <= last; ++u) {
          double a = p[u] * (adp[u] + ad);
          for (int64_t j = 0; j < dh; ++j) {
            g.dq[qi(b, t, h, j)] += scale * a * std::fabs(k[ki(b, u, kv, j)]);
            g.dk[ki(b, u, kv, j)] += scale * a * std::fabs(q[qi(b, t, h, j)]);
            g.dv[ki(b, u, kv, j)] += p[u] * std::fabs(dout[qi(b, t, h, j)]);
          }
        }
      }
    }
  return g;
}

TEST(CrossEntropyBackward, MatchesReferenceWithIgnoredTokensAndSeeds) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 5), tokens = uniformInt(rng, 1, 8),
            classes = uniformInt(rng, 2, 30);
    bool hasIgnore = uniformInt(rng, 0, 1);
    Reduction red = uniformInt(rng, 0, 1) ? Reduction::Mean : Reduction::Sum;
    ref::Tokens targets =
        randomTargets(rng, batch * tokens, classes, -1, hasIgnore ? 4 : 0);
    Buffer logits(dt, normal(rng, batch * tokens * classes, 2.0));
    Vec refLse;
    ref::crossEntropyForward(logits.values(), targets, batch, tokens, classes,
                             hasIgnore, -1, red, &refLse);
    // Seeds: 1 for real samples, 0 for a masked one, or any scale.
    Vec seeds = uniform(rng, batch, 0, 2);
    seeds[0] = 0;
    Buffer lse(accOf(dt), refLse), dloss(accOf(dt), seeds);
    Buffer dlogits(dt, batch * tokens * classes);
    TestRank r;
    cpu::cross_entropy_backward(r.get(), dt, logits.data(), targets.data(),
                                lse.data(), dloss.data(), dlogits.data(), batch,
                                tokens, classes, hasIgnore, -1, red);
    EXPECT_CLOSE(dlogits.values(),
                 ref::crossEntropyBackward(logits.values(), targets,
                                           dloss.values(), batch, tokens,
                                           classes, hasIgnore, -1, red),
                 tolerance(dt), dt);
  });
}

TEST(CrossEntropyBackward, InPlaceEqualsSeparateOutput) {
  // The compiled step writes the gradient over the logits when nothing else
  // reads them: the same bits as into a separate buffer.
  forEachCaseAndDType(8, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 6),
            classes = uniformInt(rng, 2, 40);
    ref::Tokens targets = randomTargets(rng, batch * tokens, classes, -1, 3);
    Buffer logits(dt, normal(rng, batch * tokens * classes, 2.0));
    Vec refLse;
    ref::crossEntropyForward(logits.values(), targets, batch, tokens, classes,
                             true, -1, Reduction::Mean, &refLse);
    Buffer lse(accOf(dt), refLse), dloss(accOf(dt), uniform(rng, batch, 0, 2));
    Buffer separate(dt, batch * tokens * classes);
    TestRank r;
    cpu::cross_entropy_backward(
        r.get(), dt, logits.data(), targets.data(), lse.data(), dloss.data(),
        separate.data(), batch, tokens, classes, true, -1, Reduction::Mean);
    cpu::cross_entropy_backward(r.get(), dt, logits.data(), targets.data(),
                                lse.data(), dloss.data(), logits.data(), batch,
                                tokens, classes, true, -1, Reduction::Mean);
    EXPECT_EQ(logits.values(), separate.values());
  });
}

TEST(MseBackward, MatchesReferenceMeanAndSum) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 8), features = uniformInt(rng, 1, 12);
    Reduction red = uniformInt(rng, 0, 1) ? Reduction::Mean : Reduction::Sum;
    Buffer p(dt, normal(rng, batch * features)),
        t(dt, normal(rng, batch * features));
    Buffer dloss(accOf(dt), uniform(rng, batch, 0, 2)),
        dp(dt, batch * features);
    TestRank r;
    cpu::mse_backward(r.get(), dt, p.data(), t.data(), dloss.data(), dp.data(),
                      batch, features, red);
    EXPECT_CLOSE(dp.values(),
                 ref::mseBackward(p.values(), t.values(), dloss.values(), batch,
                                  features, red),
                 tolerance(dt), dt);
  });
}

TEST(LinearBackwardInput, MatchesReferenceWrittenAndAccumulated) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t rows = uniformInt(rng, 1, 24), in = uniformInt(rng, 1, 40),
            out = uniformInt(rng, 1, 40);
    bool acc = uniformInt(rng, 0, 1);
    Buffer dy(dt, uniform(rng, rows * out)), w(dt, uniform(rng, out * in));
    Buffer dx = outputBuffer(rng, dt, rows * in, acc);
    Vec init = dx.values();
    TestRank r;
    cpu::linear_backward_input(r.get(), dt, dy.data(), w.data(), dx.data(),
                               rows, in, out, acc);
    EXPECT_CLOSE(dx.values(),
                 expected(acc, init,
                          ref::linearBackwardInput(dy.values(), w.values(),
                                                   rows, in, out)),
                 tolerance(dt), dt);
  });
}

TEST(RmsNormBackward, MatchesExplicitJacobianAndPerSampleGamma) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 6),
            dim = uniformInt(rng, 1, 32), rows = batch * tokens;
    double eps = 1e-6;
    bool acc = uniformInt(rng, 0, 1), withGamma = uniformInt(rng, 0, 1);
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2)),
        dy(dt, normal(rng, rows * dim));
    Vec refRstd;
    ref::rmsNormForward(x.values(), gamma.values(), rows, dim, eps, &refRstd);
    Buffer rstd(accOf(dt), refRstd);
    Buffer dx = outputBuffer(rng, dt, rows * dim, acc);
    Buffer dgamma(accOf(dt), batch * dim);
    Vec init = dx.values();
    TestRank r;
    cpu::rms_norm_backward(
        r.get(), dt, x.data(), gamma.data(), rstd.data(), dy.data(), dx.data(),
        withGamma ? dgamma.data() : nullptr, nullptr, batch, tokens, dim, acc);
    Vec scale = normBackwardScale(x.values(), gamma.values(), dy.values(), rows,
                                  dim, eps, false, acc ? &init : nullptr);
    EXPECT_CLOSE_TO_SCALE(
        dx.values(),
        expected(acc, init,
                 ref::rmsNormBackward(x.values(), gamma.values(), dy.values(),
                                      rows, dim, eps)),
        scale, tolerance(dt), dt);
    if (withGamma) {
      Vec flat;
      for (const Vec &g : ref::rmsNormGammaGradPerSample(
               x.values(), dy.values(), batch, tokens, dim, eps))
        flat.insert(flat.end(), g.begin(), g.end());
      Vec terms = gammaGradTermSize(x.values(), dy.values(), batch, tokens, dim,
                                    eps, false);
      EXPECT_CLOSE_TO_SCALE(dgamma.values(), flat, terms, accTolerance(dt), dt);
    }
  });
}

// A rematerialized RMSNorm's result made by its derivative: the bits of
// rms_norm_forward's y from the rstd it stored, and the same dx and gamma
// gradients as without it.
TEST(RmsNormBackward, RemakesTheForwardsOutputBits) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 6),
            dim = uniformInt(rng, 1, 48), rows = batch * tokens;
    bool acc = uniformInt(rng, 0, 1);
    bool withNorm = uniformInt(rng, 0, 1);
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2)),
        dy(dt, normal(rng, rows * dim)), y(dt, rows * dim),
        rstd(accOf(dt), rows);
    TestRank r;
    cpu::rms_norm_forward(r.get(), dt, x.data(), gamma.data(), y.data(),
                          rstd.data(), rows, dim, 1e-5);
    Buffer start = outputBuffer(rng, dt, rows * dim, acc);
    Buffer dx1(dt, start.values()), dx2(dt, start.values()),
        g1(accOf(dt), batch * dim), g2(accOf(dt), batch * dim),
        n1(accOf(dt), Vec(batch, 0.0)), n2(accOf(dt), Vec(batch, 0.0)),
        remade(dt, rows * dim);
    if (withNorm) {
      cpu::rms_norm_backward_norm(r.get(), dt, x.data(), gamma.data(),
                                  rstd.data(), dy.data(), dx1.data(), g1.data(),
                                  n1.data(), remade.data(), batch, tokens, dim,
                                  acc);
      cpu::rms_norm_backward_norm(r.get(), dt, x.data(), gamma.data(),
                                  rstd.data(), dy.data(), dx2.data(), g2.data(),
                                  n2.data(), nullptr, batch, tokens, dim, acc);
    } else {
      cpu::rms_norm_backward(r.get(), dt, x.data(), gamma.data(), rstd.data(),
                             dy.data(), dx1.data(), g1.data(), remade.data(),
                             batch, tokens, dim, acc);
      cpu::rms_norm_backward(r.get(), dt, x.data(), gamma.data(), rstd.data(),
                             dy.data(), dx2.data(), g2.data(), nullptr, batch,
                             tokens, dim, acc);
    }
    EXPECT_EQ(remade.values(), y.values());
    EXPECT_EQ(dx1.values(), dx2.values());
    EXPECT_EQ(g1.values(), g2.values());
    EXPECT_EQ(n1.values(), n2.values());
  });
}

TEST(LayerNormBackward, MatchesExplicitJacobianAndPerSampleGammaBeta) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 4), tokens = uniformInt(rng, 1, 6),
            dim = uniformInt(rng, 2, 32), rows = batch * tokens;
    double eps = 1e-5;
    bool acc = uniformInt(rng, 0, 1), withGamma = uniformInt(rng, 0, 1),
         withBeta = uniformInt(rng, 0, 1);
    Buffer x(dt, normal(rng, rows * dim)), gamma(dt, uniform(rng, dim, 0.5, 2)),
        dy(dt, normal(rng, rows * dim));
    Vec refMean, refRstd;
    ref::layerNormForward(x.values(), gamma.values(), nullptr, rows, dim, eps,
                          &refMean, &refRstd);
    Buffer mean(accOf(dt), refMean), rstd(accOf(dt), refRstd);
    Buffer dx = outputBuffer(rng, dt, rows * dim, acc);
    Buffer dgamma(accOf(dt), batch * dim), dbeta(accOf(dt), batch * dim);
    Vec init = dx.values();
    TestRank r;
    cpu::layer_norm_backward(
        r.get(), dt, x.data(), gamma.data(), mean.data(), rstd.data(),
        dy.data(), dx.data(), withGamma ? dgamma.data() : nullptr,
        withBeta ? dbeta.data() : nullptr, batch, tokens, dim, acc);
    Vec scale = normBackwardScale(x.values(), gamma.values(), dy.values(), rows,
                                  dim, eps, true, acc ? &init : nullptr);
    EXPECT_CLOSE_TO_SCALE(
        dx.values(),
        expected(acc, init,
                 ref::layerNormBackward(x.values(), gamma.values(), dy.values(),
                                        rows, dim, eps)),
        scale, tolerance(dt), dt);
    auto flatten = [](const ref::PerSample &p) {
      Vec f;
      for (const Vec &g : p)
        f.insert(f.end(), g.begin(), g.end());
      return f;
    };
    Vec terms = gammaGradTermSize(x.values(), dy.values(), batch, tokens, dim,
                                  eps, true);
    if (withGamma)
      EXPECT_CLOSE_TO_SCALE(
          dgamma.values(),
          flatten(ref::layerNormGammaGradPerSample(x.values(), dy.values(),
                                                   batch, tokens, dim, eps)),
          terms, accTolerance(dt), dt);
    if (withBeta)
      EXPECT_CLOSE(
          dbeta.values(),
          flatten(ref::biasGradPerSample(dy.values(), batch, tokens, dim)),
          accTolerance(dt), dt);
  });
}

TEST(RopeBackward, IsTheTransposeRotationInPlaceOrAccumulated) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t batch = uniformInt(rng, 1, 3), tokens = uniformInt(rng, 1, 20),
            heads = uniformInt(rng, 1, 3), headDim = 2 * uniformInt(rng, 1, 8);
    int64_t n = batch * tokens * heads * headDim;
    // 0: out of place, 1: in place, 2: accumulate.
    int64_t mode = uniformInt(rng, 0, 2);
    Buffer dy(dt, uniform(rng, n));
    Vec dyv = dy.values();
    Buffer dx = mode == 1 ? dy : outputBuffer(rng, dt, n, mode == 2);
    Vec init = dx.values();
    TestRank r;
    cpu::rope_backward(r.get(), dt, mode == 1 ? dx.data() : dy.data(),
                       dx.data(), nullptr, batch, tokens, heads, headDim,
                       10000.0, mode == 2);
    EXPECT_CLOSE(dx.values(),
                 expected(mode == 2, init,
                          ref::ropeBackward(dyv, batch, tokens, heads, headDim,
                                            10000.0)),
                 tolerance(dt), dt);
  });
}

TEST(AttentionBackward, MatchesSoftmaxJacobianReferenceWithGqaAndCausal) {
  forEachCaseAndDType(20, [](Rng &rng, DType dt) {
    int64_t kvHeads = uniformInt(rng, 1, 2);
    ref::AttentionShape s{
        uniformInt(rng, 1, 3),           uniformInt(rng, 1, 10),
        kvHeads * uniformInt(rng, 1, 3), kvHeads,
        2 * uniformInt(rng, 1, 8),       bool(uniformInt(rng, 0, 1))};
    int64_t nq = s.batch * s.tokens * s.heads * s.headDim;
    int64_t nk = s.batch * s.tokens * s.kvHeads * s.headDim;
    Buffer q(dt, uniform(rng, nq, -2, 2)), k(dt, uniform(rng, nk, -2, 2)),
        v(dt, uniform(rng, nk)), dout(dt, uniform(rng, nq));
    Vec refLse;
    Vec refO =
        ref::attentionForward(q.values(), k.values(), v.values(), s, &refLse);
    // The forward pass's outputs, as the kernel would have stored them.
    Buffer o(dt, refO), lse(accOf(dt), refLse);
    Buffer dq(dt, nq), dk(dt, nk), dv(dt, nk);
    TestRank r;
    cpu::attention_backward(r.get(), dt, q.data(), k.data(), v.data(), o.data(),
                            lse.data(), dout.data(), dq.data(), dk.data(),
                            dv.data(), s.batch, s.tokens, s.heads, s.kvHeads,
                            s.headDim, s.causal, nullptr);
    ref::AttentionGrads g = ref::attentionBackward(
        q.values(), k.values(), v.values(), dout.values(), s);
    ref::AttentionGrads terms =
        attentionTermSize(q.values(), k.values(), v.values(), dout.values(), s);
    EXPECT_CLOSE_TO_SCALE(dq.values(), g.dq, terms.dq, tolerance(dt), dt);
    EXPECT_CLOSE_TO_SCALE(dk.values(), g.dk, terms.dk, tolerance(dt), dt);
    EXPECT_CLOSE_TO_SCALE(dv.values(), g.dv, terms.dv, tolerance(dt), dt);
  });
}

TEST(ActivationBackward, MatchesReferenceDerivativeForEveryActivation) {
  for (Activation act : {Activation::Relu, Activation::Silu,
                         Activation::GeluErf, Activation::GeluTanh}) {
    SCOPED_TRACE("activation " + std::to_string(int(act)));
    forEachCaseAndDType(8, [&](Rng &rng, DType dt) {
      int64_t n = uniformInt(rng, 1, 300);
      bool acc = uniformInt(rng, 0, 1);
      Buffer x(dt, normal(rng, n, 3.0)), dy(dt, normal(rng, n));
      Buffer dx = outputBuffer(rng, dt, n, acc);
      Vec init = dx.values();
      TestRank r;
      cpu::activation_backward(r.get(), dt, act, x.data(), dy.data(), dx.data(),
                               n, acc);
      Vec scale = activationBackwardScale(act, x.values(), dy.values(),
                                          acc ? &init : nullptr);
      EXPECT_CLOSE_TO_SCALE(
          dx.values(),
          expected(acc, init,
                   ref::activationBackward(act, x.values(), dy.values())),
          scale, tolerance(dt), dt);
    });
  }
}

TEST(GluBackward, MatchesTheProductAndChainRulesOrEitherGradient) {
  // dgate = act'(gate) (dy * up) and dup = dy * act(gate), from the f64
  // reference activation and its derivative; either output may be null.
  for (Activation act : {Activation::Relu, Activation::Silu,
                         Activation::GeluErf, Activation::GeluTanh}) {
    SCOPED_TRACE("activation " + std::to_string(int(act)));
    forEachCaseAndDType(8, [&](Rng &rng, DType dt) {
      int64_t n = uniformInt(rng, 1, 300);
      int64_t which = uniformInt(rng, 0, 2); // 0: both, 1: dgate, 2: dup
      Buffer gate(dt, normal(rng, n, 3.0)), up(dt, normal(rng, n)),
          dy(dt, normal(rng, n)), dgate(dt, normal(rng, n)),
          dup(dt, normal(rng, n));
      Vec g = gate.values(), u = up.values(), d = dy.values();
      Vec dyUp(size_t(n), 0.0), wantUp = ref::activationForward(act, g);
      for (int64_t i = 0; i < n; ++i) {
        dyUp[i] = d[i] * u[i];
        wantUp[i] *= d[i];
      }
      Vec wantGate = ref::activationBackward(act, g, dyUp);
      Vec untouched = dgate.values(), untouchedUp = dup.values();
      TestRank r;
      // With dup, the forward's output too: glu_forward's bits.
      Buffer y(dt, normal(rng, n)), forward(dt, normal(rng, n));
      cpu::glu_backward(r.get(), dt, act, gate.data(), up.data(), dy.data(),
                        which == 2 ? nullptr : dgate.data(),
                        which == 1 ? nullptr : dup.data(),
                        which == 1 ? nullptr : y.data(), n);
      cpu::glu_forward(r.get(), dt, act, gate.data(), up.data(), forward.data(),
                       n);
      if (which != 1)
        EXPECT_EQ(y.values(), forward.values());
      Vec scale = activationBackwardScale(act, g, dyUp, nullptr);
      if (which != 2)
        EXPECT_CLOSE_TO_SCALE(dgate.values(), wantGate, scale, tolerance(dt),
                              dt);
      else
        EXPECT_EQ(dgate.values(), untouched);
      if (which != 1)
        EXPECT_CLOSE(dup.values(), wantUp, tolerance(dt), dt);
      else
        EXPECT_EQ(dup.values(), untouchedUp);
    });
  }
}

TEST(MulBackward, GivesBothOperandGradientsOrEitherOne) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    int64_t n = uniformInt(rng, 1, 300);
    bool accA = uniformInt(rng, 0, 1), accB = uniformInt(rng, 0, 1);
    int64_t which = uniformInt(rng, 0, 2); // 0: both, 1: only da, 2: only db
    Buffer a(dt, normal(rng, n)), b(dt, normal(rng, n)), dy(dt, normal(rng, n));
    Buffer da = outputBuffer(rng, dt, n, accA),
           db = outputBuffer(rng, dt, n, accB);
    Vec initA = da.values(), initB = db.values();
    TestRank r;
    cpu::mul_backward(r.get(), dt, a.data(), b.data(), dy.data(),
                      which == 2 ? nullptr : da.data(),
                      which == 1 ? nullptr : db.data(), n, accA, accB);
    if (which != 2)
      EXPECT_CLOSE(
          da.values(),
          expected(accA, initA, ref::mulForward(dy.values(), b.values())),
          tolerance(dt), dt);
    if (which != 1)
      EXPECT_CLOSE(
          db.values(),
          expected(accB, initB, ref::mulForward(dy.values(), a.values())),
          tolerance(dt), dt);
  });
}

TEST(Accumulate, AddsIntoTheDestination) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    int64_t n = uniformInt(rng, 1, 300);
    Buffer x(dt, normal(rng, n)), y(dt, normal(rng, n));
    Vec init = y.values();
    TestRank r;
    cpu::accumulate(r.get(), dt, x.data(), y.data(), n);
    EXPECT_CLOSE(y.values(), ref::addForward(init, x.values()), tolerance(dt),
                 dt);
  });
}

} // namespace
