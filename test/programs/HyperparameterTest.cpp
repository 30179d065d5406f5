//===- HyperparameterTest.cpp - Run-time hyperparameters and token files --===//
//
// The training program's --lr, --weight-decay, --clip, --expected-batch and
// schedule flags (--warmup, --decay, --min-lr-ratio), and dpc-prepare token
// files as data, on the compiled f64 transformer of models/tinylm-f64.mlir:
//  - the flags reach the kernels: a run with them equals the f64 reference
//    stepped with those values and the learning rate lr * f(s) of each step
//    s, f computed here from the schedule's definition;
//  - a run with the flags equals, bit for bit, a run of a program compiled
//    with the same values in its recipe (flat_adamw_tuned), noise included
//    (sigma C with the run's C);
//  - a token file trains as the reference does on the same ids, with the
//    loss mask's zeros and the padding as ignored targets (-1).
//
//===----------------------------------------------------------------------===//

#include "ProcessHelpers.h"
#include "ProgramHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace dpc::programs;
namespace ref = dpc::reference;

namespace {

constexpr int64_t kRecords = 48;
/// f64 programs agree with the reference to rounding (WholeStep measures
/// 1.5e-11 for AdamW); a wrong learning rate in any step is off by far more.
constexpr double kTolerance = 1e-10;

/// The schedule's factor at step s (from 1), written from its definition
/// (docs/training-program.md) rather than from the driver's code: a linear
/// ramp to 1 over the warmup, then a cosine from 1 down to `floor` reached
/// at the run's last step `total`.
double cosineFactor(int64_t s, int64_t warmup, int64_t total, double floor) {
  if (s <= warmup)
    return double(s) / double(warmup);
  const double progress = double(s - warmup) / double(total - warmup);
  const double pi = std::acos(-1.0);
  return floor + (1.0 - floor) * (std::cos(pi * progress) + 1.0) / 2.0;
}

std::vector<std::string> hyperparameterFlags() {
  return {"--lr",           "0.02", "--weight-decay",   "0.05",
          "--clip",         "0.75", "--expected-batch", "10",
          "--warmup",       "2",    "--decay",          "cosine",
          "--min-lr-ratio", "0.25"};
}

std::vector<std::string> concat(std::vector<std::string> a,
                                const std::vector<std::string> &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expectParamsNear(const Tensors &got, const ref::Model &want,
                      double tolerance, const std::string &what) {
  double worst = 0;
  for (const std::string &name : want.paramNames()) {
    const double e = relativeError(got.at(name), want.param(name));
    EXPECT_LE(e, tolerance) << what << ": parameter " << name;
    worst = std::max(worst, e);
  }
  std::printf("[worst error] %s: parameters %.2e\n", what.c_str(), worst);
}

TEST(Hyperparameters, FlagsAndScheduleMatchTheReference) {
  const ProgramId id{"tinylm-f64", "flat_adamw", 1};
  const uint64_t seed = testSeed();
  const std::string s = std::to_string(seed);
  constexpr int kSteps = 4;
  dpctest::TempDir dir;
  const Records records = makeRecords(id, seed, kRecords);
  writeRecords(records, dir / "data.txt");
  runProgram(id, {"--steps", "0", "--seed", s, "--save", dir / "initial"});
  runProgram(
      id, concat({"--data", dir / "data.txt", "--steps", std::to_string(kSteps),
                  "--seed", s, "--sigma", "0", "--save", dir / "trained",
                  "--metrics", dir / "metrics.jsonl"},
                 hyperparameterFlags()));
  const Tensors initial =
      readCheckpointParams(latestCheckpoint(dir / "initial"));
  const Tensors trained =
      readCheckpointParams(latestCheckpoint(dir / "trained"));

  // The recipe's compiled values (betas, eps, clipping mode, the norms'
  // rounding slack) with the flags' values in place of its own.
  ref::Recipe recipe = readRecipe(id).step;
  ASSERT_NE(recipe.lr, 0.02);
  ASSERT_NE(recipe.maxNorm, 0.75);
  recipe.weightDecay = 0.05;
  recipe.maxNorm = 0.75;
  recipe.expectedBatch = (10.0 / kRecords) * kRecords;
  recipe.normRelErr = programNormRelErr(id);
  ref::Model model = referenceModel(id, initial);
  std::vector<double> lrs;
  int64_t clipped = 0, samples = 0;
  for (int step = 1; step <= kSteps; ++step) {
    recipe.lr = 0.02 * cosineFactor(step, 2, kSteps, 0.25);
    lrs.push_back(recipe.lr);
    const std::vector<int64_t> batch = logicalBatch(seed, kRecords, 10, step);
    const ref::StepResult r =
        model.dpStep(referenceBatch(records, batch, modelTokens(id)),
                     Vec(batch.size(), 1.0), recipe);
    for (size_t b = 0; b < batch.size(); ++b) {
      bool below = false;
      for (const auto &[name, c] : r.clip)
        below = below || c[b] < 1.0;
      clipped += below;
    }
    samples += static_cast<int64_t>(batch.size());
  }
  // C = 0.75 must bind: the compiled 6.0 clips nothing on this data.
  EXPECT_GT(clipped, 0) << "no sample was clipped at C = 0.75";
  std::printf("[clipped] %lld of %lld samples at C = 0.75\n",
              static_cast<long long>(clipped), static_cast<long long>(samples));
  expectParamsNear(trained, model, kTolerance,
                   "flags and a cosine schedule vs the reference");

  // The metrics report the learning rate of each step.
  const std::vector<double> reported =
      metricValues(dir / "metrics.jsonl", "lr");
  ASSERT_EQ(reported.size(), lrs.size());
  for (size_t i = 0; i < lrs.size(); ++i)
    EXPECT_NEAR(reported[i], lrs[i], 1e-15 * lrs[i]) << "step " << i + 1;
  // 0.01, 0.02 (the peak), 0.02 (0.25 + 0.75 / 2), 0.005 (the floor).
  EXPECT_NEAR(lrs[0], 0.01, 1e-17);
  EXPECT_NEAR(lrs[1], 0.02, 1e-17);
  EXPECT_NEAR(lrs[2], 0.0125, 1e-16);
  EXPECT_NEAR(lrs[3], 0.005, 1e-17);
}

TEST(Hyperparameters, FlagsEqualTheValuesCompiledIn) {
  const ProgramId flags{"tinylm-f64", "flat_adamw", 1};
  const ProgramId compiled{"tinylm-f64", "flat_adamw_tuned", 1};
  const uint64_t seed = testSeed();
  const std::string s = std::to_string(seed);
  dpctest::TempDir dir;
  writeRecords(makeRecords(flags, seed, kRecords), dir / "data.txt");
  // Noise on (sigma = 0.5): its standard deviation sigma C must use the
  // run's C in both.
  runProgram(flags, concat({"--data", dir / "data.txt", "--steps", "4",
                            "--seed", s, "--sigma", "0.5", "--save",
                            dir / "flags", "--metrics", dir / "flags.jsonl"},
                           hyperparameterFlags()));
  runProgram(compiled, {"--data", dir / "data.txt", "--seed", s, "--save",
                        dir / "compiled", "--metrics", dir / "compiled.jsonl"});
  const Tensors a = readCheckpointParams(latestCheckpoint(dir / "flags"));
  const Tensors b = readCheckpointParams(latestCheckpoint(dir / "compiled"));
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, values] : a)
    EXPECT_EQ(values, b.at(name)) << "parameter " << name;
  for (const char *key : {"loss", "lr", "epsilon"})
    EXPECT_EQ(metricValues(dir / "flags.jsonl", key),
              metricValues(dir / "compiled.jsonl", key))
        << key;
}

