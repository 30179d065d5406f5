//===- Options.cpp - The training program's command line ------------------===//

#include "Options.h"

#include "HfWeights.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

namespace dprt::driver {
namespace {

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

/// A whole number in [min, max]: decimal digits, or a whole number in
/// exponent form ("1e4", as dpc-privacy accepts). The range is checked on
/// the text's value before it is converted, so that a value too large for
/// the flag is an error naming it, never a wrapped or clamped count.
int64_t parseInteger(const std::string &flag, const std::string &text,
                     int64_t min, int64_t max) {
  auto notWhole = [&]() -> UsageError {
    return UsageError("option " + flag + " needs a whole number, got '" + text +
                      "'");
  };
  auto outOfRange = [&](bool below) -> UsageError {
    return UsageError(
        "option " + flag + " must be " +
        (below ? ">= " + std::to_string(min) : "<= " + std::to_string(max)) +
        ", got " + text);
  };
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])))
    throw notWhole();
  errno = 0;
  char *end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (*end == '\0') {
    if (errno == ERANGE)
      throw outOfRange(text[0] == '-');
    if (value < min || value > max)
      throw outOfRange(value < min);
    return value;
  }
  // Exponent form. A whole double below 2^63 (compared exactly) converts to
  // int64 exactly; hexadecimal, "nan" and "inf" are not counts.
  if (text.find_first_not_of("0123456789+-.eE") != std::string::npos ||
      text.find_first_of("eE") == std::string::npos)
    throw notWhole();
  const double real = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(real) || real != std::floor(real))
    throw notWhole();
  if (real < static_cast<double>(min))
    throw outOfRange(true);
  if (real >= std::ldexp(1.0, 63) || static_cast<int64_t>(real) > max)
    throw outOfRange(false);
  return static_cast<int64_t>(real);
}

double parseReal(const std::string &flag, const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value))
    throw UsageError("option " + flag + " needs a finite number, got '" + text +
                     "'");
  return value;
}

/// A finite number that must be > 0 (`positive`) or >= 0.
double parseNonNegative(const std::string &flag, const std::string &text,
                        bool positive) {
  const double value = parseReal(flag, text);
  if (positive ? !(value > 0) : !(value >= 0))
    throw UsageError("option " + flag + " must be " +
                     (positive ? "> 0" : ">= 0") + ", got " + text);
  return value;
}

uint64_t parseSeed(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  if (text.empty() || text[0] == '-')
    throw UsageError("option --seed needs a whole number >= 0, got '" + text +
                     "'");
  unsigned long long value = std::strtoull(text.c_str(), &end, 0);
  if (*end != '\0' || errno == ERANGE)
    throw UsageError("option --seed needs a whole number below 2^64, got '" +
                     text + "'");
  return value;
}

} // namespace

