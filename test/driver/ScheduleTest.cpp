//===- ScheduleTest.cpp - The learning-rate schedule and its flags --------===//
//
// LrSchedule::factor at every step against the schedule's definition
// written out here (and a few values worked by hand), and
// resolveHyperparameters: flags over the checkpoint over the recipe.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace dprt;
using namespace dprt::driver;

namespace {

/// The definition (docs/training-program.md): ramp s / W for s <= W; then
/// with progress p = (s - W) / (H - W), clamped to [0, 1], the decay from 1
/// to r: cosine r + (1 - r)(1 + cos(pi p)) / 2, linear 1 - (1 - r) p,
/// constant 1.
double expected(int64_t s, int64_t W, LrDecay decay, double r, int64_t H) {
  if (W > 0 && s <= W)
    return double(s) / double(W);
  if (decay == LrDecay::Constant)
    return 1.0;
  double p = double(s - W) / double(std::max<int64_t>(H - W, 1));
  p = std::min(1.0, std::max(0.0, p));
  if (decay == LrDecay::Linear)
    return 1.0 - (1.0 - r) * p;
  return r + (1.0 - r) * (1.0 + std::cos(std::acos(-1.0) * p)) / 2.0;
}

TEST(Schedule, FactorAtEveryStepFollowsTheDefinition) {
  for (LrDecay decay : {LrDecay::Constant, LrDecay::Linear, LrDecay::Cosine})
    for (int64_t warmup : {0, 1, 5, 37})
      for (double r : {0.0, 0.1, 1.0})
        for (int64_t horizon : {1, 40, 100}) {
          if (decay == LrDecay::Constant && r != 0.0)
            continue;
          LrSchedule s;
          s.warmup = warmup;
          s.decay = decay;
          s.minLrRatio = r;
          s.horizon = horizon;
          for (int64_t step = 1; step <= horizon + 10; ++step)
            ASSERT_NEAR(s.factor(step),
                        expected(step, warmup, decay, r, horizon), 1e-15)
                << nameOf(decay) << " warmup " << warmup << " r " << r
                << " horizon " << horizon << " step " << step;
        }
}

TEST(Schedule, WorkedValues) {
  LrSchedule cosine{10, LrDecay::Cosine, 0.1, 110};
  EXPECT_DOUBLE_EQ(cosine.factor(1), 0.1);
  EXPECT_DOUBLE_EQ(cosine.factor(5), 0.5);
  EXPECT_DOUBLE_EQ(cosine.factor(10), 1.0);
  // Half way through the decay: the mean of 1 and r.
  EXPECT_DOUBLE_EQ(cosine.factor(60), 0.55);
  EXPECT_DOUBLE_EQ(cosine.factor(110), 0.1);
  // Past the horizon (p is clamped to 1): stays at r.
  EXPECT_DOUBLE_EQ(cosine.factor(500), 0.1);

  LrSchedule linear{0, LrDecay::Linear, 0.0, 4};
  EXPECT_DOUBLE_EQ(linear.factor(1), 0.75);
  EXPECT_DOUBLE_EQ(linear.factor(2), 0.5);
  EXPECT_DOUBLE_EQ(linear.factor(4), 0.0);

  LrSchedule constant{3, LrDecay::Constant, 0.0, 10};
  EXPECT_DOUBLE_EQ(constant.factor(2), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(constant.factor(3), 1.0);
  EXPECT_DOUBLE_EQ(constant.factor(9), 1.0);
}

RecipeSpec recipe() {
  RecipeSpec r;
  r.lr = 0.1;
  r.weightDecay = 0.01;
  r.warmup = 2;
  r.decay = LrDecay::Linear;
  r.minLrRatio = 0.5;
  return r;
}

TEST(Schedule, TheRecipeIsTheDefault) {
  std::vector<std::string> notes;
  const Hyperparameters h =
      resolveHyperparameters(Options{}, recipe(), 50, nullptr, notes);
  EXPECT_EQ(h.lr, 0.1);
  EXPECT_EQ(h.weightDecay, 0.01);
  EXPECT_EQ(h.schedule.warmup, 2);
  EXPECT_EQ(h.schedule.decay, LrDecay::Linear);
  EXPECT_EQ(h.schedule.minLrRatio, 0.5);
  EXPECT_EQ(h.schedule.horizon, 50);
  EXPECT_TRUE(notes.empty());
}

TEST(Schedule, FlagsOverrideTheRecipe) {
  Options o;
  o.lr = 0.3;
  o.weightDecay = 0.0;
  o.warmup = 7;
  o.decay = LrDecay::Cosine;
  o.minLrRatio = 0.2;
  std::vector<std::string> notes;
  const Hyperparameters h =
      resolveHyperparameters(o, recipe(), 50, nullptr, notes);
  EXPECT_EQ(h.lr, 0.3);
  EXPECT_EQ(h.weightDecay, 0.0);
  EXPECT_EQ(h.schedule.warmup, 7);
  EXPECT_EQ(h.schedule.decay, LrDecay::Cosine);
  EXPECT_EQ(h.schedule.minLrRatio, 0.2);
  EXPECT_TRUE(notes.empty());
}

TEST(Schedule, AResumedRunKeepsTheCheckpointsSchedule) {
  CheckpointState saved;
  Hyperparameters first;
  first.lr = 0.05;
  first.weightDecay = 0.2;
  first.schedule = {3, LrDecay::Cosine, 0.1, 40};
  saveHyperparameters(first, saved);
  saved.step = 10;
  saved.totalSteps = 40;
  // Resumed to the same total: the checkpoint's schedule, nothing to note.
  std::vector<std::string> notes;
  const Hyperparameters h =
      resolveHyperparameters(Options{}, recipe(), 40, &saved, notes);
  EXPECT_EQ(h.lr, 0.05);
  EXPECT_EQ(h.weightDecay, 0.2);
  EXPECT_EQ(h.schedule.warmup, 3);
  EXPECT_EQ(h.schedule.decay, LrDecay::Cosine);
  EXPECT_EQ(h.schedule.minLrRatio, 0.1);
  EXPECT_EQ(h.schedule.horizon, 40);
  EXPECT_TRUE(notes.empty());

  // Extended to 60 steps: the decay now ends at step 60, noted.
  const Hyperparameters extended =
      resolveHyperparameters(Options{}, recipe(), 60, &saved, notes);
  EXPECT_EQ(extended.schedule.horizon, 60);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("decay now ends at step 60"), std::string::npos)
      << notes[0];
  notes.clear();

  // The same values again: nothing to note. Another value: noted.
  Options same;
  same.lr = 0.05;
  resolveHyperparameters(same, recipe(), 40, &saved, notes);
  EXPECT_TRUE(notes.empty());
  Options other;
  other.lr = 0.01;
  const Hyperparameters changed =
      resolveHyperparameters(other, recipe(), 40, &saved, notes);
  EXPECT_EQ(changed.lr, 0.01);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--lr 0.01 replaces the checkpoint's value"),
            std::string::npos)
      << notes[0];
}

TEST(Schedule, AFinalRatioWithoutADecayIsAnError) {
  Options o;
  o.minLrRatio = 0.1;
  RecipeSpec constant = recipe();
  constant.decay = LrDecay::Constant;
  constant.minLrRatio = 0;
  std::vector<std::string> notes;
  try {
    resolveHyperparameters(o, constant, 50, nullptr, notes);
    FAIL() << "expected a UsageError";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find("--min-lr-ratio"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--decay cosine"), std::string::npos)
        << e.what();
  }
}

TEST(Schedule, AWarmupLongerThanTheRunIsNoted) {
  Options o;
  o.warmup = 80;
  std::vector<std::string> notes;
  resolveHyperparameters(o, recipe(), 50, nullptr, notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("never reaches its peak"), std::string::npos);
}

} // namespace
