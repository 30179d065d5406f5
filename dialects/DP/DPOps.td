//===- DPOps.td - Models, layers and recipes -----------------*- tablegen -*-===//

#ifndef DP_OPS_TD
#define DP_OPS_TD

include "DP/DPBase.td"
include "DP/DPAttrs.td"
include "DP/DPInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/Interfaces/InferTypeOpInterface.td"


//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def DP_ModelOp : DP_Op<"model", [
    Symbol, SymbolTable, IsolatedFromAbove, SingleBlock, NoTerminator,
    NoRegionArguments]> {
  let summary = "a model: its parameters and its forward pass";
  let description = [{
    Holds `dp.param` ops and exactly one `dp.forward`. Every parameter must be
    read by exactly one layer of the forward pass, with one exception: a
    token embedding table may also be the weight of one `dp.linear` (tied
    input and output embeddings, Hugging Face's `tie_word_embeddings`), whose
    per-sample norm dp-clip-plan forms with the cross term of the two uses.

    ```mlir
    dp.model @mlp attributes {classes = 10} {
      dp.param @fc1 : tensor<64x16xf32> {init = #dp.normal<0.1>}
      dp.forward(%x: tensor<?x16xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
        ...
      }
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The forward pass (one in a verified model).
    ::dpc::dp::ForwardOp getForward();
  }];
}

def DP_ParamOp : DP_Op<"param", [Symbol, HasParent<"ModelOp">]> {
  let summary = "a model parameter";
  let description = [{
    ```mlir
    dp.param @b0.wq : tensor<128x128xbf16> {init = #dp.normal<0.02>}
    dp.param @pos : tensor<128x64xf32> {trainable = false}
    ```
    Without `init`, a normalization scale starts at ones, a bias at zeros and
    every other parameter from N(0, 0.02^2). A parameter with
    `trainable = false` is neither clipped nor updated. `unit = "name"` puts
    the parameter into a named FSDP unit instead of the default one.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       OptionalAttr<AnyAttr>:$init,
                       DefaultValuedAttr<BoolAttr, "true">:$trainable,
                       OptionalAttr<StrAttr>:$unit);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    int64_t getNumElements() { return getTensorType().getNumElements(); }
  }];
}

def DP_ForwardOp : DP_Op<"forward", [
    HasParent<"ModelOp">, IsolatedFromAbove, SingleBlock]> {
  let summary = "the forward pass: a physical batch to one loss per sample";
  let description = [{
    ```mlir
    dp.forward(%tok: tensor<?x128xi32>, %tgt: tensor<?x128xi32>) -> tensor<?xf32> {
      ...
      dp.return %loss : tensor<?xf32>
    }
    ```
    The leading dimension of every input, activation and of the result is
    the sample dimension; it is `?` or the physical batch of the recipe. The
    result is the loss of each sample.
  }];
  let arguments = (ins TypeAttrOf<FunctionType>:$function_type);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::Block::BlockArgListType getInputs() {
      return getBodyBlock().getArguments();
    }
  }];
}

def DP_ReturnOp : DP_Op<"return", [Pure, Terminator, ReturnLike,
                                   HasParent<"ForwardOp">]> {
  let summary = "returns the per-sample loss from dp.forward";
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
}

//===----------------------------------------------------------------------===//
// Layers with parameters
//===----------------------------------------------------------------------===//

class DP_LayerOp<string mnemonic, list<Trait> traits = []>
    : DP_Op<mnemonic, !listconcat(traits, [
        Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<DP_ParamUserOpInterface>])>;

def DP_EmbeddingOp : DP_LayerOp<"embedding"> {
  let summary = "token embedding lookup";
  let description = [{
    `%x = dp.embedding @emb(%tok) : tensor<?x128xi32> -> tensor<?x128x64xf32>`
    reads rows of the table `@emb : tensor<VxD>`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$table, DP_TokenTensor:$tokens);
  let results = (outs DP_Activation:$output);
  let assemblyFormat =
      "$table `(` $tokens `)` attr-dict `:` type($tokens) `->` type($output)";
}

def DP_LinearOp : DP_LayerOp<"linear", [
    OptionalTypesMatchWith<"the addend has the output's type", "output",
                           "addend", "$_self">]> {
  let summary = "affine map y = x W^T (+ b) (+ r) on the last dimension";
  let description = [{
    ```mlir
    %q = dp.linear @b0.wq(%h) : tensor<?x128x64xf32> -> tensor<?x128x64xf32>
    %y = dp.linear @fc, @fc.b(%h) : tensor<?x64xf32> -> tensor<?x10xf32>
    %s = dp.linear @b0.wo(%a) plus %x : tensor<?x128x64xf32> -> tensor<?x128x64xf32>
    ```
    The weight has shape `out x in` and the optional bias `out`. On a
    rank-2 input every sample is one row (T = 1); on a rank-3 input a sample
    is a sequence of T rows. The optional addend `r` (the output's type) is
    added before the result is rounded to its type: a residual connection
    `dp.add(dp.linear(x), r)` in one product (dp-fuse-residual), without the
    projection's own result ever being stored.
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight,
                       OptionalAttr<FlatSymbolRefAttr>:$bias,
                       DP_Activation:$input,
                       Optional<DP_Activation>:$addend);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = [{
    $weight (`,` $bias^)? `(` $input `)` (`plus` $addend^)? attr-dict `:`
    type($input) `->` type($output)
  }];
  let hasVerifier = 1;
}

def DP_RMSNormOp : DP_LayerOp<"rms_norm", [AllTypesMatch<["input", "output"]>]> {
  let summary = "RMS normalization with a learned scale";
  let description = [{
    y = x / sqrt(mean(x^2) + eps) * g over the last dimension.
    `%h = dp.rms_norm @b0.n1(%x) {eps = 1.0e-5} : tensor<?x128x64xf32>`
  }];
  let arguments = (ins FlatSymbolRefAttr:$scale, DP_Activation:$input,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$scale `(` $input `)` attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DP_LayerNormOp : DP_LayerOp<"layer_norm", [AllTypesMatch<["input", "output"]>]> {
  let summary = "layer normalization with a learned scale and optional bias";
  let description = [{
    y = (x - mean(x)) / sqrt(var(x) + eps) * g + b over the last dimension.
    `%h = dp.layer_norm @ln.g, @ln.b(%x) : tensor<?x128x64xf32>`
  }];
  let arguments = (ins FlatSymbolRefAttr:$scale,
                       OptionalAttr<FlatSymbolRefAttr>:$bias,
                       DP_Activation:$input,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs DP_Activation:$output);
  let assemblyFormat =
      "$scale (`,` $bias^)? `(` $input `)` attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def DP_PositionEmbeddingOp : DP_LayerOp<"position_embedding",
    [AllTypesMatch<["input", "output"]>]> {
  let summary = "adds a learned embedding of each token's position";
  let description = [{
    `%y = dp.position_embedding @pos(%x) : tensor<?x128x64xf32>` computes
    y[b, t] = x[b, t] + P[t] with the table `@pos : tensor<NxD>` of N >= T
    learned positions (GPT-2's wpe); positions count from 0 in every sample.
    Rows t >= T of the table are not read and get no gradient.
  }];
  let arguments = (ins FlatSymbolRefAttr:$table, DP_Activation:$input);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$table `(` $input `)` attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Layers without parameters
//===----------------------------------------------------------------------===//

def DP_AttentionOp : DP_Op<"attention", [Pure,
    AllTypesMatch<["query", "output"]>, AllTypesMatch<["key", "value"]>]> {
  let summary = "multi-head scaled dot-product attention";
  let description = [{
    ```mlir
    %a = dp.attention %q, %k, %v {causal, heads = 4, kv_heads = 2, rope}
        : tensor<?x128x64xf32>, tensor<?x128x32xf32>
    ```
    Query rows hold `heads` heads of size d/heads; keys and values hold
    `kv_heads` heads of the same size (grouped-query attention: each group of
    heads/kv_heads query heads shares one key/value head). With `rope`, query
    and key are rotated by position (rotate-half convention, base
    `rope_theta`) before the dot product: pair (i, i + d_head/2) of token t
    turns by t f_i with f_i = rope_theta^(-2i/d_head). `rope_scaling`
    changes the frequencies f_i (`#dp.rope_llama3<...>`: Llama 3's scaling).
    Attention never mixes samples.
  }];
  let arguments = (ins DP_Activation:$query, DP_Activation:$key,
                       DP_Activation:$value,
                       ConfinedAttr<I64Attr, [IntPositive]>:$heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$kv_heads,
                       UnitAttr:$causal, UnitAttr:$rope,
                       DefaultValuedAttr<F64Attr, "10000.0">:$rope_theta,
                       OptionalAttr<DP_RopeScalingAttr>:$rope_scaling);
  let results = (outs DP_Activation:$output);
  let assemblyFormat =
      "$query `,` $key `,` $value attr-dict `:` type($query) `,` type($key)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumHeads() { return getHeads(); }
    int64_t getNumKVHeads() { return getKvHeads().value_or(getHeads()); }
    int64_t getHeadDim() {
      return getQuery().getType().getShape().back() / getHeads();
    }
  }];
}

