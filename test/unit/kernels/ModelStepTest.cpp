//===- ModelStepTest.cpp - Whole DP-SGD steps from kernels vs reference ---===//
//
// The kernels composed as the compiler composes them (book-keeping: one
// backward pass that keeps activations and output gradients and adds every
// layer's norm into n2, then the clip factors, then each clipped weight
// gradient once, then the optimizer) for the two example models, against
// the reference's naive per-sample DP step: losses, per-sample norms and
// the updated parameters. The transformer uses every norm method: shared
// Grams for q/k/v and gate/up, direct for wo, Gram for down and the head,
// the embedding norm and norm_rows for the RMSNorm gammas.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"
#include "reference/Models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>

using namespace dpc::test;
using dprt::accOf;
using dprt::Activation;
using dprt::ClipMode;
using dprt::DType;
using dprt::Reduction;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

/// The parameters and optimizer state of a model run by kernels: compute
/// copies (dt) and acc master, gradient, Adam m and v.
class KernelParams {
public:
  KernelParams(DType dt, const ref::Model &m) : dt_(dt) {
    for (const std::string &p : m.paramNames()) {
      const Vec &v = m.param(p);
      int64_t n = int64_t(v.size());
      params_[p] = {std::make_unique<Buffer>(dt, v),
                    std::make_unique<Buffer>(accOf(dt), v),
                    std::make_unique<Buffer>(accOf(dt), Vec(n, 0.0)),
                    std::make_unique<Buffer>(accOf(dt), Vec(n, 0.0)),
                    std::make_unique<Buffer>(accOf(dt), Vec(n, 0.0))};
    }
  }
  const void *w(const std::string &p) const { return params_.at(p).w->data(); }
  void *grad(const std::string &p) { return params_.at(p).grad->data(); }
  Vec master(const std::string &p) const {
    return params_.at(p).master->values();
  }

  Vec gradient(const std::string &p) const {
    return params_.at(p).grad->values();
  }

  /// The optimizer on every master, then the compute copies refreshed and
  /// the gradients zeroed (what dp_apply does, noise off).
  void apply(TestRank &rank, const ref::Recipe &r) {
    // The learning rate and the weight decay reach the kernels through the
    // StepState, as the driver writes them.
    rank.state().lr = r.lr;
    rank.state().weightDecay = r.weightDecay;
    for (auto &[name, s] : params_) {
      int64_t n = s.w->size();
      switch (r.optimizer) {
      case dprt::OptimizerKind::SGD:
        cpu::sgd_update(rank.get(), accOf(dt_), s.master->data(),
                        s.grad->data(), n);
        break;
      case dprt::OptimizerKind::Momentum:
        cpu::momentum_update(rank.get(), accOf(dt_), s.master->data(),
                             s.m->data(), s.grad->data(), n, r.momentum,
                             r.nesterov);
        break;
      case dprt::OptimizerKind::AdamW:
        cpu::adamw_update(rank.get(), accOf(dt_), s.master->data(), s.m->data(),
                          s.v->data(), s.grad->data(), n, r.beta1, r.beta2,
                          r.eps);
        break;
      }
      cpu::cast(rank.get(), accOf(dt_), s.master->data(), dt_, s.w->data(), n);
      cpu::zero(rank.get(), s.grad->data(), n * dprt::sizeOf(accOf(dt_)));
    }
  }

private:
  struct State {
    std::unique_ptr<Buffer> w, master, grad, m, v;
  };
  DType dt_;
  std::map<std::string, State> params_;
};

/// Activations of the step, by name, created on first use (NaN-poisoned).
class Values {
public:
  explicit Values(DType dt) : dt_(dt) {}
  void *get(const std::string &name, int64_t n, bool acc = false) {
    auto it = buffers_.find(name);
    if (it == buffers_.end())
      it = buffers_
               .emplace(name,
                        std::make_unique<Buffer>(acc ? accOf(dt_) : dt_, n))
               .first;
    return it->second->data();
  }
  Vec values(const std::string &name) const {
    return buffers_.at(name)->values();
  }

private:
  DType dt_;
  std::map<std::string, std::unique_ptr<Buffer>> buffers_;
};

