//===- PrivacySession.h - The privacy parameters of one run -----*- C++ -*-===//
//
// Everything the run's (epsilon, delta) guarantee depends on, in one place:
// the sampling rate q, the noise multiplier sigma (given, the recipe's, or
// calibrated for a target epsilon) and where it came from, delta, the target
// epsilon and the budget check, the seed and the noise key (derived through
// dprt/keys.h from the seed, or a secret from --noise-key or the operating
// system) and where it came from, and the RDP accountant. A resumed run
// restores all of it from the checkpoint, refusing command lines that would
// change it.
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

  /// The sorted records of the logical batch of `step` over `records`
  /// records (Poisson or shuffle, as the recipe says), keyed by the run's
  /// noise key.
  std::vector<int64_t> sample(int64_t step, int64_t records) const;
  /// The key sample() draws with.
  NoiseKey samplingKey() const;

  /// The StepState of `step`: the step, noise std sigma * C, 1 / the
  /// expected batch, the noise key and generator, the initializer key.
  StepState stepState(int64_t step) const;

  /// Whether one more step keeps epsilon within the target (always, without
  /// a target or with --no-budget-stop); `nextEpsilon` gets the epsilon it
  /// would reach.
  bool budgetAllows(double &nextEpsilon) const;
  /// Composes one step of (q, sigma).
  void composeStep();
  /// Epsilon spent so far at the run's delta.
  double epsilon() const;
  int64_t stepsComposed() const { return accountant_.steps(); }

  /// Copies the privacy parameters, keys and accountant history into a
  /// checkpoint's state.
  void saveTo(CheckpointState &state) const;
  /// The guarantee after `steps` steps.
  privacy::PrivacyReport report(int64_t steps) const;
  /// "q = ..., sigma = ... (source), C = ..., delta = ...".
  std::string describe() const;

  double samplingRate() const { return q_; }
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

  RecipeSpec recipe_;
  bool budgetStop_ = true;
  double q_ = 0;
  double expectedBatch_ = 0;
  double sigma_ = 0;
  double delta_ = 0;
  double targetEpsilon_ = 0;
  std::string sigmaSource_;
  uint64_t seed_ = 0;
  uint64_t initKey_ = 0;
  uint64_t noiseKey_[4] = {0, 0, 0, 0};
  std::string noiseKeySource_;
  privacy::RdpAccountant accountant_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_PRIVACYSESSION_H
