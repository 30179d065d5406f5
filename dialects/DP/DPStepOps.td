//===- DPStepOps.td - The training step: gradients, norms, clipping, FSDP -===//
//
// Ops that the passes create: the differentiated step (dp-backward), the
// per-sample norms and clip factors (dp-clip-plan), and the FSDP units and
// collectives (dp-shard). Users do not write them, but they print and parse
// like the rest so that every pass can be tested on its own.
//
//===----------------------------------------------------------------------===//

#ifndef DP_STEP_OPS_TD
#define DP_STEP_OPS_TD

// Included at the end of DPOps.td.

def DP_AccTensor : RankedTensorOf<[F32, F64]>;
def DP_PerSample : 1DTensorOf<[F32, F64]>;

def DP_ActivationKind : I32EnumAttr<"ActivationKind", "elementwise activation", [
    I32EnumAttrCase<"relu", 0>, I32EnumAttrCase<"silu", 1>,
    I32EnumAttrCase<"gelu_erf", 2>, I32EnumAttrCase<"gelu_tanh", 3>]> {
  let cppNamespace = "::dpc::dp";
}

def DP_NormMethod : I32EnumAttr<"NormMethod", "per-sample norm method", [
    I32EnumAttrCase<"rank1", 0>, I32EnumAttrCase<"gram", 1>,
    I32EnumAttrCase<"direct", 2>, I32EnumAttrCase<"bias", 3>,
    I32EnumAttrCase<"embedding", 4>, I32EnumAttrCase<"rows", 5>,
    I32EnumAttrCase<"materialized", 6>]> {
  let cppNamespace = "::dpc::dp";
}

def DP_GatherPhase : I32EnumAttr<"GatherPhase", "when a unit is gathered", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>]> {
  let cppNamespace = "::dpc::dp";
}

// Writes into the gradient of a parameter: weight-gradient ops are not pure,
// so no pass deletes or duplicates them, but they may move.
def DP_GradientResource : Resource<"::dpc::dp::GradientResource">;

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

def DP_StepOp : DP_Op<"step", [HasParent<"ModelOp">, IsolatedFromAbove,
                               SingleBlock]> {
  let summary = "one physical batch of training: forward, backward, gradients";
  let description = [{
    Created by `dp-backward` from the model's `dp.forward`, with the batch
    dimension fixed to the recipe's physical batch. Its inputs are those of
    the forward pass followed by the mask (1 for a real sample, 0 for
    padding), which is also the gradient of the summed loss with respect to
    each sample's loss. It returns the per-sample loss. Weight-gradient ops
    in its body add to the parameters' gradients.
  }];
  let arguments = (ins TypeAttrOf<FunctionType>:$function_type);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    /// The mask: the last input.
    ::mlir::BlockArgument getMask() {
      return getBodyBlock().getArguments().back();
    }
  }];
}

def DP_YieldOp : DP_Op<"yield", [Pure, Terminator, ReturnLike,
                                 HasParent<"StepOp">]> {
  let summary = "returns the per-sample loss from dp.step";
  let arguments = (ins Variadic<AnyType>:$operands);
  let assemblyFormat = "attr-dict ($operands^ `:` type($operands))?";
}

//===----------------------------------------------------------------------===//
// Input gradients
//===----------------------------------------------------------------------===//

def DP_CrossEntropyGradOp : DP_Op<"cross_entropy_grad", [Pure,
    AllTypesMatch<["logits", "dlogits"]>, AllTypesMatch<["loss", "dloss"]>]> {
  let summary = "gradient of the per-sample cross-entropy";
  let description = [{
    `%g = dp.cross_entropy_grad %logits, %tgt, %loss, %dloss` where `%loss` is
    the result of the `dp.cross_entropy` being differentiated (its saved
    statistics are reused) and `%dloss` the gradient of each sample's loss.
  }];
  let arguments = (ins DP_Activation:$logits, DP_TokenTensor:$targets,
                       DP_PerSample:$loss, DP_PerSample:$dloss);
  let results = (outs DP_Activation:$dlogits);
  let assemblyFormat = [{
    $logits `,` $targets `,` $loss `,` $dloss attr-dict `:` type($logits) `,` type($targets) `,` type($loss)
  }];
  let extraClassDeclaration = [{
    /// The dp.cross_entropy being differentiated.
    ::dpc::dp::CrossEntropyOp getForwardOp();
  }];
  let hasVerifier = 1;
}

