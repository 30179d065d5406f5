//===- DPRTDialect.cpp - The scheduled program ----------------------------===//

#include "DPRT/DPRTDialect.h"

#include "dprt/program.h"
#include "dprt/types.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dpc::rt;

#include "DPRT/DPRTOpsDialect.cpp.inc"

#include "DPRT/DPRTEnums.cpp.inc"

#include "DPRT/DPRTAttrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "DPRT/DPRTAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "DPRT/DPRTOpsTypes.cpp.inc"

#define GET_OP_CLASSES
#include "DPRT/DPRTOps.cpp.inc"

// The emitted program names the runtime's enumerators by the names of the
// dprt enum cases, and the runtime reads their values: both must be the
// runtime's (types.h, program.h), and the last case its last enumerator.
#define DPRT_SAME_ENUMERATOR(Enum, Case)                                       \
  static_assert(static_cast<int32_t>(::dpc::rt::Enum::Case) ==                 \
                    static_cast<int32_t>(::dprt::Enum::Case),                  \
                "dprt::" #Enum "::" #Case " differs from the runtime's");
#define DPRT_LAST_ENUMERATOR(Enum, Case)                                       \
  DPRT_SAME_ENUMERATOR(Enum, Case)                                             \
  static_assert(::dpc::rt::getMaxEnumValFor##Enum() ==                         \
                    static_cast<unsigned>(::dprt::Enum::Case),                 \
                "dprt::" #Enum " has cases the runtime does not");
DPRT_SAME_ENUMERATOR(DType, F64)
DPRT_SAME_ENUMERATOR(DType, F32)
DPRT_SAME_ENUMERATOR(DType, BF16)
DPRT_LAST_ENUMERATOR(DType, MXFP8)
DPRT_SAME_ENUMERATOR(Activation, Relu)
DPRT_SAME_ENUMERATOR(Activation, Silu)
DPRT_SAME_ENUMERATOR(Activation, GeluErf)
DPRT_LAST_ENUMERATOR(Activation, GeluTanh)
DPRT_SAME_ENUMERATOR(Reduction, Mean)
DPRT_LAST_ENUMERATOR(Reduction, Sum)
DPRT_SAME_ENUMERATOR(ClipMode, Flat)
DPRT_SAME_ENUMERATOR(ClipMode, PerLayer)
DPRT_SAME_ENUMERATOR(ClipMode, Automatic)
DPRT_LAST_ENUMERATOR(ClipMode, None)
DPRT_SAME_ENUMERATOR(NoiseGeneratorKind, Philox)
DPRT_SAME_ENUMERATOR(NoiseGeneratorKind, ChaCha20)
DPRT_LAST_ENUMERATOR(NoiseGeneratorKind, None)
DPRT_SAME_ENUMERATOR(OptimizerKind, SGD)
DPRT_SAME_ENUMERATOR(OptimizerKind, Momentum)
DPRT_LAST_ENUMERATOR(OptimizerKind, AdamW)
DPRT_SAME_ENUMERATOR(SamplingKind, Poisson)
DPRT_LAST_ENUMERATOR(SamplingKind, Shuffle)
DPRT_SAME_ENUMERATOR(InputRole, Tokens)
DPRT_SAME_ENUMERATOR(InputRole, NextTokens)
DPRT_SAME_ENUMERATOR(InputRole, Features)
DPRT_SAME_ENUMERATOR(InputRole, Label)
DPRT_LAST_ENUMERATOR(InputRole, Target)
#undef DPRT_SAME_ENUMERATOR
#undef DPRT_LAST_ENUMERATOR

void DPRTDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "DPRT/DPRTAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "DPRT/DPRTOpsTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "DPRT/DPRTOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

/// Byte counts and offsets are sizes in the arena: never negative.
static LogicalResult verifyNonNegative(Operation *op, StringRef what,
                                       std::optional<int64_t> value) {
  if (value && *value < 0)
    return op->emitOpError() << what << " must not be negative, got " << *value;
  return success();
}

// I64Attr reads as unsigned: the attributes give back the numbers in the IR.
LogicalResult GlobalOp::verify() {
  if (failed(verifyNonNegative(*this, "bytes", getBytesAttr().getInt())))
    return failure();
  IntegerAttr offset = getOffsetAttr();
  return verifyNonNegative(
      *this, "offset", offset ? std::optional(offset.getInt()) : std::nullopt);
}

LogicalResult AllocOp::verify() {
  if (failed(verifyNonNegative(*this, "bytes", getBytesAttr().getInt())))
    return failure();
  IntegerAttr offset = getOffsetAttr();
  return verifyNonNegative(
      *this, "offset", offset ? std::optional(offset.getInt()) : std::nullopt);
}

LogicalResult ViewOp::verify() {
  return verifyNonNegative(*this, "offset", getOffsetAttr().getInt());
}

LogicalResult GetGlobalOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!tables.lookupNearestSymbolFrom<GlobalOp>(*this, getGlobalAttr()))
    return emitOpError("refers to unknown global ") << getGlobalAttr();
  return success();
}

//===----------------------------------------------------------------------===//
// Calls
//===----------------------------------------------------------------------===//

const KernelSignature *CallOp::getSignature() {
  return lookupKernel(getCallee());
}

bool CallOp::isCollective() {
  const KernelSignature *kernel = getSignature();
  return kernel && kernel->isCollective();
}

