//===- DPModel.cpp - Queries on dp.model ----------------------------------===//

#include "DP/DPModel.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace dpc::dp;

SmallVector<ParamOp> dpc::dp::getParams(ModelOp model) {
  return llvm::to_vector(model.getBody().front().getOps<ParamOp>());
}

ParamUserOpInterface dpc::dp::getReader(ParamOp param) {
  auto model = param->getParentOfType<ModelOp>();
  ForwardOp forward = model ? model.getForward() : nullptr;
  if (!forward)
    return nullptr;
  ParamUserOpInterface reader;
  forward.walk([&](ParamUserOpInterface user) {
    for (FlatSymbolRefAttr ref : user.getParamRefs())
      if (ref.getAttr() == param.getSymNameAttr()) {
        reader = user;
        return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  return reader;
}

Attribute dpc::dp::getEffectiveInit(ParamOp param) {
  if (std::optional<Attribute> init = param.getInit())
    return *init;
  MLIRContext *context = param.getContext();
  StringAttr name = param.getSymNameAttr();
  Operation *reader = getReader(param);
  auto isRef = [&](FlatSymbolRefAttr ref) {
    return ref && ref.getAttr() == name;
  };
  if (auto rms = dyn_cast_or_null<RMSNormOp>(reader))
    return OnesInitAttr::get(context);
  if (auto layerNorm = dyn_cast_or_null<LayerNormOp>(reader))
    return isRef(layerNorm.getScaleAttr())
               ? Attribute(OnesInitAttr::get(context))
               : Attribute(ZerosInitAttr::get(context));
  if (auto linear = dyn_cast_or_null<LinearOp>(reader);
      linear && isRef(linear.getBiasAttr()))
    return ZerosInitAttr::get(context);
  return NormalInitAttr::get(context, APFloat(0.02));
}

Type dpc::dp::getComputeType(ModelOp model) {
  SmallVector<ParamOp> params = getParams(model);
  if (params.empty())
    return nullptr;
  return params.front().getTensorType().getElementType();
}

FloatType dpc::dp::getAccumulationType(ModelOp model) {
  Type compute = getComputeType(model);
  if (compute && compute.isF64())
    return Float64Type::get(model.getContext());
  return Float32Type::get(model.getContext());
}

StepOp dpc::dp::getStep(ModelOp model) {
  for (Operation &op : model.getBody().front())
    if (auto step = dyn_cast<StepOp>(op))
      return step;
  return nullptr;
}

ModelOp dpc::dp::getModel(RecipeOp recipe) {
  return SymbolTable::lookupNearestSymbolFrom<ModelOp>(recipe,
                                                       recipe.getModelAttr());
}

RecipeOp dpc::dp::getOnlyRecipe(ModuleOp module) {
  auto recipes = llvm::to_vector(module.getOps<RecipeOp>());
  if (recipes.size() == 1)
    return recipes.front();
  if (recipes.empty())
    module.emitError("no dp.recipe: nothing says how to train the model");
  else
    module.emitError("several dp.recipe ops; choose one (dp-specialize "
                     "recipe=NAME, or dpc --recipe NAME)");
  return nullptr;
}

GridShape dpc::dp::getGridShape(RecipeOp recipe) {
  FlatSymbolRefAttr gridRef = recipe.getGridAttr();
  if (!gridRef)
    return {1, 1};
  auto grid =
      SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(recipe, gridRef);
  if (!grid || grid.getShape().empty() || grid.getShape().size() > 2)
    return {0, 0};
  auto known = [](int64_t size) {
    return ShapedType::isDynamic(size) ? int64_t(0) : size;
  };
  ArrayRef<int64_t> shape = grid.getShape();
  if (shape.size() == 1)
    return {1, known(shape[0])};
  return {known(shape[0]), known(shape[1])};
}

int64_t dpc::dp::getNumRanks(RecipeOp recipe) {
  GridShape grid = getGridShape(recipe);
  return grid.replicas * grid.shards;
}
