//===- ClassifierProgram.cpp - A hand-written "emitted" program -----------===//
//
// What dpc would emit for a linear softmax classifier, 4 features -> 3
// classes, with the weight and the bias in two FSDP units, for
// FIXTURE_RANKS ranks and FIXTURE_COMPUTE (f32 or f64). Only the kernel API
// and a fixed arena layout, like generated code: the driver's tests train it.
// With FIXTURE_ONE_UNIT (1 rank only) the weight and the bias share one unit
// "unit.wb": the same computation with another unit layout, for checkpoint
// tests.
//
// Recipe: flat clipping at C = 1, target epsilon 4 at delta 1e-5, Poisson
// sampling at rate q = 0.05, 8 samples per rank and micro-step, AdamW.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"
#include "dprt/program.h"

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#ifndef FIXTURE_RANKS
#define FIXTURE_RANKS 1
#endif
#ifndef FIXTURE_F64
#define FIXTURE_F64 0
#endif
#ifndef FIXTURE_ONE_UNIT
#define FIXTURE_ONE_UNIT 0
#endif

namespace {

using namespace dprt;

constexpr int32_t kRanks = FIXTURE_RANKS;
constexpr DType kCompute = FIXTURE_F64 ? DType::F64 : DType::F32;
constexpr int64_t kElem = sizeOf(kCompute); // acc == compute here
constexpr int64_t kBatch = 8, kFeatures = 4, kClasses = 3;
constexpr int64_t kNumelW = kClasses * kFeatures, kNumelB = kClasses;
constexpr int64_t kShardW = (kNumelW + kRanks - 1) / kRanks;
constexpr int64_t kShardB = (kNumelB + kRanks - 1) / kRanks;
constexpr bool kOneUnit = FIXTURE_ONE_UNIT;
static_assert(!kOneUnit || kRanks == 1, "one unit is a 1-rank layout");
// One unit: each of its buffers holds the weight, then the bias.
constexpr int64_t kWBytes = (kOneUnit ? kNumelW + kNumelB : kShardW) * kElem;

constexpr int64_t after(int64_t offset, int64_t bytes) {
  return (offset + bytes + kArenaAlignment - 1) / kArenaAlignment *
         kArenaAlignment;
}

// The arena: step state, inputs, the units' shards, gathered parameters,
// activations and gradients, one after the other.
constexpr int64_t kState = 0;
constexpr int64_t kX = after(kState, sizeof(StepState));
constexpr int64_t kLabel = after(kX, kBatch *kFeatures *kElem);
constexpr int64_t kMask = after(kLabel, kBatch * 4);
constexpr int64_t kLoss = after(kMask, kBatch *kElem);
constexpr int64_t kMasterW = after(kLoss, kBatch *kElem);
constexpr int64_t kGradW = after(kMasterW, kWBytes);
constexpr int64_t kAdamMW = after(kGradW, kWBytes);
constexpr int64_t kAdamVW = after(kAdamMW, kWBytes);
constexpr int64_t kInUnit = kNumelW * kElem; // the bias in the one unit
constexpr int64_t kMasterB =
    kOneUnit ? kMasterW + kInUnit : after(kAdamVW, kShardW *kElem);
constexpr int64_t kGradB =
    kOneUnit ? kGradW + kInUnit : after(kMasterB, kShardB *kElem);
constexpr int64_t kAdamMB =
    kOneUnit ? kAdamMW + kInUnit : after(kGradB, kShardB *kElem);
constexpr int64_t kAdamVB =
    kOneUnit ? kAdamVW + kInUnit : after(kAdamMB, kShardB *kElem);
constexpr int64_t kFullW = after(kAdamVB, kShardB *kElem);
constexpr int64_t kFullB = after(kFullW, kShardW *kRanks *kElem);
constexpr int64_t kLogits = after(kFullB, kShardB *kRanks *kElem);
constexpr int64_t kLse = after(kLogits, kBatch *kClasses *kElem);
constexpr int64_t kDLogits = after(kLse, kBatch *kElem);
constexpr int64_t kN2 = after(kDLogits, kBatch *kClasses *kElem);
constexpr int64_t kClip = after(kN2, kBatch *kElem);
constexpr int64_t kDFullW = after(kClip, kBatch *kElem);
constexpr int64_t kDFullB = after(kDFullW, kShardW *kRanks *kElem);
constexpr int64_t kWorkspace = after(kDFullB, kShardB *kRanks *kElem);
constexpr int64_t kArena =
    after(kWorkspace, weightGradWorkspaceBytes(kCompute, kBatch, 1, kClasses));

constexpr double kLr = 0.05, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

void forward(Rank *rank, char *a) {
  all_gather(rank, kCompute, a + kMasterW, a + kFullW, kShardW, 1);
  all_gather(rank, kCompute, a + kMasterB, a + kFullB, kShardB, 1);
  linear_forward(rank, kCompute, a + kX, a + kFullW, a + kFullB, nullptr,
                 a + kLogits, kBatch, kFeatures, kClasses);
  cross_entropy_forward(rank, kCompute, a + kLogits,
                        reinterpret_cast<const int32_t *>(a + kLabel),
                        a + kLoss, a + kLse, kBatch, 1, kClasses, false, 0,
                        Reduction::Mean);
}

/// Test hook, not something dpc emits: DPC_FIXTURE_FAIL_RANK=r makes rank r
/// throw in its third micro-step, as a failing kernel would, while the other
/// ranks wait for it in a collective.
void failIfAsked(Rank *rank) {
  static const char *failRank = std::getenv("DPC_FIXTURE_FAIL_RANK");
  thread_local int microsteps = 0;
  if (failRank && std::atoi(failRank) == rank->rank && ++microsteps == 3)
    throw std::runtime_error("rank " + std::to_string(rank->rank) +
                             " failed on purpose");
}

/// Test hook, not something dpc emits: DPC_FIXTURE_NAN_GRADIENT_STEP=s makes
/// rank 0's gradient shard NaN in step s, as a numerically broken layer
/// would, while every loss stays finite.
void poisonGradientIfAsked(Rank *rank, char *a) {
  static const char *step = std::getenv("DPC_FIXTURE_NAN_GRADIENT_STEP");
  const auto &state = *reinterpret_cast<const StepState *>(a + kState);
  if (!step || rank->rank != 0 || state.step != std::atoll(step))
    return;
  if (kCompute == DType::F64)
    *reinterpret_cast<double *>(a + kGradW) = std::nan("");
  else
    *reinterpret_cast<float *>(a + kGradW) = std::nanf("");
}

/// Test hook: DPC_FIXTURE_NAN_WEIGHT_STEP=s makes rank 0's first weight NaN
/// after the update of step s, as an overflowing update would.
void poisonWeightIfAsked(Rank *rank, char *a) {
  static const char *step = std::getenv("DPC_FIXTURE_NAN_WEIGHT_STEP");
  const auto &state = *reinterpret_cast<const StepState *>(a + kState);
  if (!step || rank->rank != 0 || state.step != std::atoll(step))
    return;
  if (kCompute == DType::F64)
    *reinterpret_cast<double *>(a + kMasterW) = std::nan("");
  else
    *reinterpret_cast<float *>(a + kMasterW) = std::nanf("");
}

} // namespace

