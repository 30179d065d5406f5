//===- FlashAttention.h - The fused attention's block programs --*- C++ -*-===//
//
// The fused (FlashAttention-2 style) bf16 attention of the CUDA backend,
// written once for two machines: Attention.cu runs these programs as CUDA
// kernels, and test/unit/kernels runs the very same source on the host in an
// emulation of thread blocks (SimtEmulator.h), so that index arithmetic,
// masks, the pipeline and the fragment layouts are checked against the CPU
// backend where no GPU is present. Nothing here includes a CUDA header: the
// machine operations come from `Ops` (barriers, asynchronous copies,
// ldmatrix, mma.sync m16n8k16, shuffles, exp2), which Attention.cu
// implements with inline PTX and the emulator in C++.
//
// Layouts (kernels.inc): q, o, dq [batch*tokens, heads*headDim]; k, v, dk, dv
// [batch*tokens, kvHeads*headDim]; query head h reads key/value head
// h / group; lse [batch, heads, tokens]. bf16 is carried as its 16 bits.
//
// Each block has 4 warps; a warp owns 16 rows of every product (one m16 tile)
// and all of its columns, so no reduction ever crosses warps.
//   forward      block (query block i, head, sample): for the key blocks j
//                the rows attend to, S = Q K_j^T, online softmax in exp2
//                units (scores times log2(e)/sqrt(headDim)), O += P V_j; then
//                O / l and lse = ln2 (m + log2 l).
//   row stats    per (row, head): lse2 = lse log2(e) and D = rowsum(dO o O).
//   dQ           block (query block i, head, sample): for the same key
//                blocks, P = exp2(S' - lse2), dP = dO V_j^T, dS = P (dP - D),
//                dQ += dS K_j.
//   dK, dV       block (key block j, key/value head, sample): for every query
//                head of the group and every query block that attends to j,
//                in that order, the transposed products S^T = K Q^T and
//                dP^T = V dO^T, then dV += P^T dO and dK += dS^T Q.
// Every sum runs in a fixed order in f32 registers: the results are
// deterministic. dK and dQ are scaled by 1/sqrt(headDim) once, at the end.
//
// K/V (forward, dQ) and Q/dO/row stats (dK, dV) tiles are double-buffered
// in shared memory with cp.async: step n issues the copies of step n + 1,
// waits for those of step n (cp.async.wait_group 1) and a barrier, computes,
// and a second barrier lets the next step overwrite the buffer. Shared rows
// are padded by 8 elements (16 bytes), which makes ldmatrix conflict-free.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_FLASHATTENTION_H
#define DPRT_CUDA_FLASHATTENTION_H

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DPRT_FLASH_HD __host__ __device__ __forceinline__
#define DPRT_FLASH_DEVICE __device__ __forceinline__
#define DPRT_FLASH_UNROLL _Pragma("unroll")
#else
#define DPRT_FLASH_HD inline
#define DPRT_FLASH_DEVICE inline
#define DPRT_FLASH_UNROLL
#endif

