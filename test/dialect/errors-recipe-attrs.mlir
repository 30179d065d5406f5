// RUN: dp-opt %s --split-input-file --verify-diagnostics
//
// One case per diagnostic of the recipe's attributes: clipping, noise,
// sampling, optimizers, precision and the FSDP policy.

// max_norm must be positive.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  // expected-error @+1 {{max_norm must be > 0, got 0}}
  clip = #dp.clip<flat, max_norm = 0.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative clipping bound.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  // expected-error @+1 {{max_norm must be > 0, got -1}}
  clip = #dp.clip<per_layer, max_norm = -1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// Automatic clipping needs gamma > 0.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  // expected-error @+1 {{gamma must be > 0, got 0}}
  clip = #dp.clip<automatic, max_norm = 1.0, gamma = 0.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An unknown clipping mode.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  // expected-error @+2 {{expected ::dpc::dp::ClipMode to be one of: flat, per_layer, automatic, none}}
  // expected-error @+1 {{failed to parse DP_ClipAttr parameter 'mode'}}
  clip = #dp.clip<median, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative noise multiplier.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{sigma must be >= 0, got -0.5}}
  noise = #dp.noise<sigma = -0.5, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// delta of the reported epsilon must be in (0, 1).
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{delta must lie in (0, 1), got 1.5}}
  noise = #dp.noise<sigma = 1.0, delta = 1.5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// delta = 0 promises too much.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{delta must lie in (0, 1), got 0}}
  noise = #dp.target<epsilon = 1.0, delta = 0.0>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A target epsilon must be positive.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{epsilon must be > 0, got 0}}
  noise = #dp.target<epsilon = 0.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative epsilon.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{epsilon must be > 0, got -3}}
  noise = #dp.target<epsilon = -3.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An unknown noise generator.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+2 {{expected one of [fast, secure] for counter-based generator of the Gaussian noise, got: mersenne}}
  // expected-error @+1 {{failed to parse DP_NoiseAttr parameter 'generator'}}
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5, generator = mersenne>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A sampling rate above 1.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{sampling rate must lie in (0, 1], got 1.5}}
  sampling = #dp.poisson<rate = 1.5, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative sampling rate.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{sampling rate must lie in (0, 1], got -0.1}}
  sampling = #dp.poisson<rate = -0.1, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// Rate and expected batch together.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{give exactly one of expected_batch and rate}}
  sampling = #dp.poisson<rate = 0.1, expected_batch = 10, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// Neither rate nor expected batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{give exactly one of expected_batch and rate}}
  sampling = #dp.poisson<physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative expected batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{expected_batch must be >= 1, got -5}}
  sampling = #dp.poisson<expected_batch = -5, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A physical batch below 1.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{physical_batch must be >= 1, got 0}}
  sampling = #dp.poisson<rate = 0.01, physical_batch = 0>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A shuffled batch below 1.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{batch must be >= 1, got 0}}
  sampling = #dp.shuffle<batch = 0, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A learning rate of 0.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{lr must be > 0, got 0}}
  optimizer = #dp.sgd<lr = 0.0>,
  steps = 10
}

// -----

// Negative weight decay.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{weight_decay must be >= 0, got -0.1}}
  optimizer = #dp.sgd<lr = 0.1, weight_decay = -0.1>,
  steps = 10
}

// -----

// Momentum of 1 never forgets.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{momentum must lie in [0, 1), got 1}}
  optimizer = #dp.momentum<lr = 0.1, momentum = 1.0>,
  steps = 10
}

// -----

// nesterov takes a boolean.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+2 {{expected 'true' or 'false'}}
  // expected-error @+1 {{failed to parse DP_MomentumAttr parameter 'nesterov'}}
  optimizer = #dp.momentum<lr = 0.1, nesterov = yes>,
  steps = 10
}

// -----

// beta1 must be below 1.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{beta1 must lie in [0, 1), got 1}}
  optimizer = #dp.adamw<lr = 0.1, beta1 = 1.0>,
  steps = 10
}

// -----

// beta2 must be non-negative.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{beta2 must lie in [0, 1), got -0.5}}
  optimizer = #dp.adamw<lr = 0.1, beta2 = -0.5>,
  steps = 10
}

