//===- Timings.cpp - Kernel times at the sizes of the 1.1B Llama model ----===//
//
// Width 2048, 32 heads of 64, 8 key/value heads, MLP 8192, vocabulary 32000,
// 8 sequences of 1024 tokens (8192 rows), bf16 unless noted. Inputs are
// random (never zeros). Each kernel runs twice to warm up (GEMM plans,
// scratch), then 10 times between CUDA events on the compute stream; the
// median is reported with the rate it implies: TFLOP/s for products (the
// FLOPs of the products as launched; attention counts its useful products,
// half of the T x T matrices with the causal mask), GB/s for the rest (the
// fewest bytes the kernel must read and write).
//
//===----------------------------------------------------------------------===//

#include "Timing.h"

#include "DeviceState.h"
#include "NormGemms.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <vector>

namespace dpc::gpucheck {

using dprt::Activation;

/// Times `launch` and adds a row; `work` is FLOPs when `flops`, else bytes.
void timeKernel(Context &ctx, const std::string &kernel, DType dt,
                const std::string &shape, double work, bool flops,
                const std::function<void()> &launch) {
  if (!ctx.begin(kernel, dprt::nameOf(dt), shape))
    return;
  try {
    double us = medianMicrosOnStream(ctx.gpu, 0, 2, launch);
    Timing t;
    t.kernel = kernel;
    t.dtype = dprt::nameOf(dt);
    t.shape = shape;
    t.microseconds = us;
    t.rate = flops ? work / (us * 1e6) : work / (us * 1e3);
    t.unit = flops ? "TFLOP/s" : "GB/s";
    ctx.report->addTiming(t);
  } catch (const std::exception &e) {
    ctx.result("timing", false, std::string("exception: ") + e.what());
    cudaGetLastError();
  }
}

std::string mk(int64_t rows, int64_t in, int64_t out) {
  return std::to_string(rows) + "x" + std::to_string(in) + "->" +
         std::to_string(out);
}

namespace {

/// The 1.1B model's linear weights.
struct Layer {
  const char *name;
  int64_t in, out;
};
constexpr Layer kLayers[] = {{"q/o", kD, kD},
                             {"k/v", kD, kKV *kHd},
                             {"gate/up", kD, kFF},
                             {"down", kFF, kD},
                             {"lm-head", kD, kVocab}};

/// The StepState of the optimizer timings: AdamW's 10th step, gradScale
/// 1/256, lr 1e-4, and Philox noise of std `noiseStd` (none by default).
void setTimedUpdateState(Context &ctx, double noiseStd = 0.0) {
  dprt::StepState state{};
  state.step = 10;
  state.gradScale = 1.0 / 256;
  state.lrScale = 1.0;
  state.lr = 1e-4;
  state.noiseStd = noiseStd;
  state.noiseKey[0] = 0x243f6a8885a308d3ull;
  state.noiseGenerator = static_cast<int32_t>(dprt::NoiseGeneratorKind::Philox);
  ctx.setStepState(state);
}

void linearTimings(Context &ctx) {
  uint64_t seed = ctx.baseSeed;
  for (const Layer &l : kLayers)
    for (DType dt : {BF16, F32}) {
      if (dt == F32 && std::string(l.name) != "q/o")
        continue;
      std::string shape = std::string(l.name) + " " + mk(kRows, l.in, l.out);
      double flop = 2.0 * kRows * l.in * l.out;
      {
        DeviceBuffer x(dt, kRows * l.in, ++seed), w(dt, l.out * l.in, ++seed),
            y(dt, kRows * l.out, ++seed);
        timeKernel(ctx, "linear_forward", dt, shape, flop, true, [&] {
          gpu::linear_forward(ctx.gpu, dt, x.p(), w.p(), nullptr, nullptr,
                              y.p(), kRows, l.in, l.out);
        });
        // y plays dy, x plays dx.
        timeKernel(ctx, "linear_backward_input", dt, shape, flop, true, [&] {
          gpu::linear_backward_input(ctx.gpu, dt, y.p(), w.p(), x.p(), kRows,
                                     l.in, l.out, false);
        });
      }
      if (dt == F32)
        continue;
      DeviceBuffer x(dt, kRows * l.in, ++seed), dy(dt, kRows * l.out, ++seed),
          c(F32, kB, ++seed, 0.0, 1.0), dw(F32, l.out * l.in, ++seed),
          ws(dt, kRows * l.out, ++seed);
      timeKernel(ctx, "linear_weight_grad", dt, shape, flop, true, [&] {
        gpu::linear_weight_grad(ctx.gpu, dt, x.p(), dy.p(), c.p(), dw.p(), kB,
                                kT, l.in, l.out, ws.p(), true);
      });
      // DP off's: no clip factors, no pass scaling dy into the workspace.
      timeKernel(
          ctx, "linear_weight_grad.unweighted", dt, shape, flop, true, [&] {
            gpu::linear_weight_grad(ctx.gpu, dt, x.p(), dy.p(), nullptr, dw.p(),
                                    kB, kT, l.in, l.out, nullptr, true);
          });
      // ... writing dW instead of adding to it (beta 0: dW not read), as a
      // program of one micro-step a step does.
      timeKernel(ctx, "linear_weight_grad.unweighted.overwrite", dt, shape,
                 flop, true, [&] {
                   gpu::linear_weight_grad(ctx.gpu, dt, x.p(), dy.p(), nullptr,
                                           dw.p(), kB, kT, l.in, l.out, nullptr,
                                           false);
                 });
    }
}

void normTimings(Context &ctx) {
  uint64_t seed = ctx.baseSeed + 1000;
  const DType dt = BF16;
  {
    // The materialized method's product with its norms: fused (sm_90, the
    // squares in the product's epilogue) and two-pass (cuBLASLt, then a
    // read of the slices), at the benchmark's four (b, T) with b T = 8192
    // (the 128K-vocabulary head at T = 2048), and at T = 1024 the product
    // alone; each row names the path. They set the fused kernel's default
    // range (dprt/fused_norms.h).
    std::vector<Layer> layers(std::begin(kLayers), std::end(kLayers));
    layers.push_back({"lm-head-128k", kD, 128256});
    for (int64_t batch : {kB, int64_t(4), int64_t(2), int64_t(1)})
      for (const Layer &l : layers) {
        const int64_t tokens = kRows / batch;
        if (l.out == 128256 && tokens != 2048)
          continue;
        DeviceBuffer x(dt, kRows * l.in, ++seed), dy(dt, kRows * l.out, ++seed),
            g(dt, batch * l.out * l.in, ++seed), n2(F32, batch, ++seed, 0, 1);
        const std::string shape = std::string(l.name) + " " +
                                  mk(kRows, l.in, l.out) + " B" +
                                  std::to_string(batch);
        const double flop = 2.0 * kRows * l.in * l.out;
        for (const char *path : {"fused", "two-pass"}) {
          setenv("DPRT_PER_SAMPLE_GRAD", path, 1);
          if (std::string(path) == "fused" &&
              !gpu::fusedPerSampleGradRuns(ctx.gpu, dt, batch, tokens, l.in,
                                           l.out))
            continue;
          timeKernel(ctx, "linear_per_sample_grad", dt,
                     shape + " norm, " + path, flop, true, [&] {
                       gpu::linear_per_sample_grad(ctx.gpu, dt, dt, x.p(), dy.p(),
                                                   g.p(), n2.p(), batch, tokens,
                                                   l.in, l.out);
                     });
        }
        unsetenv("DPRT_PER_SAMPLE_GRAD");
        // The same product into MXFP8 rows (--per-sample-rows=mxfp8).
        if (batch == kB) {
          DeviceBuffer mx(DType::MXFP8, batch * l.out * l.in, ++seed);
          timeKernel(ctx, "linear_per_sample_grad", DType::MXFP8,
                     shape + " norm", flop, true, [&] {
                       gpu::linear_per_sample_grad(
                           ctx.gpu, dt, DType::MXFP8, x.p(), dy.p(), mx.p(),
                           n2.p(), batch, tokens, l.in, l.out);
                     });
        }
        if (batch == kB)
          timeKernel(ctx, "linear_per_sample_grad", dt, shape, flop, true, [&] {
            gpu::linear_per_sample_grad(ctx.gpu, dt, dt, x.p(), dy.p(), g.p(),
                                        nullptr, batch, tokens, l.in, l.out);
          });
      }
  }
  {
    // The materialized method's other pass: the clipped sum of the slices
    // (and their norms' pass where the fused kernel does not run), over the
    // 8 slices of a 8192 x 2048 weight; GB/s of the slices read and the f32
    // gradient read and written.
    const int64_t dim = kFF * kD;
    DeviceBuffer g(dt, kB * dim, ++seed), c(F32, kB, ++seed, 0.5, 1.0),
        out(F32, dim, ++seed), n2(F32, kB, ++seed, 0, 1);
    timeKernel(ctx, "rows_weighted_sum", dt, "B8 d" + std::to_string(dim),
               double(kB * dim * 2 + dim * 8), false, [&] {
                 gpu::rows_weighted_sum(ctx.gpu, dt, g.p(), c.p(), out.p(), kB,
                                        dim);
               });
    timeKernel(ctx, "norm_rows", dt, "B8 d" + std::to_string(dim),
               double(kB * dim * 2), false,
               [&] { gpu::norm_rows(ctx.gpu, dt, g.p(), n2.p(), kB, dim); });
  }
  for (int64_t width : {kD, kFF}) {
    DeviceBuffer x(dt, kRows * width, ++seed), K(F32, kB * kT * kT, ++seed);
    timeKernel(ctx, "gram", dt, "B8 T1024 d" + std::to_string(width),
               2.0 * kB * kT * kT * width, true, [&] {
                 gpu::gram(ctx.gpu, dt, x.p(), K.p(), kB, kT, width, false);
               });
  }
  {
    DeviceBuffer ka(F32, kB * kT * kT, ++seed), kg(F32, kB * kT * kT, ++seed),
        n2(F32, kB, ++seed, 0, 1);
    timeKernel(
        ctx, "gram_dot", F32, "B8 T1024", 2.0 * kB * kT * kT * 4, false,
        [&] { gpu::gram_dot(ctx.gpu, F32, ka.p(), kg.p(), n2.p(), kB, kT); });
  }
  {
    // The direct norm, fused (sm_90: the squares in the product's epilogue,
    // nothing stored) and two-pass (one cuBLASLt product per sample into an
    // f32 workspace, then a read of it), at b T = 8192; each row names the
    // path. They set its default (dprt/fused_norms.h).
    for (int64_t batch : {kB, int64_t(4), int64_t(2), int64_t(1)})
      for (const Layer &l : kLayers) {
        const int64_t tokens = kRows / batch;
        DeviceBuffer x(dt, kRows * l.in, ++seed), dy(dt, kRows * l.out, ++seed),
            n2(F32, batch, ++seed, 0, 1), ws(F32, l.in * l.out, ++seed);
        const std::string shape = std::string(l.name) + " " +
                                  mk(kRows, l.in, l.out) + " B" +
                                  std::to_string(batch);
        for (const char *path : {"fused", "two-pass"}) {
          ScopedEnv env("DPRT_DIRECT_NORM", path);
          if (std::string(path) == "fused" &&
              !gpu::fusedDirectNormRuns(ctx.gpu, dt, batch, tokens, l.in,
                                        l.out))
            continue;
          timeKernel(ctx, "norm_direct", dt, shape + ", " + path,
                     2.0 * kRows * l.in * l.out, true, [&] {
                       gpu::norm_direct(ctx.gpu, dt, x.p(), dy.p(), n2.p(),
                                        batch, tokens, l.in, l.out, ws.p());
                     });
        }
      }
  }
  {
    // One layer's share of a Gram norm, fused (sm_90: <Ka, Dy Dy^T> summed
    // in the Gram product's epilogue) and two-pass (cuBLASLt's Gram product
    // into Kg, then gram_dot), for output gradients as wide as k/v, q/o,
    // gate/up and the head, at b T = 8192; TFLOP/s of the Gram product.
    for (int64_t batch : {kB, int64_t(4), int64_t(2), int64_t(1)})
      for (int64_t width : {kKV * kHd, kD, kFF, kVocab}) {
        const int64_t tokens = kRows / batch, tt = batch * tokens * tokens;
        DeviceBuffer dy(dt, kRows * width, ++seed), ka(F32, tt, ++seed),
            kg(F32, tt, ++seed), n2(F32, batch, ++seed, 0, 1);
        const std::string shape = "B" + std::to_string(batch) + " T" +
                                  std::to_string(tokens) + " d" +
                                  std::to_string(width);
        for (const char *path : {"fused", "two-pass"}) {
          ScopedEnv env("DPRT_GRAM_NORM", path);
          if (std::string(path) == "fused" &&
              !gpu::fusedGramNormRuns(ctx.gpu, dt, batch, tokens, width))
            continue;
          timeKernel(ctx, "gram_norm", dt, shape + ", " + path,
                     2.0 * tt * width, true, [&] {
                       gpu::gram_norm(ctx.gpu, dt, dy.p(), ka.p(), kg.p(),
                                      n2.p(), batch, tokens, width);
                     });
        }
      }
  }
  {
    DeviceBuffer dy(dt, kRows * kD, ++seed), n2(F32, kB, ++seed, 0, 1);
    timeKernel(
        ctx, "norm_bias", dt, "B8 T1024 out2048", 2.0 * kRows * kD, false,
        [&] { gpu::norm_bias(ctx.gpu, dt, dy.p(), n2.p(), kB, kT, kD); });
    DeviceTokens tok(kRows, ++seed, int32_t(kVocab));
    timeKernel(ctx, "norm_embedding", dt, "B8 T1024 d2048 V32000",
               2.0 * kRows * kD, false, [&] {
                 gpu::norm_embedding(ctx.gpu, dt, tok.p(), dy.p(), n2.p(), kB,
                                     kT, kD);
               });
    // One sample of the same tokens: T = 8192, b = 1.
    timeKernel(ctx, "norm_embedding", dt, "B1 T8192 d2048 V32000",
               2.0 * kRows * kD, false, [&] {
                 gpu::norm_embedding(ctx.gpu, dt, tok.p(), dy.p(), n2.p(), 1,
                                     kRows, kD);
               });
  }
}

void layerTimings(Context &ctx) {
  uint64_t seed = ctx.baseSeed + 2000;
  const DType dt = BF16;
  {
    DeviceBuffer x(dt, kRows * kD, ++seed), g(dt, kD, ++seed, 0.5, 1.5),
        y(dt, kRows * kD, ++seed), rstd(F32, kRows, ++seed, 0.5, 2.0),
        dx(dt, kRows * kD, ++seed), dgamma(F32, kB * kD, ++seed),
        remade(dt, kRows * kD, ++seed);
    timeKernel(ctx, "rms_norm_forward", dt, "8192x2048", 2.0 * 2 * kRows * kD,
               false, [&] {
                 gpu::rms_norm_forward(ctx.gpu, dt, x.p(), g.p(), y.p(),
                                       rstd.p(), kRows, kD, 1e-5);
               });
    timeKernel(ctx, "rms_norm_backward", dt, "8192x2048 +dgamma",
               3.0 * 2 * kRows * kD, false, [&] {
                 gpu::rms_norm_backward(ctx.gpu, dt, x.p(), g.p(), rstd.p(),
                                        y.p(), dx.p(), dgamma.p(), nullptr, kB,
                                        kT, kD, false);
               });
    // The same pass making the rematerialized RMSNorm's result.
    timeKernel(ctx, "rms_norm_backward", dt, "8192x2048 +dgamma +y",
               4.0 * 2 * kRows * kD, false, [&] {
                 gpu::rms_norm_backward(ctx.gpu, dt, x.p(), g.p(), rstd.p(),
                                        y.p(), dx.p(), dgamma.p(), remade.p(),
                                        kB, kT, kD, false);
               });
  }
  {
    DeviceBuffer q(dt, kRows * kH * kHd, ++seed);
    timeKernel(ctx, "rope_forward", dt, "q B8 T1024 H32 hd64",
               2.0 * 2 * kRows * kH * kHd, false, [&] {
                 gpu::rope_forward(ctx.gpu, dt, q.p(), q.p(), nullptr, kB, kT,
                                   kH, kHd, 10000.0);
               });
    // The 1.1B model's k (8 heads: 8 rows a block iteration) and the
    // backward that adds into its output (dx of a q shared with k, say).
    DeviceBuffer k(dt, kRows * 8 * kHd, ++seed),
        dq(dt, kRows * kH * kHd, ++seed);
    timeKernel(ctx, "rope_forward", dt, "k B8 T1024 H8 hd64",
               2.0 * 2 * kRows * 8 * kHd, false, [&] {
                 gpu::rope_forward(ctx.gpu, dt, k.p(), k.p(), nullptr, kB, kT,
                                   8, kHd, 10000.0);
               });
    timeKernel(ctx, "rope_backward.accumulate", dt, "q B8 T1024 H32 hd64",
               3.0 * 2 * kRows * kH * kHd, false, [&] {
                 gpu::rope_backward(ctx.gpu, dt, q.p(), dq.p(), nullptr, kB, kT,
                                    kH, kHd, 10000.0, true);
               });
  }
  attentionTimings(ctx, seed);
  {
    int64_t n = kRows * kFF;
    DeviceBuffer a(dt, n, ++seed), b(dt, n, ++seed), y(dt, n, ++seed),
        da(dt, n, ++seed), db(dt, n, ++seed), out(dt, n, ++seed);
    std::string shape = "8192x8192";
    timeKernel(ctx, "activation_forward.silu", dt, shape, 2.0 * 2 * n, false,
               [&] {
                 gpu::activation_forward(ctx.gpu, dt, Activation::Silu, a.p(),
                                         y.p(), n);
               });
    timeKernel(ctx, "activation_backward.silu", dt, shape, 3.0 * 2 * n, false,
               [&] {
                 gpu::activation_backward(ctx.gpu, dt, Activation::Silu, a.p(),
                                          b.p(), y.p(), n, false);
               });
    // The 1.1B model's SwiGLU: gate and up of 8192 x 8192.
    timeKernel(ctx, "glu_forward.silu", dt, shape, 3.0 * 2 * n, false, [&] {
      gpu::glu_forward(ctx.gpu, dt, Activation::Silu, a.p(), b.p(), y.p(), n);
    });
    timeKernel(ctx, "glu_backward.silu", dt, shape, 5.0 * 2 * n, false, [&] {
      gpu::glu_backward(ctx.gpu, dt, Activation::Silu, a.p(), b.p(), y.p(),
                        da.p(), db.p(), nullptr, n);
    });
    // With the forward's output rematerialized in the same pass (what
    // replaces glu_forward.silu + glu_backward.silu where the down
    // projection's weight gradient reads it after the backward).
    timeKernel(ctx, "glu_backward.silu+output", dt, shape, 6.0 * 2 * n, false,
               [&] {
                 gpu::glu_backward(ctx.gpu, dt, Activation::Silu, a.p(), b.p(),
                                   y.p(), da.p(), db.p(), out.p(), n);
               });
    timeKernel(ctx, "mul_forward", dt, shape, 3.0 * 2 * n, false,
               [&] { gpu::mul_forward(ctx.gpu, dt, a.p(), b.p(), y.p(), n); });
    timeKernel(ctx, "mul_backward", dt, shape, 5.0 * 2 * n, false, [&] {
      gpu::mul_backward(ctx.gpu, dt, a.p(), b.p(), y.p(), da.p(), db.p(), n,
                        false, false);
    });
  }
  {
    int64_t n = kRows * kD;
    DeviceBuffer a(dt, n, ++seed), b(dt, n, ++seed), y(dt, n, ++seed);
    timeKernel(ctx, "add_forward", dt, "8192x2048", 3.0 * 2 * n, false,
               [&] { gpu::add_forward(ctx.gpu, dt, a.p(), b.p(), y.p(), n); });
    timeKernel(ctx, "accumulate", dt, "8192x2048", 3.0 * 2 * n, false,
               [&] { gpu::accumulate(ctx.gpu, dt, a.p(), y.p(), n); });
  }
}

void lossAndParameterTimings(Context &ctx) {
  uint64_t seed = ctx.baseSeed + 3000;
  const DType dt = BF16;
  {
    DeviceBuffer logits(dt, kRows * kVocab, ++seed, -3.0, 3.0),
        dlogits(dt, kRows * kVocab, ++seed), loss(F32, kB, ++seed),
        lse(F32, kRows, ++seed), dloss(F32, kB, ++seed, 0.5, 1.5);
    DeviceTokens targets(kRows, ++seed, int32_t(kVocab));
    std::string shape = "8192x32000";
    timeKernel(ctx, "cross_entropy_forward", dt, shape, 2.0 * kRows * kVocab,
               false, [&] {
                 gpu::cross_entropy_forward(
                     ctx.gpu, dt, logits.p(), targets.p(), loss.p(), lse.p(),
                     kB, kT, kVocab, true, -1, dprt::Reduction::Mean);
               });
    timeKernel(ctx, "cross_entropy_backward", dt, shape,
               2.0 * 2 * kRows * kVocab, false, [&] {
                 gpu::cross_entropy_backward(ctx.gpu, dt, logits.p(),
                                             targets.p(), lse.p(), dloss.p(),
                                             dlogits.p(), kB, kT, kVocab, true,
                                             -1, dprt::Reduction::Mean);
               });
  }
  {
    DeviceBuffer table(dt, kVocab * kD, ++seed), out(dt, kRows * kD, ++seed),
        dtable(F32, kVocab * kD, ++seed), c(F32, kB, ++seed, 0.0, 1.0);
    DeviceTokens tok(kRows, ++seed, int32_t(kVocab));
    timeKernel(ctx, "embedding_forward", dt, "8192 rows d2048",
               2.0 * 2 * kRows * kD, false, [&] {
                 gpu::embedding_forward(ctx.gpu, dt, tok.p(), table.p(),
                                        out.p(), kRows, kVocab, kD);
               });
    timeKernel(ctx, "embedding_grad", dt, "8192 rows d2048",
               (2.0 + 8.0) * kRows * kD, false, [&] {
                 gpu::embedding_grad(ctx.gpu, dt, tok.p(), out.p(), c.p(),
                                     dtable.p(), kB, kT, kVocab, kD);
               });
  }
  {
    // A rank's shard of the 1.1B model on 2 GPUs is ~550M; 128M suffices
    // to measure the bandwidth.
    int64_t n = int64_t(128) << 20;
    setTimedUpdateState(ctx);
    DeviceBuffer w(F32, n, ++seed), m(F32, n, ++seed, -0.1, 0.1),
        v(F32, n, ++seed, 0.0, 0.01), g(F32, n, ++seed);
    timeKernel(ctx, "adamw_update", F32, "n=128M", 7.0 * 4 * n, false, [&] {
      gpu::adamw_update(ctx.gpu, F32, w.p(), m.p(), v.p(), g.p(), n, 0.9, 0.999,
                        1e-8);
    });
    DeviceBuffer half(BF16, n, ++seed);
    timeKernel(ctx, "cast.to_bf16", F32, "n=128M", 6.0 * n, false,
               [&] { gpu::cast(ctx.gpu, F32, w.p(), BF16, half.p(), n); });
  }
  {
    // One micro-step a step: each optimizer reading the 8 materialized bf16
    // slices of a 2048 x 5632 weight and their clip factors, against the
    // zeroed gradient, rows_weighted_sum and plain update it replaces. GB/s
    // of the fewest bytes each moves: the slices, master and state read and
    // written, and for the composition the gradient zeroed, read, written
    // and read again.
    const int64_t n = int64_t(2048) * 5632;
    setTimedUpdateState(ctx);
    DeviceBuffer g(dt, kB * n, ++seed), c(F32, kB, ++seed, 0.5, 1.0),
        w(F32, n, ++seed), m(F32, n, ++seed, -0.1, 0.1),
        v(F32, n, ++seed, 0.0, 0.01), grad(F32, n, ++seed);
    const std::string shape = "B8 n" + std::to_string(n);
    const double rows = 2.0 * kB * n, gradient = 4.0 * 4 * n;
    const char *names[] = {"sgd", "momentum", "adamw"};
    for (int opt = 0; opt < 3; ++opt) {
      const double stateBytes = 8.0 * (opt + 1) * n;
      auto update = [&](bool fused) {
        if (!fused) {
          gpu::zero(ctx.gpu, grad.p(), n * int64_t(sizeof(float)));
          gpu::rows_weighted_sum(ctx.gpu, dt, g.p(), c.p(), grad.p(), kB, n);
        }
        if (opt == 0 && fused)
          gpu::sgd_update_rows(ctx.gpu, dt, w.p(), g.p(), c.p(), kB, n);
        else if (opt == 0)
          gpu::sgd_update(ctx.gpu, F32, w.p(), grad.p(), n);
        else if (opt == 1 && fused)
          gpu::momentum_update_rows(ctx.gpu, dt, w.p(), m.p(), g.p(), c.p(), kB,
                                    n, 0.9, false);
        else if (opt == 1)
          gpu::momentum_update(ctx.gpu, F32, w.p(), m.p(), grad.p(), n, 0.9,
                               false);
        else if (fused)
          gpu::adamw_update_rows(ctx.gpu, dt, w.p(), m.p(), v.p(), g.p(), c.p(),
                                 kB, n, 0.9, 0.999, 1e-8);
        else
          gpu::adamw_update(ctx.gpu, F32, w.p(), m.p(), v.p(), grad.p(), n, 0.9,
                            0.999, 1e-8);
      };
      const std::string name = names[opt];
      timeKernel(ctx, name + "_update_rows", dt, shape, rows + stateBytes,
                 false, [&] { update(true); });
      timeKernel(ctx, "zero+rows_weighted_sum+" + name + "_update", dt, shape,
                 rows + stateBytes + gradient, false, [&] { update(false); });
    }
    // A DP step's updates add the Gaussian noise of every element (one
    // random block a quad of elements).
    setTimedUpdateState(ctx, 1.0);
    timeKernel(
        ctx, "sgd_update_rows.noise", dt, shape, rows + 8.0 * n, false, [&] {
          gpu::sgd_update_rows(ctx.gpu, dt, w.p(), g.p(), c.p(), kB, n, 0);
        });
    timeKernel(ctx, "adamw_update_rows.noise", dt, shape, rows + 24.0 * n,
               false, [&] {
                 gpu::adamw_update_rows(ctx.gpu, dt, w.p(), m.p(), v.p(), g.p(),
                                        c.p(), kB, n, 0.9, 0.999, 1e-8, 0);
               });
    // The same from MXFP8 rows (1 + 1/32 bytes an element).
    DeviceBuffer mx(DType::MXFP8, kB * n, ++seed);
    const double mxRows = (1.0 + 1.0 / 32) * kB * n;
    timeKernel(ctx, "sgd_update_rows.noise", DType::MXFP8, shape,
               mxRows + 8.0 * n, false, [&] {
                 gpu::sgd_update_rows(ctx.gpu, DType::MXFP8, w.p(), mx.p(),
                                      c.p(), kB, n, 0);
               });
    timeKernel(ctx, "adamw_update_rows.noise", DType::MXFP8, shape,
               mxRows + 24.0 * n, false, [&] {
                 gpu::adamw_update_rows(ctx.gpu, DType::MXFP8, w.p(), m.p(),
                                        v.p(), mx.p(), c.p(), kB, n, 0.9,
                                        0.999, 1e-8, 0);
               });
    setTimedUpdateState(ctx);
  }
  {
    // The noised updates at the programs' sizes: the 1.1B model's MLP
    // weights (2^24 elements, so that the rows lie 32 MiB apart) and its
    // k/v weights (2^20), at the T = 1024 (B8) and 128K-vocabulary (B4)
    // batches, and one block's seven weights in a row as a program runs
    // them. The 2^24 + 4096 rows tell a power-of-two row stride's cost.
    const int64_t q = int64_t(1) << 22, kv = int64_t(1) << 20,
                  mlp = int64_t(1) << 24;
    const int64_t block[] = {q, kv, kv, q, mlp, mlp, mlp};
    const int64_t most = mlp + 4096;
    DeviceBuffer g(dt, kB * 7 * most, ++seed), c(F32, kB, ++seed, 0.5, 1.0),
        w(F32, 7 * most, ++seed), m(F32, 7 * most, ++seed, -0.1, 0.1),
        v(F32, 7 * most, ++seed, 0.0, 0.01);
    setTimedUpdateState(ctx, 1.0);
    for (int64_t batch : {kB, int64_t(4)}) {
      for (int64_t n : {mlp, mlp + 4096, kv}) {
        const std::string shape =
            "B" + std::to_string(batch) + " n" + std::to_string(n);
        timeKernel(ctx, "sgd_update_rows.noise", dt, shape,
                   2.0 * batch * n + 8.0 * n, false, [&] {
                     gpu::sgd_update_rows(ctx.gpu, dt, w.p(), g.p(), c.p(),
                                          batch, n, 0);
                   });
        timeKernel(ctx, "adamw_update_rows.noise", dt, shape,
                   2.0 * batch * n + 24.0 * n, false, [&] {
                     gpu::adamw_update_rows(ctx.gpu, dt, w.p(), m.p(), v.p(),
                                            g.p(), c.p(), batch, n, 0.9, 0.999,
                                            1e-8, 0);
                   });
      }
      // One block's weights, each in its own slice of the buffers.
      int64_t total = 0;
      for (int64_t n : block)
        total += n;
      const std::string shape = "B" + std::to_string(batch) + " one block";
      timeKernel(ctx, "adamw_update_rows.noise", dt, shape,
                 (2.0 * batch + 24.0) * total, false, [&] {
                   int64_t at = 0;
                   for (int64_t n : block) {
                     gpu::adamw_update_rows(
                         ctx.gpu, dt, w.p<float>() + at, m.p<float>() + at,
                         v.p<float>() + at, g.p<char>() + 2 * batch * at, c.p(),
                         batch, n, 0.9, 0.999, 1e-8, at);
                     at += n;
                   }
                 });
    }
    setTimedUpdateState(ctx);
  }
}

} // namespace

void timings(Context &ctx) {
  linearTimings(ctx);
  normTimings(ctx);
  layerTimings(ctx);
  lossAndParameterTimings(ctx);
}

} // namespace dpc::gpucheck
