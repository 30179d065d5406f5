//===- fused_norms.h - Where the fused norm products run -*- C++ -*-===//
//
// The CUDA backend sums three per-sample norms in the epilogue of the
// product that makes them (runtime/cuda/NormGemms.h, sm_90a, bf16): the
// materialized, direct and Gram norms. Where that is faster than cuBLASLt's
// product and a second pass depends on the shape; these rules say where the
// backend runs them unless an environment variable forces a path
// (runtime/cuda/FusedNorms.cu), and the compiler's cost model charges the
// second pass only where they say no (passes/CostModel.cpp), so that both
// read the same rule. The timings behind them are dpc-gpu-check's on one
// H200 (us, fused against two-pass, 8192 rows; docs/PERFORMANCE.md), the
// benchmark's GPU. Two runs on H100s agree at T = 1024 and for the Gram
// rule, but there the fused materialized product of the 32000-row head
// lost at T >= 2048 (1733/1614 at 2048, 1729/1546 at 4096, 1754/1558 at
// 8192; the 128K head tied, 7025/6999) and the fused direct norm lost with
// one sample (down 479/425, gate/up 459/443): a few hundred us a step, not
// tuned per GPU yet.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_FUSED_NORMS_H
#define DPRT_FUSED_NORMS_H

#include <cstdint>

namespace dprt {

/// The materialized method's product with its norms (g_b = dy_b^T x_b,
/// `tokens` = K): the 32000-row head at T = 1024, 2048 (the 128K head),
/// 4096 and 8192: 1523/1869, 6156/6998, 1468/1459, 1484/1526; 2048 x 2048,
/// 8192 x 2048 and 2048 x 8192 at T = 1024: 126/138, 403/455, 406/454, but
/// at T = 4096 134/130, 409/414, 436/390 and at 8192 slower still; 512 x
/// 2048 (k/v) never: 52/48 at T = 1024. Its 64 x 256 tiles save the read but
/// lose to cuBLASLt's kernels as K grows, except on the tall heads. (At
/// T = 2048 the kernel timings favour it for every weight of 2048 rows or
/// more, but the 128K-vocabulary step was 0.8 to 1.0 % slower with it
/// everywhere than with the head alone, on an H100.) Heads of 64K rows or
/// more over more than 1024 tokens take the two passes: once cuBLASLt's
/// kernels were tuned (Gemm.cpp), the 128K-vocabulary DP steps at T = 2048
/// ran 0.3 to 0.4 % faster with the head's product two-pass than fused (two
/// rounds each, AdamW and SGD, one H200, in the program).
inline constexpr bool perSampleGradFusedByDefault(int64_t tokens, int64_t out) {
  constexpr int64_t kHeadRows = 16384, kWideHeadRows = 65536,
                    kMaxTokens = 1024, kMinRows = 2048;
  if (tokens <= kMaxTokens)
    return out >= kMinRows;
  return out >= kHeadRows && out < kWideHeadRows;
}

/// The direct norm against one cuBLASLt product per sample into an f32
/// workspace and a read of it: with 8 samples always (q/o 121/215, k/v
/// 48/161, gate/up 404/833, down 377/825, the 32000 head 1510/2860), with 2
/// always (118/125, 48/53, 406/467, 417/458, 1499/1861), with one sample
/// only for weights of 8M elements or more (gate/up 411/442, down 419/445,
/// head 1512/1750, but q/o 122/119 and k/v 69/44).
inline constexpr bool directNormFusedByDefault(int64_t batch, int64_t in,
                                               int64_t out) {
  constexpr int64_t kMinElements = int64_t(1) << 23;
  return batch >= 2 || in * out >= kMinElements;
}

/// One layer's share of a Gram norm against cuBLASLt's Gram product of the
/// output gradients into Kg and gram_dot: gradients of 512 and 2048 columns
/// (`dim`, the product's K) at every length (b 8 T 1024: 40/54, 80/84; b 2
/// T 4096: 92/159, 227/279; b 1 T 8192: 170/366, 482/645), but not as a
/// rule at 8192 (232/206, 842/773, 1740/1844) or 32000 (842/680,
/// 3204/3259, 7671/6531): with K that long its 64 x 256 tiles lose to
/// cuBLASLt's more than the pass it saves.
inline constexpr bool gramNormFusedByDefault(int64_t dim) {
  constexpr int64_t kMaxDim = 4096;
  return dim <= kMaxDim;
}

} // namespace dprt

#endif // DPRT_FUSED_NORMS_H