def DP_MSEGradOp : DP_Op<"mse_grad", [Pure,
    AllTypesMatch<["prediction", "target", "dprediction"]>]> {
  let summary = "gradient of the per-sample squared error";
  let arguments = (ins DP_Activation:$prediction, DP_Activation:$target,
                       DP_PerSample:$dloss,
                       DefaultValuedAttr<DP_LossReduction,
                         "::dpc::dp::LossReduction::mean">:$per_sample);
  let results = (outs DP_Activation:$dprediction);
  let assemblyFormat = [{
    $prediction `,` $target `,` $dloss (`per_sample` `=` $per_sample^)? attr-dict `:` type($prediction) `,` type($dloss)
  }];
}

def DP_LinearGradInputOp : DP_Op<"linear_grad_input", [Pure,
    DeclareOpInterfaceMethods<DP_ParamUserOpInterface>]> {
  let summary = "dx (+)= dy W";
  let description = [{
    `%dx = dp.linear_grad_input @w(%dy) : T -> U`; with `acc(%partial)` the
    result is `%partial + dy W` (gradients of a value read by several layers
    add up).
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight, DP_Activation:$dy,
                       Optional<DP_Activation>:$acc);
  let results = (outs DP_Activation:$dx);
  let assemblyFormat = [{
    $weight `(` $dy `)` (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($dy) `->` type($dx)
  }];
}

def DP_RMSNormGradOp : DP_Op<"rms_norm_grad", [Pure,
    DeclareOpInterfaceMethods<DP_ParamUserOpInterface>,
    AllTypesMatch<["x", "y", "dy", "dx"]>]> {
  let summary = "input gradient and per-sample scale gradients of RMSNorm";
  let description = [{
    `%dx, %gs = dp.rms_norm_grad @g(%x, %y, %dy) : T, tensor<BxDxf32>`: `%y`
    is the normalization's result (its statistics are reused); `%gs[b]` is
    sample b's gradient of the scale, sum over its tokens of dy * xhat.
    With a third result, `%dx, %gs, %r = ... : T, tensor<BxDxf32>, T`, the
    same pass over x also makes the normalization's result again, the bits
    of `%y`: dp-rematerialize's clone of the RMSNorm, folded into its
    derivative (the clone's readers, weight gradients, then come after it).
  }];
  let arguments = (ins FlatSymbolRefAttr:$scale, DP_Activation:$x,
                       DP_Activation:$y, DP_Activation:$dy,
                       Optional<DP_Activation>:$acc);
  let results = (outs DP_Activation:$dx, DP_AccTensor:$scale_grads,
                      Optional<DP_Activation>:$recomputed);
  let assemblyFormat = [{
    $scale `(` $x `,` $y `,` $dy `)` (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($x) `,` type($scale_grads) (`,` type($recomputed)^)?
  }];
}

def DP_LayerNormGradOp : DP_Op<"layer_norm_grad", [Pure,
    DeclareOpInterfaceMethods<DP_ParamUserOpInterface>,
    AllTypesMatch<["x", "y", "dy", "dx"]>]> {
  let summary = "input gradient and per-sample scale/bias gradients of LayerNorm";
  let arguments = (ins FlatSymbolRefAttr:$scale,
                       OptionalAttr<FlatSymbolRefAttr>:$bias,
                       DP_Activation:$x, DP_Activation:$y, DP_Activation:$dy,
                       Optional<DP_Activation>:$acc);
  let results = (outs DP_Activation:$dx, DP_AccTensor:$scale_grads,
                      Optional<DP_AccTensor>:$bias_grads);
  let assemblyFormat = [{
    $scale (`,` $bias^)? `(` $x `,` $y `,` $dy `)` (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($x) `,` type($scale_grads) (`,` type($bias_grads)^)?
  }];
}

def DP_AttentionGradOp : DP_Op<"attention_grad", [Pure,
    AllTypesMatch<["query", "output", "doutput", "dquery"]>,
    AllTypesMatch<["key", "value", "dkey", "dvalue"]>]> {
  let summary = "gradients of attention with respect to query, key and value";
  let description = [{
    `%dq, %dk, %dv = dp.attention_grad %q, %k, %v, %o, %do {...}` with the
    attributes of the `dp.attention` that produced `%o` (whose statistics
    are reused).
  }];
  let arguments = (ins DP_Activation:$query, DP_Activation:$key,
                       DP_Activation:$value, DP_Activation:$output,
                       DP_Activation:$doutput);
  let results = (outs DP_Activation:$dquery, DP_Activation:$dkey,
                      DP_Activation:$dvalue);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $doutput attr-dict `:` type($query) `,` type($key)
  }];
  let extraClassDeclaration = [{
    /// The dp.attention being differentiated.
    ::dpc::dp::AttentionOp getForwardOp();
  }];
  let hasVerifier = 1;
}

def DP_ActivationGradOp : DP_Op<"activation_grad", [Pure,
    AllTypesMatch<["x", "dy", "dx"]>]> {
  let summary = "dx (+)= dy * f'(x)";
  let arguments = (ins DP_Activation:$x, DP_Activation:$dy,
                       Optional<DP_Activation>:$acc, DP_ActivationKind:$kind);
  let results = (outs DP_Activation:$dx);
  let assemblyFormat = [{
    $kind $x `,` $dy (`acc` `(` $acc^ `:` type($acc) `)`)? attr-dict `:` type($x)
  }];
}

def DP_GluOp : DP_Op<"glu", [Pure,
    AllTypesMatch<["gate", "up", "output"]>]> {
  let summary = "act(gate) * up: the gated unit of a SwiGLU or GeGLU MLP";
  let description = [{
    `%p = dp.glu silu %g, %u : T` is `dp.mul (dp.silu %g), %u` without
    storing `silu(%g)`; dp-fuse-glu makes it in `dp.step`, with its
    derivative `dp.glu_grad`.
  }];
  let arguments = (ins DP_Activation:$gate, DP_Activation:$up,
                       DP_ActivationKind:$kind);
  let results = (outs DP_Activation:$output);
  let assemblyFormat = "$kind $gate `,` $up attr-dict `:` type($gate)";
}

def DP_GluGradOp : DP_Op<"glu_grad", [Pure,
    AllTypesMatch<["gate", "up", "dy", "dgate", "dup"]>]> {
  let summary = "dgate = dy * up * act'(gate), dup = dy * act(gate)";
  let arguments = (ins DP_Activation:$gate, DP_Activation:$up,
                       DP_Activation:$dy, DP_ActivationKind:$kind);
  let results = (outs DP_Activation:$dgate, DP_Activation:$dup);
  let assemblyFormat = [{
    $kind $gate `,` $up `,` $dy attr-dict `:` type($gate)
  }];
}

def DP_GluGradRematOp : DP_Op<"glu_grad_remat", [Pure,
    AllTypesMatch<["gate", "up", "dy", "dgate", "dup", "output"]>]> {
  let summary = "dp.glu_grad that also recomputes the dp.glu output";
  let description = [{
    `%dg, %du, %p = dp.glu_grad_remat silu %g, %u, %dy : T` is
    `dp.glu_grad silu %g, %u, %dy` with `%p = dp.glu silu %g, %u` from the
    same pass over `%g` and `%u`: dp-rematerialize makes it where the
    rematerialized GLU output is read only after its gradient (by the down
    projection's weight gradient), instead of a `dp.glu` clone before the
    backward and a `dp.glu_grad`. `%p` holds the bits `dp.glu` computes.
  }];
  let arguments = (ins DP_Activation:$gate, DP_Activation:$up,
                       DP_Activation:$dy, DP_ActivationKind:$kind);
  let results = (outs DP_Activation:$dgate, DP_Activation:$dup,
                      DP_Activation:$output);
  let assemblyFormat = [{
    $kind $gate `,` $up `,` $dy attr-dict `:` type($gate)
  }];
}

def DP_MulGradOp : DP_Op<"mul_grad", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["lhs", "rhs", "dy", "dlhs", "drhs"]>]> {
  let summary = "gradients of an elementwise product";
  let arguments = (ins DP_Activation:$lhs, DP_Activation:$rhs,
                       DP_Activation:$dy, Optional<DP_Activation>:$lhs_acc,
                       Optional<DP_Activation>:$rhs_acc);
  let results = (outs DP_Activation:$dlhs, DP_Activation:$drhs);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $dy (`lhs_acc` `(` $lhs_acc^ `:` type($lhs_acc) `)`)? (`rhs_acc` `(` $rhs_acc^ `:` type($rhs_acc) `)`)? attr-dict `:` type($lhs)
  }];
}

//===----------------------------------------------------------------------===//
// Weight gradients
//===----------------------------------------------------------------------===//

class DP_WeightGradOp<string mnemonic, list<Trait> traits = []>
    : DP_Op<mnemonic, !listconcat(traits, [
        MemoryEffects<[MemWrite<DP_GradientResource>]>,
        DeclareOpInterfaceMethods<DP_ParamUserOpInterface>])>;

def DP_LinearGradWeightOp : DP_WeightGradOp<"linear_grad_weight"> {
  let summary = "adds sum_b c_b dy_b^T x_b to the gradient of a weight";
  let description = [{
    `dp.linear_grad_weight @w(%x, %dy)` adds the batch's gradient of `@w`;
    with `scale(%c)` each sample's contribution is multiplied by its clip
    factor c_b first: the clipped sum is computed once, and the unclipped
    per-sample gradients are never formed (book-keeping).
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight, DP_Activation:$x,
                       DP_Activation:$dy, Optional<DP_PerSample>:$scale);
  let assemblyFormat = [{
    $weight `(` $x `,` $dy `)` (`scale` `(` $scale^ `)`)? attr-dict `:` type($x) `,` type($dy) (`,` type($scale)^)?
  }];
}

def DP_BiasGradOp : DP_WeightGradOp<"bias_grad"> {
  let summary = "adds sum_b c_b sum_t dy_bt to the gradient of a bias";
  let arguments = (ins FlatSymbolRefAttr:$bias, DP_Activation:$dy,
                       Optional<DP_PerSample>:$scale);
  let assemblyFormat = [{
    $bias `(` $dy `)` (`scale` `(` $scale^ `)`)? attr-dict `:` type($dy) (`,` type($scale)^)?
  }];
}

def DP_EmbeddingGradOp : DP_WeightGradOp<"embedding_grad"> {
  let summary = "adds the (clipped) rows of dy to the rows of a table";
  let arguments = (ins FlatSymbolRefAttr:$table, DP_TokenTensor:$tokens,
                       DP_Activation:$dy, Optional<DP_PerSample>:$scale);
  let assemblyFormat = [{
    $table `(` $tokens `,` $dy `)` (`scale` `(` $scale^ `)`)? attr-dict `:` type($tokens) `,` type($dy) (`,` type($scale)^)?
  }];
}

def DP_PositionEmbeddingGradOp : DP_WeightGradOp<"position_embedding_grad"> {
  let summary = "adds sum_b c_b dy_b to the first T rows of a position table";
  let description = [{
    `dp.position_embedding_grad @pos(%dy) scale(%c)`: row t < T of the
    table's gradient gets sum_b c_b dy[b, t]; rows from T on get nothing.
  }];
  let arguments = (ins FlatSymbolRefAttr:$table, DP_Activation:$dy,
                       Optional<DP_PerSample>:$scale);
  let assemblyFormat = [{
    $table `(` $dy `)` (`scale` `(` $scale^ `)`)? attr-dict `:` type($dy) (`,` type($scale)^)?
  }];
}

def DP_VectorGradOp : DP_WeightGradOp<"vector_grad"> {
  let summary = "adds sum_b c_b g_b of materialized per-sample gradients";
  let description = [{
    For normalization scales and biases, whose per-sample gradients are
    small (one vector per sample) and materialized by the backward op, and
    for the rows of `dp.linear_per_sample_grad` (compute type or MXFP8).
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, DP_Activation:$grads,
                       Optional<DP_PerSample>:$scale);
  let assemblyFormat = [{
    $param `(` $grads `)` (`scale` `(` $scale^ `)`)? attr-dict `:` type($grads) (`,` type($scale)^)?
  }];
}

//===----------------------------------------------------------------------===//
// Per-sample norms and clipping
//===----------------------------------------------------------------------===//

class DP_NormOp<string mnemonic, list<Trait> traits = []>
    : DP_Op<mnemonic, !listconcat(traits, [Pure])> {
  let results = (outs DP_PerSample:$norms);
  code extraNormDeclaration = [{
    /// The parameters whose per-sample squared gradient norms this op sums.
    ::mlir::ArrayAttr getParamList() { return getParams(); }
  }];
}

def DP_NormRank1Op : DP_NormOp<"norm_rank1"> {
  let summary = "||x_b||^2 ||dy_b||^2: linear layers with one row per sample";
  let description = [{
    With `bias` (set by dp-fuse-norms), the second parameter is the layer's
    bias and the op also adds its norm: (||x_b||^2 + 1) ||dy_b||^2.
  }];
  let arguments = (ins DP_Activation:$x, DP_Activation:$dy,
                       SymbolRefArrayAttr:$params, UnitAttr:$bias);
  let assemblyFormat = "$x `,` $dy $params attr-dict `:` type($x) `,` type($dy) `->` type($norms)";
}

def DP_NormGramOp : DP_NormOp<"norm_gram"> {
  let summary = "<A A^T, sum_l G_l G_l^T> per sample (ghost norm)";
  let description = [{
    `%n = dp.norm_gram %a, %dq, %dk, %dv [@wq, @wk, @wv]`: the squared norm of
    the per-sample gradient of the weights of all layers that read `%a`,
    treated as one layer: A A^T is formed once and shared.
  }];
  let arguments = (ins DP_Activation:$x, Variadic<DP_Activation>:$dys,
                       SymbolRefArrayAttr:$params);
  let assemblyFormat = "$x `,` $dys $params attr-dict `:` type($x) `,` type($dys) `->` type($norms)";
  let hasVerifier = 1;
}

def DP_NormDirectOp : DP_NormOp<"norm_direct"> {
  let summary = "||dy_b^T x_b||^2 formed per sample";
  let description = [{
    With `bias` (set by dp-fuse-norms), the second parameter is the layer's
    bias and the op also adds ||sum_t dy_bt||^2, reading dy once.
  }];
  let arguments = (ins DP_Activation:$x, DP_Activation:$dy,
                       SymbolRefArrayAttr:$params, UnitAttr:$bias);
  let assemblyFormat = "$x `,` $dy $params attr-dict `:` type($x) `,` type($dy) `->` type($norms)";
}

def DP_NormBiasOp : DP_NormOp<"norm_bias"> {
  let summary = "||sum_t dy_bt||^2";
  let arguments = (ins DP_Activation:$dy, SymbolRefArrayAttr:$params);
  let assemblyFormat = "$dy $params attr-dict `:` type($dy) `->` type($norms)";
}

def DP_NormEmbeddingOp : DP_NormOp<"norm_embedding"> {
  let summary = "sum_{t,s} [x_t = x_s] dy_t . dy_s";
  let arguments = (ins DP_TokenTensor:$tokens, DP_Activation:$dy,
                       SymbolRefArrayAttr:$params);
  let assemblyFormat = "$tokens `,` $dy $params attr-dict `:` type($tokens) `,` type($dy) `->` type($norms)";
}

def DP_NormPositionEmbeddingOp : DP_NormOp<"norm_position_embedding"> {
  let summary = "sum_t ||dy_bt||^2: a learned position table";
  let description = [{
    Sample b's gradient of the table has row t = dy_bt for t < T (each
    position once per sample) and zeros beyond: its squared norm is that of
    dy_b.
  }];
  let arguments = (ins DP_Activation:$dy, SymbolRefArrayAttr:$params);
  let assemblyFormat = "$dy $params attr-dict `:` type($dy) `->` type($norms)";
}

def DP_NormTiedCrossOp : DP_NormOp<"norm_tied_cross"> {
  let summary = "2 <E_b, L_b>: the cross term of a table tied to a linear head";
  let description = [{
    `%n = dp.norm_tied_cross %tok, %demb, %x, %dlogits [@emb]`: for a table
    read by a `dp.embedding` (tokens `%tok`, output gradient `%demb`) and as
    the weight of a `dp.linear` (input `%x`, output gradient `%dlogits`),
    sample b's gradient of the table is E_b + L_b with
    E_b = sum_t onehot(tok_bt) demb_bt^T and L_b = dlogits_b^T x_b, and
    ||E_b + L_b||^2 = ||E_b||^2 + ||L_b||^2 + 2 <E_b, L_b>. The embedding's
    and the head's own norm ops add the first two terms; this op adds
      2 <E_b, L_b> = 2 sum_{s,t} dlogits_b[s, tok_bt] (x_bs . demb_bt),
    through M_b = X_b Demb_b^T (T_head x T_emb): 2 T_head T_emb d per sample
    (docs/clip-planning.md, "Tied parameters").
  }];
  let arguments = (ins DP_TokenTensor:$tokens, DP_Activation:$dembedding,
                       DP_Activation:$x, DP_Activation:$dlogits,
                       SymbolRefArrayAttr:$params);
  let assemblyFormat = [{
    $tokens `,` $dembedding `,` $x `,` $dlogits $params attr-dict `:` type($tokens) `,` type($dembedding) `,` type($x) `,` type($dlogits) `->` type($norms)
  }];
  let hasVerifier = 1;
}

def DP_NormTiedDirectOp : DP_NormOp<"norm_tied_direct"> {
  let summary = "||E_b + L_b||^2 of a table tied to a linear head, formed";
  let description = [{
    `%n = dp.norm_tied_direct %tok, %demb, %x, %dlogits [@emb]`: the same
    tied parameter as `dp.norm_tied_cross`, its whole per-sample gradient
    formed: L_b = dlogits_b^T x_b (vocabulary x d, as the direct norm forms
    it), the rows demb_bt added at tok_bt, and the sum of squares. It stands
    for the head's norm, the embedding's norm and their cross term at once,
    for 2 T V d per sample: chosen where that is cheaper than the three.
  }];
  let arguments = (ins DP_TokenTensor:$tokens, DP_Activation:$dembedding,
                       DP_Activation:$x, DP_Activation:$dlogits,
                       SymbolRefArrayAttr:$params);
  let assemblyFormat = [{
    $tokens `,` $dembedding `,` $x `,` $dlogits $params attr-dict `:` type($tokens) `,` type($dembedding) `,` type($x) `,` type($dlogits) `->` type($norms)
  }];
  let hasVerifier = 1;
}

def DP_LinearPerSampleGradOp : DP_Op<"linear_per_sample_grad", [Pure]> {
  let summary = "each sample's weight gradient dy_b^T x_b, materialized";
  let description = [{
    `%g = dp.linear_per_sample_grad %x, %dy : tensor<BxTxd>, tensor<BxTxp>
    -> tensor<Bx(p*d)xT>`: row b is sample b's gradient of the layer's
    weight, dy_b^T x_b (p x d, row-major, the weight's layout), accumulated
    in the accumulation type and stored in the compute type T of x and dy
    (bf16 models: half the memory of f32 slices). dp-clip-plan emits it for
    the `materialized` norm method: `dp.norm_rows %g` gives the norms of the
    stored values and `dp.vector_grad @w(%g) scale(%c)` the clipped gradient
    sum_b c_b g_b of the same values, so the clip bound holds for what is
    summed, and the weight-gradient product is computed once, as B products
    with K = T.

    With the `f8E4M3FN` element type (dp-clip-plan's `per-sample-rows`:
    mxfp8, or auto where the backend's bf16 product is the fused one) the
    rows are OCP MXFP8 instead: each run of 32 consecutive elements of a row
    shares one power-of-two (e8m0) scale, and each sample's row holds its
    p d e4m3 elements followed by its p d / 32 scale bytes
    (`dprt::DType::MXFP8`, runtime/include/dprt/types.h), about half the
    memory of bf16 rows. d must be a multiple of 32, so that no block spans
    two rows of the weight, and the model bf16 or f32 (the norms and clipped
    sums of MXFP8 rows are f32). The norm and the clipped sum read the same
    stored (rounded) values, so the clip bound still holds for what is summed.

    ```mlir
    %g = dp.linear_per_sample_grad %x, %dy : tensor<8x128x64xbf16>,
        tensor<8x128x256xbf16> -> tensor<8x16384xf8E4M3FN>
    ```
  }];
  let arguments = (ins DP_Activation:$x, DP_Activation:$dy);
  let results = (outs DP_Activation:$grads);
  let assemblyFormat = "$x `,` $dy attr-dict `:` type($x) `,` type($dy) `->` type($grads)";
  let hasVerifier = 1;
}

def DP_NormRowsOp : DP_NormOp<"norm_rows"> {
  let summary = "||g_b||^2 of materialized per-sample gradients";
  let description = [{
    With `fused` (set by dp-fuse-norms), the normalization backward op that
    forms `grads` also adds their norms, in the same pass: this op then only
    names the result.
  }];
  // Acc rows (normalization gradients), or compute-type or MXFP8
  // (f8E4M3FN) rows (materialized weight gradients).
  let arguments = (ins DP_Activation:$grads, SymbolRefArrayAttr:$params,
                       UnitAttr:$fused);
  let assemblyFormat = "$grads $params attr-dict `:` type($grads) `->` type($norms)";
}

def DP_NormSumOp : DP_Op<"norm_sum", [Pure, SameOperandsAndResultType]> {
  let summary = "sums per-sample squared norms";
  // SameOperandsAndResultType also asks for at least one part.
  let arguments = (ins Variadic<DP_PerSample>:$parts);
  let results = (outs DP_PerSample:$norms);
  let assemblyFormat = "$parts attr-dict `:` type($norms)";
}

def DP_ClipFactorOp : DP_Op<"clip_factor", [Pure,
    AllTypesMatch<["norms", "mask", "factors"]>]> {
  let summary = "per-sample clip factors from squared norms";
  let description = [{
    `%c = dp.clip_factor %n2, %mask {mode = flat, max_norm = 1.0, rel_err = ...}`:
    c_b = mask_b min(1, C / (sqrt(n2_b)(1 + rel_err) + 1e-6)) for flat and
    per-layer clipping (C is the per-layer bound then), mask_b C /
    (sqrt(n2_b)(1 + rel_err) + gamma) for automatic clipping. `rel_err`
    bounds the relative error of the computed norm.
  }];
  let arguments = (ins DP_PerSample:$norms, DP_PerSample:$mask,
                       DP_ClipMode:$mode, F64Attr:$max_norm,
                       F64Attr:$gamma, F64Attr:$rel_err);
  let results = (outs DP_PerSample:$factors);
  let assemblyFormat = "$norms `,` $mask $mode attr-dict `:` type($norms)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// FSDP
//===----------------------------------------------------------------------===//

def DP_UnitOp : DP_Op<"unit", [Symbol, HasParent<"ModelOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an FSDP unit: parameters in one flat buffer split over ranks";
  let description = [{
    ```mlir
    dp.unit @b0 params [@b0.wq, @b0.wk] offsets [0, 16384]
        {numel = 24576, shard = 12288, ranks = 2}
    ```
    The parameters lie back to back (element offsets, increasing, without
    overlap) in the first `numel` elements of a flat buffer of
    `ranks * shard` elements (padded with zeros); rank r of the `ranks` ranks
    the unit is split over owns elements [r * shard, (r + 1) * shard).

    On a 2-D grid (`shard.grid @g(shape = RxS)`, hybrid sharding) the unit
    is split over the S ranks of each replica (`ranks = S`) and kept by each
    of `replicas = R` replicas: every step the replicas sum the gradient of
    their shard (an all-reduce before the noise and the update), so that
    they stay identical.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, SymbolRefArrayAttr:$params,
                       DenseI64ArrayAttr:$offsets, I64Attr:$numel,
                       I64Attr:$shard, I64Attr:$ranks,
                       DefaultValuedAttr<I64Attr, "1">:$replicas);
  let assemblyFormat = "$sym_name `params` $params `offsets` $offsets attr-dict";
  let hasVerifier = 1;
}

def DP_AllGatherOp : DP_Op<"all_gather", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "gathers a unit's shards before its parameters are read";
  let description = [{
    `dp.all_gather @b0 forward`: the parameters of unit `@b0` are readable
    from here until the unit is gathered again or the step ends.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, DP_GatherPhase:$phase);
  let assemblyFormat = "$unit $phase attr-dict";
}

def DP_ReduceScatterOp : DP_Op<"reduce_scatter", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    MemoryEffects<[MemWrite<DP_GradientResource>,
                   MemRead<DP_GradientResource>]>]> {
  let summary = "sums a unit's gradients over ranks into the owners' shards";
  let description = [{
    `dp.reduce_scatter @b0`: after every weight-gradient op of the unit's
    parameters; the unit's full gradient is summed over the ranks and each
    rank adds its slice to its gradient shard.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit);
  let assemblyFormat = "$unit attr-dict";
}

#endif // DP_STEP_OPS_TD
