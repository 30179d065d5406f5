//===- LowerToRuntime.cpp - dp step to buffers and runtime calls ----------===//
//
// Every tensor of the step becomes a dprt.alloc (a temporary of the arena),
// every op one or a few dprt.call of the runtime API in runtime/include/dprt/
// kernels.inc. Statistics a backward op reuses (normalization rstd, softmax
// log-sum-exp, rotated queries and keys) are buffers the forward call writes
// and the backward call reads.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"
#include "passes/Shapes.h"
#include "passes/Units.h"
#include "dprt/types.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace dpc {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// Size in bytes of the StepState (runtime/include/dprt/rank.h), rounded up.
constexpr int64_t kStepStateBytes = 256;

::dprt::DType toDType(Type type) {
  if (type.isF64())
    return ::dprt::DType::F64;
  if (type.isBF16())
    return ::dprt::DType::BF16;
  return ::dprt::DType::F32;
}

rt::DType toRuntime(::dprt::DType t) {
  // DPRTDialect.cpp pins the dprt enums to the runtime's values.
  return static_cast<rt::DType>(t);
}

rt::ClipMode toRuntime(ClipMode mode) {
  switch (mode) {
  case ClipMode::flat:
    return rt::ClipMode::Flat;
  case ClipMode::per_layer:
    return rt::ClipMode::PerLayer;
  case ClipMode::automatic:
    return rt::ClipMode::Automatic;
  }
  llvm_unreachable("every clip mode has a runtime mode");
}

rt::Reduction toRuntime(LossReduction reduction) {
  return reduction == LossReduction::mean ? rt::Reduction::Mean
                                          : rt::Reduction::Sum;
}

rt::Activation toRuntime(ActivationKind kind) {
  switch (kind) {
  case ActivationKind::relu:
    return rt::Activation::Relu;
  case ActivationKind::silu:
    return rt::Activation::Silu;
  case ActivationKind::gelu_erf:
    return rt::Activation::GeluErf;
  case ActivationKind::gelu_tanh:
    return rt::Activation::GeluTanh;
  }
  llvm_unreachable("every activation has a runtime kernel");
}

/// Builds the argument list of one dprt.call: buffers by their position
/// among its operands, everything else as typed attributes.
class Args {
public:
  explicit Args(MLIRContext *context) : context(context) {}
  Args &buffer(Value b) {
    args.push_back(IntegerAttr::get(IndexType::get(context), buffers.size()));
    buffers.push_back(b);
    return *this;
  }
  /// A buffer, or #dprt.null without one.
  Args &bufferOrNull(Value b) {
    if (b)
      return buffer(b);
    return attr(rt::NullAttr::get(context));
  }
  Args &i64(int64_t v) {
    return attr(IntegerAttr::get(IntegerType::get(context, 64), v));
  }
  Args &i32(int32_t v) {
    return attr(IntegerAttr::get(IntegerType::get(context, 32), v));
  }
  Args &flag(bool v) { return attr(BoolAttr::get(context, v)); }
  Args &f64(double v) {
    return attr(FloatAttr::get(Float64Type::get(context), v));
  }
  Args &dtype(::dprt::DType t) {
    return attr(rt::DTypeAttr::get(context, toRuntime(t)));
  }
  Args &string(StringRef text) { return attr(StringAttr::get(context, text)); }
  /// A value only known after the memory plan (see ConvertDPRTToEmitC).
  Args &planned(rt::PlannedValue which) {
    return attr(rt::PlannedValueAttr::get(context, which));
  }
  Args &attr(Attribute value) {
    args.push_back(value);
    return *this;
  }

  SmallVector<Value> buffers;
  SmallVector<Attribute> args;

private:
  MLIRContext *context;
};

struct UnitInfo {
  mutable UnitOp op; // accessors of ops are non-const
  int64_t index;
  int64_t shard, numel, ranks;
  int64_t globalBase; ///< global index of the unit's position 0
  std::string paramShard, master, grad, state1, state2;
};

struct ParamInfo {
  ParamOp op;
  int64_t unit;
  int64_t offset; ///< element offset in the unit
};

/// Lowers one model and recipe into a dprt.program.
class ProgramLowering {
public:
  ProgramLowering(ModuleOp module, const CompiledRecipe &compiled,
                  StringRef backend)
      : module(module), recipe(compiled.recipe), backend(backend),
        context(module.getContext()), builder(context),
        model(compiled.model), step(compiled.step) {}

  LogicalResult run();

private:
  // Setup.
  LogicalResult collect();
  std::string addGlobal(StringRef name, int64_t bytes);
  Value global(StringRef name) {
    return builder.create<rt::GetGlobalOp>(
        loc, bufferType(), FlatSymbolRefAttr::get(context, name));
  }
  rt::FuncOp beginFunc(StringRef name, bool describe = false);
  void endFunc(ValueRange keep = {});
  void call(StringRef callee, Args &args) {
    rt::CallOp::create(builder, loc, callee, args.buffers,
                       builder.getArrayAttr(args.args), /*stream=*/0);
  }
  Value alloc(int64_t bytes, StringRef name = "") {
    auto op = builder.create<rt::AllocOp>(
        loc, bufferType(), builder.getI64IntegerAttr(bytes), IntegerAttr(),
        name.empty() ? StringAttr() : builder.getStringAttr(name));
    return op.getBuffer();
  }
  Type bufferType() { return rt::BufferType::get(context); }
  Value view(Value base, int64_t offset) {
    return builder.create<rt::ViewOp>(loc, bufferType(), base,
                                      builder.getI64IntegerAttr(offset));
  }
  Value allocZeroed(int64_t bytes, StringRef name = "") {
    Value b = alloc(bytes, name);
    Args args(context);
    args.buffer(b).i64(bytes);
    call("zero", args);
    return b;
  }
  int64_t dtBytes(int64_t n) { return n * ::dprt::sizeOf(dt); }
  int64_t accBytes(int64_t n) { return n * ::dprt::sizeOf(acc); }

  // Functions.
  LogicalResult lowerInit();
  LogicalResult lowerApply();
  LogicalResult lowerBody(Block &body, bool isStep);
  LogicalResult lowerDescribe();

