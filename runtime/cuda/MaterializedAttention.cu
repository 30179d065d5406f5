//===- MaterializedAttention.cu - Attention on materialized scores --------===//
//
// The materialized implementation of attention (AttentionPath.h: f32, head
// sizes other than 64 and 128, misaligned pointers, or
// DPRT_ATTENTION=materialized): the scores of a group of heads in f32
// scratch and strided-batched cuBLASLt GEMMs; Attention.cu's header says
// how, and chooses between it and the cuDNN and fused paths.
//
//===----------------------------------------------------------------------===//

#include "MaterializedAttention.h"

#include "Gemm.h"
#include "Reduce.cuh"

#include "dprt/kernels.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>

namespace dprt::cuda {

namespace {

/// Block (jj * T + t): row t of head jj's scores. P = exp(S - lse) for the
/// keys the row attends to, 0 beyond them; lse of the row goes to
/// lse[jj * lseStride + t].
template <class T>
__global__ void softmaxRowsKernel(const float *S, T *P, float *lse,
                                  int64_t lseStride, int64_t tokens,
                                  bool causal) {
  __shared__ float buffer[32];
  const int64_t row = blockIdx.x;
  const int64_t jj = row / tokens, t = row - jj * tokens;
  const int64_t count = causal ? t + 1 : tokens;
  const float *s = S + row * tokens;
  T *p = P + row * tokens;
  float m = -FLT_MAX, sum = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const float v = s[i];
    if (v > m) {
      sum = sum * expf(m - v) + 1.0f;
      m = v;
    } else {
      sum += expf(v - m);
    }
  }
  const float mx = blockMax(m, buffer);
  const float total = blockSum(sum * expf(m - mx), buffer);
  const float l = mx + logf(total);
  if (threadIdx.x == 0)
    lse[jj * lseStride + t] = l;
  for (int64_t i = threadIdx.x; i < tokens; i += blockDim.x)
    p[i] = fromFloat<T>(i < count ? expf(s[i] - l) : 0.0f);
}

/// Block (jj * T + t): P = exp(S - lse), D = sum_s P dP, dS = P (dP - D),
/// both 0 beyond the attended keys.
template <class T>
__global__ void softmaxBackwardRowsKernel(const float *S, const float *dP,
                                          const float *lse, int64_t lseStride,
                                          T *P, T *dS, int64_t tokens,
                                          bool causal) {
  __shared__ float buffer[32];
  const int64_t row = blockIdx.x;
  const int64_t jj = row / tokens, t = row - jj * tokens;
  const int64_t count = causal ? t + 1 : tokens;
  const float *s = S + row * tokens;
  const float *dp = dP + row * tokens;
  const float l = lse[jj * lseStride + t];
  float d = 0.0f;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    d += expf(s[i] - l) * dp[i];
  d = blockSum(d, buffer);
  T *pr = P + row * tokens;
  T *dsr = dS + row * tokens;
  for (int64_t i = threadIdx.x; i < tokens; i += blockDim.x) {
    float p = 0.0f, ds = 0.0f;
    if (i < count) {
      p = expf(s[i] - l);
      ds = p * (dp[i] - d);
    }
    pr[i] = fromFloat<T>(p);
    dsr[i] = fromFloat<T>(ds);
  }
}

/// Key/value heads whose T x T matrices (bytesPerHead) fit the scratch
/// budget, at least one.
int64_t headsPerChunk(int64_t kvHeads, int64_t bytesPerHead) {
  int64_t budgetMiB = 256;
  if (const char *env = std::getenv("DPRT_ATTENTION_SCRATCH_MB"))
    if (long v = std::strtol(env, nullptr, 10); v > 0)
      budgetMiB = v;
  int64_t fit = (budgetMiB << 20) / bytesPerHead;
  return fit < 1 ? 1 : fit > kvHeads ? kvHeads : fit;
}

/// The strided-batched product over `heads` key/value heads of one (sample,
/// r) pass; strides and leading dimensions in elements.
Gemm headGemm(DType ab, DType cd, bool transA, bool transB, int64_t m,
              int64_t n, int64_t k, const void *a, int64_t lda, int64_t strideA,
              const void *b, int64_t ldb, int64_t strideB, void *c, int64_t ldc,
              int64_t strideC, int64_t heads, float alpha, float beta) {
  Gemm g;
  g.ab = ab;
  g.cd = cd;
  g.transA = transA;
  g.transB = transB;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.strideA = strideA;
  g.b = b;
  g.ldb = ldb;
  g.strideB = strideB;
  g.c = c;
  g.ldc = ldc;
  g.strideC = strideC;
  g.batch = heads;
  g.alpha = alpha;
  g.beta = beta;
  return g;
}

} // namespace

template <class T>
void materializedForward(Rank *rank, DType dt, const AttentionShape &a,
                         const T *q, const T *k, const T *v, T *o, float *lse) {
  const int64_t nt = a.tokens, hd = a.headDim, g = a.group();
  const int64_t tt = nt * nt;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  const int64_t chunk =
      headsPerChunk(a.kvHeads, tt * int64_t(sizeof(float) + sizeof(T)));
  ScratchLayout layout;
  size_t sAt = layout.add(size_t(chunk * tt) * sizeof(float));
  size_t pAt = layout.add(size_t(chunk * tt) * sizeof(T));
  char *base = static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
  auto *S = reinterpret_cast<float *>(base + sAt);
  auto *P = reinterpret_cast<T *>(base + pAt);
  cudaStream_t stream = computeStream(rank);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t j0 = 0; j0 < a.kvHeads; j0 += chunk) {
      const int64_t jn = std::min(chunk, a.kvHeads - j0);
      for (int64_t r = 0; r < g; ++r) {
        const int64_t qo = a.qOffset(b, j0, r), ko = a.kOffset(b, j0);
        // S = scale Q_h K_j^T.
        gemm(rank,
             headGemm(dt, DType::F32, false, true, nt, nt, hd, q + qo, a.ldq(),
                      g * hd, k + ko, a.ldk(), hd, S, nt, tt, jn, scale, 0.0f));
        softmaxRowsKernel<T><<<unsigned(jn * nt), rowThreads(nt), 0, stream>>>(
            S, P, lse + (b * a.heads + j0 * g + r) * nt, g * nt, nt, a.causal);
        checkLaunch("attention_forward");
        // O_h = P V_j.
        gemm(rank,
             headGemm(dt, dt, false, false, nt, hd, nt, P, nt, tt, v + ko,
                      a.ldk(), hd, o + qo, a.ldq(), g * hd, jn, 1.0f, 0.0f));
      }
    }
}

