//===- PlanMemory.cpp - Static arena layout -------------------------------===//

#include "passes/Passes.h"

#include "dprt/types.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace dpc {
#define GEN_PASS_DEF_PLANMEMORY
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;

namespace {

/// The largest arena a plan may ask for: no device holds more (an H200 has
/// 141 GB). A larger plan can only come from a mistaken batch or shape, and
/// would otherwise fail only when the program allocates it.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;

/// `value` rounded up to kArenaAlignment; nullopt if that overflows.
std::optional<int64_t> alignUp(std::optional<int64_t> value) {
  constexpr int64_t a = ::dprt::kArenaAlignment;
  if (!value)
    return std::nullopt;
  std::optional<int64_t> padded = llvm::checkedAdd<int64_t>(*value, a - 1);
  if (!padded)
    return std::nullopt;
  return *padded / a * a;
}

struct Interval {
  rt::AllocOp alloc;
  int64_t bytes;
  int64_t start, end; ///< op indices, inclusive
  int64_t offset = -1;
};

/// Where the first function that allocates a carried buffer put it.
struct CarriedPlace {
  int64_t offset, bytes;
};

/// Indices of the last op in `body` that uses `buffer` directly or through
/// views, and of the first.
void extendByUses(Value buffer,
                  const llvm::DenseMap<Operation *, int64_t> &index,
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

/// What a planned function needs: the end of its highest temporary and the
/// most bytes live at once.
struct FuncPlan {
  int64_t extent, live;
};

struct PlanMemoryPass : dpc::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (rt::ProgramOp program : getOperation().getOps<rt::ProgramOp>())
      if (failed(plan(program)))
        return signalPassFailure();
  }

  LogicalResult plan(rt::ProgramOp program);
  FailureOr<FuncPlan> planFunc(rt::FuncOp func, int64_t base);

  /// Carried buffers (dprt.alloc's `carried`) placed so far, by key.
  llvm::StringMap<CarriedPlace> carried;
};

/// An error at `op`, a buffer of `bytes` bytes the plan puts at `offset`,
/// whose end a 64-bit size cannot hold.
LogicalResult overflowAt(Operation *op, int64_t bytes, int64_t offset) {
  return op->emitOpError("of ") << bytes << " bytes at offset " << offset
                                << " ends beyond what a 64-bit size can count";
}

LogicalResult PlanMemoryPass::plan(rt::ProgramOp program) {
  OpBuilder builder(program.getContext());
  int64_t globals = 0;
  for (rt::GlobalOp global : program.getBody().getOps<rt::GlobalOp>()) {
    global.setOffsetAttr(builder.getI64IntegerAttr(globals));
    int64_t bytes = global.getBytesAttr().getInt();
    std::optional<int64_t> end =
        alignUp(llvm::checkedAdd<int64_t>(globals, bytes));
    if (!end)
      return overflowAt(global, bytes, globals);
    globals = *end;
  }
  int64_t arena = globals, peak = globals;
  carried.clear();
  for (rt::FuncOp func : program.getBody().getOps<rt::FuncOp>()) {
    FailureOr<FuncPlan> funcPlan = planFunc(func, globals);
    if (failed(funcPlan))
      return failure();
    std::optional<int64_t> inUse =
        llvm::checkedAdd<int64_t>(globals, funcPlan->live);
    if (!inUse)
      return func.emitOpError("has more bytes live at once than a 64-bit "
                              "size can count");
    arena = std::max(arena, funcPlan->extent);
    peak = std::max(peak, *inUse);
  }
  // At the program's location only: the program itself is too large to
  // print with the message.
  if (arena > kMaxArenaBytes)
    return emitError(program.getLoc(), "@")
           << program.getSymName() << " needs an arena of " << arena
           << " bytes ("
           << llvm::formatv("{0:F1}", double(arena) / double(int64_t(1) << 30))
                  .str()
           << " GiB) per rank; no device holds more than " << kMaxArenaBytes
           << " bytes (1 TiB)";
  program.setArenaBytes(arena);
  program.setPeakBytes(peak);
  return success();
}

