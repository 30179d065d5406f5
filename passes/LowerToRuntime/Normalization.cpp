//===- Normalization.cpp - RMSNorm and LayerNorm --------------------------===//
//
// dp.rms_norm, dp.layer_norm and their gradient ops to the kernels of
// runtime/cpu/Normalization.cpp. The forward kernel saves rstd (and the
// mean) for the backward kernel; a backward op whose per-sample scale (and
// bias) gradients have their norm fused into it (dp-fuse-norms) calls the
// `_norm` form, which adds that norm into the step's n2 buffer.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

LogicalResult lowerRMSNorm(RMSNormOp n, LoweringContext &context) {
  Value y = context.newActivation(n.getOutput(), "rms_norm");
  Value rstd = context.alloc("rstd", context.acc, {rowsOf(n.getInput())});
  context.saved[n] = {rstd};
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getInput()))
      .buffer(context.paramPointer(n.getScaleAttr()))
      .buffer(y)
      .buffer(rstd)
      .i64(rowsOf(n.getInput()))
      .i64(lastDim(n.getInput()))
      .f64(n.getEps().convertToDouble());
  context.call("rms_norm_forward", a);
  return success();
}

LogicalResult lowerLayerNorm(LayerNormOp n, LoweringContext &context) {
  Value y = context.newActivation(n.getOutput(), "layer_norm");
  Value mean = context.alloc("mean", context.acc, {rowsOf(n.getInput())});
  Value rstd = context.alloc("rstd", context.acc, {rowsOf(n.getInput())});
  context.saved[n] = {mean, rstd};
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getInput()))
      .buffer(context.paramPointer(n.getScaleAttr()));
  FlatSymbolRefAttr bias = n.getBiasAttr();
  a.bufferOrNull(bias ? context.paramPointer(bias) : Value());
  a.buffer(y)
      .buffer(mean)
      .buffer(rstd)
      .i64(rowsOf(n.getInput()))
      .i64(lastDim(n.getInput()))
      .f64(n.getEps().convertToDouble());
  context.call("layer_norm_forward", a);
  return success();
}

/// A buffer for per-sample gradients the step reads, or null when nothing
/// reads them (the kernel then skips them).
Value perSampleGrads(LoweringContext &context, Value grads, StringRef name) {
  if (!grads || grads.use_empty())
    return Value();
  Value b = context.alloc(name, context.acc, {numelOf(grads)});
  context.setBuffer(grads, b);
  return b;
}

LogicalResult lowerRMSNormGrad(RMSNormGradOp g, LoweringContext &context) {
  Operation *forward = g.getY().getDefiningOp();
  Value dx = context.accTarget(g.getAcc(), g, g.getDx(), "dx");
  Value gs = perSampleGrads(context, g.getScaleGrads(), "scale_grads");
  Value n2 = context.fusedNormTarget({g.getScaleGrads()});
  // The rematerialized normalization's result, made from the forward's rstd.
  Value recomputed = g.getRecomputed()
                         ? context.newActivation(g.getRecomputed(), "rms_norm")
                         : Value();
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getX()))
      .buffer(context.paramPointer(g.getScaleAttr()))
      .buffer(context.saved[forward][0])
      .buffer(context.buf(g.getDy()))
      .buffer(dx)
      .bufferOrNull(gs);
  if (n2)
    a.buffer(n2);
  a.bufferOrNull(recomputed);
  a.i64(batchOf(g.getX()))
      .i64(tokensOf(g.getX()))
      .i64(lastDim(g.getX()))
      .flag(bool(g.getAcc()));
  context.call(n2 ? "rms_norm_backward_norm" : "rms_norm_backward", a);
  return success();
}

LogicalResult lowerLayerNormGrad(LayerNormGradOp g, LoweringContext &context) {
  Operation *forward = g.getY().getDefiningOp();
  Value dx = context.accTarget(g.getAcc(), g, g.getDx(), "dx");
  Value gs = perSampleGrads(context, g.getScaleGrads(), "scale_grads");
  Value bs = perSampleGrads(context, g.getBiasGrads(), "bias_grads");
  Value n2 = context.fusedNormTarget({g.getScaleGrads(), g.getBiasGrads()});
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getX()))
      .buffer(context.paramPointer(g.getScaleAttr()))
      .buffer(context.saved[forward][0])
      .buffer(context.saved[forward][1])
      .buffer(context.buf(g.getDy()))
      .buffer(dx)
      .bufferOrNull(gs)
      .bufferOrNull(bs);
  if (n2)
    a.buffer(n2);
  a.i64(batchOf(g.getX()))
      .i64(tokensOf(g.getX()))
      .i64(lastDim(g.getX()))
      .flag(bool(g.getAcc()));
  context.call(n2 ? "layer_norm_backward_norm" : "layer_norm_backward", a);
  return success();
}

} // namespace

void dpc::lowering::populateNormalizationLowerings(
    OpLoweringRegistry &registry) {
  registry.add(lowerRMSNorm);
  registry.add(lowerLayerNorm);
  registry.add(lowerRMSNormGrad);
  registry.add(lowerLayerNormGrad);
}
