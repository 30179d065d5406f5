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
// Each optimizer is one element step (Sgd, Momentum, AdamW; OptimizerSteps.cuh)
// that one kernel runs on a gradient read from a buffer (the plain update) or
// formed from materialized rows (the *_update_rows form), so that the two
// give the same bits by construction. The small _rows updates of an open
// update_group run together (UpdateGroups.cu).
//
//===----------------------------------------------------------------------===//

#include "OptimizerSteps.cuh"
#include "UpdateGroups.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
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

/// Four f32 a thread when every pointer is 16-byte aligned.
bool vectorizable(std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (!aligned16(p))
      return false;
  return true;
}

float *f32(void *p) { return static_cast<float *>(p); }

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