namespace dprt::cuda::flash {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

//===----------------------------------------------------------------------===//
// Problem
//===----------------------------------------------------------------------===//

struct Dims {
  int batch, tokens, heads, kvHeads;
  int group;   ///< heads / kvHeads
  int64_t ldq; ///< heads * headDim: row stride of q, o, dout, dq
  int64_t ldk; ///< kvHeads * headDim: row stride of k, v, dk, dv
  bool causal;
  float scaleLog2; ///< log2(e) / sqrt(headDim)
  float scale;     ///< 1 / sqrt(headDim)
};

/// The dimensions of a call (host code; checked by the caller: heads a
/// multiple of kvHeads, sizes within int).
inline Dims makeDims(int64_t batch, int64_t tokens, int64_t heads,
                     int64_t kvHeads, int64_t headDim, bool causal) {
  Dims d{};
  d.batch = int(batch);
  d.tokens = int(tokens);
  d.heads = int(heads);
  d.kvHeads = int(kvHeads);
  d.group = int(heads / kvHeads);
  d.ldq = heads * headDim;
  d.ldk = kvHeads * headDim;
  d.causal = causal;
  const double scale = 1.0 / std::sqrt(double(headDim));
  d.scale = float(scale);
  d.scaleLog2 = float(scale * 1.4426950408889634);
  return d;
}

/// Pointers of one call; bf16 tensors as their bits. The forward writes o and
/// lse; the backward reads them, writes lse2 and delta (scratch, [batch,
/// heads, tokens] like lse) in the row-stats pass and dq, dk, dv after it.
struct Problem {
  Dims dims;
  const uint16_t *q, *k, *v;
  uint16_t *o;
  float *lse;
  const uint16_t *dout;
  float *lse2, *delta;
  uint16_t *dq, *dk, *dv;
};

//===----------------------------------------------------------------------===//
// Tile geometry (shared by the kernels, their launches and the tests)
//===----------------------------------------------------------------------===//

constexpr int kWarpSize = 32;
/// Padding of a shared-memory row, in elements: 16 bytes, so that the 8 rows
/// an ldmatrix phase reads fall on 8 different groups of 4 banks.
constexpr int kPad = 8;
template <int HD> constexpr int kSmemRow = HD + kPad;

template <int HD> struct ForwardTiles {
  static constexpr int kWarps = 4, kThreads = kWarps * kWarpSize;
  static constexpr int kBlockM = 16 * kWarps; ///< query rows, 16 a warp
  static constexpr int kBlockN = 64;          ///< keys a step
  static constexpr int kMinBlocks = HD <= 64 ? 3 : 2;
  /// Q, then two stages of K, then two of V.
  static constexpr size_t kSmemBytes =
      size_t(kBlockM + 4 * kBlockN) * kSmemRow<HD> * 2;
};

template <int HD> struct QueryGradTiles {
  static constexpr int kWarps = 4, kThreads = kWarps * kWarpSize;
  static constexpr int kBlockM = 16 * kWarps; ///< query rows, 16 a warp
  static constexpr int kBlockN = 64;          ///< keys a step
  static constexpr int kMinBlocks = 2;
  /// Q, dO, then two stages of K, then two of V.
  static constexpr size_t kSmemBytes =
      size_t(2 * kBlockM + 4 * kBlockN) * kSmemRow<HD> * 2;
};

template <int HD> struct KeyValueGradTiles {
  static constexpr int kWarps = 4, kThreads = kWarps * kWarpSize;
  static constexpr int kBlockN = 16 * kWarps;        ///< keys, 16 a warp
  static constexpr int kBlockM = HD <= 64 ? 64 : 32; ///< query rows a step
  static constexpr int kMinBlocks = 2;
  /// K, V, then two stages of Q, two of dO, and two of (lse2, D) rows.
  static constexpr size_t kSmemBytes =
      size_t(2 * kBlockN + 4 * kBlockM) * kSmemRow<HD> * 2 +
      size_t(4 * kBlockM) * sizeof(float);
};

struct GridShape {
  int x, y, z;
};

DPRT_FLASH_HD int ceilDiv(int a, int b) { return (a + b - 1) / b; }

/// Whether query t attends to key s.
DPRT_FLASH_HD bool attends(int t, int s, int tokens, bool causal) {
  return t < tokens && s < tokens && (!causal || s <= t);
}

/// The key blocks [0, end) of `bn` keys that query block i (rows [i bm,
/// i bm + bm)) attends to: all of them, or with `causal` those that start at
/// or before its last row.
DPRT_FLASH_HD int keyBlockEnd(int i, int bm, int bn, int tokens, bool causal) {
  if (!causal)
    return ceilDiv(tokens, bn);
  const int last = ((i + 1) * bm < tokens ? (i + 1) * bm : tokens) - 1;
  return last / bn + 1;
}

/// The first query block of `bm` rows that attends to key block j: 0, or
/// with `causal` the block holding row j bn (earlier rows precede every key
/// of block j).
DPRT_FLASH_HD int queryBlockBegin(int j, int bm, int bn, bool causal) {
  return causal ? j * bn / bm : 0;
}

/// Whether some (query, key) pair of tile (i, j) does not attend: a block
/// that runs past the last token, or with `causal` a key block that reaches
/// past the query block's first row. Other tiles skip the mask.
DPRT_FLASH_HD bool tileNeedsMask(int i, int j, int bm, int bn, int tokens,
                                 bool causal) {
  if ((i + 1) * bm > tokens || (j + 1) * bn > tokens)
    return true;
  return causal && (j + 1) * bn - 1 > i * bm;
}

/// The running maximum m of a row, or 0 while every score so far is masked
/// (m = -inf): what the row's scores are shifted by before exp2, so that a
/// masked score gives exp2(-inf) = 0 and -inf - -inf never appears.
DPRT_FLASH_HD float rowOffset(float m) { return m == -INFINITY ? 0.0f : m; }

DPRT_FLASH_HD GridShape forwardGrid(const Dims &d) {
  return {ceilDiv(d.tokens, ForwardTiles<64>::kBlockM), d.heads, d.batch};
}
DPRT_FLASH_HD GridShape queryGradGrid(const Dims &d) {
  return {ceilDiv(d.tokens, QueryGradTiles<64>::kBlockM), d.heads, d.batch};
}
DPRT_FLASH_HD GridShape keyValueGradGrid(const Dims &d) {
  return {ceilDiv(d.tokens, KeyValueGradTiles<64>::kBlockN), d.kvHeads,
          d.batch};
}
static_assert(ForwardTiles<64>::kBlockM == ForwardTiles<128>::kBlockM &&
                  QueryGradTiles<64>::kBlockM == QueryGradTiles<128>::kBlockM &&
                  KeyValueGradTiles<64>::kBlockN ==
                      KeyValueGradTiles<128>::kBlockN,
              "the grids do not depend on the head size");

//===----------------------------------------------------------------------===//
// Fragment layouts of mma.sync.m16n8k16 and ldmatrix.x4 (PTX ISA)
//===----------------------------------------------------------------------===//

/// Row (of 16) and column (of 8) of element e (0..3) of an m16n8 f32
/// accumulator held by `lane`: c0, c1 in row lane/4 and c2, c3 in row
/// lane/4 + 8, at columns 2 (lane % 4) and 2 (lane % 4) + 1.
DPRT_FLASH_HD int accRow(int lane, int e) {
  return (lane >> 2) + ((e >> 1) << 3);
}
DPRT_FLASH_HD int accCol(int lane, int e) {
  return ((lane & 3) << 1) + (e & 1);
}

/// The row and column offset (within a 16 x 16 block of a row-major tile)
/// of the 16-byte row that `lane` hands to ldmatrix.x4 for an A operand:
/// matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15),
/// i.e. a0..a3 of mma's A fragment. The same addresses with .trans give, from
/// a tile whose rows are the k index, the B fragments (b0, b1) of the n-tiles
/// at columns 0-7 and 8-15.
DPRT_FLASH_HD int ldsmRowA(int lane) { return (lane & 7) + (lane & 8); }
DPRT_FLASH_HD int ldsmColA(int lane) { return (lane & 16) >> 1; }

/// The same for B operands from a tile whose rows are the n index (K for
/// S = Q K^T): matrices (rows 0-7, cols 0-7), (0-7, 8-15), (8-15, 0-7),
/// (8-15, 8-15), i.e. b0, b1 of the n-tile at rows 0-7, then of rows 8-15.
DPRT_FLASH_HD int ldsmRowB(int lane) { return (lane & 7) + ((lane & 16) >> 1); }
DPRT_FLASH_HD int ldsmColB(int lane) { return lane & 8; }

//===----------------------------------------------------------------------===//
// Building blocks of the block programs
//===----------------------------------------------------------------------===//

/// Copies rows [0, ROWS) of a row-major bf16 tile of width HD (row stride
/// `ld` elements) into shared memory, row stride kSmemRow<HD>; rows from
/// `rowsValid` on are zero-filled. Every thread of the block takes part. The
/// source of a zero-filled row is the first row, which every caller has.
template <int ROWS, int HD, int THREADS, class Ops>
DPRT_FLASH_DEVICE void loadRows(Ops &ops, uint16_t *dst, const uint16_t *src,
                                int64_t ld, int rowsValid, int tid) {
  constexpr int kChunksPerRow = HD / 8, kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % THREADS == 0, "whole 16-byte chunks per thread");
  DPRT_FLASH_UNROLL
  for (int n = 0; n < kChunks / THREADS; ++n) {
    const int c = tid + n * THREADS;
    const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool valid = row < rowsValid;
    ops.cpAsync16(dst + row * kSmemRow<HD> + col,
                  src + (valid ? int64_t(row) * ld + col : 0), valid);
  }
}

