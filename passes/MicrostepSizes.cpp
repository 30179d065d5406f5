//===- MicrostepSizes.cpp - dp_microstep for smaller physical batches -----===//
//
// A Poisson-sampled logical batch rarely fills its last physical batches:
// padding them to the compiled size costs a full micro-step's work for a
// few rows. dpc therefore compiles the same model and recipe, with the same
// decisions (norm methods, recomputation, rematerialization, resharding),
// for fewer rows and adds that program's dp_microstep to the full one as
// dp_microstep_<rows>, run on the full program's memory plan.
//
// That is sound because the two micro-steps are the same sequence of
// operations on the same buffers, only smaller: the check below walks them
// side by side and accepts nothing else (same ops, same operands, the same
// attributes but for sizes; every allocation no larger than its
// counterpart). Every buffer of the smaller micro-step then lives, op for
// op, exactly when its counterpart does, and it takes the first bytes of
// its counterpart's place in the arena, so no two live buffers overlap.
// The per-sample inputs, mask and losses are row-major with the sample
// first, so the smaller program's rows are the first rows of the full
// program's buffers: the driver fills and reads those.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipeline.h"

#include "DP/DPOps.h"
#include "DPRT/DPRTDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace dpc;

namespace {

rt::ProgramOp onlyProgram(ModuleOp module) {
  auto programs = llvm::to_vector(module.getOps<rt::ProgramOp>());
  return programs.size() == 1 ? programs.front() : rt::ProgramOp();
}

/// Whether two dprt.call argument lists agree but for sizes: integers that
/// are not buffer indices.
bool sameCallArgs(ArrayAttr full, ArrayAttr smaller) {
  if (full.size() != smaller.size())
    return false;
  for (auto [a, b] : llvm::zip_equal(full, smaller)) {
    if (a == b)
      continue;
    auto x = dyn_cast<IntegerAttr>(a), y = dyn_cast<IntegerAttr>(b);
    if (!x || !y || x.getType() != y.getType() || x.getType().isIndex())
      return false;
  }
  return true;
}

/// Why `smaller` is not `full` made smaller, or "" when it is. Fills
/// `counterpart` with the full op of each smaller one.
std::string compareMicrosteps(rt::FuncOp full, rt::FuncOp smaller,
                              rt::ProgramOp fullProgram,
                              rt::ProgramOp smallerProgram,
                              DenseMap<Operation *, Operation *> &counterpart) {
  Block &a = full.getBody().front(), &b = smaller.getBody().front();
  if (a.getOperations().size() != b.getOperations().size())
    return "they have " + std::to_string(a.getOperations().size()) + " and " +
           std::to_string(b.getOperations().size()) + " operations";
  IRMapping values;
  for (auto [position, pair] : llvm::enumerate(llvm::zip_equal(a, b))) {
    auto &[x, y] = pair;
    auto where = [&, &x = x](StringRef what) {
      return "operation #" + std::to_string(position) + " (" +
             x.getName().getStringRef().str() + ") " + what.str();
    };
    if (x.getName() != y.getName())
      return where("is " + y.getName().getStringRef().str() + " there");
    if (x.getNumOperands() != y.getNumOperands() ||
        x.getNumResults() != y.getNumResults())
      return where("has other operands or results");
    for (auto [u, v] : llvm::zip_equal(x.getOperands(), y.getOperands()))
      if (values.lookupOrNull(v) != u)
        return where("reads other buffers");
    for (auto [u, v] : llvm::zip_equal(x.getResults(), y.getResults()))
      values.map(v, u);
    counterpart[&y] = &x;
    if (auto alloc = dyn_cast<rt::AllocOp>(x)) {
      if (cast<rt::AllocOp>(y).getBytes() > alloc.getBytes())
        return where("is larger");
      continue;
    }
    // A view's place inside its buffer is the smaller program's own.
    if (isa<rt::ViewOp>(x))
      continue;
    if (auto ref = dyn_cast<rt::GetGlobalOp>(x)) {
      auto other = cast<rt::GetGlobalOp>(y);
      if (ref.getGlobal() != other.getGlobal())
        return where("names another global");
      auto big = SymbolTable::lookupSymbolIn(fullProgram, ref.getGlobalAttr());
      auto small =
          SymbolTable::lookupSymbolIn(smallerProgram, other.getGlobalAttr());
      auto bigGlobal = dyn_cast_or_null<rt::GlobalOp>(big);
      auto smallGlobal = dyn_cast_or_null<rt::GlobalOp>(small);
      if (!bigGlobal || !smallGlobal ||
          smallGlobal.getBytes() > bigGlobal.getBytes())
        return where("names a global that is larger there");
      continue;
    }
    if (auto call = dyn_cast<rt::CallOp>(x)) {
      auto other = cast<rt::CallOp>(y);
      if (call.getCallee() != other.getCallee() ||
          call.getStream() != other.getStream() ||
          !sameCallArgs(call.getArgs(), other.getArgs()))
        return where("calls '" + other.getCallee().str() +
                     "' with other arguments than sizes");
      continue;
    }
    if (x.getAttrDictionary() != y.getAttrDictionary())
      return where("has other attributes");
  }
  return "";
}

} // namespace

