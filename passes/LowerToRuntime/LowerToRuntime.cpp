//===- LowerToRuntime.cpp - dp step to buffers and runtime calls ----------===//
//
// Every tensor of the step becomes a dprt.alloc (a temporary of the arena),
// every op one or a few dprt.call of the runtime API in runtime/include/dprt/
// kernels.inc. Statistics a backward op reuses (normalization rstd, softmax
// log-sum-exp, rotated queries and keys) are buffers the forward call writes
// and the backward call reads. This file holds the pass: the program's
// globals and functions, and the walk over each body that hands every op to
// the lowering its family registered (Lowerings.h).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "DP/DPSizes.h"
#include "passes/CompiledRecipe.h"
#include "passes/LowerToRuntime/Lowerings.h"
#include "passes/Shapes.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace dpc {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

//===----------------------------------------------------------------------===//
// OpLoweringRegistry
//===----------------------------------------------------------------------===//

void OpLoweringRegistry::insert(TypeID kind, StringRef name, OpLowering lower) {
  if (!lowerings.try_emplace(kind, std::move(lower)).second)
    llvm::report_fatal_error(llvm::Twine("two lowerings of ") + name +
                             " registered");
}

const OpLowering *OpLoweringRegistry::lookup(Operation *op) const {
  auto it = lowerings.find(op->getName().getTypeID());
  return it == lowerings.end() ? nullptr : &it->second;
}

namespace {

/// Size in bytes of the StepState (runtime/include/dprt/rank.h), rounded up.
constexpr int64_t kStepStateBytes = 256;

/// Lowers one model and recipe into a dprt.program.
class ProgramLowering {
public:
  ProgramLowering(const CompiledRecipe &compiled, StringRef backend,
                  bool sumInUpdate, bool overwriteGradients,
                  const OpLoweringRegistry &registry)
      : context(compiled, backend), registry(registry),
        sumInUpdate(sumInUpdate), overwriteGradients(overwriteGradients) {}

  LogicalResult run();

private:
  LogicalResult collect();
  void declareGlobals();
  LogicalResult checkTensorSizes();
  LogicalResult lowerBody(Block &body, bool isStep);
  void chooseGradientWrites();

