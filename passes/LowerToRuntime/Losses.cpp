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

/// Whether nothing but `ce` and its gradient op reads the logits: the
/// gradient may then overwrite them (the logits are a language model's
/// largest activation: B x T x vocabulary, 500 MiB at 8 x 1024 x 32000 in
/// bf16, 2 GiB with a 128K vocabulary).
bool onlyTheLossReads(Value logits, CrossEntropyOp ce) {
  return llvm::all_of(logits.getUsers(), [&](Operation *user) {
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    return user == ce.getOperation() || (grad && grad.getForwardOp() == ce);
  });
}

/// The derivative of `ce` that its own call can make (in place, with the
/// loss): the one dp.cross_entropy_grad of `ce`, in the same block, when
/// only the two read the logits and its seed is there before the loss (the
/// step's mask, dp-backward). Null when there is none.
CrossEntropyGradOp gradientMadeWithLoss(CrossEntropyOp ce) {
  CrossEntropyGradOp found;
  for (Operation *user : ce.getLogits().getUsers())
    if (auto grad = dyn_cast<CrossEntropyGradOp>(user);
        grad && grad.getForwardOp() == ce) {
      if (found)
        return {};
      found = grad;
    }
  if (!found || found->getBlock() != ce->getBlock() ||
      !onlyTheLossReads(ce.getLogits(), ce))
    return {};
  Value seed = found.getDloss();
  if (auto arg = dyn_cast<BlockArgument>(seed))
    return arg.getOwner() == ce->getBlock() ? found : CrossEntropyGradOp();
  Operation *def = seed.getDefiningOp();
  return def->getBlock() == ce->getBlock() && def->isBeforeInBlock(ce)
             ? found
             : CrossEntropyGradOp();
}

LogicalResult lowerCrossEntropy(CrossEntropyOp ce, LoweringContext &context) {
  if (!tensorOf(ce.getTargets()).getElementType().isInteger(32))
    return ce.emitOpError("the runtime reads int32 targets");
  Value loss = lossBuffer(ce.getLoss(), context);
  Value lse = context.alloc("ce_lse", context.acc, {rowsOf(ce.getLogits())});
  context.saved[ce] = {lse};
  context.logitsBuffer = context.buf(ce.getLogits());
  // With its gradient: one call reads each row of logits once and replaces
  // it with its gradient (the CUDA kernel where a row fits in shared
  // memory), instead of a second pass over them in the backward.
  CrossEntropyGradOp grad = gradientMadeWithLoss(ce);
  if (grad) {
    context.lossGradientsMade.insert(grad);
    context.setBuffer(grad.getDlogits(), context.buf(ce.getLogits()));
  }
  CallArgs a = context.args();
  a.dtype(context.dt).buffer(context.buf(ce.getLogits()));
  a.buffer(context.buf(ce.getTargets())).buffer(loss).buffer(lse);
  if (grad)
    a.buffer(context.buf(grad.getDloss()));
  a.i64(batchOf(ce.getLogits()))
      .i64(tokensOf(ce.getLogits()))
      .i64(lastDim(ce.getLogits()))
      .flag(ce.getIgnoreIndex().has_value())
      .i64(ce.getIgnoreIndex().value_or(0))
      .attr(reductionOf(ce.getPerSample(), context.getContext()));
  context.call(
      grad ? "cross_entropy_forward_backward" : "cross_entropy_forward", a);
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
  // Made by the loss's own call (lowerCrossEntropy).
  if (context.lossGradientsMade.contains(g))
    return success();
  // The gradient overwrites the logits when nothing else reads them: the
  // kernels read each logit before they write its gradient.
  Value logits = g.getLogits();
  Value d;
  if (onlyTheLossReads(logits, ce)) {
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
