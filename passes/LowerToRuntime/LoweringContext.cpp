//===- LoweringContext.cpp - What the runtime lowerings share -------------===//

#include "passes/LowerToRuntime/LoweringContext.h"

#include "DP/DPModel.h"
#include "DP/DPSizes.h"
#include "passes/LowerToRuntime/Lowerings.h"
#include "passes/Shapes.h"
#include "passes/Units.h"

#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;
using namespace dpc::lowering;

rt::DType dpc::lowering::toRuntime(::dprt::DType type) {
  return static_cast<rt::DType>(type);
}

::dprt::DType dpc::lowering::toDType(Type type) {
  type = getElementTypeOrSelf(type);
  if (type.isF64())
    return ::dprt::DType::F64;
  if (type.isBF16())
    return ::dprt::DType::BF16;
  if (isMXFP8Rows(type))
    return ::dprt::DType::MXFP8;
  return ::dprt::DType::F32;
}

//===----------------------------------------------------------------------===//
// CallArgs
//===----------------------------------------------------------------------===//

CallArgs &CallArgs::buffer(Value b) {
  args.push_back(IntegerAttr::get(IndexType::get(context), buffers.size()));
  buffers.push_back(b);
  return *this;
}

CallArgs &CallArgs::bufferOrNull(Value b) {
  return b ? buffer(b) : attr(rt::NullAttr::get(context));
}

CallArgs &CallArgs::i64(int64_t v) {
  return attr(IntegerAttr::get(IntegerType::get(context, 64), v));
}

CallArgs &CallArgs::i32(int32_t v) {
  return attr(IntegerAttr::get(IntegerType::get(context, 32), v));
}

CallArgs &CallArgs::f64(double v) {
  return attr(FloatAttr::get(Float64Type::get(context), v));
}

CallArgs &CallArgs::flag(bool v) { return attr(BoolAttr::get(context, v)); }

CallArgs &CallArgs::dtype(::dprt::DType type) {
  return attr(rt::DTypeAttr::get(context, toRuntime(type)));
}

CallArgs &CallArgs::string(StringRef text) {
  return attr(StringAttr::get(context, text));
}

CallArgs &CallArgs::planned(rt::PlannedValue which) {
  return attr(rt::PlannedValueAttr::get(context, which));
}

CallArgs &CallArgs::attr(Attribute value) {
  args.push_back(value);
  return *this;
}

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

LoweringContext::LoweringContext(const CompiledRecipe &compiled,
                                 StringRef backend)
    : recipe(compiled.recipe), model(compiled.model), step(compiled.step),
      forward(model.getForward()), backend(backend),
      builder(recipe.getContext()), loc(model.getLoc()),
      context(recipe.getContext()) {}

std::string LoweringContext::addGlobal(StringRef name, ::dprt::DType type,
                                       ArrayRef<int64_t> count) {
  return addGlobalBytes(name, storageBytes(name, type, count));
}

std::string LoweringContext::addGlobalBytes(StringRef name, int64_t bytes) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(&program.getBody().front());
  rt::GlobalOp::create(builder, loc, name, bytes, IntegerAttr());
  return name.str();
}

Value LoweringContext::global(StringRef name) {
  return rt::GetGlobalOp::create(builder, loc, rt::BufferType::get(context),
                                 FlatSymbolRefAttr::get(context, name));
}

rt::FuncOp LoweringContext::beginFunc(StringRef name, bool describe) {
  carriedHere.clear();
  loc = model.getLoc();
  builder.setInsertionPointToEnd(&program.getBody().front());
  auto func = rt::FuncOp::create(builder, loc, name, describe);
  builder.setInsertionPointToStart(&func.getBody().emplaceBlock());
  buffers.clear();
  saved.clear();
  gathered.clear();
  fullGrads.clear();
  sumBuffers.clear();
  return func;
}

void LoweringContext::endFunc(ValueRange keep) {
  rt::ReturnOp::create(builder, loc, keep);
}

