//===- DPStepOps.cpp - The training step: gradients, norms, FSDP ----------===//

#include "DP/DPOps.h"
#include "DP/DPSizes.h"

#include "dprt/types.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace dpc::dp;

//===----------------------------------------------------------------------===//
// StepOp
//===----------------------------------------------------------------------===//

LogicalResult StepOp::verifyRegions() {
  FunctionType type = getFunctionType();
  Block &body = getBodyBlock();
  if (body.getArgumentTypes() != type.getInputs())
    return emitOpError("block arguments do not match the function type");
  if (body.getNumArguments() < 2)
    return emitOpError("takes the forward pass's inputs and a mask");
  auto mask = dyn_cast<RankedTensorType>(getMask().getType());
  if (!mask || mask.getRank() != 1 || !mask.hasStaticShape() ||
      !isa<FloatType>(mask.getElementType()))
    return emitOpError("the last input is the mask, a static 1-D float "
                       "tensor; got ")
           << getMask().getType();
  int64_t batch = mask.getDimSize(0);
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getOperandTypes() != type.getResults())
    return emitOpError("must end with dp.yield of its result types");

  // The step is specialized to the physical batch: every tensor it computes
  // has the batch as its leading dimension, statically.
  for (Operation &op : body) {
    if (op.getDialect() != getOperation()->getDialect() ||
        isa<ModelOp, ParamOp, ForwardOp, RecipeOp, StepOp, UnitOp>(op))
      return op.emitOpError("cannot appear in a dp.step");
    for (Value result : op.getResults()) {
      auto tensor = dyn_cast<RankedTensorType>(result.getType());
      if (!tensor || !tensor.hasStaticShape() || tensor.getDimSize(0) != batch)
        return op.emitOpError("results in a dp.step are static tensors with ")
               << batch << " samples in their leading dimension; got "
               << result.getType();
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

CrossEntropyOp CrossEntropyGradOp::getForwardOp() {
  return getLoss().getDefiningOp<CrossEntropyOp>();
}

LogicalResult CrossEntropyGradOp::verify() {
  CrossEntropyOp forward = getForwardOp();
  if (!forward)
    return emitOpError("the loss operand must be the result of the "
                       "dp.cross_entropy being differentiated");
  if (forward.getLogits() != getLogits() ||
      forward.getTargets() != getTargets())
    return emitOpError("logits and targets must be those of the "
                       "dp.cross_entropy that produced the loss");
  return success();
}

AttentionOp AttentionGradOp::getForwardOp() {
  return getOutput().getDefiningOp<AttentionOp>();
}

LogicalResult AttentionGradOp::verify() {
  AttentionOp forward = getForwardOp();
  if (!forward)
    return emitOpError("the output operand must be the result of the "
                       "dp.attention being differentiated");
  if (forward.getQuery() != getQuery() || forward.getKey() != getKey() ||
      forward.getValue() != getValue())
    return emitOpError("query, key and value must be those of the "
                       "dp.attention that produced the output");
  return success();
}

SmallVector<FlatSymbolRefAttr, 2> LinearGradInputOp::getParamRefs() {
  return {getWeightAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> RMSNormGradOp::getParamRefs() {
  return {getScaleAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> LayerNormGradOp::getParamRefs() {
  SmallVector<FlatSymbolRefAttr, 2> refs{getScaleAttr()};
  if (FlatSymbolRefAttr bias = getBiasAttr())
    refs.push_back(bias);
  return refs;
}

SmallVector<FlatSymbolRefAttr, 2> LinearGradWeightOp::getParamRefs() {
  return {getWeightAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> BiasGradOp::getParamRefs() {
  return {getBiasAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> EmbeddingGradOp::getParamRefs() {
  return {getTableAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> PositionEmbeddingGradOp::getParamRefs() {
  return {getTableAttr()};
}

SmallVector<FlatSymbolRefAttr, 2> VectorGradOp::getParamRefs() {
  return {getParamAttr()};
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

LogicalResult NormGramOp::verify() {
  if (getDys().empty())
    return emitOpError("needs the output gradient of at least one layer");
  if (getParams().size() != getDys().size())
    return emitOpError("names ") << getParams().size() << " parameters for "
                                 << getDys().size() << " output gradients";
  ArrayRef<int64_t> rows = getX().getType().getShape().drop_back();
  for (Value dy : getDys())
    if (cast<RankedTensorType>(dy.getType()).getShape().drop_back() != rows)
      return emitOpError("every output gradient must have the rows of the "
                         "input");
  return success();
}

/// The operands of a tied norm: the embedding's tokens [B, T_e] and output
/// gradient [B, T_e, d], the head's input [B, T_h, d] and output gradient
/// [B, T_h, V].
static LogicalResult verifyTiedNorm(Operation *op, Value tokens,
                                    Value dembedding, Value x, Value dlogits,
                                    ArrayAttr params) {
  auto shape = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  if (params.size() != 1)
    return op->emitOpError("names ")
           << params.size() << " parameters; a tied norm is one table's";
  ArrayRef<int64_t> tok = shape(tokens), demb = shape(dembedding),
                    in = shape(x), dl = shape(dlogits);
  if (demb.size() != tok.size() + 1 || demb.drop_back() != tok)
    return op->emitOpError("the embedding's output gradient must have the "
                           "token shape followed by the width");
  if (in.drop_back() != dl.drop_back())
    return op->emitOpError("the head's input and output gradient must have "
                           "the same rows");
  if (in.back() != demb.back())
    return op->emitOpError("the head reads width ")
           << in.back() << " but the table has width " << demb.back();
  if (in.front() != tok.front())
    return op->emitOpError("the embedding and the head see different batches");
  return success();
}

LogicalResult NormTiedCrossOp::verify() {
  return verifyTiedNorm(*this, getTokens(), getDembedding(), getX(),
                        getDlogits(), getParams());
}

LogicalResult LinearPerSampleGradOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto dy = cast<RankedTensorType>(getDy().getType());
  auto grads = cast<RankedTensorType>(getGrads().getType());
  if (!x.hasStaticShape() || !dy.hasStaticShape() || !grads.hasStaticShape())
    return emitOpError("needs static shapes");
  // Rows: [B, d] and [B, p] (one row per sample) or [B, T, d] and [B, T, p].
  if (x.getRank() != dy.getRank() || x.getRank() < 2 || x.getRank() > 3 ||
      x.getShape().drop_back() != dy.getShape().drop_back())
    return emitOpError("takes the input and output gradient of one linear "
                       "layer, with the same samples and tokens; got ")
           << x << " and " << dy;
  int64_t batch = x.getDimSize(0);
  std::optional<int64_t> elements =
      llvm::checkedMul<int64_t>(x.getShape().back(), dy.getShape().back());
  if (grads.getRank() != 2 || grads.getDimSize(0) != batch || !elements ||
      grads.getDimSize(1) != *elements)
    return emitOpError("result must be [")
           << batch << ", " << dy.getShape().back() << " * "
           << x.getShape().back() << "], one weight gradient per sample; got "
           << getGrads().getType();
  // Stored in the compute type or as MXFP8: the norm and the clipped sum
  // read the same rounded values.
  Type compute = x.getElementType();
  if (dy.getElementType() != compute || (grads.getElementType() != compute &&
                                         !isMXFP8Rows(grads.getElementType())))
    return emitOpError("result must be in the operands' type ")
           << compute << " or f8E4M3FN (MXFP8); got " << dy.getElementType()
           << " and " << grads.getElementType();
  if (isMXFP8Rows(grads.getElementType())) {
    // A scale covers 32 consecutive elements of a row: within one row of
    // the weight only when d is a multiple of 32.
    if (x.getShape().back() % ::dprt::kMxBlock != 0)
      return emitOpError("MXFP8 (f8E4M3FN) rows need an input width that is "
                         "a multiple of ")
             << ::dprt::kMxBlock << " (one scale per " << ::dprt::kMxBlock
             << " elements of a weight row); got " << x.getShape().back();
    // The runtime sums their norms and clip-weighted rows in f32, the
    // accumulation type of bf16 and f32 models only.
    if (!compute.isBF16() && !compute.isF32())
      return emitOpError("MXFP8 (f8E4M3FN) rows need a bf16 or f32 model, "
                         "whose accumulation type is f32; got ")
             << compute;
  }
  return success();
}

LogicalResult NormTiedDirectOp::verify() {
  return verifyTiedNorm(*this, getTokens(), getDembedding(), getX(),
                        getDlogits(), getParams());
}

LogicalResult ClipFactorOp::verify() {
  auto emitError = [&] { return emitOpError(); };
  if (getMode() == ClipMode::none)
    return emitOpError("computes clip factors; mode none clips nothing");
  if (failed(verifyFloatField(emitError, "max_norm",
                              getMaxNorm().convertToDouble(),
                              FloatRange::above(0.0))) ||
      failed(verifyFloatField(emitError, "gamma", getGamma().convertToDouble(),
                              FloatRange::above(0.0))))
    return failure();
  return verifyFloatField(emitError, "rel_err", getRelErr().convertToDouble(),
                          FloatRange::atLeast(0.0));
}

//===----------------------------------------------------------------------===//
// FSDP
//===----------------------------------------------------------------------===//

LogicalResult UnitOp::verify() {
  ArrayRef<int64_t> offsets = getOffsets();
  if (offsets.size() != getParams().size())
    return emitOpError("has ") << getParams().size() << " parameters but "
                               << offsets.size() << " offsets";
  // The accessors return the attributes as unsigned: read them signed, so
  // that a negative size is seen as one.
  int64_t numel = getNumelAttr().getInt(), shard = getShardAttr().getInt(),
          ranks = getRanksAttr().getInt();
  if (ranks < 1 || shard < 0 || numel < 0)
    return emitOpError("needs at least one rank, a non-negative shard and "
                       "a non-negative numel; got ranks = ")
           << ranks << ", shard = " << shard << ", numel = " << numel;
  if (int64_t replicas = getReplicasAttr().getInt(); replicas < 1)
    return emitOpError("needs at least one replica; got replicas = ")
           << replicas;
  std::optional<int64_t> capacity = llvm::checkedMul(shard, ranks);
  if (!capacity)
    return emitOpError() << ranks << " shards of " << shard
                         << " elements overflow int64";
  if (numel > *capacity)
    return emitOpError("holds ") << numel << " elements but " << ranks
                                 << " shards of " << shard << " hold fewer";
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] >= numel)
      return emitOpError("offset ")
             << offsets[i] << " of " << getParams()[i]
             << " lies outside the unit's " << numel << " elements";
    if (i > 0 && offsets[i] <= offsets[i - 1])
      return emitOpError("offsets must increase");
  }
  return success();
}

/// Each parameter of the unit fits between its offset and the next one.
LogicalResult UnitOp::verifySymbolUses(SymbolTableCollection &tables) {
  ArrayRef<int64_t> offsets = getOffsets();
  int64_t numel = getNumelAttr().getInt();
  for (auto [index, ref] : llvm::enumerate(getParams())) {
    auto symbol = cast<FlatSymbolRefAttr>(ref);
    auto param =
        tables.lookupNearestSymbolFrom<ParamOp>(*this, symbol.getAttr());
    if (!param)
      return emitOpError("holds unknown parameter ") << symbol;
    bool last = index + 1 == offsets.size();
    int64_t end = last ? numel : offsets[index + 1];
    if (param.getNumElements() > end - offsets[index])
      return emitOpError("parameter ")
             << symbol << " of " << param.getNumElements()
             << " elements at offset " << offsets[index] << " overruns "
             << (last ? "the unit's numel " : "the next parameter's offset ")
             << end;
  }
  return success();
}

static LogicalResult verifyUnitRef(Operation *op, FlatSymbolRefAttr ref,
                                   SymbolTableCollection &tables) {
  if (!tables.lookupNearestSymbolFrom<UnitOp>(op, ref.getAttr()))
    return op->emitOpError("refers to unknown unit ") << ref;
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyUnitRef(*this, getUnitAttr(), tables);
}

LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyUnitRef(*this, getUnitAttr(), tables);
}
