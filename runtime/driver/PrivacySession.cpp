//===- PrivacySession.cpp - The privacy parameters of one run -------------===//

#include "PrivacySession.h"

#include "Dataset.h"

#include "dprt/keys.h"
#include "privacy/Sampler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <limits>
#include <stdexcept>
#include <sstream>

namespace dprt::driver {
namespace {

/// The budget check compares epsilons composed step by step with a target
/// that calibrateSigma met for all steps at once; the two differ by
/// rounding, which must not stop a run one step early.
constexpr double kBudgetSlack = 1e-9;

/// The accountant the recipe names, or the default.
privacy::AccountantKind recipeAccountant(const RecipeSpec &r) {
  if (r.accountant.empty())
    return privacy::kDefaultAccountant;
  std::optional<privacy::AccountantKind> kind =
      privacy::parseAccountantKind(r.accountant);
  if (!kind)
    throw std::runtime_error("the program names an unknown accountant '" +
                             r.accountant + "'");
  return *kind;
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

} // namespace

const char *generatorName(NoiseGeneratorKind kind) {
  switch (kind) {
  case NoiseGeneratorKind::ChaCha20:
    return "chacha20";
  case NoiseGeneratorKind::None:
    return "none";
  case NoiseGeneratorKind::Philox:
    break;
  }
  return "philox";
}

const char *samplerName(SamplingKind kind) {
  return kind == SamplingKind::Poisson ? "poisson" : "shuffle";
}

PrivacySession PrivacySession::start(const Options &o, const RecipeSpec &r,
                                     int64_t records, int64_t totalSteps,
                                     bool keyShared) {
  PrivacySession p(r, o.budgetStop);
  p.accountantKind_ = o.accountant ? *o.accountant : recipeAccountant(r);
  p.makeAccountant();
  p.clip_ = o.clip ? *o.clip : r.maxNorm;
  if (r.sampling == SamplingKind::Poisson) {
    std::string source = "the recipe's expected batch of " +
                         std::to_string(r.expectedBatch) + " records";
    if (o.sampleRate) {
      p.q_ = *o.sampleRate;
    } else if (o.expectedBatch) {
      source = "--expected-batch " + std::to_string(*o.expectedBatch);
      if (records > 0)
        p.q_ = static_cast<double>(*o.expectedBatch) / records;
    } else if (r.rate > 0) {
      p.q_ = r.rate;
    } else if (records > 0) {
      p.q_ = static_cast<double>(r.expectedBatch) / records;
    }
    if (p.q_ > 1)
      throw UsageError(source + " exceeds the " + std::to_string(records) +
                       " records of the data: Poisson sampling needs "
                       "q = batch / records <= 1");
    p.expectedBatch_ = p.q_ * records;
  } else {
    if (records > 0 && r.shuffleBatch > records)
      throw UsageError("the recipe's batch of " +
                       std::to_string(r.shuffleBatch) +
                       " records exceeds the " + std::to_string(records) +
                       " records of the data");
    p.q_ = records > 0 ? static_cast<double>(r.shuffleBatch) / records : 0;
    p.expectedBatch_ = static_cast<double>(r.shuffleBatch);
  }
  if (records > 0 && p.expectedBatch_ <= 0)
    throw UsageError("the expected logical batch is empty (q * records = 0)");

  if (!r.addsNoise()) {
    // DP off (checkOptions refused --sigma, --epsilon and --delta): no
    // noise and no guarantee; batches are still sampled, keyed by the seed.
    p.sigmaSource_ = "none: the program adds no noise (noise = #dp.none)";
    p.seed_ = o.seed ? *o.seed : static_cast<uint64_t>(r.seed);
    p.initKey_ = p.seed_;
    noiseKeyWordsFromSeed(p.seed_, p.noiseKey_);
    p.planAccounting(totalSteps); // no budget: every step is allowed
    return p;
  }
  p.delta_ = o.delta ? *o.delta : r.delta;
  p.targetEpsilon_ = o.epsilon                       ? *o.epsilon
                     : (!o.sigma && r.targetEpsilon) ? r.epsilon
                                                     : 0;
  if (o.sigma) {
    p.sigma_ = *o.sigma;
    p.sigmaSource_ = "given by --sigma";
  } else if (p.targetEpsilon_ > 0) {
    // --steps 0 still calibrates for the recipe's steps, so that a saved
    // initial checkpoint carries a usable noise level.
    const int64_t steps =
        totalSteps > 0 ? totalSteps : std::max<int64_t>(1, r.steps);
    if (p.q_ <= 0) {
      p.sigma_ = 0;
      p.sigmaSource_ = "not calibrated (no data)";
    } else {
      // Calibrated for this run's q and steps by its accountant: a flag that
      // changes either changes sigma.
      privacy::SigmaCalibration c = privacy::calibrateSigma(
          p.accountantKind_, p.targetEpsilon_, p.delta_, p.q_, steps);
      if (!c.ok())
        throw UsageError("cannot calibrate sigma for epsilon = " +
                         std::to_string(p.targetEpsilon_) + ": " + c.error);
      p.sigma_ = c.sigma;
      std::ostringstream os;
      os << "calibrated for epsilon = " << p.targetEpsilon_
         << " at delta = " << p.delta_ << " over " << steps
         << " steps at q = " << p.q_ << " by the "
         << privacy::accountantName(p.accountantKind_) << " accountant";
      p.sigmaSource_ = os.str();
    }
  } else {
    p.sigma_ = r.sigma;
    p.sigmaSource_ = "the recipe's";
  }
  p.planAccounting(totalSteps);

  p.seed_ = o.seed ? *o.seed : static_cast<uint64_t>(r.seed);
  p.initKey_ = p.seed_;
  if (r.generator == NoiseGeneratorKind::ChaCha20) {
    // Secure noise: the ChaCha20 key must be secret, or whoever knows it can
    // subtract the noise (and see who was sampled). It comes from a file or
    // from the operating system, never from the seed.
    if (!o.noiseKey.empty()) {
      readNoiseKey(o.noiseKey, p.noiseKey_);
      p.noiseKeySource_ = "from " + o.noiseKey;
    } else if (!keyShared) {
      throw UsageError("a secure run with one process per GPU needs the "
                       "same secret key on every rank: pass --noise-key "
                       "FILE (64 hex digits)");
    } else {
      secretFromOperatingSystem(p.noiseKey_);
      p.noiseKeySource_ = "fresh from the operating system";
    }
    return p;
  }
  noiseKeyWordsFromSeed(p.seed_, p.noiseKey_);
  return p;
}

PrivacySession PrivacySession::resume(const Options &o, const RecipeSpec &r,
                                      const CheckpointState &s,
                                      const std::string &path,
                                      const Dataset *data, int64_t totalSteps,
                                      bool keyShared) {
  if (s.step == 0) {
    // Nothing was released yet: the privacy parameters are chosen afresh,
    // as for a new run; only the initial parameters come from the
    // checkpoint.
    return start(o, r, data ? data->size() : 0, totalSteps, keyShared);
  }
  // Repeating the original command line with --resume is fine; changing
  // what the privacy guarantee or the random streams depend on is not: the
  // remaining steps would have another guarantee than the one the run was
  // started (and possibly calibrated) for.
  auto refuse = [&](const char *flag, const std::string &saved) {
    throw UsageError(std::string(flag) +
                     " cannot change when resuming: the checkpoint's run "
                     "used " +
                     saved + "; start a new run to change it");
  };
  auto text = [](double value) {
    std::ostringstream os;
    os << std::setprecision(17) << value;
    return os.str();
  };
  if (o.sigma && *o.sigma != s.sigma)
    refuse("--sigma", "sigma = " + text(s.sigma));
  if (o.epsilon && *o.epsilon != s.targetEpsilon)
    refuse("--epsilon", s.targetEpsilon > 0
                            ? "epsilon = " + text(s.targetEpsilon)
                            : "no target epsilon");
  if (o.delta && *o.delta != s.delta)
    refuse("--delta", "delta = " + text(s.delta));
  if (o.clip && *o.clip != s.maxNorm)
    refuse("--clip", "C = " + text(s.maxNorm));
  if (o.sampleRate && *o.sampleRate != s.q)
    refuse("--sample-rate", "q = " + text(s.q));
  if (o.expectedBatch &&
      static_cast<double>(*o.expectedBatch) / s.datasetRecords != s.q)
    refuse("--expected-batch", "q = " + text(s.q) + " (an expected batch of " +
                                   text(s.q * s.datasetRecords) + " of its " +
                                   std::to_string(s.datasetRecords) +
                                   " records)");
  const std::optional<privacy::AccountantKind> saved =
      privacy::parseAccountantKind(s.accountant);
  if (!saved)
    throw UsageError("the checkpoint '" + path +
                     "' names an unknown "
                     "accountant '" +
                     s.accountant + "'");
  if (o.accountant && *o.accountant != *saved)
    refuse("--accountant", "the " + s.accountant + " accountant");
  if (o.seed && *o.seed != s.seed)
    refuse("--seed", "seed = " + std::to_string(s.seed));
  if (!o.noiseKey.empty()) {
    uint64_t given[4];
    readNoiseKey(o.noiseKey, given);
    if (!std::equal(given, given + 4, s.noiseKey))
      refuse("--noise-key", "another secret key (the one the checkpoint "
                            "holds)");
  }
  if (s.sampler != samplerName(r.sampling) ||
      s.generator != generatorName(r.generator))
    throw UsageError("the checkpoint '" + path +
                     "' used another sampler or noise generator");
  if (data && (data->privacyUnits() != s.datasetRecords ||
               data->fingerprint() != s.datasetFingerprint))
    throw UsageError("--data '" + o.data +
                     "' is not the data of the "
                     "checkpoint's run (" +
                     std::to_string(s.datasetRecords) +
                     " records with another content); a resumed run must "
                     "see the same records to sample the same batches");
  PrivacySession p(r, o.budgetStop);
  p.accountantKind_ = *saved;
  p.makeAccountant();
  p.q_ = s.q;
  p.clip_ = s.maxNorm;
  p.sigma_ = s.sigma;
  p.delta_ = s.delta;
  p.targetEpsilon_ = s.targetEpsilon;
  p.seed_ = s.seed;
  p.initKey_ = s.initKey;
  std::copy(s.noiseKey, s.noiseKey + 4, p.noiseKey_);
  if (r.generator == NoiseGeneratorKind::ChaCha20)
    p.noiseKeySource_ = "from the checkpoint";
  p.expectedBatch_ = r.sampling == SamplingKind::Poisson
                         ? p.q_ * static_cast<double>(s.datasetRecords)
                         : static_cast<double>(s.shuffleBatch);
  p.sigmaSource_ = "from the checkpoint";
  // Composing the history one step at a time repeats the uninterrupted
  // run's floating-point additions (RDP), so epsilon comes out bit for bit;
  // the PLD accountant merges the steps into the same segments.
  for (const privacy::SampledGaussianSegment &segment : s.segments)
    for (int64_t i = 0; i < segment.steps; ++i)
      p.accountant_->compose(segment.q, segment.sigma, 1);
  // A run without noise composes nothing: it has no history to check.
  if (r.addsNoise() && p.accountant_->steps() != s.step)
    throw UsageError("the checkpoint '" + path +
                     "' has an accountant history of " +
                     std::to_string(p.accountant_->steps()) +
                     " steps for step " + std::to_string(s.step));
  p.planAccounting(totalSteps);
  return p;
}

void PrivacySession::makeAccountant() {
  accountant_ = privacy::makeAccountant(accountantKind_);
}

void PrivacySession::planAccounting(int64_t totalSteps) {
  lastStep_ = totalSteps;
  // PLD: about 100 exact epsilons over the run (see the header).
  exactEvery_ = accountantKind_ == privacy::AccountantKind::Pld
                    ? std::max<int64_t>(1, (totalSteps + 99) / 100)
                    : 1;
  budgetSteps_ = std::numeric_limits<int64_t>::max();
  if (targetEpsilon_ <= 0 || !budgetStop_)
    return;
  const int64_t done = stepsComposed();
  auto fits = [&](int64_t steps) {
    return epsilonAt(steps) <= targetEpsilon_ * (1 + kBudgetSlack);
  };
  if (totalSteps <= done || fits(totalSteps)) {
    budgetSteps_ = std::max(totalSteps, done);
    return;
  }
  // Epsilon grows with the steps: the last step that fits lies in
  // [done, totalSteps), found in about log2(totalSteps - done) compositions.
  int64_t fitting = done, over = totalSteps;
  while (over - fitting > 1) {
    const int64_t mid = fitting + (over - fitting) / 2;
    (fits(mid) ? fitting : over) = mid;
  }
  budgetSteps_ = fitting;
}

NoiseKey PrivacySession::samplingKey() const {
  return samplingKeyFromWords(noiseKey_);
}

std::vector<int64_t> PrivacySession::sample(int64_t step,
                                            int64_t records) const {
  const NoiseGenerator generator =
      noiseGeneratorOf(static_cast<int32_t>(recipe_.generator));
  // Both samplers are pure functions of (key, step): nothing to carry over.
  if (recipe_.sampling == SamplingKind::Poisson)
    return privacy::PoissonSampler(samplingKey(), records, q_, generator)
        .sample(step);
  // The run's steps count from 1, the shuffle sampler's from 0: step t is
  // sampler step t - 1, so that steps 1 .. E (E = ceil(N / B)) are epoch 0,
  // each record once. Passed t itself, step E drew epoch 1's first batch
  // (records epoch 0 had already used) and epoch 0's first batch was never
  // drawn.
  if (step < 1)
    throw std::invalid_argument("PrivacySession::sample: step " +
                                std::to_string(step) +
                                "; a run's steps count from 1");
  return privacy::ShuffleSampler(samplingKey(), records, recipe_.shuffleBatch,
                                 generator)
      .sample(step - 1);
}

StepState PrivacySession::stepState(int64_t step) const {
  StepState s{};
  s.step = step;
  s.noiseStd = sigma_ * clip_;
  s.clipNorm = clip_;
  s.gradScale = expectedBatch_ > 0 ? 1.0 / expectedBatch_ : 0.0;
  std::copy(noiseKey_, noiseKey_ + 4, s.noiseKey);
  s.initKey = initKey_;
  s.noiseGenerator = static_cast<int32_t>(recipe_.generator);
  return s;
}

bool PrivacySession::budgetAllows(int64_t step, double &nextEpsilon) const {
  if (step <= budgetSteps_)
    return true;
  nextEpsilon = epsilonAt(step);
  return false;
}

void PrivacySession::composeStep() {
  if (recipe_.addsNoise())
    accountant_->compose(q_, sigma_, 1);
}

double PrivacySession::epsilon() const {
  // Without noise there is no finite epsilon (written as null in JSON).
  if (!recipe_.addsNoise())
    return HUGE_VAL;
  return accountant_->epsilon(delta_).epsilon;
}

double PrivacySession::epsilonAt(int64_t steps) const {
  const int64_t done = stepsComposed();
  if (steps <= done || !recipe_.addsNoise())
    return epsilon();
  std::unique_ptr<privacy::PrivacyAccountant> ahead = accountant_->clone();
  ahead->compose(q_, sigma_, steps - done);
  return ahead->epsilon(delta_).epsilon;
}

double PrivacySession::metricsEpsilon(int64_t step, bool &exact) {
  if (accountantKind_ == privacy::AccountantKind::Rdp ||
      !recipe_.addsNoise()) {
    exact = true;
    return epsilon();
  }
  // The next exact step: a multiple of k, or the last step the run can
  // take (its total, or the budget's end).
  const int64_t last = std::max(step, std::min(lastStep_, budgetSteps_));
  const int64_t next =
      std::min(last, (step + exactEvery_ - 1) / exactEvery_ * exactEvery_);
  // Computed once per exact step. Composing ahead gives the same segments,
  // and so the same bits, as composing the steps one by one: at the exact
  // step itself the bound computed earlier is epsilon().
  if (next != boundStep_) {
    boundStep_ = next;
    boundEpsilon_ = aheadStep_ == next ? ahead_->get() : epsilonAt(next);
    aheadStep_ = -1;
    ahead_.reset();
    // The same computation for the next exact step, started now: the
    // accountant is cloned here, on this thread, so the steps composed
    // meanwhile do not reach it, and the bound has the bits epsilonAt
    // would give then (composing ahead gives the same segments).
    const int64_t after = std::min(last, next + exactEvery_);
    if (after > next && after > stepsComposed()) {
      std::shared_ptr<privacy::PrivacyAccountant> clone =
          accountant_->clone();
      const int64_t more = after - stepsComposed();
      const double q = q_, sigma = sigma_, delta = delta_;
      ahead_ = std::make_shared<std::future<double>>(
          std::async(std::launch::async, [clone, more, q, sigma, delta] {
            clone->compose(q, sigma, more);
            return clone->epsilon(delta).epsilon;
          }));
      aheadStep_ = after;
    }
  }
  exact = next == step;
  return boundEpsilon_;
}

void PrivacySession::saveTo(CheckpointState &s) const {
  s.seed = seed_;
  s.initKey = initKey_;
  std::copy(noiseKey_, noiseKey_ + 4, s.noiseKey);
  s.generator = generatorName(recipe_.generator);
  s.sampler = samplerName(recipe_.sampling);
  s.q = q_;
  s.shuffleBatch =
      recipe_.sampling == SamplingKind::Shuffle ? recipe_.shuffleBatch : 0;
  s.sigma = sigma_;
  s.maxNorm = clip_;
  s.delta = delta_;
  s.targetEpsilon = targetEpsilon_;
  s.epsilon = epsilon();
  s.accountant = privacy::accountantName(accountantKind_);
  s.segments = accountant_->segments();
}

privacy::PrivacyReport PrivacySession::report(int64_t steps) const {
  privacy::PrivacyReport report;
  report.noiseMultiplier = sigma_;
  report.maxGradNorm = clip_;
  report.samplingRate = q_;
  report.steps = steps;
  report.delta = delta_;
  report.isPrivate = recipe_.addsNoise();
  report.accountant = privacy::accountantName(accountantKind_);
  if (report.isPrivate) {
    privacy::EpsilonAndOrder eps = accountant_->epsilon(delta_);
    report.epsilon = steps > 0 ? eps.epsilon : 0;
    report.rdpOrder = eps.order;
    report.pldInterval = eps.interval;
  } else {
    report.epsilon = steps > 0 ? HUGE_VAL : 0;
  }
  report.sampler = samplerName(recipe_.sampling);
  report.userRecords = recipe_.userRecords;
  report.noiseGenerator = generatorName(recipe_.generator);
  return report;
}

std::string PrivacySession::describe() const {
  std::ostringstream os;
  if (!recipe_.addsNoise()) {
    os << "not differentially private: no clipping and no noise (compiled "
          "with clip = #dp.clip<none>, noise = #dp.none); q = "
       << q_;
    return os.str();
  }
  os << "q = " << q_ << ", sigma = " << sigma_ << " (" << sigmaSource_
     << "), C = " << clip_ << ", delta = " << delta_ << ", "
     << privacy::accountantName(accountantKind_) << " accountant";
  if (recipe_.userRecords > 0)
    os << "; one user (at most " << recipe_.userRecords
       << " records) as the privacy unit: q samples users";
  if (targetEpsilon_ > 0 && budgetStop_ &&
      budgetSteps_ < std::numeric_limits<int64_t>::max() &&
      budgetSteps_ < lastStep_)
    os << "; the budget epsilon = " << targetEpsilon_ << " allows "
       << budgetSteps_ << " of the " << lastStep_ << " steps";
  return os.str();
}

} // namespace dprt::driver
