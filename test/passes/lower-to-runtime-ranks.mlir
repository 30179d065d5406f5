// RUN: dp-opt %s --verify-diagnostics --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime

// A static grid the runtime cannot run (it counts ranks in an int32_t)
// stops the lowering instead of being cut to 32 bits.
shard.grid @g(shape = 4294967297)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op trains on a grid of 4294967297 ranks; the runtime runs on 1 to 2147483647 (run dp-specialize to fix a dynamic grid)}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}
