//===- Attention.cpp - Scaled dot-product attention and RoPE --------------===//
//
// dp.attention and dp.attention_grad to the kernels of
// runtime/cpu/Attention.cpp. The forward pass saves the rotated queries and
// keys and the log-sum-exp of each row for the backward kernel.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

LogicalResult lowerAttention(AttentionOp at, LoweringContext &context) {
  int64_t b = batchOf(at.getQuery()), t = tokensOf(at.getQuery());
  int64_t h = at.getNumHeads(), kv = at.getNumKVHeads(), hd = at.getHeadDim();
  double theta = at.getRopeTheta().convertToDouble();
  Value q = context.buf(at.getQuery()), k = context.buf(at.getKey());
  if (at.getRope()) {
    auto rotate = [&](Value x, Value in, int64_t heads, StringRef name) {
      Value out = context.alloc(name, context.dt, {numelOf(x)});
      CallArgs a = context.args();
      a.dtype(context.dt)
          .buffer(in)
          .buffer(out)
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
      .flag(at.getCausal());
  context.call("attention_backward", a);
  if (at.getRope()) {
    // The gradient of a rotation is the inverse rotation, in place.
    double theta = at.getRopeTheta().convertToDouble();
    for (auto [d, heads] : {std::pair<Value, int64_t>{dq, h}, {dk, kv}}) {
      CallArgs r = context.args();
      r.dtype(context.dt)
          .buffer(d)
          .buffer(d)
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