void dp_describe(ProgramSpec *spec) {
  describe_program(spec, "classifier", "cpu", kRanks, kArena, kState, kCompute,
                   kBatch, 1, kMask, kLoss, kLogits, kClasses, kArena);
  describe_recipe(spec, ClipMode::Flat, 1.0, 0.01, true, 0.0, 4.0, 1e-5,
                  NoiseGeneratorKind::Philox, SamplingKind::Poisson, 0, 0.05, 0,
                  40, 7);
  describe_optimizer(spec, OptimizerKind::AdamW, kLr, 0, false, kBeta1, kBeta2,
                     kEps, 0.0);
  describe_input(spec, "x", InputRole::Features, kX, kFeatures, 0, 0);
  describe_input(spec, "label", InputRole::Label, kLabel, 0, 0, 0);
  if (kOneUnit) {
    describe_unit(spec, "unit.wb", kNumelW + kNumelB, kNumelW + kNumelB,
                  kMasterW, kMasterW, kGradW, kAdamMW, kAdamVW);
    describe_param(spec, "w", 0, 0, 0, true, kClasses, kFeatures, 0, 0, "",
                   false, -1, -1);
    describe_param(spec, "b", 0, kNumelW, kNumelW, true, kClasses, 0, 0, 0, "",
                   false, -1, -1);
    return;
  }
  describe_unit(spec, "unit.w", kNumelW, kShardW, kMasterW, kMasterW, kGradW,
                kAdamMW, kAdamVW);
  describe_unit(spec, "unit.b", kNumelB, kShardB, kMasterB, kMasterB, kGradB,
                kAdamMB, kAdamVB);
  describe_param(spec, "w", 0, 0, 0, true, kClasses, kFeatures, 0, 0, "", false,
                 -1, -1);
  describe_param(spec, "b", 1, 0, kNumelW, true, kClasses, 0, 0, 0, "", false,
                 -1, -1);
}

