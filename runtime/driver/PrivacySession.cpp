//===- PrivacySession.cpp - The privacy parameters of one run -------------===//

#include "PrivacySession.h"

#include "Dataset.h"

#include "dprt/keys.h"
#include "privacy/Sampler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>

namespace dprt::driver {
namespace {

/// The budget check compares epsilons composed step by step with a target
/// that calibrateSigma met for all steps at once; the two differ by
/// rounding, which must not stop a run one step early.
constexpr double kBudgetSlack = 1e-9;

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
  if (r.sampling == SamplingKind::Poisson) {
    if (r.rate > 0)
      p.q_ = r.rate;
    else if (records > 0)
      p.q_ = static_cast<double>(r.expectedBatch) / records;
    if (p.q_ > 1)
      throw UsageError("the recipe's expected batch of " +
                       std::to_string(r.expectedBatch) +
                       " records exceeds the " + std::to_string(records) +
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
      privacy::SigmaCalibration c =
          privacy::calibrateSigma(p.targetEpsilon_, p.delta_, p.q_, steps);
      if (!c.ok())
        throw UsageError("cannot calibrate sigma for epsilon = " +
                         std::to_string(p.targetEpsilon_) + ": " + c.error);
      p.sigma_ = c.sigma;
      std::ostringstream os;
      os << "calibrated for epsilon = " << p.targetEpsilon_
         << " at delta = " << p.delta_ << " over " << steps
         << " steps at q = " << p.q_;
      p.sigmaSource_ = os.str();
    }
  } else {
    p.sigma_ = r.sigma;
    p.sigmaSource_ = "the recipe's";
  }

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
  // what the privacy guarantee or the random streams depend on is not.
  auto refuse = [&](const char *flag, const std::string &saved) {
    throw UsageError(std::string(flag) +
                     " cannot change when resuming: the checkpoint's run "
                     "used " +
                     saved + "; start a new run to change it");
  };
  if (o.sigma && *o.sigma != s.sigma)
    refuse("--sigma", "sigma = " + std::to_string(s.sigma));
  if (o.epsilon && *o.epsilon != s.targetEpsilon)
    refuse("--epsilon", s.targetEpsilon > 0
                            ? "epsilon = " + std::to_string(s.targetEpsilon)
                            : "no target epsilon");
  if (o.delta && *o.delta != s.delta)
    refuse("--delta", "delta = " + std::to_string(s.delta));
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
  if (data && (data->size() != s.datasetRecords ||
               data->fingerprint() != s.datasetFingerprint))
    throw UsageError("--data '" + o.data +
                     "' is not the data of the "
                     "checkpoint's run (" +
                     std::to_string(s.datasetRecords) +
                     " records with another content); a resumed run must "
                     "see the same records to sample the same batches");
  PrivacySession p(r, o.budgetStop);
  p.q_ = s.q;
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
  // run's floating-point additions, so epsilon comes out bit for bit.
  for (const privacy::SampledGaussianSegment &segment : s.segments)
    for (int64_t i = 0; i < segment.steps; ++i)
      p.accountant_.compose(segment.q, segment.sigma, 1);
  // A run without noise composes nothing: it has no history to check.
  if (r.addsNoise() && p.accountant_.steps() != s.step)
    throw UsageError("the checkpoint '" + path +
                     "' has an accountant history of " +
                     std::to_string(p.accountant_.steps()) +
                     " steps for step " + std::to_string(s.step));
  return p;
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
  return privacy::ShuffleSampler(samplingKey(), records, recipe_.shuffleBatch,
                                 generator)
      .sample(step);
}

StepState PrivacySession::stepState(int64_t step) const {
  StepState s{};
  s.step = step;
  s.noiseStd = sigma_ * recipe_.maxNorm;
  s.gradScale = expectedBatch_ > 0 ? 1.0 / expectedBatch_ : 0.0;
  s.lrScale = 1.0;
  std::copy(noiseKey_, noiseKey_ + 4, s.noiseKey);
  s.initKey = initKey_;
  s.noiseGenerator = static_cast<int32_t>(recipe_.generator);
  return s;
}

bool PrivacySession::budgetAllows(double &nextEpsilon) const {
  if (targetEpsilon_ <= 0 || !budgetStop_)
    return true;
  privacy::RdpAccountant next = accountant_;
  next.compose(q_, sigma_, 1);
  nextEpsilon = next.epsilon(delta_).epsilon;
  return nextEpsilon <= targetEpsilon_ * (1 + kBudgetSlack);
}

void PrivacySession::composeStep() {
  if (recipe_.addsNoise())
    accountant_.compose(q_, sigma_, 1);
}

double PrivacySession::epsilon() const {
  // Without noise there is no finite epsilon (written as null in JSON).
  if (!recipe_.addsNoise())
    return HUGE_VAL;
  return accountant_.epsilon(delta_).epsilon;
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
  s.maxNorm = recipe_.maxNorm;
  s.delta = delta_;
  s.targetEpsilon = targetEpsilon_;
  s.epsilon = epsilon();
  s.segments = accountant_.segments();
}

privacy::PrivacyReport PrivacySession::report(int64_t steps) const {
  privacy::PrivacyReport report;
  report.noiseMultiplier = sigma_;
  report.maxGradNorm = recipe_.maxNorm;
  report.samplingRate = q_;
  report.steps = steps;
  report.delta = delta_;
  report.isPrivate = recipe_.addsNoise();
  if (report.isPrivate) {
    privacy::EpsilonAndOrder eps = accountant_.epsilon(delta_);
    report.epsilon = steps > 0 ? eps.epsilon : 0;
    report.rdpOrder = eps.order;
  } else {
    report.epsilon = steps > 0 ? HUGE_VAL : 0;
  }
  report.sampler = samplerName(recipe_.sampling);
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
     << "), C = " << recipe_.maxNorm << ", delta = " << delta_;
  return os.str();
}

} // namespace dprt::driver
