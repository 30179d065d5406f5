//===- WeightGrads.cpp - Clipped weight gradients -------------------------===//
//
// dp.linear_grad_weight, dp.bias_grad, dp.embedding_grad,
// dp.position_embedding_grad and dp.vector_grad to the kernels of
// runtime/cpu/WeightGrads.cpp, which add the clipped sum over the batch into
// the parameter's gradient (shard or full unit gradient), or write it there
// (linear_weight_grad, where chooseGradientWrites found nothing else to add
// to it: one micro-step a step, one gradient op). Only clipped
// gradients are ever summed: a weight gradient without its clip factor is an
// error. A table tied to a linear head gets both its embedding_grad and its
// linear_grad_weight, which add into the one gradient.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

LogicalResult requireClipFactor(Operation *op, Value scale) {
  if (!scale)
    return op->emitOpError("has no clip factor: run dp-clip-plan; the "
                           "program never sums unclipped gradients");
  return success();
}

LogicalResult lowerLinearGradWeight(LinearGradWeightOp g,
                                    LoweringContext &context) {
  if (failed(requireClipFactor(g, g.getScale())))
    return failure();
  int64_t in = lastDim(g.getX()), out = lastDim(g.getDy());
  int64_t rows = rowsOf(g.getDy());
  ::dprt::DType dt = context.dt;
  int64_t tokens = tokensOf(g.getX()),
          batch = rows / std::max<int64_t>(tokens, 1);
  // Weighted by the mask alone (DP off: dp-clip-plan's scale is the step's
  // mask): the backward's seed is that mask, so dy is already zero on every
  // row of a padding sample (0 or 1 times the loss gradient, and padding
  // rows hold valid inputs: token 0, no target), and diag(mask) dy = dy.
  // The kernel then skips the pass that scales dy into the workspace (3 %
  // of the 1.1B model's step) and multiplies dy itself.
  bool unweighted = g.getScale() == context.step.getMask();
  Value ws;
  if (!unweighted)
    ws = context.allocWorkspace(
        "wgrad_workspace", {batch, tokens, out, ::dprt::sizeOf(dt)}, [&] {
          return ::dprt::weightGradWorkspaceBytes(dt, batch, tokens, out);
        });
  CallArgs a = context.args();
  a.dtype(dt)
      .buffer(context.buf(g.getX()))
      .buffer(context.buf(g.getDy()))
      .bufferOrNull(unweighted ? Value() : context.buf(g.getScale()))
      .buffer(context.gradPointer(g.getWeightAttr()))
      .i64(context.batch)
      .i64(tokensOf(g.getX()))
      .i64(in)
      .i64(out)
      .bufferOrNull(ws)
      .flag(!context.overwrittenGradients.contains(g.getWeight()));
  context.call("linear_weight_grad", a);
  return success();
}

/// grad[j] += sum_b c_b sum_t dy[b, t, j] over `width` values a token.
void callBiasGrad(LoweringContext &context, Value dy, Value scale, Value grad,
                  int64_t tokens, int64_t width) {
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(dy))
      .buffer(context.buf(scale))
      .buffer(grad)
      .i64(context.batch)
      .i64(tokens)
      .i64(width);
  context.call("bias_grad", a);
}

LogicalResult lowerBiasGrad(BiasGradOp g, LoweringContext &context) {
  if (failed(requireClipFactor(g, g.getScale())))
    return failure();
  callBiasGrad(context, g.getDy(), g.getScale(),
               context.gradPointer(g.getBiasAttr()), tokensOf(g.getDy()),
               lastDim(g.getDy()));
  return success();
}

LogicalResult lowerEmbeddingGrad(EmbeddingGradOp g, LoweringContext &context) {
  if (failed(requireClipFactor(g, g.getScale())))
    return failure();
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getTokens()))
      .buffer(context.buf(g.getDy()))
      .buffer(context.buf(g.getScale()))
      .buffer(context.gradPointer(g.getTableAttr()))
      .i64(context.batch)
      .i64(tokensOf(g.getDy()))
      .i64(context.params[g.getTable()].op.getTensorType().getDimSize(0))
      .i64(lastDim(g.getDy()));
  context.call("embedding_grad", a);
  return success();
}

/// Row t < T of the table's gradient += sum_b c_b dy[b, t]: those rows are
/// the table's first T * d elements, so this is bias_grad with one "token"
/// of T * d values per sample.
LogicalResult lowerPositionEmbeddingGrad(PositionEmbeddingGradOp g,
                                         LoweringContext &context) {
  if (failed(requireClipFactor(g, g.getScale())))
    return failure();
  callBiasGrad(context, g.getDy(), g.getScale(),
               context.gradPointer(g.getTableAttr()), 1,
               tokensOf(g.getDy()) * lastDim(g.getDy()));
  return success();
}

/// Leaves the clipped sum of `g`, a candidate of chooseGradientWrites, to
/// dp_apply (sum-in-update): carries its per-sample gradients and clip
/// factors. False where one of them is not a temporary of this function.
bool leaveSumToUpdate(VectorGradOp g, LoweringContext &context) {
  if (!context.rowsUpdateCandidates.contains(g.getParam()))
    return false;
  auto rows = context.temporaryUnder(context.buf(g.getGrads()));
  auto factors = context.temporaryUnder(context.buf(g.getScale()));
  // The kernels take the factors from their first byte. Nothing is carried
  // unless both are: a carried buffer lives on into dp_apply.
  if (!rows || !factors || factors->second != 0)
    return false;
  context.rowsUpdates[g.getParam()] = RowsUpdate{
      context.carry(rows->first), context.carry(factors->first), rows->second,
      toDType(g.getGrads().getType()), lastDim(g.getGrads())};
  return true;
}

LogicalResult lowerVectorGrad(VectorGradOp g, LoweringContext &context) {
  if (failed(requireClipFactor(g, g.getScale())))
    return failure();
  if (leaveSumToUpdate(g, context))
    return success();
  if (context.units[context.params[g.getParam()].unit].sumsFromRows)
    return g.emitOpError("cannot leave its sum to dp_apply, but its unit "
                         "keeps no gradient shard (a compiler bug)");
  CallArgs a = context.args();
  a.dtype(toDType(g.getGrads().getType()))
      .buffer(context.buf(g.getGrads()))
      .buffer(context.buf(g.getScale()))
      .buffer(context.gradPointer(g.getParamAttr()))
      .i64(context.batch)
      .i64(lastDim(g.getGrads()));
  context.call("rows_weighted_sum", a);
  return success();
}

} // namespace

void dpc::lowering::populateWeightGradsLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerLinearGradWeight);
  registry.add(lowerBiasGrad);
  registry.add(lowerEmbeddingGrad);
  registry.add(lowerPositionEmbeddingGrad);
  registry.add(lowerVectorGrad);
}
