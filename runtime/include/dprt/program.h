//===- program.h - What an emitted program tells the driver -----*- C++ -*-===//
//
// `dpc` emits one C++ file per model. It defines the five entry points at the
// end of this header and nothing else; `dp_describe` fills a ProgramSpec by
// calling the describe_* functions below with literals, so the driver learns
// the arena layout, the inputs, the parameters and the recipe without parsing
// anything.
//
// Arena layout: every offset is in bytes from arena(rank); every buffer is
// aligned to kArenaAlignment. A unit (FSDP) is a flat buffer holding its
// parameters back to back, padded to a multiple of the number of ranks it
// is split over (all ranks, or those of one replica on a 2-D grid); the rank
// holding shard s (shardIndexOf in rank.h) owns elements
// [s * shardElems, (s+1) * shardElems) of it.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PROGRAM_H
#define DPRT_PROGRAM_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dprt {

/// What a forward-pass input holds; it tells the driver how to fill it.
enum class InputRole : int32_t {
  /// int32 [batch, tokens]: the tokens of each record (byte-level text).
  Tokens = 0,
  /// int32 [batch, tokens]: next-token targets, -1 where ignored.
  NextTokens = 1,
  /// compute type [batch, features]: CSV features.
  Features = 2,
  /// int32 [batch]: CSV class label.
  Label = 3,
  /// compute type [batch, k]: CSV regression targets.
  Target = 4,
};

/// The role's name in messages and checkpoints.
inline const char *nameOf(InputRole role) {
  switch (role) {
  case InputRole::Tokens:
    return "tokens";
  case InputRole::NextTokens:
    return "next_tokens";
  case InputRole::Features:
    return "features";
  case InputRole::Label:
    return "label";
  case InputRole::Target:
    return "target";
  }
  return "unknown";
}

/// How the learning rate decays after its warmup (RecipeSpec::decay; the
/// names are those of the recipe's `#dp.schedule` and of --decay).
enum class LrDecay : int32_t {
  Constant = 0, ///< no decay
  Linear = 1,   ///< linearly to min_lr_ratio at the last step
  Cosine = 2,   ///< half a cosine period to min_lr_ratio at the last step
};

inline const char *nameOf(LrDecay decay) {
  switch (decay) {
  case LrDecay::Constant:
    return "constant";
  case LrDecay::Linear:
    return "linear";
  case LrDecay::Cosine:
    return "cosine";
  }
  return "unknown";
}

/// The decay called `name`; false for an unknown name.
inline bool parseLrDecay(const std::string &name, LrDecay &decay) {
  for (LrDecay d : {LrDecay::Constant, LrDecay::Linear, LrDecay::Cosine})
    if (name == nameOf(d)) {
      decay = d;
      return true;
    }
  return false;
}

struct InputSpec {
  std::string name;
  InputRole role;
  int64_t offset;            ///< arena offset of [physicalBatch, ...]
  std::vector<int64_t> dims; ///< per-sample shape (without the batch)
};

/// Where a parameter's values are in a Hugging Face checkpoint (the hf.*
/// attributes of its dp.param; docs/huggingface.md). Let S be the stored
/// tensor, L = S (or S^T when `transposed`, 2-D only); the parameter is L,
/// or rows [rowBegin, rowEnd) of L when rowBegin >= 0 (GPT-2's c_attn holds
/// q, k and v: three parameters with one name and three row ranges).
struct HfSource {
  std::string name; ///< the tensor's name; empty: the parameter has none
  bool transposed = false;
  int64_t rowBegin = -1; ///< -1: all rows
  int64_t rowEnd = -1;

  bool present() const { return !name.empty(); }
  bool hasRows() const { return rowBegin >= 0; }
};

/// A parameter's part in a LoRA adapter (dp-lora, docs/lora.md): W.lora_A
/// (r x in), W.lora_B (out x r), W.lora_scale ((alpha / r) I, not exported).
enum class LoRARole { None, A, B, Scale };

struct LoRAPart {
  LoRARole role = LoRARole::None;
  std::string base;     ///< the adapted weight W's parameter name
  std::string peftName; ///< the tensor's name in a peft adapter (A and B)
};