class DP_UnaryOp<string mnemonic, list<Trait> traits = []>
    : DP_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType])> {
  let arguments = (ins DP_Activation:$input);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def DP_ReluOp : DP_UnaryOp<"relu"> {
  let summary = "max(x, 0)";
}

def DP_SiluOp : DP_UnaryOp<"silu"> {
  let summary = "x * sigmoid(x)";
}

def DP_GeluOp : DP_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `dp.gelu %x : T` uses the exact erf form; `dp.gelu %x tanh : T` the tanh
    approximation of GPT-2.
  }];
  let arguments = (ins DP_Activation:$input,
                       DefaultValuedAttr<DP_GeluApproximation,
                         "::dpc::dp::GeluApproximation::erf">:$approximation);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$input ($approximation^)? attr-dict `:` type($input)";
}

class DP_BinaryOp<string mnemonic, list<Trait> traits = []>
    : DP_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                            Commutative])> {
  let arguments = (ins DP_Activation:$lhs, DP_Activation:$rhs);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($output)";
}

def DP_AddOp : DP_BinaryOp<"add"> {
  let summary = "elementwise sum (residual connections)";
}

def DP_MulOp : DP_BinaryOp<"mul"> {
  let summary = "elementwise product (gated MLPs)";
}

//===----------------------------------------------------------------------===//
// Per-sample losses
//===----------------------------------------------------------------------===//

