//===- Dense.cpp - Embedding lookup and linear layers on the CPU ----------===//
//
// The linear layer's products go through BLAS (sgemm/dgemm); bf16 operands
// are widened to f32 first and the result is rounded once.
//
//===----------------------------------------------------------------------===//

#include "Element.h"

#include "dprt/kernels.h"

namespace dprt::cpu {

void embedding_forward(Rank *, DType dt, const int32_t *tokens,
                       const void *table, void *out, int64_t rows,
                       int64_t vocab, int64_t dim) {
  (void)vocab;
  // A row copy: the storage type is the same on both sides.
  int64_t rowBytes = dim * sizeOf(dt);
  auto *src = static_cast<const char *>(table);
  auto *dst = static_cast<char *>(out);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * rowBytes, src + int64_t(tokens[r]) * rowBytes,
                rowBytes);
}

void position_embedding_forward(Rank *, DType dt, const void *x,
                                const void *table, void *y, int64_t batch,
                                int64_t tokens, int64_t dim) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *pt = static_cast<const T *>(table);
    auto *yt = static_cast<T *>(y);
    // y[b, t] = x[b, t] + P[t]: the sum of two stored values, rounded once.
    int64_t block = tokens * dim;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < block; ++i)
        store(yt, b * block + i,
              double(load(xt, b * block + i)) + double(load(pt, i)));
  });
}

void linear_forward(Rank *, DType dt, const void *x, const void *w,
                    const void *bias, const void *addend, void *y, int64_t rows,
                    int64_t in, int64_t out) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *yt = static_cast<T *>(y);
    // In place (addend == y) the product adds into y's current values.
    const bool inPlace = addend && addend == y;
    auto *xc = asCompute(static_cast<const T *>(x), rows * in, 0);
    auto *wc = asCompute(static_cast<const T *>(w), out * in, 1);
    auto *yc = asComputeOutput(yt, rows * out, 2, inPlace);
    // y = x W^T, then the bias row by row, then the addend: in the compute
    // type, rounded once. Adding the addend after the product (not as BLAS's
    // beta C) keeps an f32 model's sums those of a separate dp.add.
    gemm(false, true, rows, out, in, 1.0, xc, in, wc, in, inPlace ? 1.0 : 0.0,
         yc, out);
    if (bias) {
      auto *b = static_cast<const T *>(bias);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < out; ++j)
          yc[r * out + j] += load(b, j);
    }
    if (addend && !inPlace) {
      auto *r = static_cast<const T *>(addend);
      for (int64_t i = 0; i < rows * out; ++i)
        yc[i] += load(r, i);
    }
    finishOutput(yt, yc, rows * out);
  });
}

void linear_backward_input(Rank *, DType dt, const void *dy, const void *w,
                           void *dx, int64_t rows, int64_t in, int64_t out,
                           bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *dxt = static_cast<T *>(dx);
    auto *dyc = asCompute(static_cast<const T *>(dy), rows * out, 0);
    auto *wc = asCompute(static_cast<const T *>(w), out * in, 1);
    auto *dxc = asComputeOutput(dxt, rows * in, 2, accumulate);
    // dx (+)= dy W.
    gemm(false, false, rows, in, out, 1.0, dyc, out, wc, in,
         accumulate ? 1.0 : 0.0, dxc, in);
    finishOutput(dxt, dxc, rows * in);
  });
}

} // namespace dprt::cpu