Options parseOptions(int argc, const char *const *argv) {
  Options o;
  bool exportShardSize = false;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0)
      throw UsageError("unexpected argument '" + arg +
                       "' (options start with --; see --help)");
    std::string flag = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    auto takeValue = [&]() -> std::string {
      if (hasValue)
        return value;
      if (i + 1 >= args.size())
        throw UsageError("option " + flag + " needs a value");
      return args[++i];
    };
    auto noValue = [&] {
      if (hasValue)
        throw UsageError("option " + flag + " takes no value");
    };
    if (flag == "--data") {
      o.data = takeValue();
      if (o.data.empty())
        throw UsageError("option --data needs a file name");
    } else if (flag == "--steps") {
      o.steps = parseInteger(flag, takeValue(), 0, kMaxSteps);
    } else if (flag == "--sigma") {
      o.sigma = parseReal(flag, takeValue());
      if (*o.sigma < 0)
        throw UsageError("option --sigma must be >= 0");
    } else if (flag == "--epsilon") {
      o.epsilon = parseReal(flag, takeValue());
      if (*o.epsilon <= 0)
        throw UsageError("option --epsilon must be > 0");
    } else if (flag == "--delta") {
      o.delta = parseReal(flag, takeValue());
      if (*o.delta <= 0 || *o.delta >= 1)
        throw UsageError("option --delta must be in (0, 1)");
    } else if (flag == "--seed") {
      o.seed = parseSeed(takeValue());
    } else if (flag == "--lr") {
      o.lr = parseNonNegative(flag, takeValue(), true);
    } else if (flag == "--weight-decay") {
      o.weightDecay = parseNonNegative(flag, takeValue(), false);
    } else if (flag == "--clip") {
      o.clip = parseNonNegative(flag, takeValue(), true);
    } else if (flag == "--expected-batch") {
      o.expectedBatch = parseInteger(flag, takeValue(), 1, kMaxExpectedBatch);
    } else if (flag == "--sample-rate") {
      const std::string text = takeValue();
      o.sampleRate = parseNonNegative(flag, text, true);
      if (*o.sampleRate > 1)
        throw UsageError("option --sample-rate is a probability in (0, 1], "
                         "got " +
                         text);
    } else if (flag == "--warmup") {
      o.warmup = parseInteger(flag, takeValue(), 0, kMaxSteps);
    } else if (flag == "--decay") {
      const std::string name = takeValue();
      LrDecay decay;
      if (!parseLrDecay(name, decay))
        throw UsageError("option --decay must be cosine, linear or constant, "
                         "got '" +
                         name + "'");
      o.decay = decay;
    } else if (flag == "--min-lr-ratio") {
      const std::string text = takeValue();
      o.minLrRatio = parseNonNegative(flag, text, false);
      if (*o.minLrRatio > 1)
        throw UsageError("option --min-lr-ratio is the final learning rate "
                         "over the peak one, in [0, 1], got " +
                         text);
    } else if (flag == "--accountant") {
      const std::string name = takeValue();
      o.accountant = privacy::parseAccountantKind(name);
      if (!o.accountant)
        throw UsageError("option --accountant must be pld or rdp, got '" +
                         name + "'");
    } else if (flag == "--truncate") {
      noValue();
      o.truncate = true;
    } else if (flag == "--prompt") {
      o.prompt = takeValue();
    } else if (flag == "--tokenizer") {
      o.tokenizer = takeValue();
      if (o.tokenizer.empty())
        throw UsageError("option --tokenizer needs a folder");
    } else if (flag == "--noise-key") {
      o.noiseKey = takeValue();
      if (o.noiseKey.empty())
        throw UsageError("option --noise-key needs a file");
    } else if (flag == "--save") {
      o.save = takeValue();
      if (o.save.empty())
        throw UsageError("option --save needs a directory");
    } else if (flag == "--save-every") {
      o.saveEvery = parseInteger(flag, takeValue(), 1, kMaxInt64);
    } else if (flag == "--keep-last") {
      o.keepLast = parseInteger(flag, takeValue(), 1, kMaxInt64);
    } else if (flag == "--resume") {
      o.resume = takeValue();
      if (o.resume.empty())
        throw UsageError("option --resume needs a directory");
    } else if (flag == "--metrics") {
      o.metrics = takeValue();
    } else if (flag == "--trace") {
      o.trace = takeValue();
    } else if (flag == "--no-budget-stop") {
      noValue();
      o.budgetStop = false;
    } else if (flag == "--skip-nonfinite-steps") {
      noValue();
      o.skipNonFiniteSteps = true;
    } else if (flag == "--generate") {
      o.generate = parseInteger(flag, takeValue(), 0, kMaxInt64);
    } else if (flag == "--init") {
      o.init = takeValue();
      if (o.init.empty())
        throw UsageError("option --init needs a Hugging Face model folder");
    } else if (flag == "--init-adapter") {
      o.initAdapter = takeValue();
      if (o.initAdapter.empty())
        throw UsageError("option --init-adapter needs a peft adapter folder");
    } else if (flag == "--export-merged") {
      o.exportMergedDir = takeValue();
      if (o.exportMergedDir.empty())
        throw UsageError("option --export-merged needs a folder");
    } else if (flag == "--export") {
      o.exportDir = takeValue();
      if (o.exportDir.empty())
        throw UsageError("option --export needs a folder");
    } else if (flag == "--export-dtype") {
      o.exportDType = parseExportDType(flag, takeValue());
    } else if (flag == "--export-shard-size") {
      o.exportShardBytes = parseInteger(flag, takeValue(), 1, kMaxInt64);
      exportShardSize = true;
    } else if (flag == "--like") {
      o.like = takeValue();
      if (o.like.empty())
        throw UsageError("option --like needs a Hugging Face model folder");
    } else if (flag == "--eval-data") {
      o.evalData = takeValue();
      if (o.evalData.empty())
        throw UsageError("option --eval-data needs a file name");
    } else if (flag == "--eval-every") {
      o.evalEvery = parseInteger(flag, takeValue(), 1, kMaxInt64);
    } else if (flag == "--gpus") {
      o.gpus = static_cast<int>(parseInteger(flag, takeValue(), 1, kMaxGpus));
    } else if (flag == "--collective-timeout") {
      o.collectiveTimeout = parseReal(flag, takeValue());
      if (!(o.collectiveTimeout > 0) ||
          o.collectiveTimeout > kMaxCollectiveTimeout)
        throw UsageError("option --collective-timeout must be in (0, " +
                         std::to_string(int64_t(kMaxCollectiveTimeout)) +
                         "] seconds");
    } else if (flag == "--quiet") {
      noValue();
      o.quiet = true;
    } else {
      throw UsageError("unknown option '" + flag + "' (see --help)");
    }
  }
  if (o.sigma && o.epsilon)
    throw UsageError("give the noise as --sigma or as --epsilon, not both");
  if (o.saveEvery > 0 && o.save.empty())
    throw UsageError("--save-every needs --save DIR");
  if (o.keepLast > 0 && o.save.empty())
    throw UsageError("--keep-last needs --save DIR");
  if (!o.initAdapter.empty() && !o.resume.empty())
    throw UsageError("--init-adapter and --resume exclude each other: a "
                     "resumed run continues from its checkpoint's parameters");
  if (!o.init.empty() && !o.resume.empty())
    throw UsageError("--init and --resume exclude each other: a resumed run "
                     "continues from its checkpoint's parameters");
  const bool exports = !o.exportDir.empty() || !o.exportMergedDir.empty();
  if (!exports && (o.exportDType || exportShardSize))
    throw UsageError(
        std::string(o.exportDType ? "--export-dtype" : "--export-shard-size") +
        " needs --export DIR or --export-merged DIR");
  if (!o.like.empty() && !exports)
    throw UsageError("--like names the folder whose config.json goes with "
                     "--export DIR; give --export");
  if (!o.exportDir.empty() && o.exportDir == o.exportMergedDir)
    throw UsageError("--export and --export-merged name the same folder '" +
                     o.exportDir + "'");
  if (o.evalEvery > 0 && o.evalData.empty())
    throw UsageError("--eval-every needs --eval-data FILE");
  if (o.expectedBatch && o.sampleRate)
    throw UsageError("give the sampling rate as --expected-batch or as "
                     "--sample-rate, not both");
  if ((o.prompt || !o.tokenizer.empty()) && o.generate == 0)
    throw UsageError(std::string(o.prompt ? "--prompt" : "--tokenizer") +
                     " is for --generate N");
  return o;
}

