//===- Optimizers.cu - Optimizer steps on the GPU -------------------------===//
//
// Master weights, gradients and optimizer state are f32, and so is each
// element's arithmetic, in explicit fmas (PyTorch's fused optimizers' f32).
// The CPU backend updates in f64 and rounds once; the two agree to a few f32
// ulp (gpu-check compares them within 1e-6). f64 here cost nothing measurable
// in gpu-check, at full clocks, but a training step runs these kernels under
// the power cap (1.3 to 1.7 GHz on an H200), where its conversions and f64
// operations showed. bench/kernel-times.cpp, one H200 a call: the T = 1024
// AdamW DP program's updates 12.99 ms a step in f64, 11.48 in f32 with the
// noise's sincospif (rng.h); the 128K-vocabulary SGD DP program's 7.10 and
// 6.21; DP off's AdamW 8.19 and 7.79. In one call's A/B, f32 alone took
// 0.87 and 0.33 ms of the DP updates' time off (docs/PERFORMANCE.md). The
// learning rate, its schedule factor lrScale, the weight decay, gradScale and
// the step count are read from the StepState in the arena by the kernels
// themselves, on the device, so that the run sets them without recompiling
// and a captured graph stays valid when the driver uploads a new state
// between steps. Each optimizer block reads them once, into shared memory.
// The clip factors the *_update_rows forms read are Clipping.cu's.
//
// Each optimizer is one element step (Sgd, Momentum, AdamW) that one kernel
// runs on a gradient read from a buffer (the plain update) or formed from
// materialized rows (the *_update_rows form), so that the two give the same
// bits by construction.
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"
#include "GradientNoise.cuh"
#include "WeightedRows.cuh"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace dprt::cuda {

namespace {

/// Calls f(width, i) for i = 0, V, 2V, ... below n - n % V with width = V,
/// then for the tail elements (in block 0) with width = 1; `width` is a
/// std::integral_constant.
template <int V, class F>
__device__ __forceinline__ void forEachVector(int64_t n, const F &f) {
  const int64_t vectors = n / V;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += stride)
    f(std::integral_constant<int, V>{}, i * V);
  if (V > 1 && blockIdx.x == 0)
    for (int64_t i = vectors * V + threadIdx.x; i < n; i += blockDim.x)
      f(std::integral_constant<int, 1>{}, i);
}

/// The step's scalars: lr * lrScale, the weight decay, gradScale and the
/// AdamW bias corrections 1 - beta^t.
struct StepScalars {
  float step, weightDecay, gradScale, c1, c2;
};

__device__ __forceinline__ StepScalars loadScalars(const StepState *state,
                                                   double beta1, double beta2) {
  __shared__ StepScalars shared;
  if (threadIdx.x == 0) {
    double t = double(state->step);
    shared.step = float(state->lr * state->lrScale);
    shared.weightDecay = float(state->weightDecay);
    shared.gradScale = float(state->gradScale);
    shared.c1 = float(1.0 - pow(beta1, t));
    shared.c2 = float(1.0 - pow(beta2, t));
  }
  __syncthreads();
  return shared;
}

// Every multiply-add of the element steps is an explicit fma or a rounded
// product: left to nvcc, a contraction can differ between the kernels that
// inline a step (the plain and the _rows update, vector and tail
// instantiations), and with it the bits the two must share.

/// w - lr * (d + weightDecay * w) in two fmas: every optimizer's last
/// operation, on its direction d.
__device__ __forceinline__ float descend(const StepScalars &s, float w,
                                         float d) {
  return __fmaf_rn(-s.step, __fmaf_rn(s.weightDecay, w, d), w);
}

// The element steps: load<W> reads elements [i, i + W) of the master
// values and the optimizer's state into a State; apply<W> updates them
// given their gradients g (noised, times gradScale), stores them and leaves
// the new master values in w. beta1 and beta2 give the bias corrections of
// loadScalars. The two are apart so that a kernel can have the state's loads
// in flight while it draws the noise (stepElements).

struct Sgd {
  static constexpr double beta1 = 0.0, beta2 = 0.0;
  float *master;
  template <int W> struct State {
    float w[W];
  };
  template <int W>
  __device__ __forceinline__ void load(int64_t i, State<W> &st) const {
    loadVec<W>(master + i, st.w);
  }
  template <int W>
  __device__ __forceinline__ void apply(const StepScalars &s, int64_t i,
                                        State<W> &st, const float (&g)[W],
                                        float (&w)[W]) const {
#pragma unroll
    for (int k = 0; k < W; ++k)
      w[k] = descend(s, st.w[k], g[k]);
    storeVec<W>(master + i, w);
  }
};

