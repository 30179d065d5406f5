//===- WeightGrads.cu - Clipped weight gradients on the GPU ---------------===//
//
// Each kernel ADDS sum_b c[b] grad_b into an f32 buffer without forming the
// unclipped gradient. As on the CPU, a sample with c[b] = 0 (masked or
// dropped) is skipped, so that whatever its buffers hold it adds nothing.
//
// embedding_grad adds with f32 atomics (rows of repeated tokens meet in the
// same table row), so its result can differ in the last bits from run to
// run; every other kernel here is deterministic.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Reduce.cuh"
#include "WeightedRows.cuh"

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cuda {

namespace {

/// ws[i] = c[b] * dy[i] with b = i / perSample, 0 where c[b] = 0.
template <class T> struct ScaleRowsOp {
  const T *dy;
  const float *c;
  T *ws;
  int64_t perSample;
  template <int W> __device__ void apply(int64_t i) const {
    // W divides perSample, so the W elements belong to one sample.
    const float cb = c[i / perSample];
    float v[W];
    loadVec<W>(dy + i, v);
#pragma unroll
    for (int k = 0; k < W; ++k)
      v[k] = cb == 0.0f ? 0.0f : cb * v[k];
    storeVec<W>(ws + i, v);
  }
};

/// out[j] += sum over b, in order, of c[b] g[b, j] (samples with c[b] = 0
/// skipped), V consecutive j a thread: with V > 1 every row and `out` are
/// 16-byte aligned and dim % V == 0 (the sums, in the same order, are the
/// same bits as with V = 1). Rows: PlainRowsView or MxRowsView.
template <int V, class Rows>
__global__ void weightedRowsKernel(Rows g, const float *c, float *out,
                                   int64_t batch, int64_t dim) {
  const int64_t vectors = dim / V;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < vectors;
       j += int64_t(gridDim.x) * blockDim.x) {
    float sum[V];
    weightedRowSums<V>(g, c, batch, j * V, sum);
    // out is f32: 4 values a 16-byte access.
#pragma unroll
    for (int k = 0; k < V; k += (V >= 4 ? 4 : 1)) {
      constexpr int W = V >= 4 ? 4 : 1;
      float o[W];
      loadVec<W>(out + j * V + k, o);
#pragma unroll
      for (int q = 0; q < W; ++q)
        o[q] += sum[k + q];
      storeVec<W>(out + j * V + k, o);
    }
  }
}

/// weightedRowsKernel with V elements a thread where g (16-byte aligned
/// when `rowsAligned`), out and dim allow it, else one.
template <int V, class Rows>
void weightedRows(Rank *rank, const Rows &g, bool rowsAligned, const float *c,
                  float *out, int64_t batch, int64_t dim, const char *name) {
  if (dim <= 0)
    return;
  // Rows of the materialized slices start every dim elements: all aligned
  // when g and dim are.
  if (rowsAligned && aligned16(out) && dim % V == 0)
    weightedRowsKernel<V>
        <<<gridFor(rank, dim / V, 256), 256, 0, computeStream(rank)>>>(
            g, c, out, batch, dim);
  else
    weightedRowsKernel<1>
        <<<gridFor(rank, dim, 256), 256, 0, computeStream(rank)>>>(g, c, out,
                                                                   batch, dim);
  checkLaunch(name);
}

template <class T> struct DyColumnOp {
  const T *dy;
  int64_t dim;
  __device__ float operator()(int64_t row, int64_t j) const {
    return toFloat(dy[row * dim + j]);
  }
};

template <class T>
__global__ void embeddingGradKernel(const int32_t *tok, const T *dy,
                                    const float *c, float *table,
                                    int64_t tokens, int64_t dim, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / dim, j = i - r * dim;
    const float cb = c[r / tokens];
    if (cb != 0.0f)
      atomicAdd(table + int64_t(tok[r]) * dim + j, cb * toFloat(dy[i]));
  }
}

} // namespace

