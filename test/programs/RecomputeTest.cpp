//===- RecomputeTest.cpp - Recomputed blocks train the same bits ----------===//
//
// A block recomputed before its backward (dp-recompute, dpc --recompute)
// runs the same CPU kernels in the same order on the same inputs as the
// forward did, so the program trains the same bits as without
// recomputation: three DP-SGD steps from one seed, noise on and a clipping
// bound (--clip 0.01) far below every per-sample gradient norm, so that
// every sample is clipped, compare every parameter element and every loss
// exactly. f64 and f32 transformers, flat and per-layer clipping, the tied
// head, FSDP on 2 and 3 ranks (where the recomputed forward reads the unit
// gathered again for the backward), LoRA adapters on 2 ranks (frozen base
// units gathered again) and a 2 x 2 hybrid grid with AdamW. The f64 reference
// checks the same programs in ProgramStepTest (WholeStep, *Recompute*).
// Rematerialized cheap layers (dp-rematerialize) likewise train the same
// bits as the program that keeps them, and so does a program that keeps
// each unit's forward all-gather for its backward. So does a program whose
// update forms the clipped sums of materialized per-sample gradients (dpc
// --sum-in-update, on shuffled batches of the physical batch) against one
// that adds them into the gradient: the update kernels form each element's
// sum as rows_weighted_sum does, over 10 records so that the third step is
// a padded batch of 2. So does a program whose micro-step writes its weight
// gradients (dpc --overwrite-gradients, on the same batches) against one
// that adds them into zeroed gradients, DP and DP off.
//
//===----------------------------------------------------------------------===//

#include "ProcessHelpers.h"
#include "ProgramHarness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace dpc::programs;

