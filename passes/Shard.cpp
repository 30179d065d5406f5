//===- Shard.cpp - FSDP units and their collectives -----------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"
#include "passes/Units.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace dpc {
#define GEN_PASS_DEF_SHARD
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// Forward layers read parameters through the gathered buffer; so do the
/// backward ops that multiply by a parameter. Weight-gradient ops read only
/// activations.
bool isForwardReader(Operation *op) {
  return isa<LinearOp, EmbeddingOp, PositionEmbeddingOp, RMSNormOp,
             LayerNormOp>(op);
}
bool isBackwardReader(Operation *op) {
  return isa<LinearGradInputOp, RMSNormGradOp, LayerNormGradOp>(op);
}
bool isWeightGrad(Operation *op) {
  return isa<LinearGradWeightOp, BiasGradOp, EmbeddingGradOp,
             PositionEmbeddingGradOp, VectorGradOp>(op);
}

/// With book-keeping every weight gradient waits for the one clip factor and
/// may run in any order after it. Grouping them by unit lets each unit's
/// reduce-scatter start as soon as its own gradients are done and keeps only
/// one or two full-size unit gradients live.
void groupDeferredWeightGrads(StepOp step,
                              const llvm::StringMap<StringRef> &unitOfParam) {
  SmallVector<ClipFactorOp> factors(step.getBodyBlock().getOps<ClipFactorOp>());
  if (factors.size() != 1)
    return;
  Operation *factor = factors.front();
  SmallVector<Operation *> deferred;
  for (Operation *op = factor->getNextNode(); op; op = op->getNextNode())
    if (isWeightGrad(op))
      deferred.push_back(op);
  llvm::StringMap<size_t> rank;
  auto unitOf = [&](Operation *op) {
    return unitOfParam.lookup(
        cast<ParamUserOpInterface>(op).getParamRefs().front().getValue());
  };
  for (Operation *op : deferred)
    rank.try_emplace(unitOf(op), rank.size());
  llvm::stable_sort(deferred, [&](Operation *a, Operation *b) {
    return rank.lookup(unitOf(a)) < rank.lookup(unitOf(b));
  });
  Operation *after = factor;
  for (Operation *op : deferred) {
    op->moveAfter(after);
    after = op;
  }
}

struct ShardPass : dpc::impl::ShardBase<ShardPass> {
  using ShardBase::ShardBase;
  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled =
        findTrainingStep(getOperation(), getArgument());
    if (failed(compiled))
      return signalPassFailure();
    RecipeOp recipe = compiled->recipe;
    ModelOp model = compiled->model;
    StepOp step = compiled->step;
    // A unit is split over the `ranks` ranks of one replica and kept by
    // each of `replicas` replicas (1 x N on a 1-D grid).
    GridShape grid = getGridShape(recipe);
    int64_t ranks = grid.shards, replicas = grid.replicas;
    if (ranks < 1 || replicas < 1) {
      recipe.emitOpError("has a grid of unknown size; run dp-specialize "
                         "before dp-shard");
      return signalPassFailure();
    }
    for (UnitOp unit : model.getBody().front().getOps<UnitOp>()) {
      unit.emitOpError("exists already; dp-shard runs once");
      return signalPassFailure();
    }

    FSDPAttr policy = recipe.getShard().value_or(FSDPAttr());
    SmallVector<UnitLayout> units = planUnits(model, policy, ranks);
    llvm::StringMap<StringRef> unitOfParam;
    OpBuilder builder(step);
    for (const UnitLayout &unit : units) {
      SmallVector<Attribute> params;
      for (ParamOp param : unit.params) {
        params.push_back(FlatSymbolRefAttr::get(param.getSymNameAttr()));
        unitOfParam[param.getSymName()] = unit.name;
      }
      builder.create<UnitOp>(model.getLoc(), unit.name,
                             builder.getArrayAttr(params), unit.offsets,
                             unit.numel, unit.shard, ranks, replicas);
      ++numUnits;
    }
    groupDeferredWeightGrads(step, unitOfParam);
    // Split units are gathered from their shards. An unsplit trainable unit
    // of 16-bit parameters is "gathered" too: cast from its f32 master where
    // layers read it (dp-lower-to-runtime), as FSDP casts every unit it
    // gathers, instead of keeping a second, compute-type copy of every
    // parameter for the whole step (2 GiB of a 1.1B bf16 model). Unless
    // cast-units is off: then the update writes that copy, and no cast is
    // left (one or two a unit and step, each a pass over its master).
    llvm::StringSet<> gatheredUnits;
    for (const UnitLayout &unit : units) {
      ParamOp first = unit.params.empty() ? ParamOp() : unit.params.front();
      bool narrow =
          first &&
          first.getTensorType().getElementType().getIntOrFloatBitWidth() < 32;
      if (ranks > 1 || (!unit.frozen && narrow && castUnits))
        gatheredUnits.insert(unit.name);
    }
    if (gatheredUnits.empty())
      return;

    bool reshard = this->reshard >= 0
                       ? this->reshard != 0
                       : !policy || policy.getReshardAfterForward();
    // First forward reader, first backward reader and last weight-gradient op
    // of each unit, in the step's order.
    llvm::StringMap<Operation *> firstForward, firstBackward, lastGrad;
    for (Operation &op : step.getBodyBlock()) {
      auto user = dyn_cast<ParamUserOpInterface>(op);
      if (!user)
        continue;
      for (FlatSymbolRefAttr ref : user.getParamRefs()) {
        StringRef unit = unitOfParam.lookup(ref.getValue());
        // A forward layer recomputed in the backward (dp-recompute) reads
        // the parameters where the backward does.
        bool recomputed = op.hasAttr("dp.recompute");
        if (isForwardReader(&op) && !recomputed)
          firstForward.try_emplace(unit, &op);
        else if (isBackwardReader(&op) || (recomputed && isForwardReader(&op)))
          firstBackward.try_emplace(unit, &op);
        else if (isWeightGrad(&op))
          lastGrad[unit] = &op;
      }
    }
    MLIRContext *context = model.getContext();
    // Units whose forward gather also serves their backward (no second
    // gather or, on one rank, cast), for dp-report.
    int64_t kept = 0;
    for (const UnitLayout &unit : units) {
      if (!gatheredUnits.contains(unit.name))
        continue;
      if (!reshard && firstForward.lookup(unit.name) &&
          firstBackward.lookup(unit.name))
        ++kept;
      auto ref = FlatSymbolRefAttr::get(context, unit.name);
      if (Operation *first = firstForward.lookup(unit.name)) {
        builder.setInsertionPoint(first);
        builder.create<AllGatherOp>(
            first->getLoc(), ref,
            GatherPhaseAttr::get(context, GatherPhase::forward));
        ++numAllGathers;
      }
      if (Operation *first = firstBackward.lookup(unit.name);
          first && reshard) {
        builder.setInsertionPoint(first);
        builder.create<AllGatherOp>(
            first->getLoc(), ref,
            GatherPhaseAttr::get(context, GatherPhase::backward));
        ++numAllGathers;
      }
      // One rank's gradients are whole already.
      Operation *last = ranks > 1 ? lastGrad.lookup(unit.name) : nullptr;
      if (last) {
        builder.setInsertionPointAfter(last);
        builder.create<ReduceScatterOp>(last->getLoc(), ref);
        ++numReduceScatters;
      }
    }
    if (kept > 0)
      step->setAttr("dp.kept_gathers",
                    IntegerAttr::get(IntegerType::get(context, 64), kept));
  }
};

} // namespace