struct KernelStep {
  Vec loss, n2;
};

/// One physical batch of examples/tinylm.mlir as a compiled program would
/// run it: the clipped gradient sums end up in p's gradients.
KernelStep tinyLmStep(DType dt, const ref::TinyLmShape &s, KernelParams &p,
                      const ref::Batch &batch, const Vec &mask,
                      const ref::Recipe &recipe, TestRank &rank) {
  dprt::Rank *r = rank.get();
  DType acc = accOf(dt);
  const int64_t B = batch.size, T = s.tokens, R = B * T, W = s.width;
  const int64_t hd = W / s.heads, KV = s.kvHeads * hd, F = s.ffn;
  const int32_t *tok = batch.tokens.at("tok").data();
  const int32_t *tgt = batch.tokens.at("tgt").data();
  Values v(dt);
  auto val = [&](const std::string &n, int64_t size) { return v.get(n, size); };
  auto accv = [&](const std::string &n, int64_t size) {
    return v.get(n, size, true);
  };

  // Forward, keeping what the backward pass reads.
  cpu::embedding_forward(r, dt, tok, p.w("emb"), val("x0", R * W), R, s.vocab,
                         W);
  std::string x = "x0";
  for (int64_t i = 0; i < s.blocks; ++i) {
    std::string b = "b" + std::to_string(i) + ".";
    cpu::rms_norm_forward(r, dt, val(x, R * W), p.w(b + "n1"),
                          val(b + "h", R * W), accv(b + "rstd1", R), R, W,
                          s.eps);
    cpu::linear_forward(r, dt, val(b + "h", R * W), p.w(b + "wq"), nullptr,
                        nullptr, val(b + "q", R * W), R, W, W);
    cpu::linear_forward(r, dt, val(b + "h", R * W), p.w(b + "wk"), nullptr,
                        nullptr, val(b + "k", R * KV), R, W, KV);
    cpu::linear_forward(r, dt, val(b + "h", R * W), p.w(b + "wv"), nullptr,
                        nullptr, val(b + "v", R * KV), R, W, KV);
    cpu::rope_forward(r, dt, val(b + "q", R * W), val(b + "q", R * W), nullptr,
                      B, T, s.heads, hd, s.theta);
    cpu::rope_forward(r, dt, val(b + "k", R * KV), val(b + "k", R * KV),
                      nullptr, B, T, s.kvHeads, hd, s.theta);
    cpu::attention_forward(r, dt, val(b + "q", R * W), val(b + "k", R * KV),
                           val(b + "v", R * KV), val(b + "a", R * W),
                           accv(b + "lse", B * s.heads * T), B, T, s.heads,
                           s.kvHeads, hd, true);
    // The residual connections in the products (dp-fuse-residual).
    cpu::linear_forward(r, dt, val(b + "a", R * W), p.w(b + "wo"), nullptr,
                        val(x, R * W), val(b + "r", R * W), R, W, W);
    cpu::rms_norm_forward(r, dt, val(b + "r", R * W), p.w(b + "n2"),
                          val(b + "m", R * W), accv(b + "rstd2", R), R, W,
                          s.eps);
    cpu::linear_forward(r, dt, val(b + "m", R * W), p.w(b + "gate"), nullptr,
                        nullptr, val(b + "g", R * F), R, W, F);
    cpu::linear_forward(r, dt, val(b + "m", R * W), p.w(b + "up"), nullptr,
                        nullptr, val(b + "u", R * F), R, W, F);
    cpu::activation_forward(r, dt, Activation::Silu, val(b + "g", R * F),
                            val(b + "s", R * F), R * F);
    cpu::mul_forward(r, dt, val(b + "s", R * F), val(b + "u", R * F),
                     val(b + "p", R * F), R * F);
    std::string next = "x" + std::to_string(i + 1);
    cpu::linear_forward(r, dt, val(b + "p", R * F), p.w(b + "down"), nullptr,
                        val(b + "r", R * W), val(next, R * W), R, F, W);
    x = next;
  }
  cpu::rms_norm_forward(r, dt, val(x, R * W), p.w("norm"), val("f", R * W),
                        accv("rstdf", R), R, W, s.eps);
  cpu::linear_forward(r, dt, val("f", R * W), p.w("head"), nullptr, nullptr,
                      val("logits", R * s.vocab), R, W, s.vocab);
  cpu::cross_entropy_forward(r, dt, val("logits", R * s.vocab), tgt,
                             accv("loss", B), accv("celse", R), B, T, s.vocab,
                             true, -1, Reduction::Mean);

  // Backward: input gradients, per-sample norms into n2, per-sample gamma
  // gradients kept for the weight-gradient phase.
  Buffer maskBuf(acc, mask), n2(acc, Vec(B, 0.0)), c(acc, B);
  std::vector<unsigned char> ws(std::max(
      dprt::normDirectWorkspaceBytes(dt, W, W),
      dprt::weightGradWorkspaceBytes(dt, B, T, std::max({W, F, s.vocab}))));
  auto gramNorm = [&](const std::string &a, int64_t in,
                      const std::vector<std::pair<std::string, int64_t>> &gs) {
    // K(a) once, then each layer reading a adds its share (gram_norm).
    cpu::gram(r, dt, val(a, R * in), accv("Ka", B * T * T), B, T, in, false);
    for (const auto &[dy, out] : gs)
      cpu::gram_norm(r, dt, val(dy, R * out), accv("Ka", B * T * T),
                     accv("Kg", B * T * T), n2.data(), B, T, out);
  };
  cpu::cross_entropy_backward(
      r, dt, val("logits", R * s.vocab), tgt, accv("celse", R), maskBuf.data(),
      val("dlogits", R * s.vocab), B, T, s.vocab, true, -1, Reduction::Mean);
  gramNorm("f", W, {{"dlogits", s.vocab}});
  cpu::linear_backward_input(r, dt, val("dlogits", R * s.vocab), p.w("head"),
                             val("df", R * W), R, W, s.vocab, false);
  std::string dx = "d" + x;
  cpu::rms_norm_backward(r, dt, val(x, R * W), p.w("norm"), accv("rstdf", R),
                         val("df", R * W), val(dx, R * W), accv("gnorm", B * W),
                         nullptr, B, T, W, false);
  cpu::norm_rows(r, acc, accv("gnorm", B * W), n2.data(), B, W);
  for (int64_t i = s.blocks - 1; i >= 0; --i) {
    std::string b = "b" + std::to_string(i) + ".";
    std::string xin = "x" + std::to_string(i), dxin = "d" + xin;
    // x_{i+1} = r + d: both receive dx_{i+1}.
    gramNorm(b + "p", F, {{dx, W}});
    cpu::linear_backward_input(r, dt, val(dx, R * W), p.w(b + "down"),
                               val(b + "dp", R * F), R, F, W, false);
    cpu::mul_backward(r, dt, val(b + "s", R * F), val(b + "u", R * F),
                      val(b + "dp", R * F), val(b + "ds", R * F),
                      val(b + "du", R * F), R * F, false, false);
    cpu::activation_backward(r, dt, Activation::Silu, val(b + "g", R * F),
                             val(b + "ds", R * F), val(b + "dg", R * F), R * F,
                             false);
    gramNorm(b + "m", W, {{b + "dg", F}, {b + "du", F}});
    cpu::linear_backward_input(r, dt, val(b + "dg", R * F), p.w(b + "gate"),
                               val(b + "dm", R * W), R, W, F, false);
    cpu::linear_backward_input(r, dt, val(b + "du", R * F), p.w(b + "up"),
                               val(b + "dm", R * W), R, W, F, true);
    // dr = dx_{i+1} + RMSNorm backward of dm.
    cpu::cast(r, dt, val(dx, R * W), dt, val(b + "dr", R * W), R * W);
    cpu::rms_norm_backward(r, dt, val(b + "r", R * W), p.w(b + "n2"),
                           accv(b + "rstd2", R), val(b + "dm", R * W),
                           val(b + "dr", R * W), accv(b + "gn2", B * W),
                           nullptr, B, T, W, true);
    cpu::norm_rows(r, acc, accv(b + "gn2", B * W), n2.data(), B, W);
    // r = x_i + o.
    cpu::norm_direct(r, dt, val(b + "a", R * W), val(b + "dr", R * W),
                     n2.data(), B, T, W, W, ws.data());
    cpu::linear_backward_input(r, dt, val(b + "dr", R * W), p.w(b + "wo"),
                               val(b + "da", R * W), R, W, W, false);
    cpu::attention_backward(
        r, dt, val(b + "q", R * W), val(b + "k", R * KV), val(b + "v", R * KV),
        val(b + "a", R * W), accv(b + "lse", B * s.heads * T),
        val(b + "da", R * W), val(b + "dq", R * W), val(b + "dk", R * KV),
        val(b + "dv", R * KV), B, T, s.heads, s.kvHeads, hd, true, nullptr);
    cpu::rope_backward(r, dt, val(b + "dq", R * W), val(b + "dq", R * W),
                       nullptr, B, T, s.heads, hd, s.theta, false);
    cpu::rope_backward(r, dt, val(b + "dk", R * KV), val(b + "dk", R * KV),
                       nullptr, B, T, s.kvHeads, hd, s.theta, false);
    gramNorm(b + "h", W, {{b + "dq", W}, {b + "dk", KV}, {b + "dv", KV}});
    cpu::linear_backward_input(r, dt, val(b + "dq", R * W), p.w(b + "wq"),
                               val(b + "dh", R * W), R, W, W, false);
    cpu::linear_backward_input(r, dt, val(b + "dk", R * KV), p.w(b + "wk"),
                               val(b + "dh", R * W), R, W, KV, true);
    cpu::linear_backward_input(r, dt, val(b + "dv", R * KV), p.w(b + "wv"),
                               val(b + "dh", R * W), R, W, KV, true);
    cpu::cast(r, dt, val(b + "dr", R * W), dt, val(dxin, R * W), R * W);
    cpu::rms_norm_backward(r, dt, val(xin, R * W), p.w(b + "n1"),
                           accv(b + "rstd1", R), val(b + "dh", R * W),
                           val(dxin, R * W), accv(b + "gn1", B * W), nullptr, B,
                           T, W, true);
    cpu::norm_rows(r, acc, accv(b + "gn1", B * W), n2.data(), B, W);
    dx = dxin;
  }
  cpu::norm_embedding(r, dt, tok, val("dx0", R * W), n2.data(), B, T, W);

  rank.state().clipNorm = recipe.maxNorm;
  cpu::clip_factors(r, acc, n2.data(), maskBuf.data(), c.data(), B, 1,
                    recipe.clip, 1.0, recipe.gamma, 0.0);

  // Each clipped weight gradient once.
  auto wgrad = [&](const std::string &param, const std::string &in,
                   int64_t inDim, const std::string &dy, int64_t outDim) {
    cpu::linear_weight_grad(r, dt, val(in, R * inDim), val(dy, R * outDim),
                            c.data(), p.grad(param), B, T, inDim, outDim,
                            ws.data(), true);
  };
  wgrad("head", "f", W, "dlogits", s.vocab);
  cpu::rows_weighted_sum(r, acc, accv("gnorm", B * W), c.data(), p.grad("norm"),
                         B, W);
  for (int64_t i = 0; i < s.blocks; ++i) {
    std::string b = "b" + std::to_string(i) + ".";
    std::string dxout = "dx" + std::to_string(i + 1);
    wgrad(b + "down", b + "p", F, dxout, W);
    wgrad(b + "gate", b + "m", W, b + "dg", F);
    wgrad(b + "up", b + "m", W, b + "du", F);
    wgrad(b + "wo", b + "a", W, b + "dr", W);
    wgrad(b + "wq", b + "h", W, b + "dq", W);
    wgrad(b + "wk", b + "h", W, b + "dk", KV);
    wgrad(b + "wv", b + "h", W, b + "dv", KV);
    cpu::rows_weighted_sum(r, acc, accv(b + "gn1", B * W), c.data(),
                           p.grad(b + "n1"), B, W);
    cpu::rows_weighted_sum(r, acc, accv(b + "gn2", B * W), c.data(),
                           p.grad(b + "n2"), B, W);
  }
  cpu::embedding_grad(r, dt, tok, val("dx0", R * W), c.data(), p.grad("emb"), B,
                      T, s.vocab, W);

  return {v.values("loss"), n2.values()};
}

