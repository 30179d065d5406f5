//===- ResumeTest.cpp - A resumed run is the uninterrupted run ------------===//
//
// The compiled tiny LM (f32, AdamW, noise on) trained for n steps in one go,
// and trained for k steps, saved, and resumed from the checkpoint up to n
// steps, writes byte-identical shard files and manifests: the sampler and
// the noise are functions of (key, step, index), and everything else a step
// depends on is in the checkpoint. So does the program whose update forms
// the clipped sums from the per-sample gradients (shuffled batches, dpc
// --sum-in-update), whose block units keep no gradient shard.
//
// Resharding: a checkpoint of 2 ranks loaded by the program compiled for 1
// or 3 gives back every state of every unit (gaps between parameters
// included) bit for bit, and the run goes on like the uninterrupted one up
// to the rounding of another reduction order (ShardingTest's tolerance).
//
//===----------------------------------------------------------------------===//

#include "ProcessHelpers.h"
#include "ProgramHarness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

using namespace dpc::programs;

namespace {

constexpr int64_t kRecords = 48;

class Resume : public ::testing::TestWithParam<int> {};

/// Trains `id` n steps in one go and k steps then resumed to n, over
/// `records` records, and expects the same checkpoint files.
void expectResumeIsUninterrupted(const ProgramId &id, int64_t records) {
  const uint64_t seed = testSeed();
  const int k = 2, n = 5;
  dpctest::TempDir dir;
  const std::string data = dir / "data.txt";
  writeRecords(makeRecords(id, seed, records), data);
  const std::vector<std::string> common = {
      "--data", data, "--seed", std::to_string(seed), "--sigma", "0.8"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };

  runProgram(id, with({"--steps", std::to_string(n), "--save",
                       dir / "uninterrupted"}));
  runProgram(id,
             with({"--steps", std::to_string(k), "--save", dir / "resumed"}));
  runProgram(id, with({"--steps", std::to_string(n), "--resume",
                       dir / "resumed", "--save", dir / "resumed"}));

  const std::string a = latestCheckpoint(dir / "uninterrupted");
  const std::string b = latestCheckpoint(dir / "resumed");
  ASSERT_EQ(a.substr(a.rfind('/')), b.substr(b.rfind('/')))
      << "both runs must end at step " << n;
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(a)) {
    const std::string file = entry.path().filename().string();
    if (file == "state.json")
      continue;
    ++files;
    const std::string x = dpctest::readFile(a + "/" + file);
    const std::string y = dpctest::readFile(b + "/" + file);
    EXPECT_EQ(x.size(), y.size()) << file;
    EXPECT_TRUE(x == y) << file << " differs after resuming at step " << k;
  }
  EXPECT_EQ(files, id.ranks + 1) << "a shard file per rank and a manifest";
  // The checkpoints hold what the steps changed: AdamW state and moved
  // parameters (a resume that restored nothing would not be identical, but
  // neither would it be if the files were empty).
  const Tensors states = readUnitStates(a);
  EXPECT_TRUE(states.count("unit.b0.adam_v")) << "the units of models/tinylm";
}

TEST_P(Resume, IsBitIdenticalToAnUninterruptedRun) {
  expectResumeIsUninterrupted({"tinylm-f32", "flat_adamw", GetParam()},
                              kRecords);
}

// 10 records: the resumed run starts in the first epoch's padded last
// batch.
TEST(ResumeSumInUpdate, IsBitIdenticalToAnUninterruptedRun) {
  ProgramId id{"tinylm-f32", "shuffle_adamw", 1};
  id.normMethod = "materialized";
  expectResumeIsUninterrupted(id, 10);
}

// A bf16 copy of the weights kept by the update (dpc --compute-copy=on):
// the resumed run must cast the restored masters into it, or its forward
// would read the initial weights.
TEST(ResumeComputeCopy, IsBitIdenticalToAnUninterruptedRun) {
  ProgramId id{"tinylm-bf16", "flat_adamw", 1};
  id.computeCopy = "on";
  expectResumeIsUninterrupted(id, kRecords);
}

INSTANTIATE_TEST_SUITE_P(ProgramResume, Resume, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return "TinylmF32FlatAdamwOn" +
                                  std::to_string(info.param) + "Ranks";
                         });

