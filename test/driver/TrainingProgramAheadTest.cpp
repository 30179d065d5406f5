//===- TrainingProgramAheadTest.cpp - The driver's step ahead -------------===//
//
// The training program queues step s + 1 before step s writes its metrics
// (runtime/driver/TrainStep.cpp); only CUDA does so, and
// DPRT_TEST_RUN_AHEAD=1 makes the CPU backend do it too. Here: the same
// checkpoints and metrics as one step at a time, and never past a
// checkpoint. ctest's TrainingProgram.AllRunningOneStepAhead runs every
// TrainingProgram test with the CPU ahead, and lit-run-ahead the lit suite.
//
//===----------------------------------------------------------------------===//

#include "FixtureData.h"
#include "Json.h"
#include "ProcessHelpers.h"
#include "TrainingProgramFixture.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

using namespace dpctest;

TEST_F(TrainingProgram, RunningOneStepAheadKeepsTheBits) {
  // DPRT_TEST_RUN_AHEAD=1 makes the CPU backend queue step s + 1 before
  // step s's metrics, as CUDA does (docs/training-program.md, "One step
  // ahead"); a checkpoint must still hold its own step's parameters.
  auto run = [&](const std::string &ahead) {
    const std::string out = dir_ / ("ahead-" + ahead);
    RunResult r =
        train(kClassifier1,
              {"--data", csv_, "--steps", "9", "--sigma", "1", "--save", out,
               "--save-every", "4", "--metrics", out + ".jsonl"},
              {"DPRT_TEST_RUN_AHEAD=" + ahead});
    EXPECT_EQ(r.status, 0) << r.err;
    return readJsonLines(out + ".jsonl");
  };
  const auto oneByOne = run("0"), ahead = run("1");
  ASSERT_EQ(oneByOne.size(), 9u);
  ASSERT_EQ(ahead.size(), 9u);
  for (size_t i = 0; i < 9; ++i) {
    const int64_t step = int64_t(i) + 1;
    EXPECT_FALSE(oneByOne[i].at("queued_ahead").boolean()) << step;
    // Not after a checkpoint (steps 4 and 8) nor for the first step.
    const bool expected = step != 1 && step != 5 && step != 9;
    EXPECT_EQ(ahead[i].at("queued_ahead").boolean(), expected) << step;
    EXPECT_EQ(ahead[i].at("loss").number(), oneByOne[i].at("loss").number())
        << step;
    EXPECT_EQ(ahead[i].at("epsilon").number(),
              oneByOne[i].at("epsilon").number())
        << step;
  }
  for (const char *name : {"step-00000004", "step-00000008", "step-00000009"}) {
    auto files = [&](const std::string &ahead) {
      std::map<std::string, std::string> all;
      for (const auto &e : std::filesystem::directory_iterator(
               dir_ / ("ahead-" + ahead + "/" + name)))
        all[e.path().filename().string()] = readFile(e.path().string());
      return all;
    };
    const auto a = files("1"), b = files("0");
    EXPECT_FALSE(a.empty()) << name;
    EXPECT_TRUE(a == b) << name << " differs when run ahead";
  }
}
