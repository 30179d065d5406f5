//===- Attention.cpp - Scaled dot-product attention and RoPE --------------===//
//
// dp.attention and dp.attention_grad to the kernels of
// runtime/cpu/Attention.cpp. The forward pass saves the rotated queries and
// keys and the log-sum-exp of each row for the backward kernel. Scaled
// rotary frequencies are a table dp_init computes once.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

/// The table of rotary frequencies of `at` (f64 [headDim/2]) when its
/// frequencies are scaled, or null for the plain theta^(-2i/headDim), which
/// the rope kernels compute themselves. The table is a global that dp_init
/// fills once, shared by every attention op with the same scaling, theta
/// and head size.
Value ropeFrequencies(AttentionOp at, LoweringContext &context) {
  auto llama3 = dyn_cast_or_null<RopeLlama3Attr>(at.getRopeScalingAttr());
  if (!llama3)
    return Value();
  MLIRContext *mlirContext = context.getContext();
  int64_t hd = at.getHeadDim();
  Attribute key = ArrayAttr::get(
      mlirContext, {llama3, at.getRopeThetaAttr(),
                    IntegerAttr::get(IntegerType::get(mlirContext, 64), hd)});
  std::string &name = context.ropeTables[key];
  if (name.empty()) {
    name = context.addGlobal("rope.llama3." +
                                 std::to_string(context.ropeTables.size() - 1),
                             ::dprt::DType::F64, {hd / 2});
    auto init = SymbolTable::lookupNearestSymbolFrom<rt::FuncOp>(
        context.program, StringAttr::get(mlirContext, "dp_init"));
    OpBuilder::InsertionGuard guard(context.builder);
    context.builder.setInsertionPoint(init.getBody().front().getTerminator());
    CallArgs a = context.args();
    a.buffer(context.global(name))
        .i64(hd)
        .f64(at.getRopeTheta().convertToDouble())
        .f64(llama3.getFactor().convertToDouble())
        .f64(llama3.getLowFreqFactor().convertToDouble())
        .f64(llama3.getHighFreqFactor().convertToDouble())
        .i64(llama3.getOriginalMaxPositionEmbeddings());
    context.call("rope_llama3_frequencies", a);
  }
  return context.global(name);
}

LogicalResult lowerAttention(AttentionOp at, LoweringContext &context) {
  int64_t b = batchOf(at.getQuery()), t = tokensOf(at.getQuery());
  int64_t h = at.getNumHeads(), kv = at.getNumKVHeads(), hd = at.getHeadDim();
  double theta = at.getRopeTheta().convertToDouble();
  Value q = context.buf(at.getQuery()), k = context.buf(at.getKey());
  if (at.getRope()) {
    Value invFreq = ropeFrequencies(at, context);
    auto rotate = [&](Value x, Value in, int64_t heads, StringRef name) {
      Value out = context.alloc(name, context.dt, {numelOf(x)});
      CallArgs a = context.args();
      a.dtype(context.dt)
          .buffer(in)
          .buffer(out)
          .bufferOrNull(invFreq)
          .i64(b)
          .i64(t)
          .i64(heads)
          .i64(hd)
          .f64(theta);
      context.call("rope_forward", a);
      return out;
    };
    q = rotate(at.getQuery(), q, h, "q_rope");
    k = rotate(at.getKey(), k, kv, "k_rope");
  }
  Value o = context.newActivation(at.getOutput(), "attention");
  Value lse = context.alloc("lse", context.acc, {b, h, t});
  context.saved[at] = {q, k, lse};
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(q)
      .buffer(k)
      .buffer(context.buf(at.getValue()))
      .buffer(o)
      .buffer(lse)
      .i64(b)
      .i64(t)
      .i64(h)
      .i64(kv)
      .i64(hd)
      .flag(at.getCausal());
  context.call("attention_forward", a);
  return success();
}

LogicalResult lowerAttentionGrad(AttentionGradOp g, LoweringContext &context) {
  AttentionOp at = g.getForwardOp();
  int64_t b = batchOf(at.getQuery()), t = tokensOf(at.getQuery());
  int64_t h = at.getNumHeads(), kv = at.getNumKVHeads(), hd = at.getHeadDim();
  auto &stats = context.saved[at.getOperation()];
  Value dq = context.newActivation(g.getDquery(), "dq");
  Value dk = context.newActivation(g.getDkey(), "dk");
  Value dv = context.newActivation(g.getDvalue(), "dv");
  // The CUDA backend's cuDNN and fused paths (bf16, head size 64 or 128)
  // take their workspace from the arena, so that the plan holds it: at
  // 8 x 1024 tokens and 32 heads of 64, 129 MiB that would otherwise come
  // on top of it. Elsewhere none: the CPU needs none, and the materialized
  // path sizes its own.
  Value workspace;
  if (context.backend == "cuda" && context.dt == ::dprt::DType::BF16 &&
      (hd == 64 || hd == 128))
    workspace = context.allocWorkspace(
        "attention_workspace", {b, h, t, 8 * hd + 8}, [&] {
          return ::dprt::attentionBackwardWorkspaceBytes(context.dt, b, t, h,
                                                         kv, hd);
        });
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(stats[0])
      .buffer(stats[1])
      .buffer(context.buf(at.getValue()))
      .buffer(context.buf(at.getOutput()))
      .buffer(stats[2])
      .buffer(context.buf(g.getDoutput()))
      .buffer(dq)
      .buffer(dk)
      .buffer(dv)
      .i64(b)
      .i64(t)
      .i64(h)
      .i64(kv)
      .i64(hd)
      .flag(at.getCausal())
      .bufferOrNull(workspace);
  context.call("attention_backward", a);
  if (at.getRope()) {
    // The gradient of a rotation is the inverse rotation, in place.
    double theta = at.getRopeTheta().convertToDouble();
    Value invFreq = ropeFrequencies(at, context);
    for (auto [d, heads] : {std::pair<Value, int64_t>{dq, h}, {dk, kv}}) {
      CallArgs r = context.args();
      r.dtype(context.dt)
          .buffer(d)
          .buffer(d)
          .bufferOrNull(invFreq)
          .i64(b)
          .i64(t)
          .i64(heads)
          .i64(hd)
          .f64(theta)
          .flag(false);
      context.call("rope_backward", r);
    }
  }
  return success();
}

} // namespace

void dpc::lowering::populateAttentionLowerings(OpLoweringRegistry &registry) {
  registry.add(lowerAttention);
  registry.add(lowerAttentionGrad);
}