/// The recipe's #dp.lora: y = x W^T + (alpha / rank) (x A^T) B^T on the
/// linear layers of the targeted modules; rank 0 without one.
struct LoRASpec {
  int64_t rank = 0;
  double alpha = 0;
  std::vector<std::string> targets; ///< peft's target_modules
  bool present() const { return rank > 0; }
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  int32_t unit;         ///< index into ProgramSpec::units
  int64_t offsetInUnit; ///< element offset in the unit's flat buffer
  int64_t globalIndex;  ///< first element's index in the model's flat space
  bool trainable;
  HfSource hf;   ///< the Hugging Face tensor it comes from, if any
  LoRAPart lora; ///< describe_adapter; role None for every other parameter
  /// describe_update_from_rows: dp_apply forms this parameter's clipped sum
  /// from its per-sample gradients of the step's one micro-step, so its
  /// gradient buffer stays zero (and the driver does not check it).
  bool sumFromRows = false;
  /// describe_gradient_overwritten: the micro-step writes this parameter's
  /// gradient instead of adding to it (its one linear_weight_grad), and
  /// dp_apply does not zero it, so a step must be exactly one micro-step.
  bool gradOverwritten = false;
};

struct UnitSpec {
  std::string name;
  int64_t numel;       ///< real elements (parameters back to back)
  int64_t shardElems;  ///< elements each rank owns (padded numel / shards)
  int64_t paramShard;  ///< arena offset of this rank's shard, compute type
                       ///< (-1: none kept; layers read the master, cast)
  int64_t masterShard; ///< acc-type master shard (== paramShard if same)
  int64_t gradShard;   ///< acc-type accumulated gradient shard, or -1
  int64_t optState1;   ///< momentum / Adam m, or -1
  int64_t optState2;   ///< Adam v, or -1
  /// Trainable without a gradient shard (gradShard -1): dp_apply forms the
  /// clipped sum of every trainable parameter of the unit from the
  /// per-sample gradients (describe_update_from_rows names each).
  bool sumsFromRows = false;

  /// A unit of frozen parameters has no gradient, master copy or optimizer
  /// state: masterShard == paramShard, in the compute type.
  bool frozen() const { return gradShard < 0 && !sumsFromRows; }
};

/// One physical micro-step function of the emitted program.
using MicrostepFn = void (*)(Rank *);

/// dp_microstep compiled for `rows` rows: the same plan, run on the first
/// `rows` rows of every per-sample buffer (inputs, mask, losses).
struct SizedMicrostep {
  int64_t rows = 0;
  MicrostepFn run = nullptr;
};

struct RecipeSpec {
  ClipMode clip = ClipMode::Flat; ///< None: DP off, no per-sample norms
  double maxNorm = 1.0;           ///< 0 without clipping
  double gamma = 0.01;
  bool targetEpsilon = false; ///< noise given as a target (epsilon, delta)
  double sigma = 0.0;         ///< noise multiplier when not a target
  double epsilon = 0.0;       ///< target epsilon
  double delta = 1e-5;
  /// None: the program adds no noise (noise = #dp.none); batches are
  /// still sampled with Philox.
  NoiseGeneratorKind generator = NoiseGeneratorKind::Philox;
  SamplingKind sampling = SamplingKind::Poisson;
  int64_t expectedBatch = 0; ///< Poisson: q = expectedBatch / N, if > 0
  double rate = 0.0;         ///< Poisson: q, if > 0
  int64_t shuffleBatch = 0;  ///< Shuffle: logical batch
  OptimizerKind optimizer = OptimizerKind::SGD;
  double lr = 0.0, momentum = 0.0, beta1 = 0.0, beta2 = 0.0, eps = 0.0,
         weightDecay = 0.0;
  bool nesterov = false;
  int64_t steps = 0;
  int64_t seed = 0;

  /// Whether the program adds noise at all; without, no run of it is
  /// differentially private, whatever the command line says.
  bool addsNoise() const { return generator != NoiseGeneratorKind::None; }

