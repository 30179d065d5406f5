//===- PerSampleNorms.cu - Per-sample squared gradient norms on the GPU ---===//
//
// Every kernel ADDS ||grad_b||^2 of one parameter into n2[b] (f32). Sums of
// squares are f32 reductions in a fixed order (Reduce.cuh); the Gram
// matrices and the direct per-sample gradient are cuBLASLt products with f32
// accumulation and an f32 result, never rounded to bf16. On sm_90a (bf16,
// CUTLASS headers) the materialized, direct and Gram norms are summed in the
// epilogue of the product that makes them instead (NormGemms.h), so that
// neither the direct gradient nor the output gradients' Gram matrix is
// written and read back. The embedding table's norm is EmbeddingNorm.cu's.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Mxfp8.cuh"
#include "NormGemms.h"
#include "Reduce.cuh"

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cuda {

namespace {

/// Block b: n2[b] += ||x_b||^2 ||dy_b||^2.
template <class T>
__global__ void normRank1Kernel(const T *x, const T *dy, float *n2, int64_t in,
                                int64_t out) {
  __shared__ float buffer[32];
  const int64_t b = blockIdx.x;
  float sx = 0.0f, sd = 0.0f;
  for (int64_t i = threadIdx.x; i < in; i += blockDim.x) {
    float v = toFloat(x[b * in + i]);
    sx += v * v;
  }
  for (int64_t i = threadIdx.x; i < out; i += blockDim.x) {
    float v = toFloat(dy[b * out + i]);
    sd += v * v;
  }
  sx = blockSum(sx, buffer);
  sd = blockSum(sd, buffer);
  if (threadIdx.x == 0)
    n2[b] += sx * sd;
}

/// a[s * length + i] * b[s * length + i].
struct ProductOp {
  const float *a, *b;
  int64_t length;
  __device__ float operator()(int64_t s, int64_t i) const {
    return a[s * length + i] * b[s * length + i];
  }
};

/// g[s * length + i]^2, squared in f32 (T f32 or bf16).
template <class T> struct SquareOp {
  const T *g;
  int64_t length;
  __device__ float operator()(int64_t s, int64_t i) const {
    float v = toFloat(g[s * length + i]);
    return v * v;
  }
};

/// The sum of the squares of the 16 bytes at vector i of segment s: V = 8
/// bf16 or 4 f32 values, g[(s * vectors + i) * V, + V).
template <class T, int V> struct SquareVecOp {
  const T *g;
  int64_t vectors;
  __device__ float operator()(int64_t s, int64_t i) const {
    float v[V];
    loadVec<V>(g + (s * vectors + i) * V, v);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < V; ++k)
      sum += v[k] * v[k];
    return sum;
  }
};

/// n2[s] += ||g_s||^2 for `segments` rows of `length` elements: 16-byte
/// loads where the rows allow them (materialized slices are read once more
/// here, so the pass runs at the memory's speed), else one element a load.
template <class T>
void rowSquares(Rank *rank, const T *g, float *n2, int64_t segments,
                int64_t length, const char *name) {
  constexpr int V = 16 / sizeof(T);
  if (aligned16(g) && length % V == 0) {
    int64_t vectors = length / V;
    auto *partials = static_cast<float *>(
        scratch(rank, kComputeStream, segmentScratchBytes(segments, vectors)));
    segmentedSum(rank, segments, vectors, SquareVecOp<T, V>{g, vectors}, n2,
                 true, partials, name);
    return;
  }
  auto *partials = static_cast<float *>(
      scratch(rank, kComputeStream, segmentScratchBytes(segments, length)));
  segmentedSum(rank, segments, length, SquareOp<T>{g, length}, n2, true,
               partials, name);
}

/// Term (s, t) of sample b's tied cross term, i = s * tokensEmb + t:
/// 2 dyHead_b[s, tok_bt] M_b[s, t].
template <class T> struct TiedCrossOp {
  const T *dyHead;
  const int32_t *tok;
  const float *m;
  int64_t tokensEmb, tokensHead, vocab;
  __device__ float operator()(int64_t b, int64_t i) const {
    const int64_t s = i / tokensEmb, t = i - s * tokensEmb;
    const float g =
        toFloat(dyHead[(b * tokensHead + s) * vocab + tok[b * tokensEmb + t]]);
    return 2.0f * g * m[b * tokensHead * tokensEmb + i];
  }
};

/// Thread j: ws[tok_t, j] += dyEmb[t, j] for the tokens t of one sample in
/// order (a row that repeats is added to in a fixed order: no atomics).
template <class T>
__global__ void addTokenRowsKernel(const int32_t *tok, const T *dyEmb,
                                   float *ws, int64_t tokens, int64_t dim) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= dim)
    return;
  for (int64_t t = 0; t < tokens; ++t)
    ws[int64_t(tok[t]) * dim + j] += toFloat(dyEmb[t * dim + j]);
}