struct Momentum {
  static constexpr double beta1 = 0.0, beta2 = 0.0;
  float *master, *velocity;
  double momentum;
  bool nesterov;
  template <int W> struct State {
    float w[W], vel[W];
  };
  template <int W>
  __device__ __forceinline__ void load(int64_t i, State<W> &st) const {
    loadVec<W>(master + i, st.w);
    loadVec<W>(velocity + i, st.vel);
  }
  template <int W>
  __device__ __forceinline__ void apply(const StepScalars &s, int64_t i,
                                        State<W> &st, const float (&g)[W],
                                        float (&w)[W]) const {
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float mu = float(momentum);
      const float v = __fmaf_rn(mu, st.vel[k], g[k]);
      st.vel[k] = v;
      w[k] = descend(s, st.w[k], nesterov ? __fmaf_rn(mu, v, g[k]) : v);
    }
    storeVec<W>(velocity + i, st.vel);
    storeVec<W>(master + i, w);
  }
};

struct AdamW {
  double beta1, beta2, eps;
  float *master, *m, *v;
  template <int W> struct State {
    float w[W], m[W], v[W];
  };
  template <int W>
  __device__ __forceinline__ void load(int64_t i, State<W> &st) const {
    loadVec<W>(master + i, st.w);
    loadVec<W>(m + i, st.m);
    loadVec<W>(v + i, st.v);
  }
  template <int W>
  __device__ __forceinline__ void apply(const StepScalars &s, int64_t i,
                                        State<W> &st, const float (&g)[W],
                                        float (&w)[W]) const {
    const float b1 = float(beta1), b2 = float(beta2),
                rest1 = float(1.0 - beta1), rest2 = float(1.0 - beta2),
                epsilon = float(eps);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      st.m[k] = __fmaf_rn(b1, st.m[k], __fmul_rn(rest1, g[k]));
      st.v[k] =
          __fmaf_rn(b2, st.v[k], __fmul_rn(__fmul_rn(rest2, g[k]), g[k]));
      // The direction m^ / (sqrt(v^) + eps) with IEEE division and square
      // root: its rounding (a few f32 ulp of the direction) is far below an
      // ulp of w once lr scales it.
      const float dir =
          __fdiv_rn(__fdiv_rn(st.m[k], s.c1),
                    __fadd_rn(__fsqrt_rn(__fdiv_rn(st.v[k], s.c2)), epsilon));
      w[k] = descend(s, st.w[k], dir);
    }
    storeVec<W>(m + i, st.m);
    storeVec<W>(v + i, st.v);
    storeVec<W>(master + i, w);
  }
};

// The gradient sources: load<W> gives elements [i, i + W) as f32, before
// the noise.

/// The gradient buffer of the plain update.
struct BufferGradient {
  const float *grad;
  template <int W>
  __device__ __forceinline__ void load(int64_t i, float (&g)[W]) const {
    loadVec<W>(grad + i, g);
  }
};

/// What rows_weighted_sum(g, c) stores into a zeroed f32 buffer: out[j] +=
/// sum with out[j] = +0, which turns a -0 sum into +0. Each thread reads
/// W consecutive elements of every row (one 16-byte load for W = kVec<T>),
/// so that a warp reads each row in one contiguous span.
template <class Rows> struct RowsGradient {
  Rows g;
  const float *c;
  int64_t batch;
  template <int W>
  __device__ __forceinline__ void load(int64_t i, float (&out)[W]) const {
    float sum[W];
    weightedRowSums<W>(g, c, batch, i, sum);
    addedToZero<W>(sum, out);
  }
  /// load<W> of fetched rows (batch <= kMxRowsAhead; mxAheadUpdateKernel).
  template <int W>
  __device__ __forceinline__ void loadAhead(const MxRowsAhead<W> &ahead,
                                            float (&out)[W]) const {
    float sum[W];
    weightedRowSumsAhead<W>(c, batch, ahead, sum);
    addedToZero<W>(sum, out);
  }
  /// What += sum leaves in a zeroed buffer.
  template <int W>
  static __device__ __forceinline__ void addedToZero(const float (&sum)[W],
                                                     float (&out)[W]) {
#pragma unroll
    for (int k = 0; k < W; ++k)
      out[k] = 0.0f + sum[k];
  }
};

constexpr int kThreads = 256;

/// The driver's finiteness check of the gradient on the values the kernel
/// reads anyway (StepState::nonFiniteGradient: an infinity or NaN has every
/// exponent bit set).
template <int W>
__device__ __forceinline__ void checkFinite(const float (&raw)[W],
                                            bool &finite) {
#pragma unroll
  for (int k = 0; k < W; ++k)
    finite &= (__float_as_uint(raw[k]) & 0x7f800000u) != 0x7f800000u;
}