// -----

// AdamW eps must be positive.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{eps must be > 0, got 0}}
  optimizer = #dp.adamw<lr = 0.1, eps = 0.0>,
  steps = 10
}

// -----

// An unknown optimizer field.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{duplicate or unknown struct parameter name: momentum}}
  optimizer = #dp.adamw<lr = 0.1, momentum = 0.9>,
  steps = 10
}

// -----

// An unknown optimizer.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{unknown attribute `lamb` in dialect `dp`}}
  optimizer = #dp.lamb<lr = 0.1>,
  steps = 10
}

// -----

// Integer compute types do not train.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  // expected-error @+1 {{compute type must be f64, f32, bf16 or f16, got 'i32'}}
  precision = #dp.precision<compute = i32, master = f32>
}

// -----

// Master copies in bf16 lose updates.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  // expected-error @+1 {{master type must be f32 or f64, got 'bf16'}}
  precision = #dp.precision<compute = bf16, master = bf16>
}

// -----

// Master narrower than compute.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  // expected-error @+1 {{master type 'f32' is narrower than the compute type 'f64'}}
  precision = #dp.precision<compute = f64, master = f32>
}

// -----

// Negative prefetch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  // expected-error @+1 {{prefetch must be >= 0, got -1}}
  shard = #dp.fsdp<prefetch = -1>
}

// -----

// Unknown FSDP unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  // expected-error @+2 {{expected one of [block, layer] for granularity of FSDP units, got: tensor}}
  // expected-error @+1 {{failed to parse DP_FSDPAttr parameter 'unit'}}
  shard = #dp.fsdp<unit = tensor>
}

// -----

// Attributes are verified as they are parsed, before the recipe's model is
// looked up: the cases from here on need no model.

// An infinite clipping bound.
dp.recipe @r for @m {
  // expected-error @+1 {{max_norm must be finite, got inf}}
  clip = #dp.clip<flat, max_norm = 1.0e400>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite stability constant of automatic clipping.
dp.recipe @r for @m {
  // expected-error @+1 {{gamma must be finite, got inf}}
  clip = #dp.clip<automatic, max_norm = 1.0, gamma = 1.0e400>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite noise multiplier.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{sigma must be finite, got inf}}
  noise = #dp.noise<sigma = 1.0e400, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite delta.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{delta must be finite, got inf}}
  noise = #dp.noise<sigma = 1.0, delta = 1.0e400>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite target epsilon.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+1 {{epsilon must be finite, got inf}}
  noise = #dp.target<epsilon = 1.0e400, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite sampling rate.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{sampling rate must be finite, got inf}}
  sampling = #dp.poisson<rate = 1.0e400, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An expected batch the driver cannot count exactly in a double.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{expected_batch = 9007199254740993 is above 2^53, the largest count the driver and the accountant hold exactly}}
  sampling = #dp.poisson<expected_batch = 9007199254740993, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A shuffled batch the driver cannot count exactly in a double.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  // expected-error @+1 {{batch = 9223372036854775807 is above 2^53, the largest count the driver and the accountant hold exactly}}
  sampling = #dp.shuffle<batch = 9223372036854775807, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// An infinite learning rate.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{lr must be finite, got inf}}
  optimizer = #dp.sgd<lr = 1.0e400>,
  steps = 10
}

// -----

// Infinite weight decay.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{weight_decay must be finite, got inf}}
  optimizer = #dp.sgd<lr = 0.1, weight_decay = 1.0e400>,
  steps = 10
}

// -----

// Infinite momentum.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{momentum must be finite, got inf}}
  optimizer = #dp.momentum<lr = 0.1, momentum = 1.0e400>,
  steps = 10
}

// -----

// beta1 of minus infinity.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{beta1 must be finite, got -inf}}
  optimizer = #dp.adamw<lr = 0.1, beta1 = -1.0e400>,
  steps = 10
}

// -----

// An infinite beta2.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{beta2 must be finite, got inf}}
  optimizer = #dp.adamw<lr = 0.1, beta2 = 1.0e400>,
  steps = 10
}

// -----