template <class T> struct DyColumnOp {
  const T *dy;
  int64_t dim;
  __device__ float operator()(int64_t row, int64_t j) const {
    return toFloat(dy[row * dim + j]);
  }
};

/// n2[s] += ||g_s||^2 of `segments` MXFP8 rows of `length` elements (a
/// multiple of 32): one summand a block.
void mxRowSquares(Rank *rank, const void *g, float *n2, int64_t segments,
                  int64_t length, const char *name) {
  if (length % kMxBlock != 0)
    throw std::invalid_argument(std::string(name) + ": MXFP8 rows of " +
                                std::to_string(length) +
                                " elements, not a multiple of 32");
  const int64_t blocks = length / kMxBlock;
  const MxRowsView rows(g, length);
  auto *partials = static_cast<float *>(
      scratch(rank, kComputeStream, segmentScratchBytes(segments, blocks)));
  if (rows.aligned(g, 16))
    segmentedSum(rank, segments, blocks, SquareMxOp<16>{rows}, n2, true,
                 partials, name);
  else
    segmentedSum(rank, segments, blocks, SquareMxOp<1>{rows}, n2, true,
                 partials, name);
}

/// Block k of v [blocks * 32] (f32, 16-byte aligned scratch) into one MXFP8
/// row's elements elems[32 k, + 32) and scales[k], one block a thread.
__global__ void quantizeMxKernel(const float *v, uint8_t *elems,
                                 uint8_t *scales, int64_t blocks) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < blocks;
       k += int64_t(gridDim.x) * blockDim.x) {
    float in[kMxBlock];
#pragma unroll
    for (int q = 0; q < kMxBlock; q += 4)
      loadVec<4>(v + k * kMxBlock + q, *reinterpret_cast<float(*)[4]>(in + q));
    uint8_t out[kMxBlock];
    quantizeMxBlock(in, out, scales + k);
    // Byte stores: a row of the interleaved layout (types.h) starts at any
    // byte. This is the path without the fused product.
#pragma unroll
    for (int q = 0; q < kMxBlock; ++q)
      elems[k * kMxBlock + q] = out[q];
  }
}

} // namespace

void norm_rank1(Rank *rank, DType dt, const void *x, const void *dy, void *n2,
                int64_t batch, int64_t in, int64_t out) {
  dispatchCompute(dt, "norm_rank1", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0)
      return;
    if (batch > INT32_MAX)
      fail("norm_rank1: too many samples");
    normRank1Kernel<T><<<unsigned(batch), 256, 0, computeStream(rank)>>>(
        static_cast<const T *>(x), static_cast<const T *>(dy),
        static_cast<float *>(n2), in, out);
    checkLaunch("norm_rank1");
  });
}

void gram(Rank *rank, DType dt, const void *x, void *K, int64_t batch,
          int64_t tokens, int64_t dim, bool accumulate) {
  requireCompute(dt, "gram");
  // K[b] (+)= X_b X_b^T for all samples in one strided-batched product.
  Gemm g;
  g.ab = dt;
  g.cd = DType::F32;
  g.transB = true;
  g.m = g.n = tokens;
  g.k = dim;
  g.a = g.b = x;
  g.lda = g.ldb = dim;
  g.strideA = g.strideB = tokens * dim;
  g.c = K;
  g.ldc = tokens;
  g.strideC = tokens * tokens;
  g.batch = batch;
  g.beta = accumulate ? 1.0f : 0.0f;
  gemm(rank, g);
}

