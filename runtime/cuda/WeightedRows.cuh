//===- WeightedRows.cuh - Clip-weighted sums of rows -----------*- CUDA -*-===//
//
// One definition of the per-element sum rows_weighted_sum adds and the
// *_update_rows optimizers feed to their update. Both kernels inline this
// same code, so nvcc contracts c[b] * g + sum into the same FMAs in both and
// the two give the same bits (kernels.inc).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_WEIGHTEDROWS_CUH
#define DPRT_CUDA_WEIGHTEDROWS_CUH

#include "DeviceMath.cuh"

namespace dprt::cuda {

/// sum[k] = the sum over b, in order, of c[b] g[b, j + k] for k < W, in f32;
/// a sample with c[b] = 0 (masked or dropped) is skipped, so that whatever
/// its row holds (NaN too) it adds nothing. With W > 1 every row g + b * dim
/// + j is 16-byte aligned (loadVec).
template <int W, class T>
__device__ __forceinline__ void weightedRowSums(const T *g, const float *c,
                                                int64_t batch, int64_t dim,
                                                int64_t j, float (&sum)[W]) {
#pragma unroll
  for (int k = 0; k < W; ++k)
    sum[k] = 0.0f;
  for (int64_t b = 0; b < batch; ++b) {
    const float cb = c[b];
    if (cb == 0.0f)
      continue;
    float row[W];
    loadVec<W>(g + b * dim + j, row);
#pragma unroll
    for (int k = 0; k < W; ++k)
      sum[k] += cb * row[k];
  }
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_WEIGHTEDROWS_CUH
