//===- Program.cpp - The describe_* functions of program.h ----------------===//
//
// The emitted dp_describe calls these with literals. They check every
// argument against the arena and against what was described before (program,
// recipe, inputs, units, params, in that order), so that a compiler bug shows
// up as a message naming the buffer instead of memory corruption later.
//
//===----------------------------------------------------------------------===//

#include "dprt/program.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>

namespace dprt {
namespace {

/// Builds the message of a std::runtime_error from streamed pieces.
class Failure {
public:
  explicit Failure(const ProgramSpec *spec, const char *function) {
    os_ << function << ": ";
    if (spec && !spec->model.empty())
      os_ << "program '" << spec->model << "': ";
  }
  template <class T> Failure &operator<<(const T &value) {
    os_ << value;
    return *this;
  }
  [[noreturn]] void raise() { throw std::runtime_error(os_.str()); }

private:
  std::ostringstream os_;
};

#define DPRT_REQUIRE(cond, spec, function, message)                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      Failure failure(spec, function);                                         \
      failure << message;                                                      \
      failure.raise();                                                         \
    }                                                                          \
  } while (false)

bool isDType(DType t) {
  return t == DType::F64 || t == DType::F32 || t == DType::BF16;
}

/// Checks that [offset, offset + bytes) is an aligned range of the arena.
void requireBuffer(const ProgramSpec *spec, const char *function,
                   const std::string &what, int64_t offset, int64_t bytes) {
  DPRT_REQUIRE(offset >= 0 && bytes >= 0 && offset <= spec->arenaBytes &&
                   bytes <= spec->arenaBytes - offset,
               spec, function,
               what << " at offset " << offset << " with " << bytes
                    << " bytes lies outside the arena of " << spec->arenaBytes
                    << " bytes");
  DPRT_REQUIRE(offset % kArenaAlignment == 0, spec, function,
               what << " at offset " << offset << " is not aligned to "
                    << kArenaAlignment << " bytes");
}

void requireProgram(const ProgramSpec *spec, const char *function) {
  if (!spec)
    throw std::runtime_error(std::string(function) + ": null ProgramSpec");
  DPRT_REQUIRE(spec->arenaBytes > 0, spec, function,
               "describe_program must be called first");
}

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The leading non-zero dimensions; a zero ends the list and must not be
/// followed by a non-zero one.
std::vector<int64_t> collectDims(const ProgramSpec *spec, const char *function,
                                 const std::string &what,
                                 std::initializer_list<int64_t> dims) {
  std::vector<int64_t> out;
  bool ended = false;
  for (int64_t d : dims) {
    DPRT_REQUIRE(d >= 0, spec, function,
                 what << " has a negative dimension " << d);
    if (d == 0) {
      ended = true;
      continue;
    }
    DPRT_REQUIRE(!ended, spec, function,
                 what << " has a non-zero dimension after a zero one");
    out.push_back(d);
  }
  return out;
}

} // namespace