void gram_dot(Rank *rank, DType acc, const void *Ka, const void *Kg, void *n2,
              int64_t batch, int64_t tokens) {
  requireAcc(acc, "gram_dot");
  // <Ka, Kg>_F = sum_{t,s} (a_t . a_s)(g_t . g_s) = ||G^T A||_F^2.
  int64_t tt = tokens * tokens;
  auto *partials = static_cast<float *>(
      scratch(rank, kComputeStream, segmentScratchBytes(batch, tt)));
  segmentedSum(rank, batch, tt,
               ProductOp{static_cast<const float *>(Ka),
                         static_cast<const float *>(Kg), tt},
               static_cast<float *>(n2), true, partials, "gram_dot");
}

void gram_norm(Rank *rank, DType dt, const void *dy, const void *Ka, void *Kg,
               void *n2, int64_t batch, int64_t tokens, int64_t dim) {
  requireCompute(dt, "gram_norm");
  if (fusedGramNorm(rank, dt, dy, Ka, static_cast<float *>(n2), batch, tokens,
                    dim))
    return;
  gram(rank, dt, dy, Kg, batch, tokens, dim, false);
  gram_dot(rank, accOf(dt), Ka, Kg, n2, batch, tokens);
}

void norm_direct(Rank *rank, DType dt, const void *x, const void *dy, void *n2,
                 int64_t batch, int64_t tokens, int64_t in, int64_t out,
                 void *workspace) {
  requireCompute(dt, "norm_direct");
  if (fusedDirectNorm(rank, dt, x, dy, static_cast<float *>(n2), batch, tokens,
                      in, out))
    return;
  int64_t es = sizeOf(dt);
  auto *partials = static_cast<float *>(
      scratch(rank, kComputeStream, segmentScratchBytes(1, in * out)));
  for (int64_t b = 0; b < batch; ++b) {
    // W_b = dy_b^T x_b [out, in] in the workspace, then its squared norm.
    gemm(rank, weightGradProduct(
                   dt, static_cast<const char *>(dy) + b * tokens * out * es,
                   static_cast<const char *>(x) + b * tokens * in * es,
                   workspace, tokens, in, out));
    segmentedSum(
        rank, 1, in * out,
        SquareOp<float>{static_cast<const float *>(workspace), in * out},
        static_cast<float *>(n2) + b, true, partials, "norm_direct");
  }
}

void norm_bias(Rank *rank, DType dt, const void *dy, void *n2, int64_t batch,
               int64_t tokens, int64_t out) {
  dispatchCompute(dt, "norm_bias", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || out <= 0)
      return;
    // ||sum_t dy_t||^2: per-sample column sums, then their squares.
    ScratchLayout layout;
    size_t sumsAt = layout.add(size_t(batch * out) * sizeof(float));
    size_t columnAt = layout.add(columnScratchBytes(batch, tokens, out));
    size_t segmentAt = layout.add(segmentScratchBytes(batch, out));
    char *base =
        static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
    auto *sums = reinterpret_cast<float *>(base + sumsAt);
    columnSums(rank, batch, tokens, out,
               DyColumnOp<T>{static_cast<const T *>(dy), out}, sums,
               reinterpret_cast<float *>(base + columnAt), "norm_bias");
    segmentedSum(rank, batch, out, SquareOp<float>{sums, out},
                 static_cast<float *>(n2), true,
                 reinterpret_cast<float *>(base + segmentAt), "norm_bias");
  });
}

void norm_position_embedding(Rank *rank, DType dt, const void *dy, void *n2,
                             int64_t batch, int64_t tokens, int64_t dim) {
  dispatchCompute(dt, "norm_position_embedding", [&](auto tag) {
    using T = decltype(tag);
    // Row t < T of sample b's table gradient is dy_bt: ||dy_b||^2.
    int64_t block = tokens * dim;
    auto *partials = static_cast<float *>(
        scratch(rank, kComputeStream, segmentScratchBytes(batch, block)));
    segmentedSum(
        rank, batch, block, SquareOp<T>{static_cast<const T *>(dy), block},
        static_cast<float *>(n2), true, partials, "norm_position_embedding");
  });
}

