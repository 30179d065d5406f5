//===- ProgramTest.cpp - The describe_* functions -------------------------===//

#include "dprt/program.h"

#include <gtest/gtest.h>

#include <functional>

using namespace dprt;

namespace {

/// The description of examples/mlp.mlir for 2 ranks, as dpc emits it.
void describeMlp(ProgramSpec *spec) {
  describe_program(spec, "mlp", "cpu", 2, 170496, 0, DType::F32, 32, 1, 8704,
                   8960, 69120, 10, 170496);
  describe_recipe(spec, ClipMode::Flat, 1.0, 0.01, true, 0.0, 3.0, 1e-5,
                  NoiseGeneratorKind::Philox, SamplingKind::Poisson, 64, 0.0, 0,
                  300, 0);
  describe_optimizer(spec, OptimizerKind::Momentum, 0.5, 0.9, false, 0, 0, 0,
                     0);
  describe_input(spec, "input0", InputRole::Features, 256, 64, 0, 0);
  describe_input(spec, "input1", InputRole::Label, 8448, 0, 0, 0);
  describe_unit(spec, "unit.fc1", 8320, 4160, 9216, 9216, 25856, 42496, -1);
  describe_unit(spec, "unit.ln", 256, 128, 59136, 59136, 59648, 60160, -1);
  describe_unit(spec, "unit.fc2", 1290, 704, 60672, 60672, 63488, 66304, -1);
  describe_param(spec, "fc1.w", 0, 0, 0, true, 128, 64, 0, 0, "", false, -1,
                 -1);
  describe_param(spec, "fc1.b", 0, 8192, 8192, true, 128, 0, 0, 0, "", false,
                 -1, -1);
  describe_param(spec, "ln.g", 1, 0, 8320, true, 128, 0, 0, 0, "", false, -1,
                 -1);
  describe_param(spec, "ln.b", 1, 128, 8448, true, 128, 0, 0, 0, "", false, -1,
                 -1);
  describe_param(spec, "fc2.w", 2, 0, 8576, true, 10, 128, 0, 0, "", false, -1,
                 -1);
  describe_param(spec, "fc2.b", 2, 1280, 9856, true, 10, 0, 0, 0, "", false, -1,
                 -1);
}

/// The message of the runtime_error `call` throws, or "" if it does not.
std::string errorOf(const std::function<void()> &call) {
  try {
    call();
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(Program, DescribesTheMlpExample) {
  ProgramSpec spec;
  describeMlp(&spec);
  EXPECT_EQ(spec.model, "mlp");
  EXPECT_EQ(spec.backend, "cpu");
  EXPECT_EQ(spec.ranks, 2);
  EXPECT_EQ(spec.physicalBatch, 32);
  EXPECT_EQ(spec.classes, 10);
  ASSERT_EQ(spec.inputs.size(), 2u);
  EXPECT_EQ(spec.inputs[0].role, InputRole::Features);
  EXPECT_EQ(spec.inputs[0].dims, std::vector<int64_t>{64});
  EXPECT_TRUE(spec.inputs[1].dims.empty());
  ASSERT_EQ(spec.units.size(), 3u);
  EXPECT_EQ(spec.units[2].shardElems, 704);
  EXPECT_EQ(spec.units[0].optState2, -1);
  ASSERT_EQ(spec.params.size(), 6u);
  EXPECT_EQ(spec.params[4].shape, (std::vector<int64_t>{10, 128}));
  EXPECT_EQ(spec.params[5].globalIndex, 9856);
  EXPECT_TRUE(spec.recipe.targetEpsilon);
  EXPECT_EQ(spec.recipe.expectedBatch, 64);
  EXPECT_EQ(spec.recipe.optimizer, OptimizerKind::Momentum);
  EXPECT_EQ(spec.recipe.momentum, 0.9);
}

TEST(Program, DescribingAgainStartsFromScratch) {
  ProgramSpec spec;
  describeMlp(&spec);
  describeMlp(&spec);
  EXPECT_EQ(spec.units.size(), 3u);
  EXPECT_EQ(spec.params.size(), 6u);
}

TEST(Program, RejectsBuffersOutsideTheArena) {
  ProgramSpec spec;
  describeMlp(&spec);
  std::string error = errorOf([&] {
    describe_input(&spec, "extra", InputRole::Target, 170240, 8, 0, 0);
  });
  EXPECT_NE(error.find("describe_input: program 'mlp': input 'extra' at "
                       "offset 170240 with 1024 bytes lies outside the arena "
                       "of 170496 bytes"),
            std::string::npos)
      << error;
  error =
      errorOf([&] { describe_unit(&spec, "u", 10, 5, 200000, 0, 0, 256, -1); });
  EXPECT_NE(error.find("unit 'u' parameter shard"), std::string::npos) << error;
  error = errorOf([&] {
    describe_program(&spec, "m", "cpu", 1, 1024, 1000, DType::F32, 1, 1, -1, -1,
                     -1, 0, 0);
  });
  EXPECT_NE(error.find("the step state"), std::string::npos) << error;
}

// The report's prediction is what a rank allocates: the arena, whatever
// the plan's peak in use below it, and on CUDA the cuBLASLt workspace.
TEST(Program, PredictsTheArenaAndTheBackendsWorkspace) {
  ProgramSpec cpu, cuda;
  describe_program(&cpu, "m", "cpu", 1, 65536, 0, DType::F32, 1, 1, -1, -1, -1,
                   0, 60000);
  EXPECT_EQ(cpu.planPeakInUseBytes, 60000);
  EXPECT_EQ(cpu.predictedPeakBytes, 65536);
  describe_program(&cuda, "m", "cuda", 1, 65536, 0, DType::F32, 1, 1, -1, -1,
                   -1, 0, 60000);
  EXPECT_EQ(cuda.predictedPeakBytes, 65536 + kCudaGemmWorkspaceBytes);
  ProgramSpec spec;
  std::string error = errorOf([&] {
    describe_program(&spec, "m", "cpu", 1, 65536, 0, DType::F32, 1, 1, -1, -1,
                     -1, 0, 65537);
  });
  EXPECT_NE(error.find("the plan's peak in use must be in [0, the arena], got "
                       "65537"),
            std::string::npos)
      << error;
}

TEST(Program, RejectsMisalignedBuffers) {
  ProgramSpec spec;
  describeMlp(&spec);
  std::string error = errorOf(
      [&] { describe_unit(&spec, "u", 10, 5, 300, 256, 512, 768, -1); });
  EXPECT_NE(error.find("not aligned to 256 bytes"), std::string::npos) << error;
}

TEST(Program, RejectsParametersOutsideTheirUnit) {
  ProgramSpec spec;
  describeMlp(&spec);
  std::string error = errorOf([&] {
    describe_param(&spec, "fc2.extra", 2, 1200, 0, true, 100, 0, 0, 0, "",
                   false, -1, -1);
  });
  EXPECT_NE(error.find("parameter 'fc2.extra' at elements [1200, 1300) lies "
                       "outside unit 'unit.fc2' of 1290 elements"),
            std::string::npos)
      << error;
  error = errorOf([&] {
    describe_param(&spec, "p", 7, 0, 0, true, 1, 0, 0, 0, "", false, -1, -1);
  });
  EXPECT_NE(error.find("names unit 7 but 3 units were described"),
            std::string::npos)
      << error;
  error = errorOf([&] {
    describe_param(&spec, "fc1.w", 0, 0, 0, true, 1, 0, 0, 0, "", false, -1,
                   -1);
  });
  EXPECT_NE(error.find("described twice"), std::string::npos) << error;
}

TEST(Program, RejectsUnitsTooLargeForTheirShards) {
  ProgramSpec spec;
  describeMlp(&spec);
  std::string error = errorOf(
      [&] { describe_unit(&spec, "u", 11, 5, 256, 256, 512, 768, -1); });
  EXPECT_NE(error.find("unit 'u' has 11 elements but 2 shards of 5 hold only "
                       "10"),
            std::string::npos)
      << error;
}

TEST(Program, RejectsInputsOfTheWrongShape) {
  ProgramSpec spec;
  describe_program(&spec, "lm", "cpu", 1, 1 << 20, 0, DType::F32, 4, 16, -1, -1,
                   -1, 0, 0);
  std::string error = errorOf(
      [&] { describe_input(&spec, "tok", InputRole::Tokens, 256, 15, 0, 0); });
  EXPECT_NE(error.find("must have one dimension of 16 tokens"),
            std::string::npos)
      << error;
  error = errorOf(
      [&] { describe_input(&spec, "label", InputRole::Label, 256, 3, 0, 0); });
  EXPECT_NE(error.find("no dimensions"), std::string::npos) << error;
  describe_input(&spec, "tok", InputRole::Tokens, 256, 16, 0, 0);
  error = errorOf(
      [&] { describe_input(&spec, "tok2", InputRole::Tokens, 512, 16, 0, 0); });
  EXPECT_NE(error.find("has role tokens like input 'tok'"), std::string::npos)
      << error;
}

TEST(Program, RejectsCallsBeforeDescribeProgram) {
  ProgramSpec spec;
  std::string error =
      errorOf([&] { describe_unit(&spec, "u", 1, 1, 0, 0, 0, -1, -1); });
  EXPECT_NE(error.find("describe_program must be called first"),
            std::string::npos)
      << error;
}

TEST(Program, RejectsImpossibleRecipes) {
  ProgramSpec spec;
  describeMlp(&spec);
  auto recipe = [&](double maxNorm, double delta, int64_t expected,
                    double rate) {
    return errorOf([&] {
      describe_recipe(&spec, ClipMode::Flat, maxNorm, 0.01, false, 1.0, 0,
                      delta, NoiseGeneratorKind::Philox, SamplingKind::Poisson,
                      expected, rate, 0, 10, 0);
    });
  };
  EXPECT_NE(recipe(0, 1e-5, 8, 0).find("clipping bound"), std::string::npos);
  EXPECT_NE(recipe(1, 1, 8, 0).find("delta must be in (0, 1)"),
            std::string::npos);
  EXPECT_NE(recipe(1, 1e-5, 0, 0).find("expected batch"), std::string::npos);
  EXPECT_EQ(recipe(1, 1e-5, 0, 0.5), "");
}

TEST(Program, RecordsHuggingFaceSources) {
  ProgramSpec spec;
  describeMlp(&spec);
  EXPECT_FALSE(spec.params[0].hf.present());
  EXPECT_EQ(spec.lossReduction, Reduction::Mean);
  describe_loss(&spec, Reduction::Sum);
  EXPECT_EQ(spec.lossReduction, Reduction::Sum);
  describe_unit(&spec, "unit.qkv", 3 * 64 + 24, 108, 67328, 67328, 67840, 68352,
                -1);
  describe_param(&spec, "wq", 3, 0, 10000, true, 8, 8, 0, 0,
                 "h.0.attn.c_attn.weight", true, 0, 8);
  describe_param(&spec, "wk.b", 3, 192, 10192, true, 8, 0, 0, 0,
                 "h.0.attn.c_attn.bias", false, 8, 16);
  const HfSource &wq = spec.params[6].hf;
  EXPECT_EQ(wq.name, "h.0.attn.c_attn.weight");
  EXPECT_TRUE(wq.transposed);
  EXPECT_TRUE(wq.hasRows());
  EXPECT_EQ(wq.rowBegin, 0);
  EXPECT_EQ(wq.rowEnd, 8);
  EXPECT_FALSE(spec.params[7].hf.transposed);
  EXPECT_EQ(spec.params[7].hf.rowBegin, 8);
}

TEST(Program, RejectsInconsistentHuggingFaceSources) {
  ProgramSpec spec;
  describeMlp(&spec);
  describe_unit(&spec, "u", 64, 32, 67328, 67328, 67840, 68352, -1);
  std::string error = errorOf([&] {
    describe_param(&spec, "a", 3, 0, 0, true, 8, 8, 0, 0, "", true, -1, -1);
  });
  EXPECT_NE(error.find("parameter 'a' has a transposition or rows of a "
                       "Hugging Face tensor but no tensor name"),
            std::string::npos)
      << error;
  error = errorOf([&] {
    describe_param(&spec, "b", 3, 0, 0, true, 64, 0, 0, 0, "t", true, -1, -1);
  });
  EXPECT_NE(error.find("stored transposed but has 1 dimensions"),
            std::string::npos)
      << error;
  error = errorOf([&] {
    describe_param(&spec, "c", 3, 0, 0, true, 8, 8, 0, 0, "t", false, 8, 24);
  });
  EXPECT_NE(error.find("parameter 'c' is rows [8, 24) of 't', which is not "
                       "its 8 rows"),
            std::string::npos)
      << error;
  error = errorOf([&] { describe_loss(&spec, static_cast<Reduction>(7)); });
  EXPECT_NE(error.find("unknown loss reduction 7"), std::string::npos) << error;
}

/// describeMlp plus a unit with a weight and its LoRA adapter of rank 2.
void describeAdapted(ProgramSpec *spec) {
  describeMlp(spec);
  describe_unit(spec, "unit.q", 60, 30, 67328, 67328, 67840, 68352, -1);
  describe_param(spec, "wq", 3, 0, 10000, false, 8, 4, 0, 0,
                 "model.layers.0.self_attn.q_proj.weight", false, -1, -1);
  describe_param(spec, "wq.lora_A", 3, 32, 10032, true, 2, 4, 0, 0, "", false,
                 -1, -1);
  describe_param(spec, "wq.lora_B", 3, 40, 10040, true, 8, 2, 0, 0, "", false,
                 -1, -1);
  describe_param(spec, "wq.lora_scale", 3, 56, 10056, false, 2, 2, 0, 0, "",
                 false, -1, -1);
}

TEST(Program, RecordsLoRAAdapters) {
  ProgramSpec spec;
  describeAdapted(&spec);
  EXPECT_FALSE(spec.lora.present());
  describe_lora(&spec, 2, 3.0, "q_proj,v_proj");
  ASSERT_TRUE(spec.lora.present());
  EXPECT_EQ(spec.lora.rank, 2);
  EXPECT_EQ(spec.lora.alpha, 3.0);
  EXPECT_EQ(spec.lora.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  const std::string peft = "base_model.model.model.layers.0.self_attn.q_proj.";
  describe_adapter(&spec, "wq.lora_A", "wq", "A",
                   (peft + "lora_A.weight").c_str());
  describe_adapter(&spec, "wq.lora_B", "wq", "B",
                   (peft + "lora_B.weight").c_str());
  describe_adapter(&spec, "wq.lora_scale", "wq", "scale", "");
  EXPECT_EQ(spec.params[6].lora.role, LoRARole::None);
  EXPECT_EQ(spec.params[7].lora.role, LoRARole::A);
  EXPECT_EQ(spec.params[7].lora.base, "wq");
  EXPECT_EQ(spec.params[7].lora.peftName, peft + "lora_A.weight");
  EXPECT_EQ(spec.params[8].lora.role, LoRARole::B);
  EXPECT_EQ(spec.params[9].lora.role, LoRARole::Scale);
  EXPECT_EQ(spec.params[9].lora.peftName, "");
}

TEST(Program, RejectsInconsistentLoRAAdapters) {
  ProgramSpec spec;
  describeAdapted(&spec);
  std::string error =
      errorOf([&] { describe_adapter(&spec, "wq.lora_A", "wq", "A", "x"); });
  EXPECT_NE(error.find("an adapter is described before describe_lora"),
            std::string::npos)
      << error;
  error = errorOf([&] { describe_lora(&spec, 0, 3.0, "q_proj"); });
  EXPECT_NE(error.find("must be positive"), std::string::npos) << error;
  describe_lora(&spec, 2, 3.0, "q_proj");
  // lora_A is r x in = 2 x 4; as B it would be out x r = 8 x 2.
  error =
      errorOf([&] { describe_adapter(&spec, "wq.lora_A", "wq", "B", "x"); });
  EXPECT_NE(error.find("adapter 'wq.lora_A' (B) does not have the shape"),
            std::string::npos)
      << error;
  error = errorOf(
      [&] { describe_adapter(&spec, "wq.lora_scale", "wq", "scale", "x"); });
  EXPECT_NE(error.find("needs a peft name if and only if it is A or B"),
            std::string::npos)
      << error;
  error = errorOf(
      [&] { describe_adapter(&spec, "wq.lora_A", "nosuch", "A", "x"); });
  EXPECT_NE(error.find("is not a described parameter"), std::string::npos)
      << error;
  error = errorOf([&] { describe_adapter(&spec, "wq.lora_A", "wq", "C", ""); });
  EXPECT_NE(error.find("adapter role 'C' is not A, B or scale"),
            std::string::npos)
      << error;
}

namespace {

/// One rank, SGD, f32: a unit whose update forms its sums from rows
/// (describe_unit's sumsFromRows) next to an ordinary one.
void describeSumsFromRows(ProgramSpec *spec, bool nameB) {
  describe_program(spec, "m", "cpu", 1, 65536, 0, DType::F32, 4, 1, 8704, 8960,
                   -1, 0, 65536);
  describe_unit(spec, "unit.a", 64, 64, 9216, 9216, -1, -1, -1, true);
  describe_unit(spec, "unit.c", 64, 64, 9472, 9472, 9728, -1, -1);
  describe_param(spec, "a", 0, 0, 0, true, 32, 0, 0, 0, "", false, -1, -1);
  describe_update_from_rows(spec, "a");
  describe_param(spec, "b", 0, 32, 32, true, 32, 0, 0, 0, "", false, -1, -1);
  if (nameB)
    describe_update_from_rows(spec, "b");
  describe_param(spec, "c", 1, 0, 64, true, 64, 0, 0, 0, "", false, -1, -1);
}

} // namespace

TEST(Program, UnitsWithoutAGradientShard) {
  ProgramSpec spec;
  describeSumsFromRows(&spec, true);
  EXPECT_TRUE(spec.units[0].sumsFromRows);
  EXPECT_FALSE(spec.units[0].frozen()) << "trainable without a gradient";
  EXPECT_TRUE(spec.params[0].sumFromRows && spec.params[1].sumFromRows);
  EXPECT_FALSE(spec.params[2].sumFromRows);
  EXPECT_EQ(errorOf([&] { requireSumsFromRows(spec); }), "");

  // A trainable parameter of that unit whose sum nobody forms.
  ProgramSpec missing;
  describeSumsFromRows(&missing, false);
  std::string error = errorOf([&] { requireSumsFromRows(missing); });
  EXPECT_NE(error.find("parameter 'b' of unit 'unit.a', which has no gradient "
                       "shard, is not named"),
            std::string::npos)
      << error;

  // sumsFromRows with a gradient shard, and describe_update_from_rows for a
  // parameter that is not the last described.
  ProgramSpec other;
  describe_program(&other, "m", "cpu", 1, 65536, 0, DType::F32, 4, 1, 8704,
                   8960, -1, 0, 65536);
  error = errorOf([&] {
    describe_unit(&other, "u", 64, 64, 9216, 9216, 9472, -1, -1, true);
  });
  EXPECT_NE(error.find("forms its sums from rows but has a gradient shard"),
            std::string::npos)
      << error;
  describe_unit(&other, "u", 64, 64, 9216, 9216, 9472, -1, -1);
  // bf16 on one shard: a unit the layers read as its master cast keeps no
  // compute-type copy either (the 1.1B benchmark's blocks).
  ProgramSpec bf16;
  describe_program(&bf16, "m", "cpu", 1, 65536, 0, DType::BF16, 4, 1, 8704,
                   8960, -1, 0, 65536);
  EXPECT_EQ(errorOf([&] {
              describe_unit(&bf16, "u", 64, 64, -1, 9216, -1, 9472, 9728, true);
            }),
            "");
  EXPECT_FALSE(bf16.units[0].frozen());
  describe_param(&other, "p", 0, 0, 0, true, 32, 0, 0, 0, "", false, -1, -1);
  describe_param(&other, "q", 0, 32, 32, true, 32, 0, 0, 0, "", false, -1, -1);
  error = errorOf([&] { describe_update_from_rows(&other, "p"); });
  EXPECT_NE(error.find("'p' is not the last one described"), std::string::npos)
      << error;
}