void describe_program(ProgramSpec *spec, const char *model, const char *backend,
                      int32_t ranks, int64_t arenaBytes, int64_t stateOffset,
                      DType compute, int64_t physicalBatch, int64_t tokens,
                      int64_t maskOffset, int64_t lossOffset,
                      int64_t logitsOffset, int64_t classes,
                      int64_t planPeakInUseBytes) {
  const char *fn = "describe_program";
  if (!spec)
    throw std::runtime_error("describe_program: null ProgramSpec");
  *spec = ProgramSpec();
  DPRT_REQUIRE(model && *model, spec, fn, "the model name is empty");
  spec->model = model;
  std::string backendName = backend ? backend : "";
  DPRT_REQUIRE(backendName == "cpu" || backendName == "cuda", spec, fn,
               "unknown backend '" << backendName << "' (cpu or cuda)");
  spec->backend = backendName;
  DPRT_REQUIRE(ranks >= 1, spec, fn, "ranks must be >= 1, got " << ranks);
  spec->ranks = ranks;
  DPRT_REQUIRE(arenaBytes > 0, spec, fn,
               "the arena must have a positive size, got " << arenaBytes);
  spec->arenaBytes = arenaBytes;
  DPRT_REQUIRE(isDType(compute), spec, fn,
               "unknown compute type " << static_cast<int>(compute));
  spec->compute = compute;
  DPRT_REQUIRE(physicalBatch >= 1, spec, fn,
               "the physical batch must be >= 1, got " << physicalBatch);
  spec->physicalBatch = physicalBatch;
  DPRT_REQUIRE(tokens >= 1, spec, fn,
               "tokens per sample must be >= 1, got " << tokens);
  spec->tokens = tokens;
  DPRT_REQUIRE(classes >= 0, spec, fn, "classes must be >= 0, got " << classes);
  spec->classes = classes;
  DPRT_REQUIRE(planPeakInUseBytes >= 0 && planPeakInUseBytes <= arenaBytes,
               spec, fn,
               "the plan's peak in use must be in [0, the arena], got "
                   << planPeakInUseBytes);
  spec->planPeakInUseBytes = planPeakInUseBytes;
  // What the rank allocates: the whole arena, whatever its peak in use,
  // and the CUDA backend's cuBLASLt workspace beside it. Kernel scratch
  // outside the plan (small reductions' partials; cuDNN's workspace where
  // it asks for more than the plan reserved) is not predicted.
  spec->predictedPeakBytes =
      arenaBytes + (backendName == "cuda" ? kCudaGemmWorkspaceBytes : 0);

  requireBuffer(spec, fn, "the step state", stateOffset,
                static_cast<int64_t>(sizeof(StepState)));
  spec->stateOffset = stateOffset;
  const int64_t accBytes = sizeOf(accOf(compute));
  if (maskOffset != -1)
    requireBuffer(spec, fn, "the mask", maskOffset, physicalBatch * accBytes);
  spec->maskOffset = maskOffset;
  if (lossOffset != -1)
    requireBuffer(spec, fn, "the per-sample loss", lossOffset,
                  physicalBatch * accBytes);
  spec->lossOffset = lossOffset;
  if (logitsOffset != -1) {
    DPRT_REQUIRE(classes >= 1, spec, fn,
                 "a program with logits must give their width (classes)");
    requireBuffer(spec, fn, "the logits", logitsOffset,
                  physicalBatch * tokens * classes * sizeOf(compute));
  }
  spec->logitsOffset = logitsOffset;
}

void describe_loss(ProgramSpec *spec, Reduction perSample) {
  const char *fn = "describe_loss";
  requireProgram(spec, fn);
  DPRT_REQUIRE(perSample == Reduction::Mean || perSample == Reduction::Sum,
               spec, fn,
               "unknown loss reduction " << static_cast<int>(perSample));
  spec->lossReduction = perSample;
}

void describe_grid(ProgramSpec *spec, int32_t replicas) {
  const char *fn = "describe_grid";
  requireProgram(spec, fn);
  DPRT_REQUIRE(spec->units.empty(), spec, fn,
               "the grid must be described before the units");
  DPRT_REQUIRE(replicas >= 1 && spec->ranks % replicas == 0, spec, fn,
               "a grid of " << spec->ranks << " ranks has no " << replicas
                            << " replicas of equal size");
  spec->replicas = replicas;
}

