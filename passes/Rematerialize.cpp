//===- Rematerialize.cpp - Recompute cheap activations in the backward ----===//
//
// Normalizations, activations and elementwise products cost one pass over
// memory, yet their results are as large as the matrix products' and would
// live from the forward to the backward. When everything such a layer reads
// is kept for the backward anyway, cloning it just before its first backward
// reader lets its forward result die in the forward: the peak at the end of
// the forward shrinks for one more elementwise pass (what compiled PyTorch's
// partitioner does by default). Whole blocks are dp-recompute's business.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace dpc {
#define GEN_PASS_DEF_REMATERIALIZE
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// Layers whose recomputation is one pass over memory (no matrix product).
bool isCheap(Operation *op) {
  return isa<RMSNormOp, LayerNormOp, ReluOp, SiluOp, GeluOp, MulOp, AddOp,
             GluOp>(op);
}

struct RematerializePass : dpc::impl::RematerializeBase<RematerializePass> {
  using RematerializeBase::RematerializeBase;

  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled =
        findTrainingStep(getOperation(), getArgument());
    if (failed(compiled))
      return signalPassFailure();
    rematerialize(compiled->step);
  }

  void rematerialize(StepOp step);
  void fuseIntoGradient(GluOp clone);
  void fuseIntoGradient(RMSNormOp clone, RMSNormOp forward);
};