/// Elements [i, i + W) of an update from their noised gradient and their
/// loaded state: gradScale, the optimizer's step and the compute-type copy.
template <int W, class Opt>
__device__ __forceinline__ void
applyElements(const Opt &opt, const StepScalars &s, int64_t i,
              const float (&noised)[W], typename Opt::template State<W> &state,
              bf16 *copy) {
  float g[W];
#pragma unroll
  for (int k = 0; k < W; ++k)
    g[k] = __fmul_rn(noised[k], s.gradScale);
  float w[W];
  opt.template apply<W>(s, i, state, g, w);
  // The compute-type copy: storeVec rounds as the cast kernel does.
  if (copy)
    storeVec<W>(copy + i, w);
}

/// Elements [i, i + W) of an update, from their gradient `raw` (before the
/// noise): the driver's finiteness check of the gradient on the values the
/// kernel reads anyway (StepState::nonFiniteGradient: an infinity or NaN has
/// every exponent bit set), the noise, gradScale, the optimizer's step and
/// the compute-type copy. Every update kernel runs this, so that they give
/// the same bits. With kStateFirst the optimizer's state is loaded before the
/// noise is drawn, so that its loads are in flight during the draw's
/// arithmetic (mxTileUpdateKernel); the fused kernels, which hold the rows'
/// values too, load it after: SGD's on MXFP8 rows with its loads moved up
/// took 72.6 us against 65.0 (B8 n11.5M with noise, one H200), its 64
/// registers the limit.
template <int W, bool kStateFirst = false, class Opt>
__device__ __forceinline__ void stepElements(const Opt &opt,
                                             const StepScalars &s,
                                             const GradientNoise &noise,
                                             int64_t noiseIndex, int64_t i,
                                             float (&raw)[W], bf16 *copy,
                                             bool &finite) {
  typename Opt::template State<W> state;
  if constexpr (kStateFirst)
    opt.template load<W>(i, state);
  checkFinite<W>(raw, finite);
  noise.addAll<W>(raw, noiseIndex + i);
  if constexpr (!kStateFirst)
    opt.template load<W>(i, state);
  applyElements<W>(opt, s, i, raw, state, copy);
}

// At most 64 registers, so that 4 blocks of kThreads fit on a
// multiprocessor (launchUpdate). Left alone, the AdamW updates took 72 to 80
// and 3 blocks each.
template <int V, class Opt, class Grad>
__global__ void __launch_bounds__(kThreads, 4)
    updateKernel(Opt opt, Grad grad, int64_t n, int64_t noiseIndex,
                 const StepState *state, bf16 *copy, int32_t *nonFinite) {
  const StepScalars s = loadScalars(state, opt.beta1, opt.beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  bool finite = true;
  forEachVector<V>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float raw[W];
    grad.template load<W>(i, raw);
    stepElements<W>(opt, s, noise, noiseIndex, i, raw, copy, finite);
  });
  if (!finite)
    atomicOr(nonFinite, 1);
}

/// SGD on MXFP8 rows of at most kMxRowsAhead samples, V
/// elements a thread (n a multiple of V): every row's bytes and scales and
/// the optimizer's state are loaded before the noise is drawn, so that the
/// draw's arithmetic (Philox and Box-Muller for every element) runs while
/// they are in flight; then the rows are decoded and summed, and the
/// elements finished as in updateKernel (the same sums, noise and steps;
/// the sums' bits differ only where a row's weight c[b] 2^E is subnormal,
/// WeightedRows.cuh's mxRowWeight). The values held across the draw need
/// more than 64 registers: with updateKernel's bound (4 blocks a
/// multiprocessor) this spilled and took 72.6 us against updateKernel's
/// 65.0 (B8 n11.5M with noise, one H200); with 3 blocks and 76 registers
/// 57.9 us against 65.0 (without noise 54.9 against 54.7; B5 51.8 against
/// 62.4), the same bits. With rng.h's branch-free Box-Muller since: 55.7
/// against 61.3. With the scales in the rows' weights and the rows'
/// addresses a stride apart (WeightedRows.cuh), at the T = 1024 DP step's
/// clock: 78.3 -> 67.8 us a call.
template <int V, class Opt>
__global__ void __launch_bounds__(kThreads, 3)
    mxAheadUpdateKernel(Opt opt, RowsGradient<MxRowsView> grad, int64_t n,
                        int64_t noiseIndex, const StepState *state, bf16 *copy,
                        int32_t *nonFinite) {
  const StepScalars s = loadScalars(state, opt.beta1, opt.beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  bool finite = true;
  const int64_t vectors = n / V;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
       v < vectors; v += stride) {
    const int64_t i = v * V;
    MxRowsAhead<V> ahead;
    fetchRowsAhead<V>(grad.g, grad.batch, i, ahead);
    typename Opt::template State<V> st;
    opt.template load<V>(i, st);
    float z[V];
    noise.draw<V>(z, noiseIndex + i);
    float raw[V];
    grad.template loadAhead<V>(ahead, raw);
    checkFinite<V>(raw, finite);
    noise.addDrawn<V>(raw, z);
    applyElements<V>(opt, s, i, raw, st, copy);
  }
  if (!finite)
    atomicOr(nonFinite, 1);
}