void describe_recipe(ProgramSpec *spec, ClipMode clip, double maxNorm,
                     double gamma, bool targetEpsilon, double sigma,
                     double epsilon, double delta, NoiseGeneratorKind generator,
                     SamplingKind sampling, int64_t expectedBatch, double rate,
                     int64_t shuffleBatch, int64_t steps, int64_t seed) {
  const char *fn = "describe_recipe";
  requireProgram(spec, fn);
  RecipeSpec &r = spec->recipe;
  DPRT_REQUIRE(clip == ClipMode::Flat || clip == ClipMode::PerLayer ||
                   clip == ClipMode::Automatic || clip == ClipMode::None,
               spec, fn, "unknown clipping mode " << static_cast<int>(clip));
  r.clip = clip;
  if (clip == ClipMode::None)
    DPRT_REQUIRE(maxNorm == 0, spec, fn,
                 "a program without clipping has no clipping bound, got "
                     << maxNorm);
  else
    DPRT_REQUIRE(std::isfinite(maxNorm) && maxNorm > 0, spec, fn,
                 "the clipping bound must be > 0, got " << maxNorm);
  r.maxNorm = maxNorm;
  DPRT_REQUIRE(std::isfinite(gamma) && gamma >= 0, spec, fn,
               "gamma must be >= 0, got " << gamma);
  r.gamma = gamma;
  r.targetEpsilon = targetEpsilon;
  if (targetEpsilon)
    DPRT_REQUIRE(std::isfinite(epsilon) && epsilon > 0, spec, fn,
                 "the target epsilon must be > 0, got " << epsilon);
  else
    DPRT_REQUIRE(std::isfinite(sigma) && sigma >= 0, spec, fn,
                 "the noise multiplier must be >= 0, got " << sigma);
  r.sigma = sigma;
  r.epsilon = epsilon;
  DPRT_REQUIRE(generator == NoiseGeneratorKind::Philox ||
                   generator == NoiseGeneratorKind::ChaCha20 ||
                   generator == NoiseGeneratorKind::None,
               spec, fn,
               "unknown noise generator " << static_cast<int>(generator));
  r.generator = generator;
  if (generator == NoiseGeneratorKind::None) {
    // noise = #dp.none: no noise, no target, no guarantee to state.
    DPRT_REQUIRE(!targetEpsilon && sigma == 0 && delta == 0, spec, fn,
                 "a program without noise has no target epsilon, sigma or "
                 "delta");
    DPRT_REQUIRE(clip == ClipMode::None, spec, fn,
                 "a program without noise does not clip either");
  } else {
    DPRT_REQUIRE(clip != ClipMode::None, spec, fn,
                 "noise without clipping protects nothing");
    DPRT_REQUIRE(delta > 0 && delta < 1, spec, fn,
                 "delta must be in (0, 1), got " << delta);
  }
  r.delta = delta;
  DPRT_REQUIRE(sampling == SamplingKind::Poisson ||
                   sampling == SamplingKind::Shuffle,
               spec, fn, "unknown sampling " << static_cast<int>(sampling));
  r.sampling = sampling;
  if (sampling == SamplingKind::Poisson)
    DPRT_REQUIRE(expectedBatch > 0 || (rate > 0 && rate <= 1), spec, fn,
                 "Poisson sampling needs an expected batch > 0 or a rate in "
                 "(0, 1], got expected batch "
                     << expectedBatch << " and rate " << rate);
  else
    DPRT_REQUIRE(shuffleBatch >= 1, spec, fn,
                 "shuffle sampling needs a batch >= 1, got " << shuffleBatch);
  DPRT_REQUIRE(expectedBatch >= 0 && rate >= 0 && rate <= 1 &&
                   shuffleBatch >= 0,
               spec, fn, "negative batch size or rate outside [0, 1]");
  r.expectedBatch = expectedBatch;
  r.rate = rate;
  r.shuffleBatch = shuffleBatch;
  DPRT_REQUIRE(steps >= 0, spec, fn, "steps must be >= 0, got " << steps);
  r.steps = steps;
  r.seed = seed;
}

void describe_optimizer(ProgramSpec *spec, OptimizerKind kind, double lr,
                        double momentum, bool nesterov, double beta1,
                        double beta2, double eps, double weightDecay) {
  const char *fn = "describe_optimizer";
  requireProgram(spec, fn);
  RecipeSpec &r = spec->recipe;
  DPRT_REQUIRE(kind == OptimizerKind::SGD || kind == OptimizerKind::Momentum ||
                   kind == OptimizerKind::AdamW,
               spec, fn, "unknown optimizer " << static_cast<int>(kind));
  DPRT_REQUIRE(std::isfinite(lr) && lr >= 0, spec, fn,
               "the learning rate must be >= 0, got " << lr);
  DPRT_REQUIRE(std::isfinite(weightDecay) && weightDecay >= 0, spec, fn,
               "weight decay must be >= 0, got " << weightDecay);
  if (kind == OptimizerKind::Momentum)
    DPRT_REQUIRE(momentum >= 0 && momentum < 1, spec, fn,
                 "momentum must be in [0, 1), got " << momentum);
  if (kind == OptimizerKind::AdamW) {
    DPRT_REQUIRE(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, spec, fn,
                 "Adam's betas must be in [0, 1), got " << beta1 << " and "
                                                        << beta2);
    DPRT_REQUIRE(std::isfinite(eps) && eps > 0, spec, fn,
                 "Adam's eps must be > 0, got " << eps);
  }
  r.optimizer = kind;
  r.lr = lr;
  r.momentum = momentum;
  r.nesterov = nesterov;
  r.beta1 = beta1;
  r.beta2 = beta2;
  r.eps = eps;
  r.weightDecay = weightDecay;
}