namespace {

constexpr int64_t kRecords = 48;
constexpr int kSteps = 3;

struct RecomputeCase {
  const char *model;
  const char *recipe;
  int ranks;
  const char *recompute;
};

class RecomputeBits : public ::testing::TestWithParam<RecomputeCase> {};

/// Trains `plain` and `other` for `steps` from one seed, every sample
/// clipped, and expects the same parameter bits and losses.
/// dp: the programs train privately and take --sigma and --clip (a DP-off
/// program refuses them).
void expectSameTraining(const ProgramId &plain, const ProgramId &other,
                        int64_t records = kRecords, int steps = kSteps,
                        bool dp = true) {
  const uint64_t seed = testSeed();
  dpctest::TempDir dir;
  const std::string data =
      dir / (plain.isLanguageModel() ? "data.txt" : "data.csv");
  writeRecords(makeRecords(plain, seed, records), data);
  auto train = [&](const ProgramId &id, const std::string &name) {
    std::vector<std::string> args = {"--data",    data,
                                     "--steps",   std::to_string(steps),
                                     "--seed",    std::to_string(seed),
                                     "--save",    dir / name,
                                     "--metrics", dir / (name + ".jsonl"),
                                     "--quiet"};
    if (dp)
      args.insert(args.end(), {"--sigma", "0.5", "--clip", "0.01"});
    runProgram(id, args);
    return readCheckpointParams(latestCheckpoint(dir / name));
  };
  const Tensors a = train(plain, "plain");
  const Tensors b = train(other, "other");
  expectSameBits(a, b, other.name() + " vs " + plain.name());
  const std::vector<double> lossA = metricLosses(dir / "plain.jsonl");
  const std::vector<double> lossB = metricLosses(dir / "other.jsonl");
  ASSERT_EQ(lossA.size(), size_t(steps));
  ASSERT_EQ(lossB.size(), lossA.size());
  for (size_t i = 0; i < lossA.size(); ++i)
    EXPECT_EQ(lossA[i], lossB[i]) << "step " << i + 1;
}

TEST_P(RecomputeBits, SameParametersAndLosses) {
  const RecomputeCase &c = GetParam();
  expectSameTraining({c.model, c.recipe, c.ranks},
                     {c.model, c.recipe, c.ranks, c.recompute});
}

// dp-rematerialize (on by default) against a program that keeps every
// normalization, activation and product from the forward: the same kernels
// on the same inputs, so the same bits. Flat clipping keeps the clones until
// the clip factor; per-layer clipping and FSDP (clones after the backward
// all-gather) order them differently.
struct RematerializeCase {
  const char *model;
  const char *recipe;
  int ranks;
};

class RematerializeBits : public ::testing::TestWithParam<RematerializeCase> {};

TEST_P(RematerializeBits, SameParametersAndLosses) {
  const RematerializeCase &c = GetParam();
  ProgramId kept{c.model, c.recipe, c.ranks};
  kept.rematerialize = false;
  expectSameTraining(kept, {c.model, c.recipe, c.ranks});
}

// The forward's all-gathers kept for the backward (`dpc
// --reshard-after-forward=off`, which auto picks where the arena does not
// grow) against gathering every unit again: the same shards gathered, so
// the same bits.
class ReshardBits : public ::testing::TestWithParam<RematerializeCase> {};

TEST_P(ReshardBits, SameParametersAndLosses) {
  const RematerializeCase &c = GetParam();
  ProgramId again{c.model, c.recipe, c.ranks}, kept{c.model, c.recipe, c.ranks};
  again.reshard = "on";
  kept.reshard = "off";
  expectSameTraining(again, kept);
}

struct SumInUpdateCase {
  const char *recipe;
  const char *normMethod;
};

class SumInUpdateBits : public ::testing::TestWithParam<SumInUpdateCase> {};

TEST_P(SumInUpdateBits, SameParametersAndLosses) {
  const SumInUpdateCase &c = GetParam();
  ProgramId inUpdate{"tinylm-f32", c.recipe, 1}, inStep = inUpdate;
  inUpdate.normMethod = inStep.normMethod = c.normMethod;
  inStep.sumInUpdate = false;
  // Padded like the update's program, which has no smaller micro-step (a
  // product over fewer rows may round differently).
  inStep.lastBatchSizes = "none";
  // The program must really form the sums in its update, or this compares
  // a program with itself.
  const std::string cpp = dpctest::readFile(programPath(inUpdate) + ".cpp");
  ASSERT_NE(cpp.find("_update_rows("), std::string::npos) << inUpdate.name();
  ASSERT_EQ(
      dpctest::readFile(programPath(inStep) + ".cpp").find("_update_rows("),
      std::string::npos);
  expectSameTraining(inStep, inUpdate, /*records=*/10, /*steps=*/4);
}

class OverwriteGradientsBits : public ::testing::TestWithParam<std::string> {};

TEST_P(OverwriteGradientsBits, SameParametersAndLosses) {
  ProgramId written{"tinylm-f32", GetParam(), 1}, added = written;
  added.overwriteGradients = false;
  // Both padded alike (the smaller micro-steps overwrite too, but a product
  // over fewer rows may round differently), neither summing in the update
  // (whose parameters have no gradient to write).
  written.lastBatchSizes = added.lastBatchSizes = "none";
  written.sumInUpdate = added.sumInUpdate = false;
  // The program must really write some gradient, or this compares a
  // program with itself.
  auto flags = [](const ProgramId &id) {
    const std::string cpp = dpctest::readFile(programPath(id) + ".cpp");
    int overwriting = 0, adding = 0;
    for (size_t at = cpp.find("linear_weight_grad("); at != std::string::npos;
         at = cpp.find("linear_weight_grad(", at + 1)) {
      const std::string call = cpp.substr(at, cpp.find(';', at) - at);
      overwriting += call.find(", false)") != std::string::npos;
      adding += call.find(", true)") != std::string::npos;
    }
    return std::pair{overwriting, adding};
  };
  EXPECT_GT(flags(written).first, 0) << written.name();
  EXPECT_EQ(flags(added).first, 0) << added.name();
  EXPECT_GT(flags(added).second, 0) << added.name();
  expectSameTraining(added, written, /*records=*/10, /*steps=*/4,
                     /*dp=*/GetParam() != "shuffle_nodp");
}

// A bf16 copy of the weights that the update writes as it writes the f32
// master (`dpc --compute-copy=on`, which auto picks on a GPU whose memory
// budget has room) against every unit cast from its master where layers read
// it: the copy holds the bits of that cast, so the two train the same bits
// and losses; a copy the update failed to write would leave the forward on
// the first step's weights.
struct ComputeCopyCase {
  const char *recipe;
  const char *normMethod;
  int64_t records;
};

class ComputeCopyBits : public ::testing::TestWithParam<ComputeCopyCase> {};

TEST_P(ComputeCopyBits, SameParametersAndLosses) {
  const ComputeCopyCase &c = GetParam();
  ProgramId kept{"tinylm-bf16", c.recipe, 1}, cast = kept;
  kept.normMethod = cast.normMethod = c.normMethod;
  kept.computeCopy = "on";
  cast.computeCopy = "off";
  // Otherwise this compares a program with itself.
  const std::string keptCpp = dpctest::readFile(programPath(kept) + ".cpp");
  const std::string castCpp = dpctest::readFile(programPath(cast) + ".cpp");
  EXPECT_EQ(keptCpp.find("gather_master("), std::string::npos);
  EXPECT_NE(castCpp.find("gather_master("), std::string::npos);
  expectSameTraining(cast, kept, c.records, /*steps=*/4);
}

INSTANTIATE_TEST_SUITE_P(
    ProgramComputeCopy, ComputeCopyBits,
    ::testing::Values(ComputeCopyCase{"flat_momentum", "", kRecords},
                      ComputeCopyCase{"shuffle_adamw", "materialized", 10}),
    [](const ::testing::TestParamInfo<ComputeCopyCase> &info) {
      return caseName("tinylm-bf16", info.param.recipe);
    });

INSTANTIATE_TEST_SUITE_P(ProgramOverwriteGradients, OverwriteGradientsBits,
                         ::testing::Values("shuffle_momentum", "shuffle_nodp"),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return caseName("tinylm-f32", info.param);
                         });