/// AdamW on MXFP8 rows, a tile of kMxTile elements at a time in two phases:
/// every thread first forms the weighted sums of kMxRowWidth elements of the
/// rows (weightedRowSums, 8-byte loads of every row) into shared memory,
/// then the block runs the update on vectors of 4 of them. The fused form
/// of updateKernel held the AdamW state and the rows' bytes and scales of
/// vectors of 4 in one thread's 64 registers and ran at 2.1 TB/s (B8
/// n11.5M with noise on an H200: 166 us against 129 with bf16 rows, which
/// move 24 % more bytes); without the scales' loads it took 121 us. In
/// tiles, in the T = 1024 AdamW DP program (kernel-times, one H200): 138.7
/// -> 128.1 us a call, 11.23 -> 10.38 ms a step, tokens/s +0.7 %; 165 -> 160
/// us in gpu-check. Its second phase loads the AdamW state before it draws
/// the noise (stepElements' kStateFirst): 106.5 -> 104.4 us for B8 n11.5M
/// with noise on one H200, the same without noise (102.5). SGD's tiles were
/// slower (updateRows). The sums and the element steps are updateKernel's
/// (the same weightedRowSums, the same noise index per element,
/// stepElements), so the bits are too: gpu-check holds them against
/// rows_weighted_sum and the plain update.
constexpr int kMxRowWidth = 8;
constexpr int kMxTile = kThreads * kMxRowWidth;