  // Ops of a step or forward body.
  LogicalResult lowerOp(Operation *op);
  Value buf(Value v) { return buffers.lookup(v); }
  Value paramPointer(FlatSymbolRefAttr ref);
  Value gradPointer(FlatSymbolRefAttr ref);
  Value accTarget(Value acc, Operation *user, Value result, StringRef name);
  Value normTarget(Operation *normOp);
  Value fusedNormTarget(ArrayRef<Value> perSampleGrads);
  Value newActivation(Value v, StringRef name = "") {
    Value b = alloc(dtBytes(numelOf(v)), name);
    buffers[v] = b;
    return b;
  }

  ModuleOp module;
  RecipeOp recipe;
  std::string backend;
  MLIRContext *context;
  OpBuilder builder;
  Location loc = UnknownLoc::get(context);

  ModelOp model;
  StepOp step;
  ForwardOp forward;
  int64_t ranks = 1;
  ::dprt::DType dt = ::dprt::DType::F32, acc = ::dprt::DType::F32;
  int64_t batch = 0;
  SmallVector<UnitInfo> units;
  llvm::StringMap<ParamInfo> params;
  SmallVector<std::string> inputGlobals;
  std::string stateGlobal, maskGlobal, lossGlobal;
  rt::ProgramOp program;

  // Per function.
  llvm::DenseMap<Value, Value> buffers;
  /// Saved statistics of a forward op: rstd, mean, lse, rotated q and k.
  llvm::DenseMap<Operation *, SmallVector<Value, 3>> saved;
  llvm::DenseMap<int64_t, Value> gathered, fullGrads;
  llvm::DenseMap<Operation *, Value> sumBuffers;
  Value logitsBuffer;
};

std::string ProgramLowering::addGlobal(StringRef name, int64_t bytes) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&program.getBody().front());
  builder.create<rt::GlobalOp>(loc, name, bytes, IntegerAttr());
  return name.str();
}

rt::FuncOp ProgramLowering::beginFunc(StringRef name, bool describe) {
  builder.setInsertionPointToEnd(&program.getBody().front());
  auto func = builder.create<rt::FuncOp>(loc, name, describe);
  builder.setInsertionPointToStart(&func.getBody().emplaceBlock());
  buffers.clear();
  saved.clear();
  gathered.clear();
  fullGrads.clear();
  sumBuffers.clear();
  return func;
}

void ProgramLowering::endFunc(ValueRange keep) {
  builder.create<rt::ReturnOp>(loc, keep);
}

LogicalResult ProgramLowering::collect() {
  forward = model.getForward();
  SmallVector<UnitOp> unitOps(model.getBody().front().getOps<UnitOp>());
  if (!step || unitOps.empty())
    return model.emitOpError("needs dp.step and dp.unit: run dp-backward, "
                             "dp-clip-plan and dp-shard first");
  Type compute = getComputeType(model);
  if (compute.isF16())
    return model.emitOpError("f16 is not supported by the runtime yet; use "
                             "bf16, f32 or f64");
  dt = toDType(compute);
  acc = ::dprt::accOf(dt);
  if (auto precision = recipe.getPrecision();
      precision && precision->getMaster() != getAccumulationType(model))
    return recipe.emitOpError("the runtime keeps master weights in ")
           << getAccumulationType(model) << " for " << compute
           << " models; master = " << precision->getMaster()
           << " is not supported yet";
  batch = recipe.getPhysicalBatch();
  ranks = getNumRanks(recipe);

  int64_t globalBase = 0;
  for (UnitOp unit : unitOps) {
    UnitInfo info;
    info.op = unit;
    info.index = units.size();
    info.shard = unit.getShard();
    info.numel = unit.getNumel();
    info.ranks = unit.getRanks();
    info.globalBase = globalBase;
    globalBase += unit.getNumel();
    for (auto [ref, offset] :
         llvm::zip(unit.getParams(), unit.getOffsets())) {
      auto name = cast<FlatSymbolRefAttr>(ref).getValue();
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(
          model, cast<FlatSymbolRefAttr>(ref));
      params[name] = {param, info.index, offset};
    }
    units.push_back(info);
  }
  return success();
}

LogicalResult ProgramLowering::run() {
  if (failed(collect()))
    return failure();
  builder.setInsertionPointAfter(recipe);
  program = rt::ProgramOp::create(
      builder, recipe.getLoc(),
      builder.getStringAttr(model.getSymName() + ".program"),
      /*prefetch=*/IntegerAttr(), /*arena_bytes=*/IntegerAttr(),
      /*peak_bytes=*/IntegerAttr());
  program.getBody().emplaceBlock();
  FSDPAttr policy = recipe.getShard().value_or(FSDPAttr());
  program.setPrefetch(policy ? policy.getPrefetch() : 1);
  loc = model.getLoc();

  stateGlobal = addGlobal("state", kStepStateBytes);
  for (BlockArgument input : forward.getInputs()) {
    int64_t bytes = numelOf(input) *
                    (isa<IntegerType>(tensorOf(input).getElementType())
                         ? 4
                         : ::dprt::sizeOf(dt));
    inputGlobals.push_back(
        addGlobal(("input" + std::to_string(input.getArgNumber())), bytes));
  }
  maskGlobal = addGlobal("mask", accBytes(batch));
  lossGlobal = addGlobal("loss", accBytes(batch));

  int64_t optimizerStates =
      llvm::TypeSwitch<Attribute, int64_t>(recipe.getOptimizer())
          .Case([](SGDAttr) { return 0; })
          .Case([](MomentumAttr) { return 1; })
          .Case([](AdamWAttr) { return 2; })
          .Default([](Attribute) { return 0; });
  for (UnitInfo &unit : units) {
    std::string name = unit.op.getSymName().str();
    unit.paramShard = addGlobal(name + ".params", dtBytes(unit.shard));
    unit.master = dt == acc ? unit.paramShard
                            : addGlobal(name + ".master", accBytes(unit.shard));
    unit.grad = addGlobal(name + ".grad", accBytes(unit.shard));
    if (optimizerStates >= 1)
      unit.state1 = addGlobal(name + ".opt1", accBytes(unit.shard));
    if (optimizerStates >= 2)
      unit.state2 = addGlobal(name + ".opt2", accBytes(unit.shard));
  }

  if (failed(lowerInit()))
    return failure();
  beginFunc("dp_microstep");
  if (failed(lowerBody(step.getBodyBlock(), /*isStep=*/true)))
    return failure();
  endFunc();
  if (failed(lowerApply()))
    return failure();
  beginFunc("dp_forward");
  if (failed(lowerBody(forward.getBodyBlock(), /*isStep=*/false)))
    return failure();
  endFunc(logitsBuffer ? ValueRange{logitsBuffer} : ValueRange{});
  if (failed(lowerDescribe()))
    return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// dp_init and dp_apply
//===----------------------------------------------------------------------===//

LogicalResult ProgramLowering::lowerInit() {
  beginFunc("dp_init");
  for (UnitInfo &unit : units) {
    Value master = global(unit.master);
    Args zeroMaster(context);
    zeroMaster.buffer(master).i64(accBytes(unit.shard));
    call("zero", zeroMaster);
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      ParamOp param = params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
      Attribute init = getEffectiveInit(param);
      int64_t count = param.getNumElements();
      Args args(context);
      args.dtype(acc).buffer(master).i64(unit.shard).i64(offset).i64(count);
      if (auto normal = dyn_cast<NormalInitAttr>(init)) {
        args.i64(unit.globalBase + offset)
            .f64(normal.getStd().convertToDouble());
        call("init_normal_range", args);
      } else if (auto uniform = dyn_cast<UniformInitAttr>(init)) {
        args.i64(unit.globalBase + offset)
            .f64(uniform.getBound().convertToDouble());
        call("init_uniform_range", args);
      } else {
        args.f64(isa<OnesInitAttr>(init) ? 1.0 : 0.0);
        call("fill_range", args);
      }
    }
    if (unit.master != unit.paramShard) {
      Args cast(context);
      cast.dtype(acc).buffer(master).dtype(dt).buffer(global(unit.paramShard))
          .i64(unit.shard);
      call("cast", cast);
    }
    for (const std::string &state : {unit.grad, unit.state1, unit.state2}) {
      if (state.empty())
        continue;
      Args zero(context);
      zero.buffer(global(state)).i64(accBytes(unit.shard));
      call("zero", zero);
    }
  }
  endFunc();
  return success();
}

