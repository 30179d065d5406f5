//===- Normalization.cu - RMSNorm and LayerNorm on the GPU ----------------===//
//
// One block per row: the row statistics are block reductions in f32 and the
// row is read again (from L1/L2) to write the result; the backward with
// gamma's sums takes 8 rows a block, each held in registers across its
// sums, the next one's loads in flight (normBackwardRowsAhead). The per-sample
// gamma/beta gradients are column sums over each sample's tokens,
// deterministic, in f32: RMSNorm's gamma sums ride on the backward (a block
// of 8 rows, then a sum over the blocks, chunkSums), which
// gpu-check's 8192 x 2048 bf16 rms_norm_backward took from 75.6 to 52.8 us
// and a T = 1024 step's norm backward from 2.40 to 1.75 ms (tokens/s +0.25
// to +0.58 % over eight programs, one H200); LayerNorm's with beta, and
// rows wider than a block's vectors, take a pass of their own (columnSums,
// Reduce.cuh).
//
//===----------------------------------------------------------------------===//

#include "Reduce.cuh"

#include "dprt/kernels.h"

#include <type_traits>

namespace dprt::cuda {

namespace {

template <class T, int V>
__global__ void rmsNormForwardKernel(const T *x, const T *gamma, T *y,
                                     float *rstd, int64_t dim, float eps) {
  __shared__ float buffer[32];
  const int64_t row = blockIdx.x;
  const T *xr = x + row * dim;
  T *yr = y + row * dim;
  const int64_t step = int64_t(blockDim.x) * V;
  float ss = 0.0f;
  for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
    float v[V];
    loadVec<V>(xr + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      ss += v[k] * v[k];
  }
  ss = blockSum(ss, buffer);
  const float s = 1.0f / sqrtf(ss / float(dim) + eps);
  if (threadIdx.x == 0)
    rstd[row] = s;
  for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
    float v[V], g[V];
    loadVec<V>(xr + i, v);
    loadVec<V>(gamma + i, g);
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = v[k] * s * g[k];
    storeVec<V>(yr + i, v);
  }
}

template <class T, int V>
__global__ void layerNormForwardKernel(const T *x, const T *gamma,
                                       const T *beta, T *y, float *mean,
                                       float *rstd, int64_t dim, float eps) {
  __shared__ float buffer[32];
  const int64_t row = blockIdx.x;
  const T *xr = x + row * dim;
  T *yr = y + row * dim;
  const int64_t step = int64_t(blockDim.x) * V;
  // Two passes: the mean, then the biased variance around it.
  float sum = 0.0f;
  for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
    float v[V];
    loadVec<V>(xr + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      sum += v[k];
  }
  const float mu = blockSum(sum, buffer) / float(dim);
  float var = 0.0f;
  for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
    float v[V];
    loadVec<V>(xr + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k)
      var += (v[k] - mu) * (v[k] - mu);
  }
  var = blockSum(var, buffer) / float(dim);
  const float s = 1.0f / sqrtf(var + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = s;
  }
  for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
    float v[V], g[V], b[V];
    loadVec<V>(xr + i, v);
    loadVec<V>(gamma + i, g);
    if (beta)
      loadVec<V>(beta + i, b);
#pragma unroll
    for (int k = 0; k < V; ++k)
      v[k] = (v[k] - mu) * s * g[k] + (beta ? b[k] : 0.0f);
    storeVec<V>(yr + i, v);
  }
}

/// Rows a block of the backward walks when it also sums gamma's gradient
/// columns (kColumns): 1024 blocks for 8192 rows, partials of 8 MB at 2048
/// columns.
constexpr int64_t kNormRows = 8;

