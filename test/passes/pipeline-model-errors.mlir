// RUN: dp-opt %s --split-input-file --verify-diagnostics --dp-compile

// Nothing is trainable: there is nothing to clip or to train.
dp.model @frozen {
  dp.param @w : tensor<4x8xf32> {trainable = false}
  // expected-error @+1 {{has no trainable parameter to clip}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @frozen {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// The regression target must be data, not computed from parameters.
dp.model @target {
  dp.param @w : tensor<4x8xf32>
  dp.param @v : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>) -> tensor<?xf32> {
    %p = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %t = dp.linear @v(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    // expected-error @+1 {{differentiating through the regression target is not supported}}
    %l = dp.mse %p, %t : tensor<?x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @target {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// f16 is not in the runtime.
// expected-error @+1 {{f16 is not supported by the runtime yet; use bf16, f32 or f64}}
dp.model @half {
  dp.param @w : tensor<4x8xf16>
  dp.forward(%x: tensor<?x8xf16>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf16> -> tensor<?x4xf16>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf16>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @half {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// f32 models keep f32 master weights.
dp.model @master {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{the runtime keeps master weights in 'f32' for 'f32' models; master = 'f64' is not supported yet}}
dp.recipe @r for @master {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  precision = #dp.precision<compute = f32, master = f64>
}

// -----

// Token ids of the runtime are int32.
dp.model @wide {
  dp.param @e : tensor<16x4xf32>
  dp.forward(%t: tensor<?x3xi64>, %y: tensor<?x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{the runtime reads int32 token ids}}
    %x = dp.embedding @e(%t) : tensor<?x3xi64> -> tensor<?x3x4xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x3x4xf32>, tensor<?x3xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @wide {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
