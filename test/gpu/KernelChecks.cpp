//===- KernelChecks.cpp - Every CUDA kernel against the CPU backend -------===//
//
// Each case draws random inputs (its own seed, printed), runs the CPU and the
// CUDA kernel on the same values and compares every output. Outputs that are
// written (not accumulated) are poisoned with NaN first on both sides, so an
// element the GPU leaves unwritten fails. Each kernel runs in f32 and bf16,
// at a "nice" shape (vectorized, aligned) and an "odd" one (sizes that are
// not multiples of the vector width, pointers one element off alignment).
//
// Tolerances are relative (||gpu - cpu|| / ||cpu||): 1e-5 for f32 results;
// 1e-2 for bf16 results (one rounding to bf16 is 2^-9 relative); 2e-2 to
// 3e-2 where the GPU rounds an intermediate to bf16 that the CPU keeps in f32
// (attention probabilities, the clip-scaled output gradient); 0 for copies,
// casts and fills, which must match bit for bit.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "AttentionPath.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace dpc::gpucheck {

namespace cpu = dprt::cpu;
namespace gpu = dprt::cuda;
using dprt::Activation;
using dprt::ClipMode;
using dprt::Reduction;

bool Context::wants(const std::string &k) const {
  return filter.empty() || k.find(filter) != std::string::npos;
}

bool Context::begin(const std::string &k, const std::string &d,
                    const std::string &s) {
  if (!wants(k))
    return false;
  kernel = k;
  dtype = d;
  shape = s;
  // A fresh seed per case, derived from the run's seed and the case.
  seed = baseSeed ^ std::hash<std::string>()(k + "/" + d + "/" + s);
  rng.seed(seed);
  return true;
}

void Context::compare(const std::string &output, Buffer &b, double tol) {
  gpu::synchronize(gpu);
  Row row = compareValues(b.download(), b.hostValues(), tol);
  row.kernel = kernel + "." + output;
  row.dtype = dtype;
  row.shape = shape;
  row.seed = seed;
  report->add(row);
}

void Context::result(const std::string &output, bool pass,
                     const std::string &note) {
  Row row;
  row.kernel = kernel + (output.empty() ? "" : "." + output);
  row.dtype = dtype;
  row.shape = shape;
  row.seed = seed;
  row.pass = pass;
  row.note = note;
  report->add(row);
}

void Context::setStepState(const dprt::StepState &state) {
  *reinterpret_cast<dprt::StepState *>(cpu->arena + cpu->stateOffset) = state;
  gpu->hostState = state;
  gpu::uploadStepState(gpu);
}

void Context::guarded(const std::function<void()> &body) {
  try {
    body();
  } catch (const std::exception &e) {
    result("", false, std::string("exception: ") + e.what());
    // A failed launch can leave the GPU mid-work; later cases start clean.
    cudaGetLastError();
  }
}

double tol(DType dt) { return dt == DType::F32 ? 1e-5 : 1e-2; }

std::string dims(std::initializer_list<std::pair<const char *, int64_t>> d,
                 bool odd) {
  std::string s;
  for (auto &[name, value] : d)
    s += (s.empty() ? "" : " ") + std::string(name) + std::to_string(value);
  return odd ? s + " odd" : s;
}

namespace {

constexpr DType F32 = DType::F32;
constexpr DType BF16 = DType::BF16;

void randomTokens(IntBuffer &t, int64_t n, int32_t vocab,
                  std::mt19937_64 &rng) {
  std::uniform_int_distribution<int32_t> u(0, vocab - 1);
  for (int64_t i = 0; i < n; ++i)
    t[i] = u(rng);
  t.upload();
}

void denseChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  const int64_t mis = odd ? 1 : 0;
  {
    int64_t rows = odd ? 77 : 128, vocab = 500, dim = odd ? 130 : 256;
    if (ctx.begin("embedding_forward", dn,
                  dims({{"rows", rows}, {"V", vocab}, {"d", dim}}, odd)))
      ctx.guarded([&] {
        IntBuffer tok(rows);
        randomTokens(tok, rows, int32_t(vocab), ctx.rng);
        Buffer table(dt, vocab * dim, mis), out(dt, rows * dim, mis);
        table.randn(ctx.rng);
        out.poison();
        cpu::embedding_forward(ctx.cpu, dt, tok.h(), table.h(), out.h(), rows,
                               vocab, dim);
        gpu::embedding_forward(ctx.gpu, dt, tok.d(), table.d(), out.d(), rows,
                               vocab, dim);
        ctx.compare("out", out, 0);
      });
  }
  {
    // Learned positions; the table has more rows than a sample has tokens.
    int64_t batch = odd ? 3 : 4, tokens = odd ? 33 : 64, dim = odd ? 130 : 256;
    if (ctx.begin("position_embedding_forward", dn,
                  dims({{"B", batch}, {"T", tokens}, {"d", dim}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, batch * tokens * dim, mis),
            table(dt, (tokens + 5) * dim, mis),
            y(dt, batch * tokens * dim, mis);
        x.randn(ctx.rng);
        table.randn(ctx.rng);
        y.poison();
        cpu::position_embedding_forward(ctx.cpu, dt, x.h(), table.h(), y.h(),
                                        batch, tokens, dim);
        gpu::position_embedding_forward(ctx.gpu, dt, x.d(), table.d(), y.d(),
                                        batch, tokens, dim);
        ctx.compare("y", y, tol(dt));
      });
  }
  for (bool withBias : {true, false}) {
    if (odd && !withBias)
      continue;
    int64_t rows = odd ? 77 : 96, in = odd ? 130 : 256, out = odd ? 66 : 192;
    std::string shape = dims({{"rows", rows}, {"in", in}, {"out", out}}, odd) +
                        (withBias ? (odd ? " bias-misaligned" : " bias") : "");
    if (ctx.begin("linear_forward", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, rows * in, mis), w(dt, out * in), b(dt, out, mis),
            y(dt, rows * out);
        x.randn(ctx.rng);
        w.randn(ctx.rng, 1.0 / std::sqrt(double(in)));
        b.randn(ctx.rng);
        y.poison();
        cpu::linear_forward(ctx.cpu, dt, x.h(), w.h(),
                            withBias ? b.h() : nullptr, y.h(), rows, in, out);
        gpu::linear_forward(ctx.gpu, dt, x.d(), w.d(),
                            withBias ? b.d() : nullptr, y.d(), rows, in, out);
        ctx.compare("y", y, tol(dt));
      });
  }
  for (bool acc : {false, true}) {
    int64_t rows = odd ? 77 : 96, in = odd ? 130 : 256, out = odd ? 66 : 192;
    if (ctx.begin("linear_backward_input", dn,
                  dims({{"rows", rows}, {"in", in}, {"out", out}}, odd) +
                      (acc ? " acc" : "")))
      ctx.guarded([&] {
        Buffer dy(dt, rows * out), w(dt, out * in), dx(dt, rows * in);
        dy.randn(ctx.rng);
        w.randn(ctx.rng, 1.0 / std::sqrt(double(out)));
        if (acc)
          dx.randn(ctx.rng);
        else
          dx.poison();
        cpu::linear_backward_input(ctx.cpu, dt, dy.h(), w.h(), dx.h(), rows, in,
                                   out, acc);
        gpu::linear_backward_input(ctx.gpu, dt, dy.d(), w.d(), dx.d(), rows, in,
                                   out, acc);
        ctx.compare("dx", dx, tol(dt));
      });
  }
}

void normalizationChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  const int64_t mis = odd ? 1 : 0;
  const int64_t dim = odd ? 1001 : 1024;
  {
    int64_t rows = odd ? 37 : 64;
    if (ctx.begin("rms_norm_forward", dn,
                  dims({{"rows", rows}, {"d", dim}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), y(dt, rows * dim, mis),
            rstd(F32, rows);
        x.randn(ctx.rng, 2.0);
        g.uniform(ctx.rng, 0.5, 1.5);
        y.poison();
        rstd.poison();
        cpu::rms_norm_forward(ctx.cpu, dt, x.h(), g.h(), y.h(), rstd.h(), rows,
                              dim, 1e-5);
        gpu::rms_norm_forward(ctx.gpu, dt, x.d(), g.d(), y.d(), rstd.d(), rows,
                              dim, 1e-5);
        ctx.compare("y", y, tol(dt));
        ctx.compare("rstd", rstd, 1e-5);
      });
    if (ctx.begin("layer_norm_forward", dn,
                  dims({{"rows", rows}, {"d", dim}}, odd) +
                      (odd ? " no-beta" : "")))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), b(dt, dim),
            y(dt, rows * dim, mis), mean(F32, rows), rstd(F32, rows);
        x.randn(ctx.rng, 2.0);
        // An offset mean, so that centring matters.
        for (int64_t i = 0; i < rows * dim; ++i)
          x.set(i, x.get(i) + 3.0);
        x.upload();
        g.uniform(ctx.rng, 0.5, 1.5);
        b.randn(ctx.rng);
        y.poison();
        mean.poison();
        rstd.poison();
        cpu::layer_norm_forward(ctx.cpu, dt, x.h(), g.h(),
                                odd ? nullptr : b.h(), y.h(), mean.h(),
                                rstd.h(), rows, dim, 1e-5);
        gpu::layer_norm_forward(ctx.gpu, dt, x.d(), g.d(),
                                odd ? nullptr : b.d(), y.d(), mean.d(),
                                rstd.d(), rows, dim, 1e-5);
        ctx.compare("y", y, tol(dt));
        ctx.compare("mean", mean, 1e-5);
        ctx.compare("rstd", rstd, 1e-5);
      });
  }
  {
    // 64 tokens: two column chunks; 17: one.
    int64_t batch = odd ? 3 : 4, tokens = odd ? 17 : 64, rows = batch * tokens;
    bool acc = odd;
    std::string shape = dims({{"B", batch}, {"T", tokens}, {"d", dim}}, odd) +
                        (acc ? " acc" : "");
    if (ctx.begin("rms_norm_backward", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), rstd(F32, rows),
            dy(dt, rows * dim, mis), dx(dt, rows * dim, mis),
            dgamma(F32, batch * dim);
        x.randn(ctx.rng);
        g.uniform(ctx.rng, 0.5, 1.5);
        rstd.uniform(ctx.rng, 0.5, 2.0);
        dy.randn(ctx.rng);
        if (acc)
          dx.randn(ctx.rng);
        else
          dx.poison();
        dgamma.poison();
        cpu::rms_norm_backward(ctx.cpu, dt, x.h(), g.h(), rstd.h(), dy.h(),
                               dx.h(), dgamma.h(), batch, tokens, dim, acc);
        gpu::rms_norm_backward(ctx.gpu, dt, x.d(), g.d(), rstd.d(), dy.d(),
                               dx.d(), dgamma.d(), batch, tokens, dim, acc);
        ctx.compare("dx", dx, tol(dt));
        ctx.compare("dgamma", dgamma, 1e-5);
      });
    if (ctx.begin("rms_norm_backward_norm", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), rstd(F32, rows),
            dy(dt, rows * dim, mis), dx(dt, rows * dim, mis),
            dgamma(F32, batch * dim), n2(F32, batch);
        x.randn(ctx.rng);
        g.uniform(ctx.rng, 0.5, 1.5);
        rstd.uniform(ctx.rng, 0.5, 2.0);
        dy.randn(ctx.rng);
        dx.poison();
        dgamma.poison();
        n2.uniform(ctx.rng, 0, 10);
        cpu::rms_norm_backward_norm(ctx.cpu, dt, x.h(), g.h(), rstd.h(), dy.h(),
                                    dx.h(), dgamma.h(), n2.h(), batch, tokens,
                                    dim, false);
        gpu::rms_norm_backward_norm(ctx.gpu, dt, x.d(), g.d(), rstd.d(), dy.d(),
                                    dx.d(), dgamma.d(), n2.d(), batch, tokens,
                                    dim, false);
        ctx.compare("dx", dx, tol(dt));
        ctx.compare("dgamma", dgamma, 1e-5);
        ctx.compare("n2", n2, 1e-5);
      });
    if (ctx.begin("layer_norm_backward_norm", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), mean(F32, rows),
            rstd(F32, rows), dy(dt, rows * dim, mis), dx(dt, rows * dim, mis),
            dgamma(F32, batch * dim), dbeta(F32, batch * dim), n2(F32, batch);
        x.randn(ctx.rng);
        g.uniform(ctx.rng, 0.5, 1.5);
        mean.randn(ctx.rng, 0.3);
        rstd.uniform(ctx.rng, 0.5, 2.0);
        dy.randn(ctx.rng);
        dx.poison();
        dgamma.poison();
        dbeta.poison();
        n2.uniform(ctx.rng, 0, 10);
        cpu::layer_norm_backward_norm(
            ctx.cpu, dt, x.h(), g.h(), mean.h(), rstd.h(), dy.h(), dx.h(),
            dgamma.h(), dbeta.h(), n2.h(), batch, tokens, dim, false);
        gpu::layer_norm_backward_norm(
            ctx.gpu, dt, x.d(), g.d(), mean.d(), rstd.d(), dy.d(), dx.d(),
            dgamma.d(), dbeta.d(), n2.d(), batch, tokens, dim, false);
        ctx.compare("dx", dx, tol(dt));
        ctx.compare("n2", n2, 1e-5);
      });
    if (ctx.begin("layer_norm_backward", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, rows * dim, mis), g(dt, dim), mean(F32, rows),
            rstd(F32, rows), dy(dt, rows * dim, mis), dx(dt, rows * dim, mis),
            dgamma(F32, batch * dim), dbeta(F32, batch * dim);
        x.randn(ctx.rng);
        g.uniform(ctx.rng, 0.5, 1.5);
        mean.randn(ctx.rng, 0.3);
        rstd.uniform(ctx.rng, 0.5, 2.0);
        dy.randn(ctx.rng);
        if (acc)
          dx.randn(ctx.rng);
        else
          dx.poison();
        dgamma.poison();
        dbeta.poison();
        cpu::layer_norm_backward(ctx.cpu, dt, x.h(), g.h(), mean.h(), rstd.h(),
                                 dy.h(), dx.h(), dgamma.h(), dbeta.h(), batch,
                                 tokens, dim, acc);
        gpu::layer_norm_backward(ctx.gpu, dt, x.d(), g.d(), mean.d(), rstd.d(),
                                 dy.d(), dx.d(), dgamma.d(), dbeta.d(), batch,
                                 tokens, dim, acc);
        ctx.compare("dx", dx, tol(dt));
        ctx.compare("dgamma", dgamma, 1e-5);
        ctx.compare("dbeta", dbeta, 1e-5);
      });
  }
}

void elementwiseChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  const int64_t mis = odd ? 1 : 0;
  const int64_t n = odd ? 100003 : int64_t(1) << 18;
  const std::string shape = dims({{"n", n}}, odd);
  const char *actNames[] = {"relu", "silu", "gelu_erf", "gelu_tanh"};
  for (int a = 0; a < 4; ++a) {
    auto act = Activation(a);
    if (ctx.begin(std::string("activation_forward.") + actNames[a], dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, n, mis), y(dt, n, mis);
        x.randn(ctx.rng, 3.0);
        y.poison();
        cpu::activation_forward(ctx.cpu, dt, act, x.h(), y.h(), n);
        gpu::activation_forward(ctx.gpu, dt, act, x.d(), y.d(), n);
        ctx.compare("y", y, tol(dt));
      });
    if (ctx.begin(std::string("activation_backward.") + actNames[a], dn,
                  shape + (odd ? " acc" : "")))
      ctx.guarded([&] {
        Buffer x(dt, n, mis), dy(dt, n, mis), dx(dt, n, mis);
        x.randn(ctx.rng, 3.0);
        dy.randn(ctx.rng);
        if (odd)
          dx.randn(ctx.rng);
        else
          dx.poison();
        cpu::activation_backward(ctx.cpu, dt, act, x.h(), dy.h(), dx.h(), n,
                                 odd);
        gpu::activation_backward(ctx.gpu, dt, act, x.d(), dy.d(), dx.d(), n,
                                 odd);
        ctx.compare("dx", dx, tol(dt));
      });
    if (ctx.begin(std::string("glu_forward.") + actNames[a], dn, shape))
      ctx.guarded([&] {
        Buffer gate(dt, n, mis), up(dt, n, mis), y(dt, n, mis);
        gate.randn(ctx.rng, 3.0);
        up.randn(ctx.rng);
        y.poison();
        cpu::glu_forward(ctx.cpu, dt, act, gate.h(), up.h(), y.h(), n);
        gpu::glu_forward(ctx.gpu, dt, act, gate.d(), up.d(), y.d(), n);
        ctx.compare("y", y, tol(dt));
      });
    // Odd: only dgate (dup null).
    if (ctx.begin(std::string("glu_backward.") + actNames[a], dn,
                  shape + (odd ? " no-dup" : "")))
      ctx.guarded([&] {
        Buffer gate(dt, n, mis), up(dt, n, mis), dy(dt, n, mis),
            dgate(dt, n, mis), dup(dt, n, mis);
        gate.randn(ctx.rng, 3.0);
        up.randn(ctx.rng);
        dy.randn(ctx.rng);
        dgate.poison();
        dup.poison();
        cpu::glu_backward(ctx.cpu, dt, act, gate.h(), up.h(), dy.h(), dgate.h(),
                          odd ? nullptr : dup.h(), n);
        gpu::glu_backward(ctx.gpu, dt, act, gate.d(), up.d(), dy.d(), dgate.d(),
                          odd ? nullptr : dup.d(), n);
        ctx.compare("dgate", dgate, tol(dt));
        if (!odd)
          ctx.compare("dup", dup, tol(dt));
      });
  }
  for (bool mul : {true, false})
    if (ctx.begin(mul ? "mul_forward" : "add_forward", dn, shape))
      ctx.guarded([&] {
        Buffer a(dt, n, mis), b(dt, n), y(dt, n, mis);
        a.randn(ctx.rng);
        b.randn(ctx.rng);
        y.poison();
        if (mul) {
          cpu::mul_forward(ctx.cpu, dt, a.h(), b.h(), y.h(), n);
          gpu::mul_forward(ctx.gpu, dt, a.d(), b.d(), y.d(), n);
        } else {
          cpu::add_forward(ctx.cpu, dt, a.h(), b.h(), y.h(), n);
          gpu::add_forward(ctx.gpu, dt, a.d(), b.d(), y.d(), n);
        }
        ctx.compare("y", y, tol(dt));
      });
  // Odd: da accumulates, db is not wanted.
  if (ctx.begin("mul_backward", dn, shape + (odd ? " acc-a no-b" : "")))
    ctx.guarded([&] {
      Buffer a(dt, n, mis), b(dt, n, mis), dy(dt, n, mis), da(dt, n, mis),
          db(dt, n, mis);
      a.randn(ctx.rng);
      b.randn(ctx.rng);
      dy.randn(ctx.rng);
      if (odd)
        da.randn(ctx.rng);
      else
        da.poison();
      db.poison();
      void *dbh = odd ? nullptr : db.h();
      void *dbd = odd ? nullptr : db.d();
      cpu::mul_backward(ctx.cpu, dt, a.h(), b.h(), dy.h(), da.h(), dbh, n, odd,
                        false);
      gpu::mul_backward(ctx.gpu, dt, a.d(), b.d(), dy.d(), da.d(), dbd, n, odd,
                        false);
      ctx.compare("da", da, tol(dt));
      if (!odd)
        ctx.compare("db", db, tol(dt));
    });
  if (ctx.begin("accumulate", dn, shape))
    ctx.guarded([&] {
      Buffer x(dt, n, mis), y(dt, n, mis);
      x.randn(ctx.rng);
      y.randn(ctx.rng);
      cpu::accumulate(ctx.cpu, dt, x.h(), y.h(), n);
      gpu::accumulate(ctx.gpu, dt, x.d(), y.d(), n);
      ctx.compare("y", y, tol(dt));
    });
  if (ctx.begin("fill", dn, shape))
    ctx.guarded([&] {
      Buffer p(dt, n, mis);
      p.poison();
      cpu::fill(ctx.cpu, dt, p.h(), n, 0.1);
      gpu::fill(ctx.gpu, dt, p.d(), n, 0.1);
      ctx.compare("p", p, 0);
    });
  for (DType to : {F32, BF16})
    if (ctx.begin(std::string("cast.to_") + dprt::nameOf(to), dn, shape))
      ctx.guarded([&] {
        Buffer src(dt, n, mis), dst(to, n, mis);
        src.randn(ctx.rng, 100.0);
        dst.poison();
        cpu::cast(ctx.cpu, dt, src.h(), to, dst.h(), n);
        gpu::cast(ctx.gpu, dt, src.d(), to, dst.d(), n);
        ctx.compare("dst", dst, 0);
      });
  if (ctx.begin("zero", dn, shape))
    ctx.guarded([&] {
      Buffer p(dt, n, mis);
      p.randn(ctx.rng);
      int64_t bytes = n * dprt::sizeOf(dt);
      cpu::zero(ctx.cpu, p.h(), bytes);
      gpu::zero(ctx.gpu, p.d(), bytes);
      ctx.compare("p", p, 0);
    });
}

void lossChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  const int64_t mis = odd ? 1 : 0;
  {
    int64_t batch = 3, tokens = odd ? 9 : 20, classes = odd ? 1001 : 1024;
    int64_t rows = batch * tokens;
    // Even: ignore -1, mean, the last sample fully ignored. Odd: ignore an
    // in-range class (5), sum.
    int64_t ignoreIndex = odd ? 5 : -1;
    Reduction red = odd ? Reduction::Sum : Reduction::Mean;
    std::string shape =
        dims({{"B", batch}, {"T", tokens}, {"C", classes}}, odd) +
        (odd ? " sum ignore=5" : " mean ignore=-1");
    bool fwd = ctx.begin("cross_entropy_forward", dn, shape);
    if (fwd || ctx.begin("cross_entropy_backward", dn, shape))
      ctx.guarded([&] {
        Buffer logits(dt, rows * classes, mis), loss(F32, batch),
            lse(F32, rows);
        IntBuffer targets(rows);
        logits.randn(ctx.rng, 3.0);
        std::uniform_int_distribution<int32_t> cls(0, int32_t(classes - 1));
        std::uniform_real_distribution<double> u(0, 1);
        for (int64_t r = 0; r < rows; ++r) {
          targets[r] = cls(ctx.rng);
          if (u(ctx.rng) < 0.2 || (!odd && r >= (batch - 1) * tokens))
            targets[r] = int32_t(ignoreIndex);
        }
        targets.upload();
        loss.poison();
        lse.poison();
        cpu::cross_entropy_forward(ctx.cpu, dt, logits.h(), targets.h(),
                                   loss.h(), lse.h(), batch, tokens, classes,
                                   true, ignoreIndex, red);
        gpu::cross_entropy_forward(ctx.gpu, dt, logits.d(), targets.d(),
                                   loss.d(), lse.d(), batch, tokens, classes,
                                   true, ignoreIndex, red);
        if (fwd) {
          ctx.compare("loss", loss, 1e-5);
          ctx.compare("lse", lse, 1e-5);
        }
        if (ctx.begin("cross_entropy_backward", dn, shape)) {
          lse.upload();
          Buffer dloss(F32, batch), dlogits(dt, rows * classes, mis);
          dloss.uniform(ctx.rng, 0.5, 1.5);
          dloss.set(1, 0.0); // a masked sample
          dloss.upload();
          dlogits.poison();
          cpu::cross_entropy_backward(ctx.cpu, dt, logits.h(), targets.h(),
                                      lse.h(), dloss.h(), dlogits.h(), batch,
                                      tokens, classes, true, ignoreIndex, red);
          gpu::cross_entropy_backward(ctx.gpu, dt, logits.d(), targets.d(),
                                      lse.d(), dloss.d(), dlogits.d(), batch,
                                      tokens, classes, true, ignoreIndex, red);
          ctx.compare("dlogits", dlogits, tol(dt));
          // In place, as compiled steps run it when only the loss reads the
          // logits: over the GPU's logits, against the CPU's gradient.
          gpu::cross_entropy_backward(ctx.gpu, dt, logits.d(), targets.d(),
                                      lse.d(), dloss.d(), logits.d(), batch,
                                      tokens, classes, true, ignoreIndex, red);
          gpu::cast(ctx.gpu, dt, logits.d(), dt, dlogits.d(), rows * classes);
          ctx.compare("dlogits in place", dlogits, tol(dt));
        }
      });
  }
  {
    int64_t batch = 8, features = odd ? 33 : 64;
    Reduction red = odd ? Reduction::Sum : Reduction::Mean;
    std::string shape =
        dims({{"B", batch}, {"F", features}}, odd) + (odd ? " sum" : " mean");
    if (ctx.begin("mse_forward", dn, shape))
      ctx.guarded([&] {
        Buffer p(dt, batch * features, mis), t(dt, batch * features),
            loss(F32, batch);
        p.randn(ctx.rng);
        t.randn(ctx.rng);
        loss.poison();
        cpu::mse_forward(ctx.cpu, dt, p.h(), t.h(), loss.h(), batch, features,
                         red);
        gpu::mse_forward(ctx.gpu, dt, p.d(), t.d(), loss.d(), batch, features,
                         red);
        ctx.compare("loss", loss, 1e-5);
      });
    if (ctx.begin("mse_backward", dn, shape))
      ctx.guarded([&] {
        Buffer p(dt, batch * features, mis), t(dt, batch * features),
            dloss(F32, batch), dp(dt, batch * features, mis);
        p.randn(ctx.rng);
        t.randn(ctx.rng);
        dloss.uniform(ctx.rng, 0.5, 1.5);
        dp.poison();
        cpu::mse_backward(ctx.cpu, dt, p.h(), t.h(), dloss.h(), dp.h(), batch,
                          features, red);
        gpu::mse_backward(ctx.gpu, dt, p.d(), t.d(), dloss.d(), dp.d(), batch,
                          features, red);
        ctx.compare("dprediction", dp, tol(dt));
      });
  }
}

/// Clip factors with one masked sample (index 1), whose gradient rows are
/// NaN: the kernels must skip it.
void clipFactorsWithMaskedSample(Buffer &c, std::mt19937_64 &rng) {
  c.uniform(rng, 0.1, 1.0);
  c.set(1, 0.0);
  c.upload();
}

void normChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  {
    int64_t batch = 16, in = odd ? 301 : 256, out = odd ? 199 : 128;
    if (ctx.begin("norm_rank1", dn,
                  dims({{"B", batch}, {"in", in}, {"out", out}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, batch * in), dy(dt, batch * out), n2(F32, batch);
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_rank1(ctx.cpu, dt, x.h(), dy.h(), n2.h(), batch, in, out);
        gpu::norm_rank1(ctx.gpu, dt, x.d(), dy.d(), n2.d(), batch, in, out);
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    int64_t batch = 16, in = odd ? 301 : 256, out = odd ? 199 : 128;
    if (ctx.begin("norm_rank1_bias", dn,
                  dims({{"B", batch}, {"in", in}, {"out", out}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, batch * in), dy(dt, batch * out), n2(F32, batch);
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_rank1_bias(ctx.cpu, dt, x.h(), dy.h(), n2.h(), batch, in,
                             out);
        gpu::norm_rank1_bias(ctx.gpu, dt, x.d(), dy.d(), n2.d(), batch, in,
                             out);
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    int64_t batch = 3, tokens = odd ? 37 : 64, in = odd ? 130 : 256,
            out = odd ? 99 : 128;
    if (ctx.begin(
            "norm_direct_bias", dn,
            dims({{"B", batch}, {"T", tokens}, {"in", in}, {"out", out}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, batch * tokens * in), dy(dt, batch * tokens * out),
            n2(F32, batch), ws(F32, in * out);
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_direct_bias(ctx.cpu, dt, x.h(), dy.h(), n2.h(), batch, tokens,
                              in, out, ws.h());
        gpu::norm_direct_bias(ctx.gpu, dt, x.d(), dy.d(), n2.d(), batch, tokens,
                              in, out, ws.d());
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    int64_t batch = 3, tokens = odd ? 37 : 64, dim = odd ? 130 : 256;
    if (ctx.begin("gram", dn,
                  dims({{"B", batch}, {"T", tokens}, {"d", dim}}, odd) +
                      (odd ? " acc" : "")))
      ctx.guarded([&] {
        Buffer x(dt, batch * tokens * dim), K(F32, batch * tokens * tokens);
        x.randn(ctx.rng);
        if (odd) {
          // Accumulating needs a symmetric K on the CPU (syrk).
          K.randn(ctx.rng);
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t i = 0; i < tokens; ++i)
              for (int64_t j = 0; j < i; ++j)
                K.set((b * tokens + j) * tokens + i,
                      K.get((b * tokens + i) * tokens + j));
          K.upload();
        } else {
          K.poison();
        }
        cpu::gram(ctx.cpu, dt, x.h(), K.h(), batch, tokens, dim, odd);
        gpu::gram(ctx.gpu, dt, x.d(), K.d(), batch, tokens, dim, odd);
        ctx.compare("K", K, 1e-5);
      });
  }
  {
    int64_t batch = 3, tokens = odd ? 13 : 40, in = odd ? 97 : 96,
            out = odd ? 81 : 80;
    if (ctx.begin(
            "norm_direct", dn,
            dims({{"B", batch}, {"T", tokens}, {"in", in}, {"out", out}}, odd)))
      ctx.guarded([&] {
        Buffer x(dt, batch * tokens * in), dy(dt, batch * tokens * out),
            n2(F32, batch), ws(F32, in * out);
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_direct(ctx.cpu, dt, x.h(), dy.h(), n2.h(), batch, tokens, in,
                         out, ws.h());
        gpu::norm_direct(ctx.gpu, dt, x.d(), dy.d(), n2.d(), batch, tokens, in,
                         out, ws.d());
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    // The materialized method: all samples' dy_b^T x_b in one
    // strided-batched product, then their norms.
    int64_t batch = odd ? 3 : 4, tokens = odd ? 13 : 64, in = odd ? 97 : 128,
            out = odd ? 81 : 96;
    for (bool withNorm : {true, false})
      if (ctx.begin(
              "linear_per_sample_grad", dn,
              dims({{"B", batch}, {"T", tokens}, {"in", in}, {"out", out}},
                   odd) +
                  (withNorm ? " norm" : "")))
        ctx.guarded([&] {
          // The slices in the compute type: an element where the two
          // products' f32 sums round to neighbouring bf16 values differs by
          // an ulp (2^-8), and each side's norm is that of its own slices.
          Buffer x(dt, batch * tokens * in), dy(dt, batch * tokens * out),
              g(dt, batch * out * in), n2(F32, batch);
          x.randn(ctx.rng);
          dy.randn(ctx.rng);
          g.poison();
          n2.uniform(ctx.rng, 0, 10);
          cpu::linear_per_sample_grad(ctx.cpu, dt, x.h(), dy.h(), g.h(),
                                      withNorm ? n2.h() : nullptr, batch,
                                      tokens, in, out);
          gpu::linear_per_sample_grad(ctx.gpu, dt, x.d(), dy.d(), g.d(),
                                      withNorm ? n2.d() : nullptr, batch,
                                      tokens, in, out);
          ctx.compare("g", g, dt == BF16 ? 4e-3 : 1e-5);
          ctx.compare("n2", n2, dt == BF16 ? 1e-4 : 1e-5);
        });
  }
  {
    int64_t batch = 4, tokens = odd ? 17 : 64, out = odd ? 301 : 300;
    if (ctx.begin("norm_bias", dn,
                  dims({{"B", batch}, {"T", tokens}, {"out", out}}, odd)))
      ctx.guarded([&] {
        Buffer dy(dt, batch * tokens * out), n2(F32, batch);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_bias(ctx.cpu, dt, dy.h(), n2.h(), batch, tokens, out);
        gpu::norm_bias(ctx.gpu, dt, dy.d(), n2.d(), batch, tokens, out);
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    struct Shape {
      int64_t batch, tokens, dim, vocab;
    };
    // Few distinct tokens, so that many repeat; the long single sample is
    // grouped by 55 blocks, and its 7000 positions are read eight at a time.
    std::vector<Shape> shapes = {odd ? Shape{3, 33, 130, 7}
                                     : Shape{3, 100, 256, 20}};
    if (!odd)
      shapes.push_back({1, 7000, 64, 300});
    for (const Shape &s : shapes)
      if (ctx.begin("norm_embedding", dn,
                    dims({{"B", s.batch},
                          {"T", s.tokens},
                          {"d", s.dim},
                          {"V", s.vocab}},
                         odd)))
        ctx.guarded([&] {
          int64_t rows = s.batch * s.tokens;
          IntBuffer tok(rows);
          randomTokens(tok, rows, int32_t(s.vocab), ctx.rng);
          Buffer dy(dt, rows * s.dim), n2(F32, s.batch);
          dy.randn(ctx.rng);
          n2.uniform(ctx.rng, 0, 10);
          cpu::norm_embedding(ctx.cpu, dt, tok.h(), dy.h(), n2.h(), s.batch,
                              s.tokens, s.dim);
          gpu::norm_embedding(ctx.gpu, dt, tok.d(), dy.d(), n2.d(), s.batch,
                              s.tokens, s.dim);
          ctx.compare("n2", n2, 1e-5);
        });
  }
  {
    int64_t batch = 4, tokens = odd ? 17 : 64, dim = odd ? 130 : 256;
    if (ctx.begin("norm_position_embedding", dn,
                  dims({{"B", batch}, {"T", tokens}, {"d", dim}}, odd)))
      ctx.guarded([&] {
        Buffer dy(dt, batch * tokens * dim), n2(F32, batch);
        dy.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::norm_position_embedding(ctx.cpu, dt, dy.h(), n2.h(), batch, tokens,
                                     dim);
        gpu::norm_position_embedding(ctx.gpu, dt, dy.d(), n2.d(), batch, tokens,
                                     dim);
        ctx.compare("n2", n2, 1e-5);
      });
  }
  {
    // A table tied to a linear head: the cross term and the formed tied
    // gradient. Few distinct tokens, so that rows repeat. n2 starts at
    // 1e3 so that the (signed) cross term is compared against a norm-sized
    // value, as it is added in a step.
    int64_t batch = 3, tokensEmb = odd ? 13 : 40, tokensHead = odd ? 11 : 40,
            vocab = odd ? 37 : 64, dim = odd ? 97 : 96;
    std::string shape = dims({{"B", batch},
                              {"Te", tokensEmb},
                              {"Th", tokensHead},
                              {"V", vocab},
                              {"d", dim}},
                             odd);
    for (bool direct : {false, true})
      if (ctx.begin(direct ? "norm_tied_direct" : "norm_tied_cross", dn, shape))
        ctx.guarded([&] {
          IntBuffer tok(batch * tokensEmb);
          randomTokens(tok, batch * tokensEmb, int32_t(vocab), ctx.rng);
          Buffer dyEmb(dt, batch * tokensEmb * dim),
              x(dt, batch * tokensHead * dim),
              dyHead(dt, batch * tokensHead * vocab), n2(F32, batch),
              ws(F32, direct ? vocab * dim : batch * tokensHead * tokensEmb);
          dyEmb.randn(ctx.rng);
          x.randn(ctx.rng);
          dyHead.randn(ctx.rng);
          n2.uniform(ctx.rng, 1000, 1010);
          auto cpuKernel =
              direct ? cpu::norm_tied_direct : cpu::norm_tied_cross;
          auto gpuKernel =
              direct ? gpu::norm_tied_direct : gpu::norm_tied_cross;
          cpuKernel(ctx.cpu, dt, tok.h(), dyEmb.h(), x.h(), dyHead.h(), n2.h(),
                    batch, tokensEmb, tokensHead, vocab, dim, ws.h());
          gpuKernel(ctx.gpu, dt, tok.d(), dyEmb.d(), x.d(), dyHead.d(), n2.d(),
                    batch, tokensEmb, tokensHead, vocab, dim, ws.d());
          ctx.compare("n2", n2, 1e-5);
        });
  }
}

void weightGradChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // The second shape's samples take 64 MiB (bf16) or 128 MiB (f32) of
  // gradient each: two or one a chunk of the workspace (2 or 3 products).
  for (bool chunked : {false, true}) {
    int64_t batch = odd ? 3 : 4, tokens = odd ? 7 : 24, in = odd ? 130 : 256,
            out = odd ? 66 : 192;
    if (chunked) {
      if (odd)
        continue;
      batch = 3, tokens = 1024, in = 64, out = 32768;
    }
    const int64_t rows = batch * tokens;
    if (ctx.begin(
            "linear_weight_grad", dn,
            dims({{"B", batch}, {"T", tokens}, {"in", in}, {"out", out}}, odd) +
                " masked"))
      ctx.guarded([&] {
        Buffer x(dt, rows * in), dy(dt, rows * out), c(F32, batch),
            dw(F32, out * in),
            ws(dt, dprt::weightGradWorkspaceBytes(dt, batch, tokens, out) /
                       int64_t(dprt::sizeOf(dt)));
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        for (int64_t i = tokens * out; i < 2 * tokens * out; ++i)
          dy.set(i, nan);
        dy.upload();
        clipFactorsWithMaskedSample(c, ctx.rng);
        dw.randn(ctx.rng);
        cpu::linear_weight_grad(ctx.cpu, dt, x.h(), dy.h(), c.h(), dw.h(),
                                batch, tokens, in, out, ws.h());
        gpu::linear_weight_grad(ctx.gpu, dt, x.d(), dy.d(), c.d(), dw.d(),
                                batch, tokens, in, out, ws.d());
        ctx.compare("dw", dw, dt == F32 ? 1e-5 : 2e-2);
      });
  }
  {
    int64_t batch = 4, tokens = odd ? 17 : 64, out = odd ? 301 : 300;
    if (ctx.begin("bias_grad", dn,
                  dims({{"B", batch}, {"T", tokens}, {"out", out}}, odd) +
                      " masked"))
      ctx.guarded([&] {
        Buffer dy(dt, batch * tokens * out), c(F32, batch), db(F32, out);
        dy.randn(ctx.rng);
        for (int64_t i = tokens * out; i < 2 * tokens * out; ++i)
          dy.set(i, nan);
        dy.upload();
        clipFactorsWithMaskedSample(c, ctx.rng);
        db.randn(ctx.rng);
        cpu::bias_grad(ctx.cpu, dt, dy.h(), c.h(), db.h(), batch, tokens, out);
        gpu::bias_grad(ctx.gpu, dt, dy.d(), c.d(), db.d(), batch, tokens, out);
        ctx.compare("db", db, 1e-5);
      });
  }
  {
    int64_t batch = 3, tokens = odd ? 33 : 64, vocab = 50, dim = odd ? 130 : 64,
            rows = batch * tokens;
    if (ctx.begin(
            "embedding_grad", dn,
            dims({{"B", batch}, {"T", tokens}, {"V", vocab}, {"d", dim}}, odd) +
                " masked"))
      ctx.guarded([&] {
        IntBuffer tok(rows);
        randomTokens(tok, rows, int32_t(vocab), ctx.rng);
        Buffer dy(dt, rows * dim), c(F32, batch), table(F32, vocab * dim);
        dy.randn(ctx.rng);
        for (int64_t i = tokens * dim; i < 2 * tokens * dim; ++i)
          dy.set(i, nan);
        dy.upload();
        clipFactorsWithMaskedSample(c, ctx.rng);
        table.randn(ctx.rng);
        cpu::embedding_grad(ctx.cpu, dt, tok.h(), dy.h(), c.h(), table.h(),
                            batch, tokens, vocab, dim);
        gpu::embedding_grad(ctx.gpu, dt, tok.d(), dy.d(), c.d(), table.d(),
                            batch, tokens, vocab, dim);
        ctx.compare("dtable", table, 1e-5);
      });
  }
}

/// Kernels on acc (f32) buffers only.
void accChecks(Context &ctx) {
  const std::string dn = "f32";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  {
    int64_t batch = 3, tokens = 64;
    if (ctx.begin("gram_dot", dn, dims({{"B", batch}, {"T", tokens}}, false)))
      ctx.guarded([&] {
        Buffer ka(F32, batch * tokens * tokens),
            kg(F32, batch * tokens * tokens), n2(F32, batch);
        ka.randn(ctx.rng);
        kg.randn(ctx.rng);
        n2.uniform(ctx.rng, 0, 10);
        cpu::gram_dot(ctx.cpu, F32, ka.h(), kg.h(), n2.h(), batch, tokens);
        gpu::gram_dot(ctx.gpu, F32, ka.d(), kg.d(), n2.d(), batch, tokens);
        ctx.compare("n2", n2, 1e-5);
      });
  }
  // Rows in f32 (the acc type of normalization gradients) and in bf16
  // (materialized weight gradients of a bf16 model).
  // dim 1000: 16-byte loads; 1001: one element a load.
  for (DType dt : {F32, BF16})
    for (int64_t dim : {int64_t(1000), int64_t(1001)}) {
      const std::string dn = nameOf(dt);
      const bool odd = dim % 2 != 0;
      int64_t batch = 5;
      if (ctx.begin("norm_rows", dn, dims({{"B", batch}, {"d", dim}}, odd)))
        ctx.guarded([&] {
          Buffer g(dt, batch * dim), n2(F32, batch);
          g.randn(ctx.rng);
          n2.uniform(ctx.rng, 0, 10);
          cpu::norm_rows(ctx.cpu, dt, g.h(), n2.h(), batch, dim);
          gpu::norm_rows(ctx.gpu, dt, g.d(), n2.d(), batch, dim);
          ctx.compare("n2", n2, 1e-5);
        });
      if (ctx.begin("rows_weighted_sum", dn,
                    dims({{"B", batch}, {"d", dim}}, odd) + " masked"))
        ctx.guarded([&] {
          Buffer g(dt, batch * dim), c(F32, batch), out(F32, dim);
          g.randn(ctx.rng);
          for (int64_t i = dim; i < 2 * dim; ++i)
            g.set(i, nan);
          g.upload();
          clipFactorsWithMaskedSample(c, ctx.rng);
          out.randn(ctx.rng);
          cpu::rows_weighted_sum(ctx.cpu, dt, g.h(), c.h(), out.h(), batch,
                                 dim);
          gpu::rows_weighted_sum(ctx.gpu, dt, g.d(), c.d(), out.d(), batch,
                                 dim);
          ctx.compare("out", out, 1e-5);
        });
    }
  for (ClipMode mode :
       {ClipMode::Flat, ClipMode::PerLayer, ClipMode::Automatic}) {
    int64_t batch = 64;
    // The bound is the StepState's C (not 1, so that a kernel that ignores
    // it fails) times the call's share of it (1/2 for per-layer).
    const double share = mode == ClipMode::PerLayer ? 0.5 : 1.0;
    if (ctx.begin("clip_factors", dn,
                  dims({{"B", batch}}, false) +
                      (mode == ClipMode::Flat       ? " flat C=1.5"
                       : mode == ClipMode::PerLayer ? " per_layer C=1.5/2"
                                                    : " automatic C=1.5")))
      ctx.guarded([&] {
        dprt::StepState state{};
        state.step = 1;
        state.clipNorm = 1.5;
        ctx.setStepState(state);
        Buffer n2(F32, batch), mask(F32, batch), c(F32, batch);
        n2.uniform(ctx.rng, 0, 4);
        n2.set(3, 0.0);
        n2.set(5, nan);
        n2.set(7, -1e-7);
        n2.upload();
        for (int64_t b = 0; b < batch; ++b)
          mask.set(b, b == 1 ? 0.0 : 1.0);
        mask.upload();
        c.poison();
        cpu::clip_factors(ctx.cpu, F32, n2.h(), mask.h(), c.h(), batch, 1, mode,
                          share, 0.01, 1e-3);
        gpu::clip_factors(ctx.gpu, F32, n2.d(), mask.d(), c.d(), batch, 1, mode,
                          share, 0.01, 1e-3);
        ctx.compare("c", c, 1e-6);
      });
  }
  // User-level DP: slot b takes the factor of user b / 4 (n2[0, 16) holds
  // the users' norms, the rest is poison the kernel must not read).
  if (ctx.begin("clip_factors", dn, dims({{"B", 64}}, false) + " users of 4"))
    ctx.guarded([&] {
      const int64_t batch = 64, k = 4;
      dprt::StepState state{};
      state.step = 1;
      state.clipNorm = 1.5;
      ctx.setStepState(state);
      Buffer n2(F32, batch), mask(F32, batch), c(F32, batch);
      n2.uniform(ctx.rng, 0, 4);
      for (int64_t b = batch / k; b < batch; ++b)
        n2.set(b, nan);
      n2.upload();
      for (int64_t b = 0; b < batch; ++b)
        mask.set(b, b % k == 3 || b == 9 ? 0.0 : 1.0);
      mask.upload();
      c.poison();
      cpu::clip_factors(ctx.cpu, F32, n2.h(), mask.h(), c.h(), batch, k,
                        ClipMode::Flat, 1.0, 0.01, 1e-3);
      gpu::clip_factors(ctx.gpu, F32, n2.d(), mask.d(), c.d(), batch, k,
                        ClipMode::Flat, 1.0, 0.01, 1e-3);
      ctx.compare("c", c, 1e-6);
    });
  for (bool odd : {false, true}) {
    int64_t n = odd ? 100003 : 65536, mis = odd ? 1 : 0;
    std::string shape = dims({{"n", n}}, odd);
    dprt::StepState state{};
    state.step = 3;
    state.gradScale = 0.25;
    state.lrScale = 0.5;
    // The run's learning rate and weight decay, read by the kernels from the
    // StepState.
    state.lr = 1e-2;
    state.weightDecay = 0.01;
    if (ctx.begin("sgd_update", dn, shape))
      ctx.guarded([&] {
        ctx.setStepState(state);
        Buffer w(F32, n, mis), g(F32, n);
        w.randn(ctx.rng);
        g.randn(ctx.rng);
        cpu::sgd_update(ctx.cpu, F32, w.h(), g.h(), n);
        gpu::sgd_update(ctx.gpu, F32, w.d(), g.d(), n);
        ctx.compare("master", w, 1e-6);
      });
    for (bool nesterov : {false, true})
      if (ctx.begin("momentum_update", dn,
                    shape + (nesterov ? " nesterov" : "")))
        ctx.guarded([&] {
          ctx.setStepState(state);
          Buffer w(F32, n, mis), vel(F32, n), g(F32, n);
          w.randn(ctx.rng);
          vel.randn(ctx.rng, 0.1);
          g.randn(ctx.rng);
          cpu::momentum_update(ctx.cpu, F32, w.h(), vel.h(), g.h(), n, 0.9,
                               nesterov);
          gpu::momentum_update(ctx.gpu, F32, w.d(), vel.d(), g.d(), n, 0.9,
                               nesterov);
          ctx.compare("master", w, 1e-6);
          ctx.compare("velocity", vel, 1e-6);
        });
    if (ctx.begin("adamw_update", dn, shape))
      ctx.guarded([&] {
        ctx.setStepState(state);
        Buffer w(F32, n, mis), m(F32, n), v(F32, n), g(F32, n);
        w.randn(ctx.rng);
        m.randn(ctx.rng, 0.1);
        v.uniform(ctx.rng, 0, 0.01);
        g.randn(ctx.rng);
        cpu::adamw_update(ctx.cpu, F32, w.h(), m.h(), v.h(), g.h(), n, 0.9,
                          0.999, 1e-8);
        gpu::adamw_update(ctx.gpu, F32, w.d(), m.d(), v.d(), g.d(), n, 0.9,
                          0.999, 1e-8);
        ctx.compare("master", w, 1e-6);
        ctx.compare("m", m, 1e-6);
        ctx.compare("v", v, 1e-6);
      });
    // The optimizers adding the gradient noise themselves (noiseIndex, what
    // dp_apply calls): against the CPU's, and bit for bit against add_noise
    // followed by the plain update on the GPU, for both generators.
    const char *updates[] = {"sgd_update", "momentum_update", "adamw_update"};
    for (auto generator :
         {dprt::NoiseGeneratorKind::Philox, dprt::NoiseGeneratorKind::ChaCha20})
      for (int opt = 0; opt < 3; ++opt)
        if (ctx.begin(updates[opt], dn,
                      shape + " noise " +
                          (generator == dprt::NoiseGeneratorKind::Philox
                               ? "philox"
                               : "chacha20")))
          ctx.guarded([&] {
            dprt::StepState noisy = state;
            noisy.noiseStd = 0.5;
            noisy.noiseKey[0] = 0x243f6a8885a308d3ull;
            noisy.noiseKey[1] = 0x13198a2e03707344ull;
            noisy.noiseGenerator = static_cast<int32_t>(generator);
            ctx.setStepState(noisy);
            const int64_t index = 1000003;
            // Fused (w, a, b) and add_noise + update (w2, a2, b2).
            Buffer w(F32, n, mis), a(F32, n), b(F32, n), g(F32, n),
                w2(F32, n, mis), a2(F32, n), b2(F32, n), g2(F32, n);
            w.randn(ctx.rng);
            a.randn(ctx.rng, 0.1);
            b.uniform(ctx.rng, 0, 0.01);
            g.randn(ctx.rng);
            for (int64_t i = 0; i < n; ++i) {
              w2.set(i, w.get(i));
              a2.set(i, a.get(i));
              b2.set(i, b.get(i));
              g2.set(i, g.get(i));
            }
            for (Buffer *x : {&w2, &a2, &b2, &g2})
              x->upload();
            auto update = [&](bool onCpu, Buffer &w, Buffer &a, Buffer &b,
                              Buffer &g, int64_t noiseIndex) {
              void *wp = onCpu ? w.h() : w.d(), *ap = onCpu ? a.h() : a.d(),
                   *bp = onCpu ? b.h() : b.d(), *gp = onCpu ? g.h() : g.d();
              dprt::Rank *r = onCpu ? ctx.cpu : ctx.gpu;
              auto *sgd = onCpu ? &cpu::sgd_update : &gpu::sgd_update;
              auto *momentum =
                  onCpu ? &cpu::momentum_update : &gpu::momentum_update;
              auto *adamw = onCpu ? &cpu::adamw_update : &gpu::adamw_update;
              if (opt == 0)
                sgd(r, F32, wp, gp, n, noiseIndex);
              else if (opt == 1)
                momentum(r, F32, wp, ap, gp, n, 0.9, false, noiseIndex);
              else
                adamw(r, F32, wp, ap, bp, gp, n, 0.9, 0.999, 1e-8, noiseIndex);
            };
            update(true, w, a, b, g, index);
            update(false, w, a, b, g, index);
            ctx.compare("master", w, 1e-6);
            gpu::add_noise(ctx.gpu, F32, g2.d(), n, index);
            update(false, w2, a2, b2, g2, -1);
            gpu::synchronize(ctx.gpu);
            Row same = compareValues(w.download(), w2.download(), 0);
            ctx.result("master = add_noise + update", same.pass, same.note);
            Row sameState = compareValues(a.download(), a2.download(), 0);
            ctx.result("state = add_noise + update", sameState.pass,
                       sameState.note);
          });
  }
  {
    // One rank and no communicator: all_gather copies and reduce_scatter
    // copies or adds, on the communication stream.
    int64_t n = 100003;
    if (ctx.begin("all_gather", dn, dims({{"n", n}}, false) + " 1 rank"))
      ctx.guarded([&] {
        Buffer shard(F32, n), full(F32, n);
        shard.randn(ctx.rng);
        full.poison();
        gpu::all_gather(ctx.gpu, F32, shard.d(), full.d(), n, 1);
        std::vector<double> expect = shard.hostValues();
        gpu::synchronize(ctx.gpu);
        Row row = compareValues(full.download(), expect, 0);
        ctx.result("full", row.pass, row.note);
      });
    // A unit on one shard "gathered" from its f32 master (bf16 models): the
    // CPU backend's cast, bit for bit, from an odd offset and length too.
    for (int64_t misalign : {int64_t(0), int64_t(1)})
      if (ctx.begin("gather_master", "f32>bf16",
                    dims({{"n", n - misalign}}, misalign != 0)))
        ctx.guarded([&] {
          const int64_t m = n - misalign;
          Buffer master(F32, m, misalign), full(DType::BF16, m, misalign);
          master.randn(ctx.rng, 3.0);
          full.poison();
          cpu::gather_master(ctx.cpu, F32, master.h(), DType::BF16, full.h(), m,
                             1);
          gpu::gather_master(ctx.gpu, F32, master.d(), DType::BF16, full.d(), m,
                             1);
          gpu::synchronize(ctx.gpu);
          ctx.compare("full", full, 0);
        });
    for (bool acc : {false, true})
      if (ctx.begin("reduce_scatter", dn,
                    dims({{"n", n}}, false) + " 1 rank" + (acc ? " acc" : "")))
        ctx.guarded([&] {
          Buffer full(F32, n), shard(F32, n);
          full.randn(ctx.rng);
          shard.randn(ctx.rng);
          std::vector<double> expect(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            expect[size_t(i)] =
                double(float((acc ? shard.get(i) : 0.0) + full.get(i)));
          gpu::reduce_scatter(ctx.gpu, F32, full.d(), shard.d(), n, acc, 1);
          gpu::synchronize(ctx.gpu);
          Row row = compareValues(shard.download(), expect, 0);
          ctx.result("shard", row.pass, row.note);
        });
  }
  if (ctx.begin("f64_rejected", "f64", "n16"))
    ctx.guarded([&] {
      bool threw = false;
      std::string message;
      try {
        gpu::add_forward(ctx.gpu, DType::F64, nullptr, nullptr, nullptr, 16);
      } catch (const std::runtime_error &e) {
        threw = true;
        message = e.what();
      }
      bool pass =
          threw && message.find("f64 is not supported on the CUDA backend") !=
                       std::string::npos;
      ctx.result("", pass, threw ? message : "no exception");
    });
}

} // namespace

void kernelChecks(Context &ctx) {
  for (DType dt : {F32, BF16})
    for (bool odd : {false, true}) {
      denseChecks(ctx, dt, odd);
      normalizationChecks(ctx, dt, odd);
      attentionChecks(ctx, dt, odd);
      elementwiseChecks(ctx, dt, odd);
      lossChecks(ctx, dt, odd);
      normChecks(ctx, dt, odd);
      weightGradChecks(ctx, dt, odd);
    }
  accChecks(ctx);
}

} // namespace dpc::gpucheck
