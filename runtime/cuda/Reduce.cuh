//===- Reduce.cuh - Deterministic multi-block reductions -------*- CUDA -*-===//
//
// Internal to runtime/cuda. Two reductions that many kernels share, each in
// two launches so that the work spreads over the GPU without atomics: the
// first writes partial sums to scratch, the second adds them up in a fixed
// order. Results are the same bits on every run.
// - segmentedSum: one f32 total per segment of a flat index space
//   (per-sample squared norms).
// - columnSums: per sample, the sum over its tokens of each column
//   (per-sample gamma/beta/bias gradients).
// Both take an `Op` functor that produces the summand from the indices.
// chunkSumKernel is columnSums' second launch for partials written by a
// kernel of their own (RMSNorm's backward, Normalization.cu).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_REDUCE_CUH
#define DPRT_CUDA_REDUCE_CUH

#include "DeviceMath.cuh"

#include <string>

namespace dprt::cuda {

/// Carves one scratch request into aligned regions.
struct ScratchLayout {
  size_t bytes = 0;
  /// Reserves `size` bytes; returns their offset.
  size_t add(size_t size) {
    size_t offset = bytes;
    bytes += alignUp(size);
    return offset;
  }
};

//===----------------------------------------------------------------------===//
// segmentedSum
//===----------------------------------------------------------------------===//

constexpr int kSegmentThreads = 256;

/// Blocks per segment: each takes at least 16 elements a thread.
inline int64_t segmentParts(int64_t segmentLength) {
  int64_t parts =
      (segmentLength + kSegmentThreads * 16 - 1) / (kSegmentThreads * 16);
  return parts < 1 ? 1 : parts > 256 ? 256 : parts;
}

/// Scratch bytes segmentedSum needs for `segments` segments.
inline size_t segmentScratchBytes(int64_t segments, int64_t segmentLength) {
  return size_t(segments * segmentParts(segmentLength)) * sizeof(float);
}

/// Block (p, s): partials[s * parts + p] = sum of op(s, i) over i in chunk p
/// of segment s. With one part a segment (gridDim.x == 1) the block's sum is
/// the segment's: it goes to out[s] (+)= directly, the bits
/// segmentFinishKernel would store (its other lanes add +0), and no second
/// launch is needed (81 of them a T = 1024 DP step, one a fused per-sample
/// product).
template <class Op>
__global__ void __launch_bounds__(kSegmentThreads)
    segmentPartialKernel(int64_t length, int64_t chunk, Op op,
                         float *partials, float *out, bool accumulate) {
  __shared__ float buffer[32];
  const int64_t s = blockIdx.y;
  const int64_t begin = int64_t(blockIdx.x) * chunk;
  const int64_t end = begin + chunk < length ? begin + chunk : length;
  const int64_t step = blockDim.x;
  // Four independent sums keep four loads in flight.
  float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  int64_t i = begin + threadIdx.x;
  for (; i + 3 * step < end; i += 4 * step) {
    acc0 += op(s, i);
    acc1 += op(s, i + step);
    acc2 += op(s, i + 2 * step);
    acc3 += op(s, i + 3 * step);
  }
  for (; i < end; i += step)
    acc0 += op(s, i);
  float total = blockSum((acc0 + acc1) + (acc2 + acc3), buffer);
  if (threadIdx.x != 0)
    return;
  if (gridDim.x == 1)
    out[s] = accumulate ? out[s] + total : total;
  else
    partials[s * gridDim.x + blockIdx.x] = total;
}

/// One warp per segment: out[s] (+)= sum of its partials. (A template so
/// that every source that launches it has its own copy without relocatable
/// device code.)
template <int kUnused = 0>
__global__ void segmentFinishKernel(const float *partials, int64_t parts,
                                    float *out, bool accumulate) {
  const int64_t s = blockIdx.x;
  float v = 0.0f;
  for (int64_t p = threadIdx.x; p < parts; p += 32)
    v += partials[s * parts + p];
  v = warpSum(v);
  if (threadIdx.x == 0)
    out[s] = accumulate ? out[s] + v : v;
}

/// v[s * length + i].
struct ValueOp {
  const float *v;
  int64_t length;
  __device__ float operator()(int64_t s, int64_t i) const {
    return v[s * length + i];
  }
};

/// out[s] (+)= sum over i < length of op(s, i), for s < segments, on the
/// compute stream; `partials` holds segmentScratchBytes.
template <class Op>
void segmentedSum(Rank *rank, int64_t segments, int64_t length, const Op &op,
                  float *out, bool accumulate, float *partials,
                  const char *name) {
  if (segments <= 0)
    return;
  if (segments > 65535)
    fail(std::string(name) + ": more than 65535 samples in one call");
  cudaStream_t stream = computeStream(rank);
  int64_t parts = segmentParts(length);
  int64_t chunk = (length + parts - 1) / parts;
  segmentPartialKernel<<<dim3(unsigned(parts), unsigned(segments)),
                         kSegmentThreads, 0, stream>>>(length, chunk, op,
                                                       partials, out,
                                                       accumulate);
  checkLaunch(name);
  if (parts == 1)
    return;
  segmentFinishKernel<>
      <<<unsigned(segments), 32, 0, stream>>>(partials, parts, out, accumulate);
  checkLaunch(name);
}

//===----------------------------------------------------------------------===//
// columnSums
//===----------------------------------------------------------------------===//

constexpr int kColumnThreads = 256;
/// Tokens one thread sums before the partial sums are combined.
constexpr int64_t kColumnChunk = 32;

inline int64_t columnChunks(int64_t tokens) {
  return (tokens + kColumnChunk - 1) / kColumnChunk;
}

/// Scratch bytes columnSums needs (none when one chunk covers the tokens).
inline size_t columnScratchBytes(int64_t batch, int64_t tokens, int64_t dim) {
  int64_t chunks = columnChunks(tokens);
  return chunks > 1 ? size_t(batch * chunks * dim) * sizeof(float) : 0;
}

/// Thread (j, chunk c, sample b): partials[(b * chunks + c) * dim + j] = sum
/// over the tokens t of chunk c of op(b * tokens + t, j).
template <class Op>
__global__ void __launch_bounds__(kColumnThreads)
    columnPartialKernel(int64_t tokens, int64_t dim, Op op, float *partials) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= dim)
    return;
  const int64_t c = blockIdx.y, b = blockIdx.z;
  const int64_t t0 = c * kColumnChunk;
  const int64_t t1 = t0 + kColumnChunk < tokens ? t0 + kColumnChunk : tokens;
  const int64_t row0 = b * tokens;
  float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;
  int64_t t = t0;
  for (; t + 3 < t1; t += 4) {
    acc0 += op(row0 + t, j);
    acc1 += op(row0 + t + 1, j);
    acc2 += op(row0 + t + 2, j);
    acc3 += op(row0 + t + 3, j);
  }
  for (; t < t1; ++t)
    acc0 += op(row0 + t, j);
  partials[(b * gridDim.y + c) * dim + j] = (acc0 + acc1) + (acc2 + acc3);
}

