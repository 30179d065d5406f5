//===- NormChecks.cpp - Per-sample norms and clipped weight gradients -----===//
//
// The CUDA kernels of per-sample gradient norms (rank-1, Gram, direct,
// materialized slices, biases, embeddings, tied tables) and of the clipped
// weight gradients against the CPU backend, in f32 and bf16, at a nice and
// an odd shape; the tolerances are KernelChecks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "NormGemms.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <vector>

namespace dpc::gpucheck {

namespace {

/// Runs `body(label)` once per path of a kernel with a fused product
/// (NormGemms.h) switched by the environment variable `variable`: with
/// "fused" and again with "two-pass" where `fusedRuns()` (asked with the
/// variable set to "fused") says the fused product takes the case, the
/// label naming the path; else once, unlabelled. The variable is unset
/// after.
template <class Runs, class Body>
void eachPath(const char *variable, Runs fusedRuns, Body body) {
  setenv(variable, "fused", 1);
  const bool fused = fusedRuns();
  std::vector<const char *> paths = {"fused"};
  if (fused)
    paths.push_back("two-pass");
  for (const char *path : paths) {
    setenv(variable, path, 1);
    body(fused ? std::string(", ") + path : std::string());
  }
  unsetenv(variable);
}

/// A linear layer's case: batch samples of `tokens` rows, in -> out.
struct LinearShape {
  int64_t batch, tokens, in, out;
};

/// The cases of a kernel with a fused product: the odd one, or the even
/// one and one with partial tiles of the fused product (64 x 256) in both
/// dimensions.
std::vector<LinearShape> fusedCases(bool odd, LinearShape oddCase,
                                    LinearShape even, LinearShape partial) {
  if (odd)
    return {oddCase};
  return {even, partial};
}

/// `check()` as case `kernel` on each path of eachPath, labelled with the
/// shape, `suffix` and the path.
template <class Runs, class Check>
void checkEachPath(Context &ctx, const char *variable, const char *kernel,
                   const std::string &dn, const LinearShape &s, bool odd,
                   const std::string &suffix, Runs fusedRuns, Check check) {
  eachPath(variable, fusedRuns, [&](const std::string &path) {
    if (ctx.begin(
            kernel, dn,
            dims(
                {{"B", s.batch}, {"T", s.tokens}, {"in", s.in}, {"out", s.out}},
                odd) +
                suffix + path))
      ctx.guarded(check);
  });
}

} // namespace

void normChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  // A value of the fused products' variables other than "fused" and
  // "two-pass" is an error with the variable's name, on every GPU (once, in
  // a build that has the products).
  if (dt == BF16 && !odd && gpu::fusedNormProductsBuilt()) {
    struct Variable {
      const char *name;
      std::function<bool()> runs;
    };
    const Variable variables[] = {
        {"DPRT_PER_SAMPLE_GRAD",
         [&] {
           return gpu::fusedPerSampleGradRuns(ctx.gpu, dt, 2, 64, 128, 128);
         }},
        {"DPRT_DIRECT_NORM",
         [&] {
           return gpu::fusedDirectNormRuns(ctx.gpu, dt, 2, 64, 128, 128);
         }},
        {"DPRT_GRAM_NORM",
         [&] { return gpu::fusedGramNormRuns(ctx.gpu, dt, 2, 64, 128); }}};
    for (const Variable &v : variables)
      if (ctx.begin("fused_norm_variable", dn,
                    std::string(v.name) + "=two_pass"))
        ctx.guarded([&] {
          ScopedEnv bad(v.name, "two_pass");
          std::string message;
          try {
            v.runs();
          } catch (const std::exception &e) {
            message = e.what();
          }
          const std::string want =
              std::string(v.name) + "=two_pass: expected 'fused' or 'two-pass'";
          ctx.result("", message.find(want) != std::string::npos,
                     message.empty() ? "no exception" : message);
        });
  }
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
  // norm_direct, gram_norm and linear_per_sample_grad: in bf16 on sm_90
  // their fused products (NormGemms.h) take the even cases, which run with
  // them and again under the variable's "two-pass", the label naming the
  // path.
  for (const LinearShape &s :
       fusedCases(odd, {3, 13, 97, 81}, {3, 40, 96, 80}, {3, 72, 392, 200}))
    checkEachPath(
        ctx, "DPRT_DIRECT_NORM", "norm_direct", dn, s, odd, "",
        [&] {
          return gpu::fusedDirectNormRuns(ctx.gpu, dt, s.batch, s.tokens, s.in,
                                          s.out);
        },
        [&] {
          Buffer x(dt, s.batch * s.tokens * s.in),
              dy(dt, s.batch * s.tokens * s.out), n2(F32, s.batch),
              ws(F32, s.in * s.out);
          x.randn(ctx.rng);
          dy.randn(ctx.rng);
          n2.uniform(ctx.rng, 0, 10);
          cpu::norm_direct(ctx.cpu, dt, x.h(), dy.h(), n2.h(), s.batch,
                           s.tokens, s.in, s.out, ws.h());
          gpu::norm_direct(ctx.gpu, dt, x.d(), dy.d(), n2.d(), s.batch,
                           s.tokens, s.in, s.out, ws.d());
          ctx.compare("n2", n2, 1e-5);
        });
  // One layer's share of a Gram norm, <X X^T, Dy Dy^T>, Ka from the CPU;
  // the fused product also needs T a multiple of 4.
  for (const LinearShape &s :
       fusedCases(odd, {3, 37, 130, 99}, {3, 64, 256, 128}, {2, 100, 96, 200}))
    checkEachPath(
        ctx, "DPRT_GRAM_NORM", "gram_norm", dn, s, odd, "",
        [&] {
          return gpu::fusedGramNormRuns(ctx.gpu, dt, s.batch, s.tokens, s.out);
        },
        [&] {
          const int64_t tt = s.batch * s.tokens * s.tokens;
          Buffer x(dt, s.batch * s.tokens * s.in),
              dy(dt, s.batch * s.tokens * s.out), ka(F32, tt), kg(F32, tt),
              n2(F32, s.batch);
          x.randn(ctx.rng);
          dy.randn(ctx.rng);
          kg.poison();
          n2.uniform(ctx.rng, 0, 10);
          cpu::gram(ctx.cpu, dt, x.h(), ka.h(), s.batch, s.tokens, s.in, false);
          ka.upload();
          cpu::gram_norm(ctx.cpu, dt, dy.h(), ka.h(), kg.h(), n2.h(), s.batch,
                         s.tokens, s.out);
          gpu::gram_norm(ctx.gpu, dt, dy.d(), ka.d(), kg.d(), n2.d(), s.batch,
                         s.tokens, s.out);
          ctx.compare("n2", n2, 1e-5);
        });
  // The materialized method: all samples' dy_b^T x_b in one strided-batched
  // product, then (with a norm) their norms.
  for (const LinearShape &s :
       fusedCases(odd, {3, 13, 97, 81}, {4, 64, 128, 96}, {3, 72, 392, 200}))
    for (bool withNorm : {true, false})
      checkEachPath(
          ctx, "DPRT_PER_SAMPLE_GRAD", "linear_per_sample_grad", dn, s, odd,
          withNorm ? " norm" : "",
          [&] {
            return withNorm && gpu::fusedPerSampleGradRuns(
                                   ctx.gpu, dt, s.batch, s.tokens, s.in, s.out);
          },
          [&] {
            // The slices in the compute type: an element where the two
            // products' f32 sums round to neighbouring bf16 values differs
            // by an ulp (2^-8), and each side's norm is that of its own
            // slices.
            Buffer x(dt, s.batch * s.tokens * s.in),
                dy(dt, s.batch * s.tokens * s.out),
                g(dt, s.batch * s.out * s.in), n2(F32, s.batch);
            x.randn(ctx.rng);
            dy.randn(ctx.rng);
            g.poison();
            n2.uniform(ctx.rng, 0, 10);
            cpu::linear_per_sample_grad(ctx.cpu, dt, dt, x.h(), dy.h(), g.h(),
                                        withNorm ? n2.h() : nullptr, s.batch,
                                        s.tokens, s.in, s.out);
            gpu::linear_per_sample_grad(ctx.gpu, dt, dt, x.d(), dy.d(), g.d(),
                                        withNorm ? n2.d() : nullptr, s.batch,
                                        s.tokens, s.in, s.out);
            ctx.compare("g", g, dt == BF16 ? 4e-3 : 1e-5);
            ctx.compare("n2", n2, dt == BF16 ? 1e-4 : 1e-5);
          });
  // The materialized method with MXFP8 rows (bf16 operands, in a multiple
  // of 32): the fused product where takesMxLinear (out a multiple of 8),
  // else each sample's f32 product quantized by a kernel of its own. The
  // two sides quantize f32 sums taken in different orders: an element whose
  // sums round to neighbouring e4m3 values differs by a step (2^-3 of its
  // binade), so the rows agree normwise far below that, and each side's
  // norm is that of its own rows.
  if (dt == BF16)
    for (const LinearShape &s :
         {LinearShape{2, 50, 64, 24}, LinearShape{3, 97, 256, 72},
          LinearShape{4, 128, 2048, 392}, LinearShape{8, 1024, 2048, 2048},
          LinearShape{2, 33, 96, odd ? 21 : 40}})
      if (ctx.begin("linear_per_sample_grad", dn,
                    dims({{"B", s.batch},
                          {"T", s.tokens},
                          {"in", s.in},
                          {"out", s.out}},
                         odd) +
                        " mxfp8" +
                        (gpu::fusedNormProductsBuilt() && s.out % 8 == 0
                             ? " fused"
                             : " two-pass")))
        ctx.guarded([&] {
          Buffer x(dt, s.batch * s.tokens * s.in),
              dy(dt, s.batch * s.tokens * s.out),
              g(DType::MXFP8, s.batch * s.out * s.in, 0, s.out * s.in), n2(F32, s.batch);
          x.randn(ctx.rng);
          dy.randn(ctx.rng, 1e-3);
          g.poison();
          // Small starting norms: the comparison is of the rows' norms.
          n2.uniform(ctx.rng, 0, 1e-3);
          cpu::linear_per_sample_grad(ctx.cpu, dt, DType::MXFP8, x.h(), dy.h(),
                                      g.h(), n2.h(), s.batch, s.tokens, s.in,
                                      s.out);
          gpu::linear_per_sample_grad(ctx.gpu, dt, DType::MXFP8, x.d(), dy.d(),
                                      g.d(), n2.d(), s.batch, s.tokens, s.in,
                                      s.out);
          ctx.compare("g", g, 1e-3);
          ctx.compare("n2", n2, 1e-4);
        });
  // An infinity in sample 1's x: its blocks in that column read NaN on both
  // sides (scale 0xFF), and so does its norm; sample 0 is unchanged.
  if (dt == BF16 && !odd &&
      ctx.begin("linear_per_sample_grad", dn,
                "B2 T50 in64 out24 mxfp8 inf in sample 1"))
    ctx.guarded([&] {
      const int64_t batch = 2, tokens = 50, in = 64, out = 24;
      Buffer x(dt, batch * tokens * in), dy(dt, batch * tokens * out),
          g(DType::MXFP8, batch * out * in, 0, out * in), n2(F32, batch);
      x.randn(ctx.rng);
      x.set(tokens * in + 7 * in + 40, std::numeric_limits<double>::infinity());
      x.upload();
      dy.randn(ctx.rng);
      g.poison();
      n2.uniform(ctx.rng, 0, 1e-3);
      cpu::linear_per_sample_grad(ctx.cpu, dt, DType::MXFP8, x.h(), dy.h(),
                                  g.h(), n2.h(), batch, tokens, in, out);
      gpu::linear_per_sample_grad(ctx.gpu, dt, DType::MXFP8, x.d(), dy.d(),
                                  g.d(), n2.d(), batch, tokens, in, out);
      ctx.compare("g", g, 1e-3);
      ctx.compare("n2", n2, 1e-4);
      // The NaN blocks' bytes (their values read NaN through the scale
      // whatever they hold): on both sides, scale 0xFF and 32 elements of
      // e4m3's NaN, 0x7F, in the same blocks.
      const int64_t rowBytes = dprt::storageBytes(DType::MXFP8, out * in);
      std::vector<uint8_t> gpuBytes(size_t(batch * rowBytes));
      cudaCheck(cudaMemcpy(gpuBytes.data(), g.d(), gpuBytes.size(),
                           cudaMemcpyDeviceToHost),
                "cudaMemcpy(g)");
      const auto *cpuBytes = static_cast<const uint8_t *>(g.h());
      int64_t nanBlocks = 0, wrong = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t k = 0; k < out * in / dprt::kMxBlock; ++k) {
          const int64_t row = b * rowBytes, scale = row + out * in + k;
          const bool nan = cpuBytes[scale] == 0xFF;
          nanBlocks += nan;
          wrong += gpuBytes[size_t(scale)] != cpuBytes[scale];
          for (int64_t j = 0; nan && j < dprt::kMxBlock; ++j) {
            const int64_t at = row + k * dprt::kMxBlock + j;
            wrong += gpuBytes[size_t(at)] != 0x7F || cpuBytes[at] != 0x7F;
          }
        }
      ctx.result("g NaN blocks' bytes", nanBlocks > 0 && wrong == 0,
                 std::to_string(nanBlocks) + " NaN blocks, " +
                     std::to_string(wrong) + " bytes differ");
    });
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
    // Few distinct tokens, so that many repeat and runs cross the chunks
    // of 64 sorted positions; the long single sample is sorted by 110
    // blocks and summed in 110 chunks; one token everywhere makes one run
    // through 11 chunks (d = 136: 17 of a block's 128 threads); the
    // benchmark's shapes at b = 8 and 1 (few repeats).
    std::vector<Shape> shapes = {odd ? Shape{3, 33, 130, 7}
                                     : Shape{3, 100, 256, 20}};
    if (!odd) {
      shapes.push_back({1, 7000, 64, 300});
      shapes.push_back({2, 700, 136, 1});
      shapes.push_back({8, 1024, 2048, 32000});
      shapes.push_back({1, 8192, 2048, 32000});
    }
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
    // Masked: a sample of NaN dy with clip factor 0 adds nothing. Unweighted
    // (c = nullptr, no workspace: DP off, whose dy is already zero on
    // padding rows): dW += dy^T x over every row. Overwriting (accumulate =
    // false, a program of one micro-step a step): the sum replaces a dW of
    // NaN, weighted and not.
    struct Form {
      const char *name;
      bool weighted, accumulate, nanSample;
    };
    for (const Form &form : {Form{" masked", true, true, true},
                             Form{" unweighted", false, true, false},
                             Form{" unweighted overwrite", false, false, false},
                             Form{" overwrite", true, false, false}}) {
      if (!ctx.begin(
              "linear_weight_grad", dn,
              dims({{"B", batch}, {"T", tokens}, {"in", in}, {"out", out}},
                   odd) +
                  form.name))
        continue;
      ctx.guarded([&] {
        Buffer x(dt, rows * in), dy(dt, rows * out), c(F32, batch),
            dw(F32, out * in),
            ws(dt, dprt::weightGradWorkspaceBytes(dt, batch, tokens, out) /
                       int64_t(dprt::sizeOf(dt)));
        x.randn(ctx.rng);
        dy.randn(ctx.rng);
        if (form.nanSample) {
          for (int64_t i = tokens * out; i < 2 * tokens * out; ++i)
            dy.set(i, nan);
          dy.upload();
        }
        clipFactorsWithMaskedSample(c, ctx.rng);
        if (form.accumulate) {
          dw.randn(ctx.rng);
        } else {
          for (int64_t i = 0; i < out * in; ++i)
            dw.set(i, nan);
          dw.upload();
        }
        const bool w = form.weighted;
        cpu::linear_weight_grad(ctx.cpu, dt, x.h(), dy.h(), w ? c.h() : nullptr,
                                dw.h(), batch, tokens, in, out,
                                w ? ws.h() : nullptr, form.accumulate);
        gpu::linear_weight_grad(ctx.gpu, dt, x.d(), dy.d(), w ? c.d() : nullptr,
                                dw.d(), batch, tokens, in, out,
                                w ? ws.d() : nullptr, form.accumulate);
        ctx.compare("dw", dw, dt == F32 ? 1e-5 : 2e-2);
      });
    }
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

} // namespace dpc::gpucheck