template <class Opt>
__global__ void __launch_bounds__(kThreads, 4)
    mxTileUpdateKernel(Opt opt, MxRowsView rows, const float *c,
                       int64_t batch, int64_t n, int64_t noiseIndex,
                       const StepState *state, bf16 *copy,
                       int32_t *nonFinite) {
  __shared__ float4 sums[kMxTile / 4];
  const StepScalars s = loadScalars(state, opt.beta1, opt.beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  bool finite = true;
  for (int64_t tile = int64_t(blockIdx.x) * kMxTile; tile < n;
       tile += int64_t(gridDim.x) * kMxTile) {
    // n is a multiple of 32: a thread's kMxRowWidth elements are all in or
    // all out.
    const int64_t j = tile + int64_t(threadIdx.x) * kMxRowWidth;
    if (j < n) {
      float sum[kMxRowWidth];
      weightedRowSums<kMxRowWidth>(rows, c, batch, j, sum);
      float held[kMxRowWidth];
      RowsGradient<MxRowsView>::addedToZero<kMxRowWidth>(sum, held);
#pragma unroll
      for (int q = 0; q < kMxRowWidth / 4; ++q)
        sums[threadIdx.x * (kMxRowWidth / 4) + q] =
            make_float4(held[4 * q], held[4 * q + 1], held[4 * q + 2],
                        held[4 * q + 3]);
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMxTile / (4 * kThreads); ++q) {
      const int local = 4 * (int(threadIdx.x) + q * kThreads);
      const int64_t i = tile + local;
      if (i >= n)
        break;
      const float4 v = sums[local / 4];
      float raw[4] = {v.x, v.y, v.z, v.w};
      stepElements<4, true>(opt, s, noise, noiseIndex, i, raw, copy, finite);
    }
    // The next tile's sums overwrite these.
    __syncthreads();
  }
  if (!finite)
    atomicOr(nonFinite, 1);
}

/// The elements a thread of a _rows update on rows of T takes: AdamW, with
/// three f32 arrays and f32 arithmetic per element, ran at 2.7 TB/s on 8
/// bf16 a thread and 3.2 on 4 (B8 n11.5M, one H200); SGD and momentum are
/// fastest on 8.
template <class Opt, class T>
constexpr int kRowsWidth =
    std::is_same_v<Opt, AdamW> ? (kVec<T> < 4 ? kVec<T> : 4) : kVec<T>;

/// The optimizer `proto` (its hyperparameters) on other buffers: the master
/// values and up to two state arrays.
__host__ __device__ inline Sgd withBuffers(const Sgd &, float *master, float *,
                                           float *) {
  return Sgd{master};
}
__host__ __device__ inline Momentum withBuffers(const Momentum &proto,
                                                float *master, float *velocity,
                                                float *) {
  return Momentum{master, velocity, proto.momentum, proto.nesterov};
}
__host__ __device__ inline AdamW withBuffers(const AdamW &proto, float *master,
                                             float *m, float *v) {
  return AdamW{proto.beta1, proto.beta2, proto.eps, master, m, v};
}

/// One _rows update of a group's launch: the buffers of its call, its
/// elements (a multiple of its rows' width) and its first block.
struct GroupEntry {
  float *master, *state1, *state2;
  const void *g;
  bf16 *copy;
  int64_t noiseIndex;
  int32_t n, firstBlock;
  bool f32Rows;
};

/// Updates a group launch takes at most: the launch's parameters stay
/// within the 4 KB every CUDA version passes.
constexpr int kGroupEntries = 48;

template <class Opt> struct GroupLaunch {
  Opt opt;
  const float *c;
  int64_t batch;
  int32_t count, blocks;
  GroupEntry entries[kGroupEntries];
};
static_assert(sizeof(GroupLaunch<AdamW>) <= 4000,
              "a group launch's parameters must fit in 4 KB");

/// The _rows updates of up to 48 parameters in one launch (update_group):
/// the entries' blocks of 256 vectors (p.blocks in all, entry e's from
/// firstBlock on), taken by the launch's blocks in turn, each running what
/// updateKernel<W> runs for its elements, W = kRowsWidth (the same loads,
/// sums, noise and steps, so the same bits). The parameters it is for are
/// small (an RMSNorm's gamma: 2048 elements in 2 blocks; a key or value
/// projection: 0.5 M in 256), and their own launches took 4.7 and 11.6 us
/// a call for 0.06 and 13 MB in the T = 1024 SGD DP step, 65 of them a
/// step. One wave of blocks that loop, so that the step's scalars and the
/// noise key are read once a block, not once per 256 vectors.
template <class Opt>
__global__ void __launch_bounds__(kThreads, 4)
    groupUpdateKernel(const __grid_constant__ GroupLaunch<Opt> p,
                      const StepState *state, int32_t *nonFinite) {
  const StepScalars s = loadScalars(state, p.opt.beta1, p.opt.beta2);
  const GradientNoise drawn = GradientNoise::of(*state, true);
  bool finite = true;
  int e = 0;
  for (int32_t block = blockIdx.x; block < p.blocks; block += gridDim.x) {
    // Blocks only move forward: so does their entry.
    while (e + 1 < p.count && p.entries[e + 1].firstBlock <= block)
      ++e;
    const GroupEntry &entry = p.entries[e];
    const Opt opt =
        withBuffers(p.opt, entry.master, entry.state1, entry.state2);
    GradientNoise noise = drawn;
    noise.on = drawn.on && entry.noiseIndex >= 0;
    const int64_t vector =
        int64_t(block - entry.firstBlock) * kThreads + threadIdx.x;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      constexpr int W = kRowsWidth<Opt, T>;
      const int64_t i = vector * W;
      if (i >= entry.n)
        return;
      const RowsGradient<PlainRowsView<T>> grad{
          PlainRowsView<T>{static_cast<const T *>(entry.g), entry.n}, p.c,
          p.batch};
      float raw[W];
      grad.template load<W>(i, raw);
      stepElements<W>(opt, s, noise, entry.noiseIndex, i, raw, entry.copy,
                      finite);
    };
    if (entry.f32Rows)
      run(float{});
    else
      run(bf16{});
  }
  if (!finite)
    atomicOr(nonFinite, 1);
}

/// Four f32 a thread when every pointer is 16-byte aligned.
bool vectorizable(std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (!aligned16(p))
      return false;
  return true;
}

float *f32(void *p) { return static_cast<float *>(p); }

/// One wave: as many blocks of `kernel` as the multiprocessors hold at once
/// (asked of the occupancy calculator once per kernel), at most `blocks`;
/// the kernels' grid-stride loops do the rest. With gridFor's 8 blocks of
/// 256 a multiprocessor and the 64-register bound, on one H200:
/// adamw_update_rows with noise (B8 bf16 n11.5M) 146 -> 128 us, adamw_update
/// (f32 n128M) 1035 -> 966 us, sgd_update_rows with noise 99 -> 85 us; the
/// bound alone got 129, 969 and 85 us, the one wave alone (3 blocks of 72 to
/// 80 registers) 168, 1169 and 102 us. The 1.1B T = 1024 AdamW programs'
/// median step: 1.3 % shorter, DP and DP off.
template <auto kernel>
unsigned oneWave(Rank *rank, int64_t blocks) {
  static const int resident = [] {
    int count = 0;
    checkCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel,
                                                            kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    return std::max(count, 1);
  }();
  const int64_t wave = int64_t(deviceState(rank).smCount) * resident;
  return unsigned(std::max<int64_t>(1, std::min(blocks, wave)));
}

