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
#include "DeviceState.h"
#include "Gemm.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace dpc::gpucheck {

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

void randomTokens(IntBuffer &t, int64_t n, int32_t vocab,
                  std::mt19937_64 &rng) {
  std::uniform_int_distribution<int32_t> u(0, vocab - 1);
  for (int64_t i = 0; i < n; ++i)
    t[i] = u(rng);
  t.upload();
}

void clipFactorsWithMaskedSample(Buffer &c, std::mt19937_64 &rng) {
  c.uniform(rng, 0.1, 1.0);
  c.set(1, 0.0);
  c.upload();
}

namespace {

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
  // The addend (a fused residual connection): none, apart from y (cuBLASLt's
  // C apart from its D) or y itself.
  enum class Addend { None, Apart, InPlace };
  for (bool withBias : {true, false})
    for (Addend addend : {Addend::None, Addend::Apart, Addend::InPlace}) {
      if (odd && !withBias && addend == Addend::None)
        continue;
      int64_t rows = odd ? 77 : 96, in = odd ? 130 : 256, out = odd ? 66 : 192;
      std::string shape =
          dims({{"rows", rows}, {"in", in}, {"out", out}}, odd) +
          (withBias ? (odd ? " bias-misaligned" : " bias") : "") +
          (addend == Addend::Apart     ? " addend"
           : addend == Addend::InPlace ? " addend-in-place"
                                       : "");
      if (ctx.begin("linear_forward", dn, shape))
        ctx.guarded([&] {
          Buffer x(dt, rows * in, mis), w(dt, out * in), b(dt, out, mis),
              r(dt, rows * out, mis), y(dt, rows * out);
          x.randn(ctx.rng);
          w.randn(ctx.rng, 1.0 / std::sqrt(double(in)));
          b.randn(ctx.rng);
          r.randn(ctx.rng);
          if (addend == Addend::InPlace)
            y.randn(ctx.rng);
          else
            y.poison();
          const bool apart = addend == Addend::Apart;
          const bool none = addend == Addend::None;
          cpu::linear_forward(ctx.cpu, dt, x.h(), w.h(),
                              withBias ? b.h() : nullptr,
                              none    ? nullptr
                              : apart ? r.h()
                                      : y.h(),
                              y.h(), rows, in, out);
          gpu::linear_forward(ctx.gpu, dt, x.d(), w.d(),
                              withBias ? b.d() : nullptr,
                              none    ? nullptr
                              : apart ? r.d()
                                      : y.d(),
                              y.d(), rows, in, out);
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
  // A product large enough that its first call times cuBLASLt's candidates
  // (Gemm.cpp): each candidate's runs add into dx, so tuning must save dx
  // and put it back, and the product then run once on the original.
  if (!odd) {
    const int64_t rows = 2048, in = 2304, out = 2560;
    if (ctx.begin("linear_backward_input", dn,
                  dims({{"rows", rows}, {"in", in}, {"out", out}}, odd) +
                      " acc tuned"))
      ctx.guarded([&] {
        // On, whatever DPRT_GEMM_TUNING says, and back as it was even if
        // the case throws.
        struct TuningOn {
          bool &flag;
          const bool was;
          explicit TuningOn(bool &f) : flag(f), was(f) { flag = true; }
          ~TuningOn() { flag = was; }
        } tuningOn(dprt::cuda::deviceState(ctx.gpu).gemmTuning);
        const int64_t before = dprt::cuda::gemmsTuned(ctx.gpu);
        Buffer dy(dt, rows * out), w(dt, out * in), dx(dt, rows * in);
        dy.randn(ctx.rng);
        w.randn(ctx.rng, 1.0 / std::sqrt(double(out)));
        dx.randn(ctx.rng);
        cpu::linear_backward_input(ctx.cpu, dt, dy.h(), w.h(), dx.h(), rows, in,
                                   out, true);
        gpu::linear_backward_input(ctx.gpu, dt, dy.d(), w.d(), dx.d(), rows, in,
                                   out, true);
        ctx.compare("dx", dx, tol(dt));
        const int64_t tuned = dprt::cuda::gemmsTuned(ctx.gpu) - before;
        ctx.result("tuned", tuned == 1,
                   std::to_string(tuned) + " product shape(s) tuned, 1 wanted");
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
            dgate(dt, n, mis), dup(dt, n, mis), y(dt, n, mis),
            forward(dt, n, mis);
        gate.randn(ctx.rng, 3.0);
        up.randn(ctx.rng);
        dy.randn(ctx.rng);
        dgate.poison();
        dup.poison();
        y.poison();
        // Even shapes also rematerialize the forward's output (y).
        void *yh = odd ? nullptr : y.h(), *yd = odd ? nullptr : y.d();
        cpu::glu_backward(ctx.cpu, dt, act, gate.h(), up.h(), dy.h(), dgate.h(),
                          odd ? nullptr : dup.h(), yh, n);
        gpu::glu_backward(ctx.gpu, dt, act, gate.d(), up.d(), dy.d(), dgate.d(),
                          odd ? nullptr : dup.d(), yd, n);
        ctx.compare("dgate", dgate, tol(dt));
        if (!odd) {
          ctx.compare("dup", dup, tol(dt));
          ctx.compare("y", y, tol(dt));
          // The rematerialized output must be glu_forward's, bit for bit:
          // the weight gradient that reads it trains the bits it would
          // train on the forward's.
          gpu::glu_forward(ctx.gpu, dt, act, gate.d(), up.d(), forward.d(), n);
          gpu::synchronize(ctx.gpu);
          Row same = compareValues(y.download(), forward.download(), 0);
          ctx.result("y = glu_forward", same.pass, same.note);
        }
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
  if (!odd) {
    // Rows of several vectors a thread (32808 classes over the forward's
    // 1024 threads), with -inf logits (masked classes) in every row, the
    // row's maximum late in it and, in row 0, a masked target (an infinite
    // loss).
    int64_t batch = 2, tokens = 3, classes = 32808, rows = batch * tokens;
    std::string shape =
        dims({{"B", batch}, {"T", tokens}, {"C", classes}}, false) +
        " mean -inf";
    if (ctx.begin("cross_entropy_forward", dn, shape))
      ctx.guarded([&] {
        Buffer logits(dt, rows * classes), loss(F32, batch), lse(F32, rows);
        IntBuffer targets(rows);
        logits.randn(ctx.rng, 3.0);
        const double inf = std::numeric_limits<double>::infinity();
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = r; c < classes; c += 97)
            logits.set(r * classes + c, -inf);
          logits.set(r * classes + classes - 3 - r, 12.0);
          targets[r] = int32_t((r * 7919) % classes);
        }
        targets[0] = 0; // a masked class as the target: an infinite loss
        logits.upload();
        targets.upload();
        loss.poison();
        lse.poison();
        cpu::cross_entropy_forward(ctx.cpu, dt, logits.h(), targets.h(),
                                   loss.h(), lse.h(), batch, tokens, classes,
                                   true, -1, Reduction::Mean);
        gpu::cross_entropy_forward(ctx.gpu, dt, logits.d(), targets.d(),
                                   loss.d(), lse.d(), batch, tokens, classes,
                                   true, -1, Reduction::Mean);
        ctx.compare("loss", loss, 1e-5);
        ctx.compare("lse", lse, 1e-5);
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

// Shared by the timings (Timings.cpp) and the NCCL checks (NcclChecks.cpp).
double medianMicrosOnStream(dprt::Rank *rank, int32_t stream, int warmups,
                            const std::function<void()> &launch) {
  for (int i = 0; i < warmups; ++i)
    launch();
  gpu::synchronize(rank);
  cudaStream_t s = gpu::streamOf(rank, stream);
  cudaEvent_t start, stop;
  cudaCheck(cudaEventCreate(&start), "cudaEventCreate");
  cudaCheck(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> times;
  for (int rep = 0; rep < 10; ++rep) {
    cudaCheck(cudaEventRecord(start, s), "cudaEventRecord");
    launch();
    cudaCheck(cudaEventRecord(stop, s), "cudaEventRecord");
    cudaCheck(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    cudaCheck(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return 1000.0 * double(times[times.size() / 2]);
}

} // namespace dpc::gpucheck