/// Places the temporaries of `func` after `base`. A carried buffer lives to
/// the end of the function that places it first; in a later function it is
/// placed where that one put it, and lives throughout.
FailureOr<FuncPlan> PlanMemoryPass::planFunc(rt::FuncOp func, int64_t base) {
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  int64_t position = 0;
  for (Operation &op : body)
    index[&op] = position++;
  const int64_t last = position - 1;

  std::vector<Interval> intervals;
  std::vector<size_t> placed;
  for (Operation &op : body) {
    auto alloc = dyn_cast<rt::AllocOp>(op);
    if (!alloc)
      continue;
    int64_t bytes = alloc.getBytesAttr().getInt();
    std::optional<int64_t> aligned = alignUp(bytes);
    if (!aligned)
      return alloc.emitOpError("of ")
             << bytes << " bytes cannot be aligned to "
             << ::dprt::kArenaAlignment
             << " bytes within what a 64-bit size can count";
    Interval interval{alloc, *aligned, index[&op], index[&op]};
    extendByUses(alloc.getBuffer(), index, interval);
    if (StringAttr key = alloc.getCarriedAttr()) {
      auto it = carried.find(key.getValue());
      if (it == carried.end()) {
        interval.end = last;
      } else {
        if (it->second.bytes != *aligned)
          return alloc.emitOpError("carries '")
                 << key.getValue() << "' as " << bytes
                 << " bytes; an earlier function allocated it as "
                 << it->second.bytes;
        interval.start = 0;
        interval.end = last;
        interval.offset = it->second.offset;
        placed.push_back(intervals.size());
      }
    }
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
  int64_t extent = base;
  for (size_t i : placed)
    extent = std::max(extent, intervals[i].offset + intervals[i].bytes);
  for (size_t i : order) {
    Interval &cur = intervals[i];
    if (cur.offset >= 0)
      continue; // carried from an earlier function
    std::vector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed) {
      const Interval &other = intervals[j];
      if (other.end < cur.start || cur.end < other.start)
        continue;
      // Placed intervals end where the check below let them.
      taken.push_back({other.offset, other.offset + other.bytes});
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = base;
    std::optional<int64_t> end = llvm::checkedAdd<int64_t>(offset, cur.bytes);
    for (auto [lo, hi] : taken) {
      if (end && *end <= lo)
        break;
      offset = std::max(offset, hi);
      end = llvm::checkedAdd<int64_t>(offset, cur.bytes);
    }
    if (!end)
      return overflowAt(cur.alloc, cur.bytes, offset);
    cur.offset = offset;
    extent = std::max(extent, *end);
    placed.push_back(i);
  }

  // The plan is checked, not trusted: two buffers live at the same time
  // never share a byte.
  bool overlapping = false;
  for (size_t a = 0; a < intervals.size(); ++a)
    for (size_t b = a + 1; b < intervals.size(); ++b) {
      Interval &x = intervals[a], &y = intervals[b];
      bool together = !(x.end < y.start || y.end < x.start);
      bool overlap =
          x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
      if (together && overlap) {
        x.alloc.emitOpError("memory plan overlaps a buffer live at the "
                            "same time");
        overlapping = true;
      }
    }
  if (overlapping)
    return failure();

  // The most bytes live at once (the plan may need more for alignment
  // and fragmentation: that is extent - base). Buffers live at once lie
  // side by side in [base, extent), so no sum below exceeds extent - base.
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

  OpBuilder builder(func.getContext());
  for (Interval &interval : intervals) {
    interval.alloc.setOffsetAttr(builder.getI64IntegerAttr(interval.offset));
    if (StringAttr key = interval.alloc.getCarriedAttr())
      carried.try_emplace(key.getValue(),
                          CarriedPlace{interval.offset, interval.bytes});
  }
  return FuncPlan{extent, mostLive};
}

} // namespace
