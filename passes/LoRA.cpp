//===- LoRA.cpp - Low-rank adapters on the targeted linear layers ---------===//
//
// peft's LoRA as a rewrite of the forward pass: every dp.linear whose weight
// W [out, in] belongs to a targeted module becomes
//   y = x W^T (+ b) + s (x A^T) B^T,   s = alpha / r,
// with the trainable adapters A [r, in] and B [out, r] and the frozen W. The
// scaling is a frozen r x r linear S = s I between A and B (omitted when
// s = 1): ((x A^T) S^T) B^T = s (x A^T) B^T, and the gradients of A and B
// through S are peft's, s (dy B)^T x and s dy^T (x A^T). Which parameters
// train afterwards is dp-freeze's business.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"
#include "passes/ParamPatterns.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace dpc {
#define GEN_PASS_DEF_LORA
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

struct LoRAPass : dpc::impl::LoRABase<LoRAPass> {
  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled = findCompiledRecipe(getOperation());
    if (failed(compiled))
      return signalPassFailure();
    RecipeOp recipe = compiled->recipe;
    std::optional<LoRAAttr> lora = recipe.getLora();
    if (!lora)
      return;
    ModelOp model = compiled->model;
    if (getStep(model)) {
      model.emitOpError("has a dp.step already; run dp-lora before "
                        "dp-backward");
      return signalPassFailure();
    }
    if (failed(rewrite(model, recipe, *lora)))
      return signalPassFailure();
  }

  LogicalResult rewrite(ModelOp model, RecipeOp recipe, LoRAAttr lora);
};

LogicalResult LoRAPass::rewrite(ModelOp model, RecipeOp recipe, LoRAAttr lora) {
  SmallVector<ParamPattern> targets;
  for (Attribute target : lora.getTargets())
    targets.push_back(
        *ParamPattern::create(cast<StringAttr>(target).getValue()));
  SmallVector<bool> used(targets.size(), false);
  int64_t rank = lora.getRank();
  double scaling = lora.getAlpha().convertToDouble() / double(rank);

  SmallVector<LinearOp> linears(
      model.getForward().getBodyBlock().getOps<LinearOp>());
  OpBuilder builder(model.getContext());
  for (LinearOp linear : linears) {
    auto weight = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
        model, linear.getWeightAttr());
    std::string module = moduleName(weight);
    bool matched = false;
    for (auto [pattern, hit] : llvm::zip(targets, used))
      if (pattern.matchesModule(module)) {
        matched = true;
        hit = true;
      }
    if (!matched)
      continue;
    if (weight->hasAttr("hf.rows"))
      return recipe.emitOpError("lora target matches @")
             << weight.getSymName() << ", rows of the fused module '" << module
             << "' (hf.rows): peft adapts a fused module with one adapter, "
                "which dp-lora does not build";
    if (weight.getSymName().ends_with(".lora_A") ||
        weight.getSymName().ends_with(".lora_B"))
      return linear.emitOpError("already reads a LoRA adapter; dp-lora runs "
                                "once");

    RankedTensorType weightType = weight.getTensorType();
    int64_t out = weightType.getDimSize(0), in = weightType.getDimSize(1);
    if (rank > std::min(in, out))
      return recipe.emitOpError("lora rank ")
             << rank << " is above the width of @" << weight.getSymName()
             << " (" << out << " x " << in
             << "): a rank-r adapter needs r <= min(in, out)";

    // The adapters, next to the weight; peft's names derive from the
    // weight's module (docs/lora.md).
    Type element = weightType.getElementType();
    MLIRContext *context = model.getContext();
    auto addParam = [&](StringRef suffix, ArrayRef<int64_t> shape,
                        Attribute init, bool trainable) {
      builder.setInsertionPointAfter(weight);
      auto param = builder.create<ParamOp>(
          weight.getLoc(), (weight.getSymName() + suffix).str(),
          RankedTensorType::get(shape, element), init, trainable,
          weight.getUnitAttr());
      param->setAttr(kLoRABaseAttr, FlatSymbolRefAttr::get(weight));
      if (suffix == ".lora_A" || suffix == ".lora_B")
        param->setAttr(kPeftNameAttr,
                       StringAttr::get(context, "base_model.model." + module +
                                                    suffix + ".weight"));
      return FlatSymbolRefAttr::get(param.getSymNameAttr());
    };
    // peft: nn.init.kaiming_uniform_(A, a = sqrt(5)), bound = 1 / sqrt(in).
    FlatSymbolRefAttr a = addParam(
        ".lora_A", {rank, in},
        UniformInitAttr::get(context, APFloat(1.0 / std::sqrt(double(in)))),
        true);
    FlatSymbolRefAttr b =
        addParam(".lora_B", {out, rank}, ZerosInitAttr::get(context), true);
    FlatSymbolRefAttr s;
    if (scaling != 1.0)
      s = addParam(".lora_scale", {rank, rank},
                   DiagonalInitAttr::get(context, APFloat(scaling)), false);

    builder.setInsertionPointAfter(linear);
    Location loc = linear.getLoc();
    auto inputType = cast<RankedTensorType>(linear.getInput().getType());
    SmallVector<int64_t> shape(inputType.getShape());
    shape.back() = rank;
    auto lowType = RankedTensorType::get(shape, inputType.getElementType());
    Value low = builder.create<LinearOp>(loc, lowType, a, FlatSymbolRefAttr(),
                                         linear.getInput(), Value());
    if (s)
      low = builder.create<LinearOp>(loc, lowType, s, FlatSymbolRefAttr(), low,
                                     Value());
    Value delta = builder.create<LinearOp>(loc, linear.getType(), b,
                                           FlatSymbolRefAttr(), low, Value());
    auto sum = builder.create<AddOp>(loc, linear.getOutput(), delta);
    linear.getOutput().replaceAllUsesExcept(sum.getOutput(), sum);
    ++numAdapters;
  }
  for (auto [target, hit] : llvm::zip(lora.getTargets(), used))
    if (!hit)
      return recipe.emitOpError("lora target '")
             << cast<StringAttr>(target).getValue()
             << "' matches no linear layer of model @" << model.getSymName();
  return success();
}

} // namespace
