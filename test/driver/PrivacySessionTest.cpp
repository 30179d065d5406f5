//===- PrivacySessionTest.cpp - q, sigma, keys and the accountant of a run ===//
//
// The PrivacySession derives the run's keys through dprt/keys.h, so the
// batches it samples and the noise the kernels add (from its StepState) are
// keyed alike; a resumed session is the saved one, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "PrivacySession.h"
#include "ProcessHelpers.h"

#include "dprt/keys.h"
#include "privacy/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace dprt;
using namespace dprt::driver;
using dpctest::TempDir;
using dpctest::writeFile;

namespace {

RecipeSpec poissonRecipe(NoiseGeneratorKind generator) {
  RecipeSpec r;
  r.maxNorm = 1.0;
  r.sigma = 1.1;
  r.delta = 1e-5;
  r.generator = generator;
  r.sampling = SamplingKind::Poisson;
  r.rate = 0.05;
  r.steps = 20;
  r.seed = 7;
  return r;
}

bool sameKey(const NoiseKey &a, const NoiseKey &b) {
  return a.seed == b.seed &&
         std::equal(a.chachaKey, a.chachaKey + 8, b.chachaKey);
}

} // namespace

TEST(PrivacySession, SamplerAndNoiseUseTheSeedsKey) {
  Options options;
  options.seed = 11;
  PrivacySession session = PrivacySession::start(
      options, poissonRecipe(NoiseGeneratorKind::Philox), 300, 20, true);
  uint64_t words[4];
  noiseKeyWordsFromSeed(11, words);
  const StepState state = session.stepState(3);
  EXPECT_TRUE(std::equal(words, words + 4, state.noiseKey));
  EXPECT_EQ(state.initKey, 11u);
  EXPECT_EQ(state.step, 3);
  EXPECT_DOUBLE_EQ(state.noiseStd, 1.1);
  EXPECT_DOUBLE_EQ(state.gradScale, 1.0 / (0.05 * 300));
  // The kernels' key (from the StepState) is the sampler's.
  EXPECT_TRUE(sameKey(noiseKeyOf(state), session.samplingKey()));
  EXPECT_EQ(session.sample(3, 300),
            privacy::PoissonSampler(noiseKeyOf(state), 300, 0.05,
                                    NoiseGenerator::Philox)
                .sample(3));
  EXPECT_EQ(session.sample(3, 300),
            privacy::PoissonSampler(11, 300, 0.05).sample(3));
  EXPECT_TRUE(session.noiseKeySource().empty());
}

// Shuffled batches: the run's steps 1 .. 6 (24 records, batches of 4) are
// one epoch, every record once, and so are steps 7 .. 12. (Step 6 once drew
// the sampler's step 6, epoch 1's first batch: in steps 1 .. 6 records 8,
// 15 and 16 came twice and 5, 17 and 19 never.)
TEST(PrivacySession, ShuffledStepsFromOneAreWholeEpochs) {
  RecipeSpec r = poissonRecipe(NoiseGeneratorKind::Philox);
  r.sampling = SamplingKind::Shuffle;
  r.rate = 0;
  r.shuffleBatch = 4;
  Options options;
  options.seed = 1;
  PrivacySession session = PrivacySession::start(options, r, 24, 12, true);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t step = 6 * epoch + 1; step <= 6 * epoch + 6; ++step) {
      const std::vector<int64_t> batch = session.sample(step, 24);
      EXPECT_EQ(batch.size(), 4u) << "step " << step;
      seen.insert(seen.end(), batch.begin(), batch.end());
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(24);
    for (int64_t i = 0; i < 24; ++i)
      all[size_t(i)] = i;
    EXPECT_EQ(seen, all) << "epoch " << epoch;
  }
  EXPECT_EQ(session.sample(1, 24),
            privacy::ShuffleSampler(session.samplingKey(), 24, 4,
                                    NoiseGenerator::Philox)
                .sample(0));
  EXPECT_THROW(session.sample(0, 24), std::invalid_argument);
}

