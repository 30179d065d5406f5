//===- Dense.cu - Embedding lookup and linear layers on the GPU -----------===//
//
// Linear layers are cuBLASLt products (Gemm.h), written with the same
// row-major calls as the CPU backend. The bias rides in cuBLASLt's epilogue
// when it is 16-byte aligned; otherwise a separate kernel adds it (a bias at
// an odd offset of a unit's flat buffer).
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"
#include "Gemm.h"

#include "dprt/kernels.h"

namespace dprt::cuda {

namespace {

/// out row r = table row tok[r], moved in units of U (16, 8, 4 or 2 bytes).
template <class U>
__global__ void gatherRowsKernel(const int32_t *tok, const U *table, U *out,
                                 int64_t rows, int64_t unitsPerRow) {
  const int64_t n = rows * unitsPerRow;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / unitsPerRow, k = i - r * unitsPerRow;
    out[i] = table[int64_t(tok[r]) * unitsPerRow + k];
  }
}

template <class U>
void gatherRows(Rank *rank, const int32_t *tok, const void *table, void *out,
                int64_t rows, int64_t rowBytes) {
  int64_t units = rowBytes / int64_t(sizeof(U));
  gatherRowsKernel<U>
      <<<gridFor(rank, rows * units, 256), 256, 0, computeStream(rank)>>>(
          tok, static_cast<const U *>(table), static_cast<U *>(out), rows,
          units);
  checkLaunch("embedding_forward");
}

/// y[r, j] += bias[j] over y [rows, out].
template <class T> struct AddBiasOp {
  const T *bias;
  T *y;
  int64_t out;
  template <int W> __device__ void apply(int64_t i) const {
    float v[W], b[W];
    loadVec<W>(y + i, v);
    loadVec<W>(bias + i % out, b);
#pragma unroll
    for (int k = 0; k < W; ++k)
      v[k] += b[k];
    storeVec<W>(y + i, v);
  }
};

/// y[i] = x[i] + table[i % block]: learned positions, block = tokens * dim.
template <class T> struct AddPositionsOp {
  const T *x, *table;
  T *y;
  int64_t block;
  template <int W> __device__ void apply(int64_t i) const {
    // W divides block, so the W elements lie in one sample's block.
    float u[W], v[W];
    loadVec<W>(x + i, u);
    loadVec<W>(table + i % block, v);
#pragma unroll
    for (int k = 0; k < W; ++k)
      u[k] += v[k];
    storeVec<W>(y + i, u);
  }
};

} // namespace

void position_embedding_forward(Rank *rank, DType dt, const void *x,
                                const void *table, void *y, int64_t batch,
                                int64_t tokens, int64_t dim) {
  dispatchCompute(dt, "position_embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    int64_t block = tokens * dim;
    AddPositionsOp<T> op{static_cast<const T *>(x),
                         static_cast<const T *>(table), static_cast<T *>(y),
                         block};
    bool vectorize = block % kVec<T> == 0 && aligned16(x) && aligned16(table) &&
                     aligned16(y);
    launchMap<kVec<T>>(rank, kComputeStream, batch * block, vectorize, op,
                       "position_embedding_forward");
  });
}

void embedding_forward(Rank *rank, DType dt, const int32_t *tokens,
                       const void *table, void *out, int64_t rows,
                       int64_t vocab, int64_t dim) {
  (void)vocab;
  requireCompute(dt, "embedding_forward");
  if (rows <= 0 || dim <= 0)
    return;
  // A row copy: the storage type is the same on both sides.
  int64_t rowBytes = dim * sizeOf(dt);
  auto fits = [&](int64_t unit) {
    return rowBytes % unit == 0 &&
           reinterpret_cast<uintptr_t>(table) % unit == 0 &&
           reinterpret_cast<uintptr_t>(out) % unit == 0;
  };
  if (fits(16))
    gatherRows<uint4>(rank, tokens, table, out, rows, rowBytes);
  else if (fits(8))
    gatherRows<uint2>(rank, tokens, table, out, rows, rowBytes);
  else if (fits(4))
    gatherRows<uint32_t>(rank, tokens, table, out, rows, rowBytes);
  else
    gatherRows<uint16_t>(rank, tokens, table, out, rows, rowBytes);
}

void linear_forward(Rank *rank, DType dt, const void *x, const void *w,
                    const void *bias, const void *addend, void *y, int64_t rows,
                    int64_t in, int64_t out) {
  requireCompute(dt, "linear_forward");
  // y = x W^T (+ bias) (+ addend): the addend is cuBLASLt's C, y its D, so
  // the residual connection is the epilogue's beta C, in f32 before the
  // rounding to y's type.
  Gemm g;
  g.ab = g.cd = dt;
  g.transB = true;
  g.m = rows;
  g.n = out;
  g.k = in;
  g.a = x;
  g.lda = in;
  g.b = w;
  g.ldb = in;
  g.c = y;
  g.ldc = out;
  if (addend) {
    g.addend = addend;
    g.beta = 1.0f;
  }
  bool fusedBias = bias && aligned16(bias);
  if (fusedBias)
    g.bias = bias;
  gemm(rank, g);
  if (bias && !fusedBias)
    dispatchCompute(dt, "linear_forward", [&](auto tag) {
      using T = decltype(tag);
      AddBiasOp<T> op{static_cast<const T *>(bias), static_cast<T *>(y), out};
      // Only reached with a misaligned bias: one element at a time.
      launchMap<1>(rank, kComputeStream, rows * out, false, op,
                   "linear_forward(bias)");
    });
}

void linear_backward_input(Rank *rank, DType dt, const void *dy, const void *w,
                           void *dx, int64_t rows, int64_t in, int64_t out,
                           bool accumulate) {
  requireCompute(dt, "linear_backward_input");
  // dx (+)= dy W.
  Gemm g;
  g.ab = g.cd = dt;
  g.m = rows;
  g.n = in;
  g.k = out;
  g.a = dy;
  g.lda = out;
  g.b = w;
  g.ldb = in;
  g.c = dx;
  g.ldc = in;
  g.beta = accumulate ? 1.0f : 0.0f;
  gemm(rank, g);
}

} // namespace dprt::cuda