/// out[b * dim + j] = sum over chunks c, in order, of the partials.
template <int kUnused = 0>
__global__ void columnFinishKernel(const float *partials, int64_t batch,
                                   int64_t chunks, int64_t dim, float *out) {
  const int64_t n = batch * dim;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / dim, j = i - b * dim;
    const float *p = partials + b * chunks * dim + j;
    float v = 0.0f;
    for (int64_t c = 0; c < chunks; ++c)
      v += p[c * dim];
    out[i] = v;
  }
}

/// columnFinishKernel's sums for many chunks: out[b, j] = sum over chunks c
/// of partials[b, c, j], a block taking 32 columns of one sample and its
/// kWarps warps the chunks c = g, g + kWarps, ... (a warp reads 32
/// consecutive floats), then warp 0 adding the kWarps sums in order. Launch
/// batch * ceil(dim / 32) blocks of 32 kWarps threads (chunkSums).
/// columnFinishKernel's thread a column left most of the GPU idle over
/// RMSNorm's backward's 128 chunks a sample (18 us a call at 8 x 2048;
/// Normalization.cu).
template <int kWarps>
__global__ void chunkSumKernel(const float *partials, int64_t chunks,
                               int64_t dim, float *out) {
  __shared__ float sums[kWarps][33];
  const int64_t tiles = (dim + 31) / 32;
  const int64_t b = blockIdx.x / tiles;
  const int64_t j = (blockIdx.x - b * tiles) * 32 + (threadIdx.x & 31);
  const int g = threadIdx.x >> 5;
  float acc = 0.0f;
  if (j < dim)
    for (int64_t c = g; c < chunks; c += kWarps)
      acc += partials[(b * chunks + c) * dim + j];
  sums[g][threadIdx.x & 31] = acc;
  __syncthreads();
  if (g == 0 && j < dim) {
    float total = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k)
      total += sums[k][threadIdx.x];
    out[b * dim + j] = total;
  }
}

/// out[b, j] = sum over chunks c of partials[b, c, j] on `stream`
/// (chunkSumKernel): 8 warps a block, 32 where the chunks are many (256 or
/// more), so that a sample with few column tiles still keeps the GPU's
/// loads in flight: at 1 x 8192 tokens (1024 chunks of RMSNorm's backward,
/// 64 blocks of 2048 columns) the 8-warp kernel took 9.3 us a call, 4.1 at
/// 8 x 1024 (T = 8192 and 1024 steps on one H200). The warp count is a
/// function of the shape, so the order of the sum is too.
inline void chunkSums(cudaStream_t stream, const float *partials, int64_t batch,
                      int64_t chunks, int64_t dim, float *out) {
  const unsigned blocks = unsigned(batch * ((dim + 31) / 32));
  if (chunks >= 256)
    chunkSumKernel<32><<<blocks, 1024, 0, stream>>>(partials, chunks, dim, out);
  else
    chunkSumKernel<8><<<blocks, 256, 0, stream>>>(partials, chunks, dim, out);
}

/// out[b, j] = sum over the tokens t of sample b of op(b * tokens + t, j),
/// on the compute stream; `partials` holds columnScratchBytes (may be null
/// when that is 0).
template <class Op>
void columnSums(Rank *rank, int64_t batch, int64_t tokens, int64_t dim,
                const Op &op, float *out, float *partials, const char *name) {
  if (batch <= 0 || dim <= 0)
    return;
  cudaStream_t stream = computeStream(rank);
  if (tokens <= 0) {
    checkCuda(
        cudaMemsetAsync(out, 0, size_t(batch * dim) * sizeof(float), stream),
        "cudaMemsetAsync(columnSums)");
    return;
  }
  int64_t chunks = columnChunks(tokens);
  if (batch > 65535 || chunks > 65535)
    fail(std::string(name) + ": too many samples or tokens for one launch");
  dim3 grid(unsigned((dim + kColumnThreads - 1) / kColumnThreads),
            unsigned(chunks), unsigned(batch));
  float *target = chunks > 1 ? partials : out;
  columnPartialKernel<<<grid, kColumnThreads, 0, stream>>>(tokens, dim, op,
                                                           target);
  checkLaunch(name);
  if (chunks > 1) {
    columnFinishKernel<><<<gridFor(rank, batch * dim, 256), 256, 0, stream>>>(
        partials, batch, chunks, dim, out);
    checkLaunch(name);
  }
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_REDUCE_CUH
