//===- Specialize.cpp - Fix batch and grid sizes --------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dpc {
#define GEN_PASS_DEF_SPECIALIZE
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// `type` with its leading dimension set to `batch`.
Type withBatch(Type type, int64_t batch) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() == 0 || !tensor.isDynamicDim(0))
    return type;
  SmallVector<int64_t> shape(tensor.getShape());
  shape[0] = batch;
  return RankedTensorType::get(shape, tensor.getElementType(),
                               tensor.getEncoding());
}

struct SpecializePass : dpc::impl::SpecializeBase<SpecializePass> {
  using SpecializeBase::SpecializeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // -1, the default, leaves the number to the grid; any other value must
    // be a number of ranks the runtime can run.
    if (ranks != -1 && (ranks < 1 || ranks > kMaxRanks)) {
      emitError(module.getLoc(), "ranks = ")
          << int64_t(ranks) << " is not a number of ranks; give 1 to "
          << kMaxRanks;
      return signalPassFailure();
    }
    FailureOr<CompiledRecipe> compiled = findCompiledRecipe(module, recipe);
    if (failed(compiled))
      return signalPassFailure();
    // One compilation trains one recipe: the others go.
    for (RecipeOp other : llvm::to_vector(module.getOps<RecipeOp>()))
      if (other != compiled->recipe)
        other.erase();
    RecipeOp chosen = compiled->recipe;
    int64_t rows = chosen.getPhysicalBatch();
    if (batch != -1) {
      const int64_t unit = chosen.getRecordsPerUnit();
      if (batch < 1 || batch > rows || batch % unit != 0) {
        chosen.emitOpError("cannot be compiled for ")
            << int64_t(batch) << " rows: give 1 to its physical batch " << rows
            << (unit > 1
                    ? ", a multiple of max_records = " + std::to_string(unit)
                    : std::string());
        return signalPassFailure();
      }
      rows = batch;
      // The recipe then describes what this compilation runs: a physical
      // batch of `rows`.
      MLIRContext *context = module.getContext();
      Attribute sampling =
          llvm::TypeSwitch<Attribute, Attribute>(chosen.getSampling())
              .Case([&](PoissonAttr poisson) -> Attribute {
                return PoissonAttr::get(context, poisson.getExpectedBatch(),
                                        poisson.getRate(), rows);
              })
              .Case([&](ShuffleAttr shuffle) -> Attribute {
                return ShuffleAttr::get(context, shuffle.getBatch(), rows);
              })
              .Default([](Attribute other) { return other; });
      chosen.setSamplingAttr(sampling);
    }
    if (failed(specializeGrid(module, chosen)) ||
        failed(specializeBatch(compiled->model, rows)))
      return signalPassFailure();
  }

  LogicalResult specializeGrid(ModuleOp module, RecipeOp recipe) {
    FlatSymbolRefAttr gridRef = recipe.getGridAttr();
    if (!gridRef) {
      if (ranks <= 1)
        return success();
      // Asking for several ranks without a grid: declare one for them.
      OpBuilder builder(recipe);
      std::string name = "dp_ranks";
      SymbolTable symbols(module);
      while (symbols.lookup(name))
        name += "_";
      builder.create<shard::GridOp>(recipe.getLoc(), name,
                                    ArrayRef<int64_t>{ranks});
      recipe.setGridAttr(FlatSymbolRefAttr::get(builder.getContext(), name));
      return success();
    }
    auto grid =
        SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(recipe, gridRef);
    if (grid.getShape().size() == 2)
      return specializeGrid2D(grid);
    int64_t size = grid.getShape()[0];
    if (ShapedType::isDynamic(size)) {
      grid.setShape(ArrayRef<int64_t>{ranks > 0 ? int64_t(ranks) : 1});
      return success();
    }
    if (ranks > 0 && ranks != size)
      return grid.emitOpError("has ")
             << size << " ranks but " << int64_t(ranks)
             << " were asked for; declare it with shape = ? to choose the "
                "number of ranks when compiling";
    return success();
  }

  /// A grid of replicas x shards: the asked-for number of ranks fixes a
  /// dynamic dimension, and must be the product of the two.
  LogicalResult specializeGrid2D(shard::GridOp grid) {
    SmallVector<int64_t, 2> shape(grid.getShape());
    auto text = [&]() {
      std::string out;
      for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? "x" : "") + (ShapedType::isDynamic(shape[i])
                                     ? std::string("?")
                                     : std::to_string(shape[i]));
      return out;
    };
    const bool replicasKnown = !ShapedType::isDynamic(shape[0]);
    const bool shardsKnown = !ShapedType::isDynamic(shape[1]);
    if (ranks <= 0) {
      // No number asked for: a dynamic dimension has one rank.
      for (int64_t &size : shape)
        if (ShapedType::isDynamic(size))
          size = 1;
      grid.setShape(shape);
      return success();
    }
    if (replicasKnown && shardsKnown) {
      if (shape[0] * shape[1] != ranks)
        return grid.emitOpError("has shape ")
               << text() << ", " << shape[0] * shape[1] << " ranks, but "
               << int64_t(ranks)
               << " were asked for; declare a dimension as ? to choose it "
                  "from the number of ranks when compiling";
      return success();
    }
    if (!replicasKnown && !shardsKnown)
      return grid.emitOpError("has shape ")
             << text() << ": " << int64_t(ranks)
             << " ranks do not say how many replicas and how many shards; "
                "fix one of the two dimensions";
    const int64_t known = replicasKnown ? shape[0] : shape[1];
    if (ranks % known != 0)
      return grid.emitOpError("has shape ")
             << text() << ": " << int64_t(ranks) << " ranks do not divide into "
             << known << (replicasKnown ? " replicas" : " shards")
             << " of equal size";
    shape[replicasKnown ? 1 : 0] = ranks / known;
    grid.setShape(shape);
    return success();
  }

  LogicalResult specializeBatch(ModelOp model, int64_t batch) {
    ForwardOp forward = model.getForward();
    Block &body = forward.getBodyBlock();
    for (BlockArgument argument : body.getArguments())
      argument.setType(withBatch(argument.getType(), batch));
    WalkResult walk = forward.walk([&](Operation *op) {
      for (OpResult result : op->getResults())
        result.setType(withBatch(result.getType(), batch));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
    FunctionType type = forward.getFunctionType();
    SmallVector<Type> inputs, results;
    for (Type t : type.getInputs())
      inputs.push_back(withBatch(t, batch));
    for (Type t : type.getResults())
      results.push_back(withBatch(t, batch));
    forward.setFunctionType(
        FunctionType::get(forward.getContext(), inputs, results));
    return success();
  }
};

} // namespace
