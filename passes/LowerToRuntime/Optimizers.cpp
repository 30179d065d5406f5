//===- Optimizers.cpp - dp_init and dp_apply ------------------------------===//
//
// The functions that own the parameter shards: dp_init (initializers keyed
// by global parameter index, so that every sharding draws the same values;
// zeroed gradients and optimizer state) and dp_apply (noise and the
// optimizer step on the trainable ranges of each shard, then the compute
// copy of the master shard; on a hybrid grid first the sum of the gradient
// shards over the replicas), on the kernels of runtime/cpu/Optimizers.cpp,
// which read the learning rate and the weight decay from the StepState (the
// recipe's values are only dp_describe's defaults),
// runtime/cpu/services/Random.cpp and their unit-range forms in
// runtime/common/ShardRanges.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "DP/DPModel.h"
#include "passes/Units.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

FailureOr<OptimizerSpec> dpc::lowering::getOptimizerSpec(RecipeOp recipe) {
  MLIRContext *context = recipe.getContext();
  auto f64 = [&](double v) {
    return FloatAttr::get(Float64Type::get(context), v);
  };
  OptimizerSpec spec;
  bool known =
      llvm::TypeSwitch<Attribute, bool>(recipe.getOptimizer())
          .Case([&](SGDAttr sgd) {
            spec.kind = rt::OptimizerKind::SGD;
            spec.lr = sgd.getLr().convertToDouble();
            spec.weightDecay = sgd.getWeightDecay().convertToDouble();
            spec.updateKernel = "sgd_update_range";
            spec.rowsUpdateKernel = "sgd_update_rows";
            return true;
          })
          .Case([&](MomentumAttr momentum) {
            spec.kind = rt::OptimizerKind::Momentum;
            spec.numStates = 1;
            spec.lr = momentum.getLr().convertToDouble();
            spec.momentum = momentum.getMomentum().convertToDouble();
            spec.nesterov = momentum.getNesterov();
            spec.weightDecay = momentum.getWeightDecay().convertToDouble();
            spec.updateKernel = "momentum_update_range";
            spec.rowsUpdateKernel = "momentum_update_rows";
            spec.updateHyperparameters = {
                f64(spec.momentum), BoolAttr::get(context, spec.nesterov)};
            return true;
          })
          .Case([&](AdamWAttr adamw) {
            spec.kind = rt::OptimizerKind::AdamW;
            spec.numStates = 2;
            spec.lr = adamw.getLr().convertToDouble();
            spec.beta1 = adamw.getBeta1().convertToDouble();
            spec.beta2 = adamw.getBeta2().convertToDouble();
            spec.eps = adamw.getEps().convertToDouble();
            spec.weightDecay = adamw.getWeightDecay().convertToDouble();
            spec.updateKernel = "adamw_update_range";
            spec.rowsUpdateKernel = "adamw_update_rows";
            spec.updateHyperparameters = {f64(spec.beta1), f64(spec.beta2),
                                          f64(spec.eps)};
            return true;
          })
          .Default([](Attribute) { return false; });
  if (!known)
    return recipe.emitOpError("has an optimizer the runtime does not have: ")
           << recipe.getOptimizer();
  return spec;
}

/// The state buffers of `unit` that its optimizer keeps.
static SmallVector<StringRef, 2> statesOf(const UnitInfo &unit) {
  SmallVector<StringRef, 2> states;
  for (const std::string *state : {&unit.state1, &unit.state2})
    if (!state->empty())
      states.push_back(*state);
  return states;
}

