//===- TrainLoop.h - The Trainer's state, shared by its files ---*- C++ -*-===//
//
// Internal to the driver: the Trainer that runTrainingProgram (Trainer.h)
// runs. Trainer.cpp holds the run (outputs, data, checkpoints, evaluation,
// export, the step loop); TrainStep.cpp one step: its batch, its work
// queued on the ranks, the wait for it and its metrics, with the next step
// queued before the host writes them (Trainer::runsAhead). Compiled once per
// backend, like the rest of what touches the ranks.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TRAINLOOP_H
#define DPRT_DRIVER_TRAINLOOP_H

#include "Checkpoint.h"
#include "Checkpointer.h"
#include "Dataset.h"
#include "FiniteChecks.h"
#include "HfShards.h"
#include "HfWeights.h"
#include "MicroSteps.h"
#include "Options.h"
#include "PrivacySession.h"
#include "ProcessRanks.h"
#include "Progress.h"
#include "RunReport.h"
#include "Schedule.h"
#include "TextGenerator.h"
#include "Tokenizer.h"

#include "dprt/program.h"
#include "dprt/rank.h"
#include "privacy/Sampler.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dprt::driver {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Per-rank totals of one step, summed over the ranks.
struct StepTotals {
  double loss = 0;
  double samples = 0;
  double tokens = 0;
  double exposedCommSeconds = 0; ///< summed over the ranks
  double rows = 0;               ///< rows the micro-steps ran, padding included
};

/// A step's sampled records, their physical batches and its StepState.
struct PlannedStep {
  int64_t step = 0;
  std::vector<int64_t> batch;
  privacy::PhysicalBatchPlan plan{};
  StepState state{};
};

/// A step the one before queued on every local rank (Trainer::runsAhead):
/// what each rank's micro-steps add up to, or the error queuing them threw.
struct QueuedStep {
  PlannedStep planned;
  std::vector<MicroStepSums> done;
  std::vector<std::exception_ptr> errors;
  Clock::time_point since; ///< the end of the step before
};

class Trainer {
public:
  Trainer(Options options, ProgramSpec spec, std::string program)
      : o_(std::move(options)), spec_(std::move(spec)),
        program_(std::move(program)), start_(Clock::now()) {
    finiteCheckRanges(spec_, finiteOffsets_, finiteCounts_);
  }

  int run();

private:
  void log(const std::string &line) const {
    if (leader_ && !o_.quiet)
      std::fprintf(stderr, "%s\n", line.c_str());
  }

  /// Warnings go to stderr even with --quiet.
  void warn(const std::string &line) const;
  /// Takes the --save directory's lock and opens --metrics and --trace, so
  /// that a path that cannot be written stops the run before it trains.
  void openOutputs(const Launch &launch, bool resumed);
  void loadData();
  /// The tokenizer folder (--tokenizer, else the token file's, else the
  /// checkpoint's) and, for --generate, the check that the model can
  /// generate.
  void chooseTokenizer(const CheckpointState *resumed);
  /// The batch, physical batches and StepState of `step`.
  PlannedStep planStep(int64_t step) const;
  /// Whether trainStep(step) queues step + 1 on the devices before it
  /// returns (see there).
  bool runsAhead(int64_t step) const;
  /// Queues `p`'s StepState and micro-steps on `slot`'s rank.
  MicroStepSums queueMicroSteps(RankSlot &slot, const PlannedStep &p,
                                bool warmSizes);
  void trainStep(int64_t step, StepMetrics &metrics);
  void saveCheckpoint();
  /// --eval-data: evaluates, writes the metrics line, shows and reports it.
  void evaluate(Progress &progress);
  /// --export (`merged` false) and --export-merged: the options of
  /// writeHfExport.
  HfExportOptions exportOptions(bool merged) const;
  std::string dataDescription() const;

  Options o_;
  ProgramSpec spec_;
  std::string program_;
  Clock::time_point start_;
  bool leader_ = true;
  int64_t totalSteps_ = 0;
  int64_t step_ = 0;
  /// Whether the smaller micro-steps have been run once and captured.
  bool sizesWarm_ = false;
  /// The arena ranges of the clipped gradient sums checked for finiteness
  /// before each dp_apply with --skip-nonfinite-steps (FiniteChecks.h):
  /// fixed by the program. Without it the update kernels check them.
  std::vector<int64_t> finiteOffsets_, finiteCounts_;

  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Dataset> evalData_;
  std::unique_ptr<HfInit> init_;
  std::unique_ptr<HfInit> initAdapter_;
  int64_t evaluatedStep_ = -1;
  std::optional<PrivacySession> privacy_;
  /// User-level DP (RecipeSpec::userRecords): draws users, then at most k
  /// records of each.
  std::optional<privacy::UserSampler> userSampler_;
  /// The learning rate, weight decay and schedule of the run (Schedule.h).
  Hyperparameters hyper_;
  /// The model's tokenizer folder ("" for byte-level models), kept in the
  /// checkpoints for --generate after a resume.
  std::string tokenizerFolder_;
  std::unique_ptr<Tokenizer> tokenizer_;
  GenerationStart generationStart_;
  std::unique_ptr<ProcessRanks> ranks_;
  std::unique_ptr<Checkpointer> checkpointer_;
  RunReport report_;
  std::optional<CheckpointLock> lock_;
  std::ofstream metrics_;
  std::string tracePath_;
  /// The step queued by the one before (runsAhead), if any.
  std::optional<QueuedStep> ahead_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_TRAINLOOP_H
