//===- Trainer.cpp - The training program's main loop ---------------------===//
//
// Compiled once per backend (dprt_driver_cpu, dprt_driver_cuda): every call
// into the backend goes through dprt::<service> and dprt::<kernel>, which
// kernels.h and backend.h resolve to the backend this file is built for.
//
// Each rank is driven by its own thread (the CPU backend's ranks are threads;
// with --gpus N each GPU gets a thread that owns its device context). The
// main thread samples the logical batch and the physical-batch plan, then
// every rank thread fills its rows, runs its micro-steps and the optimizer
// step, and the threads meet again. Every arena access happens on the rank's
// own thread.
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

#include "Checkpoint.h"
#include "Dataset.h"
#include "Options.h"
#include "Progress.h"
#include "Safetensors.h"

#include "common/ThreadCommunicator.h"
#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/comm.h"
#include "dprt/kernels.h"
#include "dprt/keys.h"
#include "dprt/program.h"
#include "dprt/rng.h"
#include "privacy/Accountant.h"
#include "privacy/PrivacyReport.h"
#include "privacy/Sampler.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

namespace dprt::driver {
namespace {

namespace fs = std::filesystem;

constexpr int kMicrostepSlot = 0;
constexpr int kApplySlot = 1;
constexpr int kForwardSlot = 2;

/// rng.h stream of the sampling in --generate; rng.h's own streams are
/// 0..3, this one is the driver's.
constexpr uint32_t kGenerationStream = 200;
constexpr double kGenerationTemperature = 0.8;
constexpr int64_t kGenerationTopK = 40;

/// The budget check compares epsilons composed step by step with a target
/// that calibrateSigma met for all steps at once; the two differ by
/// rounding, which must not stop a run one step early.
constexpr double kBudgetSlack = 1e-9;

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

//===----------------------------------------------------------------------===//
// Rank threads
//===----------------------------------------------------------------------===//

/// One persistent thread per local rank; run() executes a job on all of them
/// and waits. When a job throws, `abort` wakes the ranks blocked in a
/// collective, and run() rethrows the root cause (not the "aborted" errors
/// it caused in the other ranks).
class RankThreads {
public:
  RankThreads(int count, std::function<void(const std::string &)> abort)
      : abort_(std::move(abort)), errors_(count) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this, i] { loop(i); });
  }

  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : threads_)
      t.join();
  }

  int size() const { return static_cast<int>(threads_.size()); }

  void run(const std::function<void(int)> &job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      pending_ = size();
      for (auto &e : errors_)
        e = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    std::exception_ptr first, root;
    for (auto &e : errors_) {
      if (!e)
        continue;
      if (!first)
        first = e;
      try {
        std::rethrow_exception(e);
      } catch (const CommunicatorAborted &) {
      } catch (...) {
        if (!root)
          root = e;
      }
    }
    if (root || first)
      std::rethrow_exception(root ? root : first);
  }

private:
  void loop(int index) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int)> *job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        job = job_;
      }
      try {
        (*job)(index);
      } catch (const std::exception &e) {
        errors_[index] = std::current_exception();
        abort_(std::string("another rank failed: ") + e.what());
      } catch (...) {
        errors_[index] = std::current_exception();
        abort_("another rank failed");
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--pending_ == 0)
          done_.notify_all();
      }
    }
  }

  std::function<void(const std::string &)> abort_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)> *job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

//===----------------------------------------------------------------------===//
// Launch: which ranks this process drives
//===----------------------------------------------------------------------===//

Launch planLaunch(const Options &options, const ProgramSpec &spec) {
  Launch launch;
  launch.world = spec.ranks;
  launch.localRanks = spec.ranks;
  if (std::string(backendName()) == "cpu") {
    launch.sharedDevice = true; // every rank is a thread of this process
    return launch;
  }

  if (options.gpus) {
    if (*options.gpus > availableDevices())
      throw UsageError("--gpus " + std::to_string(*options.gpus) +
                       " but this machine has " +
                       std::to_string(availableDevices()) + " GPUs");
    return launch;
  }
  // One process per GPU, started by torchrun, Slurm or mpirun.
  LaunchEnvironment environment;
  bool launched = false;
  try {
    launched = readLaunchEnvironment(environment);
  } catch (const std::invalid_argument &e) {
    throw UsageError(std::string("the launcher's environment: ") + e.what());
  }
  if (launched && environment.world > 1) {
    if (environment.world != spec.ranks)
      throw UsageError(environment.launcher + " started " +
                       std::to_string(environment.world) +
                       " processes but the program was compiled for " +
                       std::to_string(spec.ranks) + " ranks");
    launch.multiProcess = true;
    launch.localRanks = 1;
    launch.firstRank = environment.rank;
    launch.firstDevice = environment.localRank;
    return launch;
  }
  if (spec.ranks > 1)
    throw UsageError("this program was compiled for " +
                     std::to_string(spec.ranks) + " ranks: pass --gpus " +
                     std::to_string(spec.ranks) + ", or launch " +
                     std::to_string(spec.ranks) +
                     " processes with torchrun, Slurm or mpirun");
  return launch;
}

/// The communicators of this process's ranks, and how to abort them.
struct Communicators {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::function<void(const std::string &)> abort;
};

Communicators makeCommunicators(const Launch &launch) {
  Communicators c;
  c.comms = dprt::makeCommunicators(launch);
  std::vector<Communicator *> comms;
  for (auto &comm : c.comms)
    comms.push_back(comm.get());
  c.abort = [comms](const std::string &reason) {
    for (Communicator *comm : comms)
      comm->abort(reason);
  };
  return c;
}

//===----------------------------------------------------------------------===//
// The run
//===----------------------------------------------------------------------===//

const char *generatorName(NoiseGeneratorKind kind) {
  return kind == NoiseGeneratorKind::ChaCha20 ? "chacha20" : "philox";
}

const char *optimizerName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Momentum:
    return "momentum";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "?";
}