/// One physical batch of examples/mlp.mlir (T = 1: rank-1 norms).
/// k > 1: user-level DP as dp-lower-to-runtime composes it, every k
/// consecutive samples one user: each norm kernel on B/k units of k rows (a
/// rank-1 norm as the Gram norm of T = k, a bias or a materialized row
/// gradient as the bias norm of k "tokens"), the user's norm in n2[u], and
/// clip_factors giving slot b the factor of user b / k.
KernelStep mlpStep(DType dt, int64_t features, int64_t hidden, int64_t classes,
                   KernelParams &p, const ref::Batch &batch, const Vec &mask,
                   const ref::Recipe &recipe, TestRank &rank, int64_t k = 1) {
  dprt::Rank *r = rank.get();
  DType acc = accOf(dt);
  const int64_t B = batch.size, F = features, H = hidden, C = classes;
  const int32_t *label = batch.tokens.at("label").data();
  Values v(dt);
  auto val = [&](const std::string &n, int64_t size) { return v.get(n, size); };
  auto accv = [&](const std::string &n, int64_t size) {
    return v.get(n, size, true);
  };
  Buffer x(dt, batch.reals.at("x")), maskBuf(acc, mask), n2(acc, Vec(B, 0.0)),
      c(acc, B);

  cpu::linear_forward(r, dt, x.data(), p.w("fc1.w"), p.w("fc1.b"), nullptr,
                      val("h", B * H), B, F, H);
  cpu::layer_norm_forward(r, dt, val("h", B * H), p.w("ln.g"), p.w("ln.b"),
                          val("n", B * H), accv("mean", B), accv("rstd", B), B,
                          H, 1e-5);
  cpu::activation_forward(r, dt, Activation::Relu, val("n", B * H),
                          val("a", B * H), B * H);
  cpu::linear_forward(r, dt, val("a", B * H), p.w("fc2.w"), p.w("fc2.b"),
                      nullptr, val("logits", B * C), B, H, C);
  cpu::cross_entropy_forward(r, dt, val("logits", B * C), label,
                             accv("loss", B), accv("lse", B), B, 1, C, false,
                             -1, Reduction::Mean);

  cpu::cross_entropy_backward(
      r, dt, val("logits", B * C), label, accv("lse", B), maskBuf.data(),
      val("dlogits", B * C), B, 1, C, false, -1, Reduction::Mean);
  const int64_t U = B / k;
  auto rank1 = [&](const void *a, const void *dy, int64_t in, int64_t out) {
    if (k == 1) {
      cpu::norm_rank1(r, dt, a, dy, n2.data(), B, in, out);
      return;
    }
    cpu::gram(r, dt, a, accv("Ka", U * k * k), U, k, in, false);
    cpu::gram_norm(r, dt, dy, accv("Ka", U * k * k), accv("Kg", U * k * k),
                   n2.data(), U, k, out);
  };
  auto rows = [&](const void *g, int64_t dim) {
    if (k == 1)
      cpu::norm_rows(r, acc, g, n2.data(), B, dim);
    else
      cpu::norm_bias(r, acc, g, n2.data(), U, k, dim);
  };
  rank1(val("a", B * H), val("dlogits", B * C), H, C);
  cpu::norm_bias(r, dt, val("dlogits", B * C), n2.data(), U, k, C);
  cpu::linear_backward_input(r, dt, val("dlogits", B * C), p.w("fc2.w"),
                             val("da", B * H), B, H, C, false);
  cpu::activation_backward(r, dt, Activation::Relu, val("n", B * H),
                           val("da", B * H), val("dn", B * H), B * H, false);
  cpu::layer_norm_backward(r, dt, val("h", B * H), p.w("ln.g"), accv("mean", B),
                           accv("rstd", B), val("dn", B * H), val("dh", B * H),
                           accv("gg", B * H), accv("gb", B * H), B, 1, H,
                           false);
  rows(accv("gg", B * H), H);
  rows(accv("gb", B * H), H);
  rank1(x.data(), val("dh", B * H), F, H);
  cpu::norm_bias(r, dt, val("dh", B * H), n2.data(), U, k, H);

  rank.state().clipNorm = recipe.maxNorm;
  cpu::clip_factors(r, acc, n2.data(), maskBuf.data(), c.data(), B, k,
                    recipe.clip, 1.0, recipe.gamma, 0.0);

  std::vector<unsigned char> ws(
      dprt::weightGradWorkspaceBytes(dt, B, 1, std::max(H, C)));
  cpu::linear_weight_grad(r, dt, val("a", B * H), val("dlogits", B * C),
                          c.data(), p.grad("fc2.w"), B, 1, H, C, ws.data(),
                          true);
  cpu::bias_grad(r, dt, val("dlogits", B * C), c.data(), p.grad("fc2.b"), B, 1,
                 C);
  cpu::rows_weighted_sum(r, acc, accv("gg", B * H), c.data(), p.grad("ln.g"), B,
                         H);
  cpu::rows_weighted_sum(r, acc, accv("gb", B * H), c.data(), p.grad("ln.b"), B,
                         H);
  cpu::linear_weight_grad(r, dt, x.data(), val("dh", B * H), c.data(),
                          p.grad("fc1.w"), B, 1, F, H, ws.data(), true);
  cpu::bias_grad(r, dt, val("dh", B * H), c.data(), p.grad("fc1.b"), B, 1, H);
  return {v.values("loss"), n2.values()};
}

