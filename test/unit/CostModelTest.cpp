//===- CostModelTest.cpp - The time model of the norm methods -------------===//
//
// linearParamSeconds charges the second pass over a product only where the
// CUDA backend runs it (dprt/fused_norms.h): these tests take the cuda
// model with and without its fused norms and check that the difference is
// exactly the pass the rule leaves out, and nothing where the rule says no
// or the model is f32. MXFP8 rows (dpc --per-sample-rows=mxfp8) count
// 1 + 1/32 bytes an element, in memory and in the slices' traffic.
//
//===----------------------------------------------------------------------===//

#include "passes/CostModel.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace dpc;

namespace {

/// Seconds the fused norms save: the cuda model without them less with.
double savedSeconds(const LinearNormShape &s, dp::NormMethod method,
                    int64_t computeBytes, double gramShare = 1.0) {
  DeviceRates fused = deviceRates(Backend::CUDA);
  DeviceRates unfused = fused;
  unfused.fusedNorms = false;
  return linearParamSeconds(s, method, computeBytes, 4, unfused, gramShare) -
         linearParamSeconds(s, method, computeBytes, 4, fused, gramShare);
}

/// Relative tolerance of a difference of two sums of a few terms.
constexpr double kRelative = 1e-9;

/// Seconds to move `bytes` at the cuda model's bandwidth.
double at(double bytes) {
  return bytes / deviceRates(Backend::CUDA).bytesPerSecond;
}

TEST(CostModel, CudaModelHasFusedNormsAndCpuNot) {
  EXPECT_TRUE(deviceRates(Backend::CUDA).fusedNorms);
  EXPECT_FALSE(deviceRates(Backend::CPU).fusedNorms);
}

TEST(CostModel, MaterializedNormReadOnlyWhereNotFused) {
  // gate/up at T = 1024: fused, the slices' second read (b d p bf16) saved.
  LinearNormShape gate{8, 1024, 2048, 8192};
  EXPECT_NEAR(savedSeconds(gate, dp::NormMethod::materialized, 2),
              at(8.0 * 2048 * 8192 * 2), kRelative * at(8.0 * 2048 * 8192 * 2));
  // The same weight at T = 4096 and k/v at T = 1024: not fused.
  EXPECT_DOUBLE_EQ(
      savedSeconds({2, 4096, 2048, 8192}, dp::NormMethod::materialized, 2),
      0.0);
  EXPECT_DOUBLE_EQ(
      savedSeconds({8, 1024, 2048, 512}, dp::NormMethod::materialized, 2), 0.0);
  // The 32000-row head at any length.
  EXPECT_NEAR(
      savedSeconds({1, 8192, 2048, 32000}, dp::NormMethod::materialized, 2),
      at(1.0 * 2048 * 32000 * 2), kRelative * at(1.0 * 2048 * 32000 * 2));
  // The 128K head: fused up to 1024 tokens, two passes beyond.
  EXPECT_NEAR(
      savedSeconds({8, 1024, 2048, 128256}, dp::NormMethod::materialized, 2),
      at(8.0 * 2048 * 128256 * 2), kRelative * at(8.0 * 2048 * 128256 * 2));
  EXPECT_DOUBLE_EQ(
      savedSeconds({4, 2048, 2048, 128256}, dp::NormMethod::materialized, 2),
      0.0);
  // f32 models have no fused kernels.
  EXPECT_DOUBLE_EQ(savedSeconds(gate, dp::NormMethod::materialized, 4), 0.0);
}

TEST(CostModel, DirectNormWorkspaceOnlyWhereNotFused) {
  // Two samples: the f32 gradient written and read back, saved.
  EXPECT_NEAR(savedSeconds({2, 4096, 2048, 2048}, dp::NormMethod::direct, 2),
              at(2.0 * 2.0 * 2048 * 2048 * 4),
              kRelative * at(2.0 * 2.0 * 2048 * 2048 * 4));
  // One sample of a 4M-element weight: not fused; of 16M: fused.
  EXPECT_DOUBLE_EQ(
      savedSeconds({1, 8192, 2048, 2048}, dp::NormMethod::direct, 2), 0.0);
  EXPECT_NEAR(savedSeconds({1, 8192, 2048, 8192}, dp::NormMethod::direct, 2),
              at(2.0 * 1.0 * 2048 * 8192 * 4),
              kRelative * at(2.0 * 1.0 * 2048 * 8192 * 4));
}

TEST(CostModel, GramOutputSideOnlyWhereNotFused) {
  // 2048 output columns: G G^T written and read, less A A^T's read, saved
  // (2 B T^2 acc), whatever the A side's share.
  for (double share : {1.0, 0.5, 0.0})
    EXPECT_NEAR(
        savedSeconds({8, 1024, 2048, 2048}, dp::NormMethod::gram, 2, share),
        at(2.0 * 8 * 1024.0 * 1024 * 4),
        kRelative * at(2.0 * 8 * 1024.0 * 1024 * 4));
  // 8192 output columns: cuBLASLt's Gram product and gram_dot.
  EXPECT_DOUBLE_EQ(savedSeconds({8, 1024, 2048, 8192}, dp::NormMethod::gram, 2),
                   0.0);
}

} // namespace