/// Reads a 256-bit key written as 64 hexadecimal digits (whitespace
/// ignored) into four words, first word from the first 16 digits.
void readNoiseKey(const std::string &path, uint64_t key[4]) {
  std::ifstream in(path);
  if (!in)
    throw UsageError("cannot read the noise key file '" + path + "'");
  std::string digits;
  for (char c; in.get(c);)
    if (!std::isspace(static_cast<unsigned char>(c)))
      digits += c;
  if (digits.size() != 64 ||
      digits.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw UsageError("the noise key file '" + path +
                     "' must hold 64 hexadecimal digits (256 bits)");
  for (int i = 0; i < 4; ++i)
    key[i] = std::stoull(digits.substr(16 * i, 16), nullptr, 16);
}

/// 256 bits from the operating system's cryptographic generator.
void secretFromOperatingSystem(uint64_t key[4]) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  if (!in.read(reinterpret_cast<char *>(key), 4 * sizeof(uint64_t)))
    throw std::runtime_error("cannot read /dev/urandom for the secret noise "
                             "key; pass --noise-key FILE");
}

/// A rank and its host staging buffers.
struct RankSlot {
  Rank rank;
  std::vector<std::vector<char>> inputs; ///< per input, physicalBatch rows
  std::vector<char> mask;
  std::vector<char> losses;
};

/// Per-rank totals of one step, summed over the ranks.
struct StepTotals {
  double loss = 0;
  double samples = 0;
  double tokens = 0;
  double exposedCommSeconds = 0; ///< summed over the ranks
};

class Trainer {
public:
  Trainer(Options options, ProgramSpec spec, std::string program)
      : o_(std::move(options)), spec_(std::move(spec)),
        program_(std::move(program)), start_(Clock::now()) {}

  ~Trainer() {
    // A failed run leaves its communicators alone: tearing NCCL down is
    // collective and would wait for ranks that may never get there.
    if (!finished_)
      for (auto &comm : comms_.comms)
        comm.release();
  }

  int run();

private:
  void log(const std::string &line) const {
    if (leader_ && !o_.quiet)
      std::fprintf(stderr, "%s\n", line.c_str());
  }

  void loadData();
  void setUpPrivacy();
  void restorePrivacy();
  void startRanks();
  void initRanks();
  StepState stepState(int64_t step) const;
  void trainStep(int64_t step, StepMetrics &metrics);
  bool budgetAllows(double &nextEpsilon) const;
  CheckpointState checkpointState() const;
  std::vector<std::vector<char>>
  gatherUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets);
  /// Calls body(rank, lo, hi) on each local rank's thread for the elements
  /// [lo, hi) of `unit` that rank's shard holds (none: not called).
  void forEachLocalShard(
      const UnitSpec &unit,
      const std::function<void(Rank &, int64_t, int64_t)> &body);
  void scatterUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets,
                   const std::vector<std::vector<char>> &fulls);
  std::vector<std::pair<std::string, int64_t>>
  optimizerTensors(const UnitSpec &unit) const;
  std::vector<std::vector<const ParamSpec *>> paramsByUnit() const;
  void saveCheckpoint();
  void loadCheckpoint(const std::string &path);
  void generate(int64_t lines);
  void report(bool stoppedByBudget) const;

  Options o_;
  ProgramSpec spec_;
  std::string program_;
  Clock::time_point start_;
  bool leader_ = true;

  // Data.
  std::unique_ptr<DataLayout> layout_;
  std::unique_ptr<Dataset> data_;

  // The run's parameters and progress.
  int64_t totalSteps_ = 0;
  int64_t step_ = 0;
  uint64_t seed_ = 0;
  uint64_t initKey_ = 0;
  uint64_t noiseKey_[4] = {0, 0, 0, 0};
  double q_ = 0;
  double expectedBatch_ = 0;
  double sigma_ = 0;
  double delta_ = 0;
  double targetEpsilon_ = 0;
  std::string sigmaSource_;
  std::string noiseKeySource_; ///< set for secure (ChaCha20) runs
  privacy::RdpAccountant accountant_;

  // Resume.
  std::unique_ptr<CheckpointState> resumed_;
  std::string resumePath_;

  // Ranks.
  Launch launch_;
  Communicators comms_;
  std::vector<std::unique_ptr<RankSlot>> slots_;
  std::unique_ptr<RankThreads> threads_;

  // Statistics.
  double trainSeconds_ = 0;
  /// Communication compute waited for, mean over the ranks, summed over the
  /// steps (measured with --trace only).
  double exposedCommSeconds_ = 0;
  int64_t trainedSamples_ = 0;
  int64_t trainedTokens_ = 0;
  int64_t stepsRun_ = 0;
  int64_t peakBytes_ = 0;
  double lastLoss_ = std::nan("");
  bool finished_ = false;
};

void Trainer::loadData() {
  bool needLayout = !o_.data.empty() || o_.generate > 0;
  if (needLayout)
    layout_ = std::make_unique<DataLayout>(DataLayout::of(spec_));
  if (o_.generate > 0 && (!layout_->languageModel || spec_.logitsOffset < 0))
    throw UsageError("--generate samples text from a language model; this "
                     "program's model is not one (no token inputs and "
                     "logits)");
  if (o_.generate > 0 && spec_.classes < 256)
    throw UsageError("--generate samples bytes, but the model's vocabulary "
                     "has only " +
                     std::to_string(spec_.classes) + " tokens");
  if (!o_.data.empty())
    data_ = std::make_unique<Dataset>(Dataset::load(o_.data, *layout_));
}