void describe_schedule(ProgramSpec *spec, int64_t warmup, const char *decay,
                       double minLrRatio) {
  const char *fn = "describe_schedule";
  requireProgram(spec, fn);
  RecipeSpec &r = spec->recipe;
  DPRT_REQUIRE(warmup >= 0, spec, fn,
               "the warmup must be >= 0 steps, got " << warmup);
  const std::string name = decay ? decay : "";
  DPRT_REQUIRE(parseLrDecay(name, r.decay), spec, fn,
               "unknown decay '" << name << "' (constant, linear or cosine)");
  DPRT_REQUIRE(std::isfinite(minLrRatio) && minLrRatio >= 0 && minLrRatio <= 1,
               spec, fn, "min_lr_ratio must be in [0, 1], got " << minLrRatio);
  r.warmup = warmup;
  r.minLrRatio = minLrRatio;
}

void describe_accountant(ProgramSpec *spec, const char *accountant) {
  const char *fn = "describe_accountant";
  requireProgram(spec, fn);
  const std::string name = accountant ? accountant : "";
  DPRT_REQUIRE(name == "pld" || name == "rdp", spec, fn,
               "unknown accountant '" << name << "' (pld or rdp)");
  spec->recipe.accountant = name;
}

void describe_privacy_unit(ProgramSpec *spec, int64_t maxRecords) {
  const char *fn = "describe_privacy_unit";
  requireProgram(spec, fn);
  DPRT_REQUIRE(maxRecords >= 1 && spec->physicalBatch % maxRecords == 0, spec,
               fn,
               "max_records " << maxRecords << " must be >= 1 and divide the "
                              << "physical batch " << spec->physicalBatch);
  spec->recipe.userRecords = maxRecords;
}

void describe_input(ProgramSpec *spec, const char *name, InputRole role,
                    int64_t offset, int64_t dim0, int64_t dim1, int64_t dim2) {
  const char *fn = "describe_input";
  requireProgram(spec, fn);
  DPRT_REQUIRE(name && *name, spec, fn, "an input has no name");
  std::string what = std::string("input '") + name + "'";
  DPRT_REQUIRE(role == InputRole::Tokens || role == InputRole::NextTokens ||
                   role == InputRole::Features || role == InputRole::Label ||
                   role == InputRole::Target,
               spec, fn,
               what << " has unknown role " << static_cast<int>(role));
  for (const InputSpec &other : spec->inputs)
    DPRT_REQUIRE(other.role != role, spec, fn,
                 what << " has role " << nameOf(role) << " like input '"
                      << other.name << "'");
  std::vector<int64_t> dims = collectDims(spec, fn, what, {dim0, dim1, dim2});
  switch (role) {
  case InputRole::Tokens:
  case InputRole::NextTokens:
    DPRT_REQUIRE(dims.size() == 1 && dims[0] == spec->tokens, spec, fn,
                 what << " (" << nameOf(role) << ") must have one dimension "
                      << "of " << spec->tokens << " tokens");
    break;
  case InputRole::Label:
    DPRT_REQUIRE(dims.empty(), spec, fn,
                 what << " (label) holds one class per sample: no dimensions");
    break;
  case InputRole::Features:
  case InputRole::Target:
    DPRT_REQUIRE(dims.size() == 1, spec, fn,
                 what << " (" << nameOf(role)
                      << ") must have one dimension (the CSV columns)");
    break;
  }
  const bool integer = role == InputRole::Tokens ||
                       role == InputRole::NextTokens ||
                       role == InputRole::Label;
  int64_t elementBytes = integer ? 4 : sizeOf(spec->compute);
  requireBuffer(spec, fn, what, offset,
                spec->physicalBatch * product(dims) * elementBytes);
  spec->inputs.push_back(InputSpec{name, role, offset, std::move(dims)});
}

