//===- Losses.cpp - Cross-entropy and squared error -----------------------===//
//
// dp.cross_entropy, dp.mse and their gradient ops to the kernels of
// runtime/cpu/Losses.cpp. The per-sample loss the function returns is
// written straight into the loss global the driver reads.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

rt::ReductionAttr reductionOf(LossReduction reduction, MLIRContext *context) {
  return rt::ReductionAttr::get(context, reduction == LossReduction::mean
                                             ? rt::Reduction::Mean
                                             : rt::Reduction::Sum);
}

/// The buffer of a per-sample loss: the loss global when it is the function's
/// result, else a temporary.
Value lossBuffer(Value loss, LoweringContext &context) {
  Value b = context.isLoss(loss)
                ? context.global(context.lossGlobal)
                : context.alloc("loss", context.acc, {context.batch});
  context.setBuffer(loss, b);
  return b;
}

LogicalResult lowerCrossEntropy(CrossEntropyOp ce, LoweringContext &context) {
  if (!tensorOf(ce.getTargets()).getElementType().isInteger(32))
    return ce.emitOpError("the runtime reads int32 targets");
  Value loss = lossBuffer(ce.getLoss(), context);
  Value lse = context.alloc("ce_lse", context.acc, {rowsOf(ce.getLogits())});
  context.saved[ce] = {lse};
  context.logitsBuffer = context.buf(ce.getLogits());
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(ce.getLogits()))
      .buffer(context.buf(ce.getTargets()))
      .buffer(loss)
      .buffer(lse)
      .i64(batchOf(ce.getLogits()))
      .i64(tokensOf(ce.getLogits()))
      .i64(lastDim(ce.getLogits()))
      .flag(ce.getIgnoreIndex().has_value())
      .i64(ce.getIgnoreIndex().value_or(0))
      .attr(reductionOf(ce.getPerSample(), context.getContext()));
  context.call("cross_entropy_forward", a);
  return success();
}

LogicalResult lowerMSE(MSEOp mse, LoweringContext &context) {
  Value loss = lossBuffer(mse.getLoss(), context);
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(mse.getPrediction()))
      .buffer(context.buf(mse.getTarget()))
      .buffer(loss)
      .i64(batchOf(mse.getPrediction()))
      .i64(numelOf(mse.getPrediction()) / batchOf(mse.getPrediction()))
      .attr(reductionOf(mse.getPerSample(), context.getContext()));
  context.call("mse_forward", a);
  return success();
}

LogicalResult lowerCrossEntropyGrad(CrossEntropyGradOp g,
                                    LoweringContext &context) {
  CrossEntropyOp ce = g.getForwardOp();
  // The gradient overwrites the logits when nothing else reads them: the
  // kernels read each logit before they write its gradient, and the logits
  // are a language model's largest activation (B x T x vocabulary: 500 MiB
  // at 8 x 1024 x 32000 in bf16, 2 GiB with a 128K vocabulary).
  Value logits = g.getLogits();
  bool onlyLoss = llvm::all_of(logits.getUsers(), [&](Operation *user) {
    return user == ce.getOperation() || user == g.getOperation();
  });
  Value d;
  if (onlyLoss) {
    d = context.buf(logits);
    context.setBuffer(g.getDlogits(), d);
  } else {
    d = context.newActivation(g.getDlogits(), "dlogits");
  }
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(logits))
      .buffer(context.buf(g.getTargets()))
      .buffer(context.saved[ce][0])
      .buffer(context.buf(g.getDloss()))
      .buffer(d)
      .i64(batchOf(g.getLogits()))
      .i64(tokensOf(g.getLogits()))
      .i64(lastDim(g.getLogits()))
      .flag(ce.getIgnoreIndex().has_value())
      .i64(ce.getIgnoreIndex().value_or(0))
      .attr(reductionOf(ce.getPerSample(), context.getContext()));
  context.call("cross_entropy_backward", a);
  return success();
}

LogicalResult lowerMSEGrad(MSEGradOp g, LoweringContext &context) {
  Value d = context.newActivation(g.getDprediction(), "dprediction");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getPrediction()))
      .buffer(context.buf(g.getTarget()))
      .buffer(context.buf(g.getDloss()))
      .buffer(d)
      .i64(batchOf(g.getPrediction()))
      .i64(numelOf(g.getPrediction()) / batchOf(g.getPrediction()))
      .attr(reductionOf(g.getPerSample(), context.getContext()));
  context.call("mse_backward", a);
  return success();
}

} // namespace

void dpc::lowering::populateLossesLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerCrossEntropy);
  registry.add(lowerMSE);
  registry.add(lowerCrossEntropyGrad);
  registry.add(lowerMSEGrad);
}
