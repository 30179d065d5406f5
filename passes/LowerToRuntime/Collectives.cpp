//===- Collectives.cpp - FSDP all-gathers and reduce-scatters -------------===//
//
// dp.all_gather and dp.reduce_scatter to the collectives of
// runtime/cpu/services/Collectives.cpp. A gathered unit is a temporary of
// the compute type; a unit's full gradient, a temporary of the accumulation
// type, is reduce-scattered into the rank's gradient shard. On a grid of
// several replicas (a unit's `replicas`), dp_apply sums each gradient shard
// over them with all_reduce first. dprt-schedule puts them all on the
// communication stream.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

/// The index of the unit named `name`, or failure with an error at `op`.
FailureOr<int64_t> unitNamed(Operation *op, StringRef name,
                             LoweringContext &context) {
  for (const UnitInfo &unit : context.units)
    if (unit.op.getSymName() == name)
      return unit.index;
  return op->emitOpError("names unknown unit @") << name;
}

LogicalResult lowerAllGather(AllGatherOp g, LoweringContext &context) {
  FailureOr<int64_t> index = unitNamed(g, g.getUnit(), context);
  if (failed(index))
    return failure();
  gatherUnit(context, *index);
  return success();
}

LogicalResult lowerReduceScatter(ReduceScatterOp r, LoweringContext &context) {
  FailureOr<int64_t> index = unitNamed(r, r.getUnit(), context);
  if (failed(index))
    return failure();
  Value full = context.fullGrads.lookup(*index);
  if (!full)
    return r.emitOpError("has no gradient of the unit to reduce");
  CallArgs a = context.args();
  a.dtype(context.acc)
      .buffer(full)
      .buffer(context.global(context.units[*index].grad))
      .i64(context.units[*index].shard)
      .flag(true);
  context.call("reduce_scatter", a);
  context.fullGrads.erase(*index);
  return success();
}

} // namespace

Value dpc::lowering::gatherUnit(LoweringContext &context, int64_t index) {
  const UnitInfo &unit = context.units[index];
  Value full = context.alloc((unit.op.getSymName() + ".gathered").str(),
                             context.dt, {unit.shard, unit.ranks});
  CallArgs a = context.args();
  if (unit.castFromMaster) {
    // One shard: the compute-type parameters are the master, cast.
    a.dtype(context.acc)
        .buffer(context.global(unit.master))
        .dtype(context.dt)
        .buffer(full)
        .i64(unit.shard);
    context.call("gather_master", a);
  } else {
    a.dtype(context.dt)
        .buffer(context.global(unit.paramShard))
        .buffer(full)
        .i64(unit.shard);
    context.call("all_gather", a);
  }
  context.gathered[index] = full;
  return full;
}

void dpc::lowering::allReduceGradient(LoweringContext &context, int64_t index) {
  const UnitInfo &unit = context.units[index];
  CallArgs a = context.args();
  a.dtype(context.acc).buffer(context.global(unit.grad)).i64(unit.shard);
  context.call("all_reduce", a);
}

void dpc::lowering::populateCollectivesLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerAllGather);
  registry.add(lowerReduceScatter);
}
