//===- MicroSteps.h - One rank's physical batches of a step -----*- C++ -*-===//
//
// The micro-steps of one step on one rank (docs/training-program.md, "One
// step"): each physical batch's rows written to the arena, real rows first
// and then padding; the program's micro-step for the fewest rows that hold
// them run; the per-sample losses read back; the update and its finite
// check. All of it is queued on the device without waiting, so that the GPU
// goes from one micro-step to the next (and to the update) without idling
// for the host. And, once a run on CUDA, the warm-up of the smaller
// micro-steps.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_MICROSTEPS_H
#define DPRT_DRIVER_MICROSTEPS_H

#include "Dataset.h"
#include "ProcessRanks.h"

#include "dprt/program.h"
#include "privacy/Sampler.h"

#include <cstdint>
#include <vector>

namespace dprt::driver {

/// The runCaptured slots of the driver: dp_microstep, dp_apply, and
/// dp_microstep_<rows> in kSizedSlots + rows.
constexpr int kMicrostepSlot = 0;
constexpr int kApplySlot = 1;
constexpr int kSizedSlots = 2;

/// What one rank's micro-steps of a step add up to (the loss once
/// addQueuedLosses has read it).
struct MicroStepSums {
  double loss = 0;    ///< per-sample losses of the real records, summed
  double samples = 0; ///< real records
  double tokens = 0;  ///< their counted tokens
  double rows = 0;    ///< rows the micro-steps ran, padding included
};

/// Queues `slot`'s micro-steps of `plan`: logical position p is record
/// batch[p] (-1: an empty slot of a user). Each runs the smallest
/// micro-step of the program that holds its real rows (every rank runs one,
/// so a rank without rows runs the smallest). Returns without waiting for
/// the device; the sums' loss stays 0 until addQueuedLosses.
MicroStepSums runMicroSteps(RankSlot &slot, const ProgramSpec &spec,
                            const Dataset &data,
                            const std::vector<int64_t> &batch,
                            const privacy::PhysicalBatchPlan &plan);

/// Adds to `sums` the per-sample losses of the real records of the
/// micro-steps runMicroSteps queued for the same `batch` and `plan`, once
/// synchronize(&slot.rank) has returned.
void addQueuedLosses(const RankSlot &slot, const ProgramSpec &spec,
                     const std::vector<int64_t> &batch,
                     const privacy::PhysicalBatchPlan &plan,
                     MicroStepSums &sums);

/// Queues dp_apply after what `slot`'s rank queued so far, then the copy of
/// the StepState's nonFiniteGradient (which the update kernels set) into
/// slot.nonFiniteGradient: read once the next synchronize(&slot.rank) has
/// returned (queuedUpdateMetNonFinite), with no wait of its own.
void queueUpdate(RankSlot &slot);
bool queuedUpdateMetNonFinite(const RankSlot &slot);

/// Runs and captures the smaller micro-steps once, on padding rows only,
/// before the first real micro-step (CUDA; see MicroSteps.cpp for why).
void warmSmallerMicroSteps(RankSlot &slot, const ProgramSpec &spec,
                           const Dataset &data);

} // namespace dprt::driver

#endif // DPRT_DRIVER_MICROSTEPS_H
