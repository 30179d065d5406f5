//===- Losses.cu - Per-sample losses on the GPU ---------------------------===//
//
// Softmax cross-entropy takes one block per row of logits (a 32000-wide
// vocabulary row is read once, with an online max/sum), writes the row's lse
// and token loss, and a second kernel combines each sample's token losses in
// a fixed order. The backward pass rereads the logits once per row.
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"

#include "dprt/kernels.h"

#include <algorithm>
#include <cfloat>

namespace dprt::cuda {

namespace {

__device__ __forceinline__ bool isCounted(int32_t target, bool hasIgnore,
                                          int64_t ignoreIndex) {
  return !(hasIgnore && int64_t(target) == ignoreIndex);
}

/// Vectors a thread of crossEntropyRowKernel loads before it sums them: one
/// at a time, each value's max test and exp on the critical path, the
/// kernel read a T = 8192 step's 500 MiB of logits at 1.5 TB/s (344 us a
/// call on one H200).
constexpr int kCrossEntropyAhead = 4;
/// Threads of a crossEntropyRowKernel block, at most. Its bf16 form takes 48
/// registers: 1024 threads (a 32000-wide row's 4000 vectors, one a thread)
/// left room for one block an SM, idle through each row's two block
/// reductions: 264 to 272 us for 8192 rows on one H200 (1.9 TB/s), 180 us
/// with 128 threads, 183 with 256, 198 with 512 (dpc-gpu-check's timing).
constexpr int kCrossEntropyThreads = 128;

/// Block r: lse[r] = log sum_c exp(logit[r, c]) and tokenLoss[r] =
/// lse - logit[r, target] for a counted token, 0 for an ignored one.
template <class T, int V>
__global__ void crossEntropyRowKernel(const T *logits, const int32_t *targets,
                                      float *lse, float *tokenLoss,
                                      int64_t classes, bool hasIgnore,
                                      int64_t ignoreIndex) {
  __shared__ float buffer[32];
  const int64_t r = blockIdx.x;
  const T *row = logits + r * classes;
  // Online max and sum of exp(v - max), kCrossEntropyAhead vectors at a
  // time: their loads all in flight, then one rescale of the sum for their
  // largest value. -FLT_MAX rather than -inf so that a -inf logit adds
  // exp(-inf) = 0 instead of exp(-inf + inf) = NaN; a vector past the row's
  // end is -inf and adds nothing. A NaN never wins the max and makes the sum
  // NaN; so does a +inf logit (exp(inf - inf)), whose lse one at a time was
  // inf: a non-finite loss either way.
  float m = -FLT_MAX, s = 0.0f;
  const int64_t stride = int64_t(blockDim.x) * V;
  for (int64_t i = int64_t(threadIdx.x) * V; i < classes;
       i += kCrossEntropyAhead * stride) {
    float v[kCrossEntropyAhead][V];
#pragma unroll
    for (int u = 0; u < kCrossEntropyAhead; ++u) {
      if (i + u * stride < classes) {
        loadVec<V>(row + i + u * stride, v[u]);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k)
          v[u][k] = -INFINITY;
      }
    }
    float top = m;
#pragma unroll
    for (int u = 0; u < kCrossEntropyAhead; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k)
        top = v[u][k] > top ? v[u][k] : top;
    s *= expf(m - top);
    m = top;
#pragma unroll
    for (int u = 0; u < kCrossEntropyAhead; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k)
        s += expf(v[u][k] - m);
  }
  const float mx = blockMax(m, buffer);
  const float sum = blockSum(s * expf(m - mx), buffer);
  if (threadIdx.x == 0) {
    const float l = mx + logf(sum);
    lse[r] = l;
    const int32_t t = targets[r];
    float loss = 0.0f;
    if (isCounted(t, hasIgnore, ignoreIndex))
      loss = (t >= 0 && t < classes) ? l - toFloat(row[t])
                                     : __int_as_float(0x7fc00000);
    tokenLoss[r] = loss;
  }
}

/// Block b: loss[b] = mean (or sum) of the token losses of its counted
/// tokens, 0 when none counts.
__global__ void crossEntropySampleKernel(const float *tokenLoss,
                                         const int32_t *targets, float *loss,
                                         int64_t tokens, bool hasIgnore,
                                         int64_t ignoreIndex, bool mean) {
  __shared__ float buffer[32];
  const int64_t b = blockIdx.x;
  float sum = 0.0f, count = 0.0f;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    sum += tokenLoss[b * tokens + t];
    count += isCounted(targets[b * tokens + t], hasIgnore, ignoreIndex);
  }
  sum = blockSum(sum, buffer);
  count = blockSum(count, buffer);
  if (threadIdx.x == 0)
    loss[b] = count == 0.0f ? 0.0f : mean ? sum / count : sum;
}