def DP_CrossEntropyOp : DP_Op<"cross_entropy", [Pure]> {
  let summary = "softmax cross-entropy, one loss per sample";
  let description = [{
    ```mlir
    %l = dp.cross_entropy %logits, %tgt per_sample = mean ignore_index = -1
        : tensor<?x128x256xf32>, tensor<?x128xi32> -> tensor<?xf32>
    ```
    Logits `B x T x V` with targets `B x T`, or `B x V` with targets `B`.
    A sample's loss is the mean (or sum) of its token losses; tokens whose
    target is `ignore_index` do not count, in the numerator nor in the
    denominator of the mean. A sample with no counted token has loss 0.
  }];
  let arguments = (ins DP_Activation:$logits, DP_TokenTensor:$targets,
                       DefaultValuedAttr<DP_LossReduction,
                         "::dpc::dp::LossReduction::mean">:$per_sample,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs DP_PerSampleLoss:$loss);
  let assemblyFormat = [{
    $logits `,` $targets (`per_sample` `=` $per_sample^)?
    (`ignore_index` `=` $ignore_index^)? attr-dict
    `:` type($logits) `,` type($targets) `->` type($loss)
  }];
  let hasVerifier = 1;
}

def DP_MSEOp : DP_Op<"mse", [Pure, AllTypesMatch<["prediction", "target"]>]> {
  let summary = "squared error, one loss per sample";
  let description = [{
    `%l = dp.mse %pred, %y : tensor<?x3xf32> -> tensor<?xf32>`: a sample's
    loss is the mean (or sum) of its squared errors.
  }];
  let arguments = (ins DP_Activation:$prediction, DP_Activation:$target,
                       DefaultValuedAttr<DP_LossReduction,
                         "::dpc::dp::LossReduction::mean">:$per_sample);
  let results = (outs DP_PerSampleLoss:$loss);
  let assemblyFormat = [{
    $prediction `,` $target (`per_sample` `=` $per_sample^)? attr-dict
    `:` type($prediction) `->` type($loss)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The training recipe
//===----------------------------------------------------------------------===//

def DP_RecipeOp : DP_Op<"recipe", [Symbol,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "how to train a model with DP-SGD";
  let description = [{
    ```mlir
    dp.recipe @train for @tinylm {
      clip = #dp.clip<flat, max_norm = 1.0>,
      noise = #dp.target<epsilon = 8.0, delta = 1.0e-5>,
      sampling = #dp.poisson<expected_batch = 256, physical_batch = 32>,
      optimizer = #dp.adamw<lr = 1.0e-3, weight_decay = 0.0>,
      schedule = #dp.schedule<warmup = 100, decay = cosine, min_lr_ratio = 0.1>,
      steps = 2000,
      precision = #dp.precision<compute = bf16, master = f32>,
      shard = #dp.fsdp<unit = block>, grid = @ranks, seed = 0
    }
    ```
    `schedule` defaults to a constant learning rate, `precision` to the
    model's float type for both compute and master, `shard` to `#dp.fsdp`,
    `grid` to a single rank. Fields that are not listed here are rejected.
    The clipping bound, the sampling rate or expected batch, the noise, the
    learning rate, the weight decay, the schedule, the steps, the seed and
    the accountant are the training program's defaults: its command line
    overrides them without recompiling (docs/training-program.md).

    Which parameters train (dp-freeze): `train = ["*.lora_*", "b0.*"]`
    trains only the parameters whose names match one of the glob patterns
    (`*`, `?`, `[...]`), `freeze = ["emb", "*.n1"]` trains all but those;
    a recipe gives at most one of the two. `lora = #dp.lora<...>` adds
    low-rank adapters (dp-lora) and freezes every other parameter unless
    `train` names it. A frozen parameter has no gradient, no per-sample
    norm, no optimizer state and no noise, and is stored only in the
    compute type.

    `unit = #dp.unit<user, max_records = k>` makes one user the privacy
    unit (user-level DP, docs/privacy.md); the default is one record.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$model,
                       DP_ClipAttr:$clip,
                       AnyAttrOf<[DP_NoiseAttr, DP_TargetAttr, DP_NoNoiseAttr]>:$noise,
                       AnyAttrOf<[DP_PoissonAttr, DP_ShuffleAttr]>:$sampling,
                       AnyAttrOf<[DP_SGDAttr, DP_MomentumAttr, DP_AdamWAttr]>:$optimizer,
                       ConfinedAttr<I64Attr, [IntPositive]>:$steps,
                       OptionalAttr<DP_PrecisionAttr>:$precision,
                       OptionalAttr<DP_FSDPAttr>:$shard,
                       OptionalAttr<FlatSymbolRefAttr>:$grid,
                       DefaultValuedAttr<I64Attr, "0">:$seed,
                       OptionalAttr<StrArrayAttr>:$train,
                       OptionalAttr<StrArrayAttr>:$freeze,
                       OptionalAttr<DP_LoRAAttr>:$lora,
                       // Last, so that builders may leave them out; the
                       // schedule is printed after the optimizer, the unit
                       // after the sampling.
                       OptionalAttr<DP_ScheduleAttr>:$schedule,
                       OptionalAttr<DP_PrivacyUnitAttr>:$unit);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The physical batch per rank from the sampling attribute.
    int64_t getPhysicalBatch();
    /// Records one clipped gradient covers at most: k of
    /// `unit = #dp.unit<user, max_records = k>`, else 1.
    int64_t getRecordsPerUnit();
  }];
}

include "DP/DPStepOps.td"

#endif // DP_OPS_TD