TEST(PrivacySession, SecureRunsTakeTheKeyFromTheFile) {
  TempDir dir;
  writeFile(dir / "key", "00112233445566778899aabbccddeeff"
                         "0123456789abcdeffedcba9876543210\n");
  Options options;
  options.noiseKey = dir / "key";
  PrivacySession session = PrivacySession::start(
      options, poissonRecipe(NoiseGeneratorKind::ChaCha20), 300, 20, true);
  const StepState state = session.stepState(1);
  EXPECT_EQ(state.noiseKey[0], 0x0011223344556677ull);
  EXPECT_EQ(state.noiseKey[3], 0xfedcba9876543210ull);
  EXPECT_EQ(state.noiseGenerator,
            static_cast<int32_t>(NoiseGeneratorKind::ChaCha20));
  EXPECT_TRUE(sameKey(noiseKeyOf(state), session.samplingKey()));
  EXPECT_EQ(session.noiseKeySource(), "from " + dir / "key");
  // A process of a launcher's job cannot share a key drawn here.
  Options noFile;
  EXPECT_THROW(
      PrivacySession::start(noFile, poissonRecipe(NoiseGeneratorKind::ChaCha20),
                            300, 20, false),
      UsageError);
}

TEST(PrivacySession, ResumedSessionIsTheSavedOne) {
  Options options;
  PrivacySession session = PrivacySession::start(
      options, poissonRecipe(NoiseGeneratorKind::Philox), 300, 20, true);
  for (int i = 0; i < 3; ++i)
    session.composeStep();
  CheckpointState state;
  session.saveTo(state);
  state.step = 3;
  state.datasetRecords = 300;
  PrivacySession resumed =
      PrivacySession::resume(options, poissonRecipe(NoiseGeneratorKind::Philox),
                             state, "ck", nullptr, 20, true);
  EXPECT_EQ(resumed.epsilon(), session.epsilon());
  EXPECT_EQ(resumed.samplingRate(), session.samplingRate());
  EXPECT_EQ(resumed.sigma(), session.sigma());
  EXPECT_EQ(resumed.stepsComposed(), 3);
  EXPECT_EQ(resumed.sample(4, 300), session.sample(4, 300));
  const StepState a = session.stepState(4), b = resumed.stepState(4);
  EXPECT_TRUE(std::equal(a.noiseKey, a.noiseKey + 4, b.noiseKey));
  EXPECT_EQ(a.gradScale, b.gradScale);
  // Changing the seed on resume is refused.
  Options otherSeed;
  otherSeed.seed = 8;
  EXPECT_THROW(PrivacySession::resume(otherSeed,
                                      poissonRecipe(NoiseGeneratorKind::Philox),
                                      state, "ck", nullptr, 20, true),
               UsageError);
}

// DP off (noise = #dp.none, clip = #dp.clip<none>): no noise, no account,
// an infinite epsilon (null in JSON) and a report that says so; the batches
// are still the Philox sampler's, keyed by the seed.
TEST(PrivacySession, WithoutNoiseTheRunIsNotPrivate) {
  RecipeSpec r = poissonRecipe(NoiseGeneratorKind::None);
  r.clip = ClipMode::None;
  r.maxNorm = 0;
  r.sigma = 0;
  r.delta = 0;
  Options options;
  options.seed = 11;
  PrivacySession session = PrivacySession::start(options, r, 300, 20, true);
  PrivacySession philox = PrivacySession::start(
      options, poissonRecipe(NoiseGeneratorKind::Philox), 300, 20, true);
  EXPECT_EQ(session.sample(4, 300), philox.sample(4, 300));
  EXPECT_EQ(session.stepState(4).noiseStd, 0.0);
  for (int i = 0; i < 3; ++i)
    session.composeStep();
  EXPECT_EQ(session.stepsComposed(), 0);
  EXPECT_TRUE(std::isinf(session.epsilon()));
  const privacy::PrivacyReport report = session.report(3);
  EXPECT_FALSE(report.isPrivate);
  EXPECT_EQ(report.noiseGenerator, "none");
  EXPECT_NE(privacy::toJson(report).find("\"epsilon\": null"),
            std::string::npos);
  EXPECT_NE(privacy::toJson(report).find("\"private\": false"),
            std::string::npos);
  std::ostringstream text;
  privacy::printPrivacyReport(text, report);
  EXPECT_NE(text.str().find("this run is NOT differentially private"),
            std::string::npos)
      << text.str();
  EXPECT_EQ(text.str().find("epsilon ="), std::string::npos) << text.str();
  EXPECT_NE(session.describe().find("not differentially private"),
            std::string::npos);
}
