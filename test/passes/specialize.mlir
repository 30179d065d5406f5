// RUN: dp-opt %s --split-input-file --dp-specialize | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize=ranks=4 | FileCheck %s --check-prefix=FOUR
// RUN: dp-opt %s --split-input-file --dp-specialize=batch=2 | FileCheck %s --check-prefix=TWO

// The sample dimension becomes the physical batch; a dynamic grid gets the
// requested number of ranks (1 by default).
// CHECK: shard.grid @ranks(shape = 1)
// FOUR: shard.grid @ranks(shape = 4)
shard.grid @ranks(shape = ?)
// CHECK-LABEL: dp.model @m
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // CHECK: dp.forward(%{{.*}}: tensor<16x8xf32>, %{{.*}}: tensor<16xi32>) -> tensor<16xf32>
  // With batch = 2 (a last, partly filled micro-step), the model and the
  // recipe's physical batch are 2 rows.
  // TWO: dp.forward(%{{.*}}: tensor<2x8xf32>, %{{.*}}: tensor<2xi32>) -> tensor<2xf32>
  // TWO: dp.linear @w(%{{.*}}) : tensor<2x8xf32> -> tensor<2x4xf32>
  // TWO: sampling = #dp.poisson<rate = 0.01, physical_batch = 2>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // CHECK: dp.linear @w(%{{.*}}) : tensor<16x8xf32> -> tensor<16x4xf32>
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    // CHECK: dp.cross_entropy {{.*}} -> tensor<16xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 16>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @ranks
}

// -----

// Without a grid, asking for ranks declares one.
// CHECK-LABEL: dp.model @nogrid
// FOUR: shard.grid @dp_ranks(shape = 4)
// FOUR: grid = @dp_ranks
dp.model @nogrid {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @nogrid {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