void describe_unit(ProgramSpec *spec, const char *name, int64_t numel,
                   int64_t shardElems, int64_t paramShard, int64_t masterShard,
                   int64_t gradShard, int64_t optState1, int64_t optState2,
                   bool sumsFromRows) {
  const char *fn = "describe_unit";
  requireProgram(spec, fn);
  DPRT_REQUIRE(name && *name, spec, fn, "a unit has no name");
  std::string what = std::string("unit '") + name + "'";
  DPRT_REQUIRE(numel >= 0 && shardElems >= 0, spec, fn,
               what << " has a negative size");
  const int64_t shards = spec->ranks / spec->replicas;
  DPRT_REQUIRE(numel <= shardElems * shards, spec, fn,
               what << " has " << numel << " elements but " << shards
                    << " shards of " << shardElems << " hold only "
                    << shardElems * shards);
  const int64_t accBytes = shardElems * sizeOf(accOf(spec->compute));
  // A trainable unit of one shard whose layers read its master cast where
  // the step gathers it keeps no compute-type copy (-1).
  const bool trainable = gradShard != -1 || sumsFromRows;
  DPRT_REQUIRE(paramShard != -1 || (trainable && shards == 1 &&
                                    spec->compute != accOf(spec->compute)),
               spec, fn,
               what << " has no parameter shard, which only a trainable "
                       "unit on one shard with a separate master may lack");
  if (paramShard != -1)
    requireBuffer(spec, fn, what + " parameter shard", paramShard,
                  shardElems * sizeOf(spec->compute));
  DPRT_REQUIRE(!sumsFromRows || (gradShard == -1 && spec->ranks == 1), spec, fn,
               what << " forms its sums from rows but has a gradient shard or "
                    << spec->ranks << " ranks");
  if (gradShard == -1 && !sumsFromRows) {
    // Frozen parameters: the compute-type shard is all there is.
    DPRT_REQUIRE(masterShard == paramShard && optState1 == -1 &&
                     optState2 == -1,
                 spec, fn,
                 what << " has no gradient shard (frozen) but a master copy "
                         "or optimizer state");
    spec->units.push_back(UnitSpec{name, numel, shardElems, paramShard,
                                   masterShard, gradShard, -1, -1});
    return;
  }
  requireBuffer(spec, fn, what + " master shard", masterShard, accBytes);
  if (!sumsFromRows)
    requireBuffer(spec, fn, what + " gradient shard", gradShard, accBytes);
  if (optState1 != -1)
    requireBuffer(spec, fn, what + " optimizer state 1", optState1, accBytes);
  if (optState2 != -1)
    requireBuffer(spec, fn, what + " optimizer state 2", optState2, accBytes);
  const OptimizerKind opt = spec->recipe.optimizer;
  DPRT_REQUIRE(opt == OptimizerKind::SGD || optState1 != -1, spec, fn,
               what << " has no optimizer state but the optimizer needs it");
  DPRT_REQUIRE(opt != OptimizerKind::AdamW || optState2 != -1, spec, fn,
               what << " has no second optimizer state but AdamW needs it");
  spec->units.push_back(UnitSpec{name, numel, shardElems, paramShard,
                                 masterShard, gradShard, optState1, optState2,
                                 sumsFromRows});
}

void requireSumsFromRows(const ProgramSpec &spec) {
  for (const ParamSpec &p : spec.params)
    DPRT_REQUIRE(!spec.units[size_t(p.unit)].sumsFromRows || !p.trainable ||
                     p.sumFromRows,
                 &spec, "dp_describe",
                 "parameter '" << p.name << "' of unit '"
                               << spec.units[size_t(p.unit)].name
                               << "', which has no gradient shard, is not "
                                  "named by describe_update_from_rows");
}

