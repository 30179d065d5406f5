// A small MLP classifier in f64 for the program-level tests
// (test/programs): 6 features, two hidden layers with biases, LayerNorm +
// GELU (erf) after the first and ReLU after the second, 4 classes.
// One recipe per clipping mode and optimizer: the tests compile each with
// `dpc --recipe NAME [--ranks N]`, read the recipe's numbers from this file
// and compare the trained parameters with the f64 reference
// (test/reference).

shard.grid @ranks(shape = ?)

dp.model @mlp attributes {features = 6, classes = 4} {
  dp.param @fc1.w : tensor<16x6xf64> {init = #dp.normal<0.4>}
  dp.param @fc1.b : tensor<16xf64> {init = #dp.normal<0.1>}
  dp.param @ln.g : tensor<16xf64> {init = #dp.uniform<1.5>}
  dp.param @ln.b : tensor<16xf64> {init = #dp.normal<0.1>}
  dp.param @fc2.w : tensor<12x16xf64> {init = #dp.normal<0.3>}
  dp.param @fc2.b : tensor<12xf64> {init = #dp.normal<0.1>}
  dp.param @fc3.w : tensor<4x12xf64> {init = #dp.normal<0.3>}
  dp.param @fc3.b : tensor<4xf64>

  dp.forward(%x: tensor<?x6xf64>, %label: tensor<?xi32>) -> tensor<?xf64> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x6xf64> -> tensor<?x16xf64>
    %n = dp.layer_norm @ln.g, @ln.b(%h) {eps = 1.0e-5} : tensor<?x16xf64>
    %a = dp.gelu %n : tensor<?x16xf64>
    %h2 = dp.linear @fc2.w, @fc2.b(%a) : tensor<?x16xf64> -> tensor<?x12xf64>
    %a2 = dp.relu %h2 : tensor<?x12xf64>
    %logits = dp.linear @fc3.w, @fc3.b(%a2) : tensor<?x12xf64> -> tensor<?x4xf64>
    %loss = dp.cross_entropy %logits, %label : tensor<?x4xf64>, tensor<?xi32> -> tensor<?xf64>
    dp.return %loss : tensor<?xf64>
  }
}

dp.recipe @flat_sgd for @mlp {
  clip = #dp.clip<flat, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

dp.recipe @per_layer_sgd for @mlp {
  clip = #dp.clip<per_layer, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

dp.recipe @automatic_sgd for @mlp {
  clip = #dp.clip<automatic, max_norm = 2.5, gamma = 0.01>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

dp.recipe @flat_momentum for @mlp {
  clip = #dp.clip<flat, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.3, momentum = 0.9, nesterov = false, weight_decay = 0.01>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

// DP off: the same step without norms, clip factors or noise.
dp.recipe @nodp_momentum for @mlp {
  clip = #dp.clip<none>,
  noise = #dp.none,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.momentum<lr = 0.3, momentum = 0.9, nesterov = false, weight_decay = 0.01>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

dp.recipe @flat_adamw for @mlp {
  clip = #dp.clip<flat, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 12, physical_batch = 4>,
  optimizer = #dp.adamw<lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.1>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}

// Expected batch 1: about a third of the steps have an empty logical batch
// (the noise-only tests).
dp.recipe @sparse_sgd for @mlp {
  clip = #dp.clip<flat, max_norm = 2.5>,
  noise = #dp.noise<sigma = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 1, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.5, weight_decay = 0.0>,
  steps = 5,
  precision = #dp.precision<compute = f64, master = f64>,
  shard = #dp.fsdp<unit = layer>,
  grid = @ranks
}
