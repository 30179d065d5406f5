//===- DPAttrs.h - Initializers and recipe attributes -----------*- C++ -*-===//

#ifndef DPC_DIALECTS_DP_DPATTRS_H
#define DPC_DIALECTS_DP_DPATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "DP/DPEnums.h.inc"

#include <optional>

namespace dpc::dp {
/// The values a float field or attribute may take: an interval with optional,
/// open or closed bounds. NaN and the infinities lie in none: every float of
/// the dialect is finite.
struct FloatRange {
  std::optional<double> low, high;
  bool lowOpen = false, highOpen = false;

  /// (low, inf)
  static FloatRange above(double low) { return {low, std::nullopt, true}; }
  /// [low, inf)
  static FloatRange atLeast(double low) { return {low, std::nullopt, false}; }
  /// An interval with both bounds.
  static FloatRange between(double low, bool lowOpen, double high,
                            bool highOpen) {
    return {low, high, lowOpen, highOpen};
  }

  bool contains(double value) const;
  /// "be > 0", "be >= 0", "lie in (0, 1]".
  std::string describe() const;
};

/// Fails, naming the field, when `value` is not finite ("eps must be finite,
/// got inf") or lies outside `range` ("delta must lie in (0, 1), got 1.5").
mlir::LogicalResult
verifyFloatField(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                 llvm::StringRef name, double value, const FloatRange &range);

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
