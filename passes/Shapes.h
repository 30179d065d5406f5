//===- Shapes.h - Reading the shapes of dp tensors --------------*- C++ -*-===//
//
// A layer's tensors are samples x features or samples x tokens x features.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_SHAPES_H
#define DPC_PASSES_SHAPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"

namespace dpc {

inline mlir::RankedTensorType tensorOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}
inline int64_t numelOf(mlir::Value v) { return tensorOf(v).getNumElements(); }
inline int64_t lastDim(mlir::Value v) { return tensorOf(v).getShape().back(); }
/// Rows of d features: all dimensions but the last.
inline int64_t rowsOf(mlir::Value v) { return numelOf(v) / lastDim(v); }
inline int64_t batchOf(mlir::Value v) { return tensorOf(v).getDimSize(0); }
/// Tokens per sample: the middle dimension of B x T x d, 1 for B x d.
inline int64_t tokensOf(mlir::Value v) {
  return tensorOf(v).getRank() == 3 ? tensorOf(v).getDimSize(1) : 1;
}

} // namespace dpc

#endif // DPC_PASSES_SHAPES_H