/// Token-file records for the f64 transformer (vocabulary 256, 16
/// positions): 2 to 17 ids, the first few of some records out of the loss
/// (a prompt), and a few mask zeros in the middle.
std::vector<dpctest::TokenRecordData> makeTokenRecords(uint64_t seed,
                                                       int64_t count) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> length(2, 17), prompt(0, 5);
  std::uniform_int_distribution<uint32_t> id(0, 255);
  std::bernoulli_distribution hole(0.1);
  std::vector<dpctest::TokenRecordData> records(count);
  for (dpctest::TokenRecordData &r : records) {
    const int64_t n = length(rng), p = prompt(rng);
    for (int64_t t = 0; t < n; ++t) {
      r.ids.push_back(id(rng));
      r.mask.push_back(t < p || hole(rng) ? 0 : 1);
    }
    r.mask.back() = 1; // at least one target
  }
  return records;
}

/// The reference batch of token-file records: input t = ids[t], target t =
/// ids[t + 1] where mask[t + 1] = 1, else -1 (docs/data.md, "The loss
/// mask"); padding 0 / -1.
ref::Batch tokenBatch(const std::vector<dpctest::TokenRecordData> &records,
                      const std::vector<int64_t> &indices, int64_t tokens) {
  ref::Batch b;
  b.size = static_cast<int64_t>(indices.size());
  ref::Tokens &tok = b.tokens["tok"], &tgt = b.tokens["tgt"];
  for (int64_t index : indices) {
    const dpctest::TokenRecordData &r = records[index];
    const int64_t n = static_cast<int64_t>(r.ids.size()) - 1;
    for (int64_t t = 0; t < tokens; ++t) {
      tok.push_back(t < n ? static_cast<int32_t>(r.ids[t]) : 0);
      tgt.push_back(t < n && r.mask[t + 1] ? static_cast<int32_t>(r.ids[t + 1])
                                           : -1);
    }
  }
  return b;
}