void linear_weight_grad(Rank *rank, DType dt, const void *x, const void *dy,
                        const void *c, void *dw, int64_t batch, int64_t tokens,
                        int64_t in, int64_t out, void *workspace,
                        bool accumulate) {
  if (batch <= 0 || tokens <= 0 || in <= 0 || out <= 0) {
    if (!accumulate && in > 0 && out > 0)
      zero(rank, dw, in * out * int64_t(sizeof(float)));
    return;
  }
  // Overwriting (accumulate = false): the first GEMM's beta is 0, which
  // reads nothing of dW (a NaN there stays out), and no zeroed gradient is
  // needed before the step.
  if (!c) {
    // Unweighted (kernels.inc): dW += dy^T x, one GEMM straight from dy.
    Gemm g = weightGradProduct(dt, dy, x, dw, batch * tokens, in, out);
    g.beta = accumulate ? 1.0f : 0.0f;
    gemm(rank, g);
    return;
  }
  const int64_t chunk = weightGradChunkSamples(dt, batch, tokens, out);
  const int64_t es = sizeOf(dt);
  for (int64_t first = 0; first < batch; first += chunk) {
    const int64_t samples = std::min(chunk, batch - first);
    const int64_t rows = samples * tokens;
    const auto *dyChunk =
        static_cast<const char *>(dy) + first * tokens * out * es;
    dispatchCompute(dt, "linear_weight_grad", [&](auto tag) {
      using T = decltype(tag);
      // diag(c) dy of the chunk's samples, row by row, in the workspace.
      int64_t perSample = tokens * out;
      ScaleRowsOp<T> op{reinterpret_cast<const T *>(dyChunk),
                        static_cast<const float *>(c) + first,
                        static_cast<T *>(workspace), perSample};
      launchMap<kVec<T>>(rank, kComputeStream, rows * out,
                         perSample % kVec<T> == 0 && aligned16(dyChunk) &&
                             aligned16(workspace),
                         op, "linear_weight_grad");
    });
    // dW [out, in] += (diag(c) dy)^T x over the chunk, accumulated in f32.
    Gemm g = weightGradProduct(
        dt, workspace, static_cast<const char *>(x) + first * tokens * in * es,
        dw, rows, in, out);
    g.beta = accumulate || first > 0 ? 1.0f : 0.0f;
    gemm(rank, g);
  }
}

void bias_grad(Rank *rank, DType dt, const void *dy, const void *c, void *db,
               int64_t batch, int64_t tokens, int64_t out) {
  dispatchCompute(dt, "bias_grad", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || out <= 0)
      return;
    // Per-sample sums over tokens first, then the weighted sum over samples.
    ScratchLayout layout;
    size_t sumsAt = layout.add(size_t(batch * out) * sizeof(float));
    size_t partialsAt = layout.add(columnScratchBytes(batch, tokens, out));
    char *base =
        static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
    auto *sums = reinterpret_cast<float *>(base + sumsAt);
    columnSums(rank, batch, tokens, out,
               DyColumnOp<T>{static_cast<const T *>(dy), out}, sums,
               reinterpret_cast<float *>(base + partialsAt), "bias_grad");
    weightedRows<4>(rank, PlainRowsView<float>{sums, out}, aligned16(sums),
                    static_cast<const float *>(c), static_cast<float *>(db),
                    batch, out, "bias_grad");
  });
}

void embedding_grad(Rank *rank, DType dt, const int32_t *tok, const void *dy,
                    const void *c, void *dtable, int64_t batch, int64_t tokens,
                    int64_t vocab, int64_t dim) {
  (void)vocab;
  dispatchCompute(dt, "embedding_grad", [&](auto tag) {
    using T = decltype(tag);
    int64_t n = batch * tokens * dim;
    if (n <= 0)
      return;
    embeddingGradKernel<T>
        <<<gridFor(rank, n, 256), 256, 0, computeStream(rank)>>>(
            tok, static_cast<const T *>(dy), static_cast<const float *>(c),
            static_cast<float *>(dtable), tokens, dim, n);
    checkLaunch("embedding_grad");
  });
}

void rows_weighted_sum(Rank *rank, DType rows, const void *g, const void *c,
                       void *out, int64_t batch, int64_t dim) {
  const char *name = "rows_weighted_sum";
  const auto *cf = static_cast<const float *>(c);
  auto *o = static_cast<float *>(out);
  if (rows == DType::MXFP8) {
    if (dim % kMxBlock != 0)
      throw std::invalid_argument(std::string(name) + ": MXFP8 rows of " +
                                  std::to_string(dim) +
                                  " elements, not a multiple of 32");
    const MxRowsView rows(g, dim);
    weightedRows<16>(rank, rows, rows.aligned(g, 16), cf, o, batch, dim,
                     name);
    return;
  }
  dispatchCompute(rows, name, [&](auto tag) {
    using T = decltype(tag);
    weightedRows<kVec<T>>(rank,
                          PlainRowsView<T>{static_cast<const T *>(g), dim},
                          aligned16(g), cf, o, batch, dim, name);
  });
}

} // namespace dprt::cuda
