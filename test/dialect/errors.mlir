// RUN: dp-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect
//
// One case per diagnostic of the dp dialect: attribute fields, the recipe,
// the model structure, the forward pass and each layer.

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
  // expected-error @+2 {{expected ::dpc::dp::ClipMode to be one of: flat, per_layer, automatic}}
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

// The recipe rejects fields it does not know.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{unknown recipe field 'batch_size'; the fields are clip, noise, sampling, optimizer, steps, precision, shard, grid and seed}}
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

// FSDP shards over one axis.
shard.grid @g(shape = 2x4)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{FSDP shards over a 1-D grid; @g has shape 2x4 (hybrid sharding is not supported yet)}}
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
// expected-error @+1 {{grid @g has no ranks}}
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

// Normal initializers need a non-negative deviation.
dp.model @m {
  // expected-error @+1 {{standard deviation must be >= 0, got -0.02}}
  dp.param @w : tensor<4x8xf32> {init = #dp.normal<-0.02>}
}

// -----

// Uniform initializers need a non-negative bound.
dp.model @m {
  // expected-error @+1 {{bound must be >= 0, got -1}}
  dp.param @w : tensor<4x8xf32> {init = #dp.uniform<-1.0>}
}

// -----

// An initializer must be one of the dp initializers.
dp.model @m {
  // expected-error @+1 {{init must be #dp.normal, #dp.uniform, #dp.zeros or #dp.ones, got 1.000000e+00 : f32}}
  dp.param @w : tensor<4x8xf32> {init = 1.0 : f32}
}

// -----

// Parameters are float tensors.
dp.model @m {
  // expected-error @+1 {{parameters are float tensors, got 'tensor<4x8xi32>'}}
  dp.param @w : tensor<4x8xi32>
}

// -----

// Parameters have static shapes.
dp.model @m {
  // expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
  dp.param @w : tensor<?x8xf32>
}

// -----

// An empty parameter.
dp.model @m {
  // expected-error @+1 {{parameter has no elements}}
  dp.param @w : tensor<0x8xf32>
}

// -----

// A named FSDP unit needs a name.
dp.model @m {
  // expected-error @+1 {{unit name must not be empty}}
  dp.param @w : tensor<4x8xf32> {unit = ""}
}

// -----

// Parameters live in a model.
// expected-error @+1 {{'dp.param' op expects parent op 'dp.model'}}
dp.param @w : tensor<4x8xf32>

// -----

// A model must have a forward pass.
// expected-error @+1 {{has no dp.forward}}
dp.model @m {
  dp.param @w : tensor<4x8xf32>
}

// -----

// A model has one forward pass.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
  // expected-error @+1 {{a model has one forward pass; the first is at}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Only parameters and the forward pass belong in a model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{cannot appear in a dp.model, which holds only dp.param and dp.forward}}
  shard.grid @g(shape = 2)
}

// -----

// Every parameter is used.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{parameter @spare is never read by the forward pass}}
  dp.param @spare : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Tied weights: one parameter read by two layers.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-note @+1 {{first read here}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    // expected-error @+1 {{reads parameter @emb which another layer already reads; tied weights are not supported yet}}
    %h = dp.linear @emb(%x) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One float type in a model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{parameter @e is 'bf16' but the model's other parameters are 'f32'; one model computes in one float type}}
  dp.param @e : tensor<16x8xbf16>
  dp.forward(%x: tensor<?x8xf32>, %t: tensor<?xi32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %unused = dp.embedding @e(%t) : tensor<?xi32> -> tensor<?x8xbf16>
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The forward pass returns one loss per sample, not several values.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{returns exactly one value, the per-sample loss}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> (tensor<?xf32>, tensor<?xf32>) {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l, %l : tensor<?xf32>, tensor<?xf32>
  }
}

// -----

// A batch-mean loss would hide the per-sample losses.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{must return a 1-D float tensor (one loss per sample), got 'tensor<?x4xf32>'}}
  dp.forward(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    dp.return %h : tensor<?x4xf32>
  }
}

// -----

// dp.return must return what dp.forward declares.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    // expected-error @+1 {{returns 'tensor<?x4xf32>' but the forward pass is declared to return 'tensor<?xf32>'}}
    dp.return %h : tensor<?x4xf32>
  }
}