LogicalResult ProgramLowering::lowerApply() {
  beginFunc("dp_apply");
  Attribute optimizer = recipe.getOptimizer();
  for (UnitInfo &unit : units) {
    // Trainable parameters that lie next to each other (alignment gaps
    // between them included) form one range: one call each.
    SmallVector<std::pair<int64_t, int64_t>> ranges;
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      ParamOp param = params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
      if (!param.getTrainable()) {
        ranges.push_back({-1, -1}); // a frozen parameter breaks the range
        continue;
      }
      int64_t end = offset + param.getNumElements();
      if (!ranges.empty() && ranges.back().first >= 0 &&
          int64_t(llvm::alignTo(ranges.back().second, kUnitAlignment)) ==
              offset)
        ranges.back().second = end;
      else
        ranges.push_back({offset, end});
    }
    llvm::erase_if(ranges, [](auto r) { return r.first < 0; });
    Value grad = global(unit.grad);
    Value master = global(unit.master);
    for (auto [begin, end] : ranges) {
      Args noise(context);
      noise.dtype(acc).buffer(grad).i64(unit.shard).i64(begin)
          .i64(end - begin).i64(unit.globalBase + begin);
      call("add_noise_range", noise);
      Args update(context);
      llvm::TypeSwitch<Attribute>(optimizer)
          .Case([&](SGDAttr sgd) {
            update.dtype(acc).buffer(master).buffer(grad).i64(unit.shard)
                .i64(begin).i64(end - begin)
                .f64(sgd.getLr().convertToDouble())
                .f64(sgd.getWeightDecay().convertToDouble());
            call("sgd_update_range", update);
          })
          .Case([&](MomentumAttr momentum) {
            update.dtype(acc).buffer(master).buffer(global(unit.state1))
                .buffer(grad).i64(unit.shard).i64(begin).i64(end - begin)
                .f64(momentum.getLr().convertToDouble())
                .f64(momentum.getMomentum().convertToDouble())
                .flag(momentum.getNesterov())
                .f64(momentum.getWeightDecay().convertToDouble());
            call("momentum_update_range", update);
          })
          .Case([&](AdamWAttr adamw) {
            update.dtype(acc).buffer(master).buffer(global(unit.state1))
                .buffer(global(unit.state2)).buffer(grad).i64(unit.shard)
                .i64(begin).i64(end - begin)
                .f64(adamw.getLr().convertToDouble())
                .f64(adamw.getBeta1().convertToDouble())
                .f64(adamw.getBeta2().convertToDouble())
                .f64(adamw.getEps().convertToDouble())
                .f64(adamw.getWeightDecay().convertToDouble());
            call("adamw_update_range", update);
          });
    }
    if (unit.master != unit.paramShard) {
      Args cast(context);
      cast.dtype(acc).buffer(master).dtype(dt).buffer(global(unit.paramShard))
          .i64(unit.shard);
      call("cast", cast);
    }
    Args zero(context);
    zero.buffer(grad).i64(accBytes(unit.shard));
    call("zero", zero);
  }
  endFunc();
  return success();
}

//===----------------------------------------------------------------------===//
// dp_microstep and dp_forward
//===----------------------------------------------------------------------===//

Value ProgramLowering::paramPointer(FlatSymbolRefAttr ref) {
  const ParamInfo &info = params[ref.getValue()];
  const UnitInfo &unit = units[info.unit];
  Value base;
  if (ranks == 1) {
    base = global(unit.paramShard);
  } else {
    base = gathered.lookup(info.unit);
    if (!base) {
      // dp_forward gathers on first use; the step has explicit gathers.
      base = alloc(dtBytes(unit.shard * ranks),
                   (unit.op.getSymName() + ".gathered").str());
      Args args(context);
      args.dtype(dt).buffer(global(unit.paramShard)).buffer(base)
          .i64(unit.shard);
      call("all_gather", args);
      gathered[info.unit] = base;
    }
  }
  if (info.offset == 0)
    return base;
  return view(base, dtBytes(info.offset));
}

Value ProgramLowering::gradPointer(FlatSymbolRefAttr ref) {
  const ParamInfo &info = params[ref.getValue()];
  const UnitInfo &unit = units[info.unit];
  Value base;
  if (ranks == 1) {
    base = global(unit.grad);
  } else {
    base = fullGrads.lookup(info.unit);
    if (!base) {
      base = allocZeroed(accBytes(unit.shard * ranks),
                         (unit.op.getSymName() + ".fullgrad").str());
      fullGrads[info.unit] = base;
    }
  }
  if (info.offset == 0)
    return base;
  return view(base, accBytes(info.offset));
}