void norm_tied_cross(Rank *rank, DType dt, const int32_t *tok,
                     const void *dyEmb, const void *x, const void *dyHead,
                     void *n2, int64_t batch, int64_t tokensEmb,
                     int64_t tokensHead, int64_t vocab, int64_t dim,
                     void *workspace) {
  dispatchCompute(dt, "norm_tied_cross", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || tokensEmb <= 0 || tokensHead <= 0)
      return;
    // M_b = X_b DyEmb_b^T [tokensHead, tokensEmb] for all samples in one
    // strided-batched product, in f32.
    Gemm g;
    g.ab = dt;
    g.cd = DType::F32;
    g.transB = true;
    g.m = tokensHead;
    g.n = tokensEmb;
    g.k = dim;
    g.a = x;
    g.lda = dim;
    g.strideA = tokensHead * dim;
    g.b = dyEmb;
    g.ldb = dim;
    g.strideB = tokensEmb * dim;
    g.c = workspace;
    g.ldc = tokensEmb;
    g.strideC = tokensHead * tokensEmb;
    g.batch = batch;
    gemm(rank, g);
    // 2 <E_b, L_b> = sum_{s,t} 2 dyHead_b[s, tok_bt] M_b[s, t].
    int64_t block = tokensHead * tokensEmb;
    auto *partials = static_cast<float *>(
        scratch(rank, kComputeStream, segmentScratchBytes(batch, block)));
    segmentedSum(rank, batch, block,
                 TiedCrossOp<T>{static_cast<const T *>(dyHead), tok,
                                static_cast<const float *>(workspace),
                                tokensEmb, tokensHead, vocab},
                 static_cast<float *>(n2), true, partials, "norm_tied_cross");
  });
}

void norm_tied_direct(Rank *rank, DType dt, const int32_t *tok,
                      const void *dyEmb, const void *x, const void *dyHead,
                      void *n2, int64_t batch, int64_t tokensEmb,
                      int64_t tokensHead, int64_t vocab, int64_t dim,
                      void *workspace) {
  dispatchCompute(dt, "norm_tied_direct", [&](auto tag) {
    using T = decltype(tag);
    int64_t es = sizeOf(dt);
    auto *ws = static_cast<float *>(workspace);
    auto *partials = static_cast<float *>(
        scratch(rank, kComputeStream, segmentScratchBytes(1, vocab * dim)));
    cudaStream_t stream = computeStream(rank);
    for (int64_t b = 0; b < batch; ++b) {
      // The head's L_b = dyHead_b^T x_b [vocab, dim] in the workspace, the
      // embedding's rows added where its tokens are, then the squares.
      gemm(rank,
           weightGradProduct(
               dt,
               static_cast<const char *>(dyHead) + b * tokensHead * vocab * es,
               static_cast<const char *>(x) + b * tokensHead * dim * es,
               workspace, tokensHead, dim, vocab));
      addTokenRowsKernel<T><<<unsigned((dim + 255) / 256), 256, 0, stream>>>(
          tok + b * tokensEmb,
          static_cast<const T *>(dyEmb) + b * tokensEmb * dim, ws, tokensEmb,
          dim);
      checkLaunch("norm_tied_direct");
      segmentedSum(rank, 1, vocab * dim, SquareOp<float>{ws, vocab * dim},
                   static_cast<float *>(n2) + b, true, partials,
                   "norm_tied_direct");
    }
  });
}

void norm_rows(Rank *rank, DType rows, const void *g, void *n2, int64_t batch,
               int64_t dim) {
  if (rows == DType::MXFP8) {
    if (batch > 0 && dim > 0)
      mxRowSquares(rank, g, static_cast<float *>(n2), batch, dim, "norm_rows");
    return;
  }
  dispatchCompute(rows, "norm_rows", [&](auto tag) {
    using T = decltype(tag);
    rowSquares(rank, static_cast<const T *>(g), static_cast<float *>(n2), batch,
               dim, "norm_rows");
  });
}

