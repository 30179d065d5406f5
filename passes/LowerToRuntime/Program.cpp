//===- Program.cpp - dp_describe ------------------------------------------===//
//
// dp_describe fills the ProgramSpec through the describe_* functions of
// runtime/include/dprt/program.h (runtime/common/Program.cpp): the arena,
// the recipe, the inputs and what each holds, the units and the parameters.
// Buffers stand for their offsets; the arena size, the peak and the logits'
// offset are #dprt.planned numbers the EmitC conversion fills in.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/ParamPatterns.h"
#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

void describeRecipe(LoweringContext &context) {
  MLIRContext *mlirContext = context.getContext();
  RecipeOp recipe = context.recipe;
  ClipAttr clip = recipe.getClip();
  CallArgs r = context.args();
  r.attr(clipModeAttr(clip.getMode(), mlirContext))
      .f64(clip.getMaxNorm().convertToDouble())
      .f64(clip.getGamma().convertToDouble());
  NoiseGenerator generator = NoiseGenerator::fast;
  Accountant accountant = Accountant::pld;
  if (auto noise = dyn_cast<NoiseAttr>(recipe.getNoise())) {
    r.flag(false)
        .f64(noise.getSigma().convertToDouble())
        .f64(0.0)
        .f64(noise.getDelta().convertToDouble());
    generator = noise.getGenerator();
    accountant = noise.getAccountant();
  } else if (isa<NoNoiseAttr>(recipe.getNoise())) {
    // No noise: no target, no sigma and no delta to state a guarantee at.
    r.flag(false).f64(0.0).f64(0.0).f64(0.0);
  } else {
    auto target = cast<TargetAttr>(recipe.getNoise());
    r.flag(true)
        .f64(0.0)
        .f64(target.getEpsilon().convertToDouble())
        .f64(target.getDelta().convertToDouble());
    generator = target.getGenerator();
    accountant = target.getAccountant();
  }
  rt::NoiseGeneratorKind kind =
      isa<NoNoiseAttr>(recipe.getNoise())   ? rt::NoiseGeneratorKind::None
      : generator == NoiseGenerator::secure ? rt::NoiseGeneratorKind::ChaCha20
                                            : rt::NoiseGeneratorKind::Philox;
  r.attr(rt::NoiseGeneratorKindAttr::get(mlirContext, kind));
  if (auto poisson = dyn_cast<PoissonAttr>(recipe.getSampling()))
    r.attr(rt::SamplingKindAttr::get(mlirContext, rt::SamplingKind::Poisson))
        .i64(poisson.getExpectedBatch())
        .f64(poisson.getRate().convertToDouble())
        .i64(0);
  else
    r.attr(rt::SamplingKindAttr::get(mlirContext, rt::SamplingKind::Shuffle))
        .i64(0)
        .f64(0.0)
        .i64(cast<ShuffleAttr>(recipe.getSampling()).getBatch());
  r.i64(recipe.getSteps()).i64(recipe.getSeedAttr().getInt());
  context.call("describe_recipe", r);

  const OptimizerSpec &optimizer = context.optimizer;
  CallArgs o = context.args();
  o.attr(rt::OptimizerKindAttr::get(mlirContext, optimizer.kind))
      .f64(optimizer.lr)
      .f64(optimizer.momentum)
      .flag(optimizer.nesterov)
      .f64(optimizer.beta1)
      .f64(optimizer.beta2)
      .f64(optimizer.eps)
      .f64(optimizer.weightDecay);
  context.call("describe_optimizer", o);

  // The runtime reads the decay and the accountant by the dp enums' names.
  CallArgs schedule = context.args();
  if (std::optional<ScheduleAttr> s = recipe.getSchedule())
    schedule.i64(s->getWarmup())
        .string(stringifyLrDecay(s->getDecay()))
        .f64(s->getMinLrRatio().convertToDouble());
  else
    schedule.i64(0).string(stringifyLrDecay(LrDecay::constant)).f64(0.0);
  context.call("describe_schedule", schedule);
  CallArgs account = context.args();
  account.string(stringifyAccountant(accountant));
  context.call("describe_accountant", account);
  if (std::optional<PrivacyUnitAttr> unit = recipe.getUnit();
      unit && unit->getKind() == UnitKind::user) {
    CallArgs u = context.args();
    u.i64(unit->getMaxRecords());
    context.call("describe_privacy_unit", u);
  }
}

