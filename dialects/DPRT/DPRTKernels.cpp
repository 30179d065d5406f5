//===- DPRTKernels.cpp - The runtime functions dprt.call may call ---------===//

#include "DPRT/DPRTKernels.h"

#include "llvm/ADT/StringMap.h"

using namespace dpc::rt;

namespace {

// The kind names of kernels.def as values, so that each entry's kinds form
// an array initializer.
namespace kinds {
constexpr ParamKind in = ParamKind::In, out = ParamKind::Out,
                    inOrNull = ParamKind::InOrNull,
                    outOrNull = ParamKind::OutOrNull,
                    tokens = ParamKind::Tokens, offset = ParamKind::Offset,
                    offsetOrNone = ParamKind::OffsetOrNone,
                    planned = ParamKind::Planned, dtype = ParamKind::DType,
                    activation = ParamKind::Activation,
                    reduction = ParamKind::Reduction,
                    clipMode = ParamKind::ClipMode,
                    noiseGenerator = ParamKind::NoiseGenerator,
                    optimizer = ParamKind::Optimizer,
                    sampling = ParamKind::Sampling,
                    inputRole = ParamKind::InputRole, i64 = ParamKind::I64,
                    i32 = ParamKind::I32, f64 = ParamKind::F64,
                    flag = ParamKind::Flag, str = ParamKind::Str,
                    stream = ParamKind::Stream,
                    microstep = ParamKind::Microstep;
} // namespace kinds

namespace params {
using namespace kinds;
#define DPRT_KERNEL(name, ...) constexpr ParamKind name[] = {__VA_ARGS__};
#define DPRT_DESCRIBE(name, ...) DPRT_KERNEL(name, __VA_ARGS__)
#define DPRT_EVENT(name, ...) DPRT_KERNEL(name, __VA_ARGS__)
#include "dprt/kernels.def"
} // namespace params

constexpr KernelSignature kKernels[] = {
#define DPRT_KERNEL(name, ...) {#name, KernelContext::Rank, params::name},
#define DPRT_DESCRIBE(name, ...)                                               \
  {#name, KernelContext::ProgramSpec, params::name},
#define DPRT_EVENT(name, ...) {#name, KernelContext::Event, params::name},
#include "dprt/kernels.def"
};

} // namespace

const KernelSignature *dpc::rt::lookupKernel(llvm::StringRef name) {
  static const llvm::StringMap<const KernelSignature *> byName = [] {
    llvm::StringMap<const KernelSignature *> map;
    for (const KernelSignature &kernel : kKernels)
      map[kernel.name] = &kernel;
    return map;
  }();
  return byName.lookup(name);
}

llvm::StringRef dpc::rt::describeParamKind(ParamKind kind) {
  switch (kind) {
  case ParamKind::In:
  case ParamKind::Out:
    return "a buffer";
  case ParamKind::InOrNull:
  case ParamKind::OutOrNull:
    return "a buffer or #dprt.null";
  case ParamKind::Tokens:
    return "a buffer of int32 values";
  case ParamKind::Offset:
    return "a buffer (its offset)";
  case ParamKind::OffsetOrNone:
    return "a buffer (its offset) or #dprt.null";
  case ParamKind::Planned:
    return "a #dprt.planned number or an i64";
  case ParamKind::DType:
    return "a #dprt.dtype";
  case ParamKind::Activation:
    return "a #dprt.activation";
  case ParamKind::Reduction:
    return "a #dprt.reduction";
  case ParamKind::ClipMode:
    return "a #dprt.clip_mode";
  case ParamKind::NoiseGenerator:
    return "a #dprt.noise_generator";
  case ParamKind::Optimizer:
    return "a #dprt.optimizer";
  case ParamKind::Sampling:
    return "a #dprt.sampling";
  case ParamKind::InputRole:
    return "a #dprt.input_role";
  case ParamKind::I64:
    return "an i64";
  case ParamKind::I32:
    return "an i32";
  case ParamKind::F64:
    return "an f64";
  case ParamKind::Flag:
    return "a bool";
  case ParamKind::Str:
    return "a string";
  case ParamKind::Stream:
    return "the stream, which dprt-schedule sets";
  case ParamKind::Microstep:
    return "a symbol naming a dprt.func";
  }
  llvm_unreachable("every parameter kind is described");
}

bool dpc::rt::takesBuffer(ParamKind kind) {
  switch (kind) {
  case ParamKind::In:
  case ParamKind::Out:
  case ParamKind::InOrNull:
  case ParamKind::OutOrNull:
  case ParamKind::Tokens:
  case ParamKind::Offset:
  case ParamKind::OffsetOrNone:
    return true;
  default:
    return false;
  }
}