namespace {

TEST(CostModel, SumInUpdateWritesNoGradient) {
  // A materialized weight whose sum the update forms: the f32 gradient's
  // read and write (2 d p acc) are not charged; the slices are.
  const DeviceRates cuda = deviceRates(Backend::CUDA);
  for (LinearNormShape s : {LinearNormShape{8, 1024, 2048, 8192},
                            LinearNormShape{4, 2048, 2048, 128256}}) {
    double inGradient = linearParamSeconds(s, dp::NormMethod::materialized, 2,
                                           4, cuda, 1.0, false);
    double inUpdate = linearParamSeconds(s, dp::NormMethod::materialized, 2, 4,
                                         cuda, 1.0, true);
    double gradient = at(2.0 * double(s.in) * double(s.out) * 4);
    EXPECT_NEAR(inGradient - inUpdate, gradient, kRelative * gradient);
  }
  // The other methods have no such pass to drop.
  LinearNormShape q{8, 1024, 2048, 2048};
  EXPECT_DOUBLE_EQ(
      linearParamSeconds(q, dp::NormMethod::gram, 2, 4, cuda, 1.0, false),
      linearParamSeconds(q, dp::NormMethod::gram, 2, 4, cuda, 1.0, true));
}

} // namespace

namespace {

TEST(CostModel, MXFP8RowsTakeOneByteAndAThirtySecondAnElement) {
  // gate at b 8, T 1024: 8 x 2048 x 8192 elements of rows, and a scale byte
  // per 32 of them (dprt::storageBytes), what the lowering allocates.
  LinearNormShape s{8, 1024, 2048, 8192};
  const int64_t elements = int64_t(8) * 2048 * 8192;
  EXPECT_EQ(materializedBytes(s, 2), 2 * elements);
  EXPECT_EQ(materializedBytes(s, 2, PerSampleRows::MXFP8),
            elements + elements / 32);
  EXPECT_DOUBLE_EQ(rowElementBytes(PerSampleRows::MXFP8, 2), 33.0 / 32.0);
  EXPECT_DOUBLE_EQ(rowElementBytes(PerSampleRows::Compute, 2), 2.0);
}

TEST(CostModel, MXFP8RowsSaveTheirShareOfTheSlicesTraffic) {
  // The slices written, read by the norm and by the clipped sum: three
  // passes on the cpu model, two on the cuda model where the norm is fused
  // (gate at T = 1024); each at 1 + 1/32 bytes an element instead of 2.
  LinearNormShape s{8, 1024, 2048, 8192};
  const double slices = 8.0 * 2048 * 8192 * (2.0 - 33.0 / 32.0);
  for (auto [backend, passes] :
       {std::pair{Backend::CPU, 3.0}, std::pair{Backend::CUDA, 2.0}}) {
    DeviceRates rates = deviceRates(backend);
    double bf16 =
        linearParamSeconds(s, dp::NormMethod::materialized, 2, 4, rates);
    double mxfp8 = linearParamSeconds(s, dp::NormMethod::materialized, 2, 4,
                                      rates, 1.0, false, PerSampleRows::MXFP8);
    double saved = passes * slices / rates.bytesPerSecond;
    EXPECT_NEAR(bf16 - mxfp8, saved, kRelative * saved);
  }
  // The other methods store no rows.
  DeviceRates cuda = deviceRates(Backend::CUDA);
  EXPECT_DOUBLE_EQ(linearParamSeconds(s, dp::NormMethod::gram, 2, 4, cuda),
                   linearParamSeconds(s, dp::NormMethod::gram, 2, 4, cuda, 1.0,
                                      false, PerSampleRows::MXFP8));
}

TEST(CostModel, MXFP8RowsOnlyForBlocksWithinAWeightRowInF32Sums) {
  mlir::MLIRContext context;
  mlir::Type bf16 = mlir::BFloat16Type::get(&context);
  mlir::Type f32 = mlir::Float32Type::get(&context);
  mlir::Type f64 = mlir::Float64Type::get(&context);
  DeviceRates cpu = deviceRates(Backend::CPU);
  LinearNormShape in64{2, 16, 64, 8}, in48{2, 16, 48, 8};
  EXPECT_EQ(rowsFormatFor(in64, bf16, PerSampleRows::MXFP8, cpu),
            PerSampleRows::MXFP8);
  EXPECT_EQ(rowsFormatFor(in64, f32, PerSampleRows::MXFP8, cpu),
            PerSampleRows::MXFP8);
  // A block of 32 would span two rows of the weight.
  EXPECT_EQ(rowsFormatFor(in48, bf16, PerSampleRows::MXFP8, cpu),
            PerSampleRows::Compute);
  // An f64 model sums in f64; the runtime sums MXFP8 rows in f32.
  EXPECT_EQ(rowsFormatFor(in64, f64, PerSampleRows::MXFP8, cpu),
            PerSampleRows::Compute);
  EXPECT_EQ(rowsFormatFor(in64, bf16, PerSampleRows::Compute, cpu),
            PerSampleRows::Compute);
}

TEST(CostModel, AutoRowsAreMXFP8WhereTheBf16ProductIsFused) {
  mlir::MLIRContext context;
  mlir::Type bf16 = mlir::BFloat16Type::get(&context);
  mlir::Type f32 = mlir::Float32Type::get(&context);
  DeviceRates cuda = deviceRates(Backend::CUDA);
  DeviceRates cpu = deviceRates(Backend::CPU);
  auto rowsOf = [&](LinearNormShape s, mlir::Type type, DeviceRates rates) {
    return rowsFormatFor(s, type, PerSampleRows::Auto, rates);
  };
  // The 1.1B model at T = 1024: gate/up, down and the head are fused (2048
  // outputs or more), k/v (512) take cuBLASLt's two passes.
  EXPECT_EQ(rowsOf({8, 1024, 2048, 8192}, bf16, cuda), PerSampleRows::MXFP8);
  EXPECT_EQ(rowsOf({8, 1024, 8192, 2048}, bf16, cuda), PerSampleRows::MXFP8);
  EXPECT_EQ(rowsOf({8, 1024, 2048, 32000}, bf16, cuda), PerSampleRows::MXFP8);
  EXPECT_EQ(rowsOf({8, 1024, 2048, 512}, bf16, cuda), PerSampleRows::Compute);
  // At T = 4096 only the 32000-row head; the 128K head never.
  EXPECT_EQ(rowsOf({2, 4096, 2048, 8192}, bf16, cuda), PerSampleRows::Compute);
  EXPECT_EQ(rowsOf({2, 4096, 2048, 32000}, bf16, cuda), PerSampleRows::MXFP8);
  EXPECT_EQ(rowsOf({4, 2048, 2048, 128256}, bf16, cuda),
            PerSampleRows::Compute);
  // No fused products: f32 models, the cpu backend; and no block of 32
  // across a weight row.
  EXPECT_EQ(rowsOf({8, 1024, 2048, 8192}, f32, cuda), PerSampleRows::Compute);
  EXPECT_EQ(rowsOf({8, 1024, 2048, 8192}, bf16, cpu), PerSampleRows::Compute);
  EXPECT_EQ(rowsOf({8, 1024, 2040, 8192}, bf16, cuda), PerSampleRows::Compute);
}

} // namespace
