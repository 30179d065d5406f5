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

namespace dprt::cuda {

/// N(0, noiseStd^2) at (noise key, StepState::step, index,
/// kGradientNoiseStream), added in f32 as float(noiseStd) * z; nothing when
/// noiseStd is 0 or the caller has no noise (on = false).
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
    return __fmaf_rn(std,
                     gaussianF32(generator, key, step, uint64_t(index),
                                 kGradientNoiseStream),
                     g);
  }
};

} // namespace dprt::cuda

#endif // DPRT_CUDA_GRADIENTNOISE_CUH