void Trainer::setUpPrivacy() {
  const RecipeSpec &r = spec_.recipe;
  const int64_t records = data_ ? data_->size() : 0;
  if (r.sampling == SamplingKind::Poisson) {
    if (r.rate > 0)
      q_ = r.rate;
    else if (records > 0)
      q_ = static_cast<double>(r.expectedBatch) / records;
    if (q_ > 1)
      throw UsageError("the recipe's expected batch of " +
                       std::to_string(r.expectedBatch) +
                       " records exceeds the " + std::to_string(records) +
                       " records of the data: Poisson sampling needs "
                       "q = batch / records <= 1");
    expectedBatch_ = q_ * records;
  } else {
    if (records > 0 && r.shuffleBatch > records)
      throw UsageError("the recipe's batch of " +
                       std::to_string(r.shuffleBatch) +
                       " records exceeds the " + std::to_string(records) +
                       " records of the data");
    q_ = records > 0 ? static_cast<double>(r.shuffleBatch) / records : 0;
    expectedBatch_ = static_cast<double>(r.shuffleBatch);
  }
  if (records > 0 && expectedBatch_ <= 0)
    throw UsageError("the expected logical batch is empty (q * records = 0)");

  delta_ = o_.delta ? *o_.delta : r.delta;
  targetEpsilon_ = o_.epsilon                       ? *o_.epsilon
                   : (!o_.sigma && r.targetEpsilon) ? r.epsilon
                                                    : 0;
  if (o_.sigma) {
    sigma_ = *o_.sigma;
    sigmaSource_ = "given by --sigma";
  } else if (targetEpsilon_ > 0) {
    // --steps 0 still calibrates for the recipe's steps, so that a saved
    // initial checkpoint carries a usable noise level.
    const int64_t steps =
        totalSteps_ > 0 ? totalSteps_ : std::max<int64_t>(1, r.steps);
    if (q_ <= 0) {
      sigma_ = 0;
      sigmaSource_ = "not calibrated (no data)";
    } else {
      privacy::SigmaCalibration c =
          privacy::calibrateSigma(targetEpsilon_, delta_, q_, steps);
      if (!c.ok())
        throw UsageError("cannot calibrate sigma for epsilon = " +
                         std::to_string(targetEpsilon_) + ": " + c.error);
      sigma_ = c.sigma;
      std::ostringstream os;
      os << "calibrated for epsilon = " << targetEpsilon_
         << " at delta = " << delta_ << " over " << steps
         << " steps at q = " << q_;
      sigmaSource_ = os.str();
    }
  } else {
    sigma_ = r.sigma;
    sigmaSource_ = "the recipe's";
  }

  seed_ = o_.seed ? *o_.seed : static_cast<uint64_t>(r.seed);
  initKey_ = seed_;
  if (r.generator == NoiseGeneratorKind::ChaCha20) {
    // Secure noise: the ChaCha20 key must be secret, or whoever knows it can
    // subtract the noise (and see who was sampled). It comes from a file or
    // from the operating system, never from the seed.
    if (!o_.noiseKey.empty()) {
      readNoiseKey(o_.noiseKey, noiseKey_);
      noiseKeySource_ = "from " + o_.noiseKey;
    } else if (launch_.localRanks != launch_.world) {
      throw UsageError("a secure run with one process per GPU needs the "
                       "same secret key on every rank: pass --noise-key "
                       "FILE (64 hex digits)");
    } else {
      secretFromOperatingSystem(noiseKey_);
      noiseKeySource_ = "fresh from the operating system";
    }
    return;
  }
  noiseKeyWordsFromSeed(seed_, noiseKey_);
}

void Trainer::restorePrivacy() {
  const CheckpointState &s = *resumed_;
  const RecipeSpec &r = spec_.recipe;
  if (s.model != spec_.model)
    throw UsageError("the checkpoint '" + resumePath_ + "' is of model '" +
                     s.model + "', this program trains '" + spec_.model + "'");
  if (s.compute != nameOf(spec_.compute))
    throw UsageError("the checkpoint '" + resumePath_ + "' was trained in " +
                     s.compute + ", this program computes in " +
                     nameOf(spec_.compute));
  if (s.optimizer != optimizerName(r.optimizer) || s.lr != r.lr ||
      s.momentum != r.momentum || s.nesterov != r.nesterov ||
      s.beta1 != r.beta1 || s.beta2 != r.beta2 || s.eps != r.eps ||
      s.weightDecay != r.weightDecay || s.maxNorm != r.maxNorm)
    throw UsageError("the checkpoint '" + resumePath_ +
                     "' was written by a program with another optimizer or "
                     "clipping bound; resume with the program that wrote it");
  if (s.step == 0) {
    // Nothing was released yet: the privacy parameters are chosen afresh,
    // as for a new run; only the initial parameters come from the
    // checkpoint.
    setUpPrivacy();
    return;
  }
  // Repeating the original command line with --resume is fine; changing
  // what the privacy guarantee or the random streams depend on is not.
  auto refuse = [&](const char *flag, const std::string &saved) {
    throw UsageError(std::string(flag) +
                     " cannot change when resuming: the checkpoint's run "
                     "used " +
                     saved + "; start a new run to change it");
  };
  if (o_.sigma && *o_.sigma != s.sigma)
    refuse("--sigma", "sigma = " + std::to_string(s.sigma));
  if (o_.epsilon && *o_.epsilon != s.targetEpsilon)
    refuse("--epsilon", s.targetEpsilon > 0
                            ? "epsilon = " + std::to_string(s.targetEpsilon)
                            : "no target epsilon");
  if (o_.delta && *o_.delta != s.delta)
    refuse("--delta", "delta = " + std::to_string(s.delta));
  if (o_.seed && *o_.seed != s.seed)
    refuse("--seed", "seed = " + std::to_string(s.seed));
  if (s.sampler !=
          (r.sampling == SamplingKind::Poisson ? "poisson" : "shuffle") ||
      s.generator != generatorName(r.generator))
    throw UsageError("the checkpoint '" + resumePath_ +
                     "' used another sampler or noise generator");
  if (data_ && (data_->size() != s.datasetRecords ||
                data_->fingerprint() != s.datasetFingerprint))
    throw UsageError("--data '" + o_.data +
                     "' is not the data of the "
                     "checkpoint's run (" +
                     std::to_string(s.datasetRecords) +
                     " records with another content); a resumed run must "
                     "see the same records to sample the same batches");
  q_ = s.q;
  sigma_ = s.sigma;
  delta_ = s.delta;
  targetEpsilon_ = s.targetEpsilon;
  seed_ = s.seed;
  initKey_ = s.initKey;
  std::copy(s.noiseKey, s.noiseKey + 4, noiseKey_);
  if (r.generator == NoiseGeneratorKind::ChaCha20)
    noiseKeySource_ = "from the checkpoint";
  expectedBatch_ = r.sampling == SamplingKind::Poisson
                       ? q_ * static_cast<double>(s.datasetRecords)
                       : static_cast<double>(s.shuffleBatch);
  sigmaSource_ = "from the checkpoint";
  // Composing the history one step at a time repeats the uninterrupted
  // run's floating-point additions, so epsilon comes out bit for bit.
  for (const privacy::SampledGaussianSegment &segment : s.segments)
    for (int64_t i = 0; i < segment.steps; ++i)
      accountant_.compose(segment.q, segment.sigma, 1);
  if (accountant_.steps() != s.step)
    throw UsageError("the checkpoint '" + resumePath_ +
                     "' has an accountant history of " +
                     std::to_string(accountant_.steps()) + " steps for step " +
                     std::to_string(s.step));
  step_ = s.step;
}