template <int V, class Opt, class Grad>
void launchUpdate(Rank *rank, const Opt &opt, const Grad &grad, int64_t n,
                  int64_t noiseIndex, bf16 *copy) {
  const int64_t blocks = (n / V + kThreads - 1) / kThreads;
  updateKernel<V><<<oneWave<updateKernel<V, Opt, Grad>>(rank, blocks),
                    kThreads, 0, computeStream(rank)>>>(
      opt, grad, n, noiseIndex, deviceStepState(rank), copy,
      deviceNonFiniteFlag(rank));
}

/// The compute-type copy an update also stores (kernels.inc), or nullptr:
/// bf16, the one compute type of 16 bits this backend runs.
bf16 *computeCopy(const char *name, DType dt, void *params) {
  if (params && dt != DType::BF16)
    throw std::invalid_argument(std::string(name) +
                                ": keeps a bf16 copy of the weights, not " +
                                nameOf(dt));
  return static_cast<bf16 *>(params);
}

/// The optimizer on the gradient buffer `grad`; `state` lists master and
/// the optimizer's state buffers.
template <class Opt>
void update(Rank *rank, DType acc, const char *name, const Opt &opt,
            std::initializer_list<const void *> state, const void *grad,
            int64_t n, int64_t noiseIndex, DType dt, void *params) {
  requireAcc(acc, name);
  bf16 *copy = computeCopy(name, dt, params);
  if (n <= 0)
    return;
  const BufferGradient g{static_cast<const float *>(grad)};
  if (vectorizable(state) && aligned16(grad) && aligned16(copy))
    launchUpdate<4>(rank, opt, g, n, noiseIndex, copy);
  else
    launchUpdate<1>(rank, opt, g, n, noiseIndex, copy);
  checkLaunch(name);
}

} // namespace

/// What the updates of one launch share: the optimizer and its
/// hyperparameters, the clip factors and the batch.
struct GroupKey {
  OptimizerKind kind = OptimizerKind::SGD;
  double hyperparameters[3] = {};
  bool nesterov = false;
  const float *c = nullptr;
  int64_t batch = 0;

  bool operator==(const GroupKey &o) const {
    return kind == o.kind && nesterov == o.nesterov && c == o.c &&
           batch == o.batch &&
           std::equal(hyperparameters, hyperparameters + 3,
                      o.hyperparameters);
  }
};

/// The *_update_rows calls an open update_group has deferred, all of one
/// key.
struct UpdateGroup {
  bool open = false;
  GroupKey key;
  std::vector<GroupEntry> entries;
  int32_t blocks = 0;
};