void dpc::lowering::buildInit(LoweringContext &context) {
  context.beginFunc("dp_init");
  ::dprt::DType acc = context.acc;
  for (UnitInfo &unit : context.units) {
    int64_t shardBytes =
        context.checkedBytes(unit.master, {unit.shard, ::dprt::sizeOf(acc)});
    // A frozen unit of a bf16 model has no acc-type master: its values are
    // drawn into a temporary and rounded once, as a master's would be.
    bool direct = !unit.frozen || context.dt == acc;
    Value master = direct ? context.global(unit.master)
                          : context.alloc(unit.op.getSymName().str() + ".init",
                                          acc, {unit.shard});
    CallArgs zeroMaster = context.args();
    zeroMaster.buffer(master).i64(shardBytes);
    context.call("zero", zeroMaster);
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      ParamOp param =
          context.params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
      Attribute init = getEffectiveInit(param);
      int64_t count = param.getNumElements();
      CallArgs args = context.args();
      args.dtype(acc).buffer(master).i64(unit.shard).i64(offset).i64(count);
      if (auto normal = dyn_cast<NormalInitAttr>(init)) {
        args.i64(unit.globalBase + offset)
            .f64(normal.getStd().convertToDouble());
        context.call("init_normal_range", args);
      } else if (auto uniform = dyn_cast<UniformInitAttr>(init)) {
        args.i64(unit.globalBase + offset)
            .f64(uniform.getBound().convertToDouble());
        context.call("init_uniform_range", args);
      } else if (auto diagonal = dyn_cast<DiagonalInitAttr>(init)) {
        // Zero, then each of the n diagonal elements (i, i) at i (n + 1).
        args.f64(0.0);
        context.call("fill_range", args);
        int64_t n = param.getTensorType().getDimSize(0);
        for (int64_t i = 0; i < n; ++i) {
          CallArgs one = context.args();
          one.dtype(acc)
              .buffer(master)
              .i64(unit.shard)
              .i64(offset + i * (n + 1))
              .i64(1)
              .f64(diagonal.getValue().convertToDouble());
          context.call("fill_range", one);
        }
      } else {
        args.f64(isa<OnesInitAttr>(init) ? 1.0 : 0.0);
        context.call("fill_range", args);
      }
    }
    if (!unit.castFromMaster && (!direct || unit.master != unit.paramShard)) {
      CallArgs cast = context.args();
      cast.dtype(acc)
          .buffer(master)
          .dtype(context.dt)
          .buffer(context.global(unit.paramShard))
          .i64(unit.shard);
      context.call("cast", cast);
    }
    if (unit.frozen)
      continue;
    SmallVector<StringRef, 3> zeroed;
    if (!unit.grad.empty())
      zeroed.push_back(unit.grad);
    llvm::append_range(zeroed, statesOf(unit));
    for (StringRef state : zeroed) {
      CallArgs zero = context.args();
      zero.buffer(context.global(state)).i64(shardBytes);
      context.call("zero", zero);
    }
  }
  context.endFunc();
}

/// Whether `unit` holds a trainable parameter: only those get noise and
/// updates.
static bool hasTrainable(LoweringContext &context, const UnitInfo &unit) {
  return llvm::any_of(unit.op.getParams(), [&](Attribute ref) {
    return context.params[cast<FlatSymbolRefAttr>(ref).getValue()]
        .op.getTrainable();
  });
}

namespace {

/// Element ranges of a unit: the parameters added next to each other
/// (alignment gaps between them included) form one range; one left out
/// ends it.
struct UnitRanges {
  SmallVector<std::pair<int64_t, int64_t>> list;
  bool open = false;

  /// The parameter at [begin, end) if `in`, else the end of the range.
  void add(bool in, int64_t begin, int64_t end) {
    if (in && open &&
        int64_t(llvm::alignTo(list.back().second, kUnitAlignment)) == begin)
      list.back().second = end;
    else if (in)
      list.push_back({begin, end});
    open = in;
  }
};

} // namespace

