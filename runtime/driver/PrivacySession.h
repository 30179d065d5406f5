//===- PrivacySession.h - The privacy parameters of one run -----*- C++ -*-===//
//
// Everything the run's (epsilon, delta) guarantee depends on, in one place:
// the sampling rate q (--sample-rate, --expected-batch or the recipe's), the
// clipping bound C (--clip or the recipe's), the noise multiplier sigma
// (given, the recipe's, or calibrated for a target epsilon) and where it
// came from, delta, the target epsilon and the budget check, the seed and
// the noise key (derived through dprt/keys.h from the seed, or a secret from
// --noise-key or the operating system) and where it came from, and the
// accountant (PLD or RDP: --accountant, else the recipe's). A resumed run
// restores all of it from the checkpoint, refusing command lines that would
// change it.
//
// Accounting cost: a PLD composition takes 20-170 ms, so nothing composes
// the whole history every step. The budget is planned once: the number of
// steps the target epsilon allows (the run's total when sigma was calibrated
// for it; else found by bisection, about log2(steps) compositions), and the
// budget check compares the step with it. The per-step epsilon of the
// metrics is exact at every step with RDP (cheap); with PLD it is exact at
// every k-th step, k = ceil(total steps / 100), and at the run's last step,
// and in between it is the epsilon of the next such step: an upper bound,
// at most 100 compositions per run (metricsEpsilon).
//
// The batch sampler and the noise are keyed by the same key by construction:
// sample() and stepState() both read it through keys.h.
//
// Backend-independent (in dprt_driver_objects).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_PRIVACYSESSION_H
#define DPRT_DRIVER_PRIVACYSESSION_H

#include "Checkpoint.h"
#include "Options.h"

