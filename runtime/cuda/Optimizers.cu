//===- Optimizers.cu - Clip factors and optimizer steps on the GPU --------===//
//
// Master weights, gradients and optimizer state are f32; each element is
// updated in f64 (like the CPU backend) and rounded once, which costs nothing
// in these memory-bound loops. The learning rate, its schedule factor
// lrScale, the weight decay, gradScale and the step count (and the clip
// factors' bound C) are read from the StepState in the arena by the kernels
// themselves, on the device, so that the run sets them without recompiling
// and a captured graph stays valid when the driver uploads a new state
// between steps. Each optimizer block reads them once, into shared memory.
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"
#include "GradientNoise.cuh"

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>
#include <type_traits>

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
  double step, weightDecay, gradScale, c1, c2;
};

__device__ __forceinline__ StepScalars loadScalars(const StepState *state,
                                                   double beta1, double beta2) {
  __shared__ StepScalars shared;
  if (threadIdx.x == 0) {
    double t = double(state->step);
    shared.step = state->lr * state->lrScale;
    shared.weightDecay = state->weightDecay;
    shared.gradScale = state->gradScale;
    shared.c1 = 1.0 - pow(beta1, t);
    shared.c2 = 1.0 - pow(beta2, t);
  }
  __syncthreads();
  return shared;
}

template <int V>
__global__ void sgdKernel(float *master, const float *grad, int64_t n,
                          int64_t noiseIndex, const StepState *state) {
  const StepScalars s = loadScalars(state, 0.0, 0.0);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  forEachVector<V>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float w[W], g[W];
    loadVec<W>(master + i, w);
    loadVec<W>(grad + i, g);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      double gi = double(noise.add(g[k], noiseIndex + i + k)) * s.gradScale;
      w[k] = float(double(w[k]) - s.step * (gi + s.weightDecay * double(w[k])));
    }
    storeVec<W>(master + i, w);
  });
}

template <int V>
__global__ void momentumKernel(float *master, float *velocity,
                               const float *grad, int64_t n, double momentum,
                               bool nesterov, int64_t noiseIndex,
                               const StepState *state) {
  const StepScalars s = loadScalars(state, 0.0, 0.0);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  forEachVector<V>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float w[W], vel[W], g[W];
    loadVec<W>(master + i, w);
    loadVec<W>(velocity + i, vel);
    loadVec<W>(grad + i, g);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      double gi = double(noise.add(g[k], noiseIndex + i + k)) * s.gradScale;
      double v = momentum * double(vel[k]) + gi;
      vel[k] = float(v);
      double d = nesterov ? gi + momentum * v : v;
      w[k] = float(double(w[k]) - s.step * (d + s.weightDecay * double(w[k])));
    }
    storeVec<W>(velocity + i, vel);
    storeVec<W>(master + i, w);
  });
}

template <int V>
__global__ void adamwKernel(float *master, float *m, float *v,
                            const float *grad, int64_t n, double beta1,
                            double beta2, double eps, int64_t noiseIndex,
                            const StepState *state) {
  const StepScalars s = loadScalars(state, beta1, beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  forEachVector<V>(n, [&](auto width, int64_t i) {
    constexpr int W = decltype(width)::value;
    float w[W], mv[W], vv[W], g[W];
    loadVec<W>(master + i, w);
    loadVec<W>(m + i, mv);
    loadVec<W>(v + i, vv);
    loadVec<W>(grad + i, g);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      double gi = double(noise.add(g[k], noiseIndex + i + k)) * s.gradScale;
      double mi = beta1 * double(mv[k]) + (1.0 - beta1) * gi;
      double vi = beta2 * double(vv[k]) + (1.0 - beta2) * gi * gi;
      mv[k] = float(mi);
      vv[k] = float(vi);
      double u = (mi / s.c1) / (sqrt(vi / s.c2) + eps);
      w[k] = float(double(w[k]) - s.step * (u + s.weightDecay * double(w[k])));
    }
    storeVec<W>(m + i, mv);
    storeVec<W>(v + i, vv);
    storeVec<W>(master + i, w);
  });
}