// -----

// A forward pass without inputs has no samples.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{needs at least one input}}
  dp.forward() -> tensor<?xf32> {
    %l = "test.make_loss"() : () -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Inputs disagree on the number of samples.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{input #1 has 8 samples in its leading dimension but the forward pass has ?}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<8xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x4xf32>, tensor<8xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Only dp layers run in the forward pass.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    // expected-error @+1 {{is not a layer; dp.forward holds only dp layers}}
    %s = "test.scale"(%h) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %l = dp.cross_entropy %s, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A layer whose result has another number of samples.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.param @w : tensor<4x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{result #0 has 2 samples in its leading dimension but the forward pass has ?}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<2x4x8xf32>
    %h = dp.linear @w(%x) : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<2x4x4xf32>, tensor<?x4xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// dp.forward lives in a model.
// expected-error @+1 {{'dp.forward' op expects parent op 'dp.model'}}
dp.forward(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  %l = "test.loss"(%x) : (tensor<?x8xf32>) -> tensor<?xf32>
  dp.return %l : tensor<?xf32>
}

// -----

// A layer reading a parameter that does not exist.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{reads unknown parameter @v}}
    %h = dp.linear @v(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A layer reading a symbol that is not a parameter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  shard.grid @g(shape = 2)
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{@g is not a dp.param}}
    %h = dp.linear @g(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A weight of the wrong shape (out x in expected).
dp.model @m {
  dp.param @w : tensor<8x4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{weight @w has shape 8x4 but this layer needs 4x8}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A bias of the wrong size.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{bias @b has shape 8 but this layer needs 4}}
    %h = dp.linear @w, @b(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Parameters and activations share one float type.
dp.model @m {
  dp.param @w : tensor<4x8xbf16>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{parameter @w is 'bf16' but the activations are 'f32'}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Linear layers take samples x features or samples x tokens x features.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x2x3x8xf32>, %y: tensor<?x2x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input must be samples x features or samples x tokens x features, got rank 4}}
    %h = dp.linear @w(%x) : tensor<?x2x3x8xf32> -> tensor<?x2x3x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x2x3x4xf32>, tensor<?x2x3xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A linear layer does not change the element type.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input and output element types differ}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xbf16>
    %l = "test.loss"(%h, %y) : (tensor<?x4xbf16>, tensor<?xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A linear layer keeps the sample and token dimensions.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x3x8xf32>, %y: tensor<?x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input ?x3x8 and output ?x5x4 must agree on all dimensions but the last}}
    %h = dp.linear @w(%x) : tensor<?x3x8xf32> -> tensor<?x5x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x5x4xf32>, tensor<?x3xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An embedding table is vocabulary x width.
dp.model @m {
  dp.param @emb : tensor<16xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{table @emb must be 2-D (vocabulary x width), got 16}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An embedding's output is the token shape followed by the width.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{output shape ?x4x16 must be the token shape followed by the table width, ?x4x8}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Token ids are integers.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xf32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
    %x = dp.embedding @emb(%t) : tensor<?x4xf32> -> tensor<?x4x8xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x8xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A normalization scale spans the last dimension.
dp.model @m {
  dp.param @g : tensor<4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{scale @g has shape 4 but this layer needs 8}}
    %h = dp.rms_norm @g(%x) : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Normalization needs eps > 0 so that a zero row does not divide by zero.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be > 0, got 0}}
    %h = dp.rms_norm @g(%x) {eps = 0.0} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Normalization needs a feature dimension besides the samples.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{input needs a sample and a feature dimension}}
    %h = dp.rms_norm @g(%x) : tensor<8xf32>
    %l = "test.loss"(%h, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// A layer-norm bias spans the last dimension.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.param @b : tensor<3xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{bias @b has shape 3 but this layer needs 8}}
    %h = dp.layer_norm @g, @b(%x) : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Layer norm needs eps > 0.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be > 0, got -1e-05}}
    %h = dp.layer_norm @g(%x) {eps = -1.0e-5} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Layer norm needs a feature dimension besides the samples.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{input needs a sample and a feature dimension}}
    %h = dp.layer_norm @g(%x) : tensor<8xf32>
    %l = "test.loss"(%h, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// Attention takes samples x tokens x features.
dp.model @m {
  dp.forward(%q: tensor<?x8xf32>, %k: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query and key must be samples x tokens x features}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x8xf32>, tensor<?x8xf32>
    %l = dp.mse %a, %q : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query and key have the same samples and tokens.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x5x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query ?x4x8 and key ?x5x8 must have the same samples and tokens}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x4x8xf32>, tensor<?x5x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query and key share an element type.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xbf16>) -> tensor<?xf32> {
    // expected-error @+1 {{query and key element types differ}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x4x8xf32>, tensor<?x4x8xbf16>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The query width splits into whole heads.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query width 8 is not divisible by 3 heads}}
    %a = dp.attention %q, %q, %q {heads = 3} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query heads group evenly over key/value heads.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x6xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{4 query heads cannot be grouped over 3 key/value heads}}
    %a = dp.attention %q, %k, %k {heads = 4, kv_heads = 3} : tensor<?x4x8xf32>, tensor<?x4x6xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Keys hold kv_heads heads of the query head size.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{key width 8 must be kv_heads x head size = 1 x 4}}
    %a = dp.attention %q, %k, %k {heads = 2, kv_heads = 1} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Rotary embeddings rotate pairs of features.