/// RMSNorm's result for a vector of a row, x * rstd * gamma from the stored
/// rstd: rmsNormForwardKernel's expression, so its bits. The backward makes
/// it for dp-rematerialize's clone folded into the derivative (kOutput).
template <class T, int V>
__device__ __forceinline__ void
storeRmsNormOutput(const float (&v)[V], const float (&g)[V], float s, T *y) {
  float out[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    out[k] = v[k] * s * g[k];
  storeVec<V>(y, out);
}

/// A vector's share of a norm backward row's sums: sumG += g, sumGX += g
/// xhat with g = dy gamma, xhat = (x - mu) s. normBackwardRows and
/// normBackwardRowsAhead share it (and rowGradient), so that they give the
/// same bits.
template <int V>
__device__ __forceinline__ void
addRowSums(const float (&v)[V], const float (&d)[V], const float (&g)[V],
           float mu, float s, float &sumG, float &sumGX) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float gk = d[k] * g[k];
    sumG += gk;
    sumGX += gk * ((v[k] - mu) * s);
  }
}

/// A vector of a norm backward row: out (+)= s (dy gamma - meanG - xhat
/// meanGX) (out holds dx's old values when accumulating) and, with
/// kColumns, colG += dy xhat.
template <int V, bool kColumns>
__device__ __forceinline__ void
rowGradient(const float (&v)[V], const float (&d)[V], const float (&g)[V],
            float mu, float s, float meanG, float meanGX, bool accumulate,
            float (&out)[V], float (&colG)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    float xhat = (v[k] - mu) * s;
    float r = s * (d[k] * g[k] - meanG - xhat * meanGX);
    out[k] = accumulate ? out[k] + r : r;
    if constexpr (kColumns)
      colG[k] += d[k] * xhat;
  }
}

/// dx (+)= rstd * (g - centre * mean_j(g) - xhat * mean_j(g * xhat)) with
/// g = dy * gamma and xhat = (x - mu) * rstd; mu = 0 and no centring for
/// RMSNorm (mean == nullptr). Block (b, c) takes the rows of sample b's
/// tokens [c R, c R + R), R = rowsPerBlock, one at a time. With kColumns
/// (every thread then holds at most one vector of the row) it also sums,
/// per column, dy * xhat over those rows into row b * chunks + c of
/// gammaSums: the per-sample gamma gradients' column sums without a second
/// pass over x and dy (columnPartialKernel's 0.93 ms a T = 1024 step, 33
/// calls).
template <class T, int V, bool kColumns, bool kOutput>
__device__ __forceinline__ void
normBackwardRows(const T *x, const T *gamma, const float *mean,
                 const float *rstd, const T *dy, T *dx, T *y, int64_t tokens,
                 int64_t rowsPerBlock, int64_t dim, bool accumulate,
                 float *gammaSums) {
  __shared__ float buffer[32];
  const int64_t chunks = (tokens + rowsPerBlock - 1) / rowsPerBlock;
  const int64_t b = blockIdx.x / chunks, c = blockIdx.x - b * chunks;
  const int64_t t0 = c * rowsPerBlock;
  const int64_t t1 = t0 + rowsPerBlock < tokens ? t0 + rowsPerBlock : tokens;
  const int64_t step = int64_t(blockDim.x) * V;
  float colG[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    colG[k] = 0.0f;
  for (int64_t row = b * tokens + t0; row < b * tokens + t1; ++row) {
    const T *xr = x + row * dim;
    const T *dyr = dy + row * dim;
    T *dxr = dx + row * dim;
    const float s = rstd[row];
    const float mu = mean ? mean[row] : 0.0f;
    float sumG = 0.0f, sumGX = 0.0f;
    for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
      float v[V], g[V], d[V];
      loadVec<V>(xr + i, v);
      loadVec<V>(gamma + i, g);
      loadVec<V>(dyr + i, d);
      addRowSums<V>(v, d, g, mu, s, sumG, sumGX);
    }
    const float meanG = mean ? blockSum(sumG, buffer) / float(dim) : 0.0f;
    const float meanGX = blockSum(sumGX, buffer) / float(dim);
    for (int64_t i = int64_t(threadIdx.x) * V; i < dim; i += step) {
      float v[V], g[V], d[V], out[V];
      loadVec<V>(xr + i, v);
      loadVec<V>(gamma + i, g);
      loadVec<V>(dyr + i, d);
      if (accumulate)
        loadVec<V>(dxr + i, out);
      rowGradient<V, kColumns>(v, d, g, mu, s, meanG, meanGX, accumulate, out,
                               colG);
      storeVec<V>(dxr + i, out);
      if constexpr (kOutput)
        storeRmsNormOutput<T, V>(v, g, s, y + row * dim + i);
    }
  }
  if constexpr (kColumns) {
    const int64_t j = int64_t(threadIdx.x) * V;
    if (j < dim)
      storeVec<V>(gammaSums + blockIdx.x * dim + j, colG);
  }
}

