//===- PerSampleNorms.cpp - Per-sample squared gradient norms -------------===//
//
// The norm ops dp-clip-plan chose (rank-1, Gram, direct, bias, embedding,
// materialized rows and linear weight gradients, position tables, tied
// tables) to the kernels of
// runtime/cpu/PerSampleNorms.cpp. Every norm kernel adds into an n2 buffer; the
// norms one dp.norm_sum adds up share its buffer.
//
// User-level DP (`unit = #dp.unit<user, max_records = k>`): a user fills k
// consecutive slots of the physical batch, and its gradient is the sum of
// theirs, so its squared norm is that of ONE sample of k T tokens: the batch
// [B, T, d] is viewed as [B/k, k T, d] and each kernel gets B/k samples of
// k T tokens, writing the users' norms to n2[0, B/k) (clip_factors reads
// user b / k for slot b). This is exact, cross terms between the records
// included, for every norm that is a function of the unit's rows alone:
//   Gram/direct  ||sum_j G_j^T A_j||^2 = ||G^T A||^2 of the stacked rows,
//   bias         ||sum_{j,t} g_jt||^2,
//   embedding    sum_v ||sum_{j,t: x_jt = v} g_jt||^2 (and a tied table's
//                E + L, whose two parts both sum over the rows),
//   rank-1       (T = 1) a user of k rows is a Gram norm of T = k,
//   rows         materialized per-record gradients g_j: ||sum_j g_j||^2 is
//                the bias norm of k "tokens" of width numel.
// Learned positions are not: row t of the table gets sum_j g_jt, the same t
// of every record, which the stacked view would keep apart; they are
// refused.
//
//===----------------------------------------------------------------------===//

#include "passes/LowerToRuntime/Lowerings.h"

#include "passes/Shapes.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

namespace {

/// Records a clipped unit covers (k under user-level DP, else 1).
int64_t unitRecords(LoweringContext &context) {
  return context.recipe.getRecordsPerUnit();
}

/// Samples of the norm kernels: users under user-level DP.
int64_t unitCount(LoweringContext &context) {
  return context.batch / unitRecords(context);
}

/// ||sum_t dy_ut||^2 of `units` units of `tokens` rows of width `dim`.
void callBiasNorm(LoweringContext &context, ::dprt::DType dt, Value dy,
                  Value n2, int64_t units, int64_t tokens, int64_t dim) {
  CallArgs a = context.args();
  a.dtype(dt).buffer(dy).buffer(n2).i64(units).i64(tokens).i64(dim);
  context.call("norm_bias", a);
}

/// n2[u] += <X_u X_u^T, sum_i Dy_iu Dy_iu^T> over `units` units of `tokens`
/// rows: the input's Gram matrices once, then each layer's share
/// <X_u X_u^T, Dy_iu Dy_iu^T> (`gram_norm`, which on sm_90a sums it in the
/// epilogue of the output gradients' Gram product; gram_g is its scratch
/// elsewhere).
void callGramNorm(LoweringContext &context, Value x, ValueRange dys, Value n2,
                  int64_t units, int64_t tokens) {
  Value ka = context.alloc("gram_a", context.acc, {units, tokens, tokens});
  Value kg = context.alloc("gram_g", context.acc, {units, tokens, tokens});
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(x))
      .buffer(ka)
      .i64(units)
      .i64(tokens)
      .i64(lastDim(x))
      .flag(false);
  context.call("gram", a);
  for (Value dy : dys) {
    CallArgs g = context.args();
    g.dtype(context.dt)
        .buffer(context.buf(dy))
        .buffer(ka)
        .buffer(kg)
        .buffer(n2)
        .i64(units)
        .i64(tokens)
        .i64(lastDim(dy));
    context.call("gram_norm", g);
  }
}

LogicalResult lowerRank1(NormRank1Op n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  if (int64_t k = unitRecords(context); k > 1) {
    // A user's gradient sum_j g_j a_j^T has rank up to k: its Gram norm.
    callGramNorm(context, n.getX(), ValueRange{n.getDy()}, n2,
                 unitCount(context), k);
    if (n.getBias())
      callBiasNorm(context, context.dt, context.buf(n.getDy()), n2,
                   unitCount(context), k, lastDim(n.getDy()));
    return success();
  }
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getX()))
      .buffer(context.buf(n.getDy()))
      .buffer(n2)
      .i64(context.batch)
      .i64(lastDim(n.getX()))
      .i64(lastDim(n.getDy()));
  context.call(n.getBias() ? "norm_rank1_bias" : "norm_rank1", a);
  return success();
}

