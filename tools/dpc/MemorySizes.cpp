//===- MemorySizes.cpp - Sizes of memory on dpc's command line ------------===//

#include "MemorySizes.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <utility>

namespace {

/// A GPU --target-gpu names, the memory it reports, in MiB (for the H200
/// the total cudaMemGetInfo gave on a lent one, 139.80 GiB, for the others
/// the memory.total nvidia-smi prints) and its compute capability.
struct TargetGpu {
  const char *name;
  int64_t mib;
  int capability;
};
constexpr TargetGpu kTargetGpus[] = {
    {"h100", 81559, 90},      {"h100-nvl", 95830, 90},
    {"h200", 143155, 90},     {"a100-40gb", 40960, 80},
    {"a100-80gb", 81920, 80}, {"a10", 23028, 86},
    {"l4", 23034, 89},        {"l40s", 46068, 89},
    {"rtx3090", 24576, 86},   {"rtx4090", 24564, 89},
};

} // namespace

std::optional<int64_t> dpc::parseBytes(llvm::StringRef text) {
  text = text.trim();
  size_t end = text.find_first_not_of("0123456789.");
  llvm::StringRef number = text.take_front(end),
                  unit = text.drop_front(number.size());
  unit = unit.trim();
  double value;
  if (number.empty() || number.getAsDouble(value))
    return std::nullopt;
  static const std::pair<llvm::StringRef, double> units[] = {
      {"", 1},         {"B", 1},        {"KiB", 0x1p10}, {"MiB", 0x1p20},
      {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"kB", 1e3},     {"KB", 1e3},
      {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12}};
  for (auto [name, scale] : units)
    if (unit == name) {
      double bytes = std::floor(value * scale);
      // 2^63 is the first double above every int64.
      if (!(bytes >= 1 && bytes < 0x1p63))
        return std::nullopt;
      return int64_t(bytes);
    }
  return std::nullopt;
}

std::string dpc::formatGiB(int64_t bytes) {
  return llvm::formatv("{0} bytes ({1:F2} GiB)", bytes, double(bytes) / 0x1p30)
      .str();
}

std::optional<int64_t> dpc::targetGpuMemory(llvm::StringRef name) {
  for (const TargetGpu &gpu : kTargetGpus)
    if (name == gpu.name)
      return gpu.mib << 20;
  return std::nullopt;
}

std::optional<int> dpc::targetGpuCapability(llvm::StringRef name) {
  for (const TargetGpu &gpu : kTargetGpus)
    if (name == gpu.name)
      return gpu.capability;
  return std::nullopt;
}

std::string dpc::targetGpuNames() {
  std::string names;
  for (const TargetGpu &gpu : kTargetGpus)
    names += (names.empty() ? "" : ", ") + std::string(gpu.name);
  return names;
}
