//===- MemorySizes.h - Sizes of memory on dpc's command line ---*- C++ -*-===//
//
// --memory-budget's sizes and --target-gpu's GPUs: what the default budget
// of a cuda program is made of.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TOOLS_DPC_MEMORYSIZES_H
#define DPC_TOOLS_DPC_MEMORYSIZES_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace dpc {

/// What the arena may not take of a GPU's memory: the CUDA context, the
/// cuBLASLt workspaces and attention scratch, NCCL's buffers.
constexpr int64_t kCudaMemoryMargin = 4ll << 30;

/// Bytes of a size such as "60GiB", "1.5 TB" or "4096" (bytes), or nullopt.
std::optional<int64_t> parseBytes(llvm::StringRef text);

/// "N bytes (X.XX GiB)".
std::string formatGiB(int64_t bytes);

/// The memory, in bytes, of the GPU --target-gpu names, or nullopt.
std::optional<int64_t> targetGpuMemory(llvm::StringRef name);

/// The compute capability (90 for sm_90) of the GPU --target-gpu names, or
/// nullopt.
std::optional<int> targetGpuCapability(llvm::StringRef name);

/// The names --target-gpu takes, comma-separated.
std::string targetGpuNames();

} // namespace dpc

#endif // DPC_TOOLS_DPC_MEMORYSIZES_H