void describe_param(ProgramSpec *spec, const char *name, int32_t unit,
                    int64_t offsetInUnit, int64_t globalIndex, bool trainable,
                    int64_t dim0, int64_t dim1, int64_t dim2, int64_t dim3,
                    const char *hfName, bool hfTransposed, int64_t hfRowBegin,
                    int64_t hfRowEnd) {
  const char *fn = "describe_param";
  requireProgram(spec, fn);
  DPRT_REQUIRE(name && *name, spec, fn, "a parameter has no name");
  std::string what = std::string("parameter '") + name + "'";
  for (const ParamSpec &other : spec->params)
    DPRT_REQUIRE(other.name != name, spec, fn, what << " is described twice");
  DPRT_REQUIRE(unit >= 0 && unit < static_cast<int32_t>(spec->units.size()),
               spec, fn,
               what << " names unit " << unit << " but " << spec->units.size()
                    << " units were described");
  std::vector<int64_t> shape =
      collectDims(spec, fn, what, {dim0, dim1, dim2, dim3});
  DPRT_REQUIRE(!shape.empty(), spec, fn, what << " has no dimensions");
  const int64_t numel = product(shape);
  const UnitSpec &u = spec->units[unit];
  DPRT_REQUIRE(offsetInUnit >= 0 && offsetInUnit + numel <= u.numel, spec, fn,
               what << " at elements [" << offsetInUnit << ", "
                    << offsetInUnit + numel << ") lies outside unit '" << u.name
                    << "' of " << u.numel << " elements");
  DPRT_REQUIRE(globalIndex >= 0, spec, fn,
               what << " has a negative global index " << globalIndex);

  HfSource hf;
  hf.name = hfName ? hfName : "";
  hf.transposed = hfTransposed;
  hf.rowBegin = hfRowBegin;
  hf.rowEnd = hfRowEnd;
  if (!hf.present())
    DPRT_REQUIRE(!hfTransposed && hfRowBegin == -1 && hfRowEnd == -1, spec, fn,
                 what << " has a transposition or rows of a Hugging Face "
                         "tensor but no tensor name");
  if (hfTransposed)
    DPRT_REQUIRE(shape.size() == 2, spec, fn,
                 what << " is stored transposed but has " << shape.size()
                      << " dimensions (transposition needs 2)");
  if (hfRowBegin != -1 || hfRowEnd != -1)
    // The rows are the parameter's first dimension.
    DPRT_REQUIRE(hfRowBegin >= 0 && hfRowEnd - hfRowBegin == shape[0], spec, fn,
                 what << " is rows [" << hfRowBegin << ", " << hfRowEnd
                      << ") of '" << hf.name << "', which is not its "
                      << shape[0] << " rows");
  spec->params.push_back(ParamSpec{name, std::move(shape), unit, offsetInUnit,
                                   globalIndex, trainable, std::move(hf),
                                   LoRAPart{}});
}

/// The trainable parameter `param`, described last, of a program of one
/// rank: what describe_update_from_rows and describe_gradient_overwritten
/// mark (`what` says how, for the errors).
static ParamSpec &lastOneRankParam(ProgramSpec *spec, const char *fn,
                                   const char *param, const char *what) {
  requireProgram(spec, fn);
  DPRT_REQUIRE(!spec->params.empty() && param &&
                   spec->params.back().name == param,
               spec, fn,
               "parameter '" << (param ? param : "")
                             << "' is not the last one described");
  ParamSpec &p = spec->params.back();
  DPRT_REQUIRE(p.trainable && !p.sumFromRows && !p.gradOverwritten, spec, fn,
               "parameter '" << p.name
                             << "' is frozen or its gradient described twice");
  // One micro-step on one rank makes the whole gradient: nothing else may
  // add to it.
  DPRT_REQUIRE(spec->ranks == 1, spec, fn,
               "parameter '" << p.name << "' " << what << " on " << spec->ranks
                             << " ranks; only one rank can");
  return p;
}

void describe_update_from_rows(ProgramSpec *spec, const char *param) {
  lastOneRankParam(spec, "describe_update_from_rows", param,
                   "has its sum formed from rows")
      .sumFromRows = true;
}

void describe_gradient_overwritten(ProgramSpec *spec, const char *param) {
  lastOneRankParam(spec, "describe_gradient_overwritten", param,
                   "has its gradient overwritten by each micro-step")
      .gradOverwritten = true;
}

