//===- WeightedRows.cuh - Clip-weighted sums of rows -----------*- CUDA -*-===//
//
// One definition of the per-element sum rows_weighted_sum adds and the
// *_update_rows optimizers feed to their update. Both kernels inline this
// same code, with explicit FMAs (no contraction left to nvcc), so the two
// give the same bits (kernels.inc). weightedRowSumsAhead is the same sum
// over rows fetched earlier (SGD's mxAheadUpdateKernel): the same products
// added in the same order, with each row's block scale folded into its
// weight, which gives the same bits wherever that weight is a normal float
// (mxRowWeight); gpu-check holds it bit for bit against rows_weighted_sum.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_WEIGHTEDROWS_CUH
#define DPRT_CUDA_WEIGHTEDROWS_CUH

#include "DeviceMath.cuh"
#include "Mxfp8.cuh"

namespace dprt::cuda {

/// sum[k] += cb row[k] for k < W, nothing when cb is 0 (a masked or
/// dropped sample), so that whatever its row holds (NaN too) it adds nothing.
template <int W>
__device__ __forceinline__ void addWeightedRow(float cb, const float (&row)[W],
                                               float (&sum)[W]) {
  if (cb == 0.0f)
    return;
#pragma unroll
  for (int k = 0; k < W; ++k)
    sum[k] = __fmaf_rn(cb, row[k], sum[k]);
}

/// The weight of an MXFP8 row's elements before their block's scale 2^E in
/// weightedRowSumsAhead: c[b] 2^E, so that each element costs one fma,
/// c[b] 2^E e, instead of a multiply by 2^E and an fma. The same bits as
/// weightedRowSums' fma(c[b], e 2^E, sum) wherever c[b] 2^E is a normal
/// float, as both are then the exact product rounded once (e 2^E is always
/// exact). It is subnormal only where c[b] 2^E < 2^-126, for blocks whose
/// largest magnitude is below 448 2^-126 / c[b] (5e-36 / c[b]), and there
/// the weight is off by half a subnormal step, 2^-150, and the product by
/// at most 448 2^-150 (3e-43). A NaN scale (a block that held an infinity
/// or NaN) makes the weight and the sum NaN, as in weightedRowSums.
__device__ __forceinline__ float mxRowWeight(float cb, float scale) {
  return __fmul_rn(cb, scale);
}

/// addWeightedRow of an MXFP8 row's elements e before their block's scale:
/// sum[k] += mxRowWeight(cb, scale) e[k].
template <int W>
__device__ __forceinline__ void addWeightedElements(float cb, float scale,
                                                    const float (&e)[W],
                                                    float (&sum)[W]) {
  if (cb == 0.0f)
    return;
  const float weight = mxRowWeight(cb, scale);
#pragma unroll
  for (int k = 0; k < W; ++k)
    sum[k] = __fmaf_rn(weight, e[k], sum[k]);
}

/// sum[k] = the sum over b, in order, of c[b] g[b, j + k] for k < W, in f32;
/// a sample with c[b] = 0 (masked or dropped) is skipped, so that whatever
/// its row holds (NaN too) it adds nothing. Rows is PlainRowsView or
/// MxRowsView (Mxfp8.cuh); with W > 1 every row's W elements at j are
/// aligned for one vector load.
template <int W, class Rows>
__device__ __forceinline__ void weightedRowSums(const Rows &g, const float *c,
                                                int64_t batch, int64_t j,
                                                float (&sum)[W]) {
#pragma unroll
  for (int k = 0; k < W; ++k)
    sum[k] = 0.0f;
  // Eight rows' loads in flight before their sums (a row whose c is 0 is
  // read, never added): one at a time left the update kernels, with their
  // registers, waiting on memory (B8 bf16 n11.5M on an H200: sgd 134 ->
  // 95 us with four ahead, 85 with eight). The order of the sum is
  // unchanged.
  constexpr int kAhead = 8;
  int64_t b = 0;
  for (; b + kAhead <= batch; b += kAhead) {
    float row[kAhead][W];
#pragma unroll
    for (int q = 0; q < kAhead; ++q)
      g.template load<W>(b + q, j, row[q]);
#pragma unroll
    for (int q = 0; q < kAhead; ++q)
      addWeightedRow<W>(c[b + q], row[q], sum);
  }
  for (; b < batch; ++b) {
    float row[W];
    g.template load<W>(b, j, row);
    addWeightedRow<W>(c[b], row, sum);
  }
}

/// The bytes of MXFP8 rows 0 .. batch - 1 at j, batch <= kMxRowsAhead,
/// fetched and not yet decoded, so that a kernel can work while their loads
/// are in flight (fetchRowsAhead) and sum them after
/// (weightedRowSumsAhead). Undecoded, 8 rows of 8 elements take 24
/// registers instead of 64.
constexpr int kMxRowsAhead = 8;
template <int W> struct MxRowsAhead { MxRaw<W> rows[kMxRowsAhead]; };

/// Row 0's addresses at element j, and each next row's one stride on, so
/// that a row's two loads cost two 64-bit adds: with MxRowsView::fetch's
/// base + b * stride + j for each row the SGD update on B8 MXFP8 rows spent
/// about 17 of its 107 instructions an element on these addresses
/// (docs/PERFORMANCE.md).
template <int W>
__device__ __forceinline__ void fetchRowsAhead(const MxRowsView &g,
                                               int64_t batch, int64_t j,
                                               MxRowsAhead<W> &ahead) {
  const uint8_t *elems = g.base + j;
  const uint8_t *scales = g.base + g.dim + j / kMxBlock;
  const int rows = int(batch);
#pragma unroll
  for (int b = 0; b < kMxRowsAhead; ++b) {
    if (b < rows)
      fetchMxAt<W>(elems, scales, ahead.rows[b]);
    elems += g.stride;
    scales += g.stride;
  }
}

/// weightedRowSums of the fetched rows: the same sum, in the same order,
/// with each row's block scale in its weight (mxRowWeight). On one H200,
/// with the addresses above, the SGD update on B8 MXFP8 rows went from 107
/// to 94 instructions an element and 78.5 to 68.0 us (n 12.6M, at the
/// 1.47 GHz Nsight Compute holds; 78.3 to 67.8 us a call in the T = 1024
/// DP step).
template <int W>
__device__ __forceinline__ void
weightedRowSumsAhead(const float *c, int64_t batch, const MxRowsAhead<W> &ahead,
                     float (&sum)[W]) {
#pragma unroll
  for (int k = 0; k < W; ++k)
    sum[k] = 0.0f;
  // batch <= kMxRowsAhead: a 32-bit count, one compare a row instead of
  // the 64-bit compare's three instructions.
  const int rows = int(batch);
#pragma unroll
  for (int b = 0; b < kMxRowsAhead; ++b) {
    if (b >= rows)
      break;
    // A skipped row is not decoded either.
    const float cb = c[b];
    if (cb == 0.0f)
      continue;
    float e[W];
    decodeMxElements<W>(ahead.rows[b], e);
    addWeightedElements<W>(cb, fromE8m0(ahead.rows[b].scale), e, sum);
  }
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_WEIGHTEDROWS_CUH