namespace {

/// An update's group key: its optimizer's kind and hyperparameters.
GroupKey keyOf(const Sgd &, const float *c, int64_t batch) {
  return GroupKey{OptimizerKind::SGD, {}, false, c, batch};
}
GroupKey keyOf(const Momentum &opt, const float *c, int64_t batch) {
  return GroupKey{
      OptimizerKind::Momentum, {opt.momentum}, opt.nesterov, c, batch};
}
GroupKey keyOf(const AdamW &opt, const float *c, int64_t batch) {
  return GroupKey{
      OptimizerKind::AdamW, {opt.beta1, opt.beta2, opt.eps}, false, c, batch};
}

float *stateBuffer(const Sgd &, int) { return nullptr; }
float *stateBuffer(const Momentum &opt, int k) {
  return k == 0 ? opt.velocity : nullptr;
}
float *stateBuffer(const AdamW &opt, int k) { return k == 0 ? opt.m : opt.v; }

template <class Opt>
void launchGroup(Rank *rank, const Opt &proto, const UpdateGroup &group) {
  GroupLaunch<Opt> p{};
  p.opt = proto;
  p.c = group.key.c;
  p.batch = group.key.batch;
  p.count = int32_t(group.entries.size());
  p.blocks = group.blocks;
  std::copy(group.entries.begin(), group.entries.end(), p.entries);
  groupUpdateKernel<Opt>
      <<<oneWave<groupUpdateKernel<Opt>>(rank, group.blocks), kThreads, 0,
         computeStream(rank)>>>(p, deviceStepState(rank),
                                deviceNonFiniteFlag(rank));
  checkLaunch("update_group");
}

/// Launches the deferred updates, if any, and empties the group.
void flushGroup(Rank *rank, UpdateGroup &group) {
  if (group.entries.empty())
    return;
  const double *h = group.key.hyperparameters;
  switch (group.key.kind) {
  case OptimizerKind::SGD:
    launchGroup(rank, Sgd{nullptr}, group);
    break;
  case OptimizerKind::Momentum:
    launchGroup(rank, Momentum{nullptr, nullptr, h[0], group.key.nesterov},
                group);
    break;
  case OptimizerKind::AdamW:
    launchGroup(rank, AdamW{h[0], h[1], h[2], nullptr, nullptr, nullptr},
                group);
    break;
  }
  group.entries.clear();
  group.blocks = 0;
}

/// Defers a _rows update on rows of T (W = kRowsWidth elements a thread,
/// every pointer aligned, n a multiple of W) into the open group, if there
/// is one and the update alone would not fill one wave of updateKernel;
/// false when it is to run now. A group of another optimizer,
/// hyperparameters, clip factors or batch, or a full one, is launched
/// first.
template <class Opt, class T>
bool deferToGroup(Rank *rank, const Opt &opt, const T *g, const float *c,
                  int64_t batch, int64_t n, int64_t noiseIndex, bf16 *copy) {
  DeviceState &st = deviceState(rank);
  if (!st.updates || !st.updates->open)
    return false;
  constexpr int W = kRowsWidth<Opt, T>;
  const int64_t blocks = (n / W + kThreads - 1) / kThreads;
  // updateKernel's bound: 4 blocks of kThreads a multiprocessor.
  if (blocks >= int64_t(st.smCount) * 4 || n > INT32_MAX)
    return false;
  UpdateGroup &group = *st.updates;
  const GroupKey key = keyOf(opt, c, batch);
  if (!(key == group.key) || group.entries.size() == size_t(kGroupEntries) ||
      int64_t(group.blocks) + blocks > INT32_MAX)
    flushGroup(rank, group);
  if (group.entries.empty())
    group.key = key;
  group.entries.push_back(GroupEntry{opt.master, stateBuffer(opt, 0),
                                     stateBuffer(opt, 1), g, copy, noiseIndex,
                                     int32_t(n), group.blocks,
                                     std::is_same_v<T, float>});
  group.blocks += int32_t(blocks);
  return true;
}

/// The optimizer on the gradient rows_weighted_sum(rows, g, c) would store
/// into a zeroed buffer.
template <class Opt>
void updateRows(Rank *rank, DType rows, const char *name, const Opt &opt,
                std::initializer_list<const void *> state, const void *g,
                const void *c, int64_t batch, int64_t n, int64_t noiseIndex,
                DType dt, void *params) {
  bf16 *copy = computeCopy(name, dt, params);
  if (n <= 0)
    return;
  if (rows == DType::MXFP8) {
    // 8 elements (8 bytes) a thread and row for SGD and momentum, 4 for
    // AdamW where its tiles do not apply (rows not aligned to 8 bytes):
    // fused, AdamW's 8 ran at 1.5 TB/s against bf16 rows' 2.7 (B8 n11.5M
    // with noise, one H100: 241 against 168 us), as bf16 rows had shown.
    constexpr int V = std::is_same_v<Opt, AdamW> ? 4 : 8;
    if (n % kMxBlock != 0)
      throw std::invalid_argument(std::string(name) +
                                  ": MXFP8 rows of " + std::to_string(n) +
                                  " elements, not a multiple of 32");
    const MxRowsView rows(g, n);
    // AdamW in tiles (mxTileUpdateKernel); SGD and momentum, with less
    // state a thread, are faster fused: SGD's tiles took 93.2 us a call
    // against 82.6 in the T = 1024 program (kernel-times, one H200). SGD
    // with up to 8 samples fetches its rows ahead of the noise
    // (mxAheadUpdateKernel); momentum, which holds its velocity too, took
    // 88.2 us that way against updateKernel's 80.2 (B8 n11.5M with noise,
    // one H200; 80.3 against 78.4 with the branch-free Box-Muller) and
    // stays fused.
    if constexpr (std::is_same_v<Opt, AdamW>) {
      if (vectorizable(state) && rows.aligned(g, kMxRowWidth) &&
          aligned16(copy)) {
        const int64_t tiles = (n + kMxTile - 1) / kMxTile;
        mxTileUpdateKernel<<<oneWave<mxTileUpdateKernel<Opt>>(rank, tiles),
                             kThreads, 0, computeStream(rank)>>>(
            opt, rows, static_cast<const float *>(c), batch, n, noiseIndex,
            deviceStepState(rank), copy, deviceNonFiniteFlag(rank));
        checkLaunch(name);
        return;
      }
    }
    const RowsGradient<MxRowsView> grad{rows, static_cast<const float *>(c),
                                        batch};
    // Row b starts at g + b * (n + n / 32) (types.h): its vectors of V
    // bytes are aligned where that stride is a multiple of V; a vector
    // never leaves its block (V divides 32).
    const bool aligned =
        vectorizable(state) && rows.aligned(g, V) && aligned16(copy);
    if constexpr (std::is_same_v<Opt, Sgd>) {
      if (aligned && batch <= kMxRowsAhead) {
        const int64_t blocks = (n / V + kThreads - 1) / kThreads;
        mxAheadUpdateKernel<V>
            <<<oneWave<mxAheadUpdateKernel<V, Opt>>(rank, blocks), kThreads,
               0, computeStream(rank)>>>(opt, grad, n, noiseIndex,
                                         deviceStepState(rank), copy,
                                         deviceNonFiniteFlag(rank));
        checkLaunch(name);
        return;
      }
    }
    if (aligned)
      launchUpdate<V>(rank, opt, grad, n, noiseIndex, copy);
    else
      launchUpdate<1>(rank, opt, grad, n, noiseIndex, copy);
    checkLaunch(name);
    return;
  }
  dispatchCompute(rows, name, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kRowsWidth<Opt, T>;
    const RowsGradient<PlainRowsView<T>> grad{
        PlainRowsView<T>{static_cast<const T *>(g), n},
        static_cast<const float *>(c), batch};
    // Row b starts at g + b * n: every row is aligned when g is and n is a
    // multiple of V.
    if (vectorizable(state) && aligned16(g) && aligned16(copy) && n % V == 0) {
      if (deferToGroup(rank, opt, static_cast<const T *>(g),
                       static_cast<const float *>(c), batch, n, noiseIndex,
                       copy))
        return;
      launchUpdate<V>(rank, opt, grad, n, noiseIndex, copy);
    } else
      launchUpdate<1>(rank, opt, grad, n, noiseIndex, copy);
    checkLaunch(name);
  });
}

} // namespace