void dp_init(Rank *rank) {
  char *a = arena(rank);
  zero(rank, a + kMasterW, kShardW * kElem);
  init_normal_range(rank, kCompute, a + kMasterW, kShardW, 0, kNumelW, 0, 0.5);
  zero(rank, a + kGradW, kShardW * kElem);
  zero(rank, a + kAdamMW, kShardW * kElem);
  zero(rank, a + kAdamVW, kShardW * kElem);
  zero(rank, a + kMasterB, kShardB * kElem);
  fill_range(rank, kCompute, a + kMasterB, kShardB, 0, kNumelB, 0.0);
  zero(rank, a + kGradB, kShardB * kElem);
  zero(rank, a + kAdamMB, kShardB * kElem);
  zero(rank, a + kAdamVB, kShardB * kElem);
}

void dp_microstep(Rank *rank) {
  char *a = arena(rank);
  const auto *labels = reinterpret_cast<const int32_t *>(a + kLabel);
  failIfAsked(rank);
  forward(rank, a);
  // The mask seeds the backward pass: padding rows get no gradient.
  cross_entropy_backward(rank, kCompute, a + kLogits, labels, a + kLse,
                         a + kMask, a + kDLogits, kBatch, 1, kClasses, false, 0,
                         Reduction::Mean);
  zero(rank, a + kN2, kBatch * kElem);
  norm_rank1(rank, kCompute, a + kX, a + kDLogits, a + kN2, kBatch, kFeatures,
             kClasses);
  norm_bias(rank, kCompute, a + kDLogits, a + kN2, kBatch, 1, kClasses);
  clip_factors(rank, kCompute, a + kN2, a + kMask, a + kClip, kBatch, 1,
               ClipMode::Flat, 1.0, 0.01, 1e-6);
  zero(rank, a + kDFullW, kShardW * kRanks * kElem);
  linear_weight_grad(rank, kCompute, a + kX, a + kDLogits, a + kClip,
                     a + kDFullW, kBatch, 1, kFeatures, kClasses,
                     a + kWorkspace, true);
  zero(rank, a + kDFullB, kShardB * kRanks * kElem);
  bias_grad(rank, kCompute, a + kDLogits, a + kClip, a + kDFullB, kBatch, 1,
            kClasses);
  reduce_scatter(rank, kCompute, a + kDFullW, a + kGradW, kShardW, true, 1);
  reduce_scatter(rank, kCompute, a + kDFullB, a + kGradB, kShardB, true, 1);
  poisonGradientIfAsked(rank, a);
}

void dp_apply(Rank *rank) {
  char *a = arena(rank);
  add_noise_range(rank, kCompute, a + kGradW, kShardW, 0, kNumelW, 0);
  adamw_update_range(rank, kCompute, a + kMasterW, a + kAdamMW, a + kAdamVW,
                     a + kGradW, kShardW, 0, kNumelW, kBeta1, kBeta2, kEps);
  zero(rank, a + kGradW, kShardW * kElem);
  add_noise_range(rank, kCompute, a + kGradB, kShardB, 0, kNumelB, kNumelW);
  adamw_update_range(rank, kCompute, a + kMasterB, a + kAdamMB, a + kAdamVB,
                     a + kGradB, kShardB, 0, kNumelB, kBeta1, kBeta2, kEps);
  zero(rank, a + kGradB, kShardB * kElem);
  poisonWeightIfAsked(rank, a);
}

void dp_forward(Rank *rank) { forward(rank, arena(rank)); }
