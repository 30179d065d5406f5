//===- TrainingProgramTest.cpp - The training program end to end ----------===//
//
// Runs the hand-written fixture programs (ClassifierProgram.cpp,
// BigramProgram.cpp) linked with the driver, as a user would run a program
// dpc built: training, metrics, checkpoints and exact resume, 1 vs 2 ranks,
// the budget stop, a crash in the middle of a save, and every bad input.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "CheckpointReader.h"
#include "Checksum.h"
#include "FixtureData.h"
#include "Json.h"
#include "ProcessHelpers.h"
#include "Safetensors.h"
#include "TrainingProgramFixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace dpctest;
using dprt::driver::SafetensorsReader;

TEST_F(TrainingProgram, HelpDocumentsEveryOption) {
  RunResult r = runProgram(kClassifier1, {"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char *flag :
       {"--data", "--steps", "--sigma", "--epsilon", "--delta", "--seed",
        "--save", "--save-every", "--resume", "--metrics", "--trace",
        "--no-budget-stop", "--generate", "--gpus", "--collective-timeout",
        "--quiet"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  EXPECT_NE(r.out.find("default 40"), std::string::npos) << r.out;
}

TEST_F(TrainingProgram, TrainingDecreasesTheLoss) {
  RunResult r = train(kClassifier1, {"--data", csv_, "--steps", "40", "--sigma",
                                     "0.5", "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 40u);
  auto meanLoss = [&](size_t begin, size_t end) {
    double sum = 0;
    int n = 0;
    for (size_t i = begin; i < end; ++i)
      if (!lines[i].at("loss").isNull()) {
        sum += lines[i].at("loss").number();
        ++n;
      }
    return sum / n;
  };
  double first = meanLoss(0, 5), last = meanLoss(35, 40);
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
  EXPECT_NE(r.out.find("training report"), std::string::npos);
  EXPECT_NE(r.out.find("steps             40 of 40"), std::string::npos)
      << r.out;
}

TEST_F(TrainingProgram, MetricsAreJsonLinesWithGrowingEpsilon) {
  RunResult r = train(kClassifier2, {"--data", csv_, "--steps", "12",
                                     "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 12u);
  double previous = 0;
  int64_t samples = 0, padding = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const JsonValue &m = lines[i];
    EXPECT_EQ(m.at("step").integer(), static_cast<int64_t>(i + 1));
    double eps = m.at("epsilon").number();
    EXPECT_GT(eps, previous);
    previous = eps;
    EXPECT_GE(m.at("samples").integer(), 0);
    EXPECT_EQ(m.at("tokens").integer(), m.at("samples").integer());
    EXPECT_GE(m.at("micro_steps").integer(), 1);
    EXPECT_GE(m.at("padding_rows").integer(), 0);
    samples += m.at("samples").integer();
    padding += m.at("padding_rows").integer();
    for (const char *key : {"step_time_s", "samples_per_s", "tokens_per_s",
                            "wall_time_s", "memory_bytes"})
      EXPECT_TRUE(m.at(key).isNumber()) << key;
    EXPECT_GT(m.at("memory_bytes").integer(), 0);
  }
  // The recipe's target (epsilon = 4) is met over the 12 steps.
  EXPECT_LE(previous, 4.0 * (1 + 1e-9));
  EXPECT_GT(previous, 3.9);
  // The final report sums the padding rows of the metrics.
  const std::string report = "padding rows      " + std::to_string(padding) +
                             " of the " + std::to_string(samples + padding) +
                             " rows the micro-steps ran";
  EXPECT_NE(r.out.find(report), std::string::npos) << report << "\n" << r.out;
}

TEST_F(TrainingProgram, EmptyLogicalBatchesStillTakeANoiseStep) {
  writeFile(dir_ / "tiny.csv", classifierCsv(10));
  RunResult r =
      train(kClassifier1, {"--data", dir_ / "tiny.csv", "--steps", "12",
                           "--sigma", "1", "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  int empty = 0;
  for (const JsonValue &m : readJsonLines(dir_ / "m.jsonl"))
    if (m.at("samples").integer() == 0) {
      ++empty;
      EXPECT_TRUE(m.at("loss").isNull());
      EXPECT_EQ(m.at("micro_steps").integer(), 1);
      // It runs the smallest micro-step the program has: this hand-written
      // one has only its physical batch of 8 (dpc-compiled programs also
      // have smaller ones: ProgramStep/EmptyBatch).
      EXPECT_EQ(m.at("padding_rows").integer(), 8);
    }
  // q = 0.05 over 10 records: a step is empty with probability 0.6.
  EXPECT_GT(empty, 0);
}

namespace {
/// Trains `steps` in one go, and in two runs with a checkpoint between, and
/// expects identical checkpoints.
void expectResumeIsExact(const std::string &binary,
                         const std::vector<std::string> &data, int steps,
                         int split) {
  TempDir dir;
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), data.begin(), data.end());
    args.push_back("--quiet");
    RunResult r = runProgram(binary, args);
    EXPECT_EQ(r.status, 0) << r.err;
  };
  run({"--steps", std::to_string(steps), "--save", dir / "straight"});
  run({"--steps", std::to_string(split), "--save", dir / "split"});
  run({"--resume", dir / "split", "--steps", std::to_string(steps), "--save",
       dir / "split"});
  // Every shard file, the manifest and the state, byte for byte.
  const auto straight = checkpointFiles(dir / "straight");
  const auto resumed = checkpointFiles(dir / "split");
  ASSERT_EQ(straight.size(), resumed.size());
  for (const auto &[name, content] : straight) {
    ASSERT_TRUE(resumed.count(name)) << name;
    EXPECT_TRUE(resumed.at(name) == content)
        << name << " differs after resuming";
  }
}
} // namespace

TEST_F(TrainingProgram, ResumeIsBitIdenticalWithOneRank) {
  expectResumeIsExact(kClassifier1, {"--data", csv_, "--sigma", "1"}, 14, 6);
}

TEST_F(TrainingProgram, ResumeIsBitIdenticalWithTwoRanks) {
  expectResumeIsExact(kClassifier2, {"--data", csv_, "--sigma", "1"}, 14, 9);
}

TEST_F(TrainingProgram, ResumeIsBitIdenticalForTheLanguageModel) {
  expectResumeIsExact(kBigram2, {"--data", text_, "--noise-key", key_}, 10, 4);
}

TEST_F(TrainingProgram, SaveEveryKeepsEachCheckpoint) {
  RunResult r =
      train(kClassifier1, {"--data", csv_, "--steps", "9", "--sigma", "1",
                           "--save", dir_ / "ck", "--save-every", "4"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char *name : {"step-00000004", "step-00000008", "step-00000009"})
    EXPECT_TRUE(std::filesystem::exists(dir_ / ("ck/" + std::string(name))))
        << name;
  EXPECT_EQ(readFile(dir_ / "ck/latest"), "step-00000009\n");
  JsonValue state = JsonValue::parse(checkpointFile(dir_ / "ck", "state.json"));
  EXPECT_EQ(state.at("step").integer(), 9);
  EXPECT_EQ(state.at("sampler").at("next_step").integer(), 10);
  EXPECT_EQ(state.at("accountant").at("segments").array().size(), 1u);
  EXPECT_EQ(state.at("optimizer").at("kind").string(), "adamw");
  SafetensorsReader shard(resolveCheckpoint(dir_ / "ck") +
                          "/rank-00000-of-00001.safetensors");
  ASSERT_NE(shard.find("unit.w.adam_m"), nullptr);
  ASSERT_NE(shard.find("unit.b.adam_v"), nullptr);
  EXPECT_EQ(shard.find("unit.w.adam_v")->shape, std::vector<int64_t>{12});
}

TEST_F(TrainingProgram, F64ModelsCheckpointF64Parameters) {
  RunResult r = train(kClassifierF64,
                      {"--data", csv_, "--steps", "3", "--save", dir_ / "ck"});
  ASSERT_EQ(r.status, 0) << r.err;
  SafetensorsReader shard(resolveCheckpoint(dir_ / "ck") +
                          "/rank-00000-of-00001.safetensors");
  ASSERT_NE(shard.find("unit.w.master"), nullptr);
  EXPECT_EQ(shard.find("unit.w.master")->dtype, dprt::DType::F64);
  dprt::driver::CheckpointReader reader(dir_ / "ck");
  EXPECT_EQ(reader.dtype(), dprt::DType::F64);
  ASSERT_EQ(reader.parameters().size(), 2u);
  EXPECT_EQ(reader.parameters()[0].name, "w");
  EXPECT_EQ(reader.parameters()[0].shape, (std::vector<int64_t>{3, 4}));
}

namespace {
void expectRanksAgree(const std::string &one, const std::string &two,
                      const std::vector<std::string> &args, double tolerance) {
  TempDir dir;
  auto run = [&](const std::string &binary, const std::string &save) {
    std::vector<std::string> all = args;
    all.insert(all.end(), {"--save", save, "--quiet"});
    RunResult r = runProgram(binary, all);
    EXPECT_EQ(r.status, 0) << r.err;
  };
  run(one, dir / "one");
  run(two, dir / "two");
  double difference = maxRelativeDifference(dir / "one", dir / "two");
  std::printf("    1 vs 2 ranks: max relative difference %.3g\n", difference);
  EXPECT_LE(difference, tolerance);
}
} // namespace

TEST_F(TrainingProgram, OneAndTwoRanksAgreeWithoutNoise) {
  expectRanksAgree(kClassifier1, kClassifier2,
                   {"--data", csv_, "--steps", "15", "--sigma", "0"}, 1e-6);
}

TEST_F(TrainingProgram, OneAndTwoRanksAgreeWithNoise) {
  expectRanksAgree(kClassifier1, kClassifier2,
                   {"--data", csv_, "--steps", "15", "--sigma", "1.5"}, 1e-6);
}

TEST_F(TrainingProgram, OneAndTwoRanksAgreeForTheLanguageModel) {
  expectRanksAgree(kBigram1, kBigram2,
                   {"--data", text_, "--steps", "8", "--noise-key", key_},
                   1e-6);
}

TEST_F(TrainingProgram, CrashDuringSaveKeepsThePreviousCheckpoint) {
  const std::string ck = dir_ / "ck";
  const std::vector<std::string> data = {"--data", csv_, "--sigma", "1"};
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), data.begin(), data.end());
    return args;
  };
  ASSERT_EQ(train(kClassifier2, with({"--steps", "5", "--save", ck})).status,
            0);
  const auto before = checkpointFiles(ck);

  // The process dies after writing the new checkpoint's files, before
  // publishing it.
  RunResult crashed =
      train(kClassifier2,
            {"--data", csv_, "--resume", ck, "--steps", "10", "--save", ck},
            {"DPRT_TEST_CHECKPOINT_FAULT=crash-before-rename"});
  EXPECT_EQ(crashed.status, 86);
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000005\n");
  EXPECT_TRUE(checkpointFiles(ck) == before);

  // A failed rename is reported and also leaves the old checkpoint.
  RunResult failed =
      train(kClassifier2,
            {"--data", csv_, "--resume", ck, "--steps", "10", "--save", ck},
            {"DPRT_TEST_CHECKPOINT_FAULT=fail-rename"});
  EXPECT_EQ(failed.status, 1);
  EXPECT_NE(failed.err.find("cannot rename the checkpoint into place"),
            std::string::npos)
      << failed.err;
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000005\n");

  // Resuming from it still gives exactly the uninterrupted run.
  ASSERT_EQ(train(kClassifier2, {"--data", csv_, "--resume", ck, "--steps",
                                 "10", "--save", ck})
                .status,
            0);
  ASSERT_EQ(
      train(kClassifier2, with({"--steps", "10", "--save", dir_ / "straight"}))
          .status,
      0);
  EXPECT_TRUE(checkpointFiles(ck) == checkpointFiles(dir_ / "straight"));
  // The interrupted save's temporary directory was cleaned up.
  for (const auto &entry : std::filesystem::directory_iterator(ck))
    EXPECT_NE(entry.path().filename().string().rfind(".tmp-", 0), 0u)
        << entry.path();
}

TEST_F(TrainingProgram, BudgetStopEndsTrainingBeforeEpsilonIsExceeded) {
  const std::string ck = dir_ / "ck";
  ASSERT_EQ(train(kClassifier1, {"--data", csv_, "--epsilon", "1", "--steps",
                                 "6", "--save", ck})
                .status,
            0);
  // Six more steps at the same sigma would exceed epsilon = 1.
  RunResult r =
      runProgram(kClassifier1, {"--data", csv_, "--resume", ck, "--steps", "12",
                                "--metrics", dir_ / "m.jsonl"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("stopping after step 6: step 7 would raise epsilon"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("steps             6 of 12 (stopped"), std::string::npos)
      << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "m.jsonl") &&
               !readFile(dir_ / "m.jsonl").empty());

  RunResult over = train(kClassifier1, {"--data", csv_, "--resume", ck,
                                        "--steps", "8", "--no-budget-stop",
                                        "--metrics", dir_ / "over.jsonl"});
  EXPECT_EQ(over.status, 0) << over.err;
  auto lines = readJsonLines(dir_ / "over.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_GT(lines.back().at("epsilon").number(), 1.0);
}

TEST_F(TrainingProgram, GenerateSamplesLinesFromTheLanguageModel) {
  RunResult r =
      train(kBigram1, {"--data", text_, "--steps", "30", "--generate", "5"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::string generated = r.out.substr(0, r.out.find("training report"));
  EXPECT_EQ(std::count(generated.begin(), generated.end(), '\n'), 5) << r.out;
  // Two runs with the same seed sample the same lines.
  RunResult again =
      train(kBigram1, {"--data", text_, "--steps", "30", "--generate", "5"});
  EXPECT_EQ(again.out.substr(0, again.out.find("training report")), generated);
}

TEST_F(TrainingProgram, TraceIsAChromeTraceOfBothTracks) {
  RunResult r = train(kClassifier2, {"--data", csv_, "--steps", "3", "--trace",
                                     dir_ / "trace.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  JsonValue trace = JsonValue::parse(readFile(dir_ / "trace.json"));
  int microsteps[2] = {0, 0}, gathers = 0;
  for (const JsonValue &e : trace.at("traceEvents").array()) {
    if (e.at("ph").string() != "X")
      continue;
    EXPECT_GE(e.at("dur").number(), 0);
    EXPECT_TRUE(e.at("ts").isNumber());
    const std::string &name = e.at("name").string();
    int pid = static_cast<int>(e.at("pid").integer());
    if (name == "dp_microstep") {
      EXPECT_EQ(e.at("tid").integer(), 0);
      ++microsteps[pid];
    }
    if (name == "all_gather") {
      EXPECT_EQ(e.at("tid").integer(), 1);
      ++gathers;
    }
  }
  EXPECT_GE(microsteps[0], 3);
  EXPECT_EQ(microsteps[0], microsteps[1]);
  EXPECT_GE(gathers, 2 * 2 * 3);
}

TEST_F(TrainingProgram, TraceMeasuresTheCommunicationComputeWaitsFor) {
  // Without --trace nothing is measured: the key is absent.
  ASSERT_EQ(train(kClassifier2, {"--data", csv_, "--steps", "2", "--metrics",
                                 dir_ / "plain.jsonl"})
                .status,
            0);
  for (const JsonValue &line : readJsonLines(dir_ / "plain.jsonl"))
    EXPECT_EQ(line.find("exposed_comm_s"), nullptr);

  RunResult r =
      train(kClassifier2, {"--data", csv_, "--steps", "3", "--trace",
                           dir_ / "trace.json", "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  for (const JsonValue &line : lines) {
    // On the CPU every collective blocks: each step waits for its
    // all-gathers and reduce-scatters, within the step's time.
    double exposed = line.at("exposed_comm_s").number();
    EXPECT_GT(exposed, 0);
    EXPECT_LT(exposed, line.at("step_time_s").number());
  }
  EXPECT_NE(r.out.find("exposed comm      "), std::string::npos) << r.out;
  // The trace holds the same waits on each rank's third track.
  JsonValue trace = JsonValue::parse(readFile(dir_ / "trace.json"));
  double waited = 0;
  for (const JsonValue &e : trace.at("traceEvents").array())
    if (e.at("ph").string() == "X" &&
        e.at("name").string() == "wait_for_communication") {
      EXPECT_EQ(e.at("tid").integer(), 2);
      waited += e.at("dur").number() * 1e-6;
    }
  double measured = 0;
  for (const JsonValue &line : lines)
    measured += line.at("exposed_comm_s").number() * 2; // mean of 2 ranks
  EXPECT_NEAR(waited, measured, 1e-3 * measured + 1e-5);
}

TEST_F(TrainingProgram, AFailingRankStopsEveryRank) {
  // The other rank waits in a collective for the failed one: it must be
  // woken, and the program must report the root cause, not hang.
  RunResult r = runProgram(
      "/usr/bin/timeout",
      {"60", kClassifier2, "--data", csv_, "--steps", "10", "--quiet"},
      {"DPC_FIXTURE_FAIL_RANK=1"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("classifier-2: error: rank 1 failed on purpose"),
            std::string::npos)
      << r.err;
}

namespace {
struct BadInput {
  const char *what;
  std::string binary;
  std::vector<std::string> args;
  std::string message;
};
} // namespace

TEST_F(TrainingProgram, BadInputsExitWithStatusTwoAndAMessage) {
  writeFile(dir_ / "empty.csv", "");
  writeFile(dir_ / "header-only.csv", "a,b,c,d,label\n");
  writeFile(dir_ / "wide.csv", "1,2,3,4,0\n1,2,3,4,5,0\n");
  writeFile(dir_ / "label.csv", "1,2,3,4,0\n1,2,3,4,3\n");
  writeFile(dir_ / "nan.csv", "1,2,x,4,0\n");
  writeFile(dir_ / "fraction.csv", "1,2,3,4,1.5\n");
  writeFile(dir_ / "long.txt", "short\n" + std::string(16, 'a') + "\n");
  std::string fifteen;
  for (int i = 0; i < 10; ++i)
    fifteen += "fifteen bytes..\n";
  writeFile(dir_ / "ok.txt", fifteen);
  writeFile(dir_ / "range.tok", "1 2 3\n4 256 5\n");
  writeFile(dir_ / "one.tok", "1 2\n7\n");
  writeFile(dir_ / "word.tok", "1 two 3\n");
  std::filesystem::create_directories(dir_ / "not-a-checkpoint");

  const std::vector<BadInput> cases = {
      {"unknown flag", kClassifier1, {"--bogus"}, "unknown option '--bogus'"},
      {"bad number",
       kClassifier1,
       {"--steps", "ten"},
       "option --steps needs a whole number, got 'ten'"},
      {"negative steps", kClassifier1, {"--steps", "-3"}, "must be >= 0"},
      {"missing value",
       kClassifier1,
       {"--data"},
       "option --data needs a value"},
      {"positional", kClassifier1, {"data.csv"}, "unexpected argument"},
      {"no data", kClassifier1, {}, "--data FILE is required"},
      {"sigma and epsilon",
       kClassifier1,
       {"--data", csv_, "--sigma", "1", "--epsilon", "2"},
       "not both"},
      {"delta",
       kClassifier1,
       {"--data", csv_, "--delta", "1"},
       "--delta must be in (0, 1)"},
      {"save-every alone",
       kClassifier1,
       {"--data", csv_, "--save-every", "2"},
       "--save-every needs --save"},
      {"gpus on cpu",
       kClassifier1,
       {"--data", csv_, "--gpus", "1"},
       "--gpus is for programs built for the cuda backend"},
      {"missing file",
       kClassifier1,
       {"--data", dir_ / "nope.csv"},
       "cannot read the data file"},
      {"empty file",
       kClassifier1,
       {"--data", dir_ / "empty.csv"},
       "has no records"},
      {"header only",
       kClassifier1,
       {"--data", dir_ / "header-only.csv"},
       "has no records"},
      {"csv width",
       kClassifier1,
       {"--data", dir_ / "wide.csv"},
       "wide.csv:2: 6 fields, expected 5 (CSV rows of 4 features, then a "
       "class label)"},
      {"label range",
       kClassifier1,
       {"--data", dir_ / "label.csv"},
       "label.csv:2: the label 3 is not a class of this model [0, 3)"},
      {"not a number",
       kClassifier1,
       {"--data", dir_ / "nan.csv"},
       "nan.csv:1: field 3 'x' is not a finite number"},
      {"fractional label",
       kClassifier1,
       {"--data", dir_ / "fraction.csv"},
       "the label '1.5' is not a whole number"},
      {"generate on a classifier",
       kClassifier1,
       {"--data", csv_, "--generate", "2"},
       "--generate samples text"},
      {"line too long",
       kBigram1,
       {"--data", dir_ / "long.txt"},
       "long.txt:2: the record has 16 bytes but this model reads at most 15"},
      {"token out of range",
       kBigram1,
       {"--data", dir_ / "range.tok"},
       "range.tok:2: token id 256 is outside the vocabulary [0, 256)"},
      {"one token",
       kBigram1,
       {"--data", dir_ / "one.tok"},
       "one.tok:2: a record needs at least 2 token ids"},
      {"not a token",
       kBigram1,
       {"--data", dir_ / "word.tok"},
       "word.tok:1: 'two' is not a token id"},
      {"resume nothing",
       kClassifier1,
       {"--data", csv_, "--resume", dir_ / "not-a-checkpoint"},
       "is not a checkpoint"},
      {"resume missing",
       kClassifier1,
       {"--data", csv_, "--resume", dir_ / "nowhere"},
       "is not a checkpoint"},
      {"resume corrupt",
       kClassifier1,
       {"--data", csv_, "--resume", dir_ / "state-bad"},
       "state.json' is not valid"},
      {"metrics unwritable",
       kClassifier1,
       {"--data", csv_, "--steps", "1", "--metrics", dir_ / "no/such/m.jsonl"},
       "cannot write the metrics file"},
  };
  std::filesystem::create_directories(dir_ / "state-bad");
  writeFile(dir_ / "state-bad/state.json", "{\"format\": 3");
  for (const BadInput &c : cases) {
    RunResult r = runProgram(c.binary, c.args);
    EXPECT_EQ(r.status, 2) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.what << ": expected '" << c.message << "' in: " << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << c.what;
  }
  // The valid text file trains, so the length limit is exactly tokens - 1.
  EXPECT_EQ(train(kBigram1, {"--data", dir_ / "ok.txt", "--steps", "1"}).status,
            0);
}

TEST_F(TrainingProgram, ResumeRejectsOtherDataAndChangedNoise) {
  const std::string ck = dir_ / "ck";
  ASSERT_EQ(train(kClassifier1, {"--data", csv_, "--steps", "3", "--sigma", "1",
                                 "--save", ck})
                .status,
            0);
  writeFile(dir_ / "other.csv", classifierCsv(301));
  RunResult other = runProgram(kClassifier1, {"--data", dir_ / "other.csv",
                                              "--resume", ck, "--steps", "5"});
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.err.find("is not the data of the checkpoint's run"),
            std::string::npos)
      << other.err;
  RunResult sigma = runProgram(kClassifier1, {"--data", csv_, "--resume", ck,
                                              "--steps", "5", "--sigma", "2"});
  EXPECT_EQ(sigma.status, 2);
  EXPECT_NE(sigma.err.find("--sigma cannot change when resuming"),
            std::string::npos)
      << sigma.err;
  RunResult model = runProgram(kBigram1, {"--data", text_, "--resume", ck});
  EXPECT_EQ(model.status, 2);
  EXPECT_NE(model.err.find("is of model 'classifier'"), std::string::npos)
      << model.err;
}

TEST_F(TrainingProgram, ZeroStepsInitializesAndSavesWithoutData) {
  RunResult r = train(kClassifier2, {"--steps", "0", "--save", dir_ / "init"});
  ASSERT_EQ(r.status, 0) << r.err;
  auto params = readParams(dir_ / "init");
  ASSERT_EQ(params.size(), 2u);
  // w ~ N(0, 0.5^2) from the initializer, b = 0.
  EXPECT_NE(params[0].second[0], 0.0);
  for (double b : params[1].second)
    EXPECT_EQ(b, 0.0);
  // The initial parameters do not depend on the number of ranks.
  ASSERT_EQ(
      train(kClassifier1, {"--steps", "0", "--save", dir_ / "init1"}).status,
      0);
  EXPECT_EQ(readParams(dir_ / "init"), readParams(dir_ / "init1"));
  // Training can start from it.
  RunResult resumed = train(kClassifier2, {"--data", csv_, "--resume",
                                           dir_ / "init", "--steps", "2"});
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

TEST_F(TrainingProgram, CountsAreRangeCheckedBeforeTheyAreConverted) {
  const std::vector<BadInput> cases = {
      {"steps too large",
       kClassifier1,
       {"--data", csv_, "--steps", "1e19"},
       "option --steps must be <= 72057594037927935, got 1e19"},
      {"steps beyond the counter",
       kClassifier1,
       {"--data", csv_, "--steps", "72057594037927936"},
       "option --steps must be <= 72057594037927935"},
      {"steps negative",
       kClassifier1,
       {"--data", csv_, "--steps", "-1"},
       "option --steps must be >= 0, got -1"},
      {"steps fractional",
       kClassifier1,
       {"--data", csv_, "--steps", "2.5e0"},
       "option --steps needs a whole number, got '2.5e0'"},
      {"steps hexadecimal float",
       kClassifier1,
       {"--data", csv_, "--steps", "0x1e"},
       "option --steps needs a whole number, got '0x1e'"},
      {"save-every beyond int64",
       kClassifier1,
       {"--data", csv_, "--save", dir_ / "ck", "--save-every",
        "99999999999999999999"},
       "option --save-every must be <= 9223372036854775807, got "
       "99999999999999999999"},
      {"save-every zero",
       kClassifier1,
       {"--data", csv_, "--save", dir_ / "ck", "--save-every", "0"},
       "option --save-every must be >= 1, got 0"},
      {"gpus beyond int32",
       kClassifier1,
       {"--data", csv_, "--gpus", "4294967297"},
       "option --gpus must be <= 1024, got 4294967297"},
      {"generate negative",
       kBigram1,
       {"--data", text_, "--generate", "-5"},
       "option --generate must be >= 0, got -5"},
  };
  for (const BadInput &c : cases) {
    RunResult r = runProgram(c.binary, c.args);
    EXPECT_EQ(r.status, 2) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.what << ": expected '" << c.message << "' in: " << r.err;
  }
  // Exponent form is a count like any other.
  RunResult r = train(kClassifier1, {"--data", csv_, "--steps", "3e0",
                                     "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(readJsonLines(dir_ / "m.jsonl").size(), 3u);
}

TEST_F(TrainingProgram,
       ResumeRefusesFewerStepsThanTheCheckpointsAndAnotherKey) {
  const std::string ck = dir_ / "ck";
  ASSERT_EQ(train(kClassifier1, {"--data", csv_, "--steps", "3", "--sigma", "1",
                                 "--save", ck})
                .status,
            0);
  RunResult fewer = runProgram(kClassifier1, {"--data", csv_, "--resume", ck,
                                              "--steps", "1", "--quiet"});
  EXPECT_EQ(fewer.status, 2) << fewer.err;
  EXPECT_NE(fewer.err.find("--steps 1 is below the step of the checkpoint '" +
                           ck + "/step-00000003', 3"),
            std::string::npos)
      << fewer.err;
  // Equal is fine: nothing left to train.
  EXPECT_EQ(runProgram(kClassifier1, {"--data", csv_, "--resume", ck, "--steps",
                                      "3", "--quiet"})
                .status,
            0);

  // A secure run resumed with another key file would change the noise.
  const std::string lm = dir_ / "lm";
  ASSERT_EQ(
      train(kBigram1, {"--data", text_, "--steps", "2", "--save", lm}).status,
      0);
  writeFile(dir_ / "other.key", std::string(64, 'b') + "\n");
  RunResult other =
      runProgram(kBigram1, {"--data", text_, "--resume", lm, "--steps", "3",
                            "--noise-key", dir_ / "other.key"});
  EXPECT_EQ(other.status, 2) << other.err;
  EXPECT_NE(other.err.find("--noise-key cannot change when resuming"),
            std::string::npos)
      << other.err;
  EXPECT_EQ(other.err.find(std::string(16, 'b')), std::string::npos)
      << "the message must not print a key";
}

TEST_F(TrainingProgram, NoiseKeyIsRefusedWhereTheRecipeIsNotSecure) {
  // The classifier's recipe uses Philox, keyed by the seed.
  RunResult r = runProgram(
      kClassifier1, {"--data", csv_, "--steps", "1", "--noise-key", key_});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--noise-key keys the secure (ChaCha20) noise, but "
                       "this program's recipe uses the philox generator"),
            std::string::npos)
      << r.err;
}

TEST_F(TrainingProgram, DataOutsideTheComputeTypeIsADataError) {
  writeFile(dir_ / "huge.csv", classifierCsv(20) + "1,1e39,0,0,1\n");
  RunResult r = runProgram(kClassifier1, {"--data", dir_ / "huge.csv"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("huge.csv:22: field 2 '1e39' overflows the model's "
                       "compute type f32"),
            std::string::npos)
      << r.err;
  // The f64 model represents it.
  RunResult f64 =
      train(kClassifierF64, {"--data", dir_ / "huge.csv", "--steps", "0"});
  EXPECT_EQ(f64.status, 0) << f64.err;
}
