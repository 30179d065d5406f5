// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-shard --dp-lower-to-runtime 2>&1 | FileCheck %s
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-lower-to-runtime 2>&1 | FileCheck %s --check-prefix=EARLY
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime=backend=tpu 2>&1 | FileCheck %s --check-prefix=BACKEND

// Skipping dp-clip-plan leaves unclipped weight gradients: the lowering
// refuses to build a program that would sum them.
// CHECK: error: 'dp.linear_grad_weight' op has no clip factor: run dp-clip-plan; the program never sums unclipped gradients
// EARLY: error: 'dp.model' op needs dp.step and dp.unit: run dp-backward, dp-clip-plan and dp-shard first
// The backend is an enum option: the option parser names the values.
// BACKEND: for the --backend option: Cannot find option named 'tpu'!
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
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