/// Moves `readers` (in `body`, none of them `grad`) after `grad`, keeping
/// their order, when everything that reads what they make comes after
/// `grad` too; false, moving nothing, when something does not. Readers
/// already after `grad` stay where they are.
bool moveReadersAfter(Operation *grad, SmallVector<Operation *> readers) {
  llvm::erase_if(readers, [&](Operation *reader) {
    return grad->isBeforeInBlock(reader);
  });
  llvm::sort(readers,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  for (Operation *reader : readers)
    for (Value result : reader->getResults())
      for (Operation *user : result.getUsers())
        if (!grad->isBeforeInBlock(user))
          return false;
  Operation *after = grad;
  for (Operation *reader : readers) {
    reader->moveAfter(after);
    after = reader;
  }
  return true;
}

void RematerializePass::rematerialize(StepOp step) {
  Block &body = step.getBodyBlock();
  // The forward ends with the op that computes the yielded loss.
  Operation *terminator = body.getTerminator();
  Operation *loss = terminator->getOperand(0).getDefiningOp();
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t position = 0;
  for (Operation &op : body)
    index[&op] = position++;
  const int64_t forwardEnd = loss ? index.lookup(loss) : -1;
  auto isBackward = [&](Operation *user) {
    return user != terminator && index.lookup(user) > forwardEnd;
  };
  // Position of a value's first and last backward reader (-1: none).
  auto backwardReaders = [&](Value value) {
    std::pair<int64_t, int64_t> range{-1, -1};
    for (Operation *user : value.getUsers())
      if (isBackward(user)) {
        int64_t at = index.lookup(user);
        range.first = range.first < 0 ? at : std::min(range.first, at);
        range.second = std::max(range.second, at);
      }
    return range;
  };

  // Candidates: cheap forward layers the backward reads a result of, except
  // where a derivative must read its forward op's own operands (the loss's
  // and attention's derivatives find their forward op through them).
  auto needsForwardValue = [&](Value result) {
    return llvm::any_of(result.getUsers(), [](Operation *user) {
      return isa<CrossEntropyGradOp, MSEGradOp, AttentionGradOp>(user);
    });
  };
  llvm::SetVector<Operation *> chosen;
  for (Operation &op : body) {
    if (index.lookup(&op) > forwardEnd)
      break;
    if (!isCheap(&op) || op.hasAttr("dp.recompute") ||
        llvm::any_of(op.getResults(), needsForwardValue))
      continue;
    if (llvm::any_of(op.getResults(), [&](Value result) {
          return backwardReaders(result).first >= 0;
        }))
      chosen.insert(&op);
  }

  // Drop candidates until every one reads only values that stay live up to
  // its clone anyway: step arguments, values the backward reads later, or
  // results of other chosen layers (cloned too). Dropping one can only make
  // its readers' clones earlier, so this reaches a fixed point.
  llvm::DenseMap<Operation *, int64_t> placement;
  for (bool changed = true; changed;) {
    changed = false;
    // A clone goes before its first backward reader or before the first
    // clone that reads it, whichever comes first: later layers first.
    placement.clear();
    for (Operation *op : llvm::reverse(chosen)) {
      int64_t at = -1;
      auto earlier = [&](int64_t other) {
        if (other >= 0 && (at < 0 || other < at))
          at = other;
      };
      for (Value result : op->getResults()) {
        earlier(backwardReaders(result).first);
        for (Operation *user : result.getUsers())
          if (chosen.contains(user))
            earlier(placement.lookup(user));
      }
      placement[op] = at;
    }
    for (Operation *op : llvm::to_vector(chosen)) {
      bool live = llvm::all_of(op->getOperands(), [&](Value operand) {
        Operation *def = operand.getDefiningOp();
        if (!def)
          return true;
        if (chosen.contains(def))
          return true;
        return backwardReaders(operand).second >= placement.lookup(op);
      });
      if (!live) {
        chosen.remove(op);
        changed = true;
      }
    }
  }
  if (chosen.empty())
    return;

  // Clone in the forward's order, so a clone's operands come first; then
  // the backward (not the forward, nor another clone) reads the clones.
  llvm::DenseMap<int64_t, Operation *> opAt;
  for (auto &[op, at] : index)
    opAt[at] = op;
  OpBuilder builder(step.getContext());
  IRMapping mapping;
  auto tag = builder.getStringAttr("rematerialize");
  for (Operation *op : chosen) {
    builder.setInsertionPoint(opAt.lookup(placement.lookup(op)));
    Operation *clone = builder.clone(*op, mapping);
    // dp-shard gathers parameters for it where the backward reads them.
    clone->setAttr("dp.recompute", tag);
    ++numCloned;
  }
  for (Operation *op : chosen)
    for (Value result : op->getResults())
      result.replaceUsesWithIf(mapping.lookup(result), [&](OpOperand &use) {
        Operation *user = use.getOwner();
        return index.count(user) && isBackward(user);
      });
  step->setAttr("dp.rematerialized",
                builder.getI64IntegerAttr(int64_t(chosen.size())));
  for (Operation *op : chosen) {
    if (auto glu = dyn_cast<GluOp>(op))
      fuseIntoGradient(
          cast<GluOp>(mapping.lookup(glu.getOutput()).getDefiningOp()));
    if (auto norm = dyn_cast<RMSNormOp>(op))
      fuseIntoGradient(
          cast<RMSNormOp>(mapping.lookup(norm.getOutput()).getDefiningOp()),
          norm);
  }
}

/// A rematerialized GLU output is read by the down projection's weight
/// gradient, which needs nothing the GLU's own gradient makes, while that
/// gradient reads the same gate and up. Moving those readers after the
/// gradient lets one pass over gate and up make both (dp.glu_grad_remat):
/// the clone's reads of gate and up, a sixth of their backward's traffic,
/// are saved. Only where every reader can move: nothing before the gradient
/// reads what they make.
void RematerializePass::fuseIntoGradient(GluOp clone) {
  Block *body = clone->getBlock();
  GluGradOp grad;
  for (Operation *user : clone.getGate().getUsers())
    if (auto g = dyn_cast<GluGradOp>(user))
      if (g.getUp() == clone.getUp() && g.getKind() == clone.getKind() &&
          g->getBlock() == body && clone->isBeforeInBlock(g))
        grad = g;
  if (!grad)
    return;
  SmallVector<Operation *> readers(clone.getOutput().getUsers().begin(),
                                   clone.getOutput().getUsers().end());
  if (llvm::any_of(readers, [&](Operation *reader) {
        return reader->getBlock() != body || reader == grad.getOperation();
      }))
    return;
  // Readers after the gradient read its output where they are; those before
  // it move after it.
  if (!moveReadersAfter(grad, readers))
    return;
  OpBuilder builder(grad);
  auto fused = builder.create<GluGradRematOp>(
      grad.getLoc(), grad.getDgate().getType(), grad.getDup().getType(),
      clone.getOutput().getType(), grad.getGate(), grad.getUp(), grad.getDy(),
      grad.getKind());
  grad.getDgate().replaceAllUsesWith(fused.getDgate());
  grad.getDup().replaceAllUsesWith(fused.getDup());
  clone.getOutput().replaceAllUsesWith(fused.getOutput());
  grad.erase();
  clone.erase();
  ++numFusedIntoGradient;
}

/// The same for an RMSNorm: its derivative reads x and the forward's rstd,
/// and its clone's readers (the weight gradients of the projections it
/// feeds) need nothing the derivative makes; dp-backward already puts them
/// after it in every program, so that the per-sample norms are added in the
/// same order with and without this fold. One pass over x then forms dx,
/// the scale's gradients and the result again (dp.rms_norm_grad's third
/// result, from the forward's rstd: the forward's bits), and the clone's
/// reads of x and its rstd are saved. The derivative names the forward op
/// again as the one whose statistics it reads.
void RematerializePass::fuseIntoGradient(RMSNormOp clone, RMSNormOp forward) {
  Block *body = clone->getBlock();
  RMSNormGradOp grad;
  for (Operation *user : clone.getOutput().getUsers())
    if (auto g = dyn_cast<RMSNormGradOp>(user))
      if (g.getY() == clone.getOutput() && g.getX() == clone.getInput() &&
          g.getScaleAttr() == clone.getScaleAttr() && !g.getRecomputed() &&
          g->getBlock() == body)
        grad = g;
  if (!grad)
    return;
  SmallVector<Operation *> readers;
  for (Operation *reader : clone.getOutput().getUsers()) {
    if (reader == grad.getOperation())
      continue;
    if (reader->getBlock() != body)
      return;
    readers.push_back(reader);
  }
  if (!moveReadersAfter(grad, readers))
    return;
  OpBuilder builder(grad);
  auto fused = builder.create<RMSNormGradOp>(
      grad.getLoc(), grad.getDx().getType(), grad.getScaleGrads().getType(),
      clone.getOutput().getType(), grad.getScaleAttr(), grad.getX(),
      forward.getOutput(), grad.getDy(), grad.getAcc());
  grad.getDx().replaceAllUsesWith(fused.getDx());
  grad.getScaleGrads().replaceAllUsesWith(fused.getScaleGrads());
  grad.erase();
  clone.getOutput().replaceAllUsesWith(fused.getRecomputed());
  clone.erase();
  ++numFusedIntoGradient;
}

} // namespace