void LoweringContext::call(StringRef callee, CallArgs &args) {
  rt::CallOp::create(builder, loc, callee, args.buffers,
                     builder.getArrayAttr(args.args), /*stream=*/0);
}

//===----------------------------------------------------------------------===//
// Buffer sizes
//===----------------------------------------------------------------------===//

int64_t LoweringContext::checkedBytes(StringRef buffer,
                                      ArrayRef<int64_t> factors) {
  std::optional<int64_t> bytes = 1;
  for (int64_t factor : factors)
    bytes = factor < 0 || !bytes ? std::nullopt
                                 : llvm::checkedMul<int64_t>(*bytes, factor);
  if (bytes)
    return *bytes;
  // Report the first: every later size derives from the same dimensions.
  if (!overflowed) {
    InFlightDiagnostic diag = emitError(loc, "the size of buffer '")
                              << buffer << "' (";
    llvm::interleave(factors, diag, " x ");
    diag << " bytes) does not fit in 64 bits";
  }
  overflowed = true;
  return 0;
}

int64_t LoweringContext::storageBytes(StringRef buffer, ::dprt::DType type,
                                      ArrayRef<int64_t> count) {
  SmallVector<int64_t> factors(count);
  if (type != ::dprt::DType::MXFP8) {
    factors.push_back(::dprt::sizeOf(type));
    return checkedBytes(buffer, factors);
  }
  // An e4m3 byte an element and a scale byte per 32 of them after the
  // elements: checked against two bytes an element, which bound both.
  factors.push_back(2);
  return ::dprt::storageBytes(type, checkedBytes(buffer, factors) / 2);
}

Value LoweringContext::allocBytes(StringRef name, int64_t bytes) {
  return rt::AllocOp::create(builder, loc, rt::BufferType::get(context),
                             builder.getI64IntegerAttr(bytes), IntegerAttr(),
                             name.empty() ? StringAttr()
                                          : builder.getStringAttr(name),
                             /*carried=*/StringAttr())
      .getBuffer();
}

Value LoweringContext::alloc(StringRef name, ::dprt::DType type,
                             ArrayRef<int64_t> count) {
  return allocBytes(name, storageBytes(name, type, count));
}

Value LoweringContext::allocWorkspace(StringRef name, ArrayRef<int64_t> bound,
                                      llvm::function_ref<int64_t()> bytes) {
  int64_t checked = checkedBytes(name, bound);
  return allocBytes(name, overflowed ? checked : bytes());
}

Value LoweringContext::allocZeroed(StringRef name, ::dprt::DType type,
                                   ArrayRef<int64_t> count) {
  Value b = alloc(name, type, count);
  auto bytes = cast<rt::AllocOp>(b.getDefiningOp()).getBytes();
  CallArgs zero = args();
  zero.buffer(b).i64(bytes);
  call("zero", zero);
  return b;
}

Value LoweringContext::view(Value base, int64_t offset) {
  return rt::ViewOp::create(builder, loc, rt::BufferType::get(context), base,
                            builder.getI64IntegerAttr(offset));
}

std::optional<std::pair<rt::AllocOp, int64_t>>
LoweringContext::temporaryUnder(Value buffer) {
  int64_t offset = 0;
  while (auto v = buffer.getDefiningOp<rt::ViewOp>()) {
    offset += v.getOffset();
    buffer = v.getSource();
  }
  auto alloc = buffer.getDefiningOp<rt::AllocOp>();
  if (!alloc)
    return std::nullopt;
  return std::make_pair(alloc, offset);
}

std::string LoweringContext::carry(rt::AllocOp alloc) {
  if (StringAttr key = alloc.getCarriedAttr())
    return key.str();
  // Unique per program: the name says what it holds, the count tells
  // buffers of one name apart.
  std::string key = alloc.getName().value_or("buffer").str() + "." +
                    std::to_string(carriedBytes.size());
  alloc.setCarriedAttr(builder.getStringAttr(key));
  carriedBytes[key] = alloc.getBytes();
  return key;
}