  LoweringContext context;
  const OpLoweringRegistry &registry;
  bool sumInUpdate, overwriteGradients;
};

LogicalResult ProgramLowering::collect() {
  ModelOp model = context.model;
  RecipeOp recipe = context.recipe;
  SmallVector<UnitOp> unitOps(model.getBody().front().getOps<UnitOp>());
  if (!context.step || unitOps.empty())
    return model.emitOpError("needs dp.step and dp.unit: run dp-backward, "
                             "dp-clip-plan and dp-shard first");
  Type compute = getComputeType(model);
  if (compute.isF16())
    return model.emitOpError("f16 is not supported by the runtime yet; use "
                             "bf16, f32 or f64");
  context.dt = toDType(compute);
  context.acc = ::dprt::accOf(context.dt);
  if (auto precision = recipe.getPrecision();
      precision && precision->getMaster() != getAccumulationType(model))
    return recipe.emitOpError("the runtime keeps master weights in ")
           << getAccumulationType(model) << " for " << compute
           << " models; master = " << precision->getMaster()
           << " is not supported yet";
  context.batch = recipe.getPhysicalBatch();
  context.ranks = getNumRanks(recipe);
  GridShape grid = getGridShape(recipe);
  context.shards = grid.shards;
  context.replicas = grid.replicas;
  if (context.ranks < 1 || context.ranks > kMaxRanks)
    return recipe.emitOpError("trains on a grid of ")
           << context.ranks << " ranks; the runtime runs on 1 to " << kMaxRanks
           << " (run dp-specialize to fix a dynamic grid)";
  FailureOr<OptimizerSpec> optimizer = getOptimizerSpec(recipe);
  if (failed(optimizer))
    return failure();
  context.optimizer = *optimizer;

  // Units the step gathers although they are not split (dp-shard).
  llvm::StringSet<> gatheredWhole;
  if (context.shards == 1)
    context.step.walk(
        [&](AllGatherOp gather) { gatheredWhole.insert(gather.getUnit()); });
  int64_t globalBase = 0;
  for (UnitOp unit : unitOps) {
    UnitInfo info;
    info.op = unit;
    info.index = context.units.size();
    info.shard = unit.getShard();
    info.numel = unit.getNumel();
    info.ranks = unit.getRanks();
    if (info.ranks != context.shards || unit.getReplicas() != context.replicas)
      return unit.emitOpError("is split over ")
             << info.ranks << " ranks in " << unit.getReplicas()
             << " replicas, but the recipe's grid is " << context.replicas
             << " x " << context.shards << " (replicas x shards)";
    info.globalBase = globalBase;
    info.frozen = llvm::none_of(unit.getParams(), [&](Attribute ref) {
      return SymbolTable::lookupNearestSymbolFrom<ParamOp>(
                 model, cast<FlatSymbolRefAttr>(ref))
          .getTrainable();
    });
    info.castFromMaster = !info.frozen && context.dt != context.acc &&
                          gatheredWhole.contains(unit.getSymName());
    std::optional<int64_t> next =
        llvm::checkedAdd<int64_t>(globalBase, unit.getNumel());
    if (!next)
      return unit.emitOpError("starts at global parameter index ")
             << globalBase << ", and its " << unit.getNumel()
             << " elements end beyond 2^63";
    globalBase = *next;
    for (auto [ref, offset] : llvm::zip(unit.getParams(), unit.getOffsets())) {
      auto name = cast<FlatSymbolRefAttr>(ref).getValue();
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          model, cast<FlatSymbolRefAttr>(ref));
      context.params[name] = {param, info.index, offset};
    }
    context.units.push_back(info);
  }
  chooseGradientWrites();
  return success();
}

/// Where every step is one micro-step on one rank (shuffled batches no
/// larger than the physical batch; Poisson batches vary; records as privacy
/// units), a parameter whose gradient one op alone writes needs no gradient
/// kept between micro-steps:
/// - dp_apply can form its clipped sum (sum-in-update) from a dp.vector_grad
///   that holds one row of the whole parameter per sample, weighted by clip
///   factors (whose zeros for non-finite norms make the sum finite without
///   a check of its own);
/// - a dp.linear_grad_weight can write its gradient instead of adding to it
///   (beta 0 in its GEMM), and dp_apply need not zero it for the next step.
/// A tied table's two gradient ops add into one gradient: neither.
void ProgramLowering::chooseGradientWrites() {
  RecipeOp recipe = context.recipe;
  auto shuffle = dyn_cast<ShuffleAttr>(recipe.getSampling());
  if (context.ranks != 1 || !shuffle ||
      shuffle.getBatch() > recipe.getPhysicalBatch() ||
      recipe.getRecordsPerUnit() != 1)
    return;
  llvm::StringMap<int> gradientOps;
  llvm::StringSet<> fromRows, linear;
  for (Operation &op : context.step.getBodyBlock()) {
    StringRef param =
        llvm::TypeSwitch<Operation *, StringRef>(&op)
            .Case([&](LinearGradWeightOp g) {
              linear.insert(g.getWeight());
              return g.getWeight();
            })
            .Case([](BiasGradOp g) { return g.getBias(); })
            .Case([](EmbeddingGradOp g) { return g.getTable(); })
            .Case([](PositionEmbeddingGradOp g) { return g.getTable(); })
            .Case([&](VectorGradOp g) {
              if (g.getScale() && g.getScale().getDefiningOp<ClipFactorOp>() &&
                  lastDim(g.getGrads()) ==
                      context.params[g.getParam()].op.getNumElements())
                fromRows.insert(g.getParam());
              return g.getParam();
            })
            .Default([](Operation *) { return StringRef(); });
    if (!param.empty())
      ++gradientOps[param];
  }
  for (const auto &param : linear)
    if (overwriteGradients && gradientOps.lookup(param.getKey()) == 1)
      context.overwrittenGradients.insert(param.getKey());
  if (!sumInUpdate)
    return;
  for (const auto &param : fromRows)
    if (gradientOps.lookup(param.getKey()) == 1)
      context.rowsUpdateCandidates.insert(param.getKey());
  // A unit all of whose trainable parameters are candidates needs no
  // gradient shard: 4 bytes an element less.
  for (UnitInfo &unit : context.units)
    unit.sumsFromRows =
        !unit.frozen && llvm::all_of(unit.op.getParams(), [&](Attribute ref) {
          StringRef name = cast<FlatSymbolRefAttr>(ref).getValue();
          return !context.params[name].op.getTrainable() ||
                 context.rowsUpdateCandidates.contains(name);
        });
}

