//===- TrainStep.cpp - One step of the training program -------------------===//
//
// Trainer::trainStep (TrainLoop.h): the main thread samples the logical
// batch and the physical-batch plan, then every rank thread fills its rows,
// queues its micro-steps and the optimizer step, waits for them, and the
// threads meet again to add up the losses. Where nothing between two steps
// needs the parameters (runsAhead), each rank queues the next step as soon
// as this one's losses are read, so that the GPU runs from one step into
// the next while the host writes the metrics, the progress line and the
// privacy accounting. On one H200 the 1.1B steps' idle fell by about 0.1 ms
// a step; their tokens/s did not move under the power cap, but a slow
// metrics file or terminal no longer holds the GPU (docs/PERFORMANCE.md).
//
//===----------------------------------------------------------------------===//

#include "TrainLoop.h"

#include "common/FaultReport.h"
#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

namespace dprt::driver {

PlannedStep Trainer::planStep(int64_t step) const {
  PlannedStep p;
  p.step = step;
  // Under user-level DP the batch is k slots a sampled user: its records,
  // then -1 (padding) up to k; k divides the physical batch, so a user's
  // slots lie in one physical batch, where the clip factor of slot b is that
  // of the user b / k.
  p.batch = userSampler_ ? userSampler_->sample(step)
                         : privacy_->sample(step, data_->size());
  p.plan = privacy::planPhysicalBatches(
      static_cast<int64_t>(p.batch.size()), ranks_->launch().world,
      spec_.physicalBatch, userSampler_ ? spec_.recipe.userRecords : 1);
  p.state = privacy_->stepState(step);
  p.state.lr = hyper_.lr;
  p.state.lrScale = hyper_.schedule.factor(step);
  p.state.weightDecay = hyper_.weightDecay;
  return p;
}

namespace {

/// DPRT_TEST_RUN_AHEAD=1: the CPU backend runs ahead too, for the tests of
/// the driver's order (its work runs when queued, so it gains nothing and
/// its step times would each hold the next step's work).
bool testRunAhead() {
  const char *value = std::getenv("DPRT_TEST_RUN_AHEAD");
  return value && std::string(value) == "1";
}

} // namespace

bool Trainer::runsAhead(int64_t step) const {
  // What happens between two steps must see the parameters of the step
  // before: a checkpoint, an evaluation, the end of the run. Steps that
  // check for non-finite values before their update wait for the device
  // mid-step anyway. With several ranks the steps stay one at a time: a
  // rank whose next step failed while the others ran its collectives would
  // leave them waiting in the wrong collective, where today every rank
  // stops at the failing step (TrainingProgram.AFailingRankStopsEveryRank).
  double unused = 0;
  return (spec_.backend == "cuda" || testRunAhead()) && step < totalSteps_ &&
         !o_.skipNonFiniteSteps && ranks_->launch().world == 1 &&
         !(!o_.save.empty() && o_.saveEvery > 0 && step % o_.saveEvery == 0) &&
         !(evalData_ && o_.evalEvery > 0 && step % o_.evalEvery == 0) &&
         privacy_->budgetAllows(step + 1, unused);
}

MicroStepSums Trainer::queueMicroSteps(RankSlot &slot, const PlannedStep &p,
                                       bool warmSizes) {
  Rank &rank = slot.rank;
  rank.hostState = p.state;
  uploadStepState(&rank);
  rank.exposedCommSeconds = 0;
  if (warmSizes)
    warmSmallerMicroSteps(slot, spec_, *data_);
  return runMicroSteps(slot, spec_, *data_, p.batch, p.plan);
}

void Trainer::trainStep(int64_t step, StepMetrics &metrics) {
  // This step's work is on the devices already when the step before queued
  // it (runsAhead); the next one's is queued as soon as this one's is done,
  // before the host writes this step's metrics.
  std::optional<QueuedStep> queued;
  queued.swap(ahead_);
  const PlannedStep current =
      queued ? std::move(queued->planned) : planStep(step);
  const std::vector<int64_t> &batch = current.batch;
  const privacy::PhysicalBatchPlan &plan = current.plan;
  const StepState &state = current.state;
  if (runsAhead(step)) {
    ahead_.emplace();
    ahead_->planned = planStep(step + 1);
    ahead_->done.resize(size_t(ranks_->launch().localRanks));
    ahead_->errors.resize(size_t(ranks_->launch().localRanks));
  }
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  StepTotals totals;
  int64_t peak = 0;
  struct {
    bool loss = false, gradient = false;
  } nonFinite;

  // With several processes each rank's heartbeat (its step time and peak
  // memory) rides on the step's final sum: two entries per rank, zero but
  // its own.
  const bool heartbeats = ranks_->launch().multiProcess;
  const int world = ranks_->launch().world;
  faults::setStep(step);
  const bool warmSizes = !sizesWarm_ && spec_.backend == "cuda";
  sizesWarm_ = true;
  // A step queued ahead ran from the end of the step before: the steps'
  // times add up to the wall time.
  const auto begin = queued ? queued->since : Clock::now();
  ranks_->run([&](int i) {
    RankSlot &slot = ranks_->slot(i);
    Rank &rank = slot.rank;
    faults::injectTestFault(rank.rank, step);
    // Thrown where the step would have thrown it without running ahead.
    if (queued && queued->errors[size_t(i)])
      std::rethrow_exception(queued->errors[size_t(i)]);
    MicroStepSums done = queued ? queued->done[size_t(i)]
                                : queueMicroSteps(slot, current, warmSizes);
    // A non-finite loss or clipped gradient sum would spread NaN into every
    // parameter. The verdicts are all-reduced, so that every rank takes (or
    // skips, or stops at) the update alike. Where the step may be skipped
    // (--skip-nonfinite-steps) both are known before the update: the loss
    // from the micro-steps, the gradient from a pass of its own over the
    // gradient shards. A run that stops instead queues the update right
    // behind the micro-steps, with no wait for the host between them; the
    // update kernels test the gradient values they read
    // (queuedUpdateMetNonFinite, below), the loss is read after, and the run
    // stops before anything of the step is saved.
    bool update = true;
    if (o_.skipNonFiniteSteps) {
      synchronize(&rank);
      addQueuedLosses(slot, spec_, batch, plan, done);
      // loss sum, ranks with a bad gradient; all trainable units in one
      // request: one wait for the device a step.
      double verdict[2] = {done.loss, 0};
      if (!allFiniteRanges(&rank, acc, finiteOffsets_.data(),
                           finiteCounts_.data(),
                           int64_t(finiteOffsets_.size())))
        verdict[1] = 1;
      rank.comm->allReduceHost(verdict, 2);
      update = std::isfinite(verdict[0]) && verdict[1] == 0;
      if (i == 0) {
        nonFinite.loss = !std::isfinite(verdict[0]);
        nonFinite.gradient = verdict[1] != 0;
      }
    }
    if (update && !queued) {
      queueUpdate(slot);
    } else if (!update) {
      // No noise, no optimizer step: the gradients are dropped as dp_apply
      // would have zeroed them after using them.
      for (const UnitSpec &unit : spec_.units)
        if (unit.gradShard >= 0)
          zero(&rank, rank.arena + unit.gradShard, unit.shardElems * accBytes);
    }
    synchronize(&rank);
    if (!o_.skipNonFiniteSteps)
      addQueuedLosses(slot, spec_, batch, plan, done);
    // loss, samples, tokens, exposed comm, rows run, ranks whose update met
    // a gradient that is not finite, then the heartbeats
    std::vector<double> all = {done.loss, done.samples, done.tokens,
                               rank.exposedCommSeconds, done.rows};
    all.push_back(update && !o_.skipNonFiniteSteps &&
                          queuedUpdateMetNonFinite(slot)
                      ? 1.0
                      : 0.0);
    if (heartbeats) {
      all.resize(6 + 2 * world, 0.0);
      all[6 + 2 * rank.rank] = secondsSince(begin);
      all[7 + 2 * rank.rank] = double(peakMemoryBytes(&rank));
    }
    // The next step goes to the device now, after this one's losses and
    // flag were read from the buffers it reuses. An error is this step's
    // to keep until its metrics are written.
    if (ahead_) {
      try {
        ahead_->done[size_t(i)] = queueMicroSteps(slot, ahead_->planned, false);
        queueUpdate(slot);
      } catch (...) {
        ahead_->errors[size_t(i)] = std::current_exception();
      }
    }
    rank.comm->allReduceHost(all.data(), int(all.size()));
    if (i == 0) {
      totals = StepTotals{all[0], all[1], all[2], all[3], all[4]};
      if (!o_.skipNonFiniteSteps)
        nonFinite.loss = !std::isfinite(all[0]);
      nonFinite.gradient |= all[5] > 0;
      peak = peakMemoryBytes(&rank);
      for (int r = 0; heartbeats && r < world; ++r)
        metrics.ranks.push_back(
            {r, all[6 + 2 * r], static_cast<int64_t>(all[7 + 2 * r])});
    }
  });
  const auto stepEnd = Clock::now();
  if (ahead_)
    ahead_->since = stepEnd;
  const double seconds = std::chrono::duration<double>(stepEnd - begin).count();
  if ((nonFinite.loss || nonFinite.gradient) && !o_.skipNonFiniteSteps)
    throw std::runtime_error(
        "step " + std::to_string(step) + ": the " +
        (nonFinite.loss ? "loss" : "clipped gradient sum") +
        " is not finite (NaN or infinity, from the sampled records or the "
        "parameters); stopped at the update, so nothing of this step was "
        "saved; pass --skip-nonfinite-steps to skip such steps");

  if (nonFinite.loss || nonFinite.gradient)
    warn("step " + std::to_string(step) + ": the " +
         (nonFinite.loss ? "loss" : "clipped gradient sum") +
         " is not finite; skipped (no update, counted for epsilon)");
  // A skipped step still counts: its batch was sampled.
  privacy_->composeStep();
  step_ = step;

  metrics.step = step;
  metrics.samples = static_cast<int64_t>(totals.samples);
  metrics.tokens = static_cast<int64_t>(totals.tokens);
  metrics.loss = spec_.lossOffset >= 0 && totals.samples > 0
                     ? totals.loss / totals.samples
                     : std::nan("");
  metrics.epsilon = privacy_->metricsEpsilon(step, metrics.epsilonExact);
  metrics.lr = state.lr * state.lrScale;
  metrics.microSteps = plan.microSteps;
  metrics.paddingRows = static_cast<int64_t>(totals.rows - totals.samples);
  if (userSampler_) {
    metrics.maxRecordsPerUser = userSampler_->maxRecords();
    metrics.users =
        static_cast<int64_t>(batch.size()) / metrics.maxRecordsPerUser;
  }
  metrics.stepSeconds = seconds;
  metrics.queuedAhead = queued.has_value();
  metrics.wallSeconds = secondsSince(start_);
  metrics.memoryBytes = peak;
  metrics.skipped = nonFinite.loss || nonFinite.gradient;
  if (!o_.trace.empty()) // else it stays NaN: not measured
    metrics.exposedCommSeconds =
        totals.exposedCommSeconds / ranks_->launch().world;
  report_.addStep(metrics);
}

} // namespace dprt::driver
