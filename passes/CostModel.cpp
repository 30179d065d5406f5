//===- CostModel.cpp - FLOPs of per-sample norms and weight gradients -----===//

#include "passes/CostModel.h"

#include "passes/Shapes.h"

#include "dprt/fused_norms.h"
#include "dprt/types.h"

#include <cmath>

using namespace dpc;

LinearNormShape dpc::linearNormShape(mlir::Value x, mlir::Value dy) {
  return {batchOf(x), tokensOf(x), lastDim(x), lastDim(dy)};
}

double dpc::rank1NormFlops(const LinearNormShape &s) {
  return double(s.batch) * 2.0 * double(s.in + s.out);
}

double dpc::gramInputFlops(const LinearNormShape &s) {
  double t = double(s.tokens);
  return double(s.batch) * 2.0 * t * t * double(s.in);
}

double dpc::gramOutputFlops(const LinearNormShape &s) {
  double t = double(s.tokens);
  return double(s.batch) * (2.0 * t * t * double(s.out) + 2.0 * t * t);
}

double dpc::directNormFlops(const LinearNormShape &s) {
  double dp = double(s.in) * double(s.out);
  return double(s.batch) * (2.0 * double(s.tokens) * dp + dp);
}

dp::NormMethod dpc::chooseLinearNormMethod(const LinearNormShape &s) {
  if (s.tokens == 1)
    return dp::NormMethod::rank1;
  // 2T^2(d+p) < 2Tdp  <=>  T(d+p) < dp, in exact integer arithmetic.
  __int128 gram = __int128(s.tokens) * (s.in + s.out);
  __int128 direct = __int128(s.in) * s.out;
  return gram < direct ? dp::NormMethod::gram : dp::NormMethod::direct;
}

double dpc::linearWeightGradFlops(const LinearNormShape &s) {
  double rows = double(s.batch) * double(s.tokens);
  return 2.0 * rows * double(s.in) * double(s.out) + rows * double(s.out);
}

double dpc::materializedNormFlops(const LinearNormShape &s) {
  return double(s.batch) * 2.0 * double(s.in) * double(s.out);
}

double dpc::materializedGradFlops(const LinearNormShape &s) {
  double dp = double(s.in) * double(s.out);
  return double(s.batch) * (2.0 * double(s.tokens) * dp + 2.0 * dp);
}


double dpc::rowElementBytes(PerSampleRows rows, int64_t computeBytes) {
  if (rows == PerSampleRows::MXFP8)
    return double(
               ::dprt::storageBytes(::dprt::DType::MXFP8, ::dprt::kMxBlock)) /
           double(::dprt::kMxBlock);
  return double(computeBytes);
}

int64_t dpc::materializedBytes(const LinearNormShape &s, int64_t computeBytes,
                               PerSampleRows rows) {
  int64_t elements = s.batch * s.in * s.out;
  if (rows == PerSampleRows::MXFP8)
    return ::dprt::storageBytes(::dprt::DType::MXFP8, elements);
  return elements * computeBytes;
}

DeviceRates dpc::deviceRates(Backend backend) {
  // The Gram rate: with 700 TFLOP/s for them too, this model had the Gram
  // and materialized norms of the 1.1B model's `down` (2048 x 8192) and
  // head (32000 x 2048) at T = 1024, b = 8 within 0.2 % of each other;
  // materialized, the step was 2.36 ms (1.8 %) shorter on an H100
  // (2026-11-27, AdamW and SGD, docs/PERFORMANCE.md). 465 TFLOP/s for the
  // Gram products predicts that difference.
  return backend == Backend::CUDA ? DeviceRates{700e12, 3e12, 465e12, true}
                                  : DeviceRates{100e9, 10e9, 100e9, false};
}

PerSampleRows dpc::rowsFormatFor(const LinearNormShape &s, mlir::Type compute,
                                 PerSampleRows asked,
                                 const DeviceRates &rates) {
  bool fits =
      s.in % ::dprt::kMxBlock == 0 && (compute.isBF16() || compute.isF32());
  bool wanted =
      asked == PerSampleRows::MXFP8 ||
      (asked == PerSampleRows::Auto && rates.fusedNorms && compute.isBF16() &&
       ::dprt::perSampleGradFusedByDefault(s.tokens, s.out));
  return wanted && fits ? PerSampleRows::MXFP8 : PerSampleRows::Compute;
}

