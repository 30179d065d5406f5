//===- Options.h - The training program's command line ----------*- C++ -*-===//

#ifndef DPRT_DRIVER_OPTIONS_H
#define DPRT_DRIVER_OPTIONS_H

#include "dprt/comm.h"
#include "dprt/program.h"
#include "privacy/Accountant.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace dprt::driver {

/// A mistake of the user (flags, data, checkpoint): the program prints the
/// message and exits with status 2.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The largest --steps: the noise and sampling counters hold the step in 56
/// bits (dprt/rng.h), beyond which two steps would draw the same noise.
constexpr int64_t kMaxSteps = (int64_t{1} << 56) - 1;

/// The largest --expected-batch: q = B / records must be exact in a double
/// (2^53, as the recipe's counts).
constexpr int64_t kMaxExpectedBatch = int64_t{1} << 53;
/// The largest --gpus.
constexpr int64_t kMaxGpus = 1024;
/// The largest --collective-timeout: a week, in seconds.
constexpr double kMaxCollectiveTimeout = 7 * 24 * 3600.0;

struct Options {
  std::string data;
  std::optional<int64_t> steps;
  std::optional<double> sigma;
  std::optional<double> epsilon;
  std::optional<double> delta;
  std::optional<uint64_t> seed;
  std::string noiseKey; ///< file with the secret ChaCha20 key (64 hex digits)
  /// Hyperparameters that override the recipe's (Schedule.h,
  /// PrivacySession.h).
  std::optional<double> lr;
  std::optional<double> weightDecay;
  std::optional<double> clip;           ///< C
  std::optional<int64_t> expectedBatch; ///< Poisson: q = B / records
  std::optional<double> sampleRate;     ///< Poisson: q
  std::optional<int64_t> warmup;
  std::optional<LrDecay> decay;
  std::optional<double> minLrRatio;
  std::optional<privacy::AccountantKind> accountant;
  /// Token files: a record longer than T + 1 tokens trains on its first
  /// T + 1 instead of being an error.
  bool truncate = false;
  std::string save;
  int64_t saveEvery = 0; ///< 0: save at the end only
  int64_t keepLast = 0;  ///< 0: keep every checkpoint
  std::string resume;
  std::string metrics;
  std::string trace;
  bool budgetStop = true;
  /// A step whose loss or gradient is not finite takes no update (instead
  /// of stopping the run).
  bool skipNonFiniteSteps = false;
  int64_t generate = 0;
  /// Hugging Face weights (docs/huggingface.md): --init DIR loads them
  /// before training, --export DIR writes them after it.
  std::string init;
  /// --init-adapter DIR: a peft adapter loaded into the LoRA adapters
  /// after --init (docs/lora.md); --export-merged DIR: the model with the
  /// adapters merged into their weights.
  std::string initAdapter;
  std::string exportMergedDir;
  std::string exportDir;
  std::optional<DType> exportDType; ///< default: bf16 models bf16, else f32
  std::string like; ///< the folder whose config.json goes with --export
  int64_t exportShardBytes = 5'000'000'000;
  /// Evaluation (Evaluation.h): before the first step, every K steps (0:
  /// never in between) and after the last.
  std::string evalData;
  int64_t evalEvery = 0;
  /// --generate: the text each sample continues.
  std::optional<std::string> prompt;
  /// --generate for tokenized data: the tokenizer folder (default: the one
  /// the token file names).
  std::string tokenizer;
  std::optional<int> gpus;
  /// Seconds a collective may take before the run stops with an error.
  double collectiveTimeout = kDefaultCollectiveTimeoutSeconds;
  bool quiet = false;
  bool help = false;
};

/// Parses argv (`--flag value` or `--flag=value`); throws UsageError.
Options parseOptions(int argc, const char *const *argv);

/// Checks the combinations that need the program's description; throws
/// UsageError.
void checkOptions(const Options &options, const ProgramSpec &spec);

/// The --help text, with the recipe's defaults.
std::string usageText(const std::string &program, const ProgramSpec &spec);

} // namespace dprt::driver

#endif // DPRT_DRIVER_OPTIONS_H