void Trainer::startRanks() {
  launch_ = planLaunch(o_, spec_);
  leader_ = launch_.firstRank == 0;
  comms_ = makeCommunicators(launch_);
  for (int i = 0; i < launch_.localRanks; ++i) {
    auto slot = std::make_unique<RankSlot>();
    slot->rank.rank = launch_.firstRank + i;
    slot->rank.world = launch_.world;
    slot->rank.stateOffset = spec_.stateOffset;
    slot->rank.comm = comms_.comms[i].get();
    for (const InputSpec &input : spec_.inputs) {
      int64_t rowBytes = 4;
      if (input.role == InputRole::Features || input.role == InputRole::Target)
        rowBytes = sizeOf(spec_.compute);
      for (int64_t d : input.dims)
        rowBytes *= d;
      slot->inputs.emplace_back(spec_.physicalBatch * rowBytes);
    }
    slot->mask.resize(spec_.physicalBatch * sizeOf(accOf(spec_.compute)));
    slot->losses.resize(slot->mask.size());
    slots_.push_back(std::move(slot));
  }
  threads_ = std::make_unique<RankThreads>(launch_.localRanks, comms_.abort);
}

StepState Trainer::stepState(int64_t step) const {
  StepState s{};
  s.step = step;
  s.noiseStd = sigma_ * spec_.recipe.maxNorm;
  s.gradScale = expectedBatch_ > 0 ? 1.0 / expectedBatch_ : 0.0;
  s.lrScale = 1.0;
  std::copy(noiseKey_, noiseKey_ + 4, s.noiseKey);
  s.initKey = initKey_;
  s.noiseGenerator = static_cast<int32_t>(spec_.recipe.generator);
  return s;
}

void Trainer::initRanks() {
  const StepState state = stepState(0);
  threads_->run([&](int i) {
    Rank &rank = slots_[i]->rank;
    DPRT_TRACE(rank.rank, trace::Track::Compute, "init");
    initRank(&rank, launch_.deviceOf(i));
    allocateArena(&rank, spec_.arenaBytes);
    // dp_init reads the initializer key from the step state.
    rank.hostState = state;
    uploadStepState(&rank);
    dp_init(&rank);
    synchronize(&rank);
    // What compute waits for communication in the steps is part of the
    // trace.
    rank.measureExposedComm = !o_.trace.empty();
  });
}

bool Trainer::budgetAllows(double &nextEpsilon) const {
  if (targetEpsilon_ <= 0 || !o_.budgetStop)
    return true;
  privacy::RdpAccountant next = accountant_;
  next.compose(q_, sigma_, 1);
  nextEpsilon = next.epsilon(delta_).epsilon;
  return nextEpsilon <= targetEpsilon_ * (1 + kBudgetSlack);
}