void checkOptions(const Options &o, const ProgramSpec &spec) {
  if (o.gpus) {
    if (spec.backend == "cpu")
      throw UsageError("--gpus is for programs built for the cuda backend; "
                       "this one was built for the cpu and runs its " +
                       std::to_string(spec.ranks) +
                       " ranks as threads (rebuild with dpc --backend cuda)");
    if (*o.gpus != spec.ranks)
      throw UsageError("--gpus " + std::to_string(*o.gpus) +
                       " does not match the program, which was compiled for " +
                       std::to_string(spec.ranks) +
                       " ranks (recompile with dpc --ranks " +
                       std::to_string(*o.gpus) + ")");
  }
  if (!spec.recipe.addsNoise()) {
    // noise = #dp.none: the program has no noise to scale and no guarantee
    // to calibrate, so these flags would be silently ignored.
    auto refuse = [](const char *flag) {
      throw UsageError(std::string(flag) +
                       " has no effect: this program was compiled without "
                       "noise (noise = #dp.none) and trains without "
                       "differential privacy; recompile with a noise or "
                       "target recipe to train privately");
    };
    if (o.sigma)
      refuse("--sigma");
    if (o.epsilon)
      refuse("--epsilon");
    if (o.delta)
      refuse("--delta");
    if (!o.noiseKey.empty())
      refuse("--noise-key");
  }
  if (!o.noiseKey.empty() &&
      spec.recipe.generator != NoiseGeneratorKind::ChaCha20)
    throw UsageError("--noise-key keys the secure (ChaCha20) noise, but this "
                     "program's recipe uses the philox generator, keyed by "
                     "--seed: the key file would be ignored; compile the "
                     "recipe with generator = secure for a secret key");
  if ((o.expectedBatch || o.sampleRate) &&
      spec.recipe.sampling != SamplingKind::Poisson)
    throw UsageError(
        std::string(o.expectedBatch ? "--expected-batch" : "--sample-rate") +
        " sets the rate of Poisson sampling, but this program's "
        "recipe draws shuffled batches of " +
        std::to_string(spec.recipe.shuffleBatch) + " records");
  int64_t steps = o.steps ? *o.steps : spec.recipe.steps;
  if (o.data.empty() && steps > 0 && o.resume.empty())
    throw UsageError("--data FILE is required to train (or pass --steps 0)");
  if ((!o.exportDir.empty() || !o.exportMergedDir.empty()) && o.like.empty() &&
      o.init.empty())
    throw UsageError(
        std::string(o.exportDir.empty() ? "--export-merged" : "--export") +
        " DIR copies config.json from the --init folder "
        "or from --like HF_DIR: give one of them");
  if (!o.initAdapter.empty() && !spec.lora.present())
    throw UsageError("--init-adapter loads a peft adapter into the program's "
                     "LoRA adapters, but this program has no LoRA (import "
                     "with dpc import-hf --lora R)");
  if (!o.exportMergedDir.empty() && !spec.lora.present())
    throw UsageError("--export-merged merges the program's LoRA adapters "
                     "into their weights, but this program has no LoRA: use "
                     "--export DIR");
  if (!o.evalData.empty() && spec.lossOffset < 0)
    throw UsageError("--eval-data: the program has no per-sample loss to "
                     "evaluate");
}

