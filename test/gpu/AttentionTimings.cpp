//===- AttentionTimings.cpp - Attention's kernel times --------------------===//
//
// Part of dpc-gpu-check's timing table (Timings.cpp): attention_forward and
// attention_backward on each path that takes the shape.
//
//===----------------------------------------------------------------------===//

#include "Timing.h"

#include "AttentionPath.h"
#include "dprt/kernels.h"

namespace dpc::gpucheck {

/// cuDNN (in a build with it), fused and materialized attention at the 1.1B
/// model's shape, at 4096 tokens and at head size 128; cuDNN's backward also
/// with DPRT_CUDNN_DETERMINISTIC=1. Each row names the path that ran. Rates
/// count the useful products: 2 (forward) and 5 (backward) matrix products
/// of T x T x hd per sample and head, half of them with the causal mask (the
/// fused backward computes S and dP twice, 7 products, the materialized one
/// computes full T x T matrices).
void attentionTimings(Context &ctx, uint64_t &seed) {
  struct Shape {
    int64_t batch, tokens, heads, kvHeads, hd;
    bool causal;
    bool materialized; // also time DPRT_ATTENTION=materialized
  };
  const Shape shapes[] = {{kB, kT, kH, kKV, kHd, true, true},
                          {2, 4096, kH, kKV, kHd, true, true},
                          {kB, kT, kH, kKV, kHd, false, false},
                          {kB, kT, 16, 4, 128, true, true}};
  const DType dt = BF16;
  if (!ctx.wants("attention_forward") && !ctx.wants("attention_backward"))
    return;
  for (const Shape &s : shapes) {
    const int64_t rows = s.batch * s.tokens;
    const int64_t nq = rows * s.heads * s.hd, nk = rows * s.kvHeads * s.hd;
    DeviceBuffer q(dt, nq, ++seed), k(dt, nk, ++seed), v(dt, nk, ++seed),
        o(dt, nq, ++seed), lse(F32, s.batch * s.heads * s.tokens, ++seed),
        dout(dt, nq, ++seed), dq(dt, nq, ++seed), dk(dt, nk, ++seed),
        dv(dt, nk, ++seed);
    // The backward's workspace as a compiled program has it in its arena.
    DeviceBuffer workspace(
        F32,
        (dprt::attentionBackwardWorkspaceBytes(dt, s.batch, s.tokens, s.heads,
                                               s.kvHeads, s.hd) +
         3) /
            4,
        ++seed);
    // lse must be that of q, k: the backward exponentiates S - lse.
    gpu::attention_forward(ctx.gpu, dt, q.p(), k.p(), v.p(), o.p(), lse.p(),
                           s.batch, s.tokens, s.heads, s.kvHeads, s.hd,
                           s.causal);
    const double unit = double(s.batch) * s.heads * s.tokens * s.tokens * s.hd *
                        (s.causal ? 0.5 : 1.0);
    const std::string base =
        "B" + std::to_string(s.batch) + " T" + std::to_string(s.tokens) + " H" +
        std::to_string(s.heads) + " KV" + std::to_string(s.kvHeads) + " hd" +
        std::to_string(s.hd) + (s.causal ? " causal" : "");
    for (const char *asked : {"cudnn", "fused", "materialized"}) {
      const std::string a = asked;
      if (a == "materialized" && !s.materialized)
        continue;
      ScopedEnv env("DPRT_ATTENTION", asked);
      if (a == "cudnn" &&
          gpu::attentionPath(dt, s.hd) != gpu::AttentionPath::Cudnn)
        continue;
      auto name = [&](bool backward) {
        switch (gpu::attentionPathFor(ctx.gpu, dt, s.batch, s.tokens, s.heads,
                                      s.kvHeads, s.hd, s.causal, backward)) {
        case gpu::AttentionPath::Cudnn:
          return " cudnn";
        case gpu::AttentionPath::Fused:
          return " fused";
        case gpu::AttentionPath::Materialized:
          break;
        }
        return " materialized";
      };
      timeKernel(ctx, "attention_forward", dt, base + name(false), 4.0 * unit,
                 true, [&] {
                   gpu::attention_forward(ctx.gpu, dt, q.p(), k.p(), v.p(),
                                          o.p(), lse.p(), s.batch, s.tokens,
                                          s.heads, s.kvHeads, s.hd, s.causal);
                 });
      auto backward = [&] {
        gpu::attention_backward(ctx.gpu, dt, q.p(), k.p(), v.p(), o.p(),
                                lse.p(), dout.p(), dq.p(), dk.p(), dv.p(),
                                s.batch, s.tokens, s.heads, s.kvHeads, s.hd,
                                s.causal, workspace.p());
      };
      timeKernel(ctx, "attention_backward", dt, base + name(true), 10.0 * unit,
                 true, backward);
      if (a == "cudnn") {
        ScopedEnv deterministic("DPRT_CUDNN_DETERMINISTIC", "1");
        timeKernel(ctx, "attention_backward", dt,
                   base + name(true) + " deterministic", 10.0 * unit, true,
                   backward);
      }
    }
  }
}

} // namespace dpc::gpucheck
