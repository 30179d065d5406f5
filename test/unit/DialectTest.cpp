//===- DialectTest.cpp - The dp dialect's C++ logic -----------------------===//

#include "DP/DPModel.h"
#include "DP/DPOps.h"
#include "DP/DPSizes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

using namespace mlir;
using namespace dpc::dp;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() { context.loadDialect<DPDialect>(); }

  OwningOpRef<ModuleOp> parse(StringRef text) {
    return parseSourceString<ModuleOp>(text, &context);
  }

  /// Prints an attribute and parses the text back.
  Attribute reparse(Attribute attr) {
    std::string text;
    llvm::raw_string_ostream os(text);
    attr.print(os);
    return parseAttribute(text, &context);
  }

  MLIRContext context;
};

constexpr const char *kModel = R"mlir(
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.param @n : tensor<8xf32>
  dp.param @w : tensor<4x8xf32> {init = #dp.uniform<0.5>}
  dp.param @w.b : tensor<4xf32>
  dp.param @ln.g : tensor<4xf32>
  dp.param @ln.b : tensor<4xf32>
  dp.forward(%t: tensor<?x3xi32>, %y: tensor<?x3xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%t) : tensor<?x3xi32> -> tensor<?x3x8xf32>
    %h = dp.rms_norm @n(%x) : tensor<?x3x8xf32>
    %o = dp.linear @w, @w.b(%h) : tensor<?x3x8xf32> -> tensor<?x3x4xf32>
    %z = dp.layer_norm @ln.g, @ln.b(%o) : tensor<?x3x4xf32>
    %l = dp.cross_entropy %z, %y : tensor<?x3x4xf32>, tensor<?x3xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
)mlir";

ParamOp findParam(ModuleOp module, StringRef name) {
  ParamOp found;
  module.walk([&](ParamOp param) {
    if (param.getSymName() == name)
      found = param;
  });
  return found;
}

TEST_F(DialectTest, FloatFieldsRoundTripExactly) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < 2000; ++i) {
    double value = std::ldexp(mantissa(rng), exponent(rng));
    double bound = std::fabs(value);
    Attribute attr = UniformInitAttr::get(&context, llvm::APFloat(bound));
    auto back = dyn_cast_or_null<UniformInitAttr>(reparse(attr));
    ASSERT_TRUE(back) << "did not parse back: " << bound;
    EXPECT_EQ(back.getBound().convertToDouble(), bound);
  }
}

TEST_F(DialectTest, IntegersReadAsFloatFields) {
  auto clip = dyn_cast_or_null<ClipAttr>(
      parseAttribute("#dp.clip<flat, max_norm = 3>", &context));
  ASSERT_TRUE(clip);
  EXPECT_EQ(clip.getMaxNorm().convertToDouble(), 3.0);
  auto sgd =
      dyn_cast_or_null<SGDAttr>(parseAttribute("#dp.sgd<lr = -2>", &context));
  EXPECT_FALSE(sgd) << "a negative learning rate must not verify";
}

TEST_F(DialectTest, DefaultsOfOptionalFields) {
  auto adamw = dyn_cast_or_null<AdamWAttr>(
      parseAttribute("#dp.adamw<lr = 0.001>", &context));
  ASSERT_TRUE(adamw);
  EXPECT_EQ(adamw.getBeta1().convertToDouble(), 0.9);
  EXPECT_EQ(adamw.getBeta2().convertToDouble(), 0.999);
  EXPECT_EQ(adamw.getEps().convertToDouble(), 1e-8);
  EXPECT_EQ(adamw.getWeightDecay().convertToDouble(), 0.0);
  auto clip = dyn_cast_or_null<ClipAttr>(
      parseAttribute("#dp.clip<automatic, max_norm = 1.0>", &context));
  ASSERT_TRUE(clip);
  EXPECT_EQ(clip.getGamma().convertToDouble(), 0.01);
  auto fsdp = dyn_cast_or_null<FSDPAttr>(parseAttribute("#dp.fsdp", &context));
  ASSERT_TRUE(fsdp);
  EXPECT_EQ(fsdp.getUnit(), ShardUnit::block);
  EXPECT_TRUE(fsdp.getReshardAfterForward());
  EXPECT_EQ(fsdp.getPrefetch(), 1);
}