/// The --help block of the run-time hyperparameters (Schedule.h,
/// PrivacySession.h), with the recipe's values as the defaults.
static std::string hyperparameterUsage(const RecipeSpec &r) {
  std::ostringstream os;
  os << "hyperparameters (override the recipe's without recompiling)\n"
     << "  --lr X             learning rate (default " << r.lr << ")\n"
     << "  --weight-decay X   decoupled weight decay (default " << r.weightDecay
     << ")\n"
     << "  --clip C           clipping bound C (default " << r.maxNorm << ")\n";
  if (r.sampling == SamplingKind::Poisson) {
    os << "  --expected-batch B Poisson sampling at q = B / records (default ";
    if (r.rate > 0)
      os << "q = " << r.rate << ")\n";
    else
      os << r.expectedBatch << ")\n";
    os << "  --sample-rate Q    ... or at q = Q\n";
  }
  os << "                     (C and q change the privacy guarantee: sigma\n"
     << "                     is recalibrated for a target epsilon; a resumed\n"
     << "                     run keeps its checkpoint's)\n"
     << "  --warmup N         steps of linear warmup (default " << r.warmup
     << ")\n"
     << "  --decay D          cosine, linear or constant after the warmup\n"
     << "                     (default " << nameOf(r.decay) << ")\n"
     << "  --min-lr-ratio R   the decay ends at R * lr at the last step\n"
     << "                     (default " << r.minLrRatio << ")\n";
  return os.str();
}