/// Whether `arg` is what a parameter of `kind` takes. Sets `bufferIndex`
/// when `arg` names a buffer operand.
static bool isArgumentOfKind(Attribute arg, ParamKind kind,
                             std::optional<int64_t> &bufferIndex) {
  auto integer = dyn_cast<IntegerAttr>(arg);
  auto isInteger = [&](unsigned width) {
    return integer && integer.getType().isSignlessInteger(width);
  };
  if (integer && integer.getType().isIndex()) {
    bufferIndex = integer.getInt();
    return takesBuffer(kind);
  }
  switch (kind) {
  case ParamKind::In:
  case ParamKind::Out:
  case ParamKind::Tokens:
  case ParamKind::Offset:
    return false;
  case ParamKind::InOrNull:
  case ParamKind::OutOrNull:
  case ParamKind::OffsetOrNone:
    return isa<NullAttr>(arg);
  case ParamKind::Planned:
    return isa<PlannedValueAttr>(arg) || isInteger(64);
  case ParamKind::DType:
    return isa<DTypeAttr>(arg);
  case ParamKind::Activation:
    return isa<ActivationAttr>(arg);
  case ParamKind::Reduction:
    return isa<ReductionAttr>(arg);
  case ParamKind::ClipMode:
    return isa<ClipModeAttr>(arg);
  case ParamKind::NoiseGenerator:
    return isa<NoiseGeneratorKindAttr>(arg);
  case ParamKind::Optimizer:
    return isa<OptimizerKindAttr>(arg);
  case ParamKind::Sampling:
    return isa<SamplingKindAttr>(arg);
  case ParamKind::InputRole:
    return isa<InputRoleAttr>(arg);
  case ParamKind::I64:
    return isInteger(64);
  case ParamKind::I32:
    return isInteger(32);
  case ParamKind::F64: {
    auto real = dyn_cast<FloatAttr>(arg);
    return real && real.getType().isF64();
  }
  case ParamKind::Flag:
    return isa<BoolAttr>(arg);
  case ParamKind::Str:
    return isa<StringAttr>(arg);
  case ParamKind::Stream:
    return false;
  case ParamKind::Microstep:
    return isa<FlatSymbolRefAttr>(arg);
  }
  llvm_unreachable("every parameter kind is checked");
}

LogicalResult CallOp::verify() {
  StringRef callee = getCallee();
  const KernelSignature *kernel = getSignature();
  if (!kernel)
    return emitOpError("calls '") << callee
                                  << "', which is not a runtime function "
                                     "(runtime/include/dprt/kernels.def)";
  if (kernel->context == KernelContext::Event)
    return emitOpError("calls '")
           << callee << "', which only dprt." << callee << " issues";
  bool describes = kernel->context == KernelContext::ProgramSpec;
  if (auto func = (*this)->getParentOfType<FuncOp>();
      func && func.getDescribe() != describes)
    return emitOpError("calls '")
           << callee << "'"
           << (describes ? ", which fills the ProgramSpec, outside"
                         : ", which runs on a rank, in")
           << " a describe function";

  ArrayRef<ParamKind> params = kernel->getArgs();
  if (getArgs().size() != params.size())
    return emitOpError("passes ")
           << getArgs().size() << " arguments to '" << callee
           << "', which takes " << params.size();
  int64_t numBuffers = getBuffers().size();
  llvm::SmallBitVector passed(numBuffers);
  for (auto [position, arg, kind] : llvm::zip_equal(
           llvm::seq<int64_t>(0, params.size()), getArgs(), params)) {
    std::optional<int64_t> bufferIndex;
    if (!isArgumentOfKind(arg, kind, bufferIndex))
      return emitOpError("argument #")
             << position << " of '" << callee << "' must be "
             << describeParamKind(kind) << ", not " << arg;
    if (kind == ParamKind::Microstep) {
      auto target = SymbolTable::lookupNearestSymbolFrom<FuncOp>(
          *this, cast<FlatSymbolRefAttr>(arg));
      if (!target || target.getDescribe())
        return emitOpError("argument #")
               << position << " of '" << callee << "' names " << arg
               << ", which is not a step function of the program";
    }
    if (!bufferIndex)
      continue;
    if (*bufferIndex < 0 || *bufferIndex >= numBuffers)
      return emitOpError("argument #")
             << position << " of '" << callee << "' refers to buffer #"
             << *bufferIndex << " of " << numBuffers;
    passed.set(*bufferIndex);
  }
  if (!passed.all())
    return emitOpError("buffer #") << passed.find_first_unset()
                                   << " is no argument of '" << callee << "'";
  // I32Attr reads as unsigned.
  int32_t stream = static_cast<int32_t>(getStream());
  if (!kernel->isCollective() && stream != 0)
    return emitOpError("runs '")
           << callee << "' on stream " << stream
           << "; only collectives leave the compute stream 0";
  if (stream < 0)
    return emitOpError("runs on stream ") << stream;
  return success();
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

static LogicalResult verifyEvent(Operation *op, int32_t stream, int32_t event) {
  if (stream < 0 || event < 0)
    return op->emitOpError("names stream ")
           << stream << " and event " << event << "; both are numbered from 0";
  return success();
}

// I32Attr reads as unsigned: the casts give back the numbers in the IR.
LogicalResult RecordEventOp::verify() {
  return verifyEvent(*this, static_cast<int32_t>(getStream()),
                     static_cast<int32_t>(getEvent()));
}

LogicalResult WaitEventOp::verify() {
  return verifyEvent(*this, static_cast<int32_t>(getStream()),
                     static_cast<int32_t>(getEvent()));
}