/// The buffer a gradient op writes when it accumulates onto `acc`: acc's own
/// buffer when this is acc's last use, else a copy of it.
Value ProgramLowering::accTarget(Value accValue, Operation *user,
                                 Value result, StringRef name) {
  if (!accValue)
    return newActivation(result, name);
  bool lastUse = llvm::all_of(accValue.getUsers(), [&](Operation *other) {
    return other == user || other->isBeforeInBlock(user);
  });
  Value target;
  if (lastUse) {
    target = buf(accValue);
  } else {
    target = alloc(dtBytes(numelOf(result)), name);
    Args copy(context);
    copy.dtype(dt).buffer(buf(accValue)).dtype(dt).buffer(target)
        .i64(numelOf(result));
    call("cast", copy);
  }
  buffers[result] = target;
  return target;
}

/// Norm kernels add into their target: the buffer of the dp.norm_sum that
/// consumes them, or a zeroed buffer of their own.
Value ProgramLowering::normTarget(Operation *normOp) {
  Value result = normOp->getResult(0);
  Operation *sum = nullptr;
  if (result.hasOneUse() && isa<NormSumOp>(*result.getUsers().begin()))
    sum = *result.getUsers().begin();
  if (sum) {
    Value &b = sumBuffers[sum];
    if (!b)
      b = allocZeroed(accBytes(batch), "n2");
    buffers[result] = b;
    return b;
  }
  Value b = allocZeroed(accBytes(batch), "n2");
  buffers[result] = b;
  return b;
}

/// The norm buffer a normalization backward kernel adds into when the
/// dp.norm_rows of its per-sample gradients are fused into it; null if not.
Value ProgramLowering::fusedNormTarget(ArrayRef<Value> perSampleGrads) {
  // dp-fuse-norms fuses the norm_rows of one op only when they all add into
  // the same buffer.
  Value target;
  for (Value grads : perSampleGrads) {
    if (!grads)
      continue;
    for (Operation *user : grads.getUsers())
      if (auto rows = dyn_cast<NormRowsOp>(user); rows && rows.getFused())
        target = normTarget(rows);
  }
  return target;
}

LogicalResult ProgramLowering::lowerBody(Block &body, bool isStep) {
  for (auto [input, name] : llvm::zip(body.getArguments(), inputGlobals))
    buffers[input] = global(name);
  if (isStep)
    buffers[step.getMask()] = global(maskGlobal);
  for (Operation &op : body) {
    if (isa<YieldOp, ReturnOp>(op)) {
      // The per-sample loss ends in the loss buffer the driver reads.
      Value loss = buf(op.getOperand(0));
      auto lossRef = loss.getDefiningOp<rt::GetGlobalOp>();
      if (lossRef && lossRef.getGlobal() == lossGlobal)
        continue;
      Args copy(context);
      copy.dtype(acc).buffer(loss).dtype(acc).buffer(global(lossGlobal))
          .i64(batch);
      call("cast", copy);
      continue;
    }
    if (failed(lowerOp(&op)))
      return failure();
  }
  return success();
}