/// The model's clipped gradient sums, concatenated in parameter order.
Vec allGradients(const ref::Model &m, const KernelParams &p) {
  Vec all;
  for (const std::string &name : m.paramNames()) {
    Vec g = p.gradient(name);
    all.insert(all.end(), g.begin(), g.end());
  }
  return all;
}

/// Compares one step of kernels with the reference's: losses, per-sample
/// norms (the loss gradient is seeded with the mask, so a masked sample's
/// norm is 0 and its clip factor 0 either way), the whole model's clipped
/// gradient and updated parameters, normwise.
void expectStepsAgree(const KernelStep &k, const Vec &grads,
                      const KernelParams &params, const ref::Model &m,
                      const ref::StepResult &want, const Vec &mask, double tol,
                      DType dt) {
  Vec wantGrads, masters, wantMasters;
  for (const std::string &p : m.paramNames()) {
    const Vec &g = want.clippedSum.at(p);
    wantGrads.insert(wantGrads.end(), g.begin(), g.end());
    Vec w = params.master(p);
    masters.insert(masters.end(), w.begin(), w.end());
    wantMasters.insert(wantMasters.end(), m.param(p).begin(), m.param(p).end());
  }
  EXPECT_CLOSE(k.loss, want.loss, tol, dt);
  EXPECT_CLOSE(k.n2,
               ref::mulForward(mask, ref::mulForward(want.norm, want.norm)),
               tol, dt);
  EXPECT_CLOSE(grads, wantGrads, tol, dt);
  EXPECT_CLOSE(masters, wantMasters, tol, dt);
}

