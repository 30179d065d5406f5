// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-fuse-norms | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-compile | FileCheck %s --check-prefix=CALLS

// Flat clipping: the bias norms join their weights' rank-1 norms, and the
// layer norm's scale and bias norms are added by its backward op.
dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32>
  dp.param @fc1.b : tensor<16xf32>
  dp.param @ln.g : tensor<16xf32>
  dp.param @ln.b : tensor<16xf32>
  dp.param @fc2.w : tensor<4x16xf32>
  dp.param @fc2.b : tensor<4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %n = dp.layer_norm @ln.g, @ln.b(%h) : tensor<?x16xf32>
    %o = dp.linear @fc2.w, @fc2.b(%n) : tensor<?x16xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @m
// CHECK:     %[[A:.*]] = dp.norm_rank1 %{{.*}}, %{{.*}} [@fc2.w, @fc2.b] {bias}
// CHECK:     %[[G:.*]] = dp.norm_rows %{{.*}} [@ln.g] {fused}
// CHECK:     %[[B:.*]] = dp.norm_rows %{{.*}} [@ln.b] {fused}
// CHECK:     %[[C:.*]] = dp.norm_rank1 %{{.*}}, %{{.*}} [@fc1.w, @fc1.b] {bias}
// CHECK-NOT: dp.norm_bias
// CHECK:     dp.norm_sum %[[A]], %[[G]], %[[B]], %[[C]] : tensor<2xf32>

// The lowering calls the fused kernels, all adding into one buffer.
// CALLS-LABEL: dprt.func @dp_microstep
// CALLS:      %[[N2:.*]] = dprt.alloc {bytes = 8 : i64, name = "n2"
// CALLS:      dprt.call "norm_rank1_bias"(%{{.*}}, %{{.*}}, %[[N2]])
// CALLS:      dprt.call "layer_norm_backward_norm"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[N2]])
// CALLS:      dprt.call "norm_rank1_bias"(%{{.*}}, %{{.*}}, %[[N2]])
// CALLS-NOT:  "norm_rows"
// CALLS-NOT:  "norm_bias"

// -----

// Per-layer clipping gives each parameter its own factor: the layer norm's
// scale and bias norms stay apart, and so do a weight and its bias.
dp.model @p {
  dp.param @fc1.w : tensor<16x8xf32>
  dp.param @fc1.b : tensor<16xf32>
  dp.param @ln.g : tensor<16xf32>
  dp.param @ln.b : tensor<16xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %n = dp.layer_norm @ln.g, @ln.b(%h) : tensor<?x16xf32>
    %l = dp.cross_entropy %n, %y : tensor<?x16xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @p {
  clip = #dp.clip<per_layer, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @p
// CALLS-LABEL: dprt.program @p.program
// CALLS: "norm_rows"
// CHECK-NOT: {fused}
// CHECK-NOT: {bias}
// CHECK:     dp.norm_rows %{{.*}} [@ln.g] :
// CHECK:     dp.norm_rows %{{.*}} [@ln.b] :
// CHECK:     dp.norm_rank1 %{{.*}}, %{{.*}} [@fc1.w] :
// CHECK:     dp.norm_bias %{{.*}} [@fc1.b] :