TEST(TokenFiles, TrainAsTheReferenceWithTheLossMask) {
  const ProgramId id{"tinylm-f64", "flat_sgd", 1};
  const uint64_t seed = testSeed();
  const std::string s = std::to_string(seed);
  constexpr int kSteps = 2;
  dpctest::TempDir dir;
  const std::vector<dpctest::TokenRecordData> records =
      makeTokenRecords(seed, kRecords);
  dpctest::writeTokenFile(dir / "train.tokens", records, 256, 255);
  runProgram(id, {"--steps", "0", "--seed", s, "--save", dir / "initial"});
  runProgram(id, {"--data", dir / "train.tokens", "--steps",
                  std::to_string(kSteps), "--seed", s, "--sigma", "0", "--save",
                  dir / "trained", "--metrics", dir / "metrics.jsonl"});
  const Tensors initial =
      readCheckpointParams(latestCheckpoint(dir / "initial"));
  const Tensors trained =
      readCheckpointParams(latestCheckpoint(dir / "trained"));
  const RecipeValues values = readRecipe(id);
  ref::Recipe recipe = values.step;
  recipe.expectedBatch =
      (double(values.expectedBatch) / kRecords) * double(kRecords);
  recipe.normRelErr = programNormRelErr(id);
  ref::Model model = referenceModel(id, initial);
  std::vector<double> losses;
  for (int step = 1; step <= kSteps; ++step) {
    const std::vector<int64_t> batch =
        logicalBatch(seed, kRecords, values.expectedBatch, step);
    const ref::StepResult r =
        model.dpStep(tokenBatch(records, batch, modelTokens(id)),
                     Vec(batch.size(), 1.0), recipe);
    double sum = 0;
    for (double l : r.loss)
      sum += l;
    losses.push_back(batch.empty() ? std::nan("") : sum / double(batch.size()));
  }
  expectParamsNear(trained, model, kTolerance, "token file vs the reference");
  const std::vector<double> got = metricLosses(dir / "metrics.jsonl");
  ASSERT_EQ(got.size(), losses.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(losses[i])) {
      EXPECT_TRUE(std::isnan(got[i]));
      continue;
    }
    EXPECT_NEAR(got[i], losses[i], kTolerance * std::fabs(losses[i]))
        << "mean loss of step " << i + 1;
  }
  // The tokens of the metrics count the targets in the loss only.
  int64_t counted = 0;
  for (int step = 1; step <= kSteps; ++step)
    for (int64_t index :
         logicalBatch(seed, kRecords, values.expectedBatch, step))
      for (size_t t = 1; t < records[index].mask.size(); ++t)
        counted += records[index].mask[t];
  const std::vector<double> tokens =
      metricValues(dir / "metrics.jsonl", "tokens");
  EXPECT_EQ(tokens[0] + tokens[1], double(counted));
}

} // namespace