double dpc::linearParamSeconds(const LinearNormShape &s, dp::NormMethod method,
                               int64_t computeBytes, int64_t accBytes,
                               const DeviceRates &rates, double gramInputShare,
                               bool sumInUpdate, PerSampleRows rows) {
  double b = double(s.batch), t = double(s.tokens);
  double dp = double(s.in) * double(s.out);
  double acc = double(accBytes);
  double flops = 0, gramFlops = 0, bytes = 0;
  // The fused norm products (bf16 on sm_90a) where the backend runs them by
  // default: no second pass over a product (dprt/fused_norms.h).
  const bool fusable = rates.fusedNorms && computeBytes == 2;
  if (method == dp::NormMethod::materialized) {
    flops = materializedNormFlops(s) + materializedGradFlops(s);
    // The slices (compute type or MXFP8) written once and read by the
    // clipped sum, and by the norm unless it is summed in the product's
    // epilogue; the gradient (acc) read and written, unless the update forms
    // the sum.
    bool fused =
        fusable && ::dprt::perSampleGradFusedByDefault(s.tokens, s.out);
    bytes = (fused ? 2.0 : 3.0) * b * dp * rowElementBytes(rows, computeBytes) +
            (sumInUpdate ? 0.0 : 2.0 * dp * acc);
  } else {
    flops = linearWeightGradFlops(s);
    bytes = 2.0 * b * t * double(s.out) * double(computeBytes);
    switch (method) {
    case dp::NormMethod::rank1:
      flops += rank1NormFlops(s);
      break;
    case dp::NormMethod::gram: {
      gramFlops = gramInputShare * gramInputFlops(s) + gramOutputFlops(s);
      // A A^T written (the share of it), then per layer: read by the fused
      // product's epilogue, or G G^T written and both read by gram_dot.
      bool fused = fusable && ::dprt::gramNormFusedByDefault(s.out);
      bytes += (gramInputShare + (fused ? 1.0 : 3.0)) * b * t * t * acc;
      break;
    }
    default:
      flops += directNormFlops(s);
      // Each sample's gradient written and read back, unless squared in
      // the product's epilogue.
      if (!(fusable && ::dprt::directNormFusedByDefault(s.batch, s.in, s.out)))
        bytes += 2.0 * b * dp * acc;
      break;
    }
  }
  return flops / rates.flopsPerSecond + gramFlops / rates.gramFlopsPerSecond +
         bytes / rates.bytesPerSecond;
}

double dpc::normRelativeError(double terms, double unitRoundoff) {
  constexpr double lambda = 8.0;
  return lambda * std::sqrt(std::max(terms, 1.0)) * unitRoundoff;
}

double dpc::biasNormFlops(int64_t batch, int64_t tokens, int64_t out) {
  return double(batch) * (double(tokens) * double(out) + 2.0 * double(out));
}

double dpc::embeddingNormFlops(int64_t batch, int64_t tokens, int64_t dim) {
  return double(batch) * 2.0 * double(tokens) * double(dim);
}

double dpc::rowsNormFlops(int64_t batch, int64_t tokens, int64_t dim) {
  return double(batch) *
         (2.0 * double(tokens) * double(dim) + 2.0 * double(dim));
}

double dpc::elementGradFlops(int64_t rows, int64_t width) {
  return 2.0 * double(rows) * double(width);
}

double dpc::tiedCrossFlops(const TiedNormShape &s) {
  double pairs = double(s.tokensHead) * double(s.tokensEmb);
  return double(s.batch) * (2.0 * pairs * double(s.dim) + 2.0 * pairs);
}

double dpc::tiedDirectFlops(const TiedNormShape &s) {
  double vd = double(s.vocab) * double(s.dim);
  return double(s.batch) * (2.0 * double(s.tokensHead) * vd +
                            double(s.tokensEmb) * double(s.dim) + vd);
}

bool dpc::chooseTiedDirect(const TiedNormShape &s, double headNormFlops) {
  double separate = headNormFlops +
                    embeddingNormFlops(s.batch, s.tokensEmb, s.dim) +
                    tiedCrossFlops(s);
  return tiedDirectFlops(s) < separate;
}
