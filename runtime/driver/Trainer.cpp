//===- Trainer.cpp - The training program's step loop ---------------------===//
//
// Compiled once per backend (dprt_driver_cpu, dprt_driver_cuda): every call
// into the backend goes through dprt::<service> and dprt::<kernel>, which
// kernels.h and backend.h resolve to the backend this file is built for.
//
// The Trainer wires the rooms of the driver together and keeps the step
// loop: ProcessRanks (launch, communicators, rank threads), PrivacySession
// (q, sigma, keys, accountant, budget), Checkpointer (save and load of the
// shards), TextGenerator (--generate) and RunReport (the final report). One
// step (TrainStep.cpp): the main thread samples the logical batch and the
// physical-batch plan, then every rank thread fills its rows, runs its
// micro-steps and the optimizer step, and the threads meet again.
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

#include "TrainLoop.h"

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
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

namespace dprt::driver {
namespace {

namespace fs = std::filesystem;

std::string formatNumber(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

} // namespace

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
