//===- DPAttrs.h - Initializers and recipe attributes -----------*- C++ -*-===//

#ifndef DPC_DIALECTS_DP_DPATTRS_H
#define DPC_DIALECTS_DP_DPATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "DP/DPEnums.h.inc"

namespace dpc::dp {
/// Parses a float field of an attribute; integer literals are accepted.
mlir::FailureOr<llvm::APFloat> parseF64Field(mlir::AsmParser &parser);
/// Prints a float field in the shortest form that parses back exactly.
void printF64Field(mlir::AsmPrinter &printer, const llvm::APFloat &value);
/// A double as printf's %g writes it, for diagnostics.
std::string formatF64(double value);
/// Parses `true` or `false`.
mlir::FailureOr<bool> parseBoolField(mlir::AsmParser &parser);
} // namespace dpc::dp

#define GET_ATTRDEF_CLASSES
#include "DP/DPAttrs.h.inc"

#endif // DPC_DIALECTS_DP_DPATTRS_H
