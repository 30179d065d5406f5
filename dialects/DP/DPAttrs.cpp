//===- DPAttrs.cpp - Initializers and recipe attributes -------------------===//

#include "DP/DPOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace dpc::dp;

FailureOr<APFloat> dpc::dp::parseF64Field(AsmParser &parser) {
  // `lr = 1` reads as well as `lr = 1.0`. The sign is read here because an
  // integer parse that consumed `-` would fail on `-0.5`.
  bool negative = succeeded(parser.parseOptionalMinus());
  double value = 0;
  uint64_t integer = 0;
  OptionalParseResult asInteger = parser.parseOptionalInteger(integer);
  if (asInteger.has_value()) {
    if (failed(*asInteger))
      return failure();
    value = static_cast<double>(integer);
  } else if (parser.parseFloat(value)) {
    return failure();
  }
  return APFloat(negative ? -value : value);
}

std::string dpc::dp::formatF64(double value) {
  char buffer[40];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

void dpc::dp::printF64Field(AsmPrinter &printer, const APFloat &field) {
  double value = field.convertToDouble();
  // The fewest significant digits that read back to the same double, with a
  // decimal point in the mantissa: MLIR lexes `1e-05` as an integer and a
  // keyword, `1.0e-05` as a float.
  char buffer[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  std::string text(buffer);
  if (std::isfinite(value) && text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  printer << text;
}

FailureOr<bool> dpc::dp::parseBoolField(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

namespace {
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// `value` must be finite and strictly above `low`.
LogicalResult checkAbove(EmitErrorFn emitError, StringRef field,
                         const APFloat &fieldValue, double low) {
  double value = fieldValue.convertToDouble();
  if (std::isfinite(value) && value > low)
    return success();
  return emitError() << field << " must be > " << formatF64(low)
                     << ", got " << formatF64(value);
}

/// `value` must be finite and at least `low`.
LogicalResult checkAtLeast(EmitErrorFn emitError, StringRef field,
                           const APFloat &fieldValue, double low) {
  double value = fieldValue.convertToDouble();
  if (std::isfinite(value) && value >= low)
    return success();
  return emitError() << field << " must be >= " << formatF64(low)
                     << ", got " << formatF64(value);
}

/// `value` must lie in the half-open interval [0, 1).
LogicalResult checkDecay(EmitErrorFn emitError, StringRef field,
                         const APFloat &fieldValue) {
  double value = fieldValue.convertToDouble();
  if (value >= 0.0 && value < 1.0)
    return success();
  return emitError() << field << " must lie in [0, 1), got "
                     << formatF64(value);
}

/// delta is a probability of failure: it must lie in the open interval (0, 1).
LogicalResult checkDelta(EmitErrorFn emitError, const APFloat &field) {
  double delta = field.convertToDouble();
  if (delta > 0.0 && delta < 1.0)
    return success();
  return emitError() << "delta must lie in (0, 1), got " << formatF64(delta);
}

LogicalResult checkBatch(EmitErrorFn emitError, StringRef field,
                         int64_t value) {
  if (value >= 1)
    return success();
  return emitError() << field << " must be >= 1, got " << value;
}
} // namespace

LogicalResult NormalInitAttr::verify(EmitErrorFn emitError, APFloat std) {
  return checkAtLeast(emitError, "standard deviation", std, 0.0);
}

LogicalResult UniformInitAttr::verify(EmitErrorFn emitError, APFloat bound) {
  return checkAtLeast(emitError, "bound", bound, 0.0);
}

LogicalResult ClipAttr::verify(EmitErrorFn emitError, ClipMode mode,
                               APFloat maxNorm, APFloat gamma) {
  if (failed(checkAbove(emitError, "max_norm", maxNorm, 0.0)))
    return failure();
  return checkAbove(emitError, "gamma", gamma, 0.0);
}

LogicalResult NoiseAttr::verify(EmitErrorFn emitError, APFloat sigma,
                                APFloat delta, NoiseGenerator) {
  if (failed(checkAtLeast(emitError, "sigma", sigma, 0.0)))
    return failure();
  return checkDelta(emitError, delta);
}

LogicalResult TargetAttr::verify(EmitErrorFn emitError, APFloat epsilon,
                                 APFloat delta, NoiseGenerator) {
  if (failed(checkAbove(emitError, "epsilon", epsilon, 0.0)))
    return failure();
  return checkDelta(emitError, delta);
}

LogicalResult PoissonAttr::verify(EmitErrorFn emitError, int64_t expectedBatch,
                                  APFloat rateField, int64_t physicalBatch) {
  double rate = rateField.convertToDouble();
  if (failed(checkBatch(emitError, "physical_batch", physicalBatch)))
    return failure();
  bool hasExpected = expectedBatch != 0, hasRate = rate != 0.0;
  if (hasExpected == hasRate)
    return emitError() << "give exactly one of expected_batch and rate";
  if (hasExpected)
    return checkBatch(emitError, "expected_batch", expectedBatch);
  if (!(rate > 0.0 && rate <= 1.0))
    return emitError() << "sampling rate must lie in (0, 1], got "
                       << formatF64(rate);
  return success();
}

LogicalResult ShuffleAttr::verify(EmitErrorFn emitError, int64_t batch,
                                  int64_t physicalBatch) {
  if (failed(checkBatch(emitError, "batch", batch)))
    return failure();
  return checkBatch(emitError, "physical_batch", physicalBatch);
}

LogicalResult SGDAttr::verify(EmitErrorFn emitError, APFloat lr,
                              APFloat weightDecay) {
  if (failed(checkAbove(emitError, "lr", lr, 0.0)))
    return failure();
  return checkAtLeast(emitError, "weight_decay", weightDecay, 0.0);
}

LogicalResult MomentumAttr::verify(EmitErrorFn emitError, APFloat lr,
                                   APFloat momentum, bool, APFloat weightDecay) {
  if (failed(checkAbove(emitError, "lr", lr, 0.0)) ||
      failed(checkDecay(emitError, "momentum", momentum)))
    return failure();
  return checkAtLeast(emitError, "weight_decay", weightDecay, 0.0);
}

LogicalResult AdamWAttr::verify(EmitErrorFn emitError, APFloat lr,
                                APFloat beta1, APFloat beta2, APFloat eps,
                                APFloat weightDecay) {
  if (failed(checkAbove(emitError, "lr", lr, 0.0)) ||
      failed(checkDecay(emitError, "beta1", beta1)) ||
      failed(checkDecay(emitError, "beta2", beta2)) ||
      failed(checkAbove(emitError, "eps", eps, 0.0)))
    return failure();
  return checkAtLeast(emitError, "weight_decay", weightDecay, 0.0);
}

LogicalResult PrecisionAttr::verify(EmitErrorFn emitError, Type compute,
                                    Type master) {
  if (!compute || !(compute.isF64() || compute.isF32() || compute.isBF16() ||
                    compute.isF16()))
    return emitError() << "compute type must be f64, f32, bf16 or f16, got "
                       << compute;
  if (!master || !(master.isF64() || master.isF32()))
    return emitError() << "master type must be f32 or f64, got " << master;
  if (master.getIntOrFloatBitWidth() < compute.getIntOrFloatBitWidth())
    return emitError() << "master type " << master
                       << " is narrower than the compute type " << compute;
  return success();
}

LogicalResult FSDPAttr::verify(EmitErrorFn emitError, ShardUnit, bool,
                               int64_t prefetch) {
  if (prefetch < 0)
    return emitError() << "prefetch must be >= 0, got " << prefetch;
  return success();
}

#include "DP/DPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "DP/DPAttrs.cpp.inc"

void DPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "DP/DPAttrs.cpp.inc"
      >();
}
