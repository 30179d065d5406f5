//===- CompiledRecipe.cpp - The recipe a pass compiles --------------------===//

#include "passes/CompiledRecipe.h"

#include "DP/DPModel.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

FailureOr<CompiledRecipe> dpc::findCompiledRecipe(ModuleOp module,
                                                  StringRef name) {
  RecipeOp recipe;
  if (name.empty()) {
    recipe = getOnlyRecipe(module);
  } else {
    for (RecipeOp candidate : module.getOps<RecipeOp>())
      if (candidate.getSymName() == name)
        recipe = candidate;
    if (!recipe)
      module.emitError("no dp.recipe named @") << name;
  }
  if (!recipe)
    return failure();
  ModelOp model = getModel(recipe);
  return CompiledRecipe{recipe, model, getStep(model)};
}

FailureOr<CompiledRecipe> dpc::findTrainingStep(ModuleOp module,
                                                StringRef pass) {
  FailureOr<CompiledRecipe> compiled = findCompiledRecipe(module);
  if (failed(compiled))
    return failure();
  if (!compiled->step) {
    compiled->model.emitOpError("has no dp.step; run dp-backward before ")
        << pass;
    return failure();
  }
  return compiled;
}
