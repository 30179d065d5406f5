//===- ConvertDPRTToEmitC.cpp - The planned program as C++ ----------------===//
//
// One emitc.func per dprt.func. Buffers become `arena(rank) + offset`
// pointers computed once at the top of the function; calls become
// `dprt::<callee>(rank, ...)`. In dp_describe, a buffer operand stands for
// its offset, and `#dprt.planned` for the number the memory plan decided.
// This is the one place that spells the program as C++: enums through their
// generated stringify functions, `#dprt.null` as nullptr (-1 for an offset),
// strings as C++ literals, a function's symbol as its name.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cstdio>
#include <functional>

namespace dpc {
#define GEN_PASS_DEF_CONVERTDPRTTOEMITC
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;

namespace {

/// Offset of a buffer in the arena: a global's, an alloc's, or a view's base
/// plus its offset. -1 before dprt-plan-memory, or when a view's offset
/// overflows.
int64_t offsetOf(Value buffer) {
  Operation *def = buffer.getDefiningOp();
  if (auto alloc = dyn_cast_or_null<rt::AllocOp>(def))
    return alloc.getOffset().value_or(-1);
  if (auto view = dyn_cast_or_null<rt::ViewOp>(def)) {
    int64_t base = offsetOf(view.getSource());
    std::optional<int64_t> offset =
        base < 0
            ? std::nullopt
            : llvm::checkedAdd<int64_t>(base, view.getOffsetAttr().getInt());
    return offset.value_or(-1);
  }
  if (auto ref = dyn_cast_or_null<rt::GetGlobalOp>(def)) {
    auto global = SymbolTable::lookupNearestSymbolFrom<rt::GlobalOp>(
        ref, ref.getGlobalAttr());
    return global ? global.getOffset().value_or(-1) : -1;
  }
  return -1;
}

constexpr llvm::StringLiteral kNoOffset =
    "uses a buffer without a planned offset, or a view beyond what a 64-bit "
    "offset can count";

/// `text` as a C++ string literal.
std::string cppStringLiteral(StringRef text) {
  std::string literal = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      literal += '\\';
      literal += c;
    } else if (llvm::isPrint(c)) {
      literal += c;
    } else {
      // Three octal digits: a following digit cannot extend the escape.
      char escape[5];
      std::snprintf(escape, sizeof(escape), "\\%03o", c);
      literal += escape;
    }
  }
  return literal + "\"";
}

struct ConvertPass : dpc::impl::ConvertDPRTToEmitCBase<ConvertPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto programs = llvm::to_vector(module.getOps<rt::ProgramOp>());
    if (programs.size() != 1) {
      module.emitError("expected one dprt.program, found ") << programs.size();
      return signalPassFailure();
    }
    rt::ProgramOp program = programs.front();
    if (!program.getArenaBytes() || !program.getPeakBytes()) {
      program.emitOpError("has no memory plan; run dprt-plan-memory first");
      return signalPassFailure();
    }
    OpBuilder builder(module.getContext());
    builder.setInsertionPointToStart(module.getBody());
    builder.create<emitc::IncludeOp>(module.getLoc(), "dprt/kernels.h",
                                     /*isStandard=*/false);
    builder.create<emitc::IncludeOp>(module.getLoc(), "dprt/program.h",
                                     /*isStandard=*/false);
    for (rt::FuncOp func : program.getBody().getOps<rt::FuncOp>())
      if (failed(convert(func, program, builder)))
        return signalPassFailure();

    // What remains is the C++ program.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (!isa<emitc::IncludeOp, emitc::FuncOp>(op))
        op.erase();
  }

  LogicalResult convert(rt::FuncOp func, rt::ProgramOp program,
                        OpBuilder &builder);
};