template <class T>
void materializedBackward(Rank *rank, DType dt, const AttentionShape &a,
                          const T *q, const T *k, const T *v, const float *lse,
                          const T *dout, T *dq, T *dk, T *dv) {
  const int64_t nt = a.tokens, hd = a.headDim, g = a.group();
  const int64_t tt = nt * nt;
  const float scale = float(1.0 / std::sqrt(double(hd)));
  const int64_t chunk =
      headsPerChunk(a.kvHeads, tt * int64_t(2 * sizeof(float) + 2 * sizeof(T)));
  const int64_t sampleK = nt * a.ldk();
  ScratchLayout layout;
  size_t sAt = layout.add(size_t(chunk * tt) * sizeof(float));
  size_t dpAt = layout.add(size_t(chunk * tt) * sizeof(float));
  size_t pAt = layout.add(size_t(chunk * tt) * sizeof(T));
  size_t dsAt = layout.add(size_t(chunk * tt) * sizeof(T));
  size_t dkAt = layout.add(size_t(sampleK) * sizeof(float));
  size_t dvAt = layout.add(size_t(sampleK) * sizeof(float));
  char *base = static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
  auto *S = reinterpret_cast<float *>(base + sAt);
  auto *dP = reinterpret_cast<float *>(base + dpAt);
  auto *P = reinterpret_cast<T *>(base + pAt);
  auto *dS = reinterpret_cast<T *>(base + dsAt);
  auto *dkAcc = reinterpret_cast<float *>(base + dkAt);
  auto *dvAcc = reinterpret_cast<float *>(base + dvAt);
  cudaStream_t stream = computeStream(rank);
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t j0 = 0; j0 < a.kvHeads; j0 += chunk) {
      const int64_t jn = std::min(chunk, a.kvHeads - j0);
      for (int64_t r = 0; r < g; ++r) {
        const int64_t qo = a.qOffset(b, j0, r), ko = a.kOffset(b, j0);
        // The first query head of the group writes dK, dV; the others add.
        const float beta = r == 0 ? 0.0f : 1.0f;
        // S = scale Q_h K_j^T;  dP = dO_h V_j^T.
        gemm(rank,
             headGemm(dt, DType::F32, false, true, nt, nt, hd, q + qo, a.ldq(),
                      g * hd, k + ko, a.ldk(), hd, S, nt, tt, jn, scale, 0.0f));
        gemm(rank, headGemm(dt, DType::F32, false, true, nt, nt, hd, dout + qo,
                            a.ldq(), g * hd, v + ko, a.ldk(), hd, dP, nt, tt,
                            jn, 1.0f, 0.0f));
        softmaxBackwardRowsKernel<T>
            <<<unsigned(jn * nt), rowThreads(nt), 0, stream>>>(
                S, dP, lse + (b * a.heads + j0 * g + r) * nt, g * nt, P, dS, nt,
                a.causal);
        checkLaunch("attention_backward");
        // dV_j += P^T dO_h.
        gemm(rank, headGemm(dt, DType::F32, true, false, nt, hd, nt, P, nt, tt,
                            dout + qo, a.ldq(), g * hd, dvAcc + j0 * hd,
                            a.ldk(), hd, jn, 1.0f, beta));
        // dQ_h = scale dS K_j.
        gemm(rank,
             headGemm(dt, dt, false, false, nt, hd, nt, dS, nt, tt, k + ko,
                      a.ldk(), hd, dq + qo, a.ldq(), g * hd, jn, scale, 0.0f));
        // dK_j += scale dS^T Q_h.
        gemm(rank, headGemm(dt, DType::F32, true, false, nt, hd, nt, dS, nt, tt,
                            q + qo, a.ldq(), g * hd, dkAcc + j0 * hd, a.ldk(),
                            hd, jn, scale, beta));
      }
    }
    cast(rank, DType::F32, dkAcc, dt, dk + b * sampleK, sampleK);
    cast(rank, DType::F32, dvAcc, dt, dv + b * sampleK, sampleK);
  }
}

template void materializedForward<float>(Rank *, DType, const AttentionShape &,
                                         const float *, const float *,
                                         const float *, float *, float *);
template void materializedForward<bf16>(Rank *, DType, const AttentionShape &,
                                        const bf16 *, const bf16 *,
                                        const bf16 *, bf16 *, float *);
template void materializedBackward<float>(Rank *, DType, const AttentionShape &,
                                          const float *, const float *,
                                          const float *, const float *,
                                          const float *, float *, float *,
                                          float *);
template void materializedBackward<bf16>(Rank *, DType, const AttentionShape &,
                                         const bf16 *, const bf16 *,
                                         const bf16 *, const float *,
                                         const bf16 *, bf16 *, bf16 *, bf16 *);

} // namespace dprt::cuda
