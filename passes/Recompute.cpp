//===- Recompute.cpp - Activation recomputation ---------------------------===//
//
// Re-runs the forward of whole blocks just before their backward, from the
// block's saved input, so that the block's activations do not live from the
// forward to the backward. The memory plan then sees the shorter lifetimes;
// dpc chooses how many blocks (compileWithinBudget in Pipeline.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace dpc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// Forward layers between the first one that reads a parameter of one
/// prefix and the first one that reads a parameter of the next.
struct Segment {
  std::string name;
  SmallVector<Operation *> ops;
  int64_t linears = 0;
};

/// The prefix of a parameter name as FSDP's block units take it; a name
/// without a dot (an embedding, a final norm, a head) is its own.
std::string prefixOf(StringRef param) {
  return param.substr(0, param.find('.')).str();
}

struct RecomputePass : dpc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;

  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled =
        findTrainingStep(getOperation(), getArgument());
    if (failed(compiled))
      return signalPassFailure();
    if (blocks < -1) {
      emitError(getOperation().getLoc(), "dp-recompute: blocks=")
          << int64_t(blocks) << " is not a number of blocks (-1: all)";
      return signalPassFailure();
    }
    recompute(compiled->step);
  }

  void recompute(StepOp step);
  /// Clones what the backward reads of `segment` before its first reader;
  /// false if the backward reads nothing of it.
  bool recomputeSegment(const Segment &segment,
                        const llvm::DenseMap<Operation *, int64_t> &index,
                        int64_t forwardEnd);
};

void RecomputePass::recompute(StepOp step) {
  Block &body = step.getBodyBlock();
  OpBuilder builder(step.getContext());
  if (step->hasAttr("dp.recomputed")) {
    step.emitOpError("has recomputed blocks already; dp-recompute runs once");
    return signalPassFailure();
  }
  // The forward ends with the op that computes the yielded loss.
  Operation *loss = body.getTerminator()->getOperand(0).getDefiningOp();
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t position = 0;
  for (Operation &op : body)
    index[&op] = position++;
  int64_t forwardEnd = loss ? index.lookup(loss) : -1;

  SmallVector<Segment> segments;
  llvm::StringSet<> seen;
  for (Operation &op : body) {
    if (index.lookup(&op) > forwardEnd)
      break;
    if (auto user = dyn_cast<ParamUserOpInterface>(op)) {
      SmallVector<FlatSymbolRefAttr, 2> refs = user.getParamRefs();
      if (!refs.empty()) {
        std::string prefix = prefixOf(refs.front().getValue());
        if (seen.insert(prefix).second)
          segments.push_back({prefix, {}, 0});
      }
    }
    if (segments.empty())
      segments.push_back({"", {}, 0});
    segments.back().ops.push_back(&op);
    segments.back().linears += isa<LinearOp>(op);
  }

  SmallVector<Attribute> done;
  for (const Segment &segment : segments) {
    if (blocks >= 0 && int64_t(done.size()) >= blocks)
      break;
    bool holdsLoss = llvm::is_contained(segment.ops, loss);
    if (segment.linears < 2 || holdsLoss)
      continue;
    if (recomputeSegment(segment, index, forwardEnd))
      done.push_back(builder.getStringAttr(segment.name));
  }
  step->setAttr("dp.recomputed", builder.getArrayAttr(done));
  numBlocks += done.size();
}

bool RecomputePass::recomputeSegment(
    const Segment &segment, const llvm::DenseMap<Operation *, int64_t> &index,
    int64_t forwardEnd) {
  llvm::DenseSet<Operation *> inSegment(segment.ops.begin(), segment.ops.end());
  auto isBackward = [&](Operation *op) {
    return index.lookup(op) > forwardEnd;
  };
  // What the backward reads of the segment, except its outputs: values a
  // later forward layer reads are kept from the forward anyway.
  SmallVector<Value> read;
  for (Operation *op : segment.ops)
    for (Value result : op->getResults()) {
      bool output = false, backward = false;
      for (Operation *user : result.getUsers()) {
        if (isBackward(user))
          backward = true;
        else if (!inSegment.contains(user))
          output = true;
      }
      if (backward && !output)
        read.push_back(result);
    }
  if (read.empty())
    return false;
  // Recomputed right before the earliest backward op that reads one of them.
  Operation *first = nullptr;
  for (Value value : read)
    for (Operation *user : value.getUsers())
      if (isBackward(user) &&
          (!first || index.lookup(user) < index.lookup(first)))
        first = user;

  // The layers those values need, within the segment.
  llvm::SetVector<Operation *> needed;
  SmallVector<Operation *> worklist;
  for (Value value : read)
    worklist.push_back(value.getDefiningOp());
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!op || !inSegment.contains(op) || !needed.insert(op))
      continue;
    for (Value operand : op->getOperands())
      worklist.push_back(operand.getDefiningOp());
  }

  OpBuilder builder(first);
  IRMapping mapping;
  auto tag = builder.getStringAttr(segment.name);
  for (Operation *op : segment.ops) {
    if (!needed.contains(op))
      continue;
    Operation *clone = builder.clone(*op, mapping);
    clone->setAttr("dp.recompute", tag);
    ++numCloned;
  }
  for (Value value : read) {
    Value clone = mapping.lookup(value);
    value.replaceUsesWithIf(clone, [&](OpOperand &use) {
      Operation *user = use.getOwner();
      return index.count(user) && isBackward(user);
    });
  }
  return true;
}

} // namespace