TEST(MlpStep, KernelsMatchNaivePerSampleReference) {
  forEachCase(3, [](Rng &rng) {
    const int64_t features = 9, hidden = 16, classes = 5, B = 7;
    ref::Model model = ref::mlpClassifier(features, hidden, classes);
    randomizeParams(model, rng, 0.4);
    ref::Batch batch = mlpBatch(rng, B, features, classes);
    Vec mask{1, 1, 1, 0, 1, 1, 0};
    for (DType dt : {DType::F64, DType::F32}) {
      SCOPED_TRACE(dprt::nameOf(dt));
      ref::Recipe recipe; // examples/mlp.mlir: momentum, flat clipping
      recipe.optimizer = dprt::OptimizerKind::Momentum;
      recipe.lr = 0.5;
      recipe.momentum = 0.9;
      recipe.maxNorm = 1.0;
      recipe.expectedBatch = 6;
      ref::Model m = model;
      KernelParams params(dt, m);
      TestRank rank;
      KernelStep k = mlpStep(dt, features, hidden, classes, params, batch, mask,
                             recipe, rank);
      Vec grads = allGradients(m, params);
      rank.state().gradScale = 1.0 / recipe.expectedBatch;
      params.apply(rank, recipe);
      ref::StepResult want = m.dpStep(batch, mask, recipe);
      expectStepsAgree(k, grads, params, m, want, mask,
                       dt == DType::F64 ? 1e-10 : 1e-4, dt);
    }
  });
}