void Trainer::trainStep(int64_t step, StepMetrics &metrics) {
  const RecipeSpec &r = spec_.recipe;
  const NoiseKey samplerKey = samplingKeyFromWords(noiseKey_);
  const NoiseGenerator generator =
      noiseGeneratorOf(static_cast<int32_t>(r.generator));
  // Both samplers are pure functions of (key, step): nothing to carry over.
  std::vector<int64_t> batch =
      r.sampling == SamplingKind::Poisson
          ? privacy::PoissonSampler(samplerKey, data_->size(), q_, generator)
                .sample(step)
          : privacy::ShuffleSampler(samplerKey, data_->size(), r.shuffleBatch,
                                    generator)
                .sample(step);
  const privacy::PhysicalBatchPlan plan = privacy::planPhysicalBatches(
      static_cast<int64_t>(batch.size()), launch_.world, spec_.physicalBatch);
  const StepState state = stepState(step);
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  StepTotals totals;
  int64_t peak = 0;

  const auto begin = Clock::now();
  threads_->run([&](int i) {
    RankSlot &slot = *slots_[i];
    Rank &rank = slot.rank;
    rank.hostState = state;
    uploadStepState(&rank);
    rank.exposedCommSeconds = 0;
    double sums[4] = {0, 0, 0, 0}; // loss, samples, tokens, exposed comm
    for (int64_t m = 0; m < plan.microSteps; ++m) {
      const privacy::PhysicalBatchPlan::Slice part = plan.slice(m, rank.rank);
      {
        DPRT_TRACE(rank.rank, trace::Track::Compute, "fill_inputs");
        for (size_t k = 0; k < spec_.inputs.size(); ++k) {
          const InputSpec &input = spec_.inputs[k];
          std::vector<char> &rows = slot.inputs[k];
          const int64_t rowBytes =
              static_cast<int64_t>(rows.size()) / spec_.physicalBatch;
          for (int64_t row = 0; row < spec_.physicalBatch; ++row)
            data_->writeRow(input,
                            row < part.count ? batch[part.first + row] : -1,
                            rows.data() + row * rowBytes);
          copyToArena(&rank, input.offset, rows.data(),
                      static_cast<int64_t>(rows.size()));
        }
        for (int64_t row = 0; row < spec_.physicalBatch; ++row)
          storeAs(acc, row < part.count ? 1.0 : 0.0,
                  slot.mask.data() + row * accBytes);
        copyToArena(&rank, spec_.maskOffset, slot.mask.data(),
                    static_cast<int64_t>(slot.mask.size()));
      }
      {
        DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_microstep");
        runCaptured(&rank, kMicrostepSlot, dp_microstep);
      }
      if (spec_.lossOffset >= 0) {
        copyFromArena(&rank, slot.losses.data(), spec_.lossOffset,
                      static_cast<int64_t>(slot.losses.size()));
        for (int64_t row = 0; row < part.count; ++row)
          sums[0] += loadAs(acc, slot.losses.data() + row * accBytes);
      }
      sums[1] += static_cast<double>(part.count);
      for (int64_t row = 0; row < part.count; ++row)
        sums[2] +=
            static_cast<double>(data_->tokensOf(batch[part.first + row]));
    }
    {
      DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_apply");
      runCaptured(&rank, kApplySlot, dp_apply);
    }
    synchronize(&rank);
    sums[3] = rank.exposedCommSeconds;
    rank.comm->allReduceHost(sums, 4);
    if (i == 0) {
      totals = StepTotals{sums[0], sums[1], sums[2], sums[3]};
      peak = peakMemoryBytes(&rank);
    }
  });
  const double seconds = secondsSince(begin);

  accountant_.compose(q_, sigma_, 1);
  step_ = step;
  trainSeconds_ += seconds;
  trainedSamples_ += static_cast<int64_t>(totals.samples);
  trainedTokens_ += static_cast<int64_t>(totals.tokens);
  ++stepsRun_;
  peakBytes_ = std::max(peakBytes_, peak);

  metrics.step = step;
  metrics.samples = static_cast<int64_t>(totals.samples);
  metrics.tokens = static_cast<int64_t>(totals.tokens);
  metrics.loss = spec_.lossOffset >= 0 && totals.samples > 0
                     ? totals.loss / totals.samples
                     : std::nan("");
  if (!std::isnan(metrics.loss))
    lastLoss_ = metrics.loss;
  metrics.epsilon = accountant_.epsilon(delta_).epsilon;
  metrics.microSteps = plan.microSteps;
  metrics.stepSeconds = seconds;
  metrics.wallSeconds = secondsSince(start_);
  metrics.memoryBytes = peak;
  if (!o_.trace.empty()) { // else it stays NaN: not measured
    metrics.exposedCommSeconds = totals.exposedCommSeconds / launch_.world;
    exposedCommSeconds_ += metrics.exposedCommSeconds;
  }
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

CheckpointState Trainer::checkpointState() const {
  const RecipeSpec &r = spec_.recipe;
  CheckpointState s;
  s.model = spec_.model;
  s.backend = spec_.backend;
  s.compute = nameOf(spec_.compute);
  s.ranks = spec_.ranks;
  s.step = step_;
  s.totalSteps = totalSteps_;
  s.seed = seed_;
  s.initKey = initKey_;
  std::copy(noiseKey_, noiseKey_ + 4, s.noiseKey);
  s.generator = generatorName(r.generator);
  s.sampler = r.sampling == SamplingKind::Poisson ? "poisson" : "shuffle";
  s.nextSamplerStep = step_ + 1;
  s.q = q_;
  s.shuffleBatch = r.sampling == SamplingKind::Shuffle ? r.shuffleBatch : 0;
  s.datasetRecords = data_ ? data_->size() : 0;
  s.datasetFingerprint = data_ ? data_->fingerprint() : 0;
  s.sigma = sigma_;
  s.maxNorm = r.maxNorm;
  s.delta = delta_;
  s.targetEpsilon = targetEpsilon_;
  s.epsilon = accountant_.epsilon(delta_).epsilon;
  s.segments = accountant_.segments();
  s.optimizer = optimizerName(r.optimizer);
  s.lr = r.lr;
  s.momentum = r.momentum;
  s.nesterov = r.nesterov;
  s.beta1 = r.beta1;
  s.beta2 = r.beta2;
  s.eps = r.eps;
  s.weightDecay = r.weightDecay;
  return s;
}

std::vector<std::vector<const ParamSpec *>> Trainer::paramsByUnit() const {
  std::vector<std::vector<const ParamSpec *>> byUnit(spec_.units.size());
  for (const ParamSpec &p : spec_.params)
    byUnit[p.unit].push_back(&p);
  for (auto &params : byUnit)
    std::sort(params.begin(), params.end(),
              [](const ParamSpec *a, const ParamSpec *b) {
                return a->offsetInUnit < b->offsetInUnit;
              });
  return byUnit;
}

std::vector<std::pair<std::string, int64_t>>
Trainer::optimizerTensors(const UnitSpec &unit) const {
  switch (spec_.recipe.optimizer) {
  case OptimizerKind::SGD:
    return {};
  case OptimizerKind::Momentum:
    return {{unit.name + ".momentum", unit.optState1}};
  case OptimizerKind::AdamW:
    return {{unit.name + ".adam_m", unit.optState1},
            {unit.name + ".adam_v", unit.optState2}};
  }
  return {};
}

void Trainer::forEachLocalShard(
    const UnitSpec &unit,
    const std::function<void(Rank &, int64_t, int64_t)> &body) {
  threads_->run([&](int i) {
    Rank &rank = slots_[i]->rank;
    const int64_t lo = rank.rank * unit.shardElems;
    const int64_t hi = std::min(lo + unit.shardElems, unit.numel);
    if (lo < hi)
      body(rank, lo, hi);
  });
}

std::vector<std::vector<char>>
Trainer::gatherUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets) {
  const int64_t accBytes = sizeOf(accOf(spec_.compute));
  std::vector<std::vector<char>> fulls(
      offsets.size(), std::vector<char>(unit.numel * accBytes));
  forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
    for (size_t k = 0; k < offsets.size(); ++k)
      copyFromArena(&rank, fulls[k].data() + lo * accBytes, offsets[k],
                    (hi - lo) * accBytes);
  });
  return fulls;
}