LogicalResult ProgramLowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  auto isLoss = [&](Value v) {
    return llvm::any_of(v.getUsers(),
                        [](Operation *u) { return isa<YieldOp, ReturnOp>(u); });
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](EmbeddingOp e) -> LogicalResult {
        if (!tensorOf(e.getTokens()).getElementType().isInteger(32))
          return e.emitOpError("the runtime reads int32 token ids");
        Value out = newActivation(e.getOutput(), "embedding");
        Args a(context);
        a.dtype(dt).buffer(buf(e.getTokens())).buffer(paramPointer(e.getTableAttr()))
            .buffer(out).i64(numelOf(e.getTokens()))
            .i64(params[e.getTable()].op.getTensorType().getDimSize(0))
            .i64(lastDim(e.getOutput()));
        call("embedding_forward", a);
        return success();
      })
      .Case([&](LinearOp l) {
        Value y = newActivation(l.getOutput(), "linear");
        Args a(context);
        a.dtype(dt).buffer(buf(l.getInput())).buffer(paramPointer(l.getWeightAttr()));
        FlatSymbolRefAttr bias = l.getBiasAttr();
        a.bufferOrNull(bias ? paramPointer(bias) : Value());
        a.buffer(y).i64(rowsOf(l.getInput())).i64(lastDim(l.getInput()))
            .i64(lastDim(l.getOutput()));
        call("linear_forward", a);
        return success();
      })
      .Case([&](RMSNormOp n) {
        Value y = newActivation(n.getOutput(), "rms_norm");
        Value rstd = alloc(accBytes(rowsOf(n.getInput())), "rstd");
        saved[op] = {rstd};
        Args a(context);
        a.dtype(dt).buffer(buf(n.getInput())).buffer(paramPointer(n.getScaleAttr()))
            .buffer(y).buffer(rstd).i64(rowsOf(n.getInput()))
            .i64(lastDim(n.getInput())).f64(n.getEps().convertToDouble());
        call("rms_norm_forward", a);
        return success();
      })
      .Case([&](LayerNormOp n) {
        Value y = newActivation(n.getOutput(), "layer_norm");
        Value mean = alloc(accBytes(rowsOf(n.getInput())), "mean");
        Value rstd = alloc(accBytes(rowsOf(n.getInput())), "rstd");
        saved[op] = {mean, rstd};
        Args a(context);
        a.dtype(dt).buffer(buf(n.getInput())).buffer(paramPointer(n.getScaleAttr()));
        FlatSymbolRefAttr bias = n.getBiasAttr();
        a.bufferOrNull(bias ? paramPointer(bias) : Value());
        a.buffer(y).buffer(mean).buffer(rstd).i64(rowsOf(n.getInput()))
            .i64(lastDim(n.getInput())).f64(n.getEps().convertToDouble());
        call("layer_norm_forward", a);
        return success();
      })
      .Case([&](AttentionOp at) {
        int64_t b = batchOf(at.getQuery()), t = tokensOf(at.getQuery());
        int64_t h = at.getNumHeads(), kv = at.getNumKVHeads(),
                hd = at.getHeadDim();
        double theta = at.getRopeTheta().convertToDouble();
        Value q = buf(at.getQuery()), k = buf(at.getKey());
        if (at.getRope()) {
          auto rotate = [&](Value x, Value in, int64_t heads, StringRef name) {
            Value out = alloc(dtBytes(numelOf(x)), name);
            Args a(context);
            a.dtype(dt).buffer(in).buffer(out).i64(b).i64(t).i64(heads)
                .i64(hd).f64(theta);
            call("rope_forward", a);
            return out;
          };
          q = rotate(at.getQuery(), q, h, "q_rope");
          k = rotate(at.getKey(), k, kv, "k_rope");
        }
        Value o = newActivation(at.getOutput(), "attention");
        Value lse = alloc(accBytes(b * h * t), "lse");
        saved[op] = {q, k, lse};
        Args a(context);
        a.dtype(dt).buffer(q).buffer(k).buffer(buf(at.getValue())).buffer(o)
            .buffer(lse).i64(b).i64(t).i64(h).i64(kv).i64(hd)
            .flag(at.getCausal());
        call("attention_forward", a);
        return success();
      })
      .Case<ReluOp, SiluOp, GeluOp>([&](auto act) {
        rt::Activation kind = rt::Activation::Relu;
        if (isa<SiluOp>(op))
          kind = rt::Activation::Silu;
        if (auto gelu = dyn_cast<GeluOp>(op))
          kind = gelu.getApproximation() == GeluApproximation::tanh
                     ? rt::Activation::GeluTanh
                     : rt::Activation::GeluErf;
        Value y = newActivation(act.getOutput(), "activation");
        Args a(context);
        a.dtype(dt).attr(rt::ActivationAttr::get(context, kind))
            .buffer(buf(act.getInput())).buffer(y)
            .i64(numelOf(act.getInput()));
        call("activation_forward", a);
        return success();
      })
      .Case<AddOp, MulOp>([&](auto binary) {
        Value y = newActivation(binary.getOutput(), "sum");
        Args a(context);
        a.dtype(dt).buffer(buf(binary.getLhs())).buffer(buf(binary.getRhs()))
            .buffer(y).i64(numelOf(binary.getOutput()));
        call(isa<AddOp>(op) ? "add_forward" : "mul_forward", a);
        return success();
      })
      .Case([&](CrossEntropyOp ce) -> LogicalResult {
        if (!tensorOf(ce.getTargets()).getElementType().isInteger(32))
          return ce.emitOpError("the runtime reads int32 targets");
        Value loss = isLoss(ce.getLoss()) ? global(lossGlobal)
                                          : alloc(accBytes(batch), "loss");
        buffers[ce.getLoss()] = loss;
        Value lse = alloc(accBytes(rowsOf(ce.getLogits())), "ce_lse");
        saved[op] = {lse};
        logitsBuffer = buf(ce.getLogits());
        Args a(context);
        a.dtype(dt).buffer(buf(ce.getLogits())).buffer(buf(ce.getTargets()))
            .buffer(loss).buffer(lse).i64(batchOf(ce.getLogits()))
            .i64(tokensOf(ce.getLogits())).i64(lastDim(ce.getLogits()))
            .flag(ce.getIgnoreIndex().has_value())
            .i64(ce.getIgnoreIndex().value_or(0))
            .attr(rt::ReductionAttr::get(context, toRuntime(ce.getPerSample())));
        call("cross_entropy_forward", a);
        return success();
      })
      .Case([&](MSEOp mse) {
        Value loss = isLoss(mse.getLoss()) ? global(lossGlobal)
                                           : alloc(accBytes(batch), "loss");
        buffers[mse.getLoss()] = loss;
        Args a(context);
        a.dtype(dt).buffer(buf(mse.getPrediction())).buffer(buf(mse.getTarget()))
            .buffer(loss).i64(batchOf(mse.getPrediction()))
            .i64(numelOf(mse.getPrediction()) / batchOf(mse.getPrediction()))
            .attr(rt::ReductionAttr::get(context, toRuntime(mse.getPerSample())));
        call("mse_forward", a);
        return success();
      })
      // Backward.
      .Case([&](CrossEntropyGradOp g) {
        CrossEntropyOp ce = g.getForwardOp();
        Value d = newActivation(g.getDlogits(), "dlogits");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getLogits())).buffer(buf(g.getTargets()))
            .buffer(saved[ce][0]).buffer(buf(g.getDloss())).buffer(d)
            .i64(batchOf(g.getLogits())).i64(tokensOf(g.getLogits()))
            .i64(lastDim(g.getLogits()))
            .flag(ce.getIgnoreIndex().has_value())
            .i64(ce.getIgnoreIndex().value_or(0))
            .attr(rt::ReductionAttr::get(context, toRuntime(ce.getPerSample())));
        call("cross_entropy_backward", a);
        return success();
      })
      .Case([&](MSEGradOp g) {
        Value d = newActivation(g.getDprediction(), "dprediction");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getPrediction())).buffer(buf(g.getTarget()))
            .buffer(buf(g.getDloss())).buffer(d)
            .i64(batchOf(g.getPrediction()))
            .i64(numelOf(g.getPrediction()) / batchOf(g.getPrediction()))
            .attr(rt::ReductionAttr::get(context, toRuntime(g.getPerSample())));
        call("mse_backward", a);
        return success();
      })
      .Case([&](LinearGradInputOp g) {
        Value dx = accTarget(g.getAcc(), op, g.getDx(), "dx");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getDy())).buffer(paramPointer(g.getWeightAttr()))
            .buffer(dx).i64(rowsOf(g.getDy())).i64(lastDim(g.getDx()))
            .i64(lastDim(g.getDy())).flag(bool(g.getAcc()));
        call("linear_backward_input", a);
        return success();
      })
      .Case([&](RMSNormGradOp g) {
        Operation *fwd = g.getY().getDefiningOp();
        Value dx = accTarget(g.getAcc(), op, g.getDx(), "dx");
        Value gs;
        if (!g.getScaleGrads().use_empty()) {
          gs = alloc(accBytes(numelOf(g.getScaleGrads())), "scale_grads");
          buffers[g.getScaleGrads()] = gs;
        }
        Value n2 = fusedNormTarget({g.getScaleGrads()});
        Args a(context);
        a.dtype(dt).buffer(buf(g.getX())).buffer(paramPointer(g.getScaleAttr()))
            .buffer(saved[fwd][0]).buffer(buf(g.getDy())).buffer(dx)
            .bufferOrNull(gs);
        if (n2)
          a.buffer(n2);
        a.i64(batchOf(g.getX())).i64(tokensOf(g.getX())).i64(lastDim(g.getX()))
            .flag(bool(g.getAcc()));
        call(n2 ? "rms_norm_backward_norm" : "rms_norm_backward", a);
        return success();
      })
      .Case([&](LayerNormGradOp g) {
        Operation *fwd = g.getY().getDefiningOp();
        Value dx = accTarget(g.getAcc(), op, g.getDx(), "dx");
        Value gs, bs;
        if (!g.getScaleGrads().use_empty()) {
          gs = alloc(accBytes(numelOf(g.getScaleGrads())), "scale_grads");
          buffers[g.getScaleGrads()] = gs;
        }
        if (g.getBiasGrads() && !g.getBiasGrads().use_empty()) {
          bs = alloc(accBytes(numelOf(g.getBiasGrads())), "bias_grads");
          buffers[g.getBiasGrads()] = bs;
        }
        Value n2 = fusedNormTarget({g.getScaleGrads(), g.getBiasGrads()});
        Args a(context);
        a.dtype(dt).buffer(buf(g.getX())).buffer(paramPointer(g.getScaleAttr()))
            .buffer(saved[fwd][0]).buffer(saved[fwd][1]).buffer(buf(g.getDy()))
            .buffer(dx).bufferOrNull(gs).bufferOrNull(bs);
        if (n2)
          a.buffer(n2);
        a.i64(batchOf(g.getX())).i64(tokensOf(g.getX())).i64(lastDim(g.getX()))
            .flag(bool(g.getAcc()));
        call(n2 ? "layer_norm_backward_norm" : "layer_norm_backward", a);
        return success();
      })
      .Case([&](AttentionGradOp g) {
        AttentionOp at = g.getForwardOp();
        int64_t b = batchOf(at.getQuery()), t = tokensOf(at.getQuery());
        int64_t h = at.getNumHeads(), kv = at.getNumKVHeads(),
                hd = at.getHeadDim();
        auto &stats = saved[at.getOperation()];
        Value dq = newActivation(g.getDquery(), "dq");
        Value dk = newActivation(g.getDkey(), "dk");
        Value dv = newActivation(g.getDvalue(), "dv");
        Args a(context);
        a.dtype(dt).buffer(stats[0]).buffer(stats[1]).buffer(buf(at.getValue()))
            .buffer(buf(at.getOutput())).buffer(stats[2]).buffer(buf(g.getDoutput()))
            .buffer(dq).buffer(dk).buffer(dv).i64(b).i64(t).i64(h).i64(kv)
            .i64(hd).flag(at.getCausal());
        call("attention_backward", a);
        if (at.getRope()) {
          double theta = at.getRopeTheta().convertToDouble();
          for (auto [d, heads] : {std::pair<Value, int64_t>{dq, h}, {dk, kv}}) {
            Args r(context);
            r.dtype(dt).buffer(d).buffer(d).i64(b).i64(t).i64(heads).i64(hd)
                .f64(theta).flag(false);
            call("rope_backward", r);
          }
        }
        return success();
      })
      .Case([&](ActivationGradOp g) {
        Value dx = accTarget(g.getAcc(), op, g.getDx(), "dx");
        Args a(context);
        a.dtype(dt)
            .attr(rt::ActivationAttr::get(context, toRuntime(g.getKind())))
            .buffer(buf(g.getX())).buffer(buf(g.getDy()))
            .buffer(dx).i64(numelOf(g.getX())).flag(bool(g.getAcc()));
        call("activation_backward", a);
        return success();
      })
      .Case([&](MulGradOp g) {
        Value da, db;
        if (!g.getDlhs().use_empty())
          da = accTarget(g.getLhsAcc(), op, g.getDlhs(), "dlhs");
        if (!g.getDrhs().use_empty())
          db = accTarget(g.getRhsAcc(), op, g.getDrhs(), "drhs");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getLhs())).buffer(buf(g.getRhs()))
            .buffer(buf(g.getDy())).bufferOrNull(da).bufferOrNull(db)
            .i64(numelOf(g.getLhs())).flag(da && g.getLhsAcc())
            .flag(db && g.getRhsAcc());
        call("mul_backward", a);
        return success();
      })
      // Norms and clipping.
      .Case([&](NormRank1Op n) {
        Value n2 = normTarget(op);
        Args a(context);
        a.dtype(dt).buffer(buf(n.getX())).buffer(buf(n.getDy())).buffer(n2)
            .i64(batch).i64(lastDim(n.getX())).i64(lastDim(n.getDy()));
        call(n.getBias() ? "norm_rank1_bias" : "norm_rank1", a);
        return success();
      })
      .Case([&](NormGramOp n) {
        Value n2 = normTarget(op);
        int64_t t = tokensOf(n.getX());
        Value ka = alloc(accBytes(batch * t * t), "gram_a");
        Value kg = alloc(accBytes(batch * t * t), "gram_g");
        Args a(context);
        a.dtype(dt).buffer(buf(n.getX())).buffer(ka).i64(batch).i64(t)
            .i64(lastDim(n.getX())).flag(false);
        call("gram", a);
        for (auto [i, dy] : llvm::enumerate(n.getDys())) {
          Args g(context);
          g.dtype(dt).buffer(buf(dy)).buffer(kg).i64(batch).i64(t)
              .i64(lastDim(dy)).flag(i > 0);
          call("gram", g);
        }
        Args d(context);
        d.dtype(acc).buffer(ka).buffer(kg).buffer(n2).i64(batch).i64(t);
        call("gram_dot", d);
        return success();
      })
      .Case([&](NormDirectOp n) {
        Value n2 = normTarget(op);
        int64_t in = lastDim(n.getX()), out = lastDim(n.getDy());
        Value ws = alloc(::dprt::normDirectWorkspaceBytes(dt, in, out),
                         "direct_workspace");
        Args a(context);
        a.dtype(dt).buffer(buf(n.getX())).buffer(buf(n.getDy())).buffer(n2)
            .i64(batch).i64(tokensOf(n.getX())).i64(in).i64(out).buffer(ws);
        call(n.getBias() ? "norm_direct_bias" : "norm_direct", a);
        return success();
      })
      .Case([&](NormBiasOp n) {
        Value n2 = normTarget(op);
        Args a(context);
        a.dtype(dt).buffer(buf(n.getDy())).buffer(n2).i64(batch)
            .i64(tokensOf(n.getDy())).i64(lastDim(n.getDy()));
        call("norm_bias", a);
        return success();
      })
      .Case([&](NormEmbeddingOp n) {
        Value n2 = normTarget(op);
        Args a(context);
        a.dtype(dt).buffer(buf(n.getTokens())).buffer(buf(n.getDy())).buffer(n2)
            .i64(batch).i64(tokensOf(n.getDy())).i64(lastDim(n.getDy()));
        call("norm_embedding", a);
        return success();
      })
      .Case([&](NormRowsOp n) -> LogicalResult {
        // Fused: the backward op that formed the gradients added the norm.
        if (n.getFused()) {
          if (!buf(n.getNorms()))
            return n.emitOpError("is fused into an op that did not form its "
                                 "gradients");
          return success();
        }
        Value n2 = normTarget(op);
        Args a(context);
        a.dtype(acc).buffer(buf(n.getGrads())).buffer(n2).i64(batch)
            .i64(lastDim(n.getGrads()));
        call("norm_rows", a);
        return success();
      })
      .Case([&](NormSumOp s) -> LogicalResult {
        Value b = sumBuffers.lookup(op);
        if (!b)
          return s.emitOpError("sums values that are not per-sample norms");
        buffers[s.getNorms()] = b;
        return success();
      })
      .Case([&](ClipFactorOp c) {
        Value factors = alloc(accBytes(batch), "clip_factors");
        buffers[c.getFactors()] = factors;
        Args a(context);
        a.dtype(acc).buffer(buf(c.getNorms())).buffer(buf(c.getMask()))
            .buffer(factors).i64(batch)
            .attr(rt::ClipModeAttr::get(context, toRuntime(c.getMode())))
            .f64(c.getMaxNorm().convertToDouble())
            .f64(c.getGamma().convertToDouble())
            .f64(c.getRelErr().convertToDouble());
        call("clip_factors", a);
        return success();
      })
      // Clipped weight gradients.
      .Case([&](LinearGradWeightOp g) -> LogicalResult {
        if (!g.getScale())
          return g.emitOpError("has no clip factor: run dp-clip-plan; the "
                               "program never sums unclipped gradients");
        int64_t in = lastDim(g.getX()), out = lastDim(g.getDy());
        Value ws = alloc(::dprt::weightGradWorkspaceBytes(dt, rowsOf(g.getDy()),
                                                        out),
                         "wgrad_workspace");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getX())).buffer(buf(g.getDy()))
            .buffer(buf(g.getScale())).buffer(gradPointer(g.getWeightAttr()))
            .i64(batch).i64(tokensOf(g.getX())).i64(in).i64(out).buffer(ws);
        call("linear_weight_grad", a);
        return success();
      })
      .Case([&](BiasGradOp g) -> LogicalResult {
        if (!g.getScale())
          return g.emitOpError("has no clip factor: run dp-clip-plan; the "
                               "program never sums unclipped gradients");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getDy())).buffer(buf(g.getScale()))
            .buffer(gradPointer(g.getBiasAttr())).i64(batch)
            .i64(tokensOf(g.getDy())).i64(lastDim(g.getDy()));
        call("bias_grad", a);
        return success();
      })
      .Case([&](EmbeddingGradOp g) -> LogicalResult {
        if (!g.getScale())
          return g.emitOpError("has no clip factor: run dp-clip-plan; the "
                               "program never sums unclipped gradients");
        Args a(context);
        a.dtype(dt).buffer(buf(g.getTokens())).buffer(buf(g.getDy()))
            .buffer(buf(g.getScale())).buffer(gradPointer(g.getTableAttr()))
            .i64(batch).i64(tokensOf(g.getDy()))
            .i64(params[g.getTable()].op.getTensorType().getDimSize(0))
            .i64(lastDim(g.getDy()));
        call("embedding_grad", a);
        return success();
      })
      .Case([&](VectorGradOp g) -> LogicalResult {
        if (!g.getScale())
          return g.emitOpError("has no clip factor: run dp-clip-plan; the "
                               "program never sums unclipped gradients");
        Args a(context);
        a.dtype(acc).buffer(buf(g.getGrads())).buffer(buf(g.getScale()))
            .buffer(gradPointer(g.getParamAttr())).i64(batch)
            .i64(lastDim(g.getGrads()));
        call("rows_weighted_sum", a);
        return success();
      })
      // FSDP.
      .Case([&](AllGatherOp g) {
        int64_t index = 0;
        for (const UnitInfo &unit : units)
          if (unit.op.getSymName() == g.getUnit())
            index = unit.index;
        const UnitInfo &unit = units[index];
        Value full = alloc(dtBytes(unit.shard * ranks),
                           (g.getUnit() + ".gathered").str());
        Args a(context);
        a.dtype(dt).buffer(global(unit.paramShard)).buffer(full)
            .i64(unit.shard);
        call("all_gather", a);
        gathered[index] = full;
        return success();
      })
      .Case([&](ReduceScatterOp r) -> LogicalResult {
        int64_t index = 0;
        for (const UnitInfo &unit : units)
          if (unit.op.getSymName() == r.getUnit())
            index = unit.index;
        const UnitInfo &unit = units[index];
        Value full = fullGrads.lookup(index);
        if (!full)
          return r.emitOpError("has no gradient of the unit to reduce");
        Args a(context);
        a.dtype(acc).buffer(full).buffer(global(unit.grad)).i64(unit.shard)
            .flag(true);
        call("reduce_scatter", a);
        fullGrads.erase(index);
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("cannot be lowered to the runtime");
      });
}

