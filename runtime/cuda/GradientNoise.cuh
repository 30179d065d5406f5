//===- GradientNoise.cuh - Gradient noise, per element ---------*- CUDA -*-===//
//
// One definition of the Gaussian noise the CUDA backend adds to gradients,
// for add_noise (which stores grad + noise) and for the optimizers that add
// it in registers on their way through the gradient (kernels.inc,
// noiseIndex): the two give the same bits by construction.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_GRADIENTNOISE_CUH
#define DPRT_CUDA_GRADIENTNOISE_CUH

#include "dprt/keys.h"
#include "dprt/rank.h"
#include "dprt/rng.h"

#include <type_traits>

namespace dprt::cuda {

/// N(0, noiseStd^2) at (noise key, StepState::step, index), added in f32 as
/// float(noiseStd) * z with z = gradientNoiseF32; nothing when noiseStd is 0
/// or the caller has no noise (on = false).
struct GradientNoise {
  NoiseKey key;
  NoiseGenerator generator;
  uint64_t step;
  float std;
  bool on;

  __device__ static GradientNoise of(const StepState &state, bool wanted) {
    GradientNoise n;
    n.on = wanted && state.noiseStd != 0.0;
    n.std = float(state.noiseStd);
    n.step = uint64_t(state.step);
    n.generator = noiseGeneratorOf(state);
    if (n.on)
      n.key = noiseKeyOf(state);
    return n;
  }

  /// The value add_noise stores at global index `index` for gradient g.
  __device__ __forceinline__ float add(float g, int64_t index) const {
    if (!on)
      return g;
    // An explicit fma: the same bits in every kernel that inlines it.
    return __fmaf_rn(
        std, gradientNoiseF32(generator, key, step, uint64_t(index)), g);
  }

  /// add() for elements index .. index + W - 1, with one block function a
  /// quad of elements instead of one an element (W / 4 + 1 blocks at most):
  /// the same bits as W calls of add().
  template <int W>
  __device__ __forceinline__ void addAll(float (&g)[W], int64_t index) const {
    if (!on)
      return;
    if constexpr (W < 4) {
#pragma unroll
      for (int k = 0; k < W; ++k)
        g[k] = add(g[k], index + k);
    } else {
      atLane(index,
             [&](auto lane) { addFrom<decltype(lane)::value>(g, index); });
    }
  }

  /// The standard normal values addAll adds to elements index .. index +
  /// W - 1 (W of 4 or more), nothing when the noise is off: a kernel draws
  /// them while its loads are in flight and adds them with addDrawn.
  template <int W>
  __device__ __forceinline__ void draw(float (&z)[W], int64_t index) const {
    static_assert(W >= 4, "draw: vectors of 4 or more");
    if (!on)
      return;
    atLane(index,
           [&](auto lane) { drawFrom<decltype(lane)::value>(z, index); });
  }

  /// g[k] + std z[k], as addAll adds.
  template <int W>
  __device__ __forceinline__ void addDrawn(float (&g)[W],
                                           const float (&z)[W]) const {
    if (!on)
      return;
#pragma unroll
    for (int k = 0; k < W; ++k)
      g[k] = __fmaf_rn(std, z[k], g[k]);
  }

private:
  /// f(lane) with the lane of element `index` in its quad as a constant
  /// (std::integral_constant), so that the quads' values stay in registers.
  /// The lane is the same in every thread of a launch whose vectors start at
  /// multiples of 4, so the branches do not diverge.
  template <class F>
  static __device__ __forceinline__ void atLane(int64_t index, const F &f) {
    switch (int(uint64_t(index) & 3u)) {
    case 0:
      f(std::integral_constant<int, 0>{});
      break;
    case 1:
      f(std::integral_constant<int, 1>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    default:
      f(std::integral_constant<int, 3>{});
      break;
    }
  }

  /// The values of elements index .. index + W - 1 with the first at lane
  /// kLane of its quad (a constant, so that the quads' values stay in
  /// registers).
  template <int kLane, int W>
  __device__ __forceinline__ void drawFrom(float (&out)[W],
                                           int64_t index) const {
    constexpr int kQuads = (kLane + W + 3) / 4;
    float z[4 * kQuads];
    const uint64_t first = uint64_t(index) >> 2;
#pragma unroll
    for (int q = 0; q < kQuads; ++q)
      gradientNoiseQuadF32(generator, key, step, first + q, z + 4 * q);
#pragma unroll
    for (int k = 0; k < W; ++k)
      out[k] = z[kLane + k];
  }

  /// addAll with the first element at lane kLane of its quad.
  template <int kLane, int W>
  __device__ __forceinline__ void addFrom(float (&g)[W], int64_t index) const {
    float z[W];
    drawFrom<kLane>(z, index);
#pragma unroll
    for (int k = 0; k < W; ++k)
      g[k] = __fmaf_rn(std, z[k], g[k]);
  }
};

} // namespace dprt::cuda

#endif // DPRT_CUDA_GRADIENTNOISE_CUH