std::string usageText(const std::string &program, const ProgramSpec &spec) {
  const RecipeSpec &r = spec.recipe;
  std::ostringstream noise;
  if (!r.addsNoise())
    noise << "none: compiled without DP";
  else if (r.targetEpsilon)
    noise << "calibrated for epsilon = " << r.epsilon
          << " at delta = " << r.delta;
  else
    noise << "sigma = " << r.sigma;
  std::ostringstream os;
  os << "usage: " << program << " --data FILE [options]\n"
     << "\n"
     << "Trains the model '" << spec.model << "' (" << spec.backend
     << " backend, " << spec.ranks << (spec.ranks == 1 ? " rank" : " ranks")
     << ") with "
     << (r.addsNoise() ? "DP-SGD" : "SGD, without differential privacy")
     << ".\n"
     << "\n"
     << "data\n"
     << "  --data FILE        training records: a token file of dpc-prepare\n"
     << "                     (docs/data.md), or one per line: text (bytes),\n"
     << "                     a .tok file of token ids, or CSV (features,\n"
     << "                     then the label or the regression targets);\n"
     << "                     required unless --steps 0\n"
     << "  --truncate         token files: train on the first T + 1 tokens of\n"
     << "                     a longer record (default: such a record is an\n"
     << "                     error; records are never split)\n"
     << "training\n"
     << "  --steps N          optimizer steps in all (default " << r.steps
     << ")\n"
     << "  --sigma S          noise multiplier (noise std = S * C)\n"
     << "  --epsilon E        target epsilon: calibrate sigma for the steps\n"
     << "  --delta D          delta of the (epsilon, delta) guarantee "
        "(default "
     << r.delta << ")\n"
     << "                     (default noise: " << noise.str() << ")\n"
     << "  --seed N           key of initialization, sampling and noise "
        "(default "
     << r.seed << ")\n"
     << "  --noise-key FILE   secure recipes only: the secret key of the\n"
     << "                     ChaCha20 noise and sampler, 64 hex digits;\n"
     << "                     default: fresh from the operating system\n"
     << "                     (saved in checkpoints)\n"
     << "  --accountant A     pld or rdp (default: the recipe's, "
     << (r.accountant.empty() ? "pld" : r.accountant) << ")\n"
     << "  --no-budget-stop   keep training when the next step would exceed\n"
     << "                     the target epsilon (default: stop)\n"
     << "  --skip-nonfinite-steps\n"
     << "                     a step whose loss or gradient is not finite\n"
     << "                     takes no update and training goes on (it still\n"
     << "                     counts for epsilon; it reads the gradients\n"
     << "                     once more before each update); default: stop\n"
     << "                     with an error, nothing of the step saved\n"
     << hyperparameterUsage(r) << "checkpoints\n"
     << "  --save DIR         save a checkpoint into DIR at the end (DIR is\n"
     << "                     locked while the run saves there)\n"
     << "  --save-every K     ... and every K steps\n"
     << "  --keep-last K      after each save, remove all but the K newest\n"
     << "                     checkpoints of DIR (default: keep all)\n"
     << "  --resume DIR       continue from DIR's latest checkpoint (exactly\n"
     << "                     as if the run had not stopped)\n"
     << "Hugging Face weights (docs/huggingface.md)\n"
     << "  --init DIR         start from the weights of a Hugging Face folder\n"
     << "                     (model.safetensors or its shards; F32, BF16,\n"
     << "                     F16 or F64) instead of the initializers\n"
     << "  --init-adapter DIR load a peft adapter (adapter_config.json,\n"
     << "                     adapter_model.safetensors) into the LoRA\n"
     << "                     adapters (docs/lora.md)\n"
     << "  --export DIR       after training, write the weights as a Hugging\n"
     << "                     Face folder with the config and tokenizer files\n"
     << "                     of the --init folder (or of --like); with LoRA,\n"
     << "                     the adapters as a peft adapter folder\n"
     << "  --export-merged DIR\n"
     << "                     with LoRA: the model with W + (alpha/r) B A in\n"
     << "                     place of each adapted weight\n"
     << "  --like DIR         the folder whose config.json and tokenizer\n"
     << "                     files go with --export\n"
     << "  --export-dtype T   bf16 or f32 (default "
     << (spec.compute == DType::BF16 ? "bf16" : "f32")
     << ", the model's compute type;\n"
     << "                     f32 for a peft adapter)\n"
     << "  --export-shard-size BYTES\n"
     << "                     shard model.safetensors above this size\n"
     << "                     (default 5e9)\n"
     << "evaluation\n"
     << "  --eval-data FILE   held-out records (any data format): the loss\n"
     << "                     before the first step, after the last and\n"
     << "                     every --eval-every K steps (eval_loss per\n"
     << "                     target token, eval_ppl); not accounted for in\n"
     << "                     epsilon\n"
     << "  --eval-every K     ... and every K steps\n"
     << "output\n"
     << "  --metrics FILE     one JSON object per step (JSON lines)\n"
     << "  --trace FILE       Chrome trace of compute and communication, and\n"
     << "                     the time compute waits for communication\n"
     << "                     (exposed_comm_s in the metrics, the report)\n"
     << "  --generate N       after training, sample N lines (language "
        "models)\n"
     << "  --prompt TEXT      --generate: each line continues TEXT\n"
     << "  --tokenizer DIR    --generate for a model with a tokenizer: its\n"
     << "                     folder (default: the token file's tokenizer;\n"
     << "                     encoded and decoded by dpc-prepare)\n"
     << "  --quiet            no progress output\n"
     << "  --gpus N           CUDA programs: use N GPUs of this machine (must\n"
     << "                     equal the program's ranks)\n"
     << "  --collective-timeout S\n"
     << "                     a collective that does not finish within S\n"
     << "                     seconds stops the run with an error naming\n"
     << "                     the rank and the peers it waits for (default\n"
     << "                     " << kDefaultCollectiveTimeoutSeconds << ")\n"
     << "  -h, --help         this text\n"
     << "\n"
     << "Counts may be written in exponent form (--steps 1e4).\n"
     << "Exit status: 0 done, 1 failure (also a non-finite step), 2 bad\n"
     << "arguments, data or checkpoint, or a --save DIR another run holds.\n";
  return os.str();
}

} // namespace dprt::driver
