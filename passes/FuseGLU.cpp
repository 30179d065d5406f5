//===- FuseGLU.cpp - act(gate) * up as one op each way --------------------===//
//
// A SwiGLU MLP computes silu(gate) * up. As two layers, silu(gate) is
// written, saved for the product's derivative and read twice more; fused,
// the forward reads gate and up once and writes the product, and the
// derivative reads gate, up and dy once and writes both gradients, forming
// act(gate) and act'(gate) in registers.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"

#include "mlir/IR/Builders.h"

namespace dpc {
#define GEN_PASS_DEF_FUSEGLU
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// The activation `op` computes, if it is one.
std::optional<ActivationKind> activationKind(Operation *op) {
  if (isa_and_nonnull<ReluOp>(op))
    return ActivationKind::relu;
  if (isa_and_nonnull<SiluOp>(op))
    return ActivationKind::silu;
  if (auto gelu = dyn_cast_or_null<GeluOp>(op))
    return gelu.getApproximation() == GeluApproximation::tanh
               ? ActivationKind::gelu_tanh
               : ActivationKind::gelu_erf;
  return std::nullopt;
}

/// The ops of one gated unit and its derivative.
struct GatedUnit {
  Operation *activation;
  MulOp product;
  MulGradOp productGrad;
  ActivationGradOp activationGrad; ///< null when the gate needs no gradient
  ActivationKind kind;
  Value gate, up;
  bool activatedIsLhs;
};

/// The gated unit whose product derivative is `grad`, if it fuses: the
/// activation's result is read only by the product and its derivative, its
/// gradient only by the activation's derivative, and nothing accumulates.
std::optional<GatedUnit> match(MulGradOp grad) {
  if (grad.getLhsAcc() || grad.getRhsAcc() || grad.getLhs() == grad.getRhs())
    return std::nullopt;
  for (bool lhs : {true, false}) {
    Value activated = lhs ? grad.getLhs() : grad.getRhs();
    Value up = lhs ? grad.getRhs() : grad.getLhs();
    Operation *activation = activated.getDefiningOp();
    std::optional<ActivationKind> kind = activationKind(activation);
    if (!kind)
      continue;
    MulOp product;
    bool otherReaders = false;
    for (Operation *user : activated.getUsers()) {
      auto mul = dyn_cast<MulOp>(user);
      if (user == grad.getOperation())
        continue;
      if (mul && !product &&
          (lhs ? mul.getLhs() == activated && mul.getRhs() == up
               : mul.getRhs() == activated && mul.getLhs() == up))
        product = mul;
      else
        otherReaders = true;
    }
    if (!product || otherReaders)
      continue;
    Value dActivated = lhs ? grad.getDlhs() : grad.getDrhs();
    ActivationGradOp activationGrad;
    if (!dActivated.use_empty()) {
      if (!dActivated.hasOneUse())
        continue;
      activationGrad = dyn_cast<ActivationGradOp>(*dActivated.user_begin());
      if (!activationGrad || activationGrad.getAcc() ||
          activationGrad.getKind() != *kind ||
          activationGrad.getX() != activation->getOperand(0) ||
          activationGrad.getDy() != dActivated)
        continue;
    }
    return GatedUnit{activation, product,
                     grad,       activationGrad,
                     *kind,      activation->getOperand(0),
                     up,         lhs};
  }
  return std::nullopt;
}

struct FuseGLUPass : dpc::impl::FuseGLUBase<FuseGLUPass> {
  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled =
        findTrainingStep(getOperation(), getArgument());
    if (failed(compiled))
      return signalPassFailure();
    SmallVector<GatedUnit> units;
    for (auto grad : compiled->step.getBodyBlock().getOps<MulGradOp>())
      if (std::optional<GatedUnit> unit = match(grad))
        units.push_back(*unit);
    for (GatedUnit &unit : units)
      fuse(unit);
    // The model's forward (evaluation, generation) computes what the step's
    // forward computes, rounded the same way.
    compiled->model.walk([&](ForwardOp forward) {
      SmallVector<MulOp> products(forward.getBodyBlock().getOps<MulOp>());
      for (MulOp product : products)
        fuseForward(product);
    });
  }

  /// act(gate) * up without a derivative: fused when the activation's
  /// result has no other reader.
  void fuseForward(MulOp product) {
    for (bool lhs : {true, false}) {
      Value activated = lhs ? product.getLhs() : product.getRhs();
      Value up = lhs ? product.getRhs() : product.getLhs();
      Operation *activation = activated.getDefiningOp();
      std::optional<ActivationKind> kind = activationKind(activation);
      if (!kind || !activated.hasOneUse() || activated == up)
        continue;
      OpBuilder builder(product);
      auto glu = builder.create<GluOp>(
          product.getLoc(), activation->getOperand(0), up,
          ActivationKindAttr::get(builder.getContext(), *kind));
      product.getOutput().replaceAllUsesWith(glu.getOutput());
      product.erase();
      activation->erase();
      return;
    }
  }

  void fuse(GatedUnit &unit) {
    OpBuilder builder(unit.product);
    auto kind = ActivationKindAttr::get(builder.getContext(), unit.kind);
    auto glu =
        builder.create<GluOp>(unit.product.getLoc(), unit.gate, unit.up, kind);
    unit.product.getOutput().replaceAllUsesWith(glu.getOutput());

    builder.setInsertionPoint(unit.productGrad);
    auto grad =
        builder.create<GluGradOp>(unit.productGrad.getLoc(), unit.gate, unit.up,
                                  unit.productGrad.getDy(), kind);
    Value dUp = unit.activatedIsLhs ? unit.productGrad.getDrhs()
                                    : unit.productGrad.getDlhs();
    dUp.replaceAllUsesWith(grad.getDup());
    if (unit.activationGrad) {
      unit.activationGrad.getDx().replaceAllUsesWith(grad.getDgate());
      unit.activationGrad.erase();
    }
    unit.productGrad.erase();
    unit.product.erase();
    unit.activation->erase();
    ++numFused;
  }
};

} // namespace
