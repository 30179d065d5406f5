//===- AccChecks.cpp - CUDA kernels on f32 buffers against the CPU -------===//
//
// The kernels of the clip and update path that work on acc (f32) buffers or
// on rows of either type: the Gram dot product, sums of squares and weighted
// sums of materialized rows, clip factors, the optimizer steps (with and
// without the gradient noise they add), and the one-rank collectives; the
// _rows updates and update groups in UpdateChecks.cpp. The tolerances are
// KernelChecks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "BoxMullerCheck.h"
#include "MxScaleByteCheck.h"
#include "Cases.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"
#include "dprt/keys.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

namespace dpc::gpucheck {

using dprt::ClipMode;

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
  // MXFP8 rows (materialized weight gradients with --per-sample-rows=mxfp8)
  // hold whole blocks of 32: dim 1024.
  for (DType dt : {F32, BF16, DType::MXFP8})
    for (int64_t dim : {int64_t(1000), int64_t(1001), int64_t(1024)}) {
      if ((dt == DType::MXFP8) != (dim == 1024))
        continue;
      const std::string dn = nameOf(dt);
      const bool odd = dim % 2 != 0;
      int64_t batch = 5;
      if (ctx.begin("norm_rows", dn, dims({{"B", batch}, {"d", dim}}, odd)))
        ctx.guarded([&] {
          Buffer g(dt, batch * dim, 0, dim), n2(F32, batch);
          g.randn(ctx.rng);
          n2.uniform(ctx.rng, 0, 10);
          cpu::norm_rows(ctx.cpu, dt, g.h(), n2.h(), batch, dim);
          gpu::norm_rows(ctx.gpu, dt, g.d(), n2.d(), batch, dim);
          ctx.compare("n2", n2, 1e-5);
        });
      if (ctx.begin("rows_weighted_sum", dn,
                    dims({{"B", batch}, {"d", dim}}, odd) + " masked"))
        ctx.guarded([&] {
          Buffer g(dt, batch * dim, 0, dim), c(F32, batch), out(F32, dim);
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
    dprt::StepState state = checkedUpdateState();
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
                sgd(r, F32, wp, gp, n, noiseIndex, F32, nullptr);
              else if (opt == 1)
                momentum(r, F32, wp, ap, gp, n, 0.9, false, noiseIndex, F32,
                         nullptr);
              else
                adamw(r, F32, wp, ap, bp, gp, n, 0.9, 0.999, 1e-8, noiseIndex,
                      F32, nullptr);
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
  // The noise itself against the host's: the GPU's Box-Muller takes its sine
  // and cosine from sincospif(2 v), the host's (the CPU backend's add_noise)
  // from sinf and cosf of the rounded 2 pi v (rng.h), so they agree to about
  // 1e-7 times r <= 5.8, not bit for bit. Unit std over a zero gradient, so
  // that the output is the noise; the first index, 1000003, is mid-quad.
  for (auto generator :
       {dprt::NoiseGeneratorKind::Philox, dprt::NoiseGeneratorKind::ChaCha20})
    if (ctx.begin("add_noise", dn,
                  "n1048579 " +
                      std::string(generator == dprt::NoiseGeneratorKind::Philox
                                      ? "philox"
                                      : "chacha20")))
      ctx.guarded([&] {
        dprt::StepState noisy = checkedUpdateState();
        noisy.noiseStd = 1.0;
        noisy.noiseKey[0] = 0x243f6a8885a308d3ull;
        noisy.noiseKey[1] = 0x13198a2e03707344ull;
        noisy.noiseGenerator = static_cast<int32_t>(generator);
        ctx.setStepState(noisy);
        const int64_t count = (int64_t(1) << 20) + 3, first = 1000003;
        Buffer z(F32, count);
        for (int64_t i = 0; i < count; ++i)
          z.set(i, 0.0);
        z.upload();
        gpu::add_noise(ctx.gpu, F32, z.d(), count, first);
        const dprt::NoiseKey key = dprt::noiseKeyOf(noisy);
        std::vector<double> want(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i)
          want[size_t(i)] =
              dprt::gradientNoiseF32(dprt::noiseGeneratorOf(noisy), key,
                                     uint64_t(noisy.step), uint64_t(first + i));
        Row row = compareValues(z.download(), want, 1e-6);
        char note[96];
        std::snprintf(note, sizeof note, "rms rel %.3g, max |gpu - host| %.3g",
                      row.rel, row.maxAbs);
        ctx.result("z (relative rms <= 1e-6)", row.pass, note);
        ctx.result("z (max |gpu - host| <= 4e-6)", row.maxAbs <= 4e-6, note);
      });
  // rng.h's device Box-Muller (logf's, sqrtf's and sincospif's steps
  // without the branches its uniforms never take) against those functions,
  // bit for bit, for every value of each uniform.
  if (ctx.begin("box_muller", dn, "every u and v"))
    ctx.guarded([&] {
      const BoxMullerMismatches m = boxMullerMismatches();
      char note[160];
      std::snprintf(note, sizeof note,
                    "%llu, %llu, %llu of 2^24 differ; pairs %llu of %llu; "
                    "first 0x%08x",
                    (unsigned long long)m.radius, (unsigned long long)m.sine,
                    (unsigned long long)m.cosine, (unsigned long long)m.pairs,
                    (unsigned long long)m.pairsTried, m.firstBits);
      ctx.result("sqrt(-2 ln u) = sqrtf(-2 logf(u))", m.radius == 0, note);
      ctx.result("sin, cos = sincospif(2 v)", m.sine == 0 && m.cosine == 0,
                 note);
      ctx.result("pairs = boxMullerPairF32", m.pairs == 0, note);
    });
  // The MXFP8 quantizers' branch-free scale byte against the rule written
  // out, for every finite amax.
  if (ctx.begin("mx_scale_byte", dn, "every finite amax"))
    ctx.guarded([&] {
      const MxScaleByteMismatches m = mxScaleByteMismatches();
      char note[96];
      std::snprintf(note, sizeof note, "%llu of %llu differ; first 0x%08x",
                    (unsigned long long)m.differ,
                    (unsigned long long)m.tried, m.firstBits);
      ctx.result("mxScaleByte = the rule's scale byte", m.differ == 0, note);
    });
  updateChecks(ctx);
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

} // namespace dpc::gpucheck