/// What a forward input holds, from how the forward pass reads it.
FailureOr<rt::InputRole> roleOf(BlockArgument input, ForwardOp forward) {
  std::optional<rt::InputRole> role;
  for (Operation *user : input.getUsers()) {
    if (auto e = dyn_cast<EmbeddingOp>(user); e && e.getTokens() == input)
      role = rt::InputRole::Tokens;
    if (auto ce = dyn_cast<CrossEntropyOp>(user);
        ce && ce.getTargets() == input)
      role = tensorOf(input).getRank() == 2 ? rt::InputRole::NextTokens
                                            : rt::InputRole::Label;
    if (auto mse = dyn_cast<MSEOp>(user); mse && mse.getTarget() == input)
      role = rt::InputRole::Target;
  }
  if (role)
    return *role;
  if (isa<IntegerType>(tensorOf(input).getElementType()))
    return forward.emitOpError("cannot tell what integer input #")
           << input.getArgNumber()
           << " holds: it is neither read by dp.embedding nor the "
              "targets of dp.cross_entropy";
  return rt::InputRole::Features;
}

} // namespace

LogicalResult dpc::lowering::buildDescribe(LoweringContext &context) {
  context.beginFunc("dp_describe", /*describe=*/true);
  ForwardOp forward = context.forward;
  auto inputs = forward.getInputs();
  int64_t tokens = 1;
  for (BlockArgument input : inputs)
    if (tensorOf(input).getRank() >= 2 &&
        isa<IntegerType>(tensorOf(input).getElementType()))
      tokens = tensorOf(input).getDimSize(1);
  int64_t classes = 0;
  forward.walk([&](CrossEntropyOp ce) { classes = lastDim(ce.getLogits()); });

  CallArgs program = context.args();
  program.string(context.model.getSymName())
      .string(context.backend)
      .i32(context.ranks)
      .planned(rt::PlannedValue::ArenaBytes)
      .buffer(context.global(context.stateGlobal))
      .dtype(context.dt)
      .i64(context.batch)
      .i64(tokens)
      .buffer(context.global(context.maskGlobal))
      .buffer(context.global(context.lossGlobal));
  // Without logits (a regression model) the offset is -1.
  if (classes > 0)
    program.planned(rt::PlannedValue::LogitsOffset);
  else
    program.i64(-1);
  program.i64(classes).planned(rt::PlannedValue::PeakBytes);
  context.call("describe_program", program);
  if (context.replicas > 1) {
    CallArgs grid = context.args();
    grid.i32(context.replicas);
    context.call("describe_grid", grid);
  }

  // The per-sample loss's reduction, which an evaluation needs to weigh
  // samples by their tokens (one loss op per model: the verifier's rule).
  LossReduction reduction = LossReduction::mean;
  forward.walk([&](CrossEntropyOp ce) { reduction = ce.getPerSample(); });
  forward.walk([&](MSEOp mse) { reduction = mse.getPerSample(); });
  CallArgs loss = context.args();
  loss.attr(rt::ReductionAttr::get(context.getContext(),
                                   reduction == LossReduction::mean
                                       ? rt::Reduction::Mean
                                       : rt::Reduction::Sum));
  context.call("describe_loss", loss);

  describeRecipe(context);

  for (auto [input, name] : llvm::zip(inputs, context.inputGlobals)) {
    FailureOr<rt::InputRole> role = roleOf(input, forward);
    if (failed(role))
      return failure();
    ArrayRef<int64_t> shape = tensorOf(input).getShape().drop_front();
    CallArgs in = context.args();
    in.string(("input" + std::to_string(input.getArgNumber())))
        .attr(rt::InputRoleAttr::get(context.getContext(), *role))
        .buffer(context.global(name));
    for (int i = 0; i < 3; ++i)
      in.i64(i < int(shape.size()) ? shape[i] : 0);
    context.call("describe_input", in);
  }

  for (const UnitInfo &unit : context.units) {
    CallArgs u = context.args();
    u.string(unit.op.getSymName())
        .i64(unit.numel)
        .i64(unit.shard)
        .bufferOrNull(unit.castFromMaster ? Value()
                                          : context.global(unit.paramShard))
        .buffer(context.global(unit.master))
        .bufferOrNull(unit.grad.empty() ? Value() : context.global(unit.grad));
    // A state the optimizer does not keep has offset -1.
    for (const std::string *state : {&unit.state1, &unit.state2})
      u.bufferOrNull(state->empty() ? Value() : context.global(*state));
    u.flag(unit.sumsFromRows);
    context.call("describe_unit", u);
  }
  for (const UnitInfo &unit : context.units) {
    for (auto [ref, offset] :
         llvm::zip(unit.op.getParams(), unit.op.getOffsets())) {
      ParamOp param =
          context.params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
      ArrayRef<int64_t> shape = param.getTensorType().getShape();
      if (shape.size() > 4)
        return param.emitOpError("the runtime describes parameters of at "
                                 "most 4 dimensions");
      CallArgs p = context.args();
      p.string(param.getSymName())
          .i32(unit.index)
          .i64(offset)
          .i64(unit.globalBase + offset)
          .flag(param.getTrainable());
      for (int i = 0; i < 4; ++i)
        p.i64(i < int(shape.size()) ? shape[i] : 0);
      // The Hugging Face tensor it comes from (docs/huggingface.md), if the
      // importer recorded one.
      auto hfName = param->getAttrOfType<StringAttr>("hf.name");
      auto hfRows = param->getAttrOfType<DenseI64ArrayAttr>("hf.rows");
      if ((param->hasAttr("hf.transposed") || hfRows) && !hfName)
        return param.emitOpError("has hf.transposed or hf.rows but no hf.name");
      if (param->hasAttr("hf.transposed") && shape.size() != 2)
        return param.emitOpError("has hf.transposed but ")
               << shape.size() << " dimensions (transposition needs 2)";
      // The rows are the parameter's first dimension.
      if (hfRows && (hfRows.size() != 2 || hfRows[0] < 0 ||
                     hfRows[1] - hfRows[0] != shape[0]))
        return param.emitOpError("hf.rows must be [begin, end) with end - "
                                 "begin = ")
               << shape[0] << " (the parameter's rows)";
      p.string(hfName ? hfName.getValue() : "")
          .flag(param->hasAttr("hf.transposed"))
          .i64(hfRows ? hfRows[0] : -1)
          .i64(hfRows ? hfRows[1] : -1);
      context.call("describe_param", p);
      // Its clipped sum formed in dp_apply: its gradient stays zero, and
      // the driver's finiteness check skips it.
      if (context.rowsUpdates.contains(param.getSymName())) {
        CallArgs r = context.args();
        r.string(param.getSymName());
        context.call("describe_update_from_rows", r);
      }
      // Its gradient written anew by every micro-step: the driver runs no
      // step of more than one (or none).
      if (context.overwrittenGradients.contains(param.getSymName())) {
        CallArgs r = context.args();
        r.string(param.getSymName());
        context.call("describe_gradient_overwritten", r);
      }
    }
  }
  // dp-lora's adapters, for the export of a peft adapter (docs/lora.md).
  if (std::optional<LoRAAttr> lora = context.recipe.getLora()) {
    std::string targets;
    for (Attribute target : lora->getTargets()) {
      StringRef text = cast<StringAttr>(target).getValue();
      if (text.contains(','))
        return context.recipe.emitOpError("lora target '")
               << text << "' contains ',', which the runtime cannot list";
      targets += (targets.empty() ? "" : ",") + text.str();
    }
    CallArgs l = context.args();
    l.i64(lora->getRank())
        .f64(lora->getAlpha().convertToDouble())
        .string(targets);
    context.call("describe_lora", l);
    for (const UnitInfo &unit : context.units)
      for (Attribute ref : unit.op.getParams()) {
        ParamOp param =
            context.params[cast<FlatSymbolRefAttr>(ref).getValue()].op;
        auto base = param->getAttrOfType<FlatSymbolRefAttr>(kLoRABaseAttr);
        if (!base)
          continue;
        StringRef name = param.getSymName();
        StringRef role = name.ends_with(".lora_A")   ? "A"
                         : name.ends_with(".lora_B") ? "B"
                                                     : "scale";
        auto peft = param->getAttrOfType<StringAttr>(kPeftNameAttr);
        CallArgs a = context.args();
        a.string(name)
            .string(base.getValue())
            .string(role)
            .string(peft ? peft.getValue() : "");
        context.call("describe_adapter", a);
      }
  }
  context.endFunc();
  return success();
}