  /// The learning-rate schedule (describe_schedule): linear warmup over the
  /// first `warmup` steps, then `decay` down to minLrRatio * lr.
  int64_t warmup = 0;
  LrDecay decay = LrDecay::Constant;
  double minLrRatio = 0.0;
  /// The accountant the recipe names ("pld" or "rdp"; describe_accountant),
  /// empty when the program does not say: the driver's default then.
  std::string accountant;
  /// User-level DP (describe_privacy_unit): a sampled user contributes at
  /// most this many records, clipped as one unit; 0: one record is the
  /// privacy unit.
  int64_t userRecords = 0;
};

struct ProgramSpec {
  std::string model;
  std::string backend; ///< "cpu" or "cuda", what the program was built for
  int32_t ranks = 1;
  /// Hybrid sharding: the grid is `replicas` x (ranks / replicas); each unit
  /// is split over the ranks / replicas ranks of a replica (Rank::replicas).
  int32_t replicas = 1;
  int64_t arenaBytes = 0;
  int64_t stateOffset = 0; ///< the StepState
  DType compute = DType::F32;
  int64_t physicalBatch = 0; ///< samples per rank and micro-step
  int64_t tokens = 1;        ///< tokens per sample (1 for classifiers)
  std::vector<InputSpec> inputs;
  int64_t maskOffset = -1;   ///< acc [physicalBatch]: 1 real, 0 padding
  int64_t lossOffset = -1;   ///< acc [physicalBatch]: per-sample loss
  int64_t logitsOffset = -1; ///< compute [physicalBatch*tokens, classes]
  int64_t classes = 0;       ///< logits width (vocabulary), if logits
  /// How the per-sample loss reduces over a sample's positions (mean: over
  /// its counted targets); describe_loss, Mean when not called.
  Reduction lossReduction = Reduction::Mean;
  std::vector<ParamSpec> params;
  std::vector<UnitSpec> units;
  RecipeSpec recipe;
  LoRASpec lora; ///< the recipe's #dp.lora (describe_lora), if any
  /// The device memory a rank is predicted to hold: the arena, and on the
  /// CUDA backend its cuBLASLt workspace (kCudaGemmWorkspaceBytes).
  int64_t predictedPeakBytes = 0;
  /// The memory plan's peak in use (at most the arena: what its buffers
  /// need at once, before the gaps their offsets leave).
  int64_t planPeakInUseBytes = 0;
  /// dp_microstep compiled for fewer rows than physicalBatch, smallest
  /// first (describe_microstep): a step's last micro-step runs the smallest
  /// that holds its real rows instead of padding a full physical batch.
  std::vector<SizedMicrostep> smallerMicrosteps;
};

// Called by the emitted dp_describe, in this order: program, grid (2-D
// grids only), loss, recipe (describe_recipe, describe_optimizer,
// describe_schedule, describe_accountant, describe_privacy_unit), inputs,
// units, params (each followed by describe_update_from_rows when the update
// forms its sum), then with #dp.lora describe_lora and describe_adapter for
// each adapter part, then describe_microstep for each smaller micro-step.
void describe_program(ProgramSpec *spec, const char *model, const char *backend,
                      int32_t ranks, int64_t arenaBytes, int64_t stateOffset,
                      DType compute, int64_t physicalBatch, int64_t tokens,
                      int64_t maskOffset, int64_t lossOffset,
                      int64_t logitsOffset, int64_t classes,
                      int64_t planPeakInUseBytes);
/// The per-sample loss's reduction over positions (dp.cross_entropy and
/// dp.mse's per_sample).
void describe_loss(ProgramSpec *spec, Reduction perSample);
/// A grid of `replicas` x (ranks / replicas) ranks (hybrid sharding); a
/// program without the call has one replica.
void describe_grid(ProgramSpec *spec, int32_t replicas);
void describe_recipe(ProgramSpec *spec, ClipMode clip, double maxNorm,
                     double gamma, bool targetEpsilon, double sigma,
                     double epsilon, double delta, NoiseGeneratorKind generator,
                     SamplingKind sampling, int64_t expectedBatch, double rate,
                     int64_t shuffleBatch, int64_t steps, int64_t seed);
void describe_optimizer(ProgramSpec *spec, OptimizerKind kind, double lr,
                        double momentum, bool nesterov, double beta1,
                        double beta2, double eps, double weightDecay);
