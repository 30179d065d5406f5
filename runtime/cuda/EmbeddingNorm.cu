//===- EmbeddingNorm.cu - The embedding table's per-sample norm -----------===//
//
// norm_embedding (kernels.inc): n2[b] += sum_v ||sum_{t: tok_t = v} dy_t||^2,
// the squared norm of sample b's gradient of a token table, whose row v is
// the sum of the output gradients of the positions that hold token v. Sums
// of squares are f32 reductions in a fixed order (Reduce.cuh), as
// PerSampleNorms.cu's.
//
//===----------------------------------------------------------------------===//

#include "Reduce.cuh"

#include "dprt/kernels.h"

#include <string>

namespace dprt::cuda {

namespace {

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
                   int64_t tokens, int64_t dim, float *parts, uint8_t *opens) {
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

} // namespace

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
    groupTokensKernel<<<positions, kGroupPositions * kGroupParts, 0, stream>>>(
        tok, int32_t(tokens), order, start);
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
    runJoinKernel<<<dim3(unsigned((dim + 127) / 128), unsigned(batch)), 128, 0,
                    stream>>>(parts, opens, chunks, dim, squares);
    checkLaunch("norm_embedding");
    segmentedSum(rank, batch, dim, ValueOp{squares, dim},
                 static_cast<float *>(n2), true,
                 reinterpret_cast<float *>(base + segmentAt), "norm_embedding");
  });
}

} // namespace dprt::cuda
