//===- OptimizerSteps.cuh - The optimizers' element steps ------*- CUDA -*-===//
//
// Internal to runtime/cuda. What every update kernel runs per element, so
// that the plain update, the _rows forms (Optimizers.cu) and the grouped
// small _rows updates (UpdateGroups.cu) give the same bits by construction:
// the step's scalars from the StepState, the optimizers' element steps (Sgd,
// Momentum, AdamW), the gradient sources (a buffer, or rows weighted by
// their clip factors), the finiteness check, the noise and the compute-type
// copy (stepElements); and the launch shape they share (kThreads, oneWave).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_OPTIMIZERSTEPS_CUH
#define DPRT_CUDA_OPTIMIZERSTEPS_CUH

#include "DeviceMath.cuh"
#include "GradientNoise.cuh"
#include "WeightedRows.cuh"

#include "DeviceState.h"

#include <algorithm>
#include <type_traits>

namespace dprt::cuda {

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
  template <int W> struct State { float w[W]; };
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
  template <int W> struct State { float w[W], vel[W]; };
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
  template <int W> struct State { float w[W], m[W], v[W]; };
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
      st.v[k] = __fmaf_rn(b2, st.v[k], __fmul_rn(__fmul_rn(rest2, g[k]), g[k]));
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
__device__ __forceinline__ void
stepElements(const Opt &opt, const StepScalars &s, const GradientNoise &noise,
             int64_t noiseIndex, int64_t i, float (&raw)[W], bf16 *copy,
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

/// The elements a thread of a _rows update on rows of T takes: AdamW, with
/// three f32 arrays and f32 arithmetic per element, ran at 2.7 TB/s on 8
/// bf16 a thread and 3.2 on 4 (B8 n11.5M, one H200); SGD and momentum are
/// fastest on 8.
template <class Opt, class T>
constexpr int kRowsWidth = std::is_same_v<Opt, AdamW>
                               ? (kVec<T> < 4 ? kVec<T> : 4)
                               : kVec<T>;

/// The optimizer `proto` (its hyperparameters) on other buffers: the master
/// values and up to two state arrays.
__host__ __device__ inline Sgd withBuffers(const Sgd &, float *master, float *,
                                           float *) {
  return Sgd{master};
}
__host__ __device__ inline Momentum
withBuffers(const Momentum &proto, float *master, float *velocity, float *) {
  return Momentum{master, velocity, proto.momentum, proto.nesterov};
}
__host__ __device__ inline AdamW withBuffers(const AdamW &proto, float *master,
                                             float *m, float *v) {
  return AdamW{proto.beta1, proto.beta2, proto.eps, master, m, v};
}

/// One wave: as many blocks of `kernel` as the multiprocessors hold at once
/// (asked of the occupancy calculator once per kernel), at most `blocks`;
/// the kernels' grid-stride loops do the rest. With gridFor's 8 blocks of
/// 256 a multiprocessor and the 64-register bound, on one H200:
/// adamw_update_rows with noise (B8 bf16 n11.5M) 146 -> 128 us, adamw_update
/// (f32 n128M) 1035 -> 966 us, sgd_update_rows with noise 99 -> 85 us; the
/// bound alone got 129, 969 and 85 us, the one wave alone (3 blocks of 72 to
/// 80 registers) 168, 1169 and 102 us. The 1.1B T = 1024 AdamW programs'
/// median step: 1.3 % shorter, DP and DP off.
template <auto kernel> unsigned oneWave(Rank *rank, int64_t blocks) {
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

} // namespace dprt::cuda

#endif // DPRT_CUDA_OPTIMIZERSTEPS_CUH