TEST_F(DialectTest, CheckedConstructionReportsTheBrokenField) {
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto loc = UnknownLoc::get(&context);
  auto target = TargetAttr::getChecked([&] { return emitError(loc); }, &context,
                                       llvm::APFloat(2.0), llvm::APFloat(1.0),
                                       NoiseGenerator::fast);
  EXPECT_FALSE(target);
  EXPECT_EQ(message, "delta must lie in (0, 1), got 1");
  auto poisson =
      PoissonAttr::getChecked([&] { return emitError(loc); }, &context,
                              int64_t{0}, llvm::APFloat(0.25), int64_t{0});
  EXPECT_FALSE(poisson);
  EXPECT_EQ(message, "physical_batch must be >= 1, got 0");
}

TEST_F(DialectTest, NonFiniteFieldsAreRejectedByName) {
  // The parser can write infinities (1.0e400) but not NaN; getChecked can.
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  auto loc = UnknownLoc::get(&context);
  auto emit = [&] { return emitError(loc); };
  using llvm::APFloat;
  const APFloat nan = APFloat::getNaN(APFloat::IEEEdouble());
  const APFloat inf = APFloat::getInf(APFloat::IEEEdouble());
  const APFloat one(1.0), half(0.5), small(1e-5);
  struct Case {
    std::function<Attribute()> make;
    std::string expected;
  };
  const Case cases[] = {
      {[&] { return NormalInitAttr::getChecked(emit, &context, nan); },
       "standard deviation must be finite, got nan"},
      {[&] { return UniformInitAttr::getChecked(emit, &context, inf); },
       "bound must be finite, got inf"},
      {[&] {
         return ClipAttr::getChecked(emit, &context, ClipMode::flat, nan, one);
       },
       "max_norm must be finite, got nan"},
      {[&] {
         return ClipAttr::getChecked(emit, &context, ClipMode::automatic, one,
                                     nan);
       },
       "gamma must be finite, got nan"},
      {[&] {
         return NoiseAttr::getChecked(emit, &context, nan, small,
                                      NoiseGenerator::fast);
       },
       "sigma must be finite, got nan"},
      {[&] {
         return NoiseAttr::getChecked(emit, &context, one, nan,
                                      NoiseGenerator::fast);
       },
       "delta must be finite, got nan"},
      {[&] {
         return TargetAttr::getChecked(emit, &context, nan, small,
                                       NoiseGenerator::secure);
       },
       "epsilon must be finite, got nan"},
      {[&] {
         return PoissonAttr::getChecked(emit, &context, int64_t{0}, nan,
                                        int64_t{4});
       },
       "sampling rate must be finite, got nan"},
      {[&] { return SGDAttr::getChecked(emit, &context, nan, APFloat(0.0)); },
       "lr must be finite, got nan"},
      {[&] { return SGDAttr::getChecked(emit, &context, one, nan); },
       "weight_decay must be finite, got nan"},
      {[&] {
         return MomentumAttr::getChecked(emit, &context, one, nan, false,
                                         APFloat(0.0));
       },
       "momentum must be finite, got nan"},
      {[&] {
         return AdamWAttr::getChecked(emit, &context, one, nan, half, small,
                                      APFloat(0.0));
       },
       "beta1 must be finite, got nan"},
      {[&] {
         return AdamWAttr::getChecked(emit, &context, one, half, nan, small,
                                      APFloat(0.0));
       },
       "beta2 must be finite, got nan"},
      {[&] {
         return AdamWAttr::getChecked(emit, &context, one, half, half, nan,
                                      APFloat(0.0));
       },
       "eps must be finite, got nan"},
      {[&] {
         return AdamWAttr::getChecked(emit, &context, one, half, half, small,
                                      -inf);
       },
       "weight_decay must be finite, got -inf"},
  };
  for (const Case &c : cases) {
    message.clear();
    EXPECT_FALSE(c.make()) << c.expected;
    EXPECT_EQ(message, c.expected);
  }
}

