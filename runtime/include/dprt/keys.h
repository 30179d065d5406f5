//===- keys.h - The run's keys, derived in one place ------------*- C++ -*-===//
//
// A training run has two keys, carried in the StepState and in state.json:
//
//  - The noise key: 256 bits as four 64-bit words (StepState::noiseKey,
//    state.json's "noise_key"). It keys the gradient noise (add_noise) and
//    the batch sampler (PoissonSampler, ShuffleSampler) alike: who was
//    sampled is part of the mechanism, so a secret noise key must hide it
//    too, and the two must never drift apart. A run with a seed (Philox
//    recipes) expands the seed with SplitMix64 (noiseKeyWordsFromSeed); a
//    secure run uses 256 secret bits as the words.
//  - The initializer key: the seed itself (StepState::initKey). The initial
//    parameters do not depend on the data, so they need no secret.
//
// The words become the generator keys of rng.h in one way only
// (noiseKeyFromWords): Philox's 64-bit seed is words[0]; ChaCha20's key word
// 2i is the low half of words[i] and word 2i+1 its high half (the eight
// little-endian words of RFC 8439's state words 4..11).
//
// Every backend and the driver derive keys through this header, so that the
// CPU and CUDA backends draw the same initialization and noise for the same
// (seed, step, global index), and the sampler the driver builds draws with
// the key the kernels add noise with (test/unit/privacy/RngTest.cpp pins the
// derivation with known answers).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_KEYS_H
#define DPRT_KEYS_H

#include "dprt/rank.h"
#include "dprt/rng.h"

namespace dprt {

/// The noise key of a run with `seed`: four SplitMix64 outputs of the seed
/// (the ChaCha20 key of NoiseKey::fromSeed, packed low half first). Only as
/// secret as the seed: not for secure runs.
DPRT_HOST_DEVICE inline void noiseKeyWordsFromSeed(uint64_t seed,
                                                   uint64_t words[4]) {
  uint64_t state = seed;
  for (int i = 0; i < 4; ++i)
    words[i] = splitMix64(state);
}

/// The generator key of the noise key `words`: Philox reads words[0];
/// ChaCha20 the eight 32-bit halves of words[0..3], low half first.
DPRT_HOST_DEVICE inline NoiseKey noiseKeyFromWords(const uint64_t words[4]) {
  NoiseKey key;
  key.seed = words[0];
  for (int i = 0; i < 4; ++i) {
    key.chachaKey[2 * i] = static_cast<uint32_t>(words[i]);
    key.chachaKey[2 * i + 1] = static_cast<uint32_t>(words[i] >> 32);
  }
  return key;
}

/// The key add_noise draws with at a step.
DPRT_HOST_DEVICE inline NoiseKey noiseKeyOf(const StepState &state) {
  return noiseKeyFromWords(state.noiseKey);
}

/// The key the batch sampler draws with: the noise key, by design (see the
/// file comment).
inline NoiseKey samplingKeyFromWords(const uint64_t words[4]) {
  return noiseKeyFromWords(words);
}

/// The generator of a NoiseGeneratorKind as the StepState stores it; any
/// value but ChaCha20 reads as Philox (the CPU backend rejects unknown
/// values before asking).
DPRT_HOST_DEVICE inline NoiseGenerator
noiseGeneratorOf(int32_t noiseGeneratorKind) {
  return noiseGeneratorKind ==
                 static_cast<int32_t>(NoiseGeneratorKind::ChaCha20)
             ? NoiseGenerator::ChaCha20
             : NoiseGenerator::Philox;
}

DPRT_HOST_DEVICE inline NoiseGenerator
noiseGeneratorOf(const StepState &state) {
  return noiseGeneratorOf(state.noiseGenerator);
}

/// Initialization draws Philox values at step 0 keyed by the seed initKey.
DPRT_HOST_DEVICE inline NoiseKey initKeyOf(uint64_t initKey) {
  return NoiseKey::fromSeed(initKey);
}

DPRT_HOST_DEVICE inline NoiseKey initKeyOf(const StepState &state) {
  return initKeyOf(state.initKey);
}

} // namespace dprt

#endif // DPRT_KEYS_H
