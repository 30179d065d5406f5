//===- TrainingProgramOutputsTest.cpp - What the program writes, safely --===//
//
// The fixture programs' outputs and their safety: output paths checked
// before training, one run per checkpoint folder (the lock, a stale lock
// taken over), checksummed checkpoint files verified on resume, --keep-last,
// and non-finite losses, gradients and parameters, which never reach an
// update or a checkpoint.
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

TEST_F(TrainingProgram, OutputPathsAreCheckedBeforeTraining) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--save", "/proc/dpc-no-such-dir"},
       "cannot create the checkpoint directory '/proc/dpc-no-such-dir' "
       "(--save)"},
      {{"--save", csv_},
       "cannot create the checkpoint directory '" + csv_ + "' (--save): "},
      {{"--trace", dir_ / "no/such/trace.json"},
       "cannot write the trace file '" + dir_ / "no/such/trace.json" +
           "' (--trace)"},
  };
  for (const auto &[flags, message] : cases) {
    std::vector<std::string> args = {"--data", csv_,        "--steps",
                                     "5",      "--metrics", dir_ / "m.jsonl"};
    args.insert(args.end(), flags.begin(), flags.end());
    RunResult r = runProgram(kClassifier1, args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    // Not one step was trained.
    EXPECT_TRUE(!std::filesystem::exists(dir_ / "m.jsonl") ||
                readFile(dir_ / "m.jsonl").empty());
  }
}

namespace {
std::string thisHost() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

std::string lockJson(long pid, const std::string &host) {
  return "{\"pid\": " + std::to_string(pid) + ", \"host\": \"" + host +
         "\", \"start_ticks\": \"0x0000000000000000\"}\n";
}
} // namespace

