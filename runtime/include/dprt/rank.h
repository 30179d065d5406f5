//===- rank.h - The per-rank execution context ----------------------------===//
//
// One `Rank` per participant of the grid (a thread on the CPU backend, a GPU
// on the CUDA backend). The emitted program receives a `Rank *` and addresses
// every buffer as `arena(rank) + offset`; kernels receive it to find their
// stream, library handles and the communicator.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_RANK_H
#define DPRT_RANK_H

#include "dprt/types.h"

#include <cstdint>

namespace dprt {

class Communicator;

/// Scalars that change from step to step, and the run's hyperparameters
/// (learning rate, weight decay, clipping bound), which the command line
/// sets without recompiling. They live in the arena (device memory on the
/// GPU) at `Rank::stateOffset`, so that kernels read them at run time and a
/// captured CUDA graph stays valid across steps. The driver writes them
/// before each micro-step and each optimizer step.
///
/// Keys of the random kernels (dprt/rng.h), identical on every backend and
/// derived only through dprt/keys.h:
///  - init_normal / init_uniform: Philox keyed by initKeyOf(state) (seed =
///    initKey), at (step 0, global index, kParameterInitStream); normal =
///    std * gaussianF64, uniform = bound * (2 * uniformF64 - 1), computed in
///    double and rounded once to the acc type.
///  - add_noise: noiseKeyOf(state) (Philox: noiseKey[0]; ChaCha20: the eight
///    32-bit halves of noiseKey, low half first) with the generator
///    noiseGenerator, at (step, global index);
///    f64: grad += noiseStd * gaussianF64 (kGradientNoiseStream),
///    f32: grad += float(noiseStd * double(gradientNoiseF32)) (four elements
///    a block of kGradientNoiseF32Stream; the CUDA backend computes
///    float(noiseStd) * z + grad with one rounding).
///    The driver's batch sampler draws with the same key.
struct StepState {
  /// The optimizer step being taken, starting at 1 (AdamW bias correction,
  /// noise counter).
  int64_t step;
  /// Standard deviation of the Gaussian noise added to the summed clipped
  /// gradient: sigma * C. Zero turns noise off.
  double noiseStd;
  /// Multiplies the noised gradient sum before the update: 1 / B_expected.
  double gradScale;
  /// Multiplies the learning rate: the schedule's factor at this step
  /// (warmup, then decay; 1 without a schedule).
  double lrScale;
  /// The learning rate of the run (--lr, else the recipe's): the optimizer
  /// steps by lr * lrScale.
  double lr;
  /// Decoupled weight decay of the run (--weight-decay, else the recipe's):
  /// master -= lr * lrScale * weightDecay * master.
  double weightDecay;
  /// The clipping bound C of the run (--clip, else the recipe's):
  /// clip_factors clips to clipNorm times its compiled share of C (1, or
  /// 1 / sqrt(L) per layer), and noiseStd = sigma * clipNorm.
  double clipNorm;
  /// Key of the noise generator (Philox uses key[0]; ChaCha20 all four).
  uint64_t noiseKey[4];
  /// Key of the parameter initializer (Philox, key[0]).
  uint64_t initKey;
  int32_t noiseGenerator; ///< a NoiseGeneratorKind
  /// Written by the device, not the driver: an optimizer update sets it to
  /// 1 when a gradient element it reads (before the noise) is not finite.
  /// The driver uploads the step's state with 0 and reads it back after
  /// dp_apply with a queued copy (queueUpdate), so no pass of its own reads
  /// the gradients for the check.
  int32_t nonFiniteGradient;
};

// The compiler reserves 256 bytes of the arena for the StepState
// (kStepStateBytes in passes/LowerToRuntime/LowerToRuntime.cpp).
static_assert(sizeof(StepState) <= 256,
              "the StepState outgrew the arena space the compiler reserves");

/// Backend-specific state (streams, BLAS handles, events); opaque here.
struct BackendState;

struct Rank {
  int32_t rank = 0;  ///< index in the grid
  int32_t world = 1; ///< number of ranks
  /// Hybrid sharding: the grid is `replicas` x shardsOf(rank); rank r holds
  /// shard r % shardsOf(rank) of every unit in replica r / shardsOf(rank)
  /// (the shards of one replica are consecutive ranks: one node). 1: FSDP
  /// over every rank.
  int32_t replicas = 1;
  char *arena = nullptr; ///< device memory on CUDA, host memory on CPU
  int64_t arenaBytes = 0;
  int64_t stateOffset = 0; ///< where the StepState lives in the arena
  /// Host copy of the step state; the driver edits it and calls
  /// `uploadStepState`.
  StepState hostState{};
  /// Every rank of the grid: the driver's host sums and barriers.
  Communicator *comm = nullptr;
  /// The ranks of this rank's replica, which split every unit between them
  /// (all_gather, reduce_scatter); null: `comm` (one replica).
  Communicator *shardComm = nullptr;
  /// The ranks holding this rank's shard in every replica (all_reduce);
  /// null with one replica.
  Communicator *replicaComm = nullptr;
  BackendState *backend = nullptr;
  /// Communication that compute waited for ("exposed"), measured by the
  /// backend while `measureExposedComm` is set (the driver sets it with
  /// `--trace`) and added to `exposedCommSeconds` when the backend learns it:
  /// on the CPU each collective blocks the rank's thread, so its whole
  /// duration counts; on CUDA, each wait of the compute stream for an event
  /// of the communication stream is timed with a pair of GPU events and
  /// counted at the next `synchronize`. The driver reads and resets it.
  bool measureExposedComm = false;
  double exposedCommSeconds = 0;
};

/// The number of ranks a unit is split over, and the shard `rank` holds:
/// it owns unit positions [shardIndexOf * shardElems, (shardIndexOf + 1) *
/// shardElems).
inline int32_t shardsOf(const Rank *rank) {
  return rank->world / rank->replicas;
}
inline int32_t shardIndexOf(const Rank *rank) {
  return rank->rank % shardsOf(rank);
}

/// Base address of the rank's arena, for the emitted code.
inline char *arena(Rank *rank) { return rank->arena; }

} // namespace dprt

#endif // DPRT_RANK_H
