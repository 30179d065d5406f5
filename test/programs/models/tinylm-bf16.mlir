// tinylm-f32.mlir in bf16 (compute bf16, f32 master weights), the precision
// of the GPU benchmarks, for the program-level tests of what only a 16-bit
// model has: units cast from their f32 masters where layers read them, or a
// bf16 copy of the weights written by the optimizer update (dpc
// --compute-copy, ComputeCopyBits). The loss stays f32. Generated from
// tinylm-f32.mlir: xf32> -> xbf16> in the tensor types, compute = bf16.

shard.grid @ranks(shape = ?)
// Hybrid sharding: 2 replicas, each splitting the units over ? ranks
// (dpc --ranks 2N gives 2 x N).
shard.grid @hybrid(shape = 2x?)

dp.model @tinylm attributes {vocab = 256, seq = 16, width = 32, blocks = 2} {
  dp.param @emb : tensor<256x32xbf16> {init = #dp.normal<0.5>}
  dp.param @b0.n1 : tensor<32xbf16> {init = #dp.uniform<1.5>}
  dp.param @b0.wq : tensor<32x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.wk : tensor<16x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.wv : tensor<16x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.wo : tensor<32x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.n2 : tensor<32xbf16> {init = #dp.uniform<1.5>}
  dp.param @b0.gate : tensor<64x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.up : tensor<64x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b0.down : tensor<32x64xbf16> {init = #dp.normal<0.15>}
  dp.param @b1.n1 : tensor<32xbf16> {init = #dp.uniform<1.5>}
  dp.param @b1.wq : tensor<32x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.wk : tensor<16x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.wv : tensor<16x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.wo : tensor<32x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.n2 : tensor<32xbf16> {init = #dp.uniform<1.5>}
  dp.param @b1.gate : tensor<64x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.up : tensor<64x32xbf16> {init = #dp.normal<0.2>}
  dp.param @b1.down : tensor<32x64xbf16> {init = #dp.normal<0.15>}
  dp.param @norm : tensor<32xbf16> {init = #dp.uniform<1.5>}
  dp.param @head : tensor<256x32xbf16> {init = #dp.normal<0.2>}

  dp.forward(%tok: tensor<?x16xi32>, %tgt: tensor<?x16xi32>) -> tensor<?xf32> {
    %x0 = dp.embedding @emb(%tok) : tensor<?x16xi32> -> tensor<?x16x32xbf16>

    %h0 = dp.rms_norm @b0.n1(%x0) {eps = 1.0e-5} : tensor<?x16x32xbf16>
    %q0 = dp.linear @b0.wq(%h0) : tensor<?x16x32xbf16> -> tensor<?x16x32xbf16>
    %k0 = dp.linear @b0.wk(%h0) : tensor<?x16x32xbf16> -> tensor<?x16x16xbf16>
    %v0 = dp.linear @b0.wv(%h0) : tensor<?x16x32xbf16> -> tensor<?x16x16xbf16>
    %a0 = dp.attention %q0, %k0, %v0 {causal, heads = 4, kv_heads = 2, rope, rope_theta = 10000.0}
        : tensor<?x16x32xbf16>, tensor<?x16x16xbf16>
    %o0 = dp.linear @b0.wo(%a0) : tensor<?x16x32xbf16> -> tensor<?x16x32xbf16>
    %r0 = dp.add %x0, %o0 : tensor<?x16x32xbf16>
    %m0 = dp.rms_norm @b0.n2(%r0) {eps = 1.0e-5} : tensor<?x16x32xbf16>
    %g0 = dp.linear @b0.gate(%m0) : tensor<?x16x32xbf16> -> tensor<?x16x64xbf16>
    %u0 = dp.linear @b0.up(%m0) : tensor<?x16x32xbf16> -> tensor<?x16x64xbf16>
    %s0 = dp.silu %g0 : tensor<?x16x64xbf16>
    %p0 = dp.mul %s0, %u0 : tensor<?x16x64xbf16>
    %d0 = dp.linear @b0.down(%p0) : tensor<?x16x64xbf16> -> tensor<?x16x32xbf16>
    %x1 = dp.add %r0, %d0 : tensor<?x16x32xbf16>

    %h1 = dp.rms_norm @b1.n1(%x1) {eps = 1.0e-5} : tensor<?x16x32xbf16>
    %q1 = dp.linear @b1.wq(%h1) : tensor<?x16x32xbf16> -> tensor<?x16x32xbf16>
    %k1 = dp.linear @b1.wk(%h1) : tensor<?x16x32xbf16> -> tensor<?x16x16xbf16>
    %v1 = dp.linear @b1.wv(%h1) : tensor<?x16x32xbf16> -> tensor<?x16x16xbf16>
    %a1 = dp.attention %q1, %k1, %v1 {causal, heads = 4, kv_heads = 2, rope, rope_theta = 10000.0}
        : tensor<?x16x32xbf16>, tensor<?x16x16xbf16>
    %o1 = dp.linear @b1.wo(%a1) : tensor<?x16x32xbf16> -> tensor<?x16x32xbf16>
    %r1 = dp.add %x1, %o1 : tensor<?x16x32xbf16>
    %m1 = dp.rms_norm @b1.n2(%r1) {eps = 1.0e-5} : tensor<?x16x32xbf16>
    %g1 = dp.linear @b1.gate(%m1) : tensor<?x16x32xbf16> -> tensor<?x16x64xbf16>
    %u1 = dp.linear @b1.up(%m1) : tensor<?x16x32xbf16> -> tensor<?x16x64xbf16>
    %s1 = dp.silu %g1 : tensor<?x16x64xbf16>
    %p1 = dp.mul %s1, %u1 : tensor<?x16x64xbf16>
    %d1 = dp.linear @b1.down(%p1) : tensor<?x16x64xbf16> -> tensor<?x16x32xbf16>
    %x2 = dp.add %r1, %d1 : tensor<?x16x32xbf16>

    %f = dp.rms_norm @norm(%x2) {eps = 1.0e-5} : tensor<?x16x32xbf16>
    %logits = dp.linear @head(%f) : tensor<?x16x32xbf16> -> tensor<?x16x256xbf16>
    %loss = dp.cross_entropy %logits, %tgt per_sample = mean ignore_index = -1
        : tensor<?x16x256xbf16>, tensor<?x16xi32> -> tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

dp.recipe @flat_sgd for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @per_layer_sgd for @tinylm {
  clip = #dp.clip<per_layer, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @automatic_sgd for @tinylm {
  clip = #dp.clip<automatic, max_norm = 6.0, gamma = 0.01>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @flat_momentum for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.5, momentum = 0.9, nesterov = false, weight_decay = 0.01>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// DP off: the same step without norms, clip factors or noise.
dp.recipe @nodp_momentum for @tinylm {
  clip = #dp.clip<none>,
  noise = #dp.none,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.5, momentum = 0.9, nesterov = false, weight_decay = 0.01>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @flat_adamw for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.1>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// Expected batch 1: about a third of the steps have an empty logical batch
// (the noise-only tests).
dp.recipe @sparse_sgd for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 1, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// flat_adamw over a 2 x N grid (hybrid sharding): the same training.
dp.recipe @hybrid_adamw for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.1>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @hybrid
}

// LoRA (peft's: rank 4, scaling alpha / r = 2) on q, v and down; only the
// adapters train, through the frozen base model. Their per-sample norms are
// smaller (0.7 to 3 here), hence a smaller clipping bound.
dp.recipe @lora_momentum for @tinylm {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.5, momentum = 0.9, nesterov = false, weight_decay = 0.01>,
  steps = 5,
  lora = #dp.lora<rank = 4, alpha = 8.0, targets = ["wq", "wv", "down"]>,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// The embedding, the second block and the final norm frozen: gradients
// pass through frozen layers to the first block.
dp.recipe @frozen_sgd for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  freeze = ["emb", "b1.*", "norm"],
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// Shuffled batches of the physical batch: every step is one micro-step, so
// dp_apply's update forms the clipped sums of the materialized per-sample
// gradients (dpc --sum-in-update; SumInUpdateTest).
dp.recipe @shuffle_adamw for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 4, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.1>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

// DP off on the same batches: every step one micro-step, whose weight
// gradients are written, not added (dpc --overwrite-gradients;
// OverwriteGradientsBits).
dp.recipe @shuffle_nodp for @tinylm {
  clip = #dp.clip<none>,
  noise = #dp.none,
  sampling = #dp.shuffle<batch = 4, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.1>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}

dp.recipe @shuffle_momentum for @tinylm {
  clip = #dp.clip<flat, max_norm = 6.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 4, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.5, momentum = 0.9, nesterov = true, weight_decay = 0.01>,
  steps = 5,
  precision = #dp.precision<compute = bf16, master = f32>,
  shard = #dp.fsdp<unit = block>,
  grid = @ranks
}