class Reshard : public ::testing::TestWithParam<int> {};

TEST_P(Reshard, FromTwoRanksIsExactAndContinuesTheRun) {
  const ProgramId two{"tinylm-f32", "flat_adamw", 2};
  const ProgramId other{"tinylm-f32", "flat_adamw", GetParam()};
  const uint64_t seed = testSeed();
  const int k = 2, n = 5;
  dpctest::TempDir dir;
  const std::string data = dir / "data.txt";
  writeRecords(makeRecords(two, seed, kRecords), data);
  const std::vector<std::string> common = {
      "--data", data, "--seed", std::to_string(seed), "--sigma", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  runProgram(two, with({"--steps", std::to_string(n), "--save",
                        dir / "uninterrupted"}));
  runProgram(two, with({"--steps", std::to_string(k), "--save", dir / "two"}));
  // Loaded at the other count and saved again at once.
  runProgram(other, with({"--steps", std::to_string(k), "--resume", dir / "two",
                          "--save", dir / "again"}));
  const Tensors saved = readUnitStates(latestCheckpoint(dir / "two"));
  const Tensors again = readUnitStates(latestCheckpoint(dir / "again"));
  ASSERT_EQ(saved.size(), again.size());
  for (const auto &[name, values] : saved) {
    ASSERT_TRUE(again.count(name)) << name;
    // Bit for bit (memcmp: -0 and 0 differ).
    ASSERT_EQ(values.size(), again.at(name).size()) << name;
    EXPECT_EQ(0, std::memcmp(values.data(), again.at(name).data(),
                             values.size() * sizeof(double)))
        << name << " changed when loaded at " << GetParam() << " ranks";
  }

  runProgram(other, with({"--steps", std::to_string(n), "--resume", dir / "two",
                          "--save", dir / "resumed"}));
  const Tensors expected =
      readCheckpointParams(latestCheckpoint(dir / "uninterrupted"));
  const Tensors resumed =
      readCheckpointParams(latestCheckpoint(dir / "resumed"));
  ASSERT_EQ(resumed.size(), expected.size());
  double worst = 0;
  for (const auto &[name, values] : expected) {
    const double e = relativeError(resumed.at(name), values);
    EXPECT_LE(e, 1e-6) << name;
    worst = std::max(worst, e);
  }
  std::printf("[worst error] saved at 2 ranks after step %d, resumed at %d "
              "to step %d: %.2e against the uninterrupted run\n",
              k, GetParam(), n, worst);
}

INSTANTIATE_TEST_SUITE_P(ProgramResume, Reshard, ::testing::Values(1, 3),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return "TinylmF32FlatAdamwTo" +
                                  std::to_string(info.param) + "Ranks";
                         });

// DP off: the checkpoint has no accountant history and no noise to restore;
// the resumed run still samples the same batches and ends bit-identical.
TEST(ResumeDpOff, IsBitIdenticalToAnUninterruptedRun) {
  const ProgramId id{"mlp-f32", "nodp_momentum", 1};
  const uint64_t seed = testSeed();
  dpctest::TempDir dir;
  const std::string data = dir / "data.csv";
  writeRecords(makeRecords(id, seed, kRecords), data);
  const std::vector<std::string> common = {"--data", data, "--seed",
                                           std::to_string(seed)};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  runProgram(id, with({"--steps", "4", "--save", dir / "uninterrupted"}));
  runProgram(id, with({"--steps", "2", "--save", dir / "resumed"}));
  runProgram(id, with({"--steps", "4", "--resume", dir / "resumed", "--save",
                       dir / "resumed"}));
  const std::string a = latestCheckpoint(dir / "uninterrupted");
  const std::string b = latestCheckpoint(dir / "resumed");
  ASSERT_EQ(a.substr(a.rfind('/')), b.substr(b.rfind('/')));
  for (const char *file : {"rank-00000-of-00001.safetensors", "manifest.json"})
    EXPECT_TRUE(dpctest::readFile(a + "/" + file) ==
                dpctest::readFile(b + "/" + file))
        << file << " differs after resuming at step 2";
}
} // namespace
