//===- DPAttrs.cpp - Initializers and recipe attributes -------------------===//

#include "DP/DPOps.h"
#include "DP/DPSizes.h"

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

bool dpc::dp::FloatRange::contains(double value) const {
  if (!std::isfinite(value))
    return false;
  if (low && (lowOpen ? value <= *low : value < *low))
    return false;
  return !high || (highOpen ? value < *high : value <= *high);
}

std::string dpc::dp::FloatRange::describe() const {
  if (low && high)
    return std::string("lie in ") + (lowOpen ? "(" : "[") + formatF64(*low) +
           ", " + formatF64(*high) + (highOpen ? ")" : "]");
  if (high)
    return (highOpen ? "be < " : "be <= ") + formatF64(*high);
  if (low)
    return (lowOpen ? "be > " : "be >= ") + formatF64(*low);
  return "be finite";
}

LogicalResult
dpc::dp::verifyFloatField(llvm::function_ref<InFlightDiagnostic()> emitError,
                          StringRef name, double value,
                          const FloatRange &range) {
  if (!std::isfinite(value))
    return emitError() << name << " must be finite, got " << formatF64(value);
  if (!range.contains(value))
    return emitError() << name << " must " << range.describe() << ", got "
                       << formatF64(value);
  return success();
}

namespace {
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

LogicalResult checkFloat(EmitErrorFn emitError, StringRef field,
                         const APFloat &value, const FloatRange &range) {
  return verifyFloatField(emitError, field, value.convertToDouble(), range);
}

/// Learning rates, clipping bounds, epsilon: (0, inf).
const FloatRange kPositive = FloatRange::above(0.0);
/// Standard deviations, noise multipliers, weight decay: [0, inf).
const FloatRange kNonNegative = FloatRange::atLeast(0.0);
/// Decay rates of moving averages: [0, 1); at 1 they never forget.
const FloatRange kDecay = FloatRange::between(0.0, false, 1.0, true);
/// delta is a probability of failure: (0, 1).
const FloatRange kDelta = FloatRange::between(0.0, true, 1.0, true);
/// A sampling rate: (0, 1].
const FloatRange kRate = FloatRange::between(0.0, true, 1.0, false);

/// A record count: at least 1, and exact in the doubles the driver and the
/// accountant hold it in.
LogicalResult checkCount(EmitErrorFn emitError, StringRef field,
                         int64_t value) {
  if (value < 1)
    return emitError() << field << " must be >= 1, got " << value;
  if (value > kMaxExactCount)
    return emitError() << field << " = " << value
                       << " is above 2^53, the largest count the driver and "
                          "the accountant hold exactly";
  return success();
}
} // namespace

LogicalResult NormalInitAttr::verify(EmitErrorFn emitError, APFloat std) {
  return checkFloat(emitError, "standard deviation", std, kNonNegative);
}

LogicalResult UniformInitAttr::verify(EmitErrorFn emitError, APFloat bound) {
  return checkFloat(emitError, "bound", bound, kNonNegative);
}

LogicalResult ClipAttr::verify(EmitErrorFn emitError, ClipMode mode,
                               APFloat maxNorm, APFloat gamma) {
  if (mode == ClipMode::none) {
    // Nothing is clipped: a bound or gamma would be ignored.
    if (!maxNorm.isZero() || gamma.convertToDouble() != 0.01)
      return emitError() << "#dp.clip<none> clips nothing and takes no "
                            "max_norm or gamma";
    return success();
  }
  if (failed(checkFloat(emitError, "max_norm", maxNorm, kPositive)))
    return failure();
  return checkFloat(emitError, "gamma", gamma, kPositive);
}

LogicalResult PrivacyUnitAttr::verify(EmitErrorFn emitError, UnitKind kind,
                                      int64_t maxRecords) {
  if (kind == UnitKind::record && maxRecords != 1)
    return emitError() << "max_records = " << maxRecords
                       << " is for the user unit; a record is one record";
  if (maxRecords < 1)
    return emitError() << "max_records must be >= 1, got " << maxRecords;
  return success();
}

LogicalResult NoiseAttr::verify(EmitErrorFn emitError, APFloat sigma,
                                APFloat delta, NoiseGenerator, Accountant) {
  if (failed(checkFloat(emitError, "sigma", sigma, kNonNegative)))
    return failure();
  return checkFloat(emitError, "delta", delta, kDelta);
}

LogicalResult TargetAttr::verify(EmitErrorFn emitError, APFloat epsilon,
                                 APFloat delta, NoiseGenerator, Accountant) {
  if (failed(checkFloat(emitError, "epsilon", epsilon, kPositive)))
    return failure();
  return checkFloat(emitError, "delta", delta, kDelta);
}

