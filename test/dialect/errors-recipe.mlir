// RUN: dp-opt %s --split-input-file --verify-diagnostics
//
// One case per diagnostic of dp.recipe: its fields, the model it trains, the
// grid and the batch.
//
// A physical batch the tiny LM's activations cannot be held at: 2^63 - 1
// samples overflow int64 (and gave negative sizes downstream), 2^31 need
// 384 TiB for one activation (and died in the training program with
// std::bad_alloc).
// RUN: sed -e 's/physical_batch = 16/physical_batch = 9223372036854775807/' %examples/tinylm.mlir | not dp-opt 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: error: 'dp.recipe' op physical_batch = 9223372036854775807 overflows int64 in the bytes of result #0 of dp.linear ('tensor<?x128x384xf32>')
// OVERFLOW: note: the tensor is here
// RUN: sed -e 's/physical_batch = 16/physical_batch = 2147483648/' %examples/tinylm.mlir | not dp-opt 2>&1 | FileCheck %s --check-prefix=TOOBIG
// TOOBIG: error: 'dp.recipe' op physical_batch = 2147483648 makes result #0 of dp.linear ('tensor<?x128x384xf32>') take 384.0 TiB per rank, more than the 1 TiB that no device holds
// TOOBIG: note: the tensor is here
// TOOBIG-NEXT: %g0 = dp.linear @b0.gate

// The recipe rejects fields it does not know.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{unknown recipe field 'batch_size'; the fields are clip, noise, sampling, optimizer, schedule, steps, precision, shard, grid, seed, train, freeze, lora and unit}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, batch_size = 32
}

// -----

// A recipe without clipping is no DP recipe.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{requires attribute 'clip'}}
dp.recipe @r for @m {
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// A field holding the wrong kind of attribute.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{attribute 'optimizer' failed to satisfy constraint}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.poisson<rate = 0.01, physical_batch = 4>, steps = 10
}

// -----

// At least one step.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{attribute 'steps' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 0
}

// -----

// Seeds are non-negative.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{seed must be >= 0}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, seed = -1
}

// -----

// The recipe must name a model that exists.
// expected-error @+1 {{trains unknown model @missing}}
dp.recipe @r for @missing {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// A grid symbol must be declared.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{refers to unknown grid @gpus (declare it with shard.grid)}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @gpus
}

// -----

// FSDP shards over one axis, hybrid sharding over two: not three.
shard.grid @g(shape = 2x2x2)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{shards over a 1-D grid (FSDP) or a 2-D grid of replicas x shards (hybrid sharding); @g has shape 2x2x2}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// A grid without ranks.
shard.grid @g(shape = 0)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{grid @g has shape 0: every dimension needs at least one rank}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// The recipe cannot retype the model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{computes in 'bf16' but model @m is written in 'f32'}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, precision = #dp.precision<compute = bf16, master = f32>
}

// -----

// A model written for a fixed batch must get that batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<16x8xf32>, %y: tensor<16xi32>) -> tensor<16xf32> {
    %h = dp.linear @w(%x) : tensor<16x8xf32> -> tensor<16x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<16x4xf32>, tensor<16xi32> -> tensor<16xf32>
    dp.return %l : tensor<16xf32>
  }
}
// expected-error @+1 {{physical batch is 4 but model @m is written for batches of 16}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// A shuffled logical batch smaller than one physical batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{logical batch 2 is smaller than the physical batch 4}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 2, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// More steps than the accountant counts exactly in a double.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{steps = 9007199254740993 is above 2^53, the largest count the accountant holds exactly}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 9007199254740993
}

// -----

// A physical batch whose activations overflow int64: the input's 32 bytes per
// sample times 2^62 samples.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-note @+1 {{the tensor is here}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{physical_batch = 4611686018427387904 overflows int64 in the bytes of input #0 of the forward pass ('tensor<?x8xf32>')}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4611686018427387904>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// A physical batch whose largest activation no device holds: 4 MiB of logits
// per sample times 2^20 samples.
dp.model @m {
  dp.param @w : tensor<1024x8xf32>
  dp.forward(%x: tensor<?x1024x8xf32>, %y: tensor<?x1024xi32>) -> tensor<?xf32> {
    // expected-note @+1 {{the tensor is here}}
    %h = dp.linear @w(%x) : tensor<?x1024x8xf32> -> tensor<?x1024x1024xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x1024x1024xf32>, tensor<?x1024xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{physical_batch = 1048576 makes result #0 of dp.linear ('tensor<?x1024x1024xf32>') take 4.0 TiB per rank, more than the 1 TiB that no device holds}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 1048576>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// The samples of one physical batch over all ranks overflow int64.
shard.grid @g(shape = 4611686018427387904)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{physical_batch = 4 on 4611686018427387904 ranks overflows int64 in the samples of one physical batch}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// train and freeze together are ambiguous.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op gives both train and freeze; name the parameters that train or those that do not, not both}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  train = ["w"], freeze = ["w"]
}

// -----

// An empty pattern list.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op freeze must list at least one pattern}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  freeze = []
}

// -----

// A pattern that is not a glob.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op train pattern 'w[' is not a glob: invalid glob pattern, unmatched '['}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  train = ["w["]
}

// -----

// A warmup longer than the recipe's run.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{schedule warms up over 20 steps, more than the recipe's 10: the learning rate would never reach its peak}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>,
  schedule = #dp.schedule<warmup = 20, decay = cosine>, steps = 10
}

// -----

// A user's k slots must fit a physical batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op unit: max_records = 3 must divide the physical batch 4: a user's records fill k consecutive slots of one physical batch}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  unit = #dp.unit<user, max_records = 3>
}

// -----

// User-level DP samples users by Poisson sampling.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op unit: user-level DP samples users with Poisson sampling; #dp.shuffle draws records}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 8, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  unit = #dp.unit<user, max_records = 2>
}

// -----

// User-level DP needs clipping.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op unit: user-level DP bounds each user's gradient, which needs clipping; clip = #dp.clip<none> trains without DP}}
dp.recipe @r for @m {
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  unit = #dp.unit<user, max_records = 2>
}
