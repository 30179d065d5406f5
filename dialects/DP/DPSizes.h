//===- DPSizes.h - Tensor sizes in checked arithmetic -----------*- C++ -*-===//
//
// The sizes of the tensors a model and its recipe imply, computed without
// overflow, and the limits the verifiers hold them to.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_DIALECTS_DP_DPSIZES_H
#define DPC_DIALECTS_DP_DPSIZES_H

#include "mlir/IR/BuiltinTypes.h"

#include <cstdint>
#include <optional>

namespace dpc::dp {

/// No device holds a tensor of 2^40 bytes (1 TiB). The verifiers reject a
/// parameter, or an activation of the physical batch, that is larger: such a
/// size is a mistake, and with every tensor below it the sums and products of
/// a few sizes that the passes form stay far from int64 overflow.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 40;

/// The driver and the accountant hold steps and logical batches in doubles,
/// which count exactly up to 2^53.
constexpr int64_t kMaxExactCount = int64_t(1) << 53;

/// Elements of a tensor of `shape` whose dynamic dimensions (the sample
/// dimension before dp-specialize) hold `dynamicSize` each; nullopt when the
/// count overflows int64.
std::optional<int64_t> getNumElements(llvm::ArrayRef<int64_t> shape,
                                      int64_t dynamicSize = 1);

/// Bytes of one element of `type` (an int or float type; for f8E4M3FN the
/// e4m3 byte alone, without its share of a scale).
int64_t getElementBytes(mlir::Type type);

/// Whether tensors of element type `type` are MXFP8 per-sample gradient rows
/// (dp.linear_per_sample_grad): f8E4M3FN, whose buffer holds the e4m3
/// elements followed by one e8m0 scale byte per 32 of them
/// (dprt::DType::MXFP8, runtime/include/dprt/types.h).
bool isMXFP8Rows(mlir::Type type);

/// Bytes of a tensor of `type` with dynamic dimensions of `dynamicSize`,
/// MXFP8 scales included; nullopt when the count overflows int64.
std::optional<int64_t> getNumBytes(mlir::ShapedType type,
                                   int64_t dynamicSize = 1);

/// `bytes` as people read it: "1.5 GiB", "384 bytes".
std::string formatBytes(int64_t bytes);

/// Writes a shape as `4x?x8` for diagnostics.
std::string shapeString(llvm::ArrayRef<int64_t> shape);

} // namespace dpc::dp

#endif // DPC_DIALECTS_DP_DPSIZES_H
