//===- Backward.cpp - Derive the training step ----------------------------===//
//
// Reverse-mode differentiation at the level of layers. The step holds a copy
// of the forward layers followed by their derivative ops in reverse order.
// The loss of the step is the sum of the per-sample losses weighted by the
// mask, so the seed gradient of sample b's loss is mask_b.
//
// A table tied to a linear head gets both weight-gradient ops, an
// embedding_grad and a linear_grad_weight of the same parameter: each adds
// its part into the one gradient (dp-clip-plan clips their sum).
//
// The weight gradients of linear layers that read an RMSNorm's result come
// after that RMSNorm's derivative, in every program: dp-rematerialize can
// then fold the norm's clone into its derivative (which makes the result
// again) without moving them, and the per-sample squared norms are added in
// the same order with and without rematerialization or recomputation (their
// programs train the same bits).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"

namespace dpc {
#define GEN_PASS_DEF_BACKWARD
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

class StepBuilder {
public:
  StepBuilder(ModelOp model, OpBuilder &builder)
      : model(model), builder(builder) {}

  LogicalResult build(ForwardOp forward);

  int64_t numInputGradOps = 0;
  int64_t numWeightGradOps = 0;

private:
  bool isTrainable(FlatSymbolRefAttr ref) {
    auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(model, ref);
    return param && param.getTrainable();
  }
  bool needsGrad(Value value) { return differentiable.contains(value); }

  /// The gradient accumulated so far for `value`, or null.
  Value currentGrad(Value value) { return grads.lookup(value); }

  /// Adds a contribution to the gradient of `value`.
  void addGrad(Value value, Value contribution, Location loc) {
    if (!needsGrad(value))
      return;
    Value &grad = grads[value];
    grad = grad ? builder.create<AddOp>(loc, grad, contribution).getResult()
                : contribution;
  }

  /// The gradient of `value` after an op that accumulated into `acc`.
  void setGrad(Value value, Value grad) {
    if (needsGrad(value))
      grads[value] = grad;
  }

  /// The `acc` operand for a contribution to the gradient of `value`.
  Value accFor(Value value) {
    return needsGrad(value) ? currentGrad(value) : Value();
  }

  RankedTensorType perSampleGradType(Value input) {
    auto type = cast<RankedTensorType>(input.getType());
    return RankedTensorType::get({type.getDimSize(0), type.getShape().back()},
                                 getAccumulationType(model));
  }

  LogicalResult differentiate(Operation *op);

  /// The RMSNorm whose result `x` is, or null.
  Operation *normOf(Value x) {
    return x ? dyn_cast_or_null<RMSNormOp>(x.getDefiningOp()) : nullptr;
  }

  /// Emits the weight gradients held back for `op`'s derivative.
  void emitDeferred(Operation *op) {
    auto it = deferred.find(op);
    if (it == deferred.end())
      return;
    for (LinearOp linear : it->second) {
      builder.create<LinearGradWeightOp>(
          linear.getLoc(), linear.getWeightAttr(), linear.getInput(),
          deferredDy.lookup(linear.getOperation()), Value());
      ++numWeightGradOps;
    }
    deferred.erase(it);
  }

