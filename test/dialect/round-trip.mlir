// RUN: dp-opt %s | FileCheck %s
// RUN: dp-opt %s | dp-opt | FileCheck %s
// RUN: dp-opt %s --mlir-print-op-generic | dp-opt | FileCheck %s
//
// Every op and attribute of the dp dialect, printed and parsed back.

// CHECK: shard.grid @ranks(shape = ?)
shard.grid @ranks(shape = ?)

// CHECK-LABEL: dp.model @every_layer attributes {vocab = 32 : i64}
dp.model @every_layer attributes {vocab = 32} {
  // CHECK: dp.param @emb : tensor<32x16xf32> {init = #dp.normal<0.02>}
  dp.param @emb : tensor<32x16xf32> {init = #dp.normal<0.02>}
  // CHECK: dp.param @n1 : tensor<16xf32> {init = #dp.ones}
  dp.param @n1 : tensor<16xf32> {init = #dp.ones}
  // CHECK: dp.param @wq : tensor<16x16xf32> {init = #dp.uniform<0.25>}
  dp.param @wq : tensor<16x16xf32> {init = #dp.uniform<0.25>}
  // CHECK: dp.param @wk : tensor<8x16xf32> {unit = "attn"}
  dp.param @wk : tensor<8x16xf32> {unit = "attn"}
  // CHECK: dp.param @wv : tensor<8x16xf32> {trainable = false}
  dp.param @wv : tensor<8x16xf32> {trainable = false}
  dp.param @wo : tensor<16x16xf32>
  // CHECK: dp.param @ln.g : tensor<16xf32>
  dp.param @ln.g : tensor<16xf32>
  // CHECK: dp.param @ln.b : tensor<16xf32> {init = #dp.zeros}
  dp.param @ln.b : tensor<16xf32> {init = #dp.zeros}
  dp.param @up : tensor<32x16xf32>
  dp.param @up.b : tensor<32xf32>
  dp.param @gate : tensor<32x16xf32>
  dp.param @down : tensor<16x32xf32>
  dp.param @n2 : tensor<16xf32>
  dp.param @head : tensor<32x16xf32>

  // CHECK: dp.forward(%[[TOK:.*]]: tensor<?x8xi32>, %[[TGT:.*]]: tensor<?x8xi32>) -> tensor<?xf32> {
  dp.forward(%tok: tensor<?x8xi32>, %tgt: tensor<?x8xi32>) -> tensor<?xf32> {
    // CHECK: %[[X:.*]] = dp.embedding @emb(%[[TOK]]) : tensor<?x8xi32> -> tensor<?x8x16xf32>
    %x = dp.embedding @emb(%tok) : tensor<?x8xi32> -> tensor<?x8x16xf32>
    // CHECK: dp.rms_norm @n1(%[[X]]) {eps = {{.*}} : f64} : tensor<?x8x16xf32>
    %h = dp.rms_norm @n1(%x) {eps = 1.0e-6} : tensor<?x8x16xf32>
    // CHECK: dp.linear @wq(%{{.*}}) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %q = dp.linear @wq(%h) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    %k = dp.linear @wk(%h) : tensor<?x8x16xf32> -> tensor<?x8x8xf32>
    %v = dp.linear @wv(%h) : tensor<?x8x16xf32> -> tensor<?x8x8xf32>
    // CHECK: dp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, heads = 4 : i64, kv_heads = 2 : i64, rope, rope_theta = 5.000000e+05 : f64} : tensor<?x8x16xf32>, tensor<?x8x8xf32>
    %a = dp.attention %q, %k, %v {causal, heads = 4, kv_heads = 2, rope, rope_theta = 500000.0} : tensor<?x8x16xf32>, tensor<?x8x8xf32>
    %o = dp.linear @wo(%a) : tensor<?x8x16xf32> -> tensor<?x8x16xf32>
    // CHECK: dp.add %{{.*}}, %{{.*}} : tensor<?x8x16xf32>
    %r = dp.add %x, %o : tensor<?x8x16xf32>
    // CHECK: dp.layer_norm @ln.g, @ln.b(%{{.*}}) : tensor<?x8x16xf32>
    %n = dp.layer_norm @ln.g, @ln.b(%r) : tensor<?x8x16xf32>
    // CHECK: dp.linear @up, @up.b(%{{.*}}) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    %u = dp.linear @up, @up.b(%n) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    %g = dp.linear @gate(%n) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    // CHECK: dp.gelu %{{.*}} tanh : tensor<?x8x32xf32>
    %gt = dp.gelu %g tanh : tensor<?x8x32xf32>
    // CHECK: dp.gelu %{{.*}} : tensor<?x8x32xf32>
    %ge = dp.gelu %gt : tensor<?x8x32xf32>
    // CHECK: dp.silu
    %s = dp.silu %ge : tensor<?x8x32xf32>
    // CHECK: dp.relu
    %rl = dp.relu %s : tensor<?x8x32xf32>
    // CHECK: dp.mul %{{.*}}, %{{.*}} : tensor<?x8x32xf32>
    %p = dp.mul %rl, %u : tensor<?x8x32xf32>
    %d = dp.linear @down(%p) : tensor<?x8x32xf32> -> tensor<?x8x16xf32>
    %f = dp.rms_norm @n2(%d) : tensor<?x8x16xf32>
    %logits = dp.linear @head(%f) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    // CHECK: %[[L:.*]] = dp.cross_entropy %{{.*}}, %[[TGT]] per_sample = sum ignore_index = -1 : tensor<?x8x32xf32>, tensor<?x8xi32> -> tensor<?xf32>
    %loss = dp.cross_entropy %logits, %tgt per_sample = sum ignore_index = -1 : tensor<?x8x32xf32>, tensor<?x8xi32> -> tensor<?xf32>
    // CHECK: dp.return %[[L]] : tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

// CHECK-LABEL: dp.recipe @everything for @every_layer {
// CHECK-NEXT:    clip = #dp.clip<per_layer, max_norm = 0.5>,
// CHECK-NEXT:    noise = #dp.target<epsilon = 3.0, delta = 1.0e-06, generator = secure, accountant = rdp>,
// CHECK-NEXT:    sampling = #dp.poisson<rate = 0.015625, physical_batch = 4>,
// CHECK-NEXT:    optimizer = #dp.adamw<lr = 0.0003, beta1 = 0.8, beta2 = 0.95, eps = 1.0e-06, weight_decay = 0.1>,
// CHECK-NEXT:    schedule = #dp.schedule<warmup = 10, decay = cosine, min_lr_ratio = 0.1>,
// CHECK-NEXT:    steps = 100,
// CHECK-NEXT:    precision = #dp.precision<compute = f32, master = f64>,
// CHECK-NEXT:    shard = #dp.fsdp<unit = layer, reshard_after_forward = false, prefetch = 2>,
// CHECK-NEXT:    grid = @ranks,
// CHECK-NEXT:    seed = 7
// CHECK-NEXT:  }
dp.recipe @everything for @every_layer {
  clip = #dp.clip<per_layer, max_norm = 0.5>,
  noise = #dp.target<epsilon = 3, delta = 1.0e-6, generator = secure, accountant = rdp>,
  sampling = #dp.poisson<rate = 0.015625, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 3.0e-4, beta1 = 0.8, beta2 = 0.95, eps = 1.0e-6, weight_decay = 0.1>,
  schedule = #dp.schedule<warmup = 10, decay = cosine, min_lr_ratio = 0.1>,
  steps = 100,
  precision = #dp.precision<compute = f32, master = f64>,
  shard = #dp.fsdp<unit = layer, reshard_after_forward = false, prefetch = 2>,
  grid = @ranks,
  seed = 7
}

// DP off: no clipping, no noise.
// CHECK-LABEL: dp.recipe @no_dp for @every_layer {
// CHECK-NEXT:    clip = #dp.clip<none>,
// CHECK-NEXT:    noise = #dp.none,
dp.recipe @no_dp for @every_layer {
  clip = #dp.clip<none>,
  noise = #dp.none,
  sampling = #dp.shuffle<batch = 64, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 5
}

// Defaults are elided: sigma with the fast generator and the PLD accountant,
// momentum 0.9, a constant schedule, block units.
// CHECK-LABEL: dp.recipe @defaults for @every_layer {
// CHECK-NEXT:    clip = #dp.clip<automatic, max_norm = 1.0>,
// CHECK-NEXT:    noise = #dp.noise<sigma = 0.8, delta = 1.0e-05>,
// CHECK-NEXT:    sampling = #dp.shuffle<batch = 64, physical_batch = 4>,
// CHECK-NEXT:    optimizer = #dp.momentum<lr = 0.1, nesterov = true>,
// CHECK-NEXT:    schedule = #dp.schedule<>,
// CHECK-NEXT:    steps = 5,
// CHECK-NEXT:    shard = #dp.fsdp
// CHECK-NEXT:  }
dp.recipe @defaults for @every_layer {
  clip = #dp.clip<automatic, max_norm = 1.0, gamma = 0.01>,
  noise = #dp.noise<sigma = 0.8, delta = 1.0e-5, generator = fast, accountant = pld>,
  sampling = #dp.shuffle<batch = 64, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.1, momentum = 0.9, nesterov = true>,
  schedule = #dp.schedule<warmup = 0, decay = constant, min_lr_ratio = 0.0>,
  steps = 5,
  shard = #dp.fsdp<unit = block, reshard_after_forward = true, prefetch = 1>
}

// CHECK-LABEL: dp.recipe @sgd for @every_layer {
// CHECK:         clip = #dp.clip<flat, max_norm = 2.0>,
// CHECK-NEXT:    noise = #dp.noise<sigma = 0.0, delta = 1.0e-05, accountant = rdp>,
// CHECK-NEXT:    sampling = #dp.poisson<expected_batch = 128, physical_batch = 4>,
// CHECK:         optimizer = #dp.sgd<lr = 1.0, weight_decay = 0.5>,
// CHECK-NEXT:    schedule = #dp.schedule<warmup = 1>,
dp.recipe @sgd for @every_layer {
  clip = #dp.clip<flat, max_norm = 2>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5, accountant = rdp>,
  sampling = #dp.poisson<expected_batch = 128, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 1, weight_decay = 0.5>,
  schedule = #dp.schedule<warmup = 1>,
  steps = 1
}

// A classifier: rank-2 activations (one row per sample) and an MSE loss.
// CHECK-LABEL: dp.model @regression
dp.model @regression {
  dp.param @w : tensor<3x5xf64>
  dp.param @b : tensor<3xf64>
  // CHECK: dp.forward(%{{.*}}: tensor<16x5xf64>, %{{.*}}: tensor<16x3xf64>) -> tensor<16xf64>
  dp.forward(%x: tensor<16x5xf64>, %y: tensor<16x3xf64>) -> tensor<16xf64> {
    %p = dp.linear @w, @b(%x) : tensor<16x5xf64> -> tensor<16x3xf64>
    // CHECK: dp.mse %{{.*}}, %{{.*}} per_sample = sum : tensor<16x3xf64> -> tensor<16xf64>
    %l = dp.mse %p, %y per_sample = sum : tensor<16x3xf64> -> tensor<16xf64>
    dp.return %l : tensor<16xf64>
  }
}

// What Hugging Face models add: learned positions, Llama 3's rotary
// scaling, and the head tied to the embedding table (@emb read twice).
// CHECK-LABEL: dp.model @hf
dp.model @hf {
  dp.param @emb : tensor<32x16xf32>
  dp.param @pos : tensor<12x16xf32>
  dp.forward(%tok: tensor<?x8xi32>, %tgt: tensor<?x8xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x8xi32> -> tensor<?x8x16xf32>
    // CHECK: %[[X:.*]] = dp.position_embedding @pos(%{{.*}}) : tensor<?x8x16xf32>
    %x = dp.position_embedding @pos(%e) : tensor<?x8x16xf32>
    // CHECK: dp.attention %[[X]], %[[X]], %[[X]] {causal, heads = 2 : i64, rope, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 16>} : tensor<?x8x16xf32>, tensor<?x8x16xf32>
    %a = dp.attention %x, %x, %x {causal, heads = 2, rope, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 16>} : tensor<?x8x16xf32>, tensor<?x8x16xf32>
    // CHECK: dp.linear @emb(%{{.*}}) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    %logits = dp.linear @emb(%a) : tensor<?x8x16xf32> -> tensor<?x8x32xf32>
    %l = dp.cross_entropy %logits, %tgt : tensor<?x8x32xf32>, tensor<?x8xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// Which parameters train, LoRA, and the diagonal initializer of the LoRA
// scaling.
// CHECK-LABEL: dp.model @adapted
// CHECK: dp.param @s : tensor<3x3xf64> {init = #dp.diagonal<2.5>, trainable = false}
dp.model @adapted {
  dp.param @w : tensor<3x5xf64>
  dp.param @s : tensor<3x3xf64> {init = #dp.diagonal<2.5>, trainable = false}
  dp.forward(%x: tensor<16x5xf64>, %y: tensor<16x3xf64>) -> tensor<16xf64> {
    %p = dp.linear @w(%x) : tensor<16x5xf64> -> tensor<16x3xf64>
    %q = dp.linear @s(%p) : tensor<16x3xf64> -> tensor<16x3xf64>
    %l = dp.mse %q, %y : tensor<16x3xf64> -> tensor<16xf64>
    dp.return %l : tensor<16xf64>
  }
}
// CHECK-LABEL: dp.recipe @lora for @adapted {
// CHECK:         train = ["w*", "b?.n[12]"],
// CHECK-NEXT:    lora = #dp.lora<rank = 2, alpha = 4.0, targets = ["w"]>
dp.recipe @lora for @adapted {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 128, physical_batch = 16>,
  optimizer = #dp.sgd<lr = 1.0>,
  steps = 1,
  lora = #dp.lora<rank = 2, alpha = 4, targets = ["w"]>,
  train = ["w*", "b?.n[12]"]
}
// CHECK-LABEL: dp.recipe @users for @adapted {
// CHECK:         sampling = #dp.poisson<expected_batch = 128, physical_batch = 16>,
// CHECK-NEXT:    unit = #dp.unit<user, max_records = 4>,
// CHECK-NEXT:    optimizer = #dp.sgd<lr = 1.0>,
dp.recipe @users for @adapted {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 128, physical_batch = 16>,
  optimizer = #dp.sgd<lr = 1.0>,
  steps = 1,
  unit = #dp.unit<user, max_records = 4>
}
// CHECK-LABEL: dp.recipe @records for @adapted {
// CHECK:         unit = #dp.unit<record>,
dp.recipe @records for @adapted {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 128, physical_batch = 16>,
  optimizer = #dp.sgd<lr = 1.0>,
  steps = 1,
  unit = #dp.unit<record>
}
// CHECK-LABEL: dp.recipe @frozen for @adapted {
// CHECK:         freeze = ["s"]
dp.recipe @frozen for @adapted {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 128, physical_batch = 16>,
  optimizer = #dp.sgd<lr = 1.0>,
  steps = 1,
  freeze = ["s"]
}