void Trainer::scatterUnit(const UnitSpec &unit,
                          const std::vector<int64_t> &offsets,
                          const std::vector<std::vector<char>> &fulls) {
  const int64_t accBytes = sizeOf(accOf(spec_.compute));
  forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
    for (size_t k = 0; k < offsets.size(); ++k)
      copyToArena(&rank, offsets[k], fulls[k].data() + lo * accBytes,
                  (hi - lo) * accBytes);
  });
}

void Trainer::saveCheckpoint() {
  DPRT_TRACE(launch_.firstRank, trace::Track::Compute, "checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  CheckpointDirectory directory(o_.save);
  const std::string temporary = directory.begin(step_);
  const auto byUnit = paramsByUnit();

  std::vector<TensorInfo> paramTensors, optimizerInfos;
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    for (const ParamSpec *p : byUnit[u])
      paramTensors.push_back({p->name, acc, p->shape});
    for (const auto &[name, offset] : optimizerTensors(spec_.units[u]))
      optimizerInfos.push_back({name, acc, {spec_.units[u].numel}});
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "dpc"},
      {"model", spec_.model},
      {"step", std::to_string(step_)}};
  SafetensorsWriter params(temporary + "/params.safetensors", paramTensors,
                           metadata);
  SafetensorsWriter optimizer(temporary + "/optimizer.safetensors",
                              optimizerInfos, metadata);
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    const UnitSpec &unit = spec_.units[u];
    std::vector<int64_t> offsets = {unit.masterShard};
    for (const auto &[name, offset] : optimizerTensors(unit))
      offsets.push_back(offset);
    std::vector<std::vector<char>> fulls = gatherUnit(unit, offsets);
    for (const ParamSpec *p : byUnit[u])
      params.write(fulls[0].data() + p->offsetInUnit * accBytes);
    for (size_t k = 1; k < fulls.size(); ++k)
      optimizer.write(fulls[k].data());
  }
  params.close();
  optimizer.close();
  writeFileDurably(temporary + "/state.json", toJson(checkpointState()));
  const std::string path = directory.commit();
  log("saved checkpoint of step " + std::to_string(step_) + " to " + path);
}

/// Reads a tensor into `out` (count elements of `to`), converting if the
/// file stores another type.
void readTensor(SafetensorsReader &reader, const TensorInfo &tensor, DType to,
                char *out) {
  if (tensor.dtype == to) {
    reader.read(tensor, out);
    return;
  }
  std::vector<char> raw(tensor.end - tensor.begin);
  reader.read(tensor, raw.data());
  const int64_t n = tensor.numel();
  for (int64_t i = 0; i < n; ++i)
    storeAs(to, loadAs(tensor.dtype, raw.data() + i * sizeOf(tensor.dtype)),
            out + i * sizeOf(to));
}

void Trainer::loadCheckpoint(const std::string &path) {
  DPRT_TRACE(launch_.firstRank, trace::Track::Compute, "load_checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  const auto byUnit = paramsByUnit();
  auto reader = [](const std::string &file) {
    try {
      return std::make_unique<SafetensorsReader>(file);
    } catch (const std::runtime_error &e) {
      throw UsageError(e.what());
    }
  };
  auto params = reader(path + "/params.safetensors");
  std::unique_ptr<SafetensorsReader> optimizer;
  if (spec_.recipe.optimizer != OptimizerKind::SGD)
    optimizer = reader(path + "/optimizer.safetensors");

  for (const TensorInfo &t : params->tensors())
    if (std::none_of(spec_.params.begin(), spec_.params.end(),
                     [&](const ParamSpec &p) { return p.name == t.name; }))
      throw UsageError("the checkpoint's parameter '" + t.name +
                       "' is not a parameter of model '" + spec_.model + "'");
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    const UnitSpec &unit = spec_.units[u];
    std::vector<int64_t> offsets = {unit.masterShard};
    std::vector<std::vector<char>> fulls(
        1, std::vector<char>(unit.numel * accBytes));
    for (const ParamSpec *p : byUnit[u]) {
      const TensorInfo *t = params->find(p->name);
      if (!t)
        throw UsageError("the checkpoint '" + path + "' has no parameter '" +
                         p->name + "'");
      if (t->shape != p->shape)
        throw UsageError("the checkpoint's parameter '" + p->name +
                         "' has another shape than the model's");
      readTensor(*params, *t, acc,
                 fulls[0].data() + p->offsetInUnit * accBytes);
    }
    for (const auto &[name, offset] : optimizerTensors(unit)) {
      const TensorInfo *t = optimizer->find(name);
      if (!t || t->shape != std::vector<int64_t>{unit.numel})
        throw UsageError("the checkpoint '" + path +
                         "' has no optimizer state '" + name + "' of " +
                         std::to_string(unit.numel) + " elements");
      fulls.emplace_back(unit.numel * accBytes);
      readTensor(*optimizer, *t, acc, fulls.back().data());
      offsets.push_back(offset);
    }
    scatterUnit(unit, offsets, fulls);
  }
  // Compute-type copies of the master weights (bf16 models) follow them.
  threads_->run([&](int i) {
    Rank &rank = slots_[i]->rank;
    for (const UnitSpec &unit : spec_.units)
      if (unit.paramShard != unit.masterShard)
        cast(&rank, acc, rank.arena + unit.masterShard, spec_.compute,
             rank.arena + unit.paramShard, unit.shardElems);
    synchronize(&rank);
  });
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

/// Samples from softmax(logits / temperature) restricted to the top k, with
/// the uniform u in (0, 1].
int32_t sampleToken(const std::vector<double> &logits, double u) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min<int64_t>(kGenerationTopK, logits.size());
  std::partial_sort(
      order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  std::vector<double> weights(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[order[i]] - logits[order[0]]) /
                          kGenerationTemperature);
    total += weights[i];
  }
  double threshold = u * total, cumulative = 0;
  for (int64_t i = 0; i < k; ++i) {
    cumulative += weights[i];
    if (cumulative >= threshold)
      return order[i];
  }
  return order[k - 1];
}

