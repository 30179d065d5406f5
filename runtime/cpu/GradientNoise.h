//===- GradientNoise.h - Gradient noise, per element ------------*- C++ -*-===//
//
// One definition of the Gaussian noise the CPU backend adds to gradients,
// for add_noise (which stores grad + noise) and for the optimizers that add
// it on their way through the gradient (kernels.inc, noiseIndex): the two
// give the same bits by construction.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CPU_GRADIENTNOISE_H
#define DPRT_CPU_GRADIENTNOISE_H

#include "dprt/keys.h"
#include "dprt/rank.h"
#include "dprt/rng.h"

#include <stdexcept>
#include <string>

namespace dprt::cpu {

/// N(0, noiseStd^2) at (noise key, StepState::step, index): f64 gradients
/// add noiseStd * gaussianF64 (kGradientNoiseStream), f32 ones
/// float(noiseStd * double(gradientNoiseF32)). Nothing when noiseStd is 0 or
/// the caller has no noise (wanted = false).
class GradientNoise {
public:
  GradientNoise(const StepState &state, bool wanted)
      : on_(wanted && state.noiseStd != 0), std_(state.noiseStd),
        step_(static_cast<uint64_t>(state.step)) {
    if (!on_)
      return;
    // A corrupt state must not silently fall back to Philox.
    switch (static_cast<NoiseGeneratorKind>(state.noiseGenerator)) {
    case NoiseGeneratorKind::Philox:
    case NoiseGeneratorKind::ChaCha20:
      break;
    default:
      throw std::invalid_argument("add_noise: unknown noise generator " +
                                  std::to_string(state.noiseGenerator) +
                                  " in the step state");
    }
    generator_ = noiseGeneratorOf(state);
    key_ = noiseKeyOf(state);
  }

  bool on() const { return on_; }

  double add(double g, int64_t index) const {
    if (!on_)
      return g;
    return g + std_ * gaussianF64(generator_, key_, step_,
                                  static_cast<uint64_t>(index),
                                  kGradientNoiseStream);
  }

  /// gradientNoiseF32's value for `index`; the quad of the last call is
  /// kept, so that the callers' loops over consecutive elements run the
  /// block function once for four of them.
  float add(float g, int64_t index) const {
    if (!on_)
      return g;
    const uint64_t quad = static_cast<uint64_t>(index) >> 2;
    if (quad != quad_) {
      gradientNoiseQuadF32(generator_, key_, step_, quad, z_);
      quad_ = quad;
    }
    return g + static_cast<float>(
                   std_ *
                   static_cast<double>(z_[static_cast<uint64_t>(index) & 3u]));
  }

private:
  bool on_;
  double std_;
  uint64_t step_;
  NoiseGenerator generator_ = NoiseGenerator::Philox;
  NoiseKey key_{};
  mutable uint64_t quad_ = UINT64_MAX;
  mutable float z_[4] = {};
};

} // namespace dprt::cpu

#endif // DPRT_CPU_GRADIENTNOISE_H
