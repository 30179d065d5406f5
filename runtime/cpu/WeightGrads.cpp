//===- WeightGrads.cpp - Clipped weight gradients on the CPU --------------===//
//
// Each kernel ADDS sum_b c[b] grad_b into an acc buffer, computing the
// clipped sum directly (the unclipped gradient is never formed). A sample
// with c[b] = 0 (masked or dropped) is skipped, so that whatever its buffers
// hold, it adds nothing, not even a NaN.
//
//===----------------------------------------------------------------------===//

#include "Element.h"
#include "WeightedRows.h"

#include "dprt/kernels.h"

#include <algorithm>

namespace dprt::cpu {

void linear_weight_grad(Rank *, DType dt, const void *x, const void *dy,
                        const void *c, void *dw, int64_t batch, int64_t tokens,
                        int64_t in, int64_t out, void *workspace,
                        bool accumulate) {
  int64_t rows = batch * tokens;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeOf<T>;
    // Overwriting: the sum added into zeros.
    if (!accumulate)
      std::fill_n(static_cast<AccOf<T> *>(dw), out * in, AccOf<T>(0));
    auto *dyt = static_cast<const T *>(dy);
    auto *ct = static_cast<const AccOf<T> *>(c);
    auto *xc = asCompute(static_cast<const T *>(x), rows * in, 0);
    if (!ct) {
      // Unweighted (kernels.inc): dW += dy^T x over every row, one GEMM.
      const C *dyc = asCompute(dyt, rows * out, 1);
      gemm(true, false, out, in, rows, 1.0, dyc, out, xc, in, 1.0,
           static_cast<AccOf<T> *>(dw), in);
      return;
    }
    // diag(c) dy, row by row. bf16 keeps the scaled rows in f32 scratch
    // rather than the bf16 workspace: sgemm needs f32 operands anyway, and
    // c_b dy is then not rounded to bf16 a second time.
    const int64_t chunk = weightGradChunkSamples(dt, batch, tokens, out);
    C *scaled = std::is_same_v<T, C> ? static_cast<C *>(workspace)
                                     : scratch<C>(1, chunk * tokens * out);
    // dW += (diag(c) dy)^T x, one GEMM per run of consecutive samples with
    // c != 0 (usually one a chunk: padding comes last), so that the rows of
    // dropped samples take no part, not even as 0 * NaN; a run holds at most
    // a chunk of samples (the workspace's size).
    for (int64_t first = 0; first < batch;) {
      if (ct[first] == 0) {
        ++first;
        continue;
      }
      int64_t end = first;
      for (; end < batch && end - first < chunk && ct[end] != 0; ++end) {
        double cb = ct[end];
        C *to = scaled + (end - first) * tokens * out;
        for (int64_t i = 0; i < tokens * out; ++i)
          to[i] = C(cb * double(load(dyt, end * tokens * out + i)));
      }
      int64_t r0 = first * tokens;
      gemm(true, false, out, in, (end - first) * tokens, 1.0, scaled, out,
           xc + r0 * in, in, 1.0, static_cast<AccOf<T> *>(dw), in);
      first = end;
    }
  });
}

void bias_grad(Rank *, DType dt, const void *dy, const void *c, void *db,
               int64_t batch, int64_t tokens, int64_t out) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *dyt = static_cast<const T *>(dy);
    auto *ct = static_cast<const A *>(c);
    auto *dba = static_cast<A *>(db);
    double *sum = scratch<double>(0, out);
    std::fill(sum, sum + out, 0.0);
    for (int64_t b = 0; b < batch; ++b) {
      double cb = ct[b];
      if (cb == 0)
        continue;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < out; ++j)
          sum[j] += cb * double(load(dyt + (b * tokens + t) * out, j));
    }
    for (int64_t j = 0; j < out; ++j)
      dba[j] = A(double(dba[j]) + sum[j]);
  });
}

void embedding_grad(Rank *, DType dt, const int32_t *tok, const void *dy,
                    const void *c, void *dtable, int64_t batch, int64_t tokens,
                    int64_t vocab, int64_t dim) {
  (void)vocab;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *dyt = static_cast<const T *>(dy);
    auto *ct = static_cast<const A *>(c);
    auto *table = static_cast<A *>(dtable);
    // Row tok[b, t] of dTable += c_b dy[b, t, :].
    for (int64_t b = 0; b < batch; ++b) {
      double cb = ct[b];
      if (cb == 0)
        continue;
      for (int64_t t = 0; t < tokens; ++t) {
        int64_t r = b * tokens + t;
        A *row = table + int64_t(tok[r]) * dim;
        for (int64_t j = 0; j < dim; ++j)
          row[j] = A(double(row[j]) + cb * double(load(dyt + r * dim, j)));
      }
    }
  });
}

void rows_weighted_sum(Rank *, DType rows, const void *g, const void *c,
                       void *out, int64_t batch, int64_t dim) {
  dispatchRows(rows, g, dim, [&](const auto &gt, auto accTag) {
    using A = decltype(accTag);
    auto *ca = static_cast<const A *>(c);
    auto *o = static_cast<A *>(out);
    double *sum = scratch<double>(0, dim);
    std::fill(sum, sum + dim, 0.0);
    addWeightedRows(gt, ca, batch, dim, 0, dim, sum);
    for (int64_t j = 0; j < dim; ++j)
      o[j] = A(double(o[j]) + sum[j]);
  });
}

} // namespace dprt::cpu