LogicalResult ConvertPass::convert(rt::FuncOp func, rt::ProgramOp program,
                                   OpBuilder &builder) {
  MLIRContext *context = func.getContext();
  Location loc = func.getLoc();
  bool describe = func.getDescribe();
  Type contextType = emitc::PointerType::get(emitc::OpaqueType::get(
      context, describe ? "dprt::ProgramSpec" : "dprt::Rank"));
  Type charPointer =
      emitc::PointerType::get(emitc::OpaqueType::get(context, "char"));
  Type int32Pointer = emitc::PointerType::get(IntegerType::get(context, 32));
  auto type = FunctionType::get(context, {contextType}, {});
  builder.setInsertionPointToEnd(program->getBlock());
  auto cfunc = builder.create<emitc::FuncOp>(loc, func.getSymName(), type);
  Block *entry = cfunc.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  Value rank = entry->getArgument(0);

  // One pointer per distinct offset and type, computed at the top.
  Value arena;
  llvm::DenseMap<int64_t, Value> pointers, int32Pointers;
  std::function<FailureOr<Value>(Value, bool)> pointerTo =
      [&](Value buffer, bool int32) -> FailureOr<Value> {
    int64_t offset = offsetOf(buffer);
    if (offset < 0)
      return func.emitOpError(kNoOffset);
    if (int32) {
      Value &typed = int32Pointers[offset];
      if (typed)
        return typed;
      FailureOr<Value> bytes = pointerTo(buffer, false);
      if (failed(bytes))
        return failure();
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfterValue(*bytes);
      typed = builder.create<emitc::CastOp>(loc, int32Pointer, *bytes);
      return typed;
    }
    Value &pointer = pointers[offset];
    if (pointer)
      return pointer;
    OpBuilder::InsertionGuard guard(builder);
    if (!arena) {
      builder.setInsertionPointToStart(entry);
      arena = builder
                  .create<emitc::CallOpaqueOp>(loc, TypeRange{charPointer},
                                               "dprt::arena", ValueRange{rank})
                  .getResult(0);
    }
    builder.setInsertionPointAfterValue(arena);
    Value constant = builder.create<emitc::ConstantOp>(
        loc, builder.getI64Type(), builder.getI64IntegerAttr(offset));
    pointer = builder.create<emitc::AddOp>(loc, charPointer, arena, constant);
    return pointer;
  };

  auto logitsOffset = [&]() -> int64_t {
    for (rt::FuncOp other : program.getBody().getOps<rt::FuncOp>())
      if (other.getSymName() == "dp_forward") {
        auto ret = cast<rt::ReturnOp>(other.getBody().front().getTerminator());
        if (!ret.getKeep().empty())
          return offsetOf(ret.getKeep().front());
      }
    return -1;
  };

  for (Operation &op : func.getBody().front()) {
    loc = op.getLoc();
    if (isa<rt::AllocOp, rt::GetGlobalOp, rt::ViewOp, rt::ReturnOp>(op))
      continue;
    if (auto record = dyn_cast<rt::RecordEventOp>(op)) {
      builder.create<emitc::CallOpaqueOp>(
          loc, TypeRange{}, "dprt::record_event", ValueRange{rank},
          builder.getArrayAttr({builder.getIndexAttr(0), record.getStreamAttr(),
                                record.getEventAttr()}));
      continue;
    }
    if (auto wait = dyn_cast<rt::WaitEventOp>(op)) {
      builder.create<emitc::CallOpaqueOp>(
          loc, TypeRange{}, "dprt::wait_event", ValueRange{rank},
          builder.getArrayAttr({builder.getIndexAttr(0), wait.getStreamAttr(),
                                wait.getEventAttr()}));
      continue;
    }
    auto call = dyn_cast<rt::CallOp>(op);
    if (!call)
      return op.emitOpError("cannot be converted to EmitC");

    // The verifier checked every argument against the callee's parameters.
    const rt::KernelSignature *kernel = call.getSignature();
    SmallVector<Value> operands{rank};
    SmallVector<Attribute> args{builder.getIndexAttr(0)};
    for (auto [arg, kind] :
         llvm::zip_equal(call.getArgs(), kernel->getArgs())) {
      auto index = dyn_cast<IntegerAttr>(arg);
      if (index && index.getType().isIndex()) {
        Value buffer = call.getBuffers()[index.getInt()];
        if (describe) {
          int64_t offset = offsetOf(buffer);
          if (offset < 0)
            return func.emitOpError(kNoOffset);
          args.push_back(builder.getI64IntegerAttr(offset));
          continue;
        }
        FailureOr<Value> pointer =
            pointerTo(buffer, kind == rt::ParamKind::Tokens);
        if (failed(pointer))
          return failure();
        args.push_back(builder.getIndexAttr(operands.size()));
        operands.push_back(*pointer);
        continue;
      }
      if (isa<rt::NullAttr>(arg)) {
        args.push_back(describe ? Attribute(builder.getI64IntegerAttr(-1))
                                : emitc::OpaqueAttr::get(context, "nullptr"));
        continue;
      }
      if (auto planned = dyn_cast<rt::PlannedValueAttr>(arg)) {
        int64_t value = -1;
        switch (planned.getValue()) {
        case rt::PlannedValue::ArenaBytes:
          value = *program.getArenaBytes();
          break;
        case rt::PlannedValue::PeakBytes:
          value = *program.getPeakBytes();
          break;
        case rt::PlannedValue::LogitsOffset:
          value = logitsOffset();
          break;
        }
        args.push_back(builder.getI64IntegerAttr(value));
        continue;
      }
      if (auto enumerator = dyn_cast<rt::RuntimeEnumAttrInterface>(arg)) {
        args.push_back(
            emitc::OpaqueAttr::get(context, enumerator.getCppEnumerator()));
        continue;
      }
      // A step function of the program, by name: it is emitted before
      // dp_describe, the last function.
      if (auto function = dyn_cast<FlatSymbolRefAttr>(arg)) {
        args.push_back(emitc::OpaqueAttr::get(context, function.getValue()));
        continue;
      }
      if (auto text = dyn_cast<StringAttr>(arg)) {
        args.push_back(
            emitc::OpaqueAttr::get(context, cppStringLiteral(text.getValue())));
        continue;
      }
      // Numbers and bools print as C++ literals.
      args.push_back(arg);
    }
    if (kernel->isCollective())
      args.push_back(call.getStreamAttr());
    builder.create<emitc::CallOpaqueOp>(loc, TypeRange{},
                                        ("dprt::" + call.getCallee()).str(),
                                        operands, builder.getArrayAttr(args));
  }
  builder.create<emitc::ReturnOp>(func.getLoc(), Value());
  return success();
}

} // namespace