// User-level DP on the MLP (T = 1), as the lowering composes it for
// `unit = #dp.unit<user, max_records = 3>`: three users of three slots
// each, some slots padding, against the reference's clipping of each
// user's summed gradient. The bound lies between the two smallest users'
// norms, so that the two larger users are clipped and the smallest is not.
TEST(MlpStep, UserLevelKernelsMatchReference) {
  forEachCase(3, [](Rng &rng) {
    const int64_t features = 9, hidden = 16, classes = 5, B = 9, k = 3;
    ref::Model model = ref::mlpClassifier(features, hidden, classes);
    randomizeParams(model, rng, 0.4);
    ref::Batch batch = mlpBatch(rng, B, features, classes);
    for (int64_t b = 0; b < B; ++b)
      batch.users.push_back(b / k);
    const Vec mask{1, 1, 0, 1, 0, 0, 1, 1, 1};
    ref::Recipe recipe;
    recipe.unit = ref::PrivacyUnit::User;
    recipe.lr = 0.5;
    recipe.expectedBatch = 2.5;
    {
      ref::Model probe = model;
      recipe.maxNorm = 1e9;
      Vec norms = probe.dpStep(batch, mask, recipe).userNorm;
      std::sort(norms.begin(), norms.end());
      recipe.maxNorm = 0.5 * (norms[0] + norms[1]);
    }
    for (DType dt : {DType::F64, DType::F32}) {
      SCOPED_TRACE(dprt::nameOf(dt));
      ref::Model m = model;
      KernelParams params(dt, m);
      TestRank rank;
      KernelStep got = mlpStep(dt, features, hidden, classes, params, batch,
                               mask, recipe, rank, k);
      Vec grads = allGradients(m, params);
      rank.state().gradScale = 1.0 / recipe.expectedBatch;
      params.apply(rank, recipe);
      ref::StepResult want = m.dpStep(batch, mask, recipe);
      ASSERT_EQ(want.users.size(), 3u);
      int64_t clipped = 0;
      for (double c : want.userClip.begin()->second)
        clipped += c < 1.0;
      EXPECT_EQ(clipped, 2) << "the two larger users clipped, one not";
      Vec wantGrads, masters, wantMasters;
      for (const std::string &p : m.paramNames()) {
        const Vec &g = want.clippedSum.at(p);
        wantGrads.insert(wantGrads.end(), g.begin(), g.end());
        Vec w = params.master(p);
        masters.insert(masters.end(), w.begin(), w.end());
        wantMasters.insert(wantMasters.end(), m.param(p).begin(),
                           m.param(p).end());
      }
      const double tol = dt == DType::F64 ? 1e-10 : 1e-4;
      EXPECT_CLOSE(Vec(got.n2.begin(), got.n2.begin() + 3),
                   ref::mulForward(want.userNorm, want.userNorm), tol, dt);
      EXPECT_CLOSE(grads, wantGrads, tol, dt);
      EXPECT_CLOSE(masters, wantMasters, tol, dt);
    }
  });
}