#include "dprt/program.h"
#include "dprt/rank.h"
#include "dprt/rng.h"
#include "privacy/Accountant.h"
#include "privacy/PrivacyReport.h"

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace dprt::driver {

class Dataset;

const char *generatorName(NoiseGeneratorKind kind);
const char *samplerName(SamplingKind kind);

class PrivacySession {
public:
  /// A new run over `records` records (0: no data, e.g. --steps 0) of
  /// `totalSteps` steps. `keyShared` says whether every rank of the job
  /// lives in this process; a secure run launched as one process per GPU
  /// needs --noise-key, since ranks cannot share a key drawn here. Throws
  /// UsageError.
  static PrivacySession start(const Options &options, const RecipeSpec &recipe,
                              int64_t records, int64_t totalSteps,
                              bool keyShared);

  /// A run resumed from `state` (read from `path`): the parameters of the
  /// checkpoint's run, its keys and its accountant history. A checkpoint of
  /// step 0 released nothing, so its run starts afresh. Throws UsageError
  /// when the command line would change what the guarantee or the random
  /// streams depend on, or the data is not the checkpoint's.
  static PrivacySession resume(const Options &options, const RecipeSpec &recipe,
                               const CheckpointState &state,
                               const std::string &path, const Dataset *data,
                               int64_t totalSteps, bool keyShared);

  /// The sorted records of the logical batch of `step` (from 1) over
  /// `records` records (Poisson or shuffle, as the recipe says), keyed by
  /// the run's noise key. Shuffled, steps 1 .. ceil(N / B) are the first
  /// epoch (the sampler's steps 0 ..).
  std::vector<int64_t> sample(int64_t step, int64_t records) const;
  /// The key sample() draws with.
  NoiseKey samplingKey() const;

  /// The StepState of `step`: the step, noise std sigma * C, C, 1 / the
  /// expected batch, the noise key and generator, the initializer key. The
  /// learning rate, its factor and the weight decay are left 0 (the
  /// Trainer's Hyperparameters fill them).
  StepState stepState(int64_t step) const;

  /// Whether `step` keeps epsilon within the target (always, without a
  /// target or with --no-budget-stop): whether it is at most the steps the
  /// budget allows, planned when the session began. When it is not,
  /// `nextEpsilon` gets the epsilon the step would reach.
  bool budgetAllows(int64_t step, double &nextEpsilon) const;
  /// The steps the target allows (INT64_MAX without a budget stop).
  int64_t budgetSteps() const { return budgetSteps_; }
  /// Composes one step of (q, sigma).
  void composeStep();
  /// Epsilon spent so far at the run's delta, exact.
  double epsilon() const;
  /// Epsilon after `steps` steps of the run (the history, then (q, sigma)):
  /// one composition for PLD.
  double epsilonAt(int64_t steps) const;
  /// The epsilon the metrics report after `step` (the steps composed so
  /// far): exact with RDP; with PLD exact when `exact` is set, which it is
  /// at every k-th step and the last one (see the top of this file), else
  /// the epsilon of the next such step, an upper bound.
  double metricsEpsilon(int64_t step, bool &exact);
  int64_t stepsComposed() const { return accountant_->steps(); }

  /// Copies the privacy parameters, keys and accountant history into a
  /// checkpoint's state.
  void saveTo(CheckpointState &state) const;
  /// The guarantee after `steps` steps.
  privacy::PrivacyReport report(int64_t steps) const;
  /// "q = ..., sigma = ... (source), C = ..., delta = ...".
  std::string describe() const;

  double samplingRate() const { return q_; }
  /// The expected logical batch q * records (Poisson) or the batch.
  double expectedBatch() const { return expectedBatch_; }
  /// The clipping bound C of the run.
  double clipNorm() const { return clip_; }
  privacy::AccountantKind accountant() const { return accountantKind_; }
  double sigma() const { return sigma_; }
  double delta() const { return delta_; }
  double targetEpsilon() const { return targetEpsilon_; }
  uint64_t seed() const { return seed_; }
  /// Where sigma came from ("given by --sigma", "calibrated for ...").
  const std::string &sigmaSource() const { return sigmaSource_; }
  /// Where the secret noise key came from; empty unless the run is secure.
  const std::string &noiseKeySource() const { return noiseKeySource_; }
  const uint64_t *noiseKey() const { return noiseKey_; }

private:
  PrivacySession(const RecipeSpec &recipe, bool budgetStop)
      : recipe_(recipe), budgetStop_(budgetStop) {}

  /// Creates the accountant of accountantKind_.
  void makeAccountant();
  /// Plans the budget (budgetSteps_) and the metrics' exact steps for a run
  /// that ends at `totalSteps`.
  void planAccounting(int64_t totalSteps);

  RecipeSpec recipe_;
  bool budgetStop_ = true;
  double q_ = 0;
  double expectedBatch_ = 0;
  double clip_ = 0;
  double sigma_ = 0;
  double delta_ = 0;
  double targetEpsilon_ = 0;
  std::string sigmaSource_;
  uint64_t seed_ = 0;
  uint64_t initKey_ = 0;
  uint64_t noiseKey_[4] = {0, 0, 0, 0};
  std::string noiseKeySource_;
  privacy::AccountantKind accountantKind_ = privacy::kDefaultAccountant;
  std::unique_ptr<privacy::PrivacyAccountant> accountant_;
  int64_t budgetSteps_ = 0;
  /// Metrics: the run's last step and the spacing of the exact PLD steps;
  /// the epsilon of the last exact step computed.
  int64_t lastStep_ = 0;
  int64_t exactEvery_ = 1;
  int64_t boundStep_ = -1;
  double boundEpsilon_ = 0;
  /// The bound of the exact step after boundStep_, computed on a thread of
  /// its own while the GPU runs the steps before it (a PLD epsilon takes
  /// tens of milliseconds of host time: as much as a fifth of a step of
  /// the 1.1B model). Shared so that the session stays copyable.
  std::shared_ptr<std::future<double>> ahead_;
  int64_t aheadStep_ = -1;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_PRIVACYSESSION_H