void ProgramLowering::declareGlobals() {
  ::dprt::DType dt = context.dt, acc = context.acc;
  context.stateGlobal = context.addGlobalBytes("state", kStepStateBytes);
  for (BlockArgument input : context.forward.getInputs()) {
    std::string name = "input" + std::to_string(input.getArgNumber());
    // Integer inputs (tokens, labels) are int32.
    SmallVector<int64_t> factors(tensorOf(input).getShape());
    factors.push_back(isa<IntegerType>(tensorOf(input).getElementType())
                          ? 4
                          : ::dprt::sizeOf(dt));
    context.inputGlobals.push_back(
        context.addGlobalBytes(name, context.checkedBytes(name, factors)));
  }
  context.maskGlobal = context.addGlobal("mask", acc, {context.batch});
  context.lossGlobal = context.addGlobal("loss", acc, {context.batch});

  int64_t numStates = context.optimizer.numStates;
  for (UnitInfo &unit : context.units) {
    std::string name = unit.op.getSymName().str();
    if (!unit.castFromMaster)
      unit.paramShard = context.addGlobal(name + ".params", dt, {unit.shard});
    if (unit.frozen) {
      unit.master = unit.paramShard;
      continue;
    }
    unit.master = dt == acc && !unit.castFromMaster
                      ? unit.paramShard
                      : context.addGlobal(name + ".master", acc, {unit.shard});
    if (!unit.sumsFromRows)
      unit.grad = context.addGlobal(name + ".grad", acc, {unit.shard});
    if (numStates >= 1)
      unit.state1 = context.addGlobal(name + ".opt1", acc, {unit.shard});
    if (numStates >= 2)
      unit.state2 = context.addGlobal(name + ".opt2", acc, {unit.shard});
  }
}

/// Bytes of a tensor of `type` (MXFP8 rows with their scales), or nullopt
/// when they do not fit in int64_t.
std::optional<int64_t> bytesOf(RankedTensorType type) {
  if (llvm::any_of(type.getShape(), [](int64_t dim) { return dim < 0; }))
    return std::nullopt;
  return getNumBytes(type);
}

/// Every tensor the program holds in a buffer has a byte size that fits in
/// int64_t, so that the element counts and sizes the lowerings compute from
/// shapes cannot overflow.
LogicalResult ProgramLowering::checkTensorSizes() {
  auto tooLarge = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && !bytesOf(tensor);
  };
  for (ParamOp param : getParams(context.model))
    if (tooLarge(param.getTensorType()))
      return param.emitOpError("holds ")
             << param.getTensorType()
             << ", more bytes than a 64-bit size can count";
  for (BlockArgument input : context.forward.getInputs())
    if (tooLarge(input.getType()))
      return context.forward.emitOpError("input #")
             << input.getArgNumber() << " is " << input.getType()
             << ", more bytes than a 64-bit size can count";
  for (Block *body :
       {&context.forward.getBodyBlock(), &context.step.getBodyBlock()})
    for (Operation &op : *body)
      for (OpResult result : op.getResults())
        if (tooLarge(result.getType()))
          return op.emitOpError("result #")
                 << result.getResultNumber() << " is " << result.getType()
                 << ", more bytes than a 64-bit size can count";
  return success();
}

