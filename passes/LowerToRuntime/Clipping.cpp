//===- Clipping.cpp - Per-sample clip factors -----------------------------===//
//
// dp.clip_factor to clip_factors (runtime/cpu/Clipping.cpp). The kernel
// reads the run's clipping bound C from the StepState and is given the
// factor's share of it, so that --clip moves every bound alike (per-layer
// clipping's C_l = C / sqrt(L) included) without recompiling.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

rt::ClipMode runtimeClipMode(ClipMode mode) {
  switch (mode) {
  case ClipMode::flat:
    return rt::ClipMode::Flat;
  case ClipMode::per_layer:
    return rt::ClipMode::PerLayer;
  case ClipMode::automatic:
    return rt::ClipMode::Automatic;
  case ClipMode::none:
    return rt::ClipMode::None;
  }
  llvm_unreachable("every clip mode has a runtime mode");
}

LogicalResult lowerClipFactor(ClipFactorOp c, LoweringContext &context) {
  Value factors = context.alloc("clip_factors", context.acc, {context.batch});
  context.setBuffer(c.getFactors(), factors);
  CallArgs a = context.args();
  a.dtype(context.acc)
      .buffer(context.buf(c.getNorms()))
      .buffer(context.buf(c.getMask()))
      .buffer(factors)
      .i64(context.batch)
      .i64(context.recipe.getRecordsPerUnit())
      .attr(clipModeAttr(c.getMode(), context.getContext()))
      .f64(c.getMaxNorm().convertToDouble() /
           context.recipe.getClip().getMaxNorm().convertToDouble())
      .f64(c.getGamma().convertToDouble())
      .f64(c.getRelErr().convertToDouble());
  context.call("clip_factors", a);
  return success();
}

} // namespace

rt::ClipModeAttr dpc::lowering::clipModeAttr(ClipMode mode,
                                             MLIRContext *context) {
  return rt::ClipModeAttr::get(context, runtimeClipMode(mode));
}

void dpc::lowering::populateClippingLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerClipFactor);
}
