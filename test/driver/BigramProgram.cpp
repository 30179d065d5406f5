//===- BigramProgram.cpp - A hand-written "emitted" language model --------===//
//
// What dpc would emit for a byte-level bigram language model: the logits of
// token t are row tokens[t] of a 256 x 256 table (an embedding read as
// logits), 16 tokens per sample, for FIXTURE_RANKS ranks. Exercises the
// text path of the driver: Tokens/NextTokens inputs, ignored targets,
// per-sample embedding norms and --generate.
//
// Recipe: flat clipping at C = 1, sigma = 0.8, ChaCha20 noise, Poisson
// sampling with an expected batch of 8, 4 samples per rank and micro-step,
// momentum SGD.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"
#include "dprt/program.h"

#ifndef FIXTURE_RANKS
#define FIXTURE_RANKS 1
#endif

namespace {

using namespace dprt;

constexpr int32_t kRanks = FIXTURE_RANKS;
constexpr DType kCompute = DType::F32;
constexpr int64_t kElem = 4;
constexpr int64_t kBatch = 4, kTokens = 16, kVocab = 256;
constexpr int64_t kRows = kBatch * kTokens;
constexpr int64_t kNumel = kVocab * kVocab;
constexpr int64_t kShard = (kNumel + kRanks - 1) / kRanks;

constexpr int64_t after(int64_t offset, int64_t bytes) {
  return (offset + bytes + kArenaAlignment - 1) / kArenaAlignment *
         kArenaAlignment;
}

constexpr int64_t kState = 0;
constexpr int64_t kTok = after(kState, sizeof(StepState));
constexpr int64_t kNext = after(kTok, kRows * 4);
constexpr int64_t kMask = after(kNext, kRows * 4);
constexpr int64_t kLoss = after(kMask, kBatch *kElem);
constexpr int64_t kMaster = after(kLoss, kBatch *kElem);
constexpr int64_t kGrad = after(kMaster, kShard *kElem);
constexpr int64_t kVelocity = after(kGrad, kShard *kElem);
constexpr int64_t kFull = after(kVelocity, kShard *kElem);
constexpr int64_t kLogits = after(kFull, kShard *kRanks *kElem);
constexpr int64_t kLse = after(kLogits, kRows *kVocab *kElem);
constexpr int64_t kDLogits = after(kLse, kRows *kElem);
constexpr int64_t kN2 = after(kDLogits, kRows *kVocab *kElem);
constexpr int64_t kClip = after(kN2, kBatch *kElem);
constexpr int64_t kDFull = after(kClip, kBatch *kElem);
constexpr int64_t kArena = after(kDFull, kShard *kRanks *kElem);

constexpr double kLr = 0.5, kMomentum = 0.9;

const int32_t *tokens(char *a) {
  return reinterpret_cast<const int32_t *>(a + kTok);
}

void forward(Rank *rank, char *a) {
  all_gather(rank, kCompute, a + kMaster, a + kFull, kShard, 1);
  embedding_forward(rank, kCompute, tokens(a), a + kFull, a + kLogits, kRows,
                    kVocab, kVocab);
  cross_entropy_forward(
      rank, kCompute, a + kLogits, reinterpret_cast<const int32_t *>(a + kNext),
      a + kLoss, a + kLse, kBatch, kTokens, kVocab, true, -1, Reduction::Mean);
}

} // namespace

void dp_describe(ProgramSpec *spec) {
  describe_program(spec, "bigram", "cpu", kRanks, kArena, kState, kCompute,
                   kBatch, kTokens, kMask, kLoss, kLogits, kVocab, kArena);
  describe_recipe(spec, ClipMode::Flat, 1.0, 0.01, false, 0.8, 0.0, 1e-5,
                  NoiseGeneratorKind::ChaCha20, SamplingKind::Poisson, 8, 0.0,
                  0, 30, 3);
  describe_optimizer(spec, OptimizerKind::Momentum, kLr, kMomentum, false, 0, 0,
                     0, 0.0);
  describe_input(spec, "tokens", InputRole::Tokens, kTok, kTokens, 0, 0);
  describe_input(spec, "targets", InputRole::NextTokens, kNext, kTokens, 0, 0);
  describe_unit(spec, "unit.table", kNumel, kShard, kMaster, kMaster, kGrad,
                kVelocity, -1);
  describe_param(spec, "table", 0, 0, 0, true, kVocab, kVocab, 0, 0, "", false,
                 -1, -1);
}

void dp_init(Rank *rank) {
  char *a = arena(rank);
  zero(rank, a + kMaster, kShard * kElem);
  init_normal_range(rank, kCompute, a + kMaster, kShard, 0, kNumel, 0, 0.02);
  zero(rank, a + kGrad, kShard * kElem);
  zero(rank, a + kVelocity, kShard * kElem);
}

void dp_microstep(Rank *rank) {
  char *a = arena(rank);
  const auto *next = reinterpret_cast<const int32_t *>(a + kNext);
  forward(rank, a);
  cross_entropy_backward(rank, kCompute, a + kLogits, next, a + kLse, a + kMask,
                         a + kDLogits, kBatch, kTokens, kVocab, true, -1,
                         Reduction::Mean);
  zero(rank, a + kN2, kBatch * kElem);
  norm_embedding(rank, kCompute, tokens(a), a + kDLogits, a + kN2, kBatch,
                 kTokens, kVocab);
  clip_factors(rank, kCompute, a + kN2, a + kMask, a + kClip, kBatch, 1,
               ClipMode::Flat, 1.0, 0.01, 1e-6);
  zero(rank, a + kDFull, kShard * kRanks * kElem);
  embedding_grad(rank, kCompute, tokens(a), a + kDLogits, a + kClip, a + kDFull,
                 kBatch, kTokens, kVocab, kVocab);
  reduce_scatter(rank, kCompute, a + kDFull, a + kGrad, kShard, true, 1);
}

void dp_apply(Rank *rank) {
  char *a = arena(rank);
  add_noise_range(rank, kCompute, a + kGrad, kShard, 0, kNumel, 0);
  momentum_update_range(rank, kCompute, a + kMaster, a + kVelocity, a + kGrad,
                        kShard, 0, kNumel, kMomentum, false);
  zero(rank, a + kGrad, kShard * kElem);
}

void dp_forward(Rank *rank) { forward(rank, arena(rank)); }