template <class T, int V, bool kOutput>
__global__ void normBackwardKernel(const T *x, const T *gamma,
                                   const float *mean, const float *rstd,
                                   const T *dy, T *dx, T *y, int64_t tokens,
                                   int64_t dim, bool accumulate) {
  normBackwardRows<T, V, false, kOutput>(x, gamma, mean, rstd, dy, dx, y,
                                         tokens, 1, dim, accumulate, nullptr);
}

/// normBackwardRows<T, V, true> where a thread holds at most one 16-byte
/// vector of a row (V * sizeof(T) == 16, dim <= blockDim.x * V): the same
/// expressions in the same order, so the same bits, with gamma loaded once
/// for the block's rows, each row's x and dy kept in registers across its
/// block sums instead of read again, and the next row's loads issued before
/// them, so that they are in flight during the barriers. One row's loads at
/// a time left the kernel, 96 MiB a call at 8192 x 2048 bf16, at 2.0 TB/s:
/// in the T = 1024 SGD DP step on one H200 50.0 -> 38.9 us a call, in the
/// T = 8192 SGD DP-off step 48.4 -> 37.7 (kernel-times, docs/PERFORMANCE.md).
/// The same for the forward (a block taking 8 rows, the next row's x loaded
/// ahead) was slower than rmsNormForwardKernel's block a row, 23.4 -> 24.4
/// us, and was not kept.
template <class T, int V, bool kOutput>
__device__ __forceinline__ void
normBackwardRowsAhead(const T *x, const T *gamma, const float *mean,
                      const float *rstd, const T *dy, T *dx, T *y,
                      int64_t tokens, int64_t dim, bool accumulate,
                      float *gammaSums) {
  __shared__ float buffer[32];
  const int64_t chunks = (tokens + kNormRows - 1) / kNormRows;
  const int64_t b = blockIdx.x / chunks, c = blockIdx.x - b * chunks;
  const int64_t t1 =
      c * kNormRows + kNormRows < tokens ? c * kNormRows + kNormRows : tokens;
  const int64_t first = b * tokens + c * kNormRows, end = b * tokens + t1;
  const int64_t i = int64_t(threadIdx.x) * V;
  const bool active = i < dim;
  float colG[V];
#pragma unroll
  for (int k = 0; k < V; ++k)
    colG[k] = 0.0f;
  // gamma as loaded too: 4 registers instead of V.
  uint4 gammaRaw = make_uint4(0, 0, 0, 0), xNext = gammaRaw, dyNext = gammaRaw;
  if (active) {
    gammaRaw = loadRaw16(gamma + i);
    xNext = loadRaw16(x + first * dim + i);
    dyNext = loadRaw16(dy + first * dim + i);
  }
  for (int64_t row = first; row < end; ++row) {
    const uint4 xRaw = xNext, dyRaw = dyNext;
    if (active && row + 1 < end) {
      xNext = loadRaw16(x + (row + 1) * dim + i);
      dyNext = loadRaw16(dy + (row + 1) * dim + i);
    }
    const float s = rstd[row];
    const float mu = mean ? mean[row] : 0.0f;
    float v[V], d[V], g[V];
    unpack16<T, V>(xRaw, v);
    unpack16<T, V>(dyRaw, d);
    unpack16<T, V>(gammaRaw, g);
    float sumG = 0.0f, sumGX = 0.0f;
    if (active)
      addRowSums<V>(v, d, g, mu, s, sumG, sumGX);
    const float meanG = mean ? blockSum(sumG, buffer) / float(dim) : 0.0f;
    const float meanGX = blockSum(sumGX, buffer) / float(dim);
    if (active) {
      T *dxr = dx + row * dim;
      float out[V];
      if (accumulate)
        loadVec<V>(dxr + i, out);
      rowGradient<V, true>(v, d, g, mu, s, meanG, meanGX, accumulate, out,
                           colG);
      storeVec<V>(dxr + i, out);
      if constexpr (kOutput)
        storeRmsNormOutput<T, V>(v, g, s, y + row * dim + i);
    }
  }
  if (active)
    storeVec<V>(gammaSums + blockIdx.x * dim + i, colG);
}

