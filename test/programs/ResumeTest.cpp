//===- ResumeTest.cpp - A resumed run is the uninterrupted run ------------===//
//
// The compiled tiny LM (f32, AdamW, noise on) trained for n steps in one go,
// and trained for k steps, saved, and resumed from the checkpoint up to n
// steps, write byte-identical params.safetensors and optimizer.safetensors:
// the sampler and the noise are functions of (key, step, index), and
// everything else a step depends on is in the checkpoint.
//
//===----------------------------------------------------------------------===//

#include "ProcessHelpers.h"
#include "ProgramHarness.h"

#include <gtest/gtest.h>

using namespace dpc::programs;

namespace {

constexpr int64_t kRecords = 48;

class Resume : public ::testing::TestWithParam<int> {};

TEST_P(Resume, IsBitIdenticalToAnUninterruptedRun) {
  const ProgramId id{"tinylm-f32", "flat_adamw", GetParam()};
  const uint64_t seed = testSeed();
  const int k = 2, n = 5;
  dpctest::TempDir dir;
  const std::string data = dir / "data.txt";
  writeRecords(makeRecords(id, seed, kRecords), data);
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
  for (const char *file : {"params.safetensors", "optimizer.safetensors"}) {
    const std::string x = dpctest::readFile(a + "/" + file);
    const std::string y = dpctest::readFile(b + "/" + file);
    EXPECT_EQ(x.size(), y.size()) << file;
    EXPECT_TRUE(x == y) << file << " differs after resuming at step " << k;
  }
  // The checkpoints hold what the steps changed: AdamW state and moved
  // parameters (a resume that restored nothing would not be identical, but
  // neither would it be if both files were empty).
  const Tensors optimizer = readSafetensors(a + "/optimizer.safetensors");
  EXPECT_FALSE(optimizer.empty());
}

INSTANTIATE_TEST_SUITE_P(ProgramResume, Resume, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return "TinylmF32FlatAdamwOn" +
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
  for (const char *file : {"params.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(dpctest::readFile(a + "/" + file) ==
                dpctest::readFile(b + "/" + file))
        << file << " differs after resuming at step 2";
}

} // namespace
