//===- CompileProgram.h - The emitted C++ into a binary ---------*- C++ -*-===//
//
// dpc's last step: the host C++ compiler builds the emitted program against
// the runtime archives of this build (dpc/RuntimeConfig.h, from CMake).
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TOOLS_DPC_COMPILEPROGRAM_H
#define DPC_TOOLS_DPC_COMPILEPROGRAM_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace dpc {

/// Compiles `cppPath` into `binaryPath` for the cuda or the cpu runtime,
/// printing the command when `verbose`; the error message, or nullopt.
std::optional<std::string> compileProgram(llvm::StringRef cppPath,
                                          llvm::StringRef binaryPath,
                                          bool cuda, bool verbose);

} // namespace dpc

#endif // DPC_TOOLS_DPC_COMPILEPROGRAM_H