/// At most 48 registers, as the plain kernel (bf16): with the sums' 8 more,
/// 5 blocks of 256 a multiprocessor would become 4.
template <class T, int V, bool kOutput>
__global__ void __maxnreg__(48)
    normBackwardColumnsKernel(const T *x, const T *gamma, const float *mean,
                              const float *rstd, const T *dy, T *dx, T *y,
                              int64_t tokens, int64_t dim, bool accumulate,
                              float *gammaSums) {
  normBackwardRows<T, V, true, kOutput>(x, gamma, mean, rstd, dy, dx, y, tokens,
                                        kNormRows, dim, accumulate, gammaSums);
}

/// normBackwardRowsAhead's kernel, for 16-byte vectors. Without y, 56
/// registers hold it without spilling (48 spilled 24 bytes): 4 blocks of
/// 256 a multiprocessor instead of 5. Making RMSNorm's result too (kOutput),
/// it spilled 8 bytes at 56 (bf16); 64 keep 4 blocks of 256, as 56 do.
template <class T, bool kOutput>
__global__ void __maxnreg__(kOutput ? 64 : 56)
    normBackwardAheadKernel(const T *x, const T *gamma, const float *mean,
                            const float *rstd, const T *dy, T *dx, T *y,
                            int64_t tokens, int64_t dim, bool accumulate,
                            float *gammaSums) {
  normBackwardRowsAhead<T, kVec<T>, kOutput>(
      x, gamma, mean, rstd, dy, dx, y, tokens, dim, accumulate, gammaSums);
}

/// dy[r, j] * xhat[r, j]; xhat = (x - mean[r]) * rstd[r], mean may be null.
template <class T> struct DyXhatOp {
  const T *x, *dy;
  const float *mean, *rstd;
  int64_t dim;
  __device__ float operator()(int64_t row, int64_t j) const {
    float mu = mean ? mean[row] : 0.0f;
    return toFloat(dy[row * dim + j]) *
           ((toFloat(x[row * dim + j]) - mu) * rstd[row]);
  }
};

template <class T> struct DyOp {
  const T *dy;
  int64_t dim;
  __device__ float operator()(int64_t row, int64_t j) const {
    return toFloat(dy[row * dim + j]);
  }
};

/// The vector width for row kernels over `dim`: 16-byte vectors when every
/// row starts aligned.
template <class T>
int rowVector(int64_t dim, std::initializer_list<const void *> ptrs) {
  if (dim % kVec<T> != 0)
    return 1;
  for (const void *p : ptrs)
    if (p && !aligned16(p))
      return 1;
  return kVec<T>;
}