  ModelOp model;
  OpBuilder &builder;
  llvm::DenseSet<Value> differentiable;
  llvm::DenseMap<Value, Value> grads;
  /// Linear layers whose weight gradient waits for the derivative of the
  /// RMSNorm they read (in the order they were reached), and their dy.
  llvm::DenseMap<Operation *, SmallVector<LinearOp>> deferred;
  llvm::DenseMap<Operation *, Value> deferredDy;
};

LogicalResult StepBuilder::build(ForwardOp forward) {
  FunctionType forwardType = forward.getFunctionType();
  for (Type type : forwardType.getInputs())
    if (!cast<ShapedType>(type).hasStaticShape())
      return forward.emitOpError(
          "has a dynamic batch; run dp-specialize before dp-backward");
  auto lossType = cast<RankedTensorType>(forwardType.getResult(0));
  auto maskType =
      RankedTensorType::get(lossType.getShape(), getAccumulationType(model));
  if (maskType != lossType)
    return forward.emitOpError("the per-sample loss must be ")
           << maskType << " to be differentiated, got " << lossType;

  SmallVector<Type> inputs(forwardType.getInputs());
  inputs.push_back(maskType);
  builder.setInsertionPointAfter(forward);
  auto step = builder.create<StepOp>(
      forward.getLoc(),
      FunctionType::get(builder.getContext(), inputs, {lossType}));
  Block *body = new Block();
  step.getBody().push_back(body);
  for (Type type : inputs)
    body->addArgument(type, forward.getLoc());

  // The forward layers, as they are.
  IRMapping mapping;
  for (auto [from, to] :
       llvm::zip(forward.getBodyBlock().getArguments(), body->getArguments()))
    mapping.map(from, to);
  builder.setInsertionPointToEnd(body);
  SmallVector<Operation *> layers;
  Value loss;
  for (Operation &op : forward.getBodyBlock()) {
    if (auto ret = dyn_cast<ReturnOp>(op)) {
      loss = mapping.lookup(ret.getOperand(0));
      continue;
    }
    Operation *clone = builder.clone(op, mapping);
    layers.push_back(clone);
    // A value needs a gradient when a trainable parameter is upstream.
    bool reads = false;
    if (auto user = dyn_cast<ParamUserOpInterface>(clone))
      reads = llvm::any_of(user.getParamRefs(), [&](FlatSymbolRefAttr ref) {
        return isTrainable(ref);
      });
    bool upstream = llvm::any_of(clone->getOperands(),
                                 [&](Value v) { return needsGrad(v); });
    if (reads || upstream)
      for (Value result : clone->getResults())
        differentiable.insert(result);
  }

  grads[loss] = step.getMask();
  for (Operation *op : llvm::reverse(layers)) {
    if (failed(differentiate(op)))
      return failure();
    emitDeferred(op);
  }
  builder.create<YieldOp>(forward.getLoc(), ValueRange{loss});
  return success();
}

LogicalResult StepBuilder::differentiate(Operation *op) {
  Location loc = op->getLoc();
  Value dy = op->getNumResults() == 1 ? currentGrad(op->getResult(0)) : Value();
  // Nothing downstream depends on this op's result: no derivative.
  if (op->getNumResults() == 1 && !dy)
    return success();

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](CrossEntropyOp ce) {
        if (!needsGrad(ce.getLogits()))
          return success();
        Value dlogits = builder.create<CrossEntropyGradOp>(
            loc, ce.getLogits(), ce.getTargets(), ce.getLoss(), dy);
        ++numInputGradOps;
        addGrad(ce.getLogits(), dlogits, loc);
        return success();
      })
      .Case([&](MSEOp mse) -> LogicalResult {
        if (needsGrad(mse.getTarget()))
          return mse.emitOpError("differentiating through the regression "
                                 "target is not supported");
        if (!needsGrad(mse.getPrediction()))
          return success();
        Value dp = builder.create<MSEGradOp>(
            loc, mse.getPrediction(), mse.getTarget(), dy, mse.getPerSample());
        ++numInputGradOps;
        addGrad(mse.getPrediction(), dp, loc);
        return success();
      })
      .Case([&](LinearOp linear) {
        // y = x W^T + r: r's gradient is dy, as through the dp.add that
        // dp-fuse-residual folded in (taken first, as the add's was).
        if (Value r = linear.getAddend())
          addGrad(r, dy, loc);
        if (isTrainable(linear.getWeightAttr())) {
          if (Operation *norm = normOf(linear.getInput())) {
            deferred[norm].push_back(linear);
            deferredDy[linear.getOperation()] = dy;
          } else {
            builder.create<LinearGradWeightOp>(loc, linear.getWeightAttr(),
                                               linear.getInput(), dy, Value());
            ++numWeightGradOps;
          }
        }
        if (FlatSymbolRefAttr bias = linear.getBiasAttr();
            bias && isTrainable(bias)) {
          builder.create<BiasGradOp>(loc, bias, dy, Value());
          ++numWeightGradOps;
        }
        Value x = linear.getInput();
        if (needsGrad(x)) {
          Value dx = builder.create<LinearGradInputOp>(
              loc, x.getType(), linear.getWeightAttr(), dy, accFor(x));
          ++numInputGradOps;
          setGrad(x, dx);
        }
        return success();
      })
      .Case([&](EmbeddingOp embedding) {
        if (isTrainable(embedding.getTableAttr())) {
          builder.create<EmbeddingGradOp>(loc, embedding.getTableAttr(),
                                          embedding.getTokens(), dy, Value());
          ++numWeightGradOps;
        }
        return success();
      })
      .Case([&](PositionEmbeddingOp positions) {
        // y = x + P[t]: dx = dy, and row t of P gets dy[b, t].
        if (isTrainable(positions.getTableAttr())) {
          builder.create<PositionEmbeddingGradOp>(loc, positions.getTableAttr(),
                                                  dy, Value());
          ++numWeightGradOps;
        }
        addGrad(positions.getInput(), dy, loc);
        return success();
      })
      .Case([&](RMSNormOp norm) {
        Value x = norm.getInput();
        bool scaleGrad = isTrainable(norm.getScaleAttr());
        if (!scaleGrad && !needsGrad(x))
          return success();
        auto grad = builder.create<RMSNormGradOp>(
            loc, x.getType(), perSampleGradType(x), Type(), norm.getScaleAttr(),
            x, norm.getOutput(), dy, accFor(x));
        ++numInputGradOps;
        setGrad(x, grad.getDx());
        if (scaleGrad) {
          builder.create<VectorGradOp>(loc, norm.getScaleAttr(),
                                       grad.getScaleGrads(), Value());
          ++numWeightGradOps;
        }
        return success();
      })
      .Case([&](LayerNormOp norm) {
        Value x = norm.getInput();
        FlatSymbolRefAttr bias = norm.getBiasAttr();
        bool scaleGrad = isTrainable(norm.getScaleAttr());
        bool biasGrad = bias && isTrainable(bias);
        if (!scaleGrad && !biasGrad && !needsGrad(x))
          return success();
        Type biasGradType = bias ? Type(perSampleGradType(x)) : Type();
        auto grad = builder.create<LayerNormGradOp>(
            loc, x.getType(), perSampleGradType(x), biasGradType,
            norm.getScaleAttr(), bias, x, norm.getOutput(), dy, accFor(x));
        ++numInputGradOps;
        setGrad(x, grad.getDx());
        if (scaleGrad) {
          builder.create<VectorGradOp>(loc, norm.getScaleAttr(),
                                       grad.getScaleGrads(), Value());
          ++numWeightGradOps;
        }
        if (biasGrad) {
          builder.create<VectorGradOp>(loc, bias, grad.getBiasGrads(), Value());
          ++numWeightGradOps;
        }
        return success();
      })
      .Case([&](AttentionOp attention) {
        auto grad = builder.create<AttentionGradOp>(
            loc, attention.getQuery(), attention.getKey(), attention.getValue(),
            attention.getOutput(), dy);
        grad->setAttrs(attention->getAttrDictionary());
        ++numInputGradOps;
        addGrad(attention.getQuery(), grad.getDquery(), loc);
        addGrad(attention.getKey(), grad.getDkey(), loc);
        addGrad(attention.getValue(), grad.getDvalue(), loc);
        return success();
      })
      .Case<ReluOp, SiluOp, GeluOp>([&](auto activation) {
        Value x = activation.getInput();
        if (!needsGrad(x))
          return success();
        ActivationKind kind = ActivationKind::relu;
        if (isa<SiluOp>(op))
          kind = ActivationKind::silu;
        if (auto gelu = dyn_cast<GeluOp>(op))
          kind = gelu.getApproximation() == GeluApproximation::tanh
                     ? ActivationKind::gelu_tanh
                     : ActivationKind::gelu_erf;
        Value dx =
            builder.create<ActivationGradOp>(loc, x, dy, accFor(x), kind);
        ++numInputGradOps;
        setGrad(x, dx);
        return success();
      })
      .Case([&](MulOp mul) {
        Value lhs = mul.getLhs(), rhs = mul.getRhs();
        if (!needsGrad(lhs) && !needsGrad(rhs))
          return success();
        bool square = lhs == rhs;
        auto grad = builder.create<MulGradOp>(loc, lhs, rhs, dy,
                                              square ? Value() : accFor(lhs),
                                              square ? Value() : accFor(rhs));
        ++numInputGradOps;
        if (square) {
          addGrad(lhs, grad.getDlhs(), loc);
          addGrad(lhs, grad.getDrhs(), loc);
        } else {
          setGrad(lhs, grad.getDlhs());
          setGrad(rhs, grad.getDrhs());
        }
        return success();
      })
      .Case([&](AddOp add) {
        addGrad(add.getLhs(), dy, loc);
        addGrad(add.getRhs(), dy, loc);
        return success();
      })
      .Default([&](Operation *other) {
        return other->emitOpError("has no derivative in dp-backward");
      });
}

struct BackwardPass : dpc::impl::BackwardBase<BackwardPass> {
  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      if (StepOp existing = getStep(model)) {
        existing.emitOpError("exists already; dp-backward runs once");
        return signalPassFailure();
      }
      OpBuilder builder(model.getContext());
      StepBuilder step(model, builder);
      if (failed(step.build(model.getForward())))
        return signalPassFailure();
      numInputGradOps += step.numInputGradOps;
      numWeightGradOps += step.numWeightGradOps;
    }
  }
};

} // namespace