/// ||G^T A||_F^2 = <A A^T, G G^T>: one T x T Gram matrix of the input per
/// sample, one of the output gradients (summed over the layers that share
/// the input), and their inner product.
LogicalResult lowerGram(NormGramOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  callGramNorm(context, n.getX(), n.getDys(), n2, unitCount(context),
               tokensOf(n.getX()) * unitRecords(context));
  return success();
}

LogicalResult lowerDirect(NormDirectOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  int64_t in = lastDim(n.getX()), out = lastDim(n.getDy());
  ::dprt::DType dt = context.dt;
  Value ws = context.allocWorkspace(
      "direct_workspace", {in, out, ::dprt::sizeOf(context.acc)},
      [&] { return ::dprt::normDirectWorkspaceBytes(dt, in, out); });
  CallArgs a = context.args();
  a.dtype(dt)
      .buffer(context.buf(n.getX()))
      .buffer(context.buf(n.getDy()))
      .buffer(n2)
      .i64(unitCount(context))
      .i64(tokensOf(n.getX()) * unitRecords(context))
      .i64(in)
      .i64(out)
      .buffer(ws);
  context.call(n.getBias() ? "norm_direct_bias" : "norm_direct", a);
  return success();
}

LogicalResult lowerBias(NormBiasOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  callBiasNorm(context, context.dt, context.buf(n.getDy()), n2,
               unitCount(context), tokensOf(n.getDy()) * unitRecords(context),
               lastDim(n.getDy()));
  return success();
}

LogicalResult lowerEmbeddingNorm(NormEmbeddingOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getTokens()))
      .buffer(context.buf(n.getDy()))
      .buffer(n2)
      .i64(unitCount(context))
      .i64(tokensOf(n.getDy()) * unitRecords(context))
      .i64(lastDim(n.getDy()));
  context.call("norm_embedding", a);
  return success();
}

LogicalResult lowerPositionNorm(NormPositionEmbeddingOp n,
                                LoweringContext &context) {
  if (unitRecords(context) > 1)
    return n.emitOpError("learned positions cannot be clipped per user: row t "
                         "of the table gets the sum of the user's records' "
                         "position-t gradients, which the per-user norm "
                         "kernels do not form; use rotary positions or "
                         "unit = #dp.unit<user, max_records = 1>");
  Value n2 = context.normTarget(n);
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getDy()))
      .buffer(n2)
      .i64(context.batch)
      .i64(tokensOf(n.getDy()))
      .i64(lastDim(n.getDy()));
  context.call("norm_position_embedding", a);
  return success();
}

/// The operands of a tied table's norm kernels, up to the workspace: the
/// embedding's tokens and output gradient, the head's input and output
/// gradient, n2 and the shapes.
template <typename OpTy>
CallArgs tiedNormArgs(OpTy n, Value n2, LoweringContext &context) {
  int64_t tokensEmb = rowsOf(n.getDembedding()) / unitCount(context);
  int64_t tokensHead = rowsOf(n.getX()) / unitCount(context);
  CallArgs a = context.args();
  a.dtype(context.dt)
      .buffer(context.buf(n.getTokens()))
      .buffer(context.buf(n.getDembedding()))
      .buffer(context.buf(n.getX()))
      .buffer(context.buf(n.getDlogits()))
      .buffer(n2)
      .i64(unitCount(context))
      .i64(tokensEmb)
      .i64(tokensHead)
      .i64(lastDim(n.getDlogits()))
      .i64(lastDim(n.getX()));
  return a;
}

/// 2 <E_b, L_b> through M_b = X_b Demb_b^T, one T_head x T_emb matrix per
/// sample.
LogicalResult lowerTiedCross(NormTiedCrossOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  int64_t tokensEmb = rowsOf(n.getDembedding()) / unitCount(context);
  int64_t tokensHead = rowsOf(n.getX()) / unitCount(context);
  Value ws = context.alloc("tied_cross", context.acc,
                           {unitCount(context), tokensHead, tokensEmb});
  CallArgs a = tiedNormArgs(n, n2, context);
  a.buffer(ws);
  context.call("norm_tied_cross", a);
  return success();
}