void update_group(Rank *rank, bool open) {
  DeviceState &st = deviceState(rank);
  if (!st.updates)
    st.updates = std::make_shared<UpdateGroup>();
  UpdateGroup &group = *st.updates;
  if (open == group.open)
    fail(open ? "update_group: a group is already open (update_group(true) "
                "twice without update_group(false) between)"
              : "update_group: no group is open");
  if (!open)
    flushGroup(rank, group);
  group.open = open;
}

bool updatesMetNonFinite(Rank *rank) {
  const int32_t *flag = deviceNonFiniteFlag(rank);
  synchronize(rank);
  int32_t host = 0;
  checkCuda(cudaMemcpy(&host, flag, sizeof(host), cudaMemcpyDeviceToHost),
            "cudaMemcpy(nonFiniteGradient)");
  return host != 0;
}

void sgd_update(Rank *rank, DType acc, void *master, const void *grad,
                int64_t n, int64_t noiseIndex, DType dt, void *params) {
  update(rank, acc, "sgd_update", Sgd{f32(master)}, {master}, grad, n,
         noiseIndex, dt, params);
}

void sgd_update_rows(Rank *rank, DType rows, void *master, const void *g,
                     const void *c, int64_t batch, int64_t n,
                     int64_t noiseIndex, DType dt, void *params) {
  updateRows(rank, rows, "sgd_update_rows", Sgd{f32(master)}, {master}, g, c,
             batch, n, noiseIndex, dt, params);
}

void momentum_update(Rank *rank, DType acc, void *master, void *velocity,
                     const void *grad, int64_t n, double momentum,
                     bool nesterov, int64_t noiseIndex, DType dt,
                     void *params) {
  update(rank, acc, "momentum_update",
         Momentum{f32(master), f32(velocity), momentum, nesterov},
         {master, velocity}, grad, n, noiseIndex, dt, params);
}

void momentum_update_rows(Rank *rank, DType rows, void *master, void *velocity,
                          const void *g, const void *c, int64_t batch,
                          int64_t n, double momentum, bool nesterov,
                          int64_t noiseIndex, DType dt, void *params) {
  updateRows(rank, rows, "momentum_update_rows",
             Momentum{f32(master), f32(velocity), momentum, nesterov},
             {master, velocity}, g, c, batch, n, noiseIndex, dt, params);
}

void adamw_update(Rank *rank, DType acc, void *master, void *m, void *v,
                  const void *grad, int64_t n, double beta1, double beta2,
                  double eps, int64_t noiseIndex, DType dt, void *params) {
  update(rank, acc, "adamw_update",
         AdamW{beta1, beta2, eps, f32(master), f32(m), f32(v)}, {master, m, v},
         grad, n, noiseIndex, dt, params);
}

void adamw_update_rows(Rank *rank, DType rows, void *master, void *m, void *v,
                       const void *g, const void *c, int64_t batch, int64_t n,
                       double beta1, double beta2, double eps,
                       int64_t noiseIndex, DType dt, void *params) {
  updateRows(rank, rows, "adamw_update_rows",
             AdamW{beta1, beta2, eps, f32(master), f32(m), f32(v)},
             {master, m, v}, g, c, batch, n, noiseIndex, dt, params);
}

} // namespace dprt::cuda