namespace {

/// linear_per_sample_grad into MXFP8 rows without the fused product: each
/// sample's product in f32 (cuBLASLt) into scratch, quantized block by block
/// from the same f32 values the fused epilogue quantizes, then the norms of
/// what was stored.
void mxPerSampleGradTwoPass(Rank *rank, DType dt, const void *x,
                            const void *dy, void *g, float *n2, int64_t batch,
                            int64_t tokens, int64_t in, int64_t out) {
  const char *name = "linear_per_sample_grad";
  const int64_t dim = out * in, blocks = dim / kMxBlock;
  const int64_t stride = storageBytes(DType::MXFP8, dim);
  auto *rows = static_cast<uint8_t *>(g);
  const size_t es = size_t(sizeOf(dt));
  for (int64_t b = 0; b < batch; ++b) {
    auto *product =
        static_cast<float *>(scratch(rank, kComputeStream, dim * sizeof(float)));
    Gemm p = weightGradProduct(
        dt, static_cast<const char *>(dy) + b * tokens * out * es,
        static_cast<const char *>(x) + b * tokens * in * es, product, tokens,
        in, out);
    gemm(rank, p);
    quantizeMxKernel<<<gridFor(rank, blocks, 256), 256, 0,
                       computeStream(rank)>>>(product, rows + b * stride,
                                              rows + b * stride + dim, blocks);
    checkLaunch(name);
  }
  if (n2)
    mxRowSquares(rank, g, n2, batch, dim, name);
}

} // namespace

void linear_per_sample_grad(Rank *rank, DType dt, DType rows, const void *x,
                            const void *dy, void *g, void *n2, int64_t batch,
                            int64_t tokens, int64_t in, int64_t out) {
  const bool mx = rows == DType::MXFP8;
  if (rows != dt && !(mx && in % kMxBlock == 0))
    throw std::invalid_argument(
        "linear_per_sample_grad: rows are of the compute type, or MXFP8 with "
        "in a multiple of 32");
  dispatchCompute(dt, "linear_per_sample_grad", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || in <= 0 || out <= 0)
      return;
    if (tokens <= 0) {
      // No rows: every per-sample gradient is zero and adds nothing to n2
      // (MXFP8: zero elements under the scale 2^-126 that zero blocks get).
      checkCuda(cudaMemsetAsync(g, 0, size_t(storageBytes(rows, batch * out * in)),
                                computeStream(rank)),
                "linear_per_sample_grad");
      if (mx)
        for (int64_t b = 0; b < batch; ++b)
          checkCuda(cudaMemsetAsync(static_cast<uint8_t *>(g) +
                                        b * storageBytes(rows, out * in) +
                                        out * in,
                                    1, size_t(out * in / kMxBlock),
                                    computeStream(rank)),
                    "linear_per_sample_grad");
      return;
    }
    if (mx) {
      if (!fusedMxPerSampleGrad(rank, dt, x, dy, g, static_cast<float *>(n2),
                                batch, tokens, in, out))
        mxPerSampleGradTwoPass(rank, dt, x, dy, g, static_cast<float *>(n2),
                               batch, tokens, in, out);
      return;
    }
    if (n2 && fusedPerSampleGrad(rank, dt, x, dy, g, static_cast<float *>(n2),
                                 batch, tokens, in, out))
      return;
    // g[b] = dy_b^T x_b [out, in] for every b: one strided-batched product
    // (f32 accumulation, rounded once to the compute type), K = tokens.
    Gemm p = weightGradProduct(dt, dy, x, g, tokens, in, out);
    p.cd = dt;
    p.strideA = tokens * out;
    p.strideB = tokens * in;
    p.strideC = out * in;
    p.batch = batch;
    gemm(rank, p);
    if (!n2)
      return;
    // The norm of the rounded values: the ones rows_weighted_sum adds.
    rowSquares(rank, static_cast<const T *>(g), static_cast<float *>(n2), batch,
               in * out, "linear_per_sample_grad");
  });
}

} // namespace dprt::cuda

namespace dprt::cuda {

// The fused forms run as the two kernels they fuse, in order, on the compute
// stream: the same sums as on the CPU, without the saved pass over dy yet.
void norm_rank1_bias(Rank *rank, DType dt, const void *x, const void *dy,
                     void *n2, int64_t batch, int64_t in, int64_t out) {
  norm_rank1(rank, dt, x, dy, n2, batch, in, out);
  norm_bias(rank, dt, dy, n2, batch, 1, out);
}

void norm_direct_bias(Rank *rank, DType dt, const void *x, const void *dy,
                      void *n2, int64_t batch, int64_t tokens, int64_t in,
                      int64_t out, void *workspace) {
  norm_direct(rank, dt, x, dy, n2, batch, tokens, in, out, workspace);
  norm_bias(rank, dt, dy, n2, batch, tokens, out);
}

} // namespace dprt::cuda
