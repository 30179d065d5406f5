//===- DPRTKernels.h - The runtime functions dprt.call may call -*- C++ -*-===//
//
// The compiler's view of runtime/include/dprt/kernels.def: for each runtime
// function, where it runs and how it takes each parameter. The dprt.call
// verifier and convert-dprt-to-emitc read it; the runtime checks the same
// table against its declarations, so the three always agree.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_DIALECTS_DPRT_DPRTKERNELS_H
#define DPC_DIALECTS_DPRT_DPRTKERNELS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace dpc::rt {

/// How a runtime function takes one parameter (the kinds of kernels.def).
enum class ParamKind : uint8_t {
  In,           ///< const void *: a buffer it reads
  Out,          ///< void *: a buffer it writes (and may read)
  InOrNull,     ///< const void *, or nullptr
  OutOrNull,    ///< void *, or nullptr
  Tokens,       ///< const int32_t *: int32 token ids or labels
  Offset,       ///< int64_t: a buffer's arena offset (describe functions)
  OffsetOrNone, ///< int64_t: a buffer's arena offset, or -1
  Planned,      ///< int64_t the memory plan decides, or a literal
  DType,
  Activation,
  Reduction,
  ClipMode,
  NoiseGenerator,
  Optimizer,
  Sampling,
  InputRole,
  I64,
  I32,
  F64,
  Flag,      ///< bool
  Str,       ///< const char *: a string literal
  Stream,    ///< int32_t: the stream a collective runs on (its last parameter)
  Microstep, ///< dprt::MicrostepFn: a dprt.func of the program, by symbol
};

/// What a runtime function's first parameter is.
enum class KernelContext : uint8_t {
  Rank,        ///< dprt::Rank *: called by dp_init, dp_microstep, ...
  ProgramSpec, ///< dprt::ProgramSpec *: called by dp_describe
  Event,       ///< dprt::Rank *, issued by dprt.record_event/wait_event
};

struct KernelSignature {
  llvm::StringLiteral name;
  KernelContext context;
  /// Every parameter after the context, the stream of a collective included.
  llvm::ArrayRef<ParamKind> params;

  /// Whether it takes the stream it runs on as its last parameter.
  bool isCollective() const {
    return !params.empty() && params.back() == ParamKind::Stream;
  }
  /// The parameters a dprt.call passes in `args`: all but the stream.
  llvm::ArrayRef<ParamKind> getArgs() const {
    return isCollective() ? params.drop_back() : params;
  }
};

/// The runtime function named `name`, or null.
const KernelSignature *lookupKernel(llvm::StringRef name);

/// What an argument of `kind` must be, for messages: "a buffer or #dprt.null".
llvm::StringRef describeParamKind(ParamKind kind);

/// Whether an argument of `kind` may be a buffer operand.
bool takesBuffer(ParamKind kind);

} // namespace dpc::rt

#endif // DPC_DIALECTS_DPRT_DPRTKERNELS_H