/// y, when not null (RMSNorm only: mean is null), gets the normalization's
/// result again (storeRmsNormOutput).
template <class T>
void normBackward(Rank *rank, const T *x, const T *gamma, const float *mean,
                  const float *rstd, const T *dy, T *dx, T *y, float *dgamma,
                  float *dbeta, int64_t batch, int64_t tokens, int64_t dim,
                  bool accumulate, const char *name) {
  int64_t rows = batch * tokens;
  if (rows <= 0 || dim <= 0)
    return;
  if (y && mean)
    fail(std::string(name) + ": the result again is RMSNorm's only");
  cudaStream_t stream = computeStream(rank);
  int v = rowVector<T>(dim, {x, gamma, dy, dx, y});
  int threads = rowThreads(dim / v);
  // With gammaSums: the kernel that also sums gamma's columns, a block of
  // kNormRows rows; else a block a row.
  auto launch = [&](auto vector, auto output, float *gammaSums,
                    int64_t blocks) {
    constexpr int V = decltype(vector)::value;
    constexpr bool O = decltype(output)::value;
    if (gammaSums) {
      if constexpr (V == kVec<T>)
        normBackwardAheadKernel<T, O><<<unsigned(blocks), threads, 0, stream>>>(
            x, gamma, mean, rstd, dy, dx, y, tokens, dim, accumulate,
            gammaSums);
      else
        normBackwardColumnsKernel<T, V, O>
            <<<unsigned(blocks), threads, 0, stream>>>(x, gamma, mean, rstd, dy,
                                                       dx, y, tokens, dim,
                                                       accumulate, gammaSums);
    } else
      normBackwardKernel<T, V, O><<<unsigned(blocks), threads, 0, stream>>>(
          x, gamma, mean, rstd, dy, dx, y, tokens, dim, accumulate);
    checkLaunch(name);
  };
  auto launchWith = [&](auto vector, float *gammaSums, int64_t blocks) {
    if (y)
      launch(vector, std::true_type{}, gammaSums, blocks);
    else
      launch(vector, std::false_type{}, gammaSums, blocks);
  };
  auto launchFor = [&](float *gammaSums, int64_t blocks) {
    if (v > 1)
      launchWith(std::integral_constant<int, kVec<T>>{}, gammaSums, blocks);
    else
      launchWith(std::integral_constant<int, 1>{}, gammaSums, blocks);
  };
  // gamma's column sums ride on the backward where a thread holds at most
  // one vector of a row (dim up to 8192 in bf16, 4096 in f32) and there is
  // no beta (RMSNorm); else they, and beta's, are a pass of their own
  // (Reduce.cuh).
  if (dgamma && !dbeta && dim / v <= threads) {
    const int64_t chunks = (tokens + kNormRows - 1) / kNormRows;
    float *sums =
        chunks > 1 ? static_cast<float *>(
                         scratch(rank, kComputeStream,
                                 size_t(batch * chunks * dim) * sizeof(float)))
                   : dgamma;
    launchFor(sums, batch * chunks);
    if (chunks > 1) {
      chunkSums(stream, sums, batch, chunks, dim, dgamma);
      checkLaunch(name);
    }
    return;
  }
  launchFor(nullptr, rows);
  if (!dgamma && !dbeta)
    return;
  float *partials = static_cast<float *>(
      scratch(rank, kComputeStream, columnScratchBytes(batch, tokens, dim)));
  if (dgamma)
    columnSums(rank, batch, tokens, dim, DyXhatOp<T>{x, dy, mean, rstd, dim},
               dgamma, partials, name);
  if (dbeta)
    columnSums(rank, batch, tokens, dim, DyOp<T>{dy, dim}, dbeta, partials,
               name);
}

void checkRows(int64_t rows, const char *name) {
  if (rows > int64_t(INT32_MAX))
    fail(std::string(name) + ": too many rows for one launch");
}

} // namespace

void rms_norm_forward(Rank *rank, DType dt, const void *x, const void *gamma,
                      void *y, void *rstd, int64_t rows, int64_t dim,
                      double eps) {
  dispatchCompute(dt, "rms_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    if (rows <= 0 || dim <= 0)
      return;
    checkRows(rows, "rms_norm_forward");
    auto *xt = static_cast<const T *>(x);
    auto *gt = static_cast<const T *>(gamma);
    auto *yt = static_cast<T *>(y);
    auto *rt = static_cast<float *>(rstd);
    cudaStream_t stream = computeStream(rank);
    int v = rowVector<T>(dim, {x, gamma, y});
    int threads = rowThreads(dim / v);
    if (v > 1)
      rmsNormForwardKernel<T, kVec<T>><<<unsigned(rows), threads, 0, stream>>>(
          xt, gt, yt, rt, dim, float(eps));
    else
      rmsNormForwardKernel<T, 1><<<unsigned(rows), threads, 0, stream>>>(
          xt, gt, yt, rt, dim, float(eps));
    checkLaunch("rms_norm_forward");
  });
}

