// RUN: dp-opt %s --split-input-file --dp-compile | FileCheck %s

// A SwiGLU's backward through its down projection: the projection's input
// gradient, which only the GLU's gradient reads right after it, and that
// gradient lower to one glu_backward_product (dz, the down weight, dy's
// buffer for a backend that stores the product, dgate, dup, the
// rematerialized GLU output; rows 2 x 64, width 32, depth 16), with no
// linear_backward_input of its own.
dp.model @m {
  dp.param @gate : tensor<32x16xf32>
  dp.param @up : tensor<32x16xf32>
  dp.param @down : tensor<16x32xf32>
  dp.param @head : tensor<8x16xf32>
  dp.forward(%x: tensor<?x64x16xf32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %g = dp.linear @gate(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %u = dp.linear @up(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %s = dp.silu %g : tensor<?x64x32xf32>
    %p = dp.mul %s, %u : tensor<?x64x32xf32>
    %y = dp.linear @down(%p) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %o = dp.linear @head(%y) : tensor<?x64x16xf32> -> tensor<?x64x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xf32>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 4, seed = 1
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK: "linear_backward_input"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 128, 16, 8, false]}
// CHECK-NOT: "linear_backward_input"
// CHECK-NOT: "glu_backward"(
// CHECK: "glu_backward_product"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[GLU:.*]]) {args = [#dprt.dtype<F32>, #dprt.activation<Silu>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 5 : index, 6 : index, 7 : index, 128, 32, 16]}
// CHECK-NOT: "linear_backward_input"
// CHECK: "linear_weight_grad"(%[[GLU]],
// CHECK-LABEL: dprt.func @dp_apply

// -----

// The GLU's output read by two projections: its gradient is their input
// gradients' sum (the second accumulates onto the first), which the GLU's
// gradient reads; the products and glu_backward stay apart.
dp.model @m {
  dp.param @gate : tensor<32x16xf32>
  dp.param @up : tensor<32x16xf32>
  dp.param @down : tensor<16x32xf32>
  dp.param @down2 : tensor<16x32xf32>
  dp.param @head : tensor<8x16xf32>
  dp.forward(%x: tensor<?x64x16xf32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %g = dp.linear @gate(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %u = dp.linear @up(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %s = dp.silu %g : tensor<?x64x32xf32>
    %p = dp.mul %s, %u : tensor<?x64x32xf32>
    %y = dp.linear @down(%p) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %y2 = dp.linear @down2(%p) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %z = dp.add %y, %y2 : tensor<?x64x16xf32>
    %o = dp.linear @head(%z) : tensor<?x64x16xf32> -> tensor<?x64x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xf32>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 4, seed = 1
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-NOT: "glu_backward_product"
// CHECK: "linear_backward_input"({{.*}}) {args = [{{.*}}, 128, 32, 16, false]}
// CHECK: "linear_backward_input"({{.*}}) {args = [{{.*}}, 128, 32, 16, true]}
// CHECK: "glu_backward"(
// CHECK-LABEL: dprt.func @dp_apply
