// RUN: dp-opt %s --split-input-file --verify-diagnostics --dp-specialize=batch=3

// dp-specialize's batch (dpc compiles a step's last, partly filled
// micro-step for fewer rows, --last-batch-sizes) must keep a user's slots
// together under user-level DP...
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{cannot be compiled for 3 rows: give 1 to its physical batch 4, a multiple of max_records = 2}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 8, physical_batch = 4>,
  unit = #dp.unit<user, max_records = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// ... and be no larger than the physical batch.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{cannot be compiled for 3 rows: give 1 to its physical batch 2}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 8, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