LogicalResult ProgramLowering::lowerBody(Block &body, bool isStep) {
  for (auto [input, name] :
       llvm::zip(body.getArguments(), context.inputGlobals))
    context.setBuffer(input, context.global(name));
  if (isStep)
    context.setBuffer(context.step.getMask(),
                      context.global(context.maskGlobal));
  for (Operation &op : body) {
    context.loc = op.getLoc();
    if (isa<YieldOp, dp::ReturnOp>(op)) {
      // The per-sample loss ends in the loss buffer the driver reads.
      Value loss = context.buf(op.getOperand(0));
      auto lossRef = loss.getDefiningOp<rt::GetGlobalOp>();
      if (lossRef && lossRef.getGlobal() == context.lossGlobal)
        continue;
      CallArgs copy = context.args();
      copy.dtype(context.acc)
          .buffer(loss)
          .dtype(context.acc)
          .buffer(context.global(context.lossGlobal))
          .i64(context.batch);
      context.call("cast", copy);
      continue;
    }
    const OpLowering *lower = registry.lookup(&op);
    if (!lower)
      return op.emitOpError("cannot be lowered to the runtime");
    if (failed((*lower)(&op, context)) || context.sizeOverflowed())
      return failure();
  }
  return success();
}

LogicalResult ProgramLowering::run() {
  if (failed(collect()))
    return failure();
  RecipeOp recipe = context.recipe;
  OpBuilder &builder = context.builder;
  builder.setInsertionPointAfter(recipe);
  context.program = rt::ProgramOp::create(
      builder, recipe.getLoc(),
      builder.getStringAttr(context.model.getSymName() + ".program"),
      /*prefetch=*/IntegerAttr(), /*arena_bytes=*/IntegerAttr(),
      /*peak_bytes=*/IntegerAttr());
  context.program.getBody().emplaceBlock();
  FSDPAttr policy = recipe.getShard().value_or(FSDPAttr());
  context.program.setPrefetch(policy ? policy.getPrefetch() : 1);
  context.loc = context.model.getLoc();
  declareGlobals();
  if (context.sizeOverflowed() || failed(checkTensorSizes()))
    return failure();

  buildInit(context);
  context.beginFunc("dp_microstep");
  if (failed(lowerBody(context.step.getBodyBlock(), /*isStep=*/true)))
    return failure();
  context.endFunc();
  buildApply(context);
  context.beginFunc("dp_forward");
  if (failed(lowerBody(context.forward.getBodyBlock(), /*isStep=*/false)))
    return failure();
  context.endFunc(context.logitsBuffer ? ValueRange{context.logitsBuffer}
                                       : ValueRange{});
  if (failed(buildDescribe(context)))
    return failure();
  return failure(context.sizeOverflowed());
}

struct LowerToRuntimePass : dpc::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  using LowerToRuntimeBase::LowerToRuntimeBase;

  LogicalResult initialize(MLIRContext *) override {
    registry = OpLoweringRegistry();
    populateDenseLowerings(registry);
    populateNormalizationLowerings(registry);
    populateAttentionLowerings(registry);
    populateElementwiseLowerings(registry);
    populateLossesLowerings(registry);
    populatePerSampleNormsLowerings(registry);
    populateClippingLowerings(registry);
    populateWeightGradsLowerings(registry);
    populateCollectivesLowerings(registry);
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<rt::ProgramOp>().empty()) {
      module.emitError("already holds a dprt.program");
      return signalPassFailure();
    }
    FailureOr<CompiledRecipe> compiled = findCompiledRecipe(module);
    if (failed(compiled))
      return signalPassFailure();
    ProgramLowering lowering(*compiled, nameOf(backend), sumInUpdate,
                             overwriteGradients, registry);
    if (failed(lowering.run()))
      return signalPassFailure();
  }

  OpLoweringRegistry registry;
};

} // namespace