TEST(Sizes, CountWithoutOverflow) {
  constexpr int64_t kDynamic = ShapedType::kDynamic;
  EXPECT_EQ(getNumElements({kDynamic, 128, 384}, 16), 16 * 128 * 384);
  EXPECT_EQ(getNumElements({kDynamic, 128, 384}), 128 * 384);
  EXPECT_EQ(getNumElements({}), 1);
  EXPECT_EQ(getNumElements({int64_t(1) << 32, (int64_t(1) << 31) - 1}),
            INT64_MAX - (int64_t(1) << 32) + 1);
  EXPECT_EQ(getNumElements({int64_t(1) << 32, int64_t(1) << 31}), std::nullopt)
      << "2^63 does not fit int64";
  EXPECT_EQ(getNumElements({int64_t(1) << 32, int64_t(1) << 32}), std::nullopt)
      << "2^64 wraps to 0 in unchecked arithmetic";
  EXPECT_EQ(getNumElements({kDynamic, 4}, INT64_MAX), std::nullopt);

  MLIRContext context;
  auto bf16 = RankedTensorType::get({kDynamic, 8}, BFloat16Type::get(&context));
  EXPECT_EQ(getNumBytes(bf16, 3), 3 * 8 * 2);
  auto i32 = RankedTensorType::get({2, 5}, IntegerType::get(&context, 32));
  EXPECT_EQ(getNumBytes(i32), 40);
  auto f32 = RankedTensorType::get({kDynamic, int64_t(1) << 61},
                                   Float32Type::get(&context));
  EXPECT_EQ(getNumBytes(f32), std::nullopt) << "2^61 elements of 4 bytes";
  EXPECT_EQ(formatBytes(384), "384 bytes");
  EXPECT_EQ(formatBytes(kMaxTensorBytes), "1.0 TiB");
  EXPECT_EQ(formatBytes(3 * 1024 * 1024 / 2), "1.5 MiB");
}

TEST_F(DialectTest, EffectiveInitFollowsTheParameterRole) {
  OwningOpRef<ModuleOp> module = parse(kModel);
  ASSERT_TRUE(module);
  auto initOf = [&](StringRef name) {
    return getEffectiveInit(findParam(*module, name));
  };
  auto normal = dyn_cast<NormalInitAttr>(initOf("emb"));
  ASSERT_TRUE(normal);
  EXPECT_EQ(normal.getStd().convertToDouble(), 0.02);
  EXPECT_TRUE(isa<OnesInitAttr>(initOf("n")));
  auto uniform = dyn_cast<UniformInitAttr>(initOf("w"));
  ASSERT_TRUE(uniform) << "an explicit init wins";
  EXPECT_EQ(uniform.getBound().convertToDouble(), 0.5);
  EXPECT_TRUE(isa<ZerosInitAttr>(initOf("w.b")));
  EXPECT_TRUE(isa<OnesInitAttr>(initOf("ln.g")));
  EXPECT_TRUE(isa<ZerosInitAttr>(initOf("ln.b")));
}

TEST_F(DialectTest, ReaderIsTheLayerThatReadsTheParameter) {
  OwningOpRef<ModuleOp> module = parse(kModel);
  ASSERT_TRUE(module);
  EXPECT_TRUE(isa<EmbeddingOp>(getReader(findParam(*module, "emb"))));
  EXPECT_TRUE(isa<LinearOp>(getReader(findParam(*module, "w.b"))));
  EXPECT_TRUE(isa<LayerNormOp>(getReader(findParam(*module, "ln.b"))));
  auto model = *module->getOps<ModelOp>().begin();
  EXPECT_EQ(getParams(model).size(), 6u);
  EXPECT_TRUE(getComputeType(model).isF32());
}

TEST_F(DialectTest, AttentionHeadGeometry) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
dp.model @a {
  dp.forward(%q: tensor<?x5x12xf32>, %k: tensor<?x5x4xf32>) -> tensor<?xf32> {
    %o = dp.attention %q, %k, %k {heads = 6, kv_heads = 2} : tensor<?x5x12xf32>, tensor<?x5x4xf32>
    %l = dp.mse %o, %q : tensor<?x5x12xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
)mlir");
  ASSERT_TRUE(module);
  ModelOp model = *module->getOps<ModelOp>().begin();
  AttentionOp attention =
      *model.getForward().getBody().getOps<AttentionOp>().begin();
  EXPECT_EQ(attention.getNumHeads(), 6);
  EXPECT_EQ(attention.getNumKVHeads(), 2);
  EXPECT_EQ(attention.getHeadDim(), 2);
  EXPECT_EQ(attention.getRopeTheta().convertToDouble(), 10000.0);
}

} // namespace