__global__ void clipFactorsKernel(const float *n2, const float *mask, float *c,
                                  int64_t batch, int64_t unitRecords,
                                  ClipMode mode, double clipShare, double gamma,
                                  double relErr, const StepState *state) {
  // The run's C times this factor's share of it.
  const double maxNorm = state->clipNorm * clipShare;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < batch;
       b += int64_t(gridDim.x) * blockDim.x) {
    const double sq = n2[b / unitRecords];
    const double mk = mask[b];
    // A masked sample, or one whose norm is NaN (min(1, NaN) would let it
    // through unclipped), contributes nothing. A Gram norm can round to
    // slightly below zero; its true value is >= 0.
    if (mk == 0.0 || sq != sq) {
      c[b] = 0.0f;
      continue;
    }
    const double norm = sqrt(sq > 0.0 ? sq : 0.0) * (1.0 + relErr);
    const double f = mode == ClipMode::Automatic
                         ? maxNorm / (norm + gamma)
                         : fmin(1.0, maxNorm / (norm + 1e-6));
    c[b] = float(mk * f);
  }
}

constexpr int kThreads = 256;

/// Four f32 a thread when every pointer is 16-byte aligned.
bool vectorizable(std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (!aligned16(p))
      return false;
  return true;
}

} // namespace

void clip_factors(Rank *rank, DType acc, const void *n2, const void *mask,
                  void *c, int64_t batch, int64_t unitRecords, ClipMode mode,
                  double clipShare, double gamma, double relErr) {
  requireAcc(acc, "clip_factors");
  if (unitRecords < 1 || batch % unitRecords != 0)
    throw std::invalid_argument("clip_factors: the batch " +
                                std::to_string(batch) +
                                " is not a multiple of the unit's " +
                                std::to_string(unitRecords) + " records");
  if (batch <= 0)
    return;
  clipFactorsKernel<<<gridFor(rank, batch, kThreads), kThreads, 0,
                      computeStream(rank)>>>(
      static_cast<const float *>(n2), static_cast<const float *>(mask),
      static_cast<float *>(c), batch, unitRecords, mode, clipShare, gamma,
      relErr, deviceStepState(rank));
  checkLaunch("clip_factors");
}

void sgd_update(Rank *rank, DType acc, void *master, const void *grad,
                int64_t n, int64_t noiseIndex) {
  requireAcc(acc, "sgd_update");
  if (n <= 0)
    return;
  const StepState *state = deviceStepState(rank);
  auto *w = static_cast<float *>(master);
  auto *g = static_cast<const float *>(grad);
  cudaStream_t stream = computeStream(rank);
  if (vectorizable({master, grad}))
    sgdKernel<4><<<gridFor(rank, n / 4, kThreads), kThreads, 0, stream>>>(
        w, g, n, noiseIndex, state);
  else
    sgdKernel<1><<<gridFor(rank, n, kThreads), kThreads, 0, stream>>>(
        w, g, n, noiseIndex, state);
  checkLaunch("sgd_update");
}

void momentum_update(Rank *rank, DType acc, void *master, void *velocity,
                     const void *grad, int64_t n, double momentum,
                     bool nesterov, int64_t noiseIndex) {
  requireAcc(acc, "momentum_update");
  if (n <= 0)
    return;
  const StepState *state = deviceStepState(rank);
  auto *w = static_cast<float *>(master);
  auto *vel = static_cast<float *>(velocity);
  auto *g = static_cast<const float *>(grad);
  cudaStream_t stream = computeStream(rank);
  if (vectorizable({master, velocity, grad}))
    momentumKernel<4><<<gridFor(rank, n / 4, kThreads), kThreads, 0, stream>>>(
        w, vel, g, n, momentum, nesterov, noiseIndex, state);
  else
    momentumKernel<1><<<gridFor(rank, n, kThreads), kThreads, 0, stream>>>(
        w, vel, g, n, momentum, nesterov, noiseIndex, state);
  checkLaunch("momentum_update");
}

void adamw_update(Rank *rank, DType acc, void *master, void *m, void *v,
                  const void *grad, int64_t n, double beta1, double beta2,
                  double eps, int64_t noiseIndex) {
  requireAcc(acc, "adamw_update");
  if (n <= 0)
    return;
  const StepState *state = deviceStepState(rank);
  auto *w = static_cast<float *>(master);
  auto *mf = static_cast<float *>(m);
  auto *vf = static_cast<float *>(v);
  auto *g = static_cast<const float *>(grad);
  cudaStream_t stream = computeStream(rank);
  if (vectorizable({master, m, v, grad}))
    adamwKernel<4><<<gridFor(rank, n / 4, kThreads), kThreads, 0, stream>>>(
        w, mf, vf, g, n, beta1, beta2, eps, noiseIndex, state);
  else
    adamwKernel<1><<<gridFor(rank, n, kThreads), kThreads, 0, stream>>>(
        w, mf, vf, g, n, beta1, beta2, eps, noiseIndex, state);
  checkLaunch("adamw_update");
}

} // namespace dprt::cuda
