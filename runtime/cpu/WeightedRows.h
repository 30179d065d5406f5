//===- WeightedRows.h - Clip-weighted sums of materialized rows -*- C++ -*-===//
//
// One definition of the sum rows_weighted_sum adds and the *_update_rows
// optimizers feed to their update, so that the two give the same bits by
// construction (kernels.inc).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CPU_WEIGHTEDROWS_H
#define DPRT_CPU_WEIGHTEDROWS_H

#include "Element.h"
#include "Mxfp8.h"

namespace dprt::cpu {

/// sum[j - begin] += c[b] g[b, j] for j in [begin, end), in f64, over b in
/// order; a sample with c[b] = 0 (masked or dropped) is skipped, so that
/// whatever its row holds (NaN too) it adds nothing. G is a storage type's
/// pointer or MxRows.
template <class G, class A>
void addWeightedRows(const G &g, const A *c, int64_t batch, int64_t dim,
                     int64_t begin, int64_t end, double *sum) {
  for (int64_t b = 0; b < batch; ++b) {
    double cb = c[b];
    if (cb == 0)
      continue;
    for (int64_t j = begin; j < end; ++j)
      sum[j - begin] += cb * double(load(g, b * dim + j));
  }
}

/// Calls fn(rows, A{}) with `rows` the readable view of the rows of `dim`
/// elements at g (a const T * for a storage type T, MxRows for MXFP8) and A
/// their acc type.
template <class Fn>
void dispatchRows(DType rows, const void *g, int64_t dim, Fn &&fn) {
  if (rows == DType::MXFP8) {
    fn(MxRows(g, dim), float{});
    return;
  }
  dispatch(rows, [&](auto tag) {
    using T = decltype(tag);
    fn(static_cast<const T *>(g), AccOf<T>{});
  });
}

} // namespace dprt::cpu

#endif // DPRT_CPU_WEIGHTEDROWS_H
