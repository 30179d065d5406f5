//===- NormalizationChecks.cpp - RMSNorm and LayerNorm against the CPU ---===//
//
// rms_norm and layer_norm, forward, backward (with the per-sample gamma and
// beta gradients) and the backward with the norms of those gradients, on the
// GPU against the CPU backend (KernelChecks.cpp says how cases and
// tolerances work).
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

namespace dpc::gpucheck {

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
    // Aligned rows of 256 vectors (2048 bf16, 1024 f32) and of 5 (a block
    // of 64 threads, 59 of them without a vector), 37 of them.
    const int64_t wide = dt == DType::BF16 ? 2048 : 1024;
    for (int64_t d : {wide, wide / 256 * 5})
      if (!odd && ctx.begin("rms_norm_forward", dn,
                            dims({{"rows", 37}, {"d", d}}, false) + " aligned"))
        ctx.guarded([&] {
          Buffer x(dt, 37 * d), g(dt, d), y(dt, 37 * d), rstd(F32, 37);
          x.randn(ctx.rng, 2.0);
          g.uniform(ctx.rng, 0.5, 1.5);
          y.poison();
          rstd.poison();
          cpu::rms_norm_forward(ctx.cpu, dt, x.h(), g.h(), y.h(), rstd.h(), 37,
                                d, 1e-5);
          gpu::rms_norm_forward(ctx.gpu, dt, x.d(), g.d(), y.d(), rstd.d(), 37,
                                d, 1e-5);
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
    // 64 tokens: 8 chunks of the backward's 8 rows (2 of the separate
    // pass's 32); 17: 3, the last of one row (1 of 32).
    int64_t batch = odd ? 3 : 4, tokens = odd ? 17 : 64, rows = batch * tokens;
    bool acc = odd;
    std::string shape = dims({{"B", batch}, {"T", tokens}, {"d", dim}}, odd) +
                        (acc ? " acc" : "");
    // The column sums of dgamma ride on the backward where a thread holds
    // at most one vector of a row; 8200 columns (1025 bf16 vectors, 2050
    // f32 ones) take the separate pass (Normalization.cu).
    // With `remake`, rstd is the CUDA forward's and the backward also makes
    // the forward's result again (a rematerialized RMSNorm): within the
    // tolerance of the CPU's, and bit for bit the CUDA forward's.
    auto rmsBackward = [&, batch, tokens, acc](
                           int64_t d, const std::string &label,
                           int64_t samples = 0, int64_t length = 0,
                           bool accumulate = false, bool frozen = false,
                           bool remake = false) {
      const int64_t b = samples ? samples : batch;
      const int64_t t = samples ? length : tokens;
      const bool a = samples ? accumulate : acc;
      const int64_t n = b * t;
      if (!ctx.begin("rms_norm_backward", dn, label))
        return;
      ctx.guarded([&] {
        Buffer x(dt, n * d, mis), g(dt, d), rstd(F32, n),
            dy(dt, n * d, mis), dx(dt, n * d, mis), dgamma(F32, b * d);
        x.randn(ctx.rng);
        g.uniform(ctx.rng, 0.5, 1.5);
        rstd.uniform(ctx.rng, 0.5, 2.0);
        dy.randn(ctx.rng);
        if (a)
          dx.randn(ctx.rng);
        else
          dx.poison();
        dgamma.poison();
        Buffer forwardY(dt, n * d, mis), y(dt, n * d, mis);
        forwardY.poison();
        y.poison();
        if (remake) {
          gpu::rms_norm_forward(ctx.gpu, dt, x.d(), g.d(), forwardY.d(),
                                rstd.d(), n, d, 1e-5);
          gpu::synchronize(ctx.gpu);
          std::vector<double> s = rstd.download();
          for (int64_t i = 0; i < n; ++i)
            rstd.set(i, s[size_t(i)]);
        }
        cpu::rms_norm_backward(ctx.cpu, dt, x.h(), g.h(), rstd.h(), dy.h(),
                               dx.h(), frozen ? nullptr : dgamma.h(),
                               remake ? y.h() : nullptr, b, t, d, a);
        gpu::rms_norm_backward(ctx.gpu, dt, x.d(), g.d(), rstd.d(), dy.d(),
                               dx.d(), frozen ? nullptr : dgamma.d(),
                               remake ? y.d() : nullptr, b, t, d, a);
        ctx.compare("dx", dx, tol(dt));
        if (!frozen)
          ctx.compare("dgamma", dgamma, 1e-5);
        if (remake) {
          ctx.compare("y", y, tol(dt)); // waits for the GPU
          std::vector<double> remade = y.download(),
                              forward = forwardY.download();
          int64_t differ = 0;
          for (size_t i = 0; i < remade.size(); ++i)
            differ += !(remade[i] == forward[i]);
          ctx.result("y = rms_norm_forward", differ == 0,
                     std::to_string(differ) + " of " +
                         std::to_string(remade.size()) + " differ");
        }
      });
    };
    rmsBackward(dim, shape);
    rmsBackward(dim, shape + " remade y", 0, 0, false, false, true);
    // Aligned rows of 256, 64 and 32 vectors: 17 tokens leave the
    // backward's last chunk of 8 rows with one; with and without gamma's
    // gradient, accumulating or not.
    if (!odd) {
      const int64_t wide = dt == DType::BF16 ? 2048 : 1024;
      rmsBackward(wide,
                  dims({{"B", 3}, {"T", 17}, {"d", wide}}, false) +
                      " acc aligned",
                  3, 17, true);
      rmsBackward(wide,
                  dims({{"B", 3}, {"T", 17}, {"d", wide}}, false) +
                      " acc aligned remade y",
                  3, 17, true, false, true);
      rmsBackward(wide / 4,
                  dims({{"B", 2}, {"T", 40}, {"d", wide / 4}}, false) +
                      " aligned",
                  2, 40, false);
      rmsBackward(wide / 8,
                  dims({{"B", 2}, {"T", 40}, {"d", wide / 8}}, false) +
                      " acc frozen gamma",
                  2, 40, true, true);
      // 2053 tokens: 257 chunks of 8 rows (the last of 5), summed by
      // chunkSums' 32-warp blocks.
      rmsBackward(wide / 8,
                  dims({{"B", 2}, {"T", 2053}, {"d", wide / 8}}, false) +
                      " aligned 257 chunks",
                  2, 2053, false);
    }
    if (!odd)
      rmsBackward(8200,
                  dims({{"B", batch}, {"T", tokens}, {"d", 8200}}, false) +
                      " separate column pass");
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
                                    dx.h(), dgamma.h(), n2.h(), nullptr, batch,
                                    tokens, dim, false);
        gpu::rms_norm_backward_norm(ctx.gpu, dt, x.d(), g.d(), rstd.d(), dy.d(),
                                    dx.d(), dgamma.d(), n2.d(), nullptr, batch,
                                    tokens, dim, false);
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

} // namespace dpc::gpucheck