/// Copies lse2 and D of ROWS query rows into dst[0, ROWS) and
/// dst[ROWS, 2 ROWS); rows from `rowsValid` on are zero-filled.
template <int ROWS, int THREADS, class Ops>
DPRT_FLASH_DEVICE void loadRowStats(Ops &ops, float *dst, const float *lse2,
                                    const float *delta, int rowsValid,
                                    int tid) {
  static_assert(2 * ROWS <= THREADS, "one value per thread");
  if (tid < 2 * ROWS) {
    const int row = tid % ROWS;
    const bool valid = row < rowsValid;
    ops.cpAsync4(dst + tid, (tid < ROWS ? lse2 : delta) + (valid ? row : 0),
                 valid);
  }
}

/// acc[n] += A B_n for the NT8 n-tiles of a 16 x (8 NT8) product over K
/// (multiple of 16): A from the warp's 16 rows of `a` (row-major, row stride
/// kSmemRow), B_n^T from rows 8n.. of `b` (the n index runs along b's rows,
/// as K's keys in Q K^T). The A fragment of each k-step is loaded once.
template <int K, int NT8, int LD, class Ops>
DPRT_FLASH_DEVICE void productABt(Ops &ops, float (&acc)[NT8][4],
                                  const uint16_t *a, const uint16_t *b,
                                  int lane) {
  static_assert(K % 16 == 0 && NT8 % 2 == 0, "whole 16 x 16 blocks");
  DPRT_FLASH_UNROLL
  for (int kk = 0; kk < K / 16; ++kk) {
    uint32_t af[4];
    ops.ldsm(af, a + ldsmRowA(lane) * LD + kk * 16 + ldsmColA(lane));
    DPRT_FLASH_UNROLL
    for (int np = 0; np < NT8 / 2; ++np) {
      uint32_t bf[4];
      ops.ldsm(bf,
               b + (np * 16 + ldsmRowB(lane)) * LD + kk * 16 + ldsmColB(lane));
      ops.mma(acc[2 * np], af, bf[0], bf[1]);
      ops.mma(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

/// The A fragment (16 x 16, bf16) of k-step kk made from two f32
/// accumulator n-tiles 2 kk and 2 kk + 1 of a 16-row product: an
/// accumulator's c0, c1 / c2, c3 sit where the A fragment wants a0 / a1 of
/// its first 8 columns and a2 / a3 of its second.
template <int NT8, class Ops>
DPRT_FLASH_DEVICE void accumulatorAsA(Ops &ops, uint32_t (&a)[4],
                                      const float (&acc)[NT8][4], int kk) {
  a[0] = ops.packBf16(acc[2 * kk][0], acc[2 * kk][1]);
  a[1] = ops.packBf16(acc[2 * kk][2], acc[2 * kk][3]);
  a[2] = ops.packBf16(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
  a[3] = ops.packBf16(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
}

/// acc[n] += A_kk B for k-step kk with B (16 x HD) from rows 16 kk.. of `b`
/// (the k index runs along b's rows, as V's keys in P V), loaded transposed.
template <int HD, int LD, class Ops>
DPRT_FLASH_DEVICE void productAB(Ops &ops, float (&acc)[HD / 8][4],
                                 const uint32_t (&a)[4], const uint16_t *b,
                                 int kk, int lane) {
  DPRT_FLASH_UNROLL
  for (int dp = 0; dp < HD / 16; ++dp) {
    uint32_t bf[4];
    ops.ldsmTrans(bf, b + (kk * 16 + ldsmRowA(lane)) * LD + dp * 16 +
                          ldsmColA(lane));
    ops.mma(acc[2 * dp], a, bf[0], bf[1]);
    ops.mma(acc[2 * dp + 1], a, bf[2], bf[3]);
  }
}

/// Stores row `half` (0: rows lane/4, 1: lane/4 + 8) of a 16 x HD f32
/// accumulator times `factor` as bf16 to `row` (the row's first element).
template <int HD, class Ops>
DPRT_FLASH_DEVICE void storeRow(Ops &ops, uint16_t *row,
                                const float (&acc)[HD / 8][4], int half,
                                float factor, int lane) {
  DPRT_FLASH_UNROLL
  for (int n = 0; n < HD / 8; ++n)
    ops.store32(
        row + n * 8 + accCol(lane, 0),
        ops.packBf16(acc[n][2 * half] * factor, acc[n][2 * half + 1] * factor));
}

template <int R, int C> DPRT_FLASH_DEVICE void zero(float (&x)[R][C]) {
  DPRT_FLASH_UNROLL
  for (int r = 0; r < R; ++r)
    DPRT_FLASH_UNROLL
  for (int c = 0; c < C; ++c)
    x[r][c] = 0.0f;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// Block (blockX, head, sample) of the forward grid (forwardGrid); `smem`
/// holds ForwardTiles<HD>::kSmemBytes.
template <int HD, class Ops>
DPRT_FLASH_DEVICE void forwardBlock(Ops &ops, const Problem &p, int blockX,
                                    int head, int sample, int tid,
                                    unsigned char *smem) {
  using Tiles = ForwardTiles<HD>;
  constexpr int BM = Tiles::kBlockM, BN = Tiles::kBlockN, NT = Tiles::kThreads;
  constexpr int LD = kSmemRow<HD>;
  const Dims &d = p.dims;
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  // The longest causal rows first: the last blocks of the grid are short.
  const int i = ceilDiv(d.tokens, BM) - 1 - blockX;
  const int row0 = i * BM;
  const int64_t sampleRow = int64_t(sample) * d.tokens;
  const uint16_t *q = p.q + sampleRow * d.ldq + int64_t(head) * HD;
  const int64_t kv = sampleRow * d.ldk + int64_t(head / d.group) * HD;
  const uint16_t *k = p.k + kv, *v = p.v + kv;
  uint16_t *sQ = reinterpret_cast<uint16_t *>(smem);
  uint16_t *sK = sQ + BM * LD; // two stages of BN rows
  uint16_t *sV = sK + 2 * BN * LD;
  const int jEnd = keyBlockEnd(i, BM, BN, d.tokens, d.causal);

  loadRows<BM, HD, NT>(ops, sQ, q + int64_t(row0) * d.ldq, d.ldq,
                       d.tokens - row0, tid);
  ops.commit();
  loadRows<BN, HD, NT>(ops, sK, k, d.ldk, d.tokens, tid);
  loadRows<BN, HD, NT>(ops, sV, v, d.ldk, d.tokens, tid);
  ops.commit();
  ops.template waitGroup<1>();
  ops.syncThreads();
  // The warp's 16 query rows stay in registers as A fragments.
  uint32_t qa[HD / 16][4];
  DPRT_FLASH_UNROLL
  for (int kk = 0; kk < HD / 16; ++kk)
    ops.ldsm(qa[kk],
             sQ + (warp * 16 + ldsmRowA(lane)) * LD + kk * 16 + ldsmColA(lane));

  float acc[HD / 8][4];
  zero(acc);
  // Rows lane/4 and lane/4 + 8 of the warp: running maximum (exp2 units)
  // and this thread's part of the running sum.
  float rowMax[2] = {-INFINITY, -INFINITY}, rowSum[2] = {0.0f, 0.0f};
  for (int j = 0; j < jEnd; ++j) {
    const int stage = j & 1;
    if (j + 1 < jEnd) {
      const int next = (j + 1) * BN;
      loadRows<BN, HD, NT>(ops, sK + (stage ^ 1) * BN * LD,
                           k + int64_t(next) * d.ldk, d.ldk, d.tokens - next,
                           tid);
      loadRows<BN, HD, NT>(ops, sV + (stage ^ 1) * BN * LD,
                           v + int64_t(next) * d.ldk, d.ldk, d.tokens - next,
                           tid);
    }
    ops.commit();
    ops.template waitGroup<1>();
    ops.syncThreads();
    const uint16_t *sKj = sK + stage * BN * LD, *sVj = sV + stage * BN * LD;

    // S = Q K_j^T (16 x BN per warp), in exp2 units, masked.
    float s[BN / 8][4];
    zero(s);
    DPRT_FLASH_UNROLL
    for (int kk = 0; kk < HD / 16; ++kk)
      DPRT_FLASH_UNROLL
    for (int np = 0; np < BN / 16; ++np) {
      uint32_t bf[4];
      ops.ldsm(bf, sKj + (np * 16 + ldsmRowB(lane)) * LD + kk * 16 +
                       ldsmColB(lane));
      ops.mma(s[2 * np], qa[kk], bf[0], bf[1]);
      ops.mma(s[2 * np + 1], qa[kk], bf[2], bf[3]);
    }
    DPRT_FLASH_UNROLL
    for (int n = 0; n < BN / 8; ++n)
      DPRT_FLASH_UNROLL
    for (int e = 0; e < 4; ++e)
      s[n][e] *= d.scaleLog2;
    // One branch per tile: most tiles need no mask.
    if (tileNeedsMask(i, j, BM, BN, d.tokens, d.causal)) {
      DPRT_FLASH_UNROLL
      for (int n = 0; n < BN / 8; ++n)
        DPRT_FLASH_UNROLL
      for (int e = 0; e < 4; ++e)
        if (!attends(row0 + warp * 16 + accRow(lane, e),
                     j * BN + n * 8 + accCol(lane, e), d.tokens, d.causal))
          s[n][e] = -INFINITY;
    }

    // Online softmax: m' = max(m, max S), rescale O and l by exp2(m - m'),
    // P = exp2(S - m'), l += rowsum P. A row's 8 n-tile columns are spread
    // over the 4 threads of a quad (lanes 4g..4g+3).
    DPRT_FLASH_UNROLL
    for (int half = 0; half < 2; ++half) {
      float mx = rowMax[half];
      DPRT_FLASH_UNROLL
      for (int n = 0; n < BN / 8; ++n)
        mx = fmaxf(mx, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
      mx = fmaxf(mx, ops.shflXor(mx, 1));
      mx = fmaxf(mx, ops.shflXor(mx, 2));
      const float offset = rowOffset(mx);
      const float alpha = ops.exp2(rowMax[half] - offset);
      rowMax[half] = mx;
      float sum = 0.0f;
      DPRT_FLASH_UNROLL
      for (int n = 0; n < BN / 8; ++n)
        DPRT_FLASH_UNROLL
      for (int c = 0; c < 2; ++c) {
        const float e = ops.exp2(s[n][2 * half + c] - offset);
        s[n][2 * half + c] = e;
        sum += e;
      }
      rowSum[half] = rowSum[half] * alpha + sum;
      DPRT_FLASH_UNROLL
      for (int n = 0; n < HD / 8; ++n) {
        acc[n][2 * half] *= alpha;
        acc[n][2 * half + 1] *= alpha;
      }
    }

    // O += P V_j (P rounded to bf16).
    DPRT_FLASH_UNROLL
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t pa[4];
      accumulatorAsA(ops, pa, s, kk);
      productAB<HD, LD>(ops, acc, pa, sVj, kk, lane);
    }
    ops.syncThreads();
  }

  DPRT_FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    float l = rowSum[half];
    l += ops.shflXor(l, 1);
    l += ops.shflXor(l, 2);
    const int t = row0 + warp * 16 + accRow(lane, 2 * half);
    if (t < d.tokens) {
      storeRow<HD>(ops, p.o + (sampleRow + t) * d.ldq + int64_t(head) * HD, acc,
                   half, l > 0.0f ? 1.0f / l : 0.0f, lane);
      if ((lane & 3) == 0)
        ops.storeF32(p.lse + (int64_t(sample) * d.heads + head) * d.tokens + t,
                     kLn2 * (rowMax[half] + ops.log2(l)));
    }
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// Element n = (row, head) of the row-stats pass (batch * tokens * heads
/// elements, row-major like q): lse2 = lse log2(e) and D = rowsum(dO o O),
/// summed in f32 in column order.
template <int HD, class Ops>
DPRT_FLASH_DEVICE void rowStatsElement(Ops &ops, const Problem &p, int64_t n) {
  const Dims &d = p.dims;
  const int64_t row = n / d.heads;
  const int head = int(n - row * d.heads);
  const int64_t sample = row / d.tokens;
  const int t = int(row - sample * d.tokens);
  const int64_t at = row * d.ldq + int64_t(head) * HD;
  float sum = 0.0f;
  DPRT_FLASH_UNROLL
  for (int c = 0; c < HD / 8; ++c) {
    uint32_t o[4], g[4];
    ops.load128(o, p.o + at + c * 8);
    ops.load128(g, p.dout + at + c * 8);
    DPRT_FLASH_UNROLL
    for (int w = 0; w < 4; ++w) {
      sum = fmaf(ops.bitsToFloat(o[w] << 16), ops.bitsToFloat(g[w] << 16), sum);
      sum = fmaf(ops.bitsToFloat(o[w] & 0xffff0000u),
                 ops.bitsToFloat(g[w] & 0xffff0000u), sum);
    }
  }
  const int64_t stat = (sample * d.heads + head) * d.tokens + t;
  ops.storeF32(p.delta + stat, sum);
  ops.storeF32(p.lse2 + stat, ops.loadF32(p.lse + stat) * kLog2e);
}

/// Block (blockX, head, sample) of the dQ grid (queryGradGrid); `smem` holds
/// QueryGradTiles<HD>::kSmemBytes. Needs the row stats.
template <int HD, class Ops>
DPRT_FLASH_DEVICE void queryGradBlock(Ops &ops, const Problem &p, int blockX,
                                      int head, int sample, int tid,
                                      unsigned char *smem) {
  using Tiles = QueryGradTiles<HD>;
  constexpr int BM = Tiles::kBlockM, BN = Tiles::kBlockN, NT = Tiles::kThreads;
  constexpr int LD = kSmemRow<HD>;
  const Dims &d = p.dims;
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int i = ceilDiv(d.tokens, BM) - 1 - blockX;
  const int row0 = i * BM;
  const int64_t sampleRow = int64_t(sample) * d.tokens;
  const int64_t qo = (sampleRow + row0) * d.ldq + int64_t(head) * HD;
  const int64_t kv = sampleRow * d.ldk + int64_t(head / d.group) * HD;
  const uint16_t *k = p.k + kv, *v = p.v + kv;
  uint16_t *sQ = reinterpret_cast<uint16_t *>(smem);
  uint16_t *sdO = sQ + BM * LD;
  uint16_t *sK = sdO + BM * LD; // two stages of BN rows
  uint16_t *sV = sK + 2 * BN * LD;
  const int jEnd = keyBlockEnd(i, BM, BN, d.tokens, d.causal);

  // lse2 and D of rows lane/4 and lane/4 + 8 of the warp.
  float lse2[2], delta[2];
  DPRT_FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int t = row0 + warp * 16 + accRow(lane, 2 * half);
    const int64_t stat = (int64_t(sample) * d.heads + head) * d.tokens + t;
    lse2[half] = t < d.tokens ? ops.loadF32(p.lse2 + stat) : 0.0f;
    delta[half] = t < d.tokens ? ops.loadF32(p.delta + stat) : 0.0f;
  }
  loadRows<BM, HD, NT>(ops, sQ, p.q + qo, d.ldq, d.tokens - row0, tid);
  loadRows<BM, HD, NT>(ops, sdO, p.dout + qo, d.ldq, d.tokens - row0, tid);
  loadRows<BN, HD, NT>(ops, sK, k, d.ldk, d.tokens, tid);
  loadRows<BN, HD, NT>(ops, sV, v, d.ldk, d.tokens, tid);
  ops.commit();

  float dq[HD / 8][4];
  zero(dq);
  for (int j = 0; j < jEnd; ++j) {
    const int stage = j & 1;
    if (j + 1 < jEnd) {
      const int next = (j + 1) * BN;
      loadRows<BN, HD, NT>(ops, sK + (stage ^ 1) * BN * LD,
                           k + int64_t(next) * d.ldk, d.ldk, d.tokens - next,
                           tid);
      loadRows<BN, HD, NT>(ops, sV + (stage ^ 1) * BN * LD,
                           v + int64_t(next) * d.ldk, d.ldk, d.tokens - next,
                           tid);
    }
    ops.commit();
    ops.template waitGroup<1>();
    ops.syncThreads();
    const uint16_t *sKj = sK + stage * BN * LD, *sVj = sV + stage * BN * LD;

    // S = Q K_j^T and dP = dO V_j^T (16 x BN per warp).
    float s[BN / 8][4], dp[BN / 8][4];
    zero(s);
    zero(dp);
    productABt<HD, BN / 8, LD>(ops, s, sQ + warp * 16 * LD, sKj, lane);
    productABt<HD, BN / 8, LD>(ops, dp, sdO + warp * 16 * LD, sVj, lane);
    // dS = P (dP - D) with P = exp2(S log2(e)/sqrt(hd) - lse2), 0 where
    // masked; kept in s.
    DPRT_FLASH_UNROLL
    for (int n = 0; n < BN / 8; ++n)
      DPRT_FLASH_UNROLL
    for (int e = 0; e < 4; ++e)
      s[n][e] = ops.exp2(s[n][e] * d.scaleLog2 - lse2[e >> 1]);
    if (tileNeedsMask(i, j, BM, BN, d.tokens, d.causal)) {
      DPRT_FLASH_UNROLL
      for (int n = 0; n < BN / 8; ++n)
        DPRT_FLASH_UNROLL
      for (int e = 0; e < 4; ++e)
        if (!attends(row0 + warp * 16 + accRow(lane, e),
                     j * BN + n * 8 + accCol(lane, e), d.tokens, d.causal))
          s[n][e] = 0.0f;
    }
    DPRT_FLASH_UNROLL
    for (int n = 0; n < BN / 8; ++n)
      DPRT_FLASH_UNROLL
    for (int e = 0; e < 4; ++e)
      s[n][e] *= dp[n][e] - delta[e >> 1];
    // dQ += dS K_j (dS rounded to bf16).
    DPRT_FLASH_UNROLL
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t da[4];
      accumulatorAsA(ops, da, s, kk);
      productAB<HD, LD>(ops, dq, da, sKj, kk, lane);
    }
    ops.syncThreads();
  }

  DPRT_FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int t = row0 + warp * 16 + accRow(lane, 2 * half);
    if (t < d.tokens)
      storeRow<HD>(ops, p.dq + (sampleRow + t) * d.ldq + int64_t(head) * HD, dq,
                   half, d.scale, lane);
  }
}

/// Block (key block blockX, kvHead, sample) of the dK, dV grid
/// (keyValueGradGrid); `smem` holds KeyValueGradTiles<HD>::kSmemBytes. Needs
/// the row stats.
template <int HD, class Ops>
DPRT_FLASH_DEVICE void keyValueGradBlock(Ops &ops, const Problem &p, int blockX,
                                         int kvHead, int sample, int tid,
                                         unsigned char *smem) {
  using Tiles = KeyValueGradTiles<HD>;
  constexpr int BM = Tiles::kBlockM, BN = Tiles::kBlockN, NT = Tiles::kThreads;
  constexpr int LD = kSmemRow<HD>;
  const Dims &d = p.dims;
  const int warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int j = blockX, key0 = j * BN;
  // Steps: query heads r of the group, then query blocks i >= iBegin.
  const int iBegin = queryBlockBegin(j, BM, BN, d.causal);
  const int perHead = ceilDiv(d.tokens, BM) - iBegin;
  const int steps = d.group * perHead;
  const int64_t sampleRow = int64_t(sample) * d.tokens;
  const int64_t kv = (sampleRow + key0) * d.ldk + int64_t(kvHead) * HD;
  uint16_t *sK = reinterpret_cast<uint16_t *>(smem);
  uint16_t *sV = sK + BN * LD;
  uint16_t *sQ = sV + BN * LD;      // two stages of BM rows
  uint16_t *sdO = sQ + 2 * BM * LD; // two stages
  float *sStats = reinterpret_cast<float *>(sdO + 2 * BM * LD); // 2 x 2 BM

  auto loadStep = [&](int step, int stage) {
    const int head = kvHead * d.group + step / perHead;
    const int q0 = (iBegin + step % perHead) * BM;
    const int64_t qo = (sampleRow + q0) * d.ldq + int64_t(head) * HD;
    loadRows<BM, HD, NT>(ops, sQ + stage * BM * LD, p.q + qo, d.ldq,
                         d.tokens - q0, tid);
    loadRows<BM, HD, NT>(ops, sdO + stage * BM * LD, p.dout + qo, d.ldq,
                         d.tokens - q0, tid);
    const int64_t stat = (int64_t(sample) * d.heads + head) * d.tokens + q0;
    loadRowStats<BM, NT>(ops, sStats + stage * 2 * BM, p.lse2 + stat,
                         p.delta + stat, d.tokens - q0, tid);
  };
  loadRows<BN, HD, NT>(ops, sK, p.k + kv, d.ldk, d.tokens - key0, tid);
  loadRows<BN, HD, NT>(ops, sV, p.v + kv, d.ldk, d.tokens - key0, tid);
  loadStep(0, 0);
  ops.commit();

  float dk[HD / 8][4], dv[HD / 8][4];
  zero(dk);
  zero(dv);
  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1;
    if (step + 1 < steps)
      loadStep(step + 1, stage ^ 1);
    ops.commit();
    ops.template waitGroup<1>();
    ops.syncThreads();
    const int i = iBegin + step % perHead, q0 = i * BM;
    const uint16_t *sQi = sQ + stage * BM * LD, *sdOi = sdO + stage * BM * LD;
    const float *sLse2 = sStats + stage * 2 * BM, *sDelta = sLse2 + BM;

    // S^T = K Q_i^T and dP^T = V dO_i^T (16 keys x BM queries per warp).
    float st[BM / 8][4], dpt[BM / 8][4];
    zero(st);
    zero(dpt);
    productABt<HD, BM / 8, LD>(ops, st, sK + warp * 16 * LD, sQi, lane);
    productABt<HD, BM / 8, LD>(ops, dpt, sV + warp * 16 * LD, sdOi, lane);
    // P^T = exp2(S^T log2(e)/sqrt(hd) - lse2), 0 where masked;
    // dS^T = P^T (dP^T - D). Queries run along the columns.
    DPRT_FLASH_UNROLL
    for (int n = 0; n < BM / 8; ++n)
      DPRT_FLASH_UNROLL
    for (int e = 0; e < 4; ++e)
      st[n][e] =
          ops.exp2(st[n][e] * d.scaleLog2 - sLse2[n * 8 + accCol(lane, e)]);
    if (tileNeedsMask(i, j, BM, BN, d.tokens, d.causal)) {
      DPRT_FLASH_UNROLL
      for (int n = 0; n < BM / 8; ++n)
        DPRT_FLASH_UNROLL
      for (int e = 0; e < 4; ++e)
        if (!attends(q0 + n * 8 + accCol(lane, e),
                     key0 + warp * 16 + accRow(lane, e), d.tokens, d.causal))
          st[n][e] = 0.0f;
    }
    DPRT_FLASH_UNROLL
    for (int n = 0; n < BM / 8; ++n)
      DPRT_FLASH_UNROLL
    for (int e = 0; e < 4; ++e)
      dpt[n][e] = st[n][e] * (dpt[n][e] - sDelta[n * 8 + accCol(lane, e)]);
    // dV += P^T dO_i and dK += dS^T Q_i (P, dS rounded to bf16).
    DPRT_FLASH_UNROLL
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t pa[4], da[4];
      accumulatorAsA(ops, pa, st, kk);
      accumulatorAsA(ops, da, dpt, kk);
      productAB<HD, LD>(ops, dv, pa, sdOi, kk, lane);
      productAB<HD, LD>(ops, dk, da, sQi, kk, lane);
    }
    ops.syncThreads();
  }

  DPRT_FLASH_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int s = key0 + warp * 16 + accRow(lane, 2 * half);
    if (s < d.tokens) {
      const int64_t at = (sampleRow + s) * d.ldk + int64_t(kvHead) * HD;
      storeRow<HD>(ops, p.dk + at, dk, half, d.scale, lane);
      storeRow<HD>(ops, p.dv + at, dv, half, 1.0f, lane);
    }
  }
}

} // namespace dprt::cuda::flash

#endif // DPRT_CUDA_FLASHATTENTION_H
