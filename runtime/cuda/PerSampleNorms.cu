//===- PerSampleNorms.cu - Per-sample squared gradient norms on the GPU ---===//
//
// Every kernel ADDS ||grad_b||^2 of one parameter into n2[b] (f32). Sums of
// squares are f32 reductions in a fixed order (Reduce.cuh); the Gram
// matrices and the direct per-sample gradient are cuBLASLt products with f32
// accumulation and an f32 result, never rounded to bf16. On sm_90a (bf16,
// CUTLASS headers) the materialized, direct and Gram norms are summed in the
// epilogue of the product that makes them instead (NormGemms.h), so that
// neither the direct gradient nor the output gradients' Gram matrix is
// written and read back.
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

// The embedding's per-sample norm, sum_v ||sum_{t: tok_t = v} dy_t||^2, in
// three steps: each sample's positions sorted by token (groupTokensKernel),
// the sorted rows' run sums in chunks of positions (runPartsKernel), the
// chunks joined column by column (runJoinKernel). Every step has work for
// the whole GPU at one sample of 8192 tokens as at 8 of 1024: a thread per
// sample's column walking all its positions (the kernel before) kept 8 of
// 132 multiprocessors busy at b = 1 and took 1.2 ms a step at T = 8192, 2.0
// with its grouping passes (now 0.1 ms in all, one H200).

/// Positions a block of groupTokensKernel ranks; each has kGroupParts
/// threads that count over a part of every tile of the sample's tokens.
constexpr int kGroupPositions = 64;
constexpr int kGroupParts = 4;
constexpr int kGroupTile = 1024;

/// Block (x, b), thread (i, q): position t = 64 x + i of sample b goes to
/// p = #{u : tok_u < tok_t} + #{u < t : tok_u = tok_t} (a stable counting
/// sort by token: O(T) integer work a position, from shared memory):
/// order[b, p] = t, start[b, p] = whether t is its token's first position.
/// Runs of equal tokens come out ordered by token, positions ascending.
__global__ void __launch_bounds__(kGroupPositions *kGroupParts)
    groupTokensKernel(const int32_t *tok, int32_t tokens, int32_t *order,
                      uint8_t *start) {
  __shared__ int4 tile[kGroupTile / 4];
  __shared__ int32_t counts[2][kGroupParts][kGroupPositions];
  const int i = threadIdx.x % kGroupPositions;
  const int q = threadIdx.x / kGroupPositions;
  const int64_t b = blockIdx.y;
  const int32_t t = int32_t(blockIdx.x) * kGroupPositions + i;
  const int32_t *tb = tok + b * tokens;
  const int32_t mine = t < tokens ? tb[t] : 0;
  auto *tileTokens = reinterpret_cast<int32_t *>(tile);
  constexpr int kPart = kGroupTile / 4 / kGroupParts; // int4s of a part
  int32_t less = 0, before = 0;
  for (int64_t base = 0; base < tokens; base += kGroupTile) {
    __syncthreads();
    // Past the last token, INT32_MAX: never less, and its position
    // (>= tokens > t) never before.
    for (int k = threadIdx.x; k < kGroupTile; k += blockDim.x)
      tileTokens[k] = base + k < tokens ? tb[base + k] : INT32_MAX;
    __syncthreads();
    // A warp's threads share q: every load is a broadcast.
#pragma unroll 4
    for (int k = q * kPart; k < (q + 1) * kPart; ++k) {
      const int4 v = tile[k];
      const int32_t u = int32_t(base) + 4 * k;
      less += (v.x < mine) + (v.y < mine) + (v.z < mine) + (v.w < mine);
      before += (v.x == mine && u < t) + (v.y == mine && u + 1 < t) +
                (v.z == mine && u + 2 < t) + (v.w == mine && u + 3 < t);
    }
  }
  counts[0][q][i] = less;
  counts[1][q][i] = before;
  __syncthreads();
  if (q != 0 || t >= tokens)
    return;
  for (int r = 1; r < kGroupParts; ++r) {
    less += counts[0][r][i];
    before += counts[1][r][i];
  }
  const int64_t p = b * tokens + less + before;
  order[p] = t;
  start[p] = before == 0;
}