//===----------------------------------------------------------------------===//
// dp_describe
//===----------------------------------------------------------------------===//

LogicalResult ProgramLowering::lowerDescribe() {
  beginFunc("dp_describe", /*describe=*/true);
  auto inputs = forward.getInputs();
  int64_t tokens = 1;
  for (BlockArgument input : inputs)
    if (tensorOf(input).getRank() >= 2 &&
        isa<IntegerType>(tensorOf(input).getElementType()))
      tokens = tensorOf(input).getDimSize(1);
  int64_t classes = 0;
  forward.walk([&](CrossEntropyOp ce) { classes = lastDim(ce.getLogits()); });

  Args program(context);
  program.string(model.getSymName()).string(backend).i32(ranks)
      .planned(rt::PlannedValue::ArenaBytes).buffer(global(stateGlobal))
      .dtype(dt).i64(batch)
      .i64(tokens).buffer(global(maskGlobal)).buffer(global(lossGlobal));
  if (classes > 0)
    program.planned(rt::PlannedValue::LogitsOffset);
  else
    program.i64(-1);
  program.i64(classes).planned(rt::PlannedValue::PeakBytes);
  call("describe_program", program);

  ClipAttr clip = recipe.getClip();
  Args r(context);
  r.attr(rt::ClipModeAttr::get(context, toRuntime(clip.getMode())))
      .f64(clip.getMaxNorm().convertToDouble())
      .f64(clip.getGamma().convertToDouble());
  NoiseGenerator generator = NoiseGenerator::fast;
  if (auto noise = dyn_cast<NoiseAttr>(recipe.getNoise())) {
    r.flag(false).f64(noise.getSigma().convertToDouble()).f64(0.0)
        .f64(noise.getDelta().convertToDouble());
    generator = noise.getGenerator();
  } else {
    auto target = cast<TargetAttr>(recipe.getNoise());
    r.flag(true).f64(0.0).f64(target.getEpsilon().convertToDouble())
        .f64(target.getDelta().convertToDouble());
    generator = target.getGenerator();
  }
  r.attr(rt::NoiseGeneratorKindAttr::get(
      context, generator == NoiseGenerator::secure
                   ? rt::NoiseGeneratorKind::ChaCha20
                   : rt::NoiseGeneratorKind::Philox));
  if (auto poisson = dyn_cast<PoissonAttr>(recipe.getSampling()))
    r.attr(rt::SamplingKindAttr::get(context, rt::SamplingKind::Poisson)).i64(poisson.getExpectedBatch())
        .f64(poisson.getRate().convertToDouble()).i64(0);
  else
    r.attr(rt::SamplingKindAttr::get(context, rt::SamplingKind::Shuffle)).i64(0).f64(0.0)
        .i64(cast<ShuffleAttr>(recipe.getSampling()).getBatch());
  r.i64(recipe.getSteps()).i64(recipe.getSeedAttr().getInt());
  call("describe_recipe", r);

  Args o(context);
  llvm::TypeSwitch<Attribute>(recipe.getOptimizer())
      .Case([&](SGDAttr sgd) {
        o.attr(rt::OptimizerKindAttr::get(context, rt::OptimizerKind::SGD)).f64(sgd.getLr().convertToDouble())
            .f64(0.0).flag(false).f64(0.0).f64(0.0).f64(0.0)
            .f64(sgd.getWeightDecay().convertToDouble());
      })
      .Case([&](MomentumAttr m) {
        o.attr(
             rt::OptimizerKindAttr::get(context, rt::OptimizerKind::Momentum))
            .f64(m.getLr().convertToDouble())
            .f64(m.getMomentum().convertToDouble()).flag(m.getNesterov())
            .f64(0.0).f64(0.0).f64(0.0)
            .f64(m.getWeightDecay().convertToDouble());
      })
      .Case([&](AdamWAttr a) {
        o.attr(rt::OptimizerKindAttr::get(context, rt::OptimizerKind::AdamW)).f64(a.getLr().convertToDouble())
            .f64(0.0).flag(false).f64(a.getBeta1().convertToDouble())
            .f64(a.getBeta2().convertToDouble())
            .f64(a.getEps().convertToDouble())
            .f64(a.getWeightDecay().convertToDouble());
      });
  call("describe_optimizer", o);

  // What each input holds, from how the forward pass reads it.
  for (auto [input, name] : llvm::zip(inputs, inputGlobals)) {
    std::optional<rt::InputRole> role;
    for (Operation *user : input.getUsers()) {
      if (auto e = dyn_cast<EmbeddingOp>(user); e && e.getTokens() == input)
        role = rt::InputRole::Tokens;
      if (auto ce = dyn_cast<CrossEntropyOp>(user); ce && ce.getTargets() == input)
        role = tensorOf(input).getRank() == 2 ? rt::InputRole::NextTokens
                                              : rt::InputRole::Label;
      if (auto mse = dyn_cast<MSEOp>(user); mse && mse.getTarget() == input)
        role = rt::InputRole::Target;
    }
    if (!role) {
      if (isa<IntegerType>(tensorOf(input).getElementType()))
        return forward.emitOpError("cannot tell what integer input #")
               << input.getArgNumber()
               << " holds: it is neither read by dp.embedding nor the "
                  "targets of dp.cross_entropy";
      role = rt::InputRole::Features;
    }
    ArrayRef<int64_t> shape = tensorOf(input).getShape().drop_front();
    Args in(context);
    in.string(("input" + std::to_string(input.getArgNumber())))
        .attr(rt::InputRoleAttr::get(context, *role))
        .buffer(global(name));
    for (int i = 0; i < 3; ++i)
      in.i64(i < int(shape.size()) ? shape[i] : 0);
    call("describe_input", in);
  }

  for (const UnitInfo &unit : units) {
    Args u(context);
    u.string(unit.op.getSymName()).i64(unit.numel).i64(unit.shard)
        .buffer(global(unit.paramShard)).buffer(global(unit.master))
        .buffer(global(unit.grad));
    for (const std::string &state : {unit.state1, unit.state2})
      u.bufferOrNull(state.empty() ? Value() : global(state));
    call("describe_unit", u);
  }
  for (const UnitInfo &unit : units) {
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      ParamOp param = params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
      ArrayRef<int64_t> shape = param.getTensorType().getShape();
      if (shape.size() > 4)
        return param.emitOpError("the runtime describes parameters of at "
                                 "most 4 dimensions");
      Args p(context);
      p.string(param.getSymName()).i32(unit.index).i64(offset)
          .i64(unit.globalBase + offset).flag(param.getTrainable());
      for (int i = 0; i < 4; ++i)
        p.i64(i < int(shape.size()) ? shape[i] : 0);
      call("describe_param", p);
    }
  }
  endFunc();
  return success();
}

struct LowerToRuntimePass
    : dpc::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  using LowerToRuntimeBase::LowerToRuntimeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.getOps<rt::ProgramOp>().empty()) {
      module.emitError("already holds a dprt.program");
      return signalPassFailure();
    }
    if (backend != "cpu" && backend != "cuda") {
      module.emitError("unknown backend '") << backend
                                            << "'; expected cpu or cuda";
      return signalPassFailure();
    }
    FailureOr<CompiledRecipe> compiled = findCompiledRecipe(module);
    if (failed(compiled))
      return signalPassFailure();
    ProgramLowering lowering(module, *compiled, backend);
    if (failed(lowering.run()))
      return signalPassFailure();
  }
};

} // namespace
