//===- DPAttrs.td - Initializers and the DP training recipe --*- tablegen -*-===//

#ifndef DP_ATTRS_TD
#define DP_ATTRS_TD

include "DP/DPBase.td"

//===----------------------------------------------------------------------===//
// Parameter kinds shared by the attributes below
//===----------------------------------------------------------------------===//

// A float literal (integers accepted), printed in its shortest exact form.
// Stored as an IEEE double in an APFloat, which, unlike double, is hashable.
class DP_F64Param<string desc> : APFloatParameter<desc> {
  let parser = [{ ::dpc::dp::parseF64Field($_parser) }];
  let printer = [{ ::dpc::dp::printF64Field($_printer, $_self) }];
}
class DP_DefaultF64Param<string value, string desc> : DP_F64Param<desc> {
  let defaultValue = "::llvm::APFloat(" # value # ")";
}
class DP_DefaultI64Param<string value, string desc>
    : DefaultValuedParameter<"int64_t", value, desc>;
class DP_DefaultBoolParam<string value, string desc>
    : AttrParameter<"bool", desc> {
  let parser = [{ ::dpc::dp::parseBoolField($_parser) }];
  let printer = [{ $_printer << ($_self ? "true" : "false") }];
  let defaultValue = value;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def DP_ClipMode : I32EnumAttr<"ClipMode", "per-sample clipping mode", [
    I32EnumAttrCase<"flat", 0>,
    I32EnumAttrCase<"per_layer", 1>,
    I32EnumAttrCase<"automatic", 2>,
    I32EnumAttrCase<"none", 3>]> {
  let cppNamespace = "::dpc::dp";
}

def DP_UnitKind : I32EnumAttr<"UnitKind",
    "what one clipped gradient covers", [
    I32EnumAttrCase<"record", 0>,   // one record (sample)
    I32EnumAttrCase<"user", 1>]> {  // every record of one user in the step
  let cppNamespace = "::dpc::dp";
  let genSpecializedAttr = 0;
}

def DP_NoiseGenerator : I32EnumAttr<"NoiseGenerator",
    "counter-based generator of the Gaussian noise", [
    I32EnumAttrCase<"fast", 0>,     // Philox-4x32-10
    I32EnumAttrCase<"secure", 1>]> { // ChaCha20 block function
  let cppNamespace = "::dpc::dp";
  let genSpecializedAttr = 0;
}

def DP_Accountant : I32EnumAttr<"Accountant",
    "how the privacy loss of the steps is accounted", [
    I32EnumAttrCase<"pld", 0>,      // privacy loss distributions (tighter)
    I32EnumAttrCase<"rdp", 1>]> {   // Renyi DP
  let cppNamespace = "::dpc::dp";
  let genSpecializedAttr = 0;
}

def DP_LrDecay : I32EnumAttr<"LrDecay",
    "how the learning rate decays after its warmup", [
    I32EnumAttrCase<"constant", 0>,
    I32EnumAttrCase<"linear", 1>,
    I32EnumAttrCase<"cosine", 2>]> {
  let cppNamespace = "::dpc::dp";
  let genSpecializedAttr = 0;
}

def DP_ShardUnit : I32EnumAttr<"ShardUnit", "granularity of FSDP units", [
    I32EnumAttrCase<"block", 0>,
    I32EnumAttrCase<"layer", 1>]> {
  let cppNamespace = "::dpc::dp";
  let genSpecializedAttr = 0;
}

def DP_LossReduction : I32EnumAttr<"LossReduction",
    "how a sample's token losses combine into its loss", [
    I32EnumAttrCase<"mean", 0>,
    I32EnumAttrCase<"sum", 1>]> {
  let cppNamespace = "::dpc::dp";
}

def DP_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "which GELU formula", [
    I32EnumAttrCase<"erf", 0>,
    I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::dpc::dp";
}

//===----------------------------------------------------------------------===//
// Parameter initializers
//===----------------------------------------------------------------------===//

def DP_NormalInitAttr : DP_Attr<"NormalInit", "normal"> {
  let summary = "initialize from N(0, std^2)";
  let description = [{
    Example: `init = #dp.normal<0.02>`. Values are drawn from a counter-based
    generator keyed by (seed, parameter, element index), so they do not depend
    on how the parameter is sharded.
  }];
  let parameters = (ins DP_F64Param<"standard deviation">:$std);
  let assemblyFormat = "`<` $std `>`";
  let genVerifyDecl = 1;
}

def DP_UniformInitAttr : DP_Attr<"UniformInit", "uniform"> {
  let summary = "initialize from U(-bound, bound)";
  let description = [{ Example: `init = #dp.uniform<0.05>`. }];
  let parameters = (ins DP_F64Param<"half-width of the interval">:$bound);
  let assemblyFormat = "`<` $bound `>`";
  let genVerifyDecl = 1;
}

def DP_ZerosInitAttr : DP_Attr<"ZerosInit", "zeros"> {
  let summary = "initialize to 0";
}

def DP_OnesInitAttr : DP_Attr<"OnesInit", "ones"> {
  let summary = "initialize to 1 (norm scales)";
}

def DP_DiagonalInitAttr : DP_Attr<"DiagonalInit", "diagonal"> {
  let summary = "a square matrix with `value` on the diagonal, 0 elsewhere";
  let description = [{
    Example: `init = #dp.diagonal<2.0>` (the frozen scaling alpha / r that
    dp-lora puts between a LoRA adapter's A and B).
  }];
  let parameters = (ins DP_F64Param<"the diagonal's value">:$value);
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Rotary embedding
//===----------------------------------------------------------------------===//

def DP_RopeLlama3Attr : DP_Attr<"RopeLlama3", "rope_llama3"> {
  let summary = "Llama 3's scaling of the rotary frequencies";
  let description = [{
    Hugging Face's `rope_type = "llama3"`:
    `#dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0,
    high_freq_factor = 4.0, original_max_position_embeddings = 8192>`. With the
    wavelength w = 2 pi / f of an unscaled frequency f and L the original
    context, f is kept where w < L / high_freq_factor, divided by `factor`
    where w > L / low_freq_factor, and in between blended,
    (1 - s) f / factor + s f with s = (L / w - low_freq_factor) /
    (high_freq_factor - low_freq_factor).
  }];
  let parameters = (ins DP_F64Param<"frequency divisor">:$factor,
                        DP_F64Param<"below it, wavelengths are kept">:$low_freq_factor,
                        DP_F64Param<"above it, wavelengths are scaled">:$high_freq_factor,
                        AttrParameter<"int64_t", "original context length">:$original_max_position_embeddings);
  let assemblyFormat = "`<` struct($factor, $low_freq_factor, $high_freq_factor, $original_max_position_embeddings) `>`";
  let genVerifyDecl = 1;
}

// The scalings of the rotary frequencies dp.attention knows; each has a
// kernel that writes the table of inverse frequencies (linear and yarn would
// be further attributes and kernels).
def DP_RopeScalingAttr : AnyAttrOf<[DP_RopeLlama3Attr]>;

//===----------------------------------------------------------------------===//
// The recipe
//===----------------------------------------------------------------------===//

def DP_ClipAttr : DP_Attr<"Clip", "clip"> {
  let summary = "per-sample gradient clipping";
  let description = [{
    `#dp.clip<flat, max_norm = 1.0>` clips the whole per-sample gradient to
    norm C. `per_layer` clips each parameter's per-sample gradient to
    C / sqrt(#parameters), so the whole gradient still has norm at most C.
    `automatic` scales by C / (n + gamma) (Bu et al.), gamma = 0.01 unless
    given. `#dp.clip<none>` turns clipping off (DP off: no per-sample norm
    is computed and each sample's gradient enters the sum as it is, weighted
    by its mask only); it takes no bound and needs `noise = #dp.none`, since
    noise without a bound on each sample's contribution protects nothing.
  }];
  let parameters = (ins EnumParameter<DP_ClipMode>:$mode,
                        DP_DefaultF64Param<"0.0", "clipping bound C (none without clipping)">:$max_norm,
                        DP_DefaultF64Param<"0.01", "stability constant of automatic clipping">:$gamma);
  let assemblyFormat = "`<` $mode (`,` struct($max_norm, $gamma)^)? `>`";
  let genVerifyDecl = 1;
}

def DP_PrivacyUnitAttr : DP_Attr<"PrivacyUnit", "unit"> {
  let summary = "the privacy unit: one record or one user";
  let description = [{
    `#dp.unit<record>` (the default): one record is the privacy unit.
    `#dp.unit<user, max_records = k>`: one user is. Poisson sampling draws
    users; a sampled user contributes at most k of its records, chosen
    uniformly at random with the step's key, in k consecutive sample slots
    of one physical batch (unused slots are masked); the sum of its records'
    gradients is clipped as one unit to C. The physical batch must be a
    multiple of k (docs/privacy.md, "User-level DP").
  }];
  let parameters = (ins EnumParameter<DP_UnitKind>:$kind,
                        DP_DefaultI64Param<"1", "records a user contributes to a step, at most">:$max_records);
  let assemblyFormat = "`<` $kind (`,` struct($max_records)^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Records one clipped gradient covers at most (1 for records).
    int64_t recordsPerUnit() const {
      return getKind() == UnitKind::user ? getMaxRecords() : 1;
    }
  }];
}

def DP_NoiseAttr : DP_Attr<"Noise", "noise"> {
  let summary = "Gaussian noise with a given multiplier";
  let description = [{
    `#dp.noise<sigma = 1.1, delta = 1.0e-5>`: noise N(0, sigma^2 C^2) is
    added once to the sum of the clipped gradients. `delta` is the delta at
    which epsilon is reported. `generator = secure` draws the noise from a
    ChaCha20-based generator instead of Philox. `sigma = 0` turns noise off
    (no privacy; reported as such). `accountant = pld` (the default) or
    `rdp` says how epsilon is accounted (docs/privacy.md).
  }];
  let parameters = (ins DP_F64Param<"noise multiplier">:$sigma,
                        DP_F64Param<"delta of the reported epsilon">:$delta,
                        DefaultValuedParameter<"::dpc::dp::NoiseGenerator",
                          "::dpc::dp::NoiseGenerator::fast", "noise generator">:$generator,
                        DefaultValuedParameter<"::dpc::dp::Accountant",
                          "::dpc::dp::Accountant::pld", "privacy accountant">:$accountant);
  let assemblyFormat =
      "`<` struct($sigma, $delta, $generator, $accountant) `>`";
  // The accountant defaults to PLD, as in the assembly format.
  let builders = [
    AttrBuilder<(ins "::llvm::APFloat":$sigma, "::llvm::APFloat":$delta,
                     "::dpc::dp::NoiseGenerator":$generator), [{
      return $_get($_ctxt, sigma, delta, generator, ::dpc::dp::Accountant::pld);
    }]>
  ];
  let genVerifyDecl = 1;
}

def DP_NoNoiseAttr : DP_Attr<"NoNoise", "none"> {
  let summary = "no noise: training without differential privacy";
  let description = [{
    `noise = #dp.none`: the program adds no noise and keeps no privacy
    account. It goes only with `clip = #dp.clip<none>`: together they make
    the non-private baseline (same kernels, no per-sample norms); the
    training program reports that the run is not differentially private.
  }];
}

def DP_TargetAttr : DP_Attr<"Target", "target"> {
  let summary = "Gaussian noise calibrated to a privacy budget";
  let description = [{
    `#dp.target<epsilon = 8.0, delta = 1.0e-5, accountant = pld>`: the
    noise multiplier is the smallest one for which the accountant reports
    at most epsilon after the run's steps at its sampling rate. The
    accountant, `pld` (privacy loss distributions, the default: the
    tightest epsilon, so the least noise) or `rdp` (Renyi DP), also checks
    the budget and reports epsilon (docs/privacy.md).
  }];
  let parameters = (ins DP_F64Param<"target epsilon">:$epsilon,
                        DP_F64Param<"target delta">:$delta,
                        DefaultValuedParameter<"::dpc::dp::NoiseGenerator",
                          "::dpc::dp::NoiseGenerator::fast", "noise generator">:$generator,
                        DefaultValuedParameter<"::dpc::dp::Accountant",
                          "::dpc::dp::Accountant::pld", "privacy accountant">:$accountant);
  let assemblyFormat =
      "`<` struct($epsilon, $delta, $generator, $accountant) `>`";
  // The accountant defaults to PLD, as in the assembly format.
  let builders = [
    AttrBuilder<(ins "::llvm::APFloat":$epsilon, "::llvm::APFloat":$delta,
                     "::dpc::dp::NoiseGenerator":$generator), [{
      return $_get($_ctxt, epsilon, delta, generator, ::dpc::dp::Accountant::pld);
    }]>
  ];
  let genVerifyDecl = 1;
}

def DP_PoissonAttr : DP_Attr<"Poisson", "poisson"> {
  let summary = "Poisson sampling of the logical batch";
  let description = [{
    Each record joins a step's batch independently with probability q,
    given either as `rate = q` or as `expected_batch = q * N` (N is the
    dataset size, known when training starts). The batch is padded to
    multiples of `physical_batch` samples per rank and masked.
    Example: `#dp.poisson<expected_batch = 256, physical_batch = 32>`.
  }];
  let parameters = (ins DP_DefaultI64Param<"0", "expected logical batch">:$expected_batch,
                        DP_DefaultF64Param<"0.0", "sampling rate q">:$rate,
                        AttrParameter<"int64_t", "samples per rank and physical batch">:$physical_batch);
  let assemblyFormat = "`<` struct($expected_batch, $rate, $physical_batch) `>`";
  let genVerifyDecl = 1;
}

def DP_ShuffleAttr : DP_Attr<"Shuffle", "shuffle"> {
  let summary = "fixed-size batches from a shuffled partition";
  let description = [{
    `#dp.shuffle<batch = 256, physical_batch = 32>`: each epoch the data is
    shuffled and cut into batches of `batch` records. The accountant's bound
    assumes Poisson sampling; the report says so when this is used.
  }];
  let parameters = (ins AttrParameter<"int64_t", "logical batch">:$batch,
                        AttrParameter<"int64_t", "samples per rank and physical batch">:$physical_batch);
  let assemblyFormat = "`<` struct($batch, $physical_batch) `>`";
  let genVerifyDecl = 1;
}

def DP_SGDAttr : DP_Attr<"SGD", "sgd"> {
  let summary = "plain SGD";
  let parameters = (ins DP_F64Param<"learning rate">:$lr,
                        DP_DefaultF64Param<"0.0", "decoupled weight decay">:$weight_decay);
  let assemblyFormat = "`<` struct($lr, $weight_decay) `>`";
  let genVerifyDecl = 1;
}

def DP_MomentumAttr : DP_Attr<"Momentum", "momentum"> {
  let summary = "SGD with (Nesterov) momentum";
  let parameters = (ins DP_F64Param<"learning rate">:$lr,
                        DP_DefaultF64Param<"0.9", "momentum">:$momentum,
                        DP_DefaultBoolParam<"false", "Nesterov momentum">:$nesterov,
                        DP_DefaultF64Param<"0.0", "decoupled weight decay">:$weight_decay);
  let assemblyFormat = "`<` struct($lr, $momentum, $nesterov, $weight_decay) `>`";
  let genVerifyDecl = 1;
}

def DP_AdamWAttr : DP_Attr<"AdamW", "adamw"> {
  let summary = "AdamW (decoupled weight decay)";
  let parameters = (ins DP_F64Param<"learning rate">:$lr,
                        DP_DefaultF64Param<"0.9", "first-moment decay">:$beta1,
                        DP_DefaultF64Param<"0.999", "second-moment decay">:$beta2,
                        DP_DefaultF64Param<"1.0e-8", "denominator epsilon">:$eps,
                        DP_DefaultF64Param<"0.0", "decoupled weight decay">:$weight_decay);
  let assemblyFormat = "`<` struct($lr, $beta1, $beta2, $eps, $weight_decay) `>`";
  let genVerifyDecl = 1;
}

def DP_ScheduleAttr : DP_Attr<"Schedule", "schedule"> {
  let summary = "the learning-rate schedule";
  let description = [{
    `#dp.schedule<warmup = 100, decay = cosine, min_lr_ratio = 0.1>`: the
    optimizer's learning rate times a factor that rises linearly over the
    first `warmup` steps (step s <= warmup: s / warmup), then decays to
    `min_lr_ratio` at the run's last step: `cosine` (r + (1 - r)(1 +
    cos(pi p)) / 2 at progress p from 0 to 1), `linear` (r + (1 - r)(1 -
    p)) or `constant` (1, the default; `min_lr_ratio` must then stay 0).
    The training program's --warmup, --decay and --min-lr-ratio override
    it; docs/training-program.md gives the formula.
  }];
  let parameters = (ins
      DP_DefaultI64Param<"0", "warmup steps">:$warmup,
      DefaultValuedParameter<"::dpc::dp::LrDecay", "::dpc::dp::LrDecay::constant",
                             "decay after the warmup">:$decay,
      DP_DefaultF64Param<"0.0", "final learning rate over the peak one">:$min_lr_ratio);
  let assemblyFormat = "`<` struct($warmup, $decay, $min_lr_ratio) `>`";
  let genVerifyDecl = 1;
}

