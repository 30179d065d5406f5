//===- CompileProgram.cpp - The emitted C++ into a binary -----------------===//

#include "CompileProgram.h"

#include "dpc/RuntimeConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using llvm::SmallVector;
using llvm::StringRef;

namespace {

/// Splits a line of the runtime configuration into arguments.
SmallVector<std::string> splitArgs(StringRef text) {
  SmallVector<StringRef> parts;
  text.split(parts, ';', -1, /*KeepEmpty=*/false);
  SmallVector<std::string> args;
  for (StringRef part : parts)
    args.push_back(part.trim().str());
  return args;
}

} // namespace

std::optional<std::string> dpc::compileProgram(StringRef cppPath,
                                               StringRef binaryPath, bool cuda,
                                               bool verbose) {
  std::string flags = cuda ? DPC_CUDA_LINK : DPC_CPU_LINK;
  if (flags.empty())
    return (llvm::Twine("the ") + (cuda ? "cuda" : "cpu") +
            " runtime was not built with this dpc")
        .str();
  SmallVector<std::string> linkArgs = splitArgs(flags);
  // The build's own archives: `all` leaves the CUDA backend out, so say what
  // builds it rather than let the linker fail on a missing file.
  for (const std::string &arg : linkArgs)
    if (StringRef(arg).starts_with(DPC_BINARY_DIR) &&
        !llvm::sys::fs::exists(arg))
      return (llvm::Twine("the ") + (cuda ? "cuda" : "cpu") +
              " runtime is not built (" + arg + " is missing): build it with `" +
              (cuda ? "make build` or `cmake --build " DPC_BINARY_DIR
                      " --target dpc-cuda"
                    : "make build") +
              "`")
          .str();
  SmallVector<std::string> args{DPC_CXX, "-O2", "-std=c++17", "-I",
                                DPC_RUNTIME_INCLUDE_DIR};
  if (cuda)
    args.push_back("-DDPRT_BACKEND_CUDA");
  args.push_back(cppPath.str());
  args.push_back("-o");
  args.push_back(binaryPath.str());
  for (std::string &arg : linkArgs)
    args.push_back(arg);
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  if (verbose) {
    llvm::interleave(argRefs, llvm::errs(), " ");
    llvm::errs() << "\n";
  }
  std::string error;
  // The compiler's own diagnostics go straight to the terminal.
  int rc = llvm::sys::ExecuteAndWait(args.front(), argRefs, std::nullopt, {}, 0,
                                     0, &error);
  if (rc != 0)
    return ("the C++ compiler failed" +
            (error.empty()
                 ? llvm::Twine(" (exit code ") + llvm::Twine(rc) + ")"
                 : llvm::Twine(": ") + error) +
            "; the source is " + cppPath)
        .str();
  return std::nullopt;
}
