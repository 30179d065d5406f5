//===- Schedule.cpp - Streams, prefetch and events ------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dpc {
#define GEN_PASS_DEF_SCHEDULE
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;

namespace {

constexpr int32_t kComputeStream = 0;
constexpr int32_t kCommStream = 1;

/// The buffer a collective writes: the full buffer of an all-gather (its
/// second buffer operand).
Value gatheredBuffer(rt::CallOp gather) { return gather.getBuffers()[1]; }
/// An all-gather, or the cast that stands for one on a unit of one shard
/// (gather_master): both write the unit's buffer that layers then read.
bool isGather(rt::CallOp call) {
  return call.getCallee() == "all_gather" ||
         call.getCallee() == "gather_master";
}
/// The buffer an all-reduce sums in place (its only buffer operand).
Value summedBuffer(rt::CallOp reduce) { return reduce.getBuffers()[0]; }
/// The buffer a reduce-scatter reads: the full gradient (first operand).
Value reducedBuffer(rt::CallOp reduce) { return reduce.getBuffers()[0]; }

/// Ops that use `buffer`, directly or through views of it.
void collectUsers(Value buffer, llvm::SetVector<Operation *> &users) {
  for (Operation *user : buffer.getUsers()) {
    users.insert(user);
    if (auto view = dyn_cast<rt::ViewOp>(user))
      collectUsers(view.getBuffer(), users);
  }
}

/// The first op after `after` in its block that uses `buffer` (through
/// views too; for the buffer of a dprt.global, through every dprt.get_global
/// of that global), ignoring view ops themselves; null if none.
Operation *firstUseAfter(Value buffer, Operation *after) {
  llvm::SetVector<Operation *> users;
  collectUsers(buffer, users);
  if (auto global = buffer.getDefiningOp<rt::GetGlobalOp>())
    for (auto other : after->getBlock()->getOps<rt::GetGlobalOp>())
      if (other.getGlobal() == global.getGlobal())
        collectUsers(other.getBuffer(), users);
  Operation *first = nullptr;
  for (Operation *user : users) {
    if (isa<rt::ViewOp>(user) || user == after || !after->isBeforeInBlock(user))
      continue;
    if (!first || user->isBeforeInBlock(first))
      first = user;
  }
  return first;
}

struct SchedulePass : dpc::impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;

  void runOnOperation() override {
    for (rt::ProgramOp program : getOperation().getOps<rt::ProgramOp>()) {
      int64_t depth = prefetch;
      if (depth < 0) {
        depth = program.getPrefetch().value_or(1);
      }
      for (rt::FuncOp func : program.getBody().getOps<rt::FuncOp>())
        if (!func.getDescribe())
          scheduleFunc(func, depth);
    }
  }

  /// Moves `op`, and the ops in its block that define its operands and lie
  /// after `before`, to just before `before`.
  void hoist(Operation *op, Operation *before) {
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && def->getBlock() == before->getBlock() &&
          before->isBeforeInBlock(def))
        hoist(def, before);
    }
    op->moveBefore(before);
  }

  void scheduleFunc(rt::FuncOp func, int64_t depth);
};

void SchedulePass::scheduleFunc(rt::FuncOp func, int64_t depth) {
  Block &body = func.getBody().front();
  SmallVector<rt::CallOp> gathers;
  for (Operation &op : body)
    if (auto call = dyn_cast<rt::CallOp>(op);
        call && call.isCollective() && isGather(call))
      gathers.push_back(call);
  if (gathers.empty() && llvm::none_of(body, [](Operation &op) {
        auto call = dyn_cast<rt::CallOp>(op);
        return call && call.isCollective();
      }))
    return;

  // Prefetch: gather i is issued when the unit of gather i - depth starts
  // being used, and never before gather i - 1.
  if (depth > 0) {
    for (size_t i = depth; i < gathers.size(); ++i) {
      Operation *anchor =
          firstUseAfter(gatheredBuffer(gathers[i - depth]), gathers[i - depth]);
      if (!anchor || !anchor->isBeforeInBlock(gathers[i]))
        continue;
      if (anchor->isBeforeInBlock(gathers[i - 1]) ||
          anchor == gathers[i - 1].getOperation())
        anchor = gathers[i - 1]->getNextNode();
      if (anchor == gathers[i].getOperation() ||
          !anchor->isBeforeInBlock(gathers[i]))
        continue;
      hoist(gathers[i], anchor);
      ++numPrefetched;
    }
  }

  OpBuilder builder(func.getContext());
  int32_t nextEvent = 0;
  Location loc = func.getLoc();
  auto record = [&](int32_t stream) {
    int32_t event = nextEvent++;
    builder.create<rt::RecordEventOp>(loc, stream, event);
    ++numEvents;
    return event;
  };
  auto wait = [&](int32_t stream, int32_t event, ValueRange keep = {}) {
    builder.create<rt::WaitEventOp>(loc, keep, stream, event);
  };

  SmallVector<rt::CallOp> collectives;
  for (Operation &op : body)
    if (auto call = dyn_cast<rt::CallOp>(op); call && call.isCollective())
      collectives.push_back(call);

  SmallVector<std::pair<rt::CallOp, int32_t>> reduceScatters;
  for (rt::CallOp call : collectives) {
    loc = call.getLoc();
    // The collective waits for the compute issued before it: what it reads
    // is ready and the memory it writes is no longer read by compute.
    builder.setInsertionPoint(call);
    int32_t ready = record(kComputeStream);
    wait(kCommStream, ready);
    call.setStream(kCommStream);
    builder.setInsertionPointAfter(call);
    int32_t done = record(kCommStream);
    // Compute waits for what an all-gather or all-reduce writes before it
    // first uses it.
    if (isGather(call) || call.getCallee() == "all_reduce") {
      Value written =
          isGather(call) ? gatheredBuffer(call) : summedBuffer(call);
      Operation *use = firstUseAfter(written, call);
      if (!use && call.getCallee() == "all_reduce")
        use = body.getTerminator(); // the step ends with the sum in place
      if (use) {
        builder.setInsertionPoint(use);
        wait(kComputeStream, done);
      }
      continue;
    }
    // A reduce-scatter reads its gradient buffer until `done`; compute waits
    // for it before issuing the reduce-scatter two later.
    reduceScatters.push_back({call, done});
    if (reduceScatters.size() >= 3) {
      auto [old, event] = reduceScatters[reduceScatters.size() - 3];
      builder.setInsertionPoint(call->getPrevNode()->getPrevNode());
      wait(kComputeStream, event, ValueRange{reducedBuffer(old)});
      old->setAttr("waited", builder.getUnitAttr());
    }
  }
  // Join: stream 0 waits for every reduce-scatter not waited for yet.
  builder.setInsertionPoint(body.getTerminator());
  for (auto [call, event] : reduceScatters) {
    if (call->hasAttr("waited")) {
      call->removeAttr("waited");
      continue;
    }
    wait(kComputeStream, event, ValueRange{reducedBuffer(call)});
  }
}

} // namespace
