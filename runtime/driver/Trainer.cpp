//===- Trainer.cpp - The training program's step loop ---------------------===//
//
// Compiled once per backend (dprt_driver_cpu, dprt_driver_cuda): every call
// into the backend goes through dprt::<service> and dprt::<kernel>, which
// kernels.h and backend.h resolve to the backend this file is built for.
//
// The Trainer wires the rooms of the driver together and keeps the step
// loop: ProcessRanks (launch, communicators, rank threads), PrivacySession
// (q, sigma, keys, accountant, budget), Checkpointer (save and load of the
// shards), TextGenerator (--generate) and RunReport (the final report). The
// main thread samples the logical batch and the physical-batch plan, then
// every rank thread fills its rows, runs its micro-steps and the optimizer
// step, and the threads meet again.
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

#include "Checkpoint.h"
#include "Checkpointer.h"
#include "Dataset.h"
#include "Evaluation.h"
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

#include "common/FaultReport.h"
#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"
#include "dprt/keys.h"
#include "dprt/program.h"
#include "privacy/Sampler.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

namespace dprt::driver {
namespace {

namespace fs = std::filesystem;

using Clock = std::chrono::steady_clock;

std::string formatNumber(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

double secondsSince(Clock::time_point start) {
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
};

void Trainer::loadData() {
  if (!o_.data.empty()) {
    data_ = std::make_unique<Dataset>(
        Dataset::load(o_.data, DataLayout::of(spec_), o_.truncate));
    if (spec_.recipe.userRecords > 0)
      data_->groupByUser(o_.data);
  }
  if (!o_.evalData.empty())
    evalData_ = std::make_unique<Dataset>(
        Dataset::load(o_.evalData, DataLayout::of(spec_)));
}

void Trainer::evaluate(Progress &progress) {
  const EvalResult r = Evaluator(spec_, *ranks_, *evalData_).evaluate(step_);
  evaluatedStep_ = step_;
  if (metrics_.is_open()) {
    metrics_ << toJsonLine(r) << "\n";
    metrics_.flush();
  }
  if (leader_)
    progress.evaluation(r);
  report_.addEvaluation(r);
}

HfExportOptions Trainer::exportOptions(bool merged) const {
  HfExportOptions options;
  options.kind = merged                 ? HfExportKind::Merged
                 : spec_.lora.present() ? HfExportKind::Adapter
                                        : HfExportKind::Model;
  options.dir = merged ? o_.exportMergedDir : o_.exportDir;
  options.like = o_.like.empty() ? o_.init : o_.like;
  // peft keeps adapters in f32 (autocast_adapter_dtype) also on a bf16
  // base model, and saves them so.
  options.dtype =
      o_.exportDType ? *o_.exportDType
      : spec_.compute == DType::BF16 && options.kind != HfExportKind::Adapter
          ? DType::BF16
          : DType::F32;
  options.maxShardBytes = o_.exportShardBytes;
  return options;
}

void Trainer::chooseTokenizer(const CheckpointState *resumed) {
  tokenizerFolder_ = o_.tokenizer;
  if (tokenizerFolder_.empty() && data_ && data_->tokenFile()) {
    const auto &metadata = data_->tokenFile()->metadata();
    if (auto it = metadata.find("tokenizer"); it != metadata.end())
      tokenizerFolder_ = it->second;
  }
  if (tokenizerFolder_.empty() && resumed)
    tokenizerFolder_ = resumed->tokenizer;
  if (o_.generate == 0)
    return;
  if (tokenizerFolder_.empty()) {
    TextGenerator::requireByteLanguageModel(spec_);
  } else {
    TextGenerator::requireLanguageModel(spec_);
    tokenizer_ = std::make_unique<Tokenizer>(tokenizerFolder_);
  }
  // Encoded now: a bad prompt or tokenizer folder stops the run before it
  // trains.
  generationStart_ =
      TextGenerator::start(spec_, o_.prompt.value_or(""), tokenizer_.get());
}

std::string Trainer::dataDescription() const {
  return data_ ? data_->describe() + " from " + o_.data : std::string();
}

void Trainer::trainStep(int64_t step, StepMetrics &metrics) {
  // Under user-level DP the batch is k slots a sampled user: its records,
  // then -1 (padding) up to k; k divides the physical batch, so a user's
  // slots lie in one physical batch, where the clip factor of slot b is that
  // of the user b / k.
  const std::vector<int64_t> batch =
      userSampler_ ? userSampler_->sample(step)
                   : privacy_->sample(step, data_->size());
  const privacy::PhysicalBatchPlan plan = privacy::planPhysicalBatches(
      static_cast<int64_t>(batch.size()), ranks_->launch().world,
      spec_.physicalBatch, userSampler_ ? spec_.recipe.userRecords : 1);
  StepState state = privacy_->stepState(step);
  state.lr = hyper_.lr;
  state.lrScale = hyper_.schedule.factor(step);
  state.weightDecay = hyper_.weightDecay;
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
  const auto begin = Clock::now();
  ranks_->run([&](int i) {
    RankSlot &slot = ranks_->slot(i);
    Rank &rank = slot.rank;
    faults::injectTestFault(rank.rank, step);
    rank.hostState = state;
    uploadStepState(&rank);
    rank.exposedCommSeconds = 0;
    if (warmSizes)
      warmSmallerMicroSteps(slot, spec_, *data_);
    MicroStepSums done = runMicroSteps(slot, spec_, *data_, batch, plan);
    // A non-finite loss or clipped gradient sum would spread NaN into every
    // parameter. The verdicts are all-reduced, so that every rank takes (or
    // skips, or stops at) the update alike. Where the step may be skipped
    // (--skip-nonfinite-steps) both are known before the update: the loss
    // from the micro-steps, the gradient from a pass of its own over the
    // gradient shards. A run that stops instead queues the update right
    // behind the micro-steps, with no wait for the host between them; the
    // update kernels test the gradient values they read
    // (updatesMetNonFinite, below), the loss is read after, and the run
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
    if (update) {
      DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_apply");
      runCaptured(&rank, kApplySlot, dp_apply);
    } else {
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
                          updatesMetNonFinite(&rank)
                      ? 1.0
                      : 0.0);
    if (heartbeats) {
      all.resize(6 + 2 * world, 0.0);
      all[6 + 2 * rank.rank] = secondsSince(begin);
      all[7 + 2 * rank.rank] = double(peakMemoryBytes(&rank));
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
  const double seconds = secondsSince(begin);
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
  metrics.wallSeconds = secondsSince(start_);
  metrics.memoryBytes = peak;
  metrics.skipped = nonFinite.loss || nonFinite.gradient;
  if (!o_.trace.empty()) // else it stays NaN: not measured
    metrics.exposedCommSeconds =
        totals.exposedCommSeconds / ranks_->launch().world;
  report_.addStep(metrics);
}

void Trainer::saveCheckpoint() {
  CheckpointState state;
  describeProgram(spec_, state);
  privacy_->saveTo(state);
  saveHyperparameters(hyper_, state);
  state.tokenizer = tokenizerFolder_;
  state.step = step_;
  state.totalSteps = totalSteps_;
  state.nextSamplerStep = step_ + 1;
  // The privacy units: users under user-level DP.
  state.datasetRecords = data_ ? data_->privacyUnits() : 0;
  state.datasetFingerprint = data_ ? data_->fingerprint() : 0;
  const std::string path = checkpointer_->save(o_.save, state);
  log("saved checkpoint of step " + std::to_string(step_) + " to " + path);
  if (o_.keepLast > 0 && leader_)
    for (const std::string &name : pruneCheckpoints(o_.save, o_.keepLast))
      log("removed the older checkpoint " + name + " (--keep-last " +
          std::to_string(o_.keepLast) + ")");
}

void Trainer::warn(const std::string &line) const {
  if (leader_)
    std::fprintf(stderr, "%s: warning: %s\n", program_.c_str(), line.c_str());
}

void Trainer::openOutputs(const Launch &launch, bool resumed) {
  if (!o_.save.empty() && leader_) {
    std::string warning;
    lock_.emplace(o_.save, warning);
    if (!warning.empty())
      warn(warning);
  }
  if (!o_.metrics.empty() && leader_) {
    metrics_.open(o_.metrics, resumed ? std::ios::app : std::ios::trunc);
    if (!metrics_)
      throw UsageError("cannot write the metrics file '" + o_.metrics +
                       "': " + std::strerror(errno));
  }
  if (!o_.trace.empty() && (leader_ || launch.multiProcess)) {
    tracePath_ = o_.trace;
    if (launch.multiProcess)
      tracePath_ += ".rank" + std::to_string(launch.firstRank);
    // Written at the end; created now so that a path that cannot be
    // written fails before the training it would record.
    std::ofstream probe(tracePath_, std::ios::trunc);
    if (!probe)
      throw UsageError("cannot write the trace file '" + tracePath_ +
                       "' (--trace): " + std::strerror(errno));
  }
}

int Trainer::run() {
  if (!o_.trace.empty())
    trace::enable();
  const Launch launch = planLaunch(o_, spec_);
  leader_ = launch.firstRank == 0;
  if (launch.multiProcess)
    faults::installTerminationReport(program_, launch.firstRank);
  // A secret key drawn here reaches only this process's ranks.
  const bool keyShared = launch.localRanks == launch.world;
  loadData();
  std::unique_ptr<CheckpointState> resumed;
  std::string resumePath;
  if (!o_.resume.empty()) {
    resumePath = resolveCheckpoint(o_.resume);
    resumed = std::make_unique<CheckpointState>(checkpointStateFromJson(
        readTextFile(resumePath + "/state.json"), resumePath + "/state.json"));
  }
  if (resumed && o_.steps && *o_.steps < resumed->step)
    throw UsageError("--steps " + std::to_string(*o_.steps) +
                     " is below the step of the checkpoint '" + resumePath +
                     "', " + std::to_string(resumed->step) +
                     ": --steps is the total to train to, so ask for at "
                     "least " +
                     std::to_string(resumed->step));
  chooseTokenizer(resumed.get());
  totalSteps_ = o_.steps  ? *o_.steps
                : resumed ? resumed->totalSteps
                          : spec_.recipe.steps;
  if (resumed) {
    checkResumable(spec_, *resumed, resumePath);
    privacy_.emplace(PrivacySession::resume(o_, spec_.recipe, *resumed,
                                            resumePath, data_.get(),
                                            totalSteps_, keyShared));
    if (resumed->step > 0)
      step_ = resumed->step;
  } else {
    privacy_.emplace(PrivacySession::start(o_, spec_.recipe,
                                           data_ ? data_->privacyUnits() : 0,
                                           totalSteps_, keyShared));
  }
  if (data_ && data_->byUser())
    userSampler_.emplace(
        privacy_->samplingKey(), data_->userRecords(), spec_.recipe.userRecords,
        privacy_->samplingRate(),
        noiseGeneratorOf(static_cast<int32_t>(spec_.recipe.generator)));
  {
    std::vector<std::string> notes;
    hyper_ = resolveHyperparameters(
        o_, spec_.recipe, totalSteps_,
        resumed && resumed->step > 0 ? resumed.get() : nullptr, notes);
    for (const std::string &note : notes)
      warn(note);
  }
  if (step_ < totalSteps_ && !data_)
    throw UsageError("--data FILE is required to train (step " +
                     std::to_string(step_) + " of " +
                     std::to_string(totalSteps_) + ")");
  if (spec_.maskOffset < 0)
    throw std::runtime_error("the program has no mask buffer; padding rows "
                             "would enter the gradient");

  if (launch.multiProcess &&
      (!o_.exportDir.empty() || !o_.exportMergedDir.empty()))
    throw UsageError("--export is not supported yet when the program runs "
                     "one process per GPU (it gathers every shard); use "
                     "--gpus N on one machine, or dpc export on a checkpoint");
  // Checked before anything is allocated or written: a folder that does
  // not fit the model stops the run here.
  if (!o_.init.empty())
    init_ = std::make_unique<HfInit>(o_.init, spec_.params);
  if (!o_.initAdapter.empty())
    initAdapter_ = HfInit::adapter(o_.initAdapter, spec_.params, spec_.lora);
  if (!o_.exportDir.empty())
    checkHfExport(exportOptions(false), spec_.params, spec_.lora);
  if (!o_.exportMergedDir.empty())
    checkHfExport(exportOptions(true), spec_.params, spec_.lora);
  openOutputs(launch, resumed != nullptr);

  ranks_ = std::make_unique<ProcessRanks>(launch, spec_);
  checkpointer_ = std::make_unique<Checkpointer>(spec_, *ranks_);
  {
    std::ostringstream os;
    os << program_ << ": " << spec_.model << " on " << launch.world << " "
       << backendName() << (launch.world == 1 ? " rank" : " ranks");
    if (data_)
      os << ", " << dataDescription();
    log(os.str());
    log(privacy_->describe());
    log("lr = " + formatNumber(hyper_.lr) +
        ", weight decay = " + formatNumber(hyper_.weightDecay) +
        ", schedule: " + hyper_.schedule.describe());
  }
  ranks_->initialize(privacy_->stepState(0), !o_.trace.empty());
  if (resumed) {
    for (const std::string &note : checkpointer_->load(resumePath, *resumed))
      warn(note);
    log("resumed from " + resumePath + " at step " + std::to_string(step_));
  } else if (init_) {
    loadHfWeights(*init_, spec_, *ranks_);
    log("loaded the weights of " + init_->describe());
    if (!init_->unsourced().empty())
      log(std::to_string(init_->unsourced().size()) +
          " parameters have no Hugging Face name and keep their "
          "initializers (the first: '" +
          init_->unsourced()[0] + "')");
    // Unmaps the folder's files: their pages are not needed again.
    init_.reset();
  }
  if (!resumed && initAdapter_) {
    loadHfWeights(*initAdapter_, spec_, *ranks_);
    log("loaded the LoRA adapters of " + initAdapter_->describe());
    initAdapter_.reset();
  }

  Progress progress(o_.quiet || !leader_, step_ + 1, totalSteps_);
  if (evalData_)
    evaluate(progress);
  RunEnding ending;
  // A resumed run that trains no further step has nothing new to save in
  // the directory it resumed from.
  std::error_code sameDirectory;
  bool savedLast = resumed && !o_.save.empty() &&
                   fs::equivalent(o_.save, o_.resume, sameDirectory);
  for (int64_t step = step_ + 1; step <= totalSteps_; ++step) {
    double nextEpsilon = 0;
    if (!privacy_->budgetAllows(step, nextEpsilon)) {
      progress.finish();
      std::ostringstream os;
      os << "stopping after step " << step_ << ": step " << step
         << " would raise epsilon to " << nextEpsilon << " > "
         << privacy_->targetEpsilon()
         << " (the budget); pass --no-budget-stop to train past it";
      if (leader_)
        std::fprintf(stderr, "%s\n", os.str().c_str());
      ending.stoppedByBudget = true;
      break;
    }
    StepMetrics m;
    trainStep(step, m);
    if (metrics_.is_open()) {
      metrics_ << toJsonLine(m) << "\n";
      metrics_.flush();
    }
    progress.update(m);
    savedLast = false;
    if (!o_.save.empty() && o_.saveEvery > 0 && step % o_.saveEvery == 0) {
      progress.finish();
      saveCheckpoint();
      savedLast = true;
    }
    if (evalData_ && o_.evalEvery > 0 && step % o_.evalEvery == 0)
      evaluate(progress);
  }
  if (evalData_ && evaluatedStep_ != step_)
    evaluate(progress);
  progress.finish();
  if (!o_.save.empty() && !savedLast)
    saveCheckpoint();
  if (!o_.exportDir.empty()) {
    exportHfWeights(exportOptions(false), spec_, *ranks_);
    log(std::string("exported the ") +
        (spec_.lora.present() ? "peft adapter" : "weights") + " of step " +
        std::to_string(step_) + " to " + o_.exportDir);
  }
  if (!o_.exportMergedDir.empty()) {
    exportHfWeights(exportOptions(true), spec_, *ranks_);
    log("exported the merged weights of step " + std::to_string(step_) +
        " to " + o_.exportMergedDir);
  }
  if (o_.generate > 0) {
    const std::vector<std::string> lines =
        TextGenerator(spec_, *ranks_)
            .generate(o_.generate, privacy_->seed(), generationStart_,
                      tokenizer_.get());
    if (leader_) {
      for (const std::string &line : lines)
        std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  if (!tracePath_.empty())
    trace::writeChromeTrace(tracePath_);
  if (leader_) {
    ending.step = step_;
    ending.totalSteps = totalSteps_;
    const KernelTuning tuning = kernelTuning(&ranks_->slot(0).rank);
    report_.setKernelTuning(tuning.shapes, tuning.seconds);
    std::fputs(report_
                   .text(spec_, launch.world, dataDescription(), ending,
                         *privacy_, hyper_, !o_.trace.empty())
                   .c_str(),
               stdout);
    std::fflush(stdout);
  }
  ranks_->shutdown();
  return 0;
}

} // namespace

int runTrainingProgram(int argc, char **argv) {
  std::string program =
      argc > 0 ? fs::path(argv[0]).filename().string() : std::string("train");
  try {
    Options options = parseOptions(argc, argv);
    ProgramSpec spec;
    try {
      dp_describe(&spec);
      requireSumsFromRows(spec);
    } catch (const std::exception &e) {
      throw std::runtime_error(std::string("the program describes itself "
                                           "inconsistently (a compiler "
                                           "bug): ") +
                               e.what());
    }
    if (options.help) {
      std::fputs(usageText(program, spec).c_str(), stdout);
      return 0;
    }
    if (spec.backend != backendName())
      throw std::runtime_error("the program was compiled for the " +
                               spec.backend + " backend but linked with the " +
                               backendName() + " runtime");
    checkOptions(options, spec);
    Trainer trainer(std::move(options), std::move(spec), program);
    return trainer.run();
  } catch (const UsageError &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    return 1;
  }
}

} // namespace dprt::driver
