//===- Elementwise.cpp - Activations, sums and products -------------------===//
//
// dp.relu, dp.silu, dp.gelu, dp.add, dp.mul, dp.glu and their gradient ops
// to the kernels of runtime/cpu/Elementwise.cpp.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

rt::Activation runtimeActivation(ActivationKind kind) {
  switch (kind) {
  case ActivationKind::relu:
    return rt::Activation::Relu;
  case ActivationKind::silu:
    return rt::Activation::Silu;
  case ActivationKind::gelu_erf:
    return rt::Activation::GeluErf;
  case ActivationKind::gelu_tanh:
    return rt::Activation::GeluTanh;
  }
  llvm_unreachable("every activation has a runtime kernel");
}

rt::Activation activationOf(ReluOp) { return rt::Activation::Relu; }
rt::Activation activationOf(SiluOp) { return rt::Activation::Silu; }
rt::Activation activationOf(GeluOp gelu) {
  return gelu.getApproximation() == GeluApproximation::tanh
             ? rt::Activation::GeluTanh
             : rt::Activation::GeluErf;
}

template <typename OpTy>
LogicalResult lowerActivation(OpTy act, LoweringContext &context) {
  Value y = context.newActivation(act.getOutput(), "activation");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .attr(rt::ActivationAttr::get(context.getContext(), activationOf(act)))
      .buffer(context.buf(act.getInput()))
      .buffer(y)
      .i64(numelOf(act.getInput()));
  context.call("activation_forward", a);
  return success();
}

template <typename OpTy>
LogicalResult lowerBinary(OpTy binary, LoweringContext &context) {
  Value y = context.newActivation(binary.getOutput(), "sum");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(binary.getLhs()))
      .buffer(context.buf(binary.getRhs()))
      .buffer(y)
      .i64(numelOf(binary.getOutput()));
  context.call(std::is_same_v<OpTy, AddOp> ? "add_forward" : "mul_forward", a);
  return success();
}

LogicalResult lowerActivationGrad(ActivationGradOp g,
                                  LoweringContext &context) {
  Value dx = context.accTarget(g.getAcc(), g, g.getDx(), "dx");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .attr(rt::ActivationAttr::get(context.getContext(),
                                    runtimeActivation(g.getKind())))
      .buffer(context.buf(g.getX()))
      .buffer(context.buf(g.getDy()))
      .buffer(dx)
      .i64(numelOf(g.getX()))
      .flag(bool(g.getAcc()));
  context.call("activation_backward", a);
  return success();
}

LogicalResult lowerMulGrad(MulGradOp g, LoweringContext &context) {
  // An operand gradient nothing reads is not formed (null to the kernel).
  Value da, db;
  if (!g.getDlhs().use_empty())
    da = context.accTarget(g.getLhsAcc(), g, g.getDlhs(), "dlhs");
  if (!g.getDrhs().use_empty())
    db = context.accTarget(g.getRhsAcc(), g, g.getDrhs(), "drhs");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(g.getLhs()))
      .buffer(context.buf(g.getRhs()))
      .buffer(context.buf(g.getDy()))
      .bufferOrNull(da)
      .bufferOrNull(db)
      .i64(numelOf(g.getLhs()))
      .flag(da && g.getLhsAcc())
      .flag(db && g.getRhsAcc());
  context.call("mul_backward", a);
  return success();
}

LogicalResult lowerGlu(GluOp glu, LoweringContext &context) {
  Value y = context.newActivation(glu.getOutput(), "glu");
  CallArgs a = context.args();
  a.dtype(context.dt)
      .attr(rt::ActivationAttr::get(context.getContext(),
                                    runtimeActivation(glu.getKind())))
      .buffer(context.buf(glu.getGate()))
      .buffer(context.buf(glu.getUp()))
      .buffer(y)
      .i64(numelOf(glu.getOutput()));
  context.call("glu_forward", a);
  return success();
}

/// glu_backward for a dp.glu_grad (output null) or a dp.glu_grad_remat
/// (output: the GLU output it also makes). A gradient nothing reads is not
/// formed (null to the kernel).
void callGluBackward(Operation *op, ActivationKind kind, Value gate, Value up,
                     Value dy, Value dgateResult, Value dupResult, Value output,
                     LoweringContext &context) {
  Value dgate, dup;
  if (!dgateResult.use_empty())
    dgate = context.accTarget(Value(), op, dgateResult, "dgate");
  if (!dupResult.use_empty())
    dup = context.accTarget(Value(), op, dupResult, "dup");
  Value y = output ? context.newActivation(output, "glu") : Value();
  if (!dgate && !dup && !y)
    return;
  CallArgs a = context.args();
  a.dtype(context.dt)
      .attr(rt::ActivationAttr::get(context.getContext(),
                                    runtimeActivation(kind)))
      .buffer(context.buf(gate))
      .buffer(context.buf(up))
      .buffer(context.buf(dy))
      .bufferOrNull(dgate)
      .bufferOrNull(dup)
      .bufferOrNull(y)
      .i64(numelOf(gate));
  context.call("glu_backward", a);
}

LogicalResult lowerGluGrad(GluGradOp g, LoweringContext &context) {
  callGluBackward(g, g.getKind(), g.getGate(), g.getUp(), g.getDy(),
                  g.getDgate(), g.getDup(), Value(), context);
  return success();
}

LogicalResult lowerGluGradRemat(GluGradRematOp g, LoweringContext &context) {
  callGluBackward(g, g.getKind(), g.getGate(), g.getUp(), g.getDy(),
                  g.getDgate(), g.getDup(), g.getOutput(), context);
  return success();
}

} // namespace

void dpc::lowering::populateElementwiseLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerActivation<ReluOp>);
  registry.add(lowerActivation<SiluOp>);
  registry.add(lowerActivation<GeluOp>);
  registry.add(lowerBinary<AddOp>);
  registry.add(lowerBinary<MulOp>);
  registry.add(lowerActivationGrad);
  registry.add(lowerMulGrad);
  registry.add(lowerGlu);
  registry.add(lowerGluGrad);
  registry.add(lowerGluGradRemat);
}