/// Block b: scale[b] = dloss[b] * w_b, w_b = 1/count (Mean) or 1 (Sum), 0
/// when no token of the sample counts.
__global__ void crossEntropyScaleKernel(const int32_t *targets,
                                        const float *dloss, float *scale,
                                        int64_t tokens, bool hasIgnore,
                                        int64_t ignoreIndex, bool mean) {
  __shared__ float buffer[32];
  const int64_t b = blockIdx.x;
  float count = 0.0f;
  for (int64_t t = threadIdx.x; t < tokens; t += blockDim.x)
    count += isCounted(targets[b * tokens + t], hasIgnore, ignoreIndex);
  count = blockSum(count, buffer);
  if (threadIdx.x == 0)
    scale[b] = count == 0.0f ? 0.0f : dloss[b] * (mean ? 1.0f / count : 1.0f);
}

/// Block r: dlogits[r, c] = scale_b (softmax_c - [c == target]), or 0 for an
/// ignored token.
template <class T, int V>
__global__ void
crossEntropyBackwardKernel(const T *logits, const int32_t *targets,
                           const float *lse, const float *scale, T *dlogits,
                           int64_t tokens, int64_t classes, bool hasIgnore,
                           int64_t ignoreIndex) {
  const int64_t r = blockIdx.x;
  const T *row = logits + r * classes;
  T *out = dlogits + r * classes;
  const int32_t t = targets[r];
  const bool counted = isCounted(t, hasIgnore, ignoreIndex);
  const float sc = scale[r / tokens];
  const float l = lse[r];
  for (int64_t i = int64_t(threadIdx.x) * V; i < classes;
       i += int64_t(blockDim.x) * V) {
    float v[V];
    if (counted) {
      loadVec<V>(row + i, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[k] = sc * (expf(v[k] - l) - (i + k == t ? 1.0f : 0.0f));
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        v[k] = 0.0f;
    }
    storeVec<V>(out + i, v);
  }
}

/// Block b: loss[b] = mean_j (p - t)^2 or the sum.
template <class T>
__global__ void mseForwardKernel(const T *prediction, const T *target,
                                 float *loss, int64_t features, bool mean) {
  __shared__ float buffer[32];
  const int64_t b = blockIdx.x;
  float s = 0.0f;
  for (int64_t j = threadIdx.x; j < features; j += blockDim.x) {
    float d = toFloat(prediction[b * features + j]) -
              toFloat(target[b * features + j]);
    s += d * d;
  }
  s = blockSum(s, buffer);
  if (threadIdx.x == 0)
    loss[b] = mean ? s / float(features) : s;
}

template <class T> struct MseBackwardOp {
  const T *prediction, *target;
  const float *dloss;
  T *dprediction;
  int64_t features;
  float factor; // 2 / features (Mean) or 2 (Sum)
  template <int W> __device__ void apply(int64_t i) const {
    float p[W], t[W];
    loadVec<W>(prediction + i, p);
    loadVec<W>(target + i, t);
#pragma unroll
    for (int k = 0; k < W; ++k)
      p[k] = dloss[(i + k) / features] * factor * (p[k] - t[k]);
    storeVec<W>(dprediction + i, p);
  }
};

void checkRowsAndSamples(int64_t rows, int64_t batch, const char *name) {
  if (rows > int64_t(INT32_MAX) || batch > int64_t(INT32_MAX))
    fail(std::string(name) + ": too many rows for one launch");
}

} // namespace

