//===- AttentionChecks.cpp - Attention and rotary kernels against the CPU -===//
//
// rope and attention on the GPU against the CPU backend (KernelChecks.cpp
// says how cases and tolerances work). Each bf16 attention case runs on
// every path: cuDNN (where the build has it), the fused kernels and the
// materialized one; the shape label names the path that ran, a case cuDNN
// or the fused kernels decline gets a failing `.path` row with the reason,
// and the cuDNN and fused outputs are rerun and must give the same bits
// (cuDNN's backward under DPRT_CUDNN_DETERMINISTIC=1).
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "AttentionPath.h"
#include "CudnnAttention.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cmath>
#include <cstring>

namespace dpc::gpucheck {

namespace {

struct AttentionCase {
  int64_t batch, tokens, heads, kvHeads, hd;
  bool causal;
  const char *scratchMiB;  // DPRT_ATTENTION_SCRATCH_MB, or null
  bool misaligned = false; // bf16 pointers one element off
};

/// The device values of `b` against `first` (an earlier run's), bit for bit:
/// a fused kernel must give the same result every run.
void compareRerun(Context &ctx, const std::string &output, Buffer &b,
                  const std::vector<double> &first) {
  gpu::synchronize(ctx.gpu);
  Row row = compareValues(b.download(), first, 0);
  row.kernel = ctx.kernel + "." + output + ".rerun";
  row.dtype = ctx.dtype;
  row.shape = ctx.shape;
  row.seed = ctx.seed;
  ctx.report->add(row);
}

/// NaN on the device side only (the host side holds the CPU's result).
void poisonDevice(Buffer &b) {
  cudaCheck(cudaMemset(b.d(), 0xff,
                       size_t(b.size()) * size_t(dprt::sizeOf(b.type()))),
            "cudaMemset(poison)");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

const char *pathName(gpu::AttentionPath path) {
  switch (path) {
  case gpu::AttentionPath::Cudnn:
    return "cudnn";
  case gpu::AttentionPath::Fused:
    return "fused";
  case gpu::AttentionPath::Materialized:
    break;
  }
  return "materialized";
}

/// A failed row saying that the path asked for did not run.
void declinedRow(Context &ctx, const std::string &kernel,
                 const std::string &shape, const std::string &why) {
  Row row;
  row.kernel = kernel + ".path";
  row.dtype = ctx.dtype;
  row.shape = shape;
  row.seed = ctx.seed;
  row.note = "cudnn declined: " + why;
  ctx.report->add(row);
}

/// attention_forward and attention_backward of one case against the CPU
/// backend under DPRT_ATTENTION=`asked` (null: unset). The shape names the
/// path that runs; asked for cudnn, a path that does not take the case adds
/// a failed row with cuDNN's reason. The cudnn and fused paths run twice
/// and must give the same bits.
void attentionCheck(Context &ctx, DType dt, const AttentionCase &c, bool odd,
                    const char *asked) {
  const std::string dn = dprt::nameOf(dt);
  const int64_t mis = c.misaligned ? 1 : 0;
  ScopedEnv path("DPRT_ATTENTION", asked);
  if (!ctx.wants("attention_forward") && !ctx.wants("attention_backward"))
    return;
  // The path of each direction (building cuDNN's graphs now); an error
  // becomes the reason of a failed row.
  auto pathOf = [&](bool backward, std::string &why) {
    if (c.misaligned)
      return gpu::AttentionPath::Materialized;
    try {
      return gpu::attentionPathFor(ctx.gpu, dt, c.batch, c.tokens, c.heads,
                                   c.kvHeads, c.hd, c.causal, backward, &why);
    } catch (const std::exception &e) {
      why = e.what();
      return gpu::AttentionPath::Materialized;
    }
  };
  std::string whyForward, whyBackward;
  const gpu::AttentionPath runs = pathOf(false, whyForward);
  const gpu::AttentionPath runsBackward = pathOf(true, whyBackward);
  const bool askedCudnn = asked && std::string(asked) == "cudnn";
  std::string shape =
      dims({{"B", c.batch},
            {"T", c.tokens},
            {"H", c.heads},
            {"KV", c.kvHeads},
            {"hd", c.hd}},
           odd) +
      (c.causal ? " causal" : "") + (c.scratchMiB ? " chunked" : "") +
      (c.misaligned ? " misaligned" : "") + " " + pathName(runs) +
      (runsBackward != runs
           ? std::string(" (backward ") + pathName(runsBackward) + ")"
           : "");
  int64_t nq = c.batch * c.tokens * c.heads * c.hd;
  int64_t nk = c.batch * c.tokens * c.kvHeads * c.hd;
  int64_t nl = c.batch * c.heads * c.tokens;
  double tolFwd = dt == F32 ? 1e-4 : 2e-2, tolBwd = dt == F32 ? 1e-4 : 3e-2;
  bool fwd = ctx.begin("attention_forward", dn, shape);
  if (fwd && askedCudnn && runs != gpu::AttentionPath::Cudnn)
    declinedRow(ctx, "attention_forward", shape, whyForward);
  if (!fwd && !ctx.begin("attention_backward", dn, shape))
    return;
  ctx.guarded([&] {
    ScopedEnv budget("DPRT_ATTENTION_SCRATCH_MB", c.scratchMiB);
    Buffer q(dt, nq, mis), k(dt, nk, mis), v(dt, nk, mis), o(dt, nq, mis),
        lse(F32, nl);
    q.randn(ctx.rng);
    k.randn(ctx.rng);
    v.randn(ctx.rng);
    o.poison();
    lse.poison();
    cpu::attention_forward(ctx.cpu, dt, q.h(), k.h(), v.h(), o.h(), lse.h(),
                           c.batch, c.tokens, c.heads, c.kvHeads, c.hd,
                           c.causal);
    auto forward = [&] {
      gpu::attention_forward(ctx.gpu, dt, q.d(), k.d(), v.d(), o.d(), lse.d(),
                             c.batch, c.tokens, c.heads, c.kvHeads, c.hd,
                             c.causal);
    };
    forward();
    if (fwd) {
      ctx.compare("o", o, tolFwd);
      // The natural-log log-sum-exp of the scaled scores on every path
      // (cuDNN's Stats included), so a backward may take any forward's.
      ctx.compare("lse", lse, 1e-5);
      if (runs != gpu::AttentionPath::Materialized) {
        std::vector<double> o1 = o.download(), lse1 = lse.download();
        poisonDevice(o);
        poisonDevice(lse);
        forward();
        compareRerun(ctx, "o", o, o1);
        compareRerun(ctx, "lse", lse, lse1);
      }
    }
    if (!ctx.begin("attention_backward", dn, shape))
      return;
    if (askedCudnn && runsBackward != gpu::AttentionPath::Cudnn)
      declinedRow(ctx, "attention_backward", shape, whyBackward);
    // Every backward pass starts from the CPU's forward outputs.
    o.upload();
    lse.upload();
    Buffer dout(dt, nq, mis), dq(dt, nq, mis), dk(dt, nk, mis), dv(dt, nk, mis);
    dout.randn(ctx.rng);
    dq.poison();
    dk.poison();
    dv.poison();
    cpu::attention_backward(ctx.cpu, dt, q.h(), k.h(), v.h(), o.h(), lse.h(),
                            dout.h(), dq.h(), dk.h(), dv.h(), c.batch, c.tokens,
                            c.heads, c.kvHeads, c.hd, c.causal, nullptr);
    // The workspace dpc reserves in the arena (bf16, head size 64 or 128:
    // LowerToRuntime/Attention.cpp), poisoned: no path may read what it did
    // not write there. Where the plan has none, scratch.
    const bool planned = dt == BF16 && (c.hd == 64 || c.hd == 128);
    const int64_t plannedBytes =
        planned ? dprt::attentionBackwardWorkspaceBytes(
                      dt, c.batch, c.tokens, c.heads, c.kvHeads, c.hd)
                : 0;
    Buffer workspace(F32, planned ? (plannedBytes + 3) / 4 : 1);
    poisonDevice(workspace);
    auto backward = [&] {
      gpu::attention_backward(ctx.gpu, dt, q.d(), k.d(), v.d(), o.d(), lse.d(),
                              dout.d(), dq.d(), dk.d(), dv.d(), c.batch,
                              c.tokens, c.heads, c.kvHeads, c.hd, c.causal,
                              planned ? workspace.d() : nullptr);
    };
    backward();
    ctx.compare("dq", dq, tolBwd);
    ctx.compare("dk", dk, tolBwd);
    ctx.compare("dv", dv, tolBwd);
    // cuDNN's default backward sums dQ with atomics, so only its
    // deterministic algorithm (DPRT_CUDNN_DETERMINISTIC=1) is rerun bit for
    // bit, after its own comparison with the CPU; the fused kernels always.
    const bool cudnnBackward = runsBackward == gpu::AttentionPath::Cudnn;
    if (cudnnBackward && planned) {
      // cuDNN's default backward within the plan's reserve (else it runs on
      // scratch beyond the predicted peak).
      const int64_t asked = gpu::cudnnAttentionWorkspaceBytes(
          ctx.gpu, {c.batch, c.tokens, c.heads, c.kvHeads, c.hd, c.causal,
                    /*backward=*/true});
      ctx.result("workspace", asked >= 0 && asked <= plannedBytes,
                 "cuDNN asks " + std::to_string(asked) + " of the plan's " +
                     std::to_string(plannedBytes) + " bytes");
    }
    // Its deterministic algorithm asks for more than the plan's: scratch.
    ScopedEnv deterministic("DPRT_CUDNN_DETERMINISTIC", "1");
    if (cudnnBackward) {
      poisonDevice(dq);
      poisonDevice(dk);
      poisonDevice(dv);
      backward();
      ctx.compare("dq.deterministic", dq, tolBwd);
      ctx.compare("dk.deterministic", dk, tolBwd);
      ctx.compare("dv.deterministic", dv, tolBwd);
    }
    if (runsBackward != gpu::AttentionPath::Materialized) {
      std::vector<double> dq1 = dq.download(), dk1 = dk.download(),
                          dv1 = dv.download();
      poisonDevice(dq);
      poisonDevice(dk);
      poisonDevice(dv);
      backward();
      compareRerun(ctx, "dq", dq, dq1);
      compareRerun(ctx, "dk", dk, dk1);
      compareRerun(ctx, "dv", dv, dv1);
    }
  });
}

} // namespace

void attentionChecks(Context &ctx, DType dt, bool odd) {
  const std::string dn = dprt::nameOf(dt);
  {
    // Odd: hd 20, whose half (10) no 16-byte vector divides (one element
    // a thread).
    int64_t batch = 2, tokens = odd ? 33 : 50, heads = odd ? 3 : 4,
            hd = odd ? 20 : 64;
    int64_t n = batch * tokens * heads * hd;
    std::string shape =
        dims({{"B", batch}, {"T", tokens}, {"H", heads}, {"hd", hd}}, odd) +
        (odd ? " in-place" : "");
    if (ctx.begin("rope_forward", dn, shape))
      ctx.guarded([&] {
        Buffer x(dt, n), y(dt, n);
        x.randn(ctx.rng);
        y.poison();
        // Odd: in place (y == x).
        Buffer &out = odd ? x : y;
        cpu::rope_forward(ctx.cpu, dt, x.h(), out.h(), nullptr, batch, tokens,
                          heads, hd, 10000.0);
        gpu::rope_forward(ctx.gpu, dt, x.d(), out.d(), nullptr, batch, tokens,
                          heads, hd, 10000.0);
        ctx.compare("y", out, tol(dt));
      });
    if (ctx.begin("rope_backward", dn, shape + (odd ? "" : " acc")))
      ctx.guarded([&] {
        Buffer dy(dt, n), dx(dt, n);
        dy.randn(ctx.rng);
        dx.randn(ctx.rng);
        Buffer &out = odd ? dy : dx;
        cpu::rope_backward(ctx.cpu, dt, dy.h(), out.h(), nullptr, batch, tokens,
                           heads, hd, 10000.0, !odd);
        gpu::rope_backward(ctx.gpu, dt, dy.d(), out.d(), nullptr, batch, tokens,
                           heads, hd, 10000.0, !odd);
        ctx.compare("dx", out, tol(dt));
      });
    // Llama 3's scaled frequencies (an original context of 32 puts the
    // frequencies of hd 20/64 at theta 5e5 in all three bands), then both
    // rotations with the table.
    if (ctx.begin("rope_llama3_frequencies", "f64", dims({{"hd", hd}}, odd)))
      ctx.guarded([&] {
        Buffer table(DType::F64, hd / 2);
        table.poison();
        cpu::rope_llama3_frequencies(ctx.cpu, table.h(), hd, 500000.0, 8.0, 1.0,
                                     4.0, 32);
        gpu::rope_llama3_frequencies(ctx.gpu, table.d(), hd, 500000.0, 8.0, 1.0,
                                     4.0, 32);
        ctx.compare("invFreq", table, 1e-14);
      });
    if (ctx.begin("rope_forward", dn, shape + " llama3"))
      ctx.guarded([&] {
        Buffer table(DType::F64, hd / 2), x(dt, n), y(dt, n);
        cpu::rope_llama3_frequencies(ctx.cpu, table.h(), hd, 500000.0, 8.0, 1.0,
                                     4.0, 32);
        table.upload();
        x.randn(ctx.rng);
        y.poison();
        cpu::rope_forward(ctx.cpu, dt, x.h(), y.h(), table.h(), batch, tokens,
                          heads, hd, 500000.0);
        gpu::rope_forward(ctx.gpu, dt, x.d(), y.d(), table.d(), batch, tokens,
                          heads, hd, 500000.0);
        ctx.compare("y", y, tol(dt));
      });
    if (ctx.begin("rope_backward", dn, shape + " llama3 acc"))
      ctx.guarded([&] {
        Buffer table(DType::F64, hd / 2), dy(dt, n), dx(dt, n);
        cpu::rope_llama3_frequencies(ctx.cpu, table.h(), hd, 500000.0, 8.0, 1.0,
                                     4.0, 32);
        table.upload();
        dy.randn(ctx.rng);
        dx.randn(ctx.rng);
        cpu::rope_backward(ctx.cpu, dt, dy.h(), dx.h(), table.h(), batch,
                           tokens, heads, hd, 500000.0, true);
        gpu::rope_backward(ctx.gpu, dt, dy.d(), dx.d(), table.d(), batch,
                           tokens, heads, hd, 500000.0, true);
        ctx.compare("dx", dx, tol(dt));
      });
  }
  if (!odd) {
    // Rows wider than a block's 256 threads have vectors (40 heads of 128:
    // 320 bf16 vectors of 8, 640 f32 vectors of 4): a thread rotates more
    // than one a row.
    int64_t batch = 1, tokens = 9, heads = 40, hd = 128;
    int64_t n = batch * tokens * heads * hd;
    if (ctx.begin("rope_backward", dn, "B1 T9 H40 hd128 acc"))
      ctx.guarded([&] {
        Buffer dy(dt, n), dx(dt, n);
        dy.randn(ctx.rng);
        dx.randn(ctx.rng);
        cpu::rope_backward(ctx.cpu, dt, dy.h(), dx.h(), nullptr, batch, tokens,
                           heads, hd, 10000.0, true);
        gpu::rope_backward(ctx.gpu, dt, dy.d(), dx.d(), nullptr, batch, tokens,
                           heads, hd, 10000.0, true);
        ctx.compare("dx", dx, tol(dt));
      });
  }
  std::vector<AttentionCase> cases;
  if (odd) {
    cases.push_back({1, 77, 4, 4, 32, false, nullptr});
    // Pointers one element off: the fused kernels decline, the materialized
    // path runs.
    if (dt == BF16)
      cases.push_back({1, 64, 4, 2, 64, true, nullptr, true});
  } else {
    cases.push_back({2, 128, 8, 2, 64, true, nullptr});
    // A 1 MiB budget: one key/value head per chunk in the materialized
    // backward pass.
    cases.push_back({1, 256, 8, 4, 64, true, "1"});
    if (dt == BF16) {
      // The fused kernels: tokens that are not a multiple of their blocks
      // (64 rows; 32 for dK, dV at head size 128), both head sizes, groups
      // of 1 and 4, batch 1 and 3, with and without the causal mask.
      cases.push_back({1, 37, 4, 4, 64, true, nullptr});
      cases.push_back({3, 37, 8, 2, 128, false, nullptr});
      cases.push_back({1, 200, 8, 2, 64, false, nullptr});
      cases.push_back({3, 200, 8, 2, 128, true, nullptr});
      cases.push_back({1, 1000, 4, 4, 64, true, nullptr});
      cases.push_back({3, 1000, 4, 1, 128, false, nullptr});
      cases.push_back({1, 1000, 4, 1, 128, true, nullptr});
    }
  }
  // bf16 cases the fused kernels take run on every path: cuDNN (in a build
  // with it), the fused kernels and the materialized path.
  const bool fusable =
      gpu::attentionPath(dt, 64) != gpu::AttentionPath::Materialized;
  bool cudnnBuilt = false;
  {
    ScopedEnv path("DPRT_ATTENTION", "cudnn");
    cudnnBuilt = gpu::attentionPath(dt, 64) == gpu::AttentionPath::Cudnn;
  }
  for (const AttentionCase &c : cases) {
    if (!fusable || c.misaligned || (c.hd != 64 && c.hd != 128)) {
      attentionCheck(ctx, dt, c, odd, nullptr);
      continue;
    }
    if (cudnnBuilt)
      attentionCheck(ctx, dt, c, odd, "cudnn");
    attentionCheck(ctx, dt, c, odd, "fused");
    attentionCheck(ctx, dt, c, odd, "materialized");
  }
}

} // namespace dpc::gpucheck