std::string printable(const std::vector<int32_t> &ids) {
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) { // ids[0] is the start token
    int32_t id = ids[i];
    if (id >= 256) {
      out += "<" + std::to_string(id) + ">";
    } else if (id < 0x20 && id != '\t') {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", id);
      out += escape;
    } else {
      out += static_cast<char>(id);
    }
  }
  return out;
}

void Trainer::generate(int64_t lines) {
  const int64_t batchRows = spec_.physicalBatch, tokens = spec_.tokens;
  const int64_t classes = spec_.classes;
  const int64_t logitBytes = sizeOf(spec_.compute);
  NoiseKey key{};
  key.seed = seed_;
  std::vector<double> logits(classes);
  std::vector<char> row(classes * logitBytes * batchRows);
  for (int64_t produced = 0; produced < lines;) {
    const int64_t count = std::min(batchRows, lines - produced);
    std::vector<std::vector<int32_t>> seqs(count, std::vector<int32_t>{'\n'});
    std::vector<bool> done(count, false);
    for (int64_t pos = 0; pos < tokens; ++pos) {
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
        break;
      threads_->run([&](int i) {
        RankSlot &slot = *slots_[i];
        Rank &rank = slot.rank;
        const DType acc = accOf(spec_.compute);
        for (size_t k = 0; k < spec_.inputs.size(); ++k) {
          const InputSpec &input = spec_.inputs[k];
          auto *ids = reinterpret_cast<int32_t *>(slot.inputs[k].data());
          for (int64_t p = 0; p < batchRows; ++p)
            for (int64_t t = 0; t < tokens; ++t) {
              int32_t value = input.role == InputRole::NextTokens ? -1 : 0;
              if (input.role == InputRole::Tokens && p < count &&
                  t < static_cast<int64_t>(seqs[p].size()))
                value = seqs[p][t];
              ids[p * tokens + t] = value;
            }
          copyToArena(&rank, input.offset, slot.inputs[k].data(),
                      static_cast<int64_t>(slot.inputs[k].size()));
        }
        for (int64_t p = 0; p < batchRows; ++p)
          storeAs(acc, p < count ? 1.0 : 0.0,
                  slot.mask.data() + p * sizeOf(acc));
        copyToArena(&rank, spec_.maskOffset, slot.mask.data(),
                    static_cast<int64_t>(slot.mask.size()));
        {
          DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_forward");
          runCaptured(&rank, kForwardSlot, dp_forward);
        }
        if (i == 0)
          for (int64_t p = 0; p < count; ++p)
            copyFromArena(&rank, row.data() + p * classes * logitBytes,
                          spec_.logitsOffset +
                              (p * tokens + pos) * classes * logitBytes,
                          classes * logitBytes);
        synchronize(&rank);
      });
      for (int64_t p = 0; p < count; ++p) {
        if (done[p])
          continue;
        for (int64_t c = 0; c < classes; ++c)
          logits[c] = loadAs(spec_.compute,
                             row.data() + (p * classes + c) * logitBytes);
        const double u = uniformF64(
            NoiseGenerator::Philox, key, static_cast<uint64_t>(produced + p),
            static_cast<uint64_t>(pos), kGenerationStream);
        const int32_t next = sampleToken(logits, u);
        if (next == '\n') {
          done[p] = true;
          continue;
        }
        seqs[p].push_back(next);
        if (static_cast<int64_t>(seqs[p].size()) >= tokens)
          done[p] = true;
      }
    }
    if (leader_)
      for (const auto &seq : seqs)
        std::printf("%s\n", printable(seq).c_str());
    produced += count;
  }
  std::fflush(stdout);
}

//===----------------------------------------------------------------------===//
// Report and the run itself
//===----------------------------------------------------------------------===//