def DP_PrecisionAttr : DP_Attr<"Precision", "precision"> {
  let summary = "compute and master dtypes";
  let description = [{
    `#dp.precision<compute = bf16, master = f32>`: parameters are gathered
    and layers run in `compute`; the optimizer keeps `master` copies of the
    parameter shards; gradients are reduced in f32 (or f64 when master is
    f64). The float type written in the model must equal `compute`.
  }];
  let parameters = (ins "::mlir::Type":$compute, "::mlir::Type":$master);
  let assemblyFormat = "`<` struct($compute, $master) `>`";
  let genVerifyDecl = 1;
}

def DP_FSDPAttr : DP_Attr<"FSDP", "fsdp"> {
  let summary = "fully sharded data parallelism";
  let description = [{
    `#dp.fsdp<unit = block, reshard_after_forward = true, prefetch = 1>`.
    A unit's parameters live in one flat padded buffer split evenly over the
    ranks. With `unit = block`, parameters whose names share the prefix
    before the first `.` form one unit (`b0.wq`, `b0.wk` ... form `b0`) and
    the others form one root unit; `unit = layer` makes every parameter its
    own unit. A `dp.param` may name its unit explicitly with `unit = "..."`.
    `prefetch` is how many units ahead an all-gather is issued.
  }];
  let parameters = (ins
      DefaultValuedParameter<"::dpc::dp::ShardUnit", "::dpc::dp::ShardUnit::block", "unit granularity">:$unit,
      DP_DefaultBoolParam<"true", "free gathered parameters after forward">:$reshard_after_forward,
      DP_DefaultI64Param<"1", "all-gather prefetch depth">:$prefetch);
  let assemblyFormat = "(`<` struct($unit, $reshard_after_forward, $prefetch)^ `>`)?";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Adapters and frozen parameters
//===----------------------------------------------------------------------===//

def DP_LoRAAttr : DP_Attr<"LoRA", "lora"> {
  let summary = "low-rank adapters on targeted linear layers (LoRA)";
  let description = [{
    `#dp.lora<rank = 8, alpha = 16.0, targets = ["q_proj", "v_proj"]>`:
    dp-lora rewrites every `dp.linear` whose weight's module matches a
    target into y = x W^T (+ b) + (alpha / rank) (x A^T) B^T, as peft's
    LoRA does, with A `rank x in` drawn from U(-1/sqrt(in), 1/sqrt(in))
    (peft's kaiming-uniform with a = sqrt(5)) and B `out x rank` zero. A
    target names a module: the Hugging Face module of the weight (its
    `hf.name` without `.weight`, e.g. `model.layers.0.self_attn.q_proj`),
    or the parameter's name without `hf.name`; it matches the whole name
    or a suffix after a `.`, and may hold `*` and `?` wildcards. Only the
    adapters train unless the recipe's `train` names more parameters.
  }];
  let parameters = (ins AttrParameter<"int64_t", "rank r of the adapters">:$rank,
                        DP_F64Param<"lora_alpha: the adapters are scaled by alpha / r">:$alpha,
                        "::mlir::ArrayAttr":$targets);
  let assemblyFormat = "`<` struct($rank, $alpha, $targets) `>`";
  let genVerifyDecl = 1;
}

#endif // DP_ATTRS_TD