void describe_lora(ProgramSpec *spec, int64_t rank, double alpha,
                   const char *targets) {
  const char *fn = "describe_lora";
  requireProgram(spec, fn);
  DPRT_REQUIRE(!spec->lora.present(), spec, fn, "the LoRA is described twice");
  DPRT_REQUIRE(rank > 0 && alpha > 0 && std::isfinite(alpha), spec, fn,
               "rank " << rank << " and alpha " << alpha
                       << " must be positive");
  DPRT_REQUIRE(targets && *targets, spec, fn, "the LoRA has no targets");
  spec->lora.rank = rank;
  spec->lora.alpha = alpha;
  std::string all = targets;
  for (size_t begin = 0;;) {
    const size_t comma = all.find(',', begin);
    spec->lora.targets.push_back(all.substr(begin, comma - begin));
    if (comma == std::string::npos)
      break;
    begin = comma + 1;
  }
}

void describe_adapter(ProgramSpec *spec, const char *param, const char *base,
                      const char *role, const char *peftName) {
  const char *fn = "describe_adapter";
  requireProgram(spec, fn);
  DPRT_REQUIRE(spec->lora.present(), spec, fn,
               "an adapter is described before describe_lora");
  auto find = [&](const char *name) -> ParamSpec * {
    for (ParamSpec &p : spec->params)
      if (name && p.name == name)
        return &p;
    return nullptr;
  };
  ParamSpec *p = find(param);
  const ParamSpec *w = find(base);
  DPRT_REQUIRE(p && w && p != w, spec, fn,
               "adapter '" << (param ? param : "") << "' or its base weight '"
                           << (base ? base : "")
                           << "' is not a described parameter");
  DPRT_REQUIRE(p->lora.role == LoRARole::None && w->shape.size() == 2, spec, fn,
               "parameter '" << p->name << "' is described as an adapter twice "
                             << "or its base is not a matrix");
  const std::string r = role ? role : "";
  const int64_t rank = spec->lora.rank;
  const std::vector<int64_t> want =
      r == "A"   ? std::vector<int64_t>{rank, w->shape[1]}
      : r == "B" ? std::vector<int64_t>{w->shape[0], rank}
                 : std::vector<int64_t>{rank, rank};
  DPRT_REQUIRE(r == "A" || r == "B" || r == "scale", spec, fn,
               "adapter role '" << r << "' is not A, B or scale");
  DPRT_REQUIRE(p->shape == want, spec, fn,
               "adapter '" << p->name << "' (" << r
                           << ") does not have the shape rank " << rank
                           << " and its base '" << w->name << "' give");
  const std::string peft = peftName ? peftName : "";
  DPRT_REQUIRE(
      (r == "scale") == peft.empty(), spec, fn,
      "adapter '" << p->name << "' (" << r
                  << ") needs a peft name if and only if it is A or B");
  p->lora.role = r == "A"   ? LoRARole::A
                 : r == "B" ? LoRARole::B
                            : LoRARole::Scale;
  p->lora.base = w->name;
  p->lora.peftName = peft;
}

void describe_microstep(ProgramSpec *spec, int64_t rows, MicrostepFn run) {
  const char *fn = "describe_microstep";
  requireProgram(spec, fn);
  DPRT_REQUIRE(run, spec, fn, "the micro-step of " << rows << " rows is null");
  DPRT_REQUIRE(rows >= 1 && rows < spec->physicalBatch, spec, fn,
               "a micro-step of " << rows << " rows is not smaller than the "
                                  << "physical batch " << spec->physicalBatch);
  const int64_t unit = std::max<int64_t>(1, spec->recipe.userRecords);
  DPRT_REQUIRE(rows % unit == 0, spec, fn,
               "a micro-step of " << rows << " rows splits a user's " << unit
                                  << " slots");
  // A smaller micro-step would leave stale rows to the update.
  for (const ParamSpec &p : spec->params)
    DPRT_REQUIRE(!p.sumFromRows, spec, fn,
                 "a micro-step of " << rows << " rows, but dp_apply forms '"
                                    << p.name
                                    << "''s sum from a full micro-step's rows");
  DPRT_REQUIRE(spec->smallerMicrosteps.empty() ||
                   spec->smallerMicrosteps.back().rows < rows,
               spec, fn,
               "micro-step sizes must be described once each, smallest first; "
                   << rows << " rows come after "
                   << spec->smallerMicrosteps.back().rows);
  spec->smallerMicrosteps.push_back({rows, run});
}

} // namespace dprt