TEST(TinyLmStep, KernelsMatchNaivePerSampleReference) {
  forEachCase(2, [](Rng &rng) {
    ref::TinyLmShape s;
    s.vocab = 13;
    s.tokens = 6;
    s.width = 8;
    s.blocks = 2;
    s.heads = 4;
    s.kvHeads = 2;
    s.ffn = 12;
    ref::Model model = ref::tinyLm(s);
    randomizeParams(model, rng, 0.5);
    ref::Batch batch = lmBatch(rng, 4, s);
    Vec mask{1, 1, 0, 1};
    for (DType dt : {DType::F64, DType::F32}) {
      SCOPED_TRACE(dprt::nameOf(dt));
      // AdamW's first step is g / |g| elementwise, which turns f32 noise in
      // a near-zero gradient element into a full step: f32 takes SGD.
      ref::Recipe recipe;
      recipe.optimizer = dt == DType::F64 ? dprt::OptimizerKind::AdamW
                                          : dprt::OptimizerKind::SGD;
      recipe.lr = 1e-2;
      recipe.weightDecay = 0.1;
      recipe.maxNorm = 0.5;
      recipe.expectedBatch = 3;
      ref::Model m = model;
      KernelParams params(dt, m);
      TestRank rank;
      KernelStep k = tinyLmStep(dt, s, params, batch, mask, recipe, rank);
      Vec grads = allGradients(m, params);
      rank.state().gradScale = 1.0 / recipe.expectedBatch;
      params.apply(rank, recipe);
      ref::StepResult want = m.dpStep(batch, mask, recipe);
      // f32 runs a chain of some fifty kernels, hence 1e-4.
      expectStepsAgree(k, grads, params, m, want, mask,
                       dt == DType::F64 ? 1e-10 : 1e-4, dt);
    }
  });
}

} // namespace

