//===- Freeze.cpp - Which parameters train --------------------------------===//
//
// Applies the recipe's `train` / `freeze` patterns (and the freezing that
// `lora` implies) to the parameters' `trainable` flag. A parameter written
// with trainable = false stays frozen. Everything after reads the flag:
// dp-backward forms no weight gradient for a frozen parameter, dp-clip-plan
// no norm, dp-shard puts frozen parameters in units of their own, which hold
// no gradient, master copy or optimizer state, and dp_apply adds no noise to
// them.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"
#include "passes/ParamPatterns.h"

namespace dpc {
#define GEN_PASS_DEF_FREEZE
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

struct FreezePass : dpc::impl::FreezeBase<FreezePass> {
  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled = findCompiledRecipe(getOperation());
    if (failed(compiled) || failed(apply(compiled->recipe, compiled->model)))
      return signalPassFailure();
  }

  LogicalResult apply(RecipeOp recipe, ModelOp model);
};

/// The patterns of a recipe field, each with whether it matched a parameter.
struct PatternList {
  StringRef field;
  SmallVector<std::pair<ParamPattern, StringRef>> patterns;
  SmallVector<bool> used;

  PatternList(StringRef field, std::optional<ArrayAttr> list) : field(field) {
    if (!list)
      return;
    for (Attribute a : *list) {
      StringRef text = cast<StringAttr>(a).getValue();
      patterns.push_back({*ParamPattern::create(text), text});
    }
    used.assign(patterns.size(), false);
  }
  bool given() const { return !patterns.empty(); }
  bool matches(StringRef name) {
    bool any = false;
    for (auto [pattern, hit] : llvm::zip(patterns, used))
      if (pattern.first.matches(name))
        any = hit = true;
    return any;
  }
  LogicalResult checkUsed(RecipeOp recipe, ModelOp model) const {
    for (auto [pattern, hit] : llvm::zip(patterns, used))
      if (!hit)
        return recipe.emitOpError()
               << field << " pattern '" << pattern.second
               << "' matches no parameter of model @" << model.getSymName();
    return success();
  }
};

LogicalResult FreezePass::apply(RecipeOp recipe, ModelOp model) {
  PatternList train("train", recipe.getTrain());
  PatternList freeze("freeze", recipe.getFreeze());
  bool lora = recipe.getLora().has_value();
  SmallVector<ParamOp> params = getParams(model);
  if (!train.given() && !freeze.given() && !lora)
    return success();

  int64_t trainable = 0;
  for (ParamOp param : params) {
    StringRef name = param.getSymName();
    bool inTrain = train.matches(name);
    bool inFreeze = freeze.matches(name);
    bool trains = param.getTrainable();
    if (lora)
      trains = trains && (isLoRAAdapter(param) || inTrain);
    else if (train.given())
      trains = trains && inTrain;
    trains = trains && !inFreeze;
    if (!trains && param.getTrainable())
      ++numFrozen;
    param.setTrainable(trains);
    trainable += trains;
  }
  if (failed(train.checkUsed(recipe, model)) ||
      failed(freeze.checkUsed(recipe, model)))
    return failure();
  if (trainable == 0)
    return recipe.emitOpError("leaves no parameter of model @")
           << model.getSymName() << " to train";
  return success();
}

} // namespace