/// The learning-rate schedule: decay is "constant", "linear" or "cosine".
/// A program that does not call it trains at a constant learning rate.
void describe_schedule(ProgramSpec *spec, int64_t warmup, const char *decay,
                       double minLrRatio);
/// The accountant of the recipe: "pld" or "rdp".
void describe_accountant(ProgramSpec *spec, const char *accountant);
/// User-level DP: one user, at most `maxRecords` of its records a step, is
/// the privacy unit. A program without the call clips records.
void describe_privacy_unit(ProgramSpec *spec, int64_t maxRecords);
/// dims: up to three per-sample dimensions; unused ones are 0.
void describe_input(ProgramSpec *spec, const char *name, InputRole role,
                    int64_t offset, int64_t dim0, int64_t dim1, int64_t dim2);
/// sumsFromRows: a trainable unit with no gradient shard (gradShard -1; one
/// rank), every trainable parameter of which is then named by
/// describe_update_from_rows.
void describe_unit(ProgramSpec *spec, const char *name, int64_t numel,
                   int64_t shardElems, int64_t paramShard, int64_t masterShard,
                   int64_t gradShard, int64_t optState1, int64_t optState2,
                   bool sumsFromRows = false);
/// Throws if a unit described with sumsFromRows has a trainable parameter
/// not named by describe_update_from_rows: its sum would go nowhere. The
/// driver calls it after dp_describe.
void requireSumsFromRows(const ProgramSpec &spec);
/// shape: up to four dimensions; unused ones are 0. hfName, hfTransposed,
/// hfRowBegin, hfRowEnd: the HfSource ("", false, -1, -1: none; rows -1, -1:
/// all of the tensor).
void describe_param(ProgramSpec *spec, const char *name, int32_t unit,
                    int64_t offsetInUnit, int64_t globalIndex, bool trainable,
                    int64_t dim0, int64_t dim1, int64_t dim2, int64_t dim3,
                    const char *hfName, bool hfTransposed, int64_t hfRowBegin,
                    int64_t hfRowEnd);
/// dp_apply's update forms parameter `param`'s clipped sum from the
/// per-sample gradients the micro-step left (one micro-step a step, one
/// rank). After the parameter's describe_param.
void describe_update_from_rows(ProgramSpec *spec, const char *param);
/// The micro-step writes parameter `param`'s gradient instead of adding to
/// it (one micro-step a step, one rank). After the parameter's
/// describe_param.
void describe_gradient_overwritten(ProgramSpec *spec, const char *param);
/// `run` is dp_microstep compiled for `rows` rows, 1 <= rows <
/// physicalBatch (a multiple of max_records under user-level DP), each size
/// once and in increasing order; called last.
void describe_microstep(ProgramSpec *spec, int64_t rows, MicrostepFn run);
/// The recipe's #dp.lora: rank, alpha and the targets joined by ','.
void describe_lora(ProgramSpec *spec, int64_t rank, double alpha,
                   const char *targets);
/// Parameter `param` is part `role` ("A", "B" or "scale") of the adapter of
/// parameter `base`, stored as `peftName` in a peft adapter ("" for the
/// scale, which peft does not store).
void describe_adapter(ProgramSpec *spec, const char *param, const char *base,
                      const char *role, const char *peftName);

} // namespace dprt

// The entry points of an emitted program (global namespace, C++ linkage).
/// Fills the spec (no device work).
void dp_describe(dprt::ProgramSpec *spec);
/// Initializes the rank's master shards and derived compute shards, zeroes
/// gradient and optimizer state.
void dp_init(dprt::Rank *rank);
/// One physical batch: gathers, forward, backward, per-sample norms, clip
/// factors, clipped weight gradients, reduce-scatter; ADDS the clipped
/// gradient sum into the gradient shards. Inputs and mask must be in place.
void dp_microstep(dprt::Rank *rank);
/// Adds noise to the gradient shards, takes the optimizer step on the master
/// shards, refreshes the compute shards and zeroes the gradient shards.
void dp_apply(dprt::Rank *rank);
/// Forward pass only (gathers, forward, loss): fills loss and logits.
void dp_forward(dprt::Rank *rank);

#endif // DPRT_PROGRAM_H