namespace {

// Not run by ctest: the time of one step of examples/tinylm.mlir's shape
// (~0.43M parameters, 16 sequences of 128 tokens) through the kernels, on
// one thread. Run with
//   dpc-kernel-tests --gtest_also_run_disabled_tests --gtest_filter='*Timing*'
TEST(TinyLmStep, DISABLED_DemoSizeTiming) {
  ref::TinyLmShape s;
  s.vocab = 256;
  s.tokens = 128;
  s.width = 128;
  s.blocks = 2;
  s.heads = 4;
  s.kvHeads = 2;
  s.ffn = 384;
  Rng rng(1);
  ref::Model model = ref::tinyLm(s);
  randomizeParams(model, rng, 0.05);
  ref::Batch batch = lmBatch(rng, 16, s);
  Vec mask(16, 1.0);
  ref::Recipe recipe;
  recipe.optimizer = dprt::OptimizerKind::AdamW;
  recipe.lr = 1e-3;
  for (DType dt : {DType::F32, DType::BF16}) {
    KernelParams params(dt, model);
    TestRank rank;
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
      auto start = std::chrono::steady_clock::now();
      tinyLmStep(dt, s, params, batch, mask, recipe, rank);
      params.apply(rank, recipe);
      best = std::min(best, std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count());
    }
    std::printf("tinylm step, %s, 16 x 128 tokens: %.0f ms (%.0f tokens/s)\n",
                dprt::nameOf(dt), best * 1e3, 16 * 128 / best);
  }
}

} // namespace
