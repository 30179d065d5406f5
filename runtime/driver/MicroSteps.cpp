//===- MicroSteps.cpp - One rank's physical batches of a step -------------===//

#include "MicroSteps.h"

#include "MicroStepCount.h"

#include "common/Trace.h"
#include "dprt/backend.h"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace dprt::driver {
namespace {

/// A micro-step function, the rows it runs on and its runCaptured slot.
struct MicroStepChoice {
  int64_t rows;
  MicrostepFn run;
  int slot;
};

MicroStepChoice chooseMicrostep(const ProgramSpec &spec, int64_t count) {
  for (const SizedMicrostep &sized : spec.smallerMicrosteps)
    if (sized.rows >= count)
      return {sized.rows, sized.run, kSizedSlots + int(sized.rows)};
  return {spec.physicalBatch, dp_microstep, kMicrostepSlot};
}

/// Writes the first `rows` rows of the inputs and mask: the real rows of
/// `part`, then padding.
void fillRows(RankSlot &slot, const ProgramSpec &spec, const Dataset &data,
              const std::vector<int64_t> &batch, int64_t rows,
              privacy::PhysicalBatchPlan::Slice part) {
  Rank &rank = slot.rank;
  DPRT_TRACE(rank.rank, trace::Track::Compute, "fill_inputs");
  const DType acc = accOf(spec.compute);
  const int64_t accBytes = sizeOf(acc);
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const InputSpec &input = spec.inputs[k];
    std::vector<char> &rowsOut = slot.inputs[k];
    const int64_t rowBytes =
        static_cast<int64_t>(rowsOut.size()) / spec.physicalBatch;
    for (int64_t row = 0; row < rows; ++row)
      data.writeRow(input, row < part.count ? batch[part.first + row] : -1,
                    rowsOut.data() + row * rowBytes);
    // After the micro-step queued before, which still reads the old rows.
    queueCopyToArena(&rank, input.offset, rowsOut.data(), rows * rowBytes);
  }
  for (int64_t row = 0; row < rows; ++row)
    storeAs(acc, row < part.count && batch[part.first + row] >= 0 ? 1.0 : 0.0,
            slot.mask.data() + row * accBytes);
  queueCopyToArena(&rank, spec.maskOffset, slot.mask.data(), rows * accBytes);
}

/// Where micro-step m's losses land in slot.stepLosses.
int64_t stepLossesAt(const ProgramSpec &spec, int64_t m) {
  return m * spec.physicalBatch * sizeOf(accOf(spec.compute));
}

} // namespace

MicroStepSums runMicroSteps(RankSlot &slot, const ProgramSpec &spec,
                            const Dataset &data,
                            const std::vector<int64_t> &batch,
                            const privacy::PhysicalBatchPlan &plan) {
  Rank &rank = slot.rank;
  const DType acc = accOf(spec.compute);
  const int64_t accBytes = sizeOf(acc);
  MicroStepSums sums;
  requireMicroStepCount(spec, plan.microSteps);
  if (spec.lossOffset >= 0)
    slot.stepLosses.resize(size_t(stepLossesAt(spec, plan.microSteps)));
  for (int64_t m = 0; m < plan.microSteps; ++m) {
    const privacy::PhysicalBatchPlan::Slice part = plan.slice(m, rank.rank);
    // The first `rows` rows of the inputs, mask and losses are its own.
    const MicroStepChoice chosen = chooseMicrostep(spec, part.count);
    fillRows(slot, spec, data, batch, chosen.rows, part);
    {
      DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_microstep");
      runCaptured(&rank, chosen.slot, chosen.run);
    }
    sums.rows += double(chosen.rows);
    if (spec.lossOffset >= 0)
      queueCopyFromArena(&rank, slot.stepLosses.data() + stepLossesAt(spec, m),
                         spec.lossOffset, chosen.rows * accBytes);
    for (int64_t row = 0; row < part.count; ++row)
      if (batch[part.first + row] >= 0) {
        sums.samples += 1;
        sums.tokens +=
            static_cast<double>(data.tokensOf(batch[part.first + row]));
      }
  }
  return sums;
}

void addQueuedLosses(const RankSlot &slot, const ProgramSpec &spec,
                     const std::vector<int64_t> &batch,
                     const privacy::PhysicalBatchPlan &plan,
                     MicroStepSums &sums) {
  if (spec.lossOffset < 0)
    return;
  const DType acc = accOf(spec.compute);
  const int64_t accBytes = sizeOf(acc);
  for (int64_t m = 0; m < plan.microSteps; ++m) {
    const privacy::PhysicalBatchPlan::Slice part =
        plan.slice(m, slot.rank.rank);
    const char *losses = slot.stepLosses.data() + stepLossesAt(spec, m);
    for (int64_t row = 0; row < part.count; ++row)
      if (batch[part.first + row] >= 0)
        sums.loss += loadAs(acc, losses + row * accBytes);
  }
}

void queueUpdate(RankSlot &slot) {
  Rank &rank = slot.rank;
  {
    DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_apply");
    runCaptured(&rank, kApplySlot, dp_apply);
  }
  // Queued like the losses: updatesMetNonFinite would wait for the device
  // and then copy, a second round trip after the step's wait.
  queueCopyFromArena(&rank, &slot.nonFiniteGradient,
                     rank.stateOffset +
                         int64_t(offsetof(StepState, nonFiniteGradient)),
                     int64_t(sizeof(slot.nonFiniteGradient)));
}

bool queuedUpdateMetNonFinite(const RankSlot &slot) {
  return slot.nonFiniteGradient != 0;
}

// A CUDA graph is captured on a function's second call, after a first one
// that sets up what its shapes need (cuBLASLt plans, cuDNN graphs): together
// ~0.15 s. The smaller micro-steps take both calls here, on padding rows
// only (mask 0: their clipped gradients are zeros, added exactly), so that
// no rank stalls the others on a size's first use in a later step.
//
// The full micro-step's first run comes first and the smaller ones follow
// largest first: scratch that kernels outgrow after a graph captured it
// stays allocated, so growing it size by size would keep every smaller
// size's buffer (+317 MiB measured for the 1.1B model).
void warmSmallerMicroSteps(RankSlot &slot, const ProgramSpec &spec,
                           const Dataset &data) {
  if (spec.smallerMicrosteps.empty())
    return;
  Rank &rank = slot.rank;
  DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_microstep warm-up");
  const std::vector<int64_t> none;
  fillRows(slot, spec, data, none, spec.physicalBatch, {0, 0});
  runCaptured(&rank, kMicrostepSlot, dp_microstep);
  for (auto sized = spec.smallerMicrosteps.rbegin();
       sized != spec.smallerMicrosteps.rend(); ++sized) {
    fillRows(slot, spec, data, none, sized->rows, {0, 0});
    for (int call = 0; call < 2; ++call)
      runCaptured(&rank, kSizedSlots + int(sized->rows), sized->run);
  }
}

} // namespace dprt::driver
