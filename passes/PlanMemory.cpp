//===- PlanMemory.cpp - Static arena layout -------------------------------===//

#include "passes/Passes.h"

#include "dprt/types.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

namespace dpc {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;

namespace {

int64_t alignUp(int64_t value) {
  int64_t a = ::dprt::kArenaAlignment;
  return (value + a - 1) / a * a;
}

struct Interval {
  rt::AllocOp alloc;
  int64_t bytes;
  int64_t start, end; ///< op indices, inclusive
  int64_t offset = -1;
};

/// Indices of the last op in `body` that uses `buffer` directly or through
/// views, and of the first.
void extendByUses(Value buffer, const llvm::DenseMap<Operation *, int64_t> &index,
                  Interval &interval) {
  for (Operation *user : buffer.getUsers()) {
    // A use nested in another op counts at that op's position.
    Operation *top = user;
    while (!index.count(top) && top->getParentOp())
      top = top->getParentOp();
    auto it = index.find(top);
    if (it == index.end())
      continue;
    interval.start = std::min(interval.start, it->second);
    interval.end = std::max(interval.end, it->second);
    if (auto view = dyn_cast<rt::ViewOp>(user))
      extendByUses(view.getBuffer(), index, interval);
  }
}

struct PlanMemoryPass : dpc::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (rt::ProgramOp program : getOperation().getOps<rt::ProgramOp>())
      plan(program);
  }

  void plan(rt::ProgramOp program) {
    OpBuilder builder(program.getContext());
    int64_t globals = 0;
    for (rt::GlobalOp global : program.getBody().getOps<rt::GlobalOp>()) {
      global.setOffsetAttr(builder.getI64IntegerAttr(globals));
      globals = alignUp(globals + global.getBytes());
    }
    int64_t arena = globals, peak = globals;
    for (rt::FuncOp func : program.getBody().getOps<rt::FuncOp>()) {
      auto [extent, live] = planFunc(func, globals);
      arena = std::max(arena, extent);
      peak = std::max(peak, globals + live);
    }
    program.setArenaBytes(arena);
    program.setPeakBytes(peak);
  }

  /// Places the temporaries of `func` after `base`; returns the end of the
  /// highest one and the most bytes live at once.
  std::pair<int64_t, int64_t> planFunc(rt::FuncOp func, int64_t base) {
    Block &body = func.getBody().front();
    llvm::DenseMap<Operation *, int64_t> index;
    int64_t position = 0;
    for (Operation &op : body)
      index[&op] = position++;

    std::vector<Interval> intervals;
    for (Operation &op : body) {
      auto alloc = dyn_cast<rt::AllocOp>(op);
      if (!alloc)
        continue;
      Interval interval{alloc, alignUp(alloc.getBytes()), index[&op],
                        index[&op]};
      extendByUses(alloc.getBuffer(), index, interval);
      intervals.push_back(interval);
    }
    numBuffers += intervals.size();

    // Largest first, each at the lowest offset free for its whole life.
    std::vector<size_t> order(intervals.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return intervals[a].bytes > intervals[b].bytes;
    });
    std::vector<size_t> placed;
    int64_t extent = base;
    for (size_t i : order) {
      Interval &cur = intervals[i];
      std::vector<std::pair<int64_t, int64_t>> taken;
      for (size_t j : placed) {
        const Interval &other = intervals[j];
        if (other.end < cur.start || cur.end < other.start)
          continue;
        taken.push_back({other.offset, other.offset + other.bytes});
      }
      std::sort(taken.begin(), taken.end());
      int64_t offset = base;
      for (auto [lo, hi] : taken) {
        if (offset + cur.bytes <= lo)
          break;
        offset = std::max(offset, hi);
      }
      cur.offset = offset;
      extent = std::max(extent, offset + cur.bytes);
      placed.push_back(i);
    }

    // The most bytes live at once (the plan may need more for alignment
    // and fragmentation: that is extent - base).
    std::vector<std::pair<int64_t, int64_t>> events;
    for (const Interval &interval : intervals) {
      events.push_back({interval.start, interval.bytes});
      events.push_back({interval.end + 1, -interval.bytes});
    }
    std::sort(events.begin(), events.end());
    int64_t live = 0, mostLive = 0;
    for (auto [when, delta] : events) {
      live += delta;
      mostLive = std::max(mostLive, live);
    }

    // The plan is checked, not trusted: two buffers live at the same time
    // never share a byte.
    for (size_t a = 0; a < intervals.size(); ++a)
      for (size_t b = a + 1; b < intervals.size(); ++b) {
        Interval &x = intervals[a], &y = intervals[b];
        bool together = !(x.end < y.start || y.end < x.start);
        bool overlap = x.offset < y.offset + y.bytes &&
                       y.offset < x.offset + x.bytes;
        if (together && overlap) {
          x.alloc.emitOpError("memory plan overlaps a buffer live at the "
                              "same time");
          signalPassFailure();
        }
      }

    OpBuilder builder(func.getContext());
    for (Interval &interval : intervals)
      interval.alloc.setOffsetAttr(builder.getI64IntegerAttr(interval.offset));
    return {extent, mostLive};
  }
};

} // namespace
