//===- keys.h - Generator keys from the step state --------------*- C++ -*-===//
//
// How every backend turns the StepState into the keys of rng.h, so that the
// CPU and CUDA backends draw the same parameter initialization and the same
// noise for the same (seed, step, global index).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_KEYS_H
#define DPRT_KEYS_H

#include "dprt/rank.h"
#include "dprt/rng.h"

namespace dprt {

/// The noise key: seed = noiseKey[0] (Philox); the ChaCha20 key is the eight
/// 32-bit halves of noiseKey[0..3], low half first.
DPRT_HOST_DEVICE inline NoiseKey noiseKeyOf(const StepState &state) {
  NoiseKey key;
  key.seed = state.noiseKey[0];
  for (int i = 0; i < 4; ++i) {
    key.chachaKey[2 * i] = static_cast<uint32_t>(state.noiseKey[i]);
    key.chachaKey[2 * i + 1] = static_cast<uint32_t>(state.noiseKey[i] >> 32);
  }
  return key;
}

DPRT_HOST_DEVICE inline NoiseGenerator noiseGeneratorOf(const StepState &state) {
  return state.noiseGenerator == static_cast<int32_t>(NoiseGeneratorKind::ChaCha20)
             ? NoiseGenerator::ChaCha20
             : NoiseGenerator::Philox;
}

/// Initialization draws Philox values at step 0 keyed by initKey.
DPRT_HOST_DEVICE inline NoiseKey initKeyOf(const StepState &state) {
  return NoiseKey::fromSeed(state.initKey);
}

} // namespace dprt

#endif // DPRT_KEYS_H