dp.model @m {
  dp.forward(%q: tensor<?x4x6xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rotary embedding needs an even head size, got 3}}
    %a = dp.attention %q, %q, %q {heads = 2, rope} : tensor<?x4x6xf32>, tensor<?x4x6xf32>
    %l = dp.mse %a, %q : tensor<?x4x6xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The rotary base is positive.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rope_theta must be > 0}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_theta = 0.0} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// At least one head.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    %a = dp.attention %q, %q, %q {heads = 0} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Cross-entropy takes samples x classes or samples x tokens x vocabulary.
dp.model @m {
  dp.forward(%x: tensor<?x2x3x4xf32>, %y: tensor<?x2x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{logits must be samples x classes or samples x tokens x vocabulary}}
    %l = dp.cross_entropy %x, %y : tensor<?x2x3x4xf32>, tensor<?x2x3xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One target per token.
dp.model @m {
  dp.forward(%x: tensor<?x3x4xf32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{targets ?x4 must match the logits ?x3x4 without their last dimension}}
    %l = dp.cross_entropy %x, %y : tensor<?x3x4xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Per-sample losses of f32 models are f32.
dp.model @m {
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf64> {
    // expected-error @+1 {{the per-sample loss must be 'f32', got 'f64'}}
    %l = dp.cross_entropy %x, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf64>
    dp.return %l : tensor<?xf64>
  }
}

// -----

// One loss per sample.
dp.model @m {
  dp.forward(%x: tensor<8x4xf32>, %y: tensor<8xi32>) -> tensor<8xf32> {
    // expected-error @+1 {{the loss has 4 entries but the batch has 8 samples}}
    %l = dp.cross_entropy %x, %y : tensor<8x4xf32>, tensor<8xi32> -> tensor<4xf32>
    %m = "test.widen"(%l) : (tensor<4xf32>) -> tensor<8xf32>
    dp.return %m : tensor<8xf32>
  }
}

// -----

// A regression prediction has features.
dp.model @m {
  dp.forward(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{prediction needs a sample and a feature dimension}}
    %l = dp.mse %x, %x : tensor<8xf32> -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// Residual sums need equal types.
dp.model @m {
  // expected-note @+1 {{prior use here}}
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{use of value '%y' expects different type than prior uses: 'tensor<?x4xf32>' vs 'tensor<?x8xf32>'}}
    %s = dp.add %x, %y : tensor<?x4xf32>
    %l = dp.mse %s, %x : tensor<?x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// GELU has two forms.
dp.model @m {
  dp.forward(%x: tensor<?x4xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{expected ':'}}
    %a = dp.gelu %x sigmoid : tensor<?x4xf32>
    %l = dp.mse %a, %x : tensor<?x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// dp.return belongs to dp.forward.
dp.model @m {
  // expected-error @+1 {{'dp.return' op expects parent op 'dp.forward'}}
  dp.return
}
