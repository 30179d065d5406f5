//===- Dense.cpp - Embeddings and linear layers ---------------------------===//
//
// dp.embedding, dp.position_embedding, dp.linear and dp.linear_grad_input
// to the kernels of runtime/cpu/Dense.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

LogicalResult lowerEmbedding(EmbeddingOp e, LoweringContext &context) {
  if (!tensorOf(e.getTokens()).getElementType().isInteger(32))
    return e.emitOpError("the runtime reads int32 token ids");
  Value out = context.newActivation(e.getOutput(), "embedding");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(e.getTokens()))
      .buffer(context.paramPointer(e.getTableAttr()))
      .buffer(out)
      .i64(numelOf(e.getTokens()))
      .i64(context.params[e.getTable()].op.getTensorType().getDimSize(0))
      .i64(lastDim(e.getOutput()));
  context.call("embedding_forward", a);
  return success();
}

LogicalResult lowerPositionEmbedding(PositionEmbeddingOp p,
                                     LoweringContext &context) {
  Value y = context.newActivation(p.getOutput(), "positions");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(p.getInput()))
      .buffer(context.paramPointer(p.getTableAttr()))
      .buffer(y)
      .i64(batchOf(p.getInput()))
      .i64(tokensOf(p.getInput()))
      .i64(lastDim(p.getInput()));
  context.call("position_embedding_forward", a);
  return success();
}

LogicalResult lowerLinear(LinearOp l, LoweringContext &context) {
  Value y = context.newActivation(l.getOutput(), "linear");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(l.getInput()))
      .buffer(context.paramPointer(l.getWeightAttr()));
  FlatSymbolRefAttr bias = l.getBiasAttr();
  a.bufferOrNull(bias ? context.paramPointer(bias) : Value());
  Value addend = l.getAddend();
  a.bufferOrNull(addend ? context.buf(addend) : Value());
  a.buffer(y)
      .i64(rowsOf(l.getInput()))
      .i64(lastDim(l.getInput()))
      .i64(lastDim(l.getOutput()));
  context.call("linear_forward", a);
  return success();
}

LogicalResult lowerLinearGradInput(LinearGradInputOp g,
                                   LoweringContext &context) {
  Value dx = context.accTarget(g.getAcc(), g, g.getDx(), "dx");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getDy()))
      .buffer(context.paramPointer(g.getWeightAttr()))
      .buffer(dx)
      .i64(rowsOf(g.getDy()))
      .i64(lastDim(g.getDx()))
      .i64(lastDim(g.getDy()))
      .flag(bool(g.getAcc()));
  context.call("linear_backward_input", a);
  return success();
}

} // namespace

void dpc::lowering::populateDenseLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerEmbedding);
  registry.add(lowerPositionEmbedding);
  registry.add(lowerLinear);
  registry.add(lowerLinearGradInput);
}