// AdamW with every linear weight materialized; Nesterov momentum with the
// cost model's methods (norm gains from rows, the others' sums in the
// gradient beside them).
INSTANTIATE_TEST_SUITE_P(
    ProgramSumInUpdate, SumInUpdateBits,
    ::testing::Values(SumInUpdateCase{"shuffle_adamw", "materialized"},
                      SumInUpdateCase{"shuffle_momentum", ""}),
    [](const ::testing::TestParamInfo<SumInUpdateCase> &info) {
      return caseName("tinylm-f32", info.param.recipe);
    });

INSTANTIATE_TEST_SUITE_P(
    ProgramReshard, ReshardBits,
    ::testing::Values(RematerializeCase{"tinylm-f32", "flat_sgd", 2},
                      RematerializeCase{"tinylm-f32", "per_layer_sgd", 2}),
    [](const ::testing::TestParamInfo<RematerializeCase> &info) {
      return caseName(info.param.model, info.param.recipe) + "R" +
             std::to_string(info.param.ranks);
    });

INSTANTIATE_TEST_SUITE_P(
    ProgramRematerialize, RematerializeBits,
    ::testing::Values(RematerializeCase{"tinylm-f64", "flat_sgd", 1},
                      RematerializeCase{"tinylm-f32", "per_layer_sgd", 1},
                      RematerializeCase{"tinylm-f32", "flat_sgd", 2}),
    [](const ::testing::TestParamInfo<RematerializeCase> &info) {
      return caseName(info.param.model, info.param.recipe) + "R" +
             std::to_string(info.param.ranks);
    });

INSTANTIATE_TEST_SUITE_P(
    ProgramRecompute, RecomputeBits,
    ::testing::Values(RecomputeCase{"tinylm-f64", "flat_sgd", 1, "all"},
                      RecomputeCase{"tinylm-f32", "flat_sgd", 1, "all"},
                      RecomputeCase{"tinylm-f64", "per_layer_sgd", 1, "all"},
                      RecomputeCase{"tinylm-f32", "per_layer_sgd", 1, "1"},
                      RecomputeCase{"tinylm-hf-f64", "flat_sgd", 1, "all"},
                      RecomputeCase{"tinylm-f32", "flat_sgd", 2, "all"},
                      RecomputeCase{"tinylm-f32", "flat_momentum", 3, "1"},
                      RecomputeCase{"tinylm-f32", "lora_momentum", 2, "all"},
                      RecomputeCase{"tinylm-f32", "hybrid_adamw", 4, "all"}),
    [](const ::testing::TestParamInfo<RecomputeCase> &info) {
      return caseName(info.param.model, info.param.recipe) + "R" +
             std::to_string(info.param.ranks) +
             (std::string(info.param.recompute) == "all"
                  ? "All"
                  : "Blocks" + std::string(info.param.recompute));
    });

} // namespace