Value LoweringContext::carried(StringRef key) {
  if (Value here = carriedHere.lookup(key))
    return here;
  // At the top of the function: it lives throughout anyway.
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(builder.getInsertionBlock());
  auto alloc = rt::AllocOp::create(
      builder, loc, rt::BufferType::get(context),
      builder.getI64IntegerAttr(carriedBytes.lookup(key)), IntegerAttr(),
      builder.getStringAttr(key), builder.getStringAttr(key));
  carriedHere[key] = alloc.getBuffer();
  return alloc.getBuffer();
}

//===----------------------------------------------------------------------===//
// The function being built
//===----------------------------------------------------------------------===//

Value LoweringContext::newActivation(Value tensor, StringRef name) {
  Value b = alloc(name, dt, {numelOf(tensor)});
  buffers[tensor] = b;
  return b;
}

bool LoweringContext::isLoss(Value tensor) {
  return llvm::any_of(tensor.getUsers(), [](Operation *user) {
    return isa<YieldOp, dp::ReturnOp>(user);
  });
}

Value LoweringContext::paramPointer(FlatSymbolRefAttr ref) {
  const ParamInfo &info = params[ref.getValue()];
  Value base;
  if (shards == 1 && !units[info.unit].castFromMaster) {
    base = global(units[info.unit].paramShard);
  } else {
    base = gathered.lookup(info.unit);
    if (!base)
      base = gatherUnit(*this, info.unit);
  }
  if (info.offset == 0)
    return base;
  return view(base,
              checkedBytes(ref.getValue(), {info.offset, ::dprt::sizeOf(dt)}));
}

Value LoweringContext::gradPointer(FlatSymbolRefAttr ref) {
  const ParamInfo &info = params[ref.getValue()];
  const UnitInfo &unit = units[info.unit];
  Value base;
  if (shards == 1) {
    base = global(unit.grad);
  } else {
    base = fullGrads.lookup(info.unit);
    if (!base) {
      base = allocZeroed((unit.op.getSymName() + ".fullgrad").str(), acc,
                         {unit.shard, unit.ranks});
      fullGrads[info.unit] = base;
    }
  }
  if (info.offset == 0)
    return base;
  return view(base,
              checkedBytes(ref.getValue(), {info.offset, ::dprt::sizeOf(acc)}));
}

Value LoweringContext::accTarget(Value accValue, Operation *user, Value result,
                                 StringRef name) {
  if (!accValue)
    return newActivation(result, name);
  bool lastUse = llvm::all_of(accValue.getUsers(), [&](Operation *other) {
    return other == user || other->isBeforeInBlock(user);
  });
  Value target;
  if (lastUse) {
    target = buf(accValue);
  } else {
    target = alloc(name, dt, {numelOf(result)});
    CallArgs copy = args();
    copy.dtype(dt)
        .buffer(buf(accValue))
        .dtype(dt)
        .buffer(target)
        .i64(numelOf(result));
    call("cast", copy);
  }
  buffers[result] = target;
  return target;
}

Value LoweringContext::normTarget(Operation *normOp) {
  Value result = normOp->getResult(0);
  Operation *sum = nullptr;
  if (result.hasOneUse() && isa<NormSumOp>(*result.getUsers().begin()))
    sum = *result.getUsers().begin();
  if (sum) {
    Value &b = sumBuffers[sum];
    if (!b)
      b = allocZeroed("n2", acc, {batch});
    buffers[result] = b;
    return b;
  }
  Value b = allocZeroed("n2", acc, {batch});
  buffers[result] = b;
  return b;
}

Value LoweringContext::fusedNormTarget(ArrayRef<Value> perSampleGrads) {
  // dp-fuse-norms fuses the norm_rows of one op only when they all add into
  // the same buffer.
  Value target;
  for (Value grads : perSampleGrads) {
    if (!grads)
      continue;
    for (Operation *user : grads.getUsers())
      if (auto rows = dyn_cast<NormRowsOp>(user); rows && rows.getFused())
        target = normTarget(rows);
  }
  return target;
}
