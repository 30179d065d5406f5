//===- Passes.td - DPC's passes ------------------------------*- tablegen -*-===//

#ifndef DPC_PASSES_TD
#define DPC_PASSES_TD

include "mlir/Pass/PassBase.td"

def Specialize : Pass<"dp-specialize", "mlir::ModuleOp"> {
  let summary = "Fix the batch to the recipe's physical batch and the grid size";
  let description = [{
    Picks the recipe (the only one, or the one named by `recipe`), replaces
    the `?` sample dimension of the model's forward pass by the recipe's
    physical batch per rank, and gives a dynamic `shard.grid` the number of
    ranks of `ranks`. A static grid must agree with `ranks` when both are
    given. A 2-D grid (replicas x shards, hybrid sharding) may leave one
    dimension `?`, which becomes `ranks` divided by the other; `ranks` must
    then be a multiple of it. `ranks` is 1 to 2^31 - 1 (the runtime counts ranks in an
    int32_t), or -1, the default, for the grid's size. Other recipes are removed: one compilation trains one recipe.

    `batch` compiles for fewer rows than the recipe's physical batch (1 to
    it, a multiple of `max_records` under user-level DP): dpc compiles the
    micro-step of a step's last, partly filled physical batch so.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"-1",
           "Ranks of the grid, 1 to 2^31 - 1 (-1: the grid's static size, "
           "or 1)">,
    Option<"recipe", "recipe", "std::string", /*default=*/"\"\"",
           "The recipe to compile when the module holds several">,
    Option<"batch", "batch", "int64_t", /*default=*/"-1",
           "Rows per rank to compile for, 1 to the recipe's physical batch "
           "(-1: the physical batch)">,
  ];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def LoRA : Pass<"dp-lora", "mlir::ModuleOp"> {
  let summary = "Add low-rank adapters (LoRA) to the recipe's targeted linears";
  let description = [{
    With `lora = #dp.lora<rank = r, alpha = a, targets = [...]>` in the
    recipe, rewrites every `dp.linear` whose weight's module matches a target
    (the Hugging Face module from `hf.name`, or the parameter name; the whole
    name or a suffix after a `.`) into the frozen base plus
    (a / r) (x A^T) B^T, as peft does: `@W.lora_A` (r x in, U(-1/sqrt(in),
    1/sqrt(in))) and `@W.lora_B` (out x r, zero) are new trainable
    parameters with their peft tensor names in `peft.name`; the scaling is a
    frozen r x r `@W.lora_scale` = (a / r) I between them (none when
    a = r). Fails, at the recipe, when a target matches no linear or r
    exceeds a targeted layer's width. Runs before dp-freeze, which freezes
    every parameter but the adapters.
  }];
  let statistics = [
    Statistic<"numAdapters", "adapters", "Linear layers given an adapter">,
  ];
}

def Freeze : Pass<"dp-freeze", "mlir::ModuleOp"> {
  let summary = "Mark the parameters the recipe does not train as frozen";
  let description = [{
    Sets `trainable = false` on every parameter the recipe freezes: those
    matching a `freeze` pattern, those matching no `train` pattern when
    `train` is given, and with `lora`, all but the adapters and the `train`
    matches. Fails, at the recipe, when a pattern matches no parameter or no
    parameter is left to train. A frozen parameter gets no gradient,
    per-sample norm, reduce-scatter, optimizer state, master copy or noise.
  }];
  let statistics = [
    Statistic<"numFrozen", "frozen", "Parameters the recipe froze">,
  ];
}

def FuseResidual : Pass<"dp-fuse-residual", "mlir::ModuleOp"> {
  let summary = "Fold residual connections into the linear layer before them";
  let description = [{
    In the model's `dp.forward`, `%y = dp.linear @w(%a)` and
    `%h = dp.add %x, %y` (either operand order) become
    `%h = dp.linear @w(%a) plus %x`: the product adds x before rounding to
    its type (cuBLASLt's C; the CPU's sum after the product), and the
    projection y is never stored. Only when the add is y's one reader and x
    is defined before the linear layer; of two linear operands, the later
    one absorbs the add. In bf16 the fused form rounds once where the pair
    rounded y to bf16 first; in f32 and f64 the sums are the pair's.
    dp-backward then gives x the output's gradient, as through the add.
    Runs after dp-freeze, before dp-backward.
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Residual connections fused">,
  ];
}

def Backward : Pass<"dp-backward", "mlir::ModuleOp"> {
  let summary = "Derive the training step: forward, backward and weight gradients";
  let description = [{
    Creates `dp.step` from the specialized `dp.forward`: the forward layers,
    then, in reverse order, one derivative op per layer. Input gradients and
    weight gradients are separate ops: `dp.linear_grad_input` computes
    dx = dy W, while `dp.linear_grad_weight`, `dp.bias_grad`,
    `dp.embedding_grad` and `dp.vector_grad` add a parameter's gradient
    (unclipped until dp-clip-plan gives them a scale). The gradient of each
    sample's loss is the mask, so padding samples contribute nothing.
    Gradients of a value read by several layers are accumulated through the
    `acc` operand of the derivative ops (or `dp.add`). Only values that
    depend on a trainable parameter are differentiated.
  }];
  let statistics = [
    Statistic<"numInputGradOps", "input-grad-ops", "Input-gradient ops created">,
    Statistic<"numWeightGradOps", "weight-grad-ops", "Weight-gradient ops created">,
  ];
}

def FuseGLU : Pass<"dp-fuse-glu", "mlir::ModuleOp"> {
  let summary = "Fuse act(gate) * up and its derivative into dp.glu and dp.glu_grad";
  let description = [{
    In `dp.step`, `%s = dp.<act> %g`, `%p = dp.mul %s, %u` (either operand
    order) with the derivatives dp-backward made for them,
    `dp.mul_grad %s, %u, %dy` and `dp.activation_grad <act> %g, %ds`,
    become `%p = dp.glu <act> %g, %u` and
    `%dg, %du = dp.glu_grad <act> %g, %u, %dy`: act(gate) is neither stored
    nor read again, and each direction is one pass over memory. Only when
    the activation's result has no other reader and neither derivative
    accumulates into another gradient. In bf16 the fused forms round once
    where the pair rounded act(gate) (and its gradient) to bf16 in between.
    Runs after dp-backward, before dp-recompute.
  }];
  let statistics = [
    Statistic<"numFused", "fused", "Gated units fused">,
  ];
}

def Recompute : Pass<"dp-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute the forward of the first blocks just before their backward";
  let description = [{
    Activation recomputation (checkpointing). The forward layers of `dp.step`
    fall into segments, one per parameter prefix (the name before the first
    `.`, as FSDP's block units, or the whole name without one): a segment starts at the first layer that
    reads a parameter of a new prefix and holds the parameter-free layers
    after it. A segment with at least two `dp.linear` layers is a block.
    The first `blocks` blocks (-1: all) are recomputed: the layers whose
    results the backward reads are cloned, in their order, just before the
    first backward op that reads one of them, and the backward reads the
    clones. The block's input (the previous segment's output) is the only
    activation kept from the forward; its internal activations die there.
    The clones carry `dp.recompute = "<block>"` (dp-shard gathers a unit's
    parameters again before them when FSDP frees them after the forward;
    dp-report counts their FLOPs apart), and the step lists the recomputed
    blocks in `dp.recomputed`. The clones run the same kernels on the same
    inputs as the forward, so the step's results are bit-identical.
    Runs after dp-backward, before dp-clip-plan.
  }];
  let options = [
    Option<"blocks", "blocks", "int64_t", /*default=*/"0",
           "Blocks to recompute, first ones first (-1: all)">,
  ];
  let statistics = [
    Statistic<"numBlocks", "blocks", "Blocks recomputed">,
    Statistic<"numCloned", "cloned-ops", "Forward ops cloned into the backward">,
  ];
}

def Rematerialize : Pass<"dp-rematerialize", "mlir::ModuleOp"> {
  let summary = "Recompute cheap forward layers just before the backward reads them";
  let description = [{
    Normalizations (`dp.rms_norm`, `dp.layer_norm`), activations and
    elementwise `dp.mul`/`dp.add` whose results the backward of `dp.step`
    reads are cloned just before their first backward reader (or before the
    first clone that reads them), and the backward reads the clones, when
    every value they read stays live up to there anyway: a step argument, a
    value the backward reads at that point or later, or another clone; not
    when a loss or attention derivative reads the result (they must read
    their forward op's own operands). Their
    forward results then die in the forward; the price is one more pass over
    memory per clone. The clones carry `dp.recompute = "rematerialize"` (so
    dp-shard gathers their parameters where the backward reads them) and the
    step holds their count in `dp.rematerialized`. They run the same kernels
    on the same inputs, so the step's results are bit-identical. Runs after
    dp-recompute (whose clones it leaves alone), before dp-clip-plan.

    A cloned `dp.glu` whose readers (the down projection's weight gradient)
    can all move after the `dp.glu_grad` of the same gate and up, because
    nothing before that gradient reads what they make, is folded into it:
    `dp.glu_grad_remat` makes the gradients and the GLU output in one pass
    over gate and up, and the readers follow it.
  }];
  let statistics = [
    Statistic<"numCloned", "cloned-ops", "Forward layers cloned into the backward">,
    Statistic<"numFusedIntoGradient", "fused-into-gradient",
              "Rematerialized GLU outputs made by their gradient's pass">,
  ];
}

def ClipPlan : Pass<"dp-clip-plan", "mlir::ModuleOp"> {
  let summary = "Choose per-sample norm methods, compute clip factors, clip once";
  let description = [{
    For every weight-gradient op, adds the per-sample squared-norm op of the
    method the cost model chooses (see docs/clip-planning.md):
    rank-1 for one row per sample; for sequences, the Gram ("ghost") norm
    <A A^T, G G^T> when T (d + p) < d p and the direct norm otherwise;
    `dp.norm_bias` for biases, `dp.norm_embedding` for tables,
    `dp.norm_rows` for materialized normalization-layer gradients,
    `dp.norm_position_embedding` for learned position tables. With
    `share-gram`, linear layers that read the same activation and chose the
    Gram norm share one A A^T (one `dp.norm_gram` with several output
    gradients). A table tied to a linear head is one parameter: its norm is
    the head's, the embedding's and their cross term (`dp.norm_tied_cross`),
    or its whole per-sample gradient formed (`dp.norm_tied_direct`) where
    that is cheaper. The materialized method replaces a linear weight's
    norm and weight-gradient product by its per-sample gradients
    (`dp.linear_per_sample_grad`), their norms (`dp.norm_rows`) and their
    clipped sum (`dp.vector_grad`): forced by `norm-methods`, or chosen
    greedily by predicted time saved per byte (the `backend`'s time model)
    within `materialize-bytes`.

    `per-sample-rows` chooses how those per-sample gradients are stored:
    `compute` in the compute type; `mxfp8` as OCP MXFP8 (`f8E4M3FN` rows:
    e4m3 elements with one power-of-two scale per 32, stored after them;
    dprt/types.h) for every materialized weight whose input width is a
    multiple of 32 in a bf16 or f32 model (others keep compute-type rows);
    `auto` (the default) as MXFP8 only where the `backend` makes bf16 rows
    in the fused product (cuda, bf16, dprt/fused_norms.h's rule), where
    the MXFP8 product costs about the same, else in the compute type. MXFP8 rows take 1 + 1/32 bytes an element, about
    0.52x the bytes of bf16 rows: `materialize-bytes` counts them so, and
    the time model charges their traffic so. Each element is rounded to 3
    mantissa bits (a relative error of at most 2^-4, but for elements 2^13
    below the largest of their block) before the clipped sum; the norms,
    and so the clip bound, are those of the stored values, so the privacy
    guarantee is unchanged.

    Flat and automatic clipping (book-keeping): all norms are summed,
    `dp.clip_factor` computes one factor per sample, and every weight
    gradient op is moved after it and scaled by it, so each clipped weight
    gradient is computed exactly once and no unclipped gradient is formed.
    Per-layer clipping: each parameter gets its own factor with bound
    C / sqrt(L) (L trainable parameters) right after its norm, and its
    weight gradient is not deferred. The clip factor accounts for the
    rounding error of the norm computation (`rel_err`).
  }];
  let options = [
    Option<"shareGram", "share-gram", "bool", /*default=*/"true",
           "Share A A^T between Gram norms of layers reading one activation">,
    Option<"materializeBytes", "materialize-bytes", "int64_t",
           /*default=*/"0",
           "Bytes the materialized norm method's per-sample weight gradients "
           "may take (0: none, -1: no limit)">,
    Option<"backend", "backend", "::dpc::Backend",
           /*default=*/"::dpc::Backend::CPU",
           "The device whose time model ranks the norm methods",
           "::dpc::backendValues()">,
    ListOption<"normMethods", "norm-methods", "std::string",
               "PARAM=METHOD (or *=METHOD for every linear weight): force "
               "gram, direct or materialized">,
    Option<"perSampleRows", "per-sample-rows", "::dpc::PerSampleRows",
           /*default=*/"::dpc::PerSampleRows::Auto",
           "How materialized per-sample weight gradients are stored: auto "
           "(mxfp8 where the backend makes bf16 rows in the fused product, "
           "else compute), compute (the compute type) or mxfp8 (e4m3 and a "
           "scale per 32 elements, about 0.52x the bytes of bf16; for "
           "weights whose input width is a multiple of 32, in bf16 and f32 "
           "models)",
           "::dpc::perSampleRowsValues()">,
  ];
  let statistics = [
    Statistic<"numMaterialized", "materialized-norms",
              "Parameters with materialized per-sample gradients">,
    Statistic<"numMXFP8Rows", "mxfp8-rows",
              "Materialized parameters whose per-sample gradients are MXFP8">,
    Statistic<"numRank1", "rank1-norms", "Parameters with rank-1 norms">,
    Statistic<"numGram", "gram-norms", "Parameters with Gram norms">,
    Statistic<"numDirect", "direct-norms", "Parameters with direct norms">,
    Statistic<"numOther", "other-norms", "Bias, embedding and normalization norms">,
    Statistic<"numTied", "tied-norms", "Tables tied to a linear head">,
  ];
}

def FuseNorms : Pass<"dp-fuse-norms", "mlir::ModuleOp"> {
  let summary = "Fold per-sample norm work into the ops that read its data";
  let description = [{
    After dp-clip-plan. Two fusions, each kept only where both parts add
    into the same squared norm (flat and automatic clipping, or a single
    parameter):
    - the norm of a normalization layer's per-sample scale (and bias)
      gradients is added by the backward op that forms them
      (`dp.norm_rows {fused}`; the lowering calls the `_norm` form of the
      normalization backward kernel), saving a pass over B x d values; so
      is the norm of materialized linear weight gradients
      (`dp.linear_per_sample_grad`), summed while each slice is in cache;
    - the norm of a linear layer's bias joins the rank-1 or direct norm of
      its weight (`dp.norm_rank1 {bias}`, `dp.norm_direct {bias}`), which
      reads the same output gradient: a bias is a weight column whose input
      is 1.
  }];
  let statistics = [
    Statistic<"numFusedRows", "fused-norm-layers", "Normalization norms fused into their backward op">,
    Statistic<"numFusedBiases", "fused-biases", "Bias norms fused into the weight norm">,
  ];
}

def Shard : Pass<"dp-shard", "mlir::ModuleOp"> {
  let summary = "Group parameters into FSDP units and place the collectives";
  let description = [{
    Groups the parameters into units by the recipe's `#dp.fsdp` policy (a
    block: the name prefix before the first `.`; a layer: the parameters one
    layer reads; a parameter's own `unit` attribute wins), lays each unit out
    as one flat buffer padded to a multiple of the number of ranks it is
    split over (`dp.unit`), and, on more than one such rank, inserts
    `dp.all_gather` before the first read of a unit in the forward part of
    the step and again before its first read in the backward part (unless
    `reshard_after_forward = false`), and one `dp.reduce_scatter` after the
    last weight-gradient op of the unit. Per unit and step: one all-gather in
    forward, at most one in backward, one reduce-scatter: no collective that
    non-private FSDP would not issue.

    On a 2-D grid of R x S ranks (hybrid sharding) the units are split over
    the S ranks of a replica (`ranks = S`), the collectives above run among
    them, and `replicas = R` on each unit makes the lowering sum each
    gradient shard over the R replicas once per optimizer step, before the
    noise and the update.

    `reshard` overrides the recipe's `reshard_after_forward`: -1 (default)
    keeps the recipe's, 0 keeps every unit's forward gather for its
    backward, 1 gathers again before the backward. (On one rank a unit of
    16-bit trainable parameters is "gathered" by a cast from its f32 master:
    keeping it saves one cast of the unit a step.)

    `cast-units = false` gathers no unsplit unit: each keeps a compute-type
    copy of its weights for the whole run, which layers read in place and
    the optimizer update writes as it writes the master
    (dp-lower-to-runtime). It costs that copy's memory (2 bytes a parameter
    in bf16) and saves every cast of a unit from its master: one or two a
    unit and step.
  }];
  let options = [
    Option<"reshard", "reshard", "int64_t", "-1",
           "Gather again before the backward: -1 the recipe's "
           "reshard_after_forward, 0 no (keep the forward's gather), 1 yes">,
    Option<"castUnits", "cast-units", "bool", "true",
           "On one rank, gather each unsplit 16-bit trainable unit by a cast "
           "from its f32 master; false: keep a compute-type copy written by "
           "the update">,
  ];
  let statistics = [
    Statistic<"numUnits", "units", "FSDP units">,
    Statistic<"numAllGathers", "all-gathers", "All-gathers per step">,
    Statistic<"numReduceScatters", "reduce-scatters", "Reduce-scatters per step">,
  ];
}

def LowerToRuntime : Pass<"dp-lower-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower the sharded step to buffers and runtime calls (dprt)";
  let description = [{
    Creates a `dprt.program` beside the model with the persistent buffers
    (step state, inputs, mask, loss, and per unit the parameter shard, the
    master shard, the gradient shard and the optimizer state) and five
    functions: `dp_init` (initializers keyed by global parameter index),
    `dp_microstep` (the dp.step: each tensor becomes a temporary buffer, each
    op one or a few runtime calls; a gathered unit is a temporary of the
    compute type, a unit's full gradient a temporary of the accumulation type
    reduce-scattered into the gradient shard), `dp_apply` (noise and the
    optimizer on the trainable ranges of each shard), `dp_forward` and
    `dp_describe`. A weight gradient without a clip factor is an error: the
    program never sums unclipped gradients. Byte sizes are checked
    arithmetic: a tensor or buffer whose size a 64-bit size cannot count is
    an error naming it.

    With `sum-in-update` and a recipe whose every step is one micro-step on
    one rank (shuffled batches no larger than the physical batch), the
    clipped sum of a parameter's materialized per-sample gradients
    (dp.vector_grad) is not added into its gradient: the per-sample
    gradients, clip factors and norms are carried into `dp_apply`
    (dprt.alloc's `carried`), whose update forms the sum as it reads them
    (`*_update_rows`), and `dp_describe` names the parameter and the norms
    the driver checks for finiteness instead of its gradient.

    With `overwrite-gradients` and such a recipe, a parameter whose one
    gradient op is a dp.linear_grad_weight has its gradient written by it
    (`linear_weight_grad`'s accumulate = false: beta 0 in the GEMM) instead
    of added into zeros: `dp_apply` zeroes only the other gradients for the
    next step, and `dp_describe` names the parameter
    (`describe_gradient_overwritten`), so that the driver refuses a step of
    more or fewer micro-steps.
  }];
  let options = [
    Option<"backend", "backend", "::dpc::Backend",
           /*default=*/"::dpc::Backend::CPU",
           "The runtime backend the program is for",
           "::dpc::backendValues()">,
    Option<"sumInUpdate", "sum-in-update", "bool", /*default=*/"true",
           "Let dp_apply's update form the clipped sums of materialized "
           "per-sample gradients when every step is one micro-step">,
    Option<"overwriteGradients", "overwrite-gradients", "bool",
           /*default=*/"true",
           "Let a weight's one linear_weight_grad write its gradient instead "
           "of adding to it when every step is one micro-step">,
  ];
  let dependentDialects = ["::dpc::rt::DPRTDialect"];
}

def Schedule : Pass<"dprt-schedule", "mlir::ModuleOp"> {
  let summary = "Put collectives on their own stream, prefetch gathers, add events";
  let description = [{
    Collectives run on stream 1, everything else on stream 0. Each
    all-gather is issued `prefetch` units early: before the first use of the
    unit gathered `prefetch` gathers before it, so that gathering the next
    unit overlaps computing with this one (two gathered units live at a
    time for prefetch = 1: double buffering). Events order the streams: a
    collective waits for the compute issued before it; the first use of a
    gathered unit waits for its all-gather; a reduce-scatter is waited for
    before the one two later is issued (at most two in flight) and at the
    end of the function, and its gradient buffer stays live until then.
    Every function ends with stream 0 joined with stream 1.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"-1",
           "All-gathers issued ahead (-1: the recipe's, recorded on the program)">,
  ];
  let statistics = [
    Statistic<"numEvents", "events", "Events recorded">,
    Statistic<"numPrefetched", "prefetched", "All-gathers moved ahead">,
  ];
}

def PlanMemory : Pass<"dprt-plan-memory", "mlir::ModuleOp"> {
  let summary = "Give every buffer an offset in one arena per rank";
  let description = [{
    Globals are laid out first, back to back. Each function's temporaries
    live from their first to their last use (views and keep operands
    count as uses) and are placed greedily, largest first, at the lowest
    offset that overlaps no temporary live at the same time. Functions never
    run at once, so their temporaries share the space after the globals.
    Sets `offset` on every dprt.global and dprt.alloc, and `arena_bytes`
    (the arena size) and `peak_bytes` (the most bytes live at once, globals
    included) on the program. Sizes and offsets are checked arithmetic: one
    that a 64-bit size cannot count is an error naming the buffer, and so is
    an arena larger than 2^40 bytes (1 TiB), more than any device holds.
  }];
  let statistics = [
    Statistic<"numBuffers", "buffers", "Temporaries placed">,
  ];
}

def ConvertDPRTToEmitC : Pass<"convert-dprt-to-emitc", "mlir::ModuleOp"> {
  let summary = "Lower the planned dprt program to EmitC";
  let description = [{
    Each dprt.func becomes an emitc.func taking the rank (`dp_describe`:
    the ProgramSpec); each buffer a pointer `arena(rank) + offset`; each call
    an `emitc.call_opaque` of `dprt::<callee>`. The dp model and the recipe
    are removed: the module is then ready for `mlir-to-cpp`.
  }];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

def Report : Pass<"dp-report", "mlir::ModuleOp"> {
  let summary = "Print what one training step costs: FLOPs, traffic, memory";
  let description = [{
    After dprt-plan-memory: a table with one row per trainable parameter
    (name, shape, per-sample norm method, norm FLOPs and clipped
    weight-gradient FLOPs per physical batch), then the totals per physical
    batch and per expected logical step: FLOPs of matrix products (linear
    forward and input gradients, attention, per-sample norms, weight
    gradients), bytes each rank receives in all-gathers and reduce-scatters,
    and the predicted arena per rank. FLOPs count a multiply-add as 2;
    elementwise work is not counted. Blocks recomputed by dp-recompute are
    listed with their extra FLOPs and the bytes they save. Predicted times:
    FLOPs at `tflops` sustained, collectives at the bandwidth of the link
    they cross (`nvlink-gbps` within a node of `gpus-per-node` ranks,
    `network-gbps` across nodes), communication overlapped with compute.
    `format=json` prints the same as one JSON object.
  }];
  let options = [
    Option<"format", "format", "::dpc::ReportFormat",
           /*default=*/"::dpc::ReportFormat::Table", "How to print the plan",
           "::dpc::reportFormatValues()">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the report to (- for stdout)">,
    Option<"arenaWithoutRecompute", "arena-without-recompute", "int64_t",
           /*default=*/"-1",
           "The arena the plan needs without recomputation (dpc passes it "
           "when blocks are recomputed; -1: unknown)">,
    Option<"peakWithoutRecompute", "peak-without-recompute", "int64_t",
           /*default=*/"-1",
           "The peak in use without recomputation (-1: unknown)">,
    Option<"tflops", "tflops", "double", /*default=*/"400.0",
           "Sustained TFLOP/s of one rank for the predicted times">,
    Option<"nvlinkGBps", "nvlink-gbps", "double", /*default=*/"450.0",
           "GB/s a rank sends (and receives) to ranks of its node">,
    Option<"networkGBps", "network-gbps", "double", /*default=*/"50.0",
           "GB/s a rank sends (and receives) to ranks of other nodes">,
    Option<"gpusPerNode", "gpus-per-node", "int64_t", /*default=*/"8",
           "Ranks per node: consecutive ranks share a node">,
    Option<"backend", "backend", "::dpc::Backend",
           /*default=*/"::dpc::Backend::CPU",
           "The device whose time model predicts norm and weight-gradient "
           "times", "::dpc::backendValues()">,
  ];
}

#endif // DPC_PASSES_TD