void layer_norm_forward(Rank *rank, DType dt, const void *x, const void *gamma,
                        const void *beta, void *y, void *mean, void *rstd,
                        int64_t rows, int64_t dim, double eps) {
  dispatchCompute(dt, "layer_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    if (rows <= 0 || dim <= 0)
      return;
    checkRows(rows, "layer_norm_forward");
    auto *xt = static_cast<const T *>(x);
    auto *gt = static_cast<const T *>(gamma);
    auto *bt = static_cast<const T *>(beta);
    auto *yt = static_cast<T *>(y);
    auto *mt = static_cast<float *>(mean);
    auto *rt = static_cast<float *>(rstd);
    cudaStream_t stream = computeStream(rank);
    int v = rowVector<T>(dim, {x, gamma, beta, y});
    int threads = rowThreads(dim / v);
    if (v > 1)
      layerNormForwardKernel<T, kVec<T>>
          <<<unsigned(rows), threads, 0, stream>>>(xt, gt, bt, yt, mt, rt, dim,
                                                   float(eps));
    else
      layerNormForwardKernel<T, 1><<<unsigned(rows), threads, 0, stream>>>(
          xt, gt, bt, yt, mt, rt, dim, float(eps));
    checkLaunch("layer_norm_forward");
  });
}

void rms_norm_backward(Rank *rank, DType dt, const void *x, const void *gamma,
                       const void *rstd, const void *dy, void *dx,
                       void *dgammaPerSample, void *y, int64_t batch,
                       int64_t tokens, int64_t dim, bool accumulate) {
  dispatchCompute(dt, "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    checkRows(batch * tokens, "rms_norm_backward");
    normBackward(rank, static_cast<const T *>(x), static_cast<const T *>(gamma),
                 nullptr, static_cast<const float *>(rstd),
                 static_cast<const T *>(dy), static_cast<T *>(dx),
                 static_cast<T *>(y), static_cast<float *>(dgammaPerSample),
                 nullptr, batch, tokens, dim, accumulate, "rms_norm_backward");
  });
}

void layer_norm_backward(Rank *rank, DType dt, const void *x, const void *gamma,
                         const void *mean, const void *rstd, const void *dy,
                         void *dx, void *dgammaPerSample, void *dbetaPerSample,
                         int64_t batch, int64_t tokens, int64_t dim,
                         bool accumulate) {
  dispatchCompute(dt, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    checkRows(batch * tokens, "layer_norm_backward");
    normBackward(rank, static_cast<const T *>(x), static_cast<const T *>(gamma),
                 static_cast<const float *>(mean),
                 static_cast<const float *>(rstd), static_cast<const T *>(dy),
                 static_cast<T *>(dx), static_cast<T *>(nullptr),
                 static_cast<float *>(dgammaPerSample),
                 static_cast<float *>(dbetaPerSample), batch, tokens, dim,
                 accumulate, "layer_norm_backward");
  });
}

} // namespace dprt::cuda

namespace dprt::cuda {

// Backward, then the squared norms of the per-sample gradients it formed.
void rms_norm_backward_norm(Rank *rank, DType dt, const void *x,
                            const void *gamma, const void *rstd, const void *dy,
                            void *dx, void *dgammaPerSample, void *n2, void *y,
                            int64_t batch, int64_t tokens, int64_t dim,
                            bool accumulate) {
  rms_norm_backward(rank, dt, x, gamma, rstd, dy, dx, dgammaPerSample, y, batch,
                    tokens, dim, accumulate);
  norm_rows(rank, accOf(dt), dgammaPerSample, n2, batch, dim);
}

void layer_norm_backward_norm(Rank *rank, DType dt, const void *x,
                              const void *gamma, const void *mean,
                              const void *rstd, const void *dy, void *dx,
                              void *dgammaPerSample, void *dbetaPerSample,
                              void *n2, int64_t batch, int64_t tokens,
                              int64_t dim, bool accumulate) {
  layer_norm_backward(rank, dt, x, gamma, mean, rstd, dy, dx, dgammaPerSample,
                      dbetaPerSample, batch, tokens, dim, accumulate);
  for (void *grads : {dgammaPerSample, dbetaPerSample})
    if (grads)
      norm_rows(rank, accOf(dt), grads, n2, batch, dim);
}

} // namespace dprt::cuda
