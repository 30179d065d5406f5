//===- DPSizes.cpp - Tensor sizes in checked arithmetic -------------------===//

#include "DP/DPSizes.h"

#include "dprt/types.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;

std::optional<int64_t> dpc::dp::getNumElements(ArrayRef<int64_t> shape,
                                               int64_t dynamicSize) {
  std::optional<int64_t> count = 1;
  for (int64_t dim : shape) {
    count = llvm::checkedMul(*count,
                             ShapedType::isDynamic(dim) ? dynamicSize : dim);
    if (!count)
      return std::nullopt;
  }
  return count;
}

int64_t dpc::dp::getElementBytes(Type type) {
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

bool dpc::dp::isMXFP8Rows(Type type) { return isa<Float8E4M3FNType>(type); }

std::optional<int64_t> dpc::dp::getNumBytes(ShapedType type,
                                            int64_t dynamicSize) {
  std::optional<int64_t> elements =
      getNumElements(type.getShape(), dynamicSize);
  if (!elements)
    return std::nullopt;
  Type element = type.getElementType();
  if (isMXFP8Rows(element)) {
    // The elements' bytes and their scales', fewer than the elements again.
    if (!llvm::checkedMul<int64_t>(*elements, 2))
      return std::nullopt;
    return ::dprt::storageBytes(::dprt::DType::MXFP8, *elements);
  }
  return llvm::checkedMul(*elements, getElementBytes(element));
}

std::string dpc::dp::formatBytes(int64_t bytes) {
  static const char *const kUnits[] = {"KiB", "MiB", "GiB",
                                       "TiB", "PiB", "EiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " bytes";
  double value = double(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f %s", value, kUnits[unit]);
  return buffer;
}

std::string dpc::dp::shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      shape, os,
      [&](int64_t d) {
        if (mlir::ShapedType::isDynamic(d))
          os << "?";
        else
          os << d;
      },
      "x");
  return text;
}