/// Sorted positions a block of runPartsKernel sums, and its threads.
constexpr int kRunChunk = 64;
constexpr int kRunThreads = 128;

/// Block (x, c, b), thread i, over columns [V (128 x + i), + V) of sample
/// b's sorted positions [64 c, + 64) (rows of dy through `order`):
///   parts[b, c, 0] = the sum of the positions before the chunk's first run
///     start (the end of a run begun in an earlier chunk; all of the chunk's
///     positions if no run starts in it),
///   parts[b, c, 1] = the sum of squares of the runs that start and end in
///     the chunk,
///   parts[b, c, 2] = the sum of the chunk's positions of its last run that
///     starts in it (0 if none does);
/// opens[b, c] = whether a run starts in the chunk. The run starts are the
/// same for the whole block: its branches do not diverge.
template <class T, int V>
__global__ void __launch_bounds__(kRunThreads)
    runPartsKernel(const T *dy, const int32_t *order, const uint8_t *start,
                   int64_t tokens, int64_t dim, float *parts,
                   uint8_t *opens) {
  __shared__ int32_t rows[kRunChunk];
  __shared__ uint8_t starts[kRunChunk];
  const int64_t b = blockIdx.z, c = blockIdx.y;
  const int64_t first = c * kRunChunk;
  const int n = int(tokens - first < kRunChunk ? tokens - first : kRunChunk);
  if (threadIdx.x < n) {
    rows[threadIdx.x] = order[b * tokens + first + threadIdx.x];
    starts[threadIdx.x] = start[b * tokens + first + threadIdx.x];
  }
  __syncthreads();
  const int64_t j = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * V;
  if (j >= dim)
    return;
  const T *dyb = dy + b * tokens * dim + j;
  float head[V] = {}, inner[V] = {}, run[V] = {};
  bool seen = false;
  // Sixteen rows' loads in flight before they are summed, in order: at
  // two or three blocks a multiprocessor, each thread must keep many.
  constexpr int kAhead = 16;
  for (int p = 0; p < n; p += kAhead) {
    float v[kAhead][V];
#pragma unroll
    for (int k = 0; k < kAhead; ++k)
      if (p + k < n)
        loadVec<V>(dyb + int64_t(rows[p + k]) * dim, v[k]);
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      if (p + k >= n)
        break;
      if (starts[p + k]) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          if (seen)
            inner[e] += run[e] * run[e];
          else
            head[e] = run[e];
          run[e] = 0.0f;
        }
        seen = true;
      }
#pragma unroll
      for (int e = 0; e < V; ++e)
        run[e] += v[k][e];
    }
  }
  float tail[V] = {};
  if (seen) {
#pragma unroll
    for (int e = 0; e < V; ++e)
      tail[e] = run[e];
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e)
      head[e] = run[e];
  }
  const int64_t chunks = gridDim.y;
  float *out = parts + (b * chunks + c) * 3 * dim + j;
  storeVec<V>(out, head);
  storeVec<V>(out + dim, inner);
  storeVec<V>(out + 2 * dim, tail);
  if (j == 0)
    opens[b * chunks + c] = seen;
}

/// Thread (j, b): squares[b, j] = sum over sample b's runs of (the run's
/// sum of column j)^2, from the chunks' parts joined in order: a run that
/// goes on past its chunk gathers the heads of the chunks after it until
/// one opens a run of its own.
__global__ void runJoinKernel(const float *parts, const uint8_t *opens,
                              int64_t chunks, int64_t dim, float *squares) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= dim)
    return;
  const int64_t b = blockIdx.y;
  const float *pb = parts + b * chunks * 3 * dim + j;
  const uint8_t *ob = opens + b * chunks;
  float total = 0.0f, open = 0.0f;
  // Loads that do not wait for the branch: eight chunks' in flight.