/// ||E_b + L_b||^2 with each sample's vocabulary x d gradient formed.
LogicalResult lowerTiedDirect(NormTiedDirectOp n, LoweringContext &context) {
  Value n2 = context.normTarget(n);
  int64_t vocab = lastDim(n.getDlogits()), dim = lastDim(n.getX());
  ::dprt::DType dt = context.dt;
  Value ws = context.allocWorkspace(
      "tied_workspace", {vocab, dim, ::dprt::sizeOf(context.acc)},
      [&] { return ::dprt::normDirectWorkspaceBytes(dt, dim, vocab); });
  CallArgs a = tiedNormArgs(n, n2, context);
  a.buffer(ws);
  context.call("norm_tied_direct", a);
  return success();
}

LogicalResult lowerRows(NormRowsOp n, LoweringContext &context) {
  // Fused: the backward op that formed the gradients added the norm.
  if (n.getFused()) {
    // dp-fuse-norms leaves these alone under user-level DP.
    if (unitRecords(context) > 1)
      return n.emitOpError("is fused into its backward op, which adds "
                           "per-record norms; user-level DP needs the norm "
                           "of the user's sum");
    if (!context.buf(n.getNorms()))
      return n.emitOpError("is fused into an op that did not form its "
                           "gradients");
    return success();
  }
  Value n2 = context.normTarget(n);
  // Acc rows, or compute-type or MXFP8 rows of materialized weight
  // gradients.
  ::dprt::DType rows = toDType(n.getGrads().getType());
  if (int64_t k = unitRecords(context); k > 1) {
    // A user's norm sums its records' rows first: bias_norm reads no MXFP8
    // (and dp-clip-plan materializes nothing under user-level DP).
    if (rows == ::dprt::DType::MXFP8)
      return n.emitOpError("reads MXFP8 per-record rows, which user-level "
                           "DP cannot sum into a user's gradient");
    callBiasNorm(context, rows, context.buf(n.getGrads()), n2,
                 unitCount(context), k, lastDim(n.getGrads()));
    return success();
  }
  CallArgs a = context.args();
  a.dtype(rows)
      .buffer(context.buf(n.getGrads()))
      .buffer(n2)
      .i64(context.batch)
      .i64(lastDim(n.getGrads()));
  context.call("norm_rows", a);
  return success();
}

/// The materialized method: each sample's weight gradient dy_b^T x_b in a
/// [batch, out * in] buffer of the compute type or of MXFP8 (its batch *
/// out * in e4m3 bytes, then their scales: dprt::storageBytes), read later
/// by the clipped sum (rows_weighted_sum or the update); with its
/// dp.norm_rows fused, the same kernel adds the norms.
LogicalResult lowerLinearPerSampleGrad(LinearPerSampleGradOp g,
                                       LoweringContext &context) {
  int64_t in = lastDim(g.getX()), out = lastDim(g.getDy());
  ::dprt::DType rows = toDType(g.getGrads().getType());
  Value grads =
      context.alloc("per_sample_grads", rows, {context.batch, out, in});
  context.setBuffer(g.getGrads(), grads);
  Value n2 = context.fusedNormTarget({g.getGrads()});
  CallArgs a = context.args();
  a.dtype(context.dt)
      .dtype(rows)
      .buffer(context.buf(g.getX()))
      .buffer(context.buf(g.getDy()))
      .buffer(grads)
      .bufferOrNull(n2)
      .i64(context.batch)
      .i64(tokensOf(g.getX()))
      .i64(in)
      .i64(out);
  context.call("linear_per_sample_grad", a);
  return success();
}

/// The norms a dp.norm_sum adds up were added into its buffer already.
LogicalResult lowerSum(NormSumOp s, LoweringContext &context) {
  Value n2 = context.sumBuffer(s);
  if (!n2)
    return s.emitOpError("sums values that are not per-sample norms");
  context.setBuffer(s.getNorms(), n2);
  return success();
}

} // namespace

void dpc::lowering::populatePerSampleNormsLowerings(
    OpLoweringRegistry &registry) {
  registry.add(lowerRank1);
  registry.add(lowerGram);
  registry.add(lowerDirect);
  registry.add(lowerBias);
  registry.add(lowerEmbeddingNorm);
  registry.add(lowerRows);
  registry.add(lowerPositionNorm);
  registry.add(lowerTiedCross);
  registry.add(lowerTiedDirect);
  registry.add(lowerSum);
  registry.add(lowerLinearPerSampleGrad);
}