LogicalResult PoissonAttr::verify(EmitErrorFn emitError, int64_t expectedBatch,
                                  APFloat rateField, int64_t physicalBatch) {
  double rate = rateField.convertToDouble();
  if (physicalBatch < 1)
    return emitError() << "physical_batch must be >= 1, got " << physicalBatch;
  bool hasExpected = expectedBatch != 0, hasRate = rate != 0.0;
  if (hasExpected == hasRate)
    return emitError() << "give exactly one of expected_batch and rate";
  if (hasExpected)
    return checkCount(emitError, "expected_batch", expectedBatch);
  return checkFloat(emitError, "sampling rate", rateField, kRate);
}

LogicalResult ShuffleAttr::verify(EmitErrorFn emitError, int64_t batch,
                                  int64_t physicalBatch) {
  if (failed(checkCount(emitError, "batch", batch)))
    return failure();
  if (physicalBatch < 1)
    return emitError() << "physical_batch must be >= 1, got " << physicalBatch;
  return success();
}

LogicalResult SGDAttr::verify(EmitErrorFn emitError, APFloat lr,
                              APFloat weightDecay) {
  if (failed(checkFloat(emitError, "lr", lr, kPositive)))
    return failure();
  return checkFloat(emitError, "weight_decay", weightDecay, kNonNegative);
}

LogicalResult MomentumAttr::verify(EmitErrorFn emitError, APFloat lr,
                                   APFloat momentum, bool,
                                   APFloat weightDecay) {
  if (failed(checkFloat(emitError, "lr", lr, kPositive)) ||
      failed(checkFloat(emitError, "momentum", momentum, kDecay)))
    return failure();
  return checkFloat(emitError, "weight_decay", weightDecay, kNonNegative);
}

LogicalResult AdamWAttr::verify(EmitErrorFn emitError, APFloat lr,
                                APFloat beta1, APFloat beta2, APFloat eps,
                                APFloat weightDecay) {
  if (failed(checkFloat(emitError, "lr", lr, kPositive)) ||
      failed(checkFloat(emitError, "beta1", beta1, kDecay)) ||
      failed(checkFloat(emitError, "beta2", beta2, kDecay)) ||
      failed(checkFloat(emitError, "eps", eps, kPositive)))
    return failure();
  return checkFloat(emitError, "weight_decay", weightDecay, kNonNegative);
}

LogicalResult RopeLlama3Attr::verify(EmitErrorFn emitError, APFloat factor,
                                     APFloat lowFreqFactor,
                                     APFloat highFreqFactor,
                                     int64_t originalMaxPositions) {
  if (failed(checkFloat(emitError, "factor", factor, kPositive)) ||
      failed(
          checkFloat(emitError, "low_freq_factor", lowFreqFactor, kPositive)) ||
      failed(
          checkFloat(emitError, "high_freq_factor", highFreqFactor, kPositive)))
    return failure();
  // The blend divides by high - low: the band between them must exist.
  if (!(highFreqFactor.convertToDouble() > lowFreqFactor.convertToDouble()))
    return emitError() << "high_freq_factor ("
                       << formatF64(highFreqFactor.convertToDouble())
                       << ") must be above low_freq_factor ("
                       << formatF64(lowFreqFactor.convertToDouble()) << ")";
  if (originalMaxPositions < 1)
    return emitError() << "original_max_position_embeddings must be >= 1, got "
                       << originalMaxPositions;
  return success();
}

LogicalResult ScheduleAttr::verify(EmitErrorFn emitError, int64_t warmup,
                                   LrDecay decay, APFloat minLrRatio) {
  if (warmup < 0)
    return emitError() << "warmup must be >= 0 steps, got " << warmup;
  if (warmup > kMaxExactCount)
    return emitError() << "warmup = " << warmup
                       << " is above 2^53, the largest step count the "
                          "driver holds exactly";
  if (failed(checkFloat(emitError, "min_lr_ratio", minLrRatio,
                        FloatRange::between(0.0, false, 1.0, false))))
    return failure();
  if (decay == LrDecay::constant && !minLrRatio.isZero())
    return emitError() << "min_lr_ratio = "
                       << formatF64(minLrRatio.convertToDouble())
                       << " has no effect with decay = constant; give decay "
                          "= linear or cosine";
  return success();
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

LogicalResult LoRAAttr::verify(EmitErrorFn emitError, int64_t rank,
                               APFloat alpha, ArrayAttr targets) {
  if (rank <= 0)
    return emitError() << "lora rank must be > 0, got " << rank;
  if (failed(checkFloat(emitError, "lora alpha", alpha, kPositive)))
    return failure();
  if (targets.empty())
    return emitError() << "lora targets must name at least one module";
  for (Attribute target : targets) {
    auto name = dyn_cast<StringAttr>(target);
    if (!name || name.getValue().empty())
      return emitError() << "lora targets must be non-empty strings, got "
                         << target;
  }
  return success();
}