void dpc::lowering::buildApply(LoweringContext &context) {
  context.beginFunc("dp_apply");
  ::dprt::DType acc = context.acc;
  const OptimizerSpec &optimizer = context.optimizer;
  // Hybrid sharding: every replica's gradient shard becomes the sum over the
  // replicas before anyone adds noise, all of them issued first so that the
  // later ones overlap the updates of the earlier units.
  if (context.replicas > 1)
    for (UnitInfo &unit : context.units)
      if (hasTrainable(context, unit))
        allReduceGradient(context, unit.index);
  // The _rows updates in one group: a backend may run the small ones
  // together when it closes (the CUDA backend: one launch for the RMSNorm
  // gammas and the key and value projections instead of one each). Nothing
  // in between reads what they write: every other call updates, or zeroes
  // the gradient of, other parameters.
  const bool grouped = !context.rowsUpdates.empty();
  auto updateGroup = [&](bool open) {
    CallArgs args = context.args();
    args.flag(open);
    context.call("update_group", args);
  };
  if (grouped)
    updateGroup(true);
  for (UnitInfo &unit : context.units) {
    if (unit.frozen)
      continue;
    // Trainable parameters that lie next to each other (alignment gaps
    // between them included) form one range: one call each. A parameter
    // whose sum the update forms from its per-sample gradients has a call
    // of its own.
    UnitRanges ranges;
    // The gradients zeroed for the next step: all but those the update
    // forms from rows (never written) and those the micro-step overwrites.
    UnitRanges zeroed;
    bool zeroAll = true;
    Value master = context.global(unit.master);
    int64_t accBytes = ::dprt::sizeOf(acc);
    // The compute-type copy the layers read in place (a split unit's shard,
    // gathered; an unsplit unit's weights with cast-units off): the update
    // writes it as it writes the master, instead of a cast that reads the
    // master again. Frozen parameters and alignment gaps keep dp_init's cast.
    ::dprt::DType dt = context.dt;
    Value copy = !unit.castFromMaster && unit.master != unit.paramShard
                     ? context.global(unit.paramShard)
                     : Value();
    bool addNoise = !isa<NoNoiseAttr>(context.recipe.getNoise());
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      StringRef name = cast<FlatSymbolRefAttr>(ref).getValue();
      ParamOp param = context.params[name].op;
      auto fromRows = context.rowsUpdates.find(name);
      if (fromRows != context.rowsUpdates.end()) {
        const RowsUpdate &rows = fromRows->second;
        CallArgs update = context.args();
        update.dtype(rows.rowsType)
            .buffer(context.view(master, offset * accBytes));
        for (StringRef state : statesOf(unit))
          update.buffer(context.view(context.global(state), offset * accBytes));
        update.buffer(context.view(context.carried(rows.rows), rows.rowsOffset))
            .buffer(context.carried(rows.factors))
            .i64(context.batch)
            .i64(rows.n);
        for (Attribute hyperparameter : optimizer.updateHyperparameters)
          update.attr(hyperparameter);
        update.i64(addNoise ? unit.globalBase + offset : -1)
            .dtype(dt)
            .bufferOrNull(copy ? context.view(copy, offset * ::dprt::sizeOf(dt))
                               : Value());
        context.call(optimizer.rowsUpdateKernel, update);
      }
      const int64_t end = offset + param.getNumElements();
      const bool inGradient =
          param.getTrainable() && fromRows == context.rowsUpdates.end();
      const bool overwritten = context.overwrittenGradients.contains(name);
      ranges.add(inGradient, offset, end);
      zeroed.add(inGradient && !overwritten, offset, end);
      zeroAll &= !overwritten && fromRows == context.rowsUpdates.end();
    }
    Value grad = unit.grad.empty() ? Value() : context.global(unit.grad);
    // noise = #dp.none: the program draws no noise at all. Otherwise the
    // update adds each element's noise (keyed by its global index) as it
    // reads the gradient: the bits of add_noise then the update, without a
    // pass that reads and writes the whole gradient.
    for (auto [begin, end] : ranges.list) {
      CallArgs update = context.args();
      update.dtype(acc).buffer(master);
      for (StringRef state : statesOf(unit))
        update.buffer(context.global(state));
      update.buffer(grad).i64(unit.shard).i64(begin).i64(end - begin);
      for (Attribute hyperparameter : optimizer.updateHyperparameters)
        update.attr(hyperparameter);
      update.i64(addNoise ? unit.globalBase + begin : -1)
          .dtype(dt)
          .bufferOrNull(copy);
      context.call(optimizer.updateKernel, update);
    }
    // The gradient of a parameter the update formed from rows was never
    // written (it stays as dp_init zeroed it), and one the micro-step
    // overwrites needs no zeros: only the other ranges are zeroed, and a
    // unit of such parameters only has no gradient at all.
    if (zeroAll) {
      CallArgs zero = context.args();
      zero.buffer(grad).i64(
          context.checkedBytes(unit.grad, {unit.shard, accBytes}));
      context.call("zero", zero);
    } else {
      for (auto [begin, end] : zeroed.list) {
        CallArgs zero = context.args();
        zero.buffer(context.view(grad, begin * accBytes))
            .i64((end - begin) * accBytes);
        context.call("zero", zero);
      }
    }
  }
  if (grouped)
    updateGroup(false);
  context.endFunc();
}