#pragma unroll 8
  for (int64_t c = 0; c < chunks; ++c) {
    const float *pc = pb + c * 3 * dim;
    const float head = pc[0], inner = pc[dim], tail = pc[2 * dim];
    open += head;
    if (ob[c]) {
      total += open * open;
      total += inner;
      open = tail;
    }
  }
  squares[b * dim + j] = total + open * open;
}

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

void norm_embedding(Rank *rank, DType dt, const int32_t *tok, const void *dy,
                    void *n2, int64_t batch, int64_t tokens, int64_t dim) {
  dispatchCompute(dt, "norm_embedding", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || tokens <= 0 || dim <= 0)
      return;
    // The grids' y and z hold samples and chunks (at most 65535 each); the
    // sort counts positions in 32 bits.
    if (batch > 65535 || tokens > 65535 * int64_t(kRunChunk))
      fail("norm_embedding: " + std::to_string(batch) + " samples of " +
           std::to_string(tokens) +
           " tokens: more than one launch takes (65535 samples of " +
           std::to_string(65535 * int64_t(kRunChunk)) + " tokens)");
    // sum_v ||sum_{t: tok_t = v} dy_t||^2: sort each sample's positions by
    // token, sum the runs of equal tokens in chunks of positions, join the
    // chunks column by column, add up the columns (kernels above).
    const int64_t chunks = (tokens + kRunChunk - 1) / kRunChunk;
    ScratchLayout layout;
    size_t orderAt = layout.add(size_t(batch * tokens) * sizeof(int32_t));
    size_t startAt = layout.add(size_t(batch * tokens));
    size_t partsAt =
        layout.add(size_t(batch * chunks * 3 * dim) * sizeof(float));
    size_t opensAt = layout.add(size_t(batch * chunks));
    size_t squaresAt = layout.add(size_t(batch * dim) * sizeof(float));
    size_t segmentAt = layout.add(segmentScratchBytes(batch, dim));
    char *base =
        static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
    auto *order = reinterpret_cast<int32_t *>(base + orderAt);
    auto *start = reinterpret_cast<uint8_t *>(base + startAt);
    auto *parts = reinterpret_cast<float *>(base + partsAt);
    auto *opens = reinterpret_cast<uint8_t *>(base + opensAt);
    auto *squares = reinterpret_cast<float *>(base + squaresAt);
    cudaStream_t stream = computeStream(rank);
    dim3 positions(unsigned((tokens + kGroupPositions - 1) / kGroupPositions),
                   unsigned(batch));
    groupTokensKernel<<<positions, kGroupPositions * kGroupParts, 0,
                        stream>>>(tok, int32_t(tokens), order, start);
    checkLaunch("norm_embedding");
    const auto *dyt = static_cast<const T *>(dy);
    auto runParts = [&](auto kernel, int v) {
      const int64_t columns = (dim + v - 1) / v;
      dim3 grid(unsigned((columns + kRunThreads - 1) / kRunThreads),
                unsigned(chunks), unsigned(batch));
      kernel<<<grid, kRunThreads, 0, stream>>>(dyt, order, start, tokens, dim,
                                               parts, opens);
    };
    if (dim % kVec<T> == 0 && aligned16(dy))
      runParts(runPartsKernel<T, kVec<T>>, kVec<T>);
    else
      runParts(runPartsKernel<T, 1>, 1);
    checkLaunch("norm_embedding");
    // Small blocks: at one sample, 2048 columns are 16 blocks' threads.
    runJoinKernel<<<dim3(unsigned((dim + 127) / 128), unsigned(batch)), 128,
                    0, stream>>>(parts, opens, chunks, dim, squares);
    checkLaunch("norm_embedding");
    segmentedSum(rank, batch, dim, ValueOp{squares, dim},
                 static_cast<float *>(n2), true,
                 reinterpret_cast<float *>(base + segmentAt), "norm_embedding");
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