void Trainer::report(bool stoppedByBudget) const {
  if (!leader_)
    return;
  privacy::PrivacyReport privacy;
  privacy.noiseMultiplier = sigma_;
  privacy.maxGradNorm = spec_.recipe.maxNorm;
  privacy.samplingRate = q_;
  privacy.steps = step_;
  privacy.delta = delta_;
  privacy::EpsilonAndOrder eps = accountant_.epsilon(delta_);
  privacy.epsilon = step_ > 0 ? eps.epsilon : 0;
  privacy.rdpOrder = eps.order;
  privacy.sampler =
      spec_.recipe.sampling == SamplingKind::Poisson ? "poisson" : "shuffle";
  privacy.noiseGenerator = generatorName(spec_.recipe.generator);

  std::ostringstream os;
  os << "training report\n"
     << "  model             " << spec_.model << " (" << spec_.backend
     << " backend, " << launch_.world
     << (launch_.world == 1 ? " rank" : " ranks") << ")\n"
     << "  steps             " << step_ << " of " << totalSteps_;
  if (stoppedByBudget)
    os << " (stopped: the next step would exceed epsilon = " << targetEpsilon_
       << ")";
  os << "\n";
  if (data_)
    os << "  data              " << data_->describe() << " from " << o_.data
       << "\n";
  if (!std::isnan(lastLoss_))
    os << "  last loss         " << lastLoss_ << "\n";
  char line[160];
  const double seconds = trainSeconds_ > 0 ? trainSeconds_ : 0;
  std::snprintf(line, sizeof(line),
                "  throughput        %.1f samples/s, %.1f tokens/s (%lld "
                "steps in %.2f s)\n",
                seconds > 0 ? trainedSamples_ / seconds : 0.0,
                seconds > 0 ? trainedTokens_ / seconds : 0.0,
                static_cast<long long>(stepsRun_), seconds);
  os << line;
  os << "  memory per rank   peak " << formatBytes(peakBytes_) << "; predicted "
     << formatBytes(spec_.predictedPeakBytes);
  if (peakBytes_ > 0) {
    std::snprintf(line, sizeof(line), " (%.1f %% of the peak)",
                  100.0 * spec_.predictedPeakBytes / peakBytes_);
    os << line;
  }
  os << "; arena " << formatBytes(spec_.arenaBytes) << "\n";
  if (!o_.trace.empty() && launch_.world > 1) {
    std::snprintf(line, sizeof(line),
                  "  exposed comm      %.3f s (%.1f %% of the training time): "
                  "compute waiting for communication, mean over ranks\n",
                  exposedCommSeconds_,
                  seconds > 0 ? 100.0 * exposedCommSeconds_ / seconds : 0.0);
    os << line;
  }
  privacy::printPrivacyReport(os, privacy);
  os << "  noise source      sigma " << sigmaSource_ << "\n";
  if (!noiseKeySource_.empty())
    os << "  noise key         secret ChaCha20 key " << noiseKeySource_
       << "; checkpoints hold it: keep them as secret as the key\n";
  if (sigma_ == 0)
    os << "  warning           no noise: this run is not differentially "
          "private\n";
  std::fputs(os.str().c_str(), stdout);
  std::fflush(stdout);
}

int Trainer::run() {
  if (!o_.trace.empty())
    trace::enable();
  loadData();
  if (!o_.resume.empty()) {
    resumePath_ = resolveCheckpoint(o_.resume);
    resumed_ = std::make_unique<CheckpointState>(
        checkpointStateFromJson(readTextFile(resumePath_ + "/state.json"),
                                resumePath_ + "/state.json"));
  }
  totalSteps_ = o_.steps   ? *o_.steps
                : resumed_ ? resumed_->totalSteps
                           : spec_.recipe.steps;
  if (resumed_)
    restorePrivacy();
  else
    setUpPrivacy();
  if (step_ < totalSteps_ && !data_)
    throw UsageError("--data FILE is required to train (step " +
                     std::to_string(step_) + " of " +
                     std::to_string(totalSteps_) + ")");
  if (spec_.maskOffset < 0)
    throw std::runtime_error("the program has no mask buffer; padding rows "
                             "would enter the gradient");

  startRanks();
  if (launch_.multiProcess && (!o_.save.empty() || !o_.resume.empty()))
    throw UsageError("--save and --resume are not supported yet when the "
                     "program runs one process per GPU; use --gpus N on one "
                     "machine");
  {
    std::ostringstream os;
    os << program_ << ": " << spec_.model << " on " << launch_.world << " "
       << backendName() << (launch_.world == 1 ? " rank" : " ranks");
    if (data_)
      os << ", " << data_->describe() << " from " << o_.data;
    log(os.str());
    std::ostringstream privacy;
    privacy << "q = " << q_ << ", sigma = " << sigma_ << " (" << sigmaSource_
            << "), C = " << spec_.recipe.maxNorm << ", delta = " << delta_;
    log(privacy.str());
  }
  initRanks();
  if (resumed_) {
    loadCheckpoint(resumePath_);
    log("resumed from " + resumePath_ + " at step " + std::to_string(step_));
  }

  std::ofstream metrics;
  if (!o_.metrics.empty() && leader_) {
    metrics.open(o_.metrics, resumed_ ? std::ios::app : std::ios::trunc);
    if (!metrics)
      throw UsageError("cannot write the metrics file '" + o_.metrics +
                       "': " + std::strerror(errno));
  }

  Progress progress(o_.quiet || !leader_, step_ + 1, totalSteps_);
  bool stoppedByBudget = false;
  // A resumed run that trains no further step has nothing new to save in
  // the directory it resumed from.
  std::error_code sameDirectory;
  bool savedLast = resumed_ && !o_.save.empty() &&
                   fs::equivalent(o_.save, o_.resume, sameDirectory);
  for (int64_t step = step_ + 1; step <= totalSteps_; ++step) {
    double nextEpsilon = 0;
    if (!budgetAllows(nextEpsilon)) {
      progress.finish();
      std::ostringstream os;
      os << "stopping after step " << step_ << ": step " << step
         << " would raise epsilon to " << nextEpsilon << " > " << targetEpsilon_
         << " (the budget); pass --no-budget-stop to train past it";
      if (leader_)
        std::fprintf(stderr, "%s\n", os.str().c_str());
      stoppedByBudget = true;
      break;
    }
    StepMetrics m;
    trainStep(step, m);
    if (metrics.is_open()) {
      metrics << toJsonLine(m) << "\n";
      metrics.flush();
    }
    progress.update(m);
    savedLast = false;
    if (!o_.save.empty() && o_.saveEvery > 0 && step % o_.saveEvery == 0) {
      progress.finish();
      saveCheckpoint();
      savedLast = true;
    }
  }
  progress.finish();
  if (!o_.save.empty() && !savedLast)
    saveCheckpoint();
  if (o_.generate > 0)
    generate(o_.generate);
  if (!o_.trace.empty() && (leader_ || launch_.multiProcess)) {
    std::string path = o_.trace;
    if (launch_.multiProcess)
      path += ".rank" + std::to_string(launch_.firstRank);
    trace::writeChromeTrace(path);
  }
  report(stoppedByBudget);
  threads_->run([&](int i) {
    Rank &rank = slots_[i]->rank;
    synchronize(&rank);
    freeArena(&rank);
    shutdownRank(&rank);
  });
  finished_ = true;
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