// An infinite AdamW eps.
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  // expected-error @+1 {{eps must be finite, got inf}}
  optimizer = #dp.adamw<lr = 0.1, eps = 1.0e400>,
  steps = 10
}

// -----

// DP off takes no clipping bound.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  // expected-error @+1 {{#dp.clip<none> clips nothing and takes no max_norm or gamma}}
  clip = #dp.clip<none, max_norm = 1.0>,
  noise = #dp.none,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// Noise on unclipped gradients protects nothing.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op adds noise to unclipped gradients: with clip = #dp.clip<none> a sample's gradient is unbounded, so noise protects nothing; use noise = #dp.none for training without DP, or clip the gradients}}
dp.recipe @r for @m {
  clip = #dp.clip<none>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A target epsilon without clipping is refused the same way.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{adds noise to unclipped gradients}}
dp.recipe @r for @m {
  clip = #dp.clip<none>,
  noise = #dp.target<epsilon = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// Clipping without noise is neither private nor the baseline.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op clips gradients but adds no noise: without noise the clipped sum is released as it is, so the run is not differentially private and the per-sample norms buy nothing; use clip = #dp.clip<none> with noise = #dp.none for training without DP, or add noise}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.none,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A LoRA rank must be positive.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{lora rank must be > 0, got 0}}
  lora = #dp.lora<rank = 0, alpha = 8.0, targets = ["w"]>
}

// -----

// A LoRA alpha must be positive.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{lora alpha must be > 0, got -1}}
  lora = #dp.lora<rank = 2, alpha = -1.0, targets = ["w"]>
}

// -----

// LoRA needs a target.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{lora targets must name at least one module}}
  lora = #dp.lora<rank = 2, alpha = 2.0, targets = []>
}

// -----

// Targets are strings.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{lora targets must be non-empty strings, got 3 : i64}}
  lora = #dp.lora<rank = 2, alpha = 2.0, targets = [3]>
}

// -----

// An unknown accountant.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  // expected-error @+2 {{expected one of [pld, rdp] for how the privacy loss of the steps is accounted, got: moments}}
  // expected-error @+1 {{failed to parse DP_TargetAttr parameter 'accountant'}}
  noise = #dp.target<epsilon = 3.0, delta = 1.0e-5, accountant = moments>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}

// -----

// A negative warmup.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  // expected-error @+1 {{warmup must be >= 0 steps, got -5}}
  schedule = #dp.schedule<warmup = -5>,
  steps = 10
}

// -----

// A final learning-rate ratio above 1.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  // expected-error @+1 {{min_lr_ratio must lie in [0, 1], got 1.5}}
  schedule = #dp.schedule<decay = cosine, min_lr_ratio = 1.5>,
  steps = 10
}

// -----

// A negative final learning-rate ratio.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  // expected-error @+1 {{min_lr_ratio must lie in [0, 1], got -0.1}}
  schedule = #dp.schedule<decay = linear, min_lr_ratio = -0.1>,
  steps = 10
}

// -----

// A final ratio without a decay to reach it.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  // expected-error @+1 {{min_lr_ratio = 0.1 has no effect with decay = constant; give decay = linear or cosine}}
  schedule = #dp.schedule<warmup = 2, min_lr_ratio = 0.1>,
  steps = 10
}

// -----

// An unknown decay.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>,
  // expected-error @+2 {{expected one of [constant, linear, cosine] for how the learning rate decays after its warmup, got: exponential}}
  // expected-error @+1 {{failed to parse DP_ScheduleAttr parameter 'decay'}}
  schedule = #dp.schedule<decay = exponential>,
  steps = 10
}

// -----

// max_records must be at least one.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{max_records must be >= 1, got 0}}
  unit = #dp.unit<user, max_records = 0>
}

// -----

// max_records belongs to the user unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+1 {{max_records = 2 is for the user unit; a record is one record}}
  unit = #dp.unit<record, max_records = 2>
}

// -----

// An unknown unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  // expected-error @+2 {{expected ::dpc::dp::UnitKind to be one of: record, user}}
  // expected-error @+1 {{failed to parse DP_PrivacyUnitAttr parameter 'kind'}}
  unit = #dp.unit<person>
}