SmallVector<std::string> dpc::materializedWeights(ModuleOp planned) {
  SmallVector<std::string> names;
  planned.walk([&](dp::NormRowsOp norm) {
    if (norm.getGrads().getDefiningOp<dp::LinearPerSampleGradOp>())
      names.push_back(
          cast<FlatSymbolRefAttr>(norm.getParams()[0]).getValue().str());
  });
  return names;
}

/// The parameters dp_describe's calls of `callee` name (their first
/// argument).
static llvm::StringSet<> paramsDescribedBy(ModuleOp planned, StringRef callee) {
  llvm::StringSet<> names;
  planned.walk([&](rt::CallOp call) {
    if (call.getCallee() == callee)
      names.insert(cast<StringAttr>(call.getArgs()[0]).getValue());
  });
  return names;
}

llvm::StringSet<> dpc::paramsSummedInUpdate(ModuleOp planned) {
  return paramsDescribedBy(planned, "describe_update_from_rows");
}

llvm::StringSet<> dpc::paramsWithGradientsWritten(ModuleOp planned) {
  return paramsDescribedBy(planned, "describe_gradient_overwritten");
}

bool dpc::sumsInUpdate(ModuleOp planned) {
  return !paramsSummedInUpdate(planned).empty();
}

LogicalResult dpc::addSizedMicrostep(ModuleOp planned, ModuleOp sized,
                                     int64_t rows) {
  rt::ProgramOp full = onlyProgram(planned), smaller = onlyProgram(sized);
  if (!full || !smaller)
    return planned.emitError("expected one dprt.program in each plan");
  // A smaller micro-step would leave the rows it does not run, stale, to
  // dp_apply.
  if (sumsInUpdate(planned))
    return full.emitOpError("cannot run its micro-step on ")
           << rows << " rows: its update forms clipped sums from the "
           << "per-sample gradients of one full micro-step (every step of "
           << "its recipe is one; dpc --sum-in-update=off compiles without)";
  rt::FuncOp step = full.lookupSymbol<rt::FuncOp>("dp_microstep");
  rt::FuncOp smallStep = smaller.lookupSymbol<rt::FuncOp>("dp_microstep");
  rt::FuncOp describe = full.lookupSymbol<rt::FuncOp>("dp_describe");
  if (!step || !smallStep || !describe)
    return full.emitOpError("has no dp_microstep or dp_describe");
  std::string name = "dp_microstep_" + std::to_string(rows);
  if (full.lookupSymbol(name))
    return full.emitOpError("already has ") << name;

  DenseMap<Operation *, Operation *> counterpart;
  std::string why =
      compareMicrosteps(step, smallStep, full, smaller, counterpart);
  if (!why.empty())
    return full.emitOpError("cannot run its micro-step on ")
           << rows << " rows with this plan: the micro-step compiled for "
           << rows << " rows differs from it where it should only be "
           << "smaller; " << why;

  // The smaller micro-step, on the full plan's places.
  OpBuilder builder(describe);
  auto copy = cast<rt::FuncOp>(builder.clone(*smallStep));
  copy.setSymName(name);
  for (auto [small, mine] :
       llvm::zip_equal(smallStep.getBody().front(), copy.getBody().front()))
    if (auto alloc = dyn_cast<rt::AllocOp>(mine))
      alloc.setOffsetAttr(
          cast<rt::AllocOp>(counterpart.lookup(&small)).getOffsetAttr());

  // dp_describe tells the driver about it, before its return.
  Block &body = describe.getBody().front();
  builder.setInsertionPoint(body.getTerminator());
  rt::CallOp::create(builder, describe.getLoc(),
                     builder.getStringAttr("describe_microstep"), ValueRange{},
                     builder.getArrayAttr(
                         {builder.getI64IntegerAttr(rows),
                          FlatSymbolRefAttr::get(builder.getContext(), name)}),
                     builder.getI32IntegerAttr(0));
  return success();
}