void cross_entropy_forward(Rank *rank, DType dt, const void *logits,
                           const int32_t *targets, void *loss, void *lse,
                           int64_t batch, int64_t tokens, int64_t classes,
                           bool hasIgnore, int64_t ignoreIndex,
                           Reduction reduction) {
  dispatchCompute(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    int64_t rows = batch * tokens;
    if (batch <= 0)
      return;
    checkRowsAndSamples(rows, batch, "cross_entropy_forward");
    cudaStream_t stream = computeStream(rank);
    auto *tokenLoss = static_cast<float *>(
        scratch(rank, kComputeStream, size_t(rows > 0 ? rows : 1) * 4));
    if (rows > 0) {
      auto *lt = static_cast<const T *>(logits);
      auto *lseF = static_cast<float *>(lse);
      bool vec = classes % kVec<T> == 0 && aligned16(logits);
      int v = vec ? kVec<T> : 1;
      int threads = std::min(rowThreads(classes / v), kCrossEntropyThreads);
      if (vec)
        crossEntropyRowKernel<T, kVec<T>>
            <<<unsigned(rows), threads, 0, stream>>>(
                lt, targets, lseF, tokenLoss, classes, hasIgnore, ignoreIndex);
      else
        crossEntropyRowKernel<T, 1><<<unsigned(rows), threads, 0, stream>>>(
            lt, targets, lseF, tokenLoss, classes, hasIgnore, ignoreIndex);
      checkLaunch("cross_entropy_forward");
    }
    crossEntropySampleKernel<<<unsigned(batch), rowThreads(tokens), 0,
                               stream>>>(
        tokenLoss, targets, static_cast<float *>(loss), tokens, hasIgnore,
        ignoreIndex, reduction == Reduction::Mean);
    checkLaunch("cross_entropy_forward");
  });
}

void cross_entropy_backward(Rank *rank, DType dt, const void *logits,
                            const int32_t *targets, const void *lse,
                            const void *dloss, void *dlogits, int64_t batch,
                            int64_t tokens, int64_t classes, bool hasIgnore,
                            int64_t ignoreIndex, Reduction reduction) {
  dispatchCompute(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    int64_t rows = batch * tokens;
    if (rows <= 0 || classes <= 0)
      return;
    checkRowsAndSamples(rows, batch, "cross_entropy_backward");
    cudaStream_t stream = computeStream(rank);
    auto *scale = static_cast<float *>(
        scratch(rank, kComputeStream, size_t(batch) * sizeof(float)));
    crossEntropyScaleKernel<<<unsigned(batch), rowThreads(tokens), 0, stream>>>(
        targets, static_cast<const float *>(dloss), scale, tokens, hasIgnore,
        ignoreIndex, reduction == Reduction::Mean);
    checkLaunch("cross_entropy_backward");
    auto *lt = static_cast<const T *>(logits);
    auto *out = static_cast<T *>(dlogits);
    auto *lseF = static_cast<const float *>(lse);
    bool vec =
        classes % kVec<T> == 0 && aligned16(logits) && aligned16(dlogits);
    int v = vec ? kVec<T> : 1;
    int threads = rowThreads(classes / v);
    if (vec)
      crossEntropyBackwardKernel<T, kVec<T>>
          <<<unsigned(rows), threads, 0, stream>>>(lt, targets, lseF, scale,
                                                   out, tokens, classes,
                                                   hasIgnore, ignoreIndex);
    else
      crossEntropyBackwardKernel<T, 1><<<unsigned(rows), threads, 0, stream>>>(
          lt, targets, lseF, scale, out, tokens, classes, hasIgnore,
          ignoreIndex);
    checkLaunch("cross_entropy_backward");
  });
}

void mse_forward(Rank *rank, DType dt, const void *prediction,
                 const void *target, void *loss, int64_t batch,
                 int64_t features, Reduction reduction) {
  dispatchCompute(dt, "mse_forward", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0)
      return;
    checkRowsAndSamples(batch, batch, "mse_forward");
    mseForwardKernel<T>
        <<<unsigned(batch), rowThreads(features), 0, computeStream(rank)>>>(
            static_cast<const T *>(prediction), static_cast<const T *>(target),
            static_cast<float *>(loss), features, reduction == Reduction::Mean);
    checkLaunch("mse_forward");
  });
}

void mse_backward(Rank *rank, DType dt, const void *prediction,
                  const void *target, const void *dloss, void *dprediction,
                  int64_t batch, int64_t features, Reduction reduction) {
  dispatchCompute(dt, "mse_backward", [&](auto tag) {
    using T = decltype(tag);
    if (features <= 0)
      return;
    // d/dp of mean (p - t)^2 is 2 (p - t) / features.
    float factor =
        reduction == Reduction::Mean ? float(2.0 / double(features)) : 2.0f;
    MseBackwardOp<T> op{static_cast<const T *>(prediction),
                        static_cast<const T *>(target),
                        static_cast<const float *>(dloss),
                        static_cast<T *>(dprediction),
                        features,
                        factor};
    launchMap<kVec<T>>(rank, kComputeStream, batch * features,
                       aligned16(prediction) && aligned16(target) &&
                           aligned16(dprediction),
                       op, "mse_backward");
  });
}

} // namespace dprt::cuda