TEST_F(TrainingProgram, ASecondRunSavingIntoTheSameDirectoryStopsAtItsStart) {
  const std::string ck = dir_ / "ck";
  std::filesystem::create_directories(ck);
  // This test process holds the lock, as a running program would.
  const int fd = open((ck + "/lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  writeFile(ck + "/lock", lockJson(getpid(), thisHost()));
  RunResult r = runProgram(
      kClassifier1, {"--data", csv_, "--steps", "2", "--save", ck, "--quiet"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("the checkpoint directory '" + ck +
                       "' (--save) is in use by process " +
                       std::to_string(getpid()) + " on host " + thisHost()),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(ck + "/latest"));
  // A live owner on this host is respected even without the flock (a file
  // system without locks).
  close(fd);
  r = runProgram(kClassifier1,
                 {"--data", csv_, "--steps", "2", "--save", ck, "--quiet"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("is in use by process " + std::to_string(getpid())),
            std::string::npos)
      << r.err;
  // An owner on another host cannot be checked: refused, with advice.
  writeFile(ck + "/lock", lockJson(1, "elsewhere.example"));
  r = runProgram(kClassifier1,
                 {"--data", csv_, "--steps", "2", "--save", ck, "--quiet"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("in use by process 1 on host elsewhere.example"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("remove the lock file"), std::string::npos) << r.err;
}

TEST_F(TrainingProgram, AStaleLockIsTakenOverWithAWarning) {
  const std::string ck = dir_ / "ck";
  std::filesystem::create_directories(ck);
  // The pid of a process that has ended.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0)
    _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  writeFile(ck + "/lock", lockJson(child, thisHost()));
  RunResult r = runProgram(
      kClassifier1, {"--data", csv_, "--steps", "2", "--save", ck, "--quiet"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: taking over the stale lock " + ck +
                       "/lock of process " + std::to_string(child) +
                       " on host " + thisHost() +
                       ", which is no longer running"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000002\n");
  // The run removed its lock when it ended.
  EXPECT_FALSE(std::filesystem::exists(ck + "/lock"));
}

TEST_F(TrainingProgram, CheckpointFilesAreChecksummedAndVerifiedOnResume) {
  const std::string ck = dir_ / "ck";
  ASSERT_EQ(train(kClassifier2, {"--data", csv_, "--steps", "3", "--sigma", "1",
                                 "--save", ck})
                .status,
            0);
  const std::string path = resolveCheckpoint(ck);
  // state.json records manifest.json, which records every shard file.
  JsonValue state = JsonValue::parse(readFile(path + "/state.json"));
  JsonValue manifest = JsonValue::parse(readFile(path + "/manifest.json"));
  auto expectRecorded = [&](const JsonValue &record, const std::string &name) {
    int64_t bytes = 0;
    const uint64_t checksum =
        dprt::driver::checksumOfFile(path + "/" + name, bytes);
    EXPECT_EQ(record.at("bytes").integer(), bytes) << name;
    EXPECT_EQ(record.at("xxh3_64").string(),
              dprt::driver::checksumText(checksum))
        << name;
  };
  expectRecorded(state.at("files").at("manifest.json"), "manifest.json");
  ASSERT_EQ(manifest.at("shards").array().size(), 2u);
  for (const JsonValue &shard : manifest.at("shards").array())
    expectRecorded(shard, shard.at("file").string());

  const std::vector<std::string> resume = {"--data",  csv_, "--resume", ck,
                                           "--steps", "4",  "--quiet"};
  // One flipped bit in the last tensor's data of rank 1's file.
  const std::string shard = path + "/rank-00001-of-00002.safetensors";
  const std::string original = readFile(shard);
  std::string flipped = original;
  flipped[flipped.size() - 2] ^= 0x10;
  writeFile(shard, flipped);
  RunResult r = runProgram(kClassifier2, resume);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("the checkpoint file '" + shard +
                       "' is corrupt: its XXH3-64 checksum is "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(", manifest.json records 0x"), std::string::npos)
      << r.err;
  // A truncated file names its size.
  writeFile(shard, original.substr(0, original.size() - 4));
  r = runProgram(kClassifier2, resume);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("is corrupt: it has " +
                       std::to_string(original.size() - 4) +
                       " bytes, manifest.json records " +
                       std::to_string(original.size())),
            std::string::npos)
      << r.err;
  // A missing one is named.
  std::filesystem::remove(shard);
  r = runProgram(kClassifier2, resume);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("the checkpoint file '" + shard + "' is missing"),
            std::string::npos)
      << r.err;
  writeFile(shard, original);
  // An edited manifest no longer matches state.json's record.
  const std::string manifestText = readFile(path + "/manifest.json");
  writeFile(path + "/manifest.json", manifestText + " ");
  r = runProgram(kClassifier2, resume);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("manifest.json' is corrupt: it has " +
                       std::to_string(manifestText.size() + 1) +
                       " bytes, state.json records"),
            std::string::npos)
      << r.err;
  writeFile(path + "/manifest.json", manifestText);
  EXPECT_EQ(runProgram(kClassifier2, resume).status, 0);

  // A sharded checkpoint without its record of manifest.json is refused.
  std::string text = readFile(path + "/state.json");
  const size_t files = text.find(",\n  \"files\"");
  ASSERT_NE(files, std::string::npos) << text;
  writeFile(path + "/state.json", text.substr(0, files) + "\n}\n");
  r = runProgram(kClassifier2,
                 {"--data", csv_, "--resume", path, "--steps", "4", "--quiet"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("records no checksum of manifest.json"),
            std::string::npos)
      << r.err;
}

TEST_F(TrainingProgram, KeepLastPrunesOlderCheckpointsAfterEachSave) {
  const std::string ck = dir_ / "ck";
  RunResult r = runProgram(
      kClassifier1, {"--data", csv_, "--steps", "9", "--sigma", "1", "--save",
                     ck, "--save-every", "2", "--keep-last", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> names;
  for (const auto &e : std::filesystem::directory_iterator(ck))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-00000008",
                                             "step-00000009"}));
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000009\n");
  EXPECT_NE(r.err.find("removed the older checkpoint step-00000006 "
                       "(--keep-last 2)"),
            std::string::npos)
      << r.err;
  RunResult alone =
      runProgram(kClassifier1, {"--data", csv_, "--keep-last", "2"});
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--keep-last needs --save DIR"), std::string::npos);
}

namespace {
/// Every tensor of a safetensors file as doubles, by name.
std::vector<std::pair<std::string, std::vector<double>>>
readTensors(const std::string &file) {
  SafetensorsReader reader(file);
  std::vector<std::pair<std::string, std::vector<double>>> tensors;
  for (const auto &t : reader.tensors()) {
    std::vector<char> raw(t.end - t.begin);
    reader.read(t, raw.data());
    std::vector<double> values(t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) {
      float f;
      std::memcpy(&f, raw.data() + 4 * i, 4);
      values[i] = f;
    }
    tensors.emplace_back(t.name, values);
  }
  return tensors;
}

/// Records 5, 15, 25, ... have features so large that their logits overflow
/// f32: finite data (3.4e38 fits in f32), non-finite loss and gradient.
std::string csvWithOverflowingRecords() {
  std::istringstream in(classifierCsv(300));
  std::ostringstream out;
  std::string line;
  for (int i = -1; std::getline(in, line); ++i)
    out << (i % 10 == 5 ? "3.4e38,3.4e38,3.4e38,3.4e38,0" : line) << "\n";
  return out.str();
}
} // namespace

// Without --skip-nonfinite-steps the update kernels find the NaN in the
// gradient they read (no pass of the driver's own); the run stops before
// anything of the step is saved or reported.
TEST_F(TrainingProgram, ANonFiniteGradientStopsTheRunAtTheUpdate) {
  const std::string ck = dir_ / "ck";
  RunResult r = runProgram(kClassifier2,
                           {"--data", csv_, "--steps", "6", "--sigma", "1",
                            "--save", ck, "--save-every", "1", "--metrics",
                            dir_ / "m.jsonl", "--quiet"},
                           {"DPC_FIXTURE_NAN_GRADIENT_STEP=3"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("error: step 3: the clipped gradient sum is not "
                       "finite"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("stopped at the update, so nothing of this step was "
                       "saved; pass --skip-nonfinite-steps"),
            std::string::npos)
      << r.err;
  // Steps 1 and 2 were saved; nothing of step 3.
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000002\n");
  EXPECT_FALSE(std::filesystem::exists(ck + "/step-00000003"));
  EXPECT_EQ(readJsonLines(dir_ / "m.jsonl").size(), 2u);
  for (const auto &[name, values] : readParams(ck))
    for (double v : values)
      EXPECT_TRUE(std::isfinite(v)) << name;
}

TEST_F(TrainingProgram, ANonFiniteLossFromTheDataStopsTheRun) {
  writeFile(dir_ / "huge.csv", csvWithOverflowingRecords());
  RunResult r = runProgram(kClassifier1,
                           {"--data", dir_ / "huge.csv", "--steps", "5",
                            "--sigma", "1", "--save", dir_ / "ck", "--quiet"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find(": the loss is not finite"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stopped at the update, so nothing of this step was "
                       "saved"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ck/latest"));
}

TEST_F(TrainingProgram, SkipNonFiniteStepsTakesNoUpdateButCountsTheStep) {
  const std::string ck = dir_ / "ck";
  RunResult r = runProgram(kClassifier2,
                           {"--data", csv_, "--steps", "4", "--sigma", "1",
                            "--save", ck, "--save-every", "1", "--metrics",
                            dir_ / "m.jsonl", "--skip-nonfinite-steps"},
                           {"DPC_FIXTURE_NAN_GRADIENT_STEP=3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: step 3: the clipped gradient sum is not "
                       "finite; skipped (no update, counted for epsilon)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("skipped steps     1 "), std::string::npos) << r.out;
  auto lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i].at("skipped").boolean(), i == 2) << "step " << i + 1;
  // Only the gradient was poisoned: the loss is reported.
  EXPECT_TRUE(lines[2].at("loss").isNumber());
  // Step 3 changed neither the parameters nor the optimizer state ...
  const std::string two = ck + "/step-00000002", three = ck + "/step-00000003";
  for (const char *shard : {"/rank-00000-of-00002.safetensors",
                            "/rank-00001-of-00002.safetensors"}) {
    EXPECT_EQ(readTensors(two + shard), readTensors(three + shard)) << shard;
    EXPECT_NE(readTensors(three + shard),
              readTensors(ck + "/step-00000004" + shard))
        << shard;
  }
  // ... but the accountant composed it: its batch was sampled.
  JsonValue state = JsonValue::parse(readFile(three + "/state.json"));
  EXPECT_EQ(
      state.at("accountant").at("segments").array()[0].at("steps").integer(),
      3);
  EXPECT_GT(lines[2].at("epsilon").number(), lines[1].at("epsilon").number());
}

TEST_F(TrainingProgram, SkippedStepsFromTheDataKeepTheModelFinite) {
  writeFile(dir_ / "huge.csv", csvWithOverflowingRecords());
  RunResult r =
      train(kClassifier1, {"--data", dir_ / "huge.csv", "--steps", "12",
                           "--sigma", "1", "--save", dir_ / "ck", "--metrics",
                           dir_ / "m.jsonl", "--skip-nonfinite-steps"});
  ASSERT_EQ(r.status, 0) << r.err;
  int skipped = 0;
  for (const JsonValue &m : readJsonLines(dir_ / "m.jsonl"))
    if (m.at("skipped").boolean()) {
      ++skipped;
      EXPECT_TRUE(m.at("loss").isNull());
    }
  EXPECT_GT(skipped, 0);
  EXPECT_LT(skipped, 12);
  for (const auto &[name, values] : readParams(dir_ / "ck"))
    for (double v : values)
      EXPECT_TRUE(std::isfinite(v)) << name;
}

TEST_F(TrainingProgram, NonFiniteParametersAreNeverSavedNorResumed) {
  const std::string ck = dir_ / "ck";
  // An update that leaves a NaN weight (the fixture's hook): the save of
  // that step refuses.
  RunResult r = runProgram(kClassifier1,
                           {"--data", csv_, "--steps", "4", "--sigma", "1",
                            "--save", ck, "--save-every", "1", "--quiet"},
                           {"DPC_FIXTURE_NAN_WEIGHT_STEP=2"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("not saving the checkpoint of step 2: element 0 of "
                       "the parameters of unit 'unit.w' is not finite"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000001\n");

  // A checkpoint whose shard holds a NaN (checksums and all) is refused.
  const std::string path = resolveCheckpoint(ck);
  const std::string shard = "rank-00000-of-00001.safetensors";
  std::string bytes = readFile(path + "/" + shard);
  const uint64_t headerSize = static_cast<unsigned char>(bytes[0]) |
                              static_cast<unsigned char>(bytes[1]) << 8;
  const float nan = std::nanf("");
  std::memcpy(&bytes[8 + headerSize], &nan, 4); // the first tensor's first
  rewriteCheckpointFile(path, shard, bytes);
  RunResult resumed = runProgram(
      kClassifier1, {"--data", csv_, "--resume", ck, "--steps", "3"});
  EXPECT_EQ(resumed.status, 2) << resumed.err;
  EXPECT_NE(resumed.err.find("is not usable: element 0 of 'unit.w.master' in " +
                             shard + " is not finite"),
            std::string::npos)
      << resumed.err;
}

TEST_F(TrainingProgram, HelpDocumentsTheCheckpointAndNonFiniteOptions) {
  RunResult r = runProgram(kClassifier1, {"--help"});
  EXPECT_EQ(r.status, 0);
  for (const char *flag :
       {"--keep-last K", "--skip-nonfinite-steps", "--noise-key FILE"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}
