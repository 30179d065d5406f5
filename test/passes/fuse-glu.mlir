// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-fuse-glu | FileCheck %s

// silu(gate) * up in the step and in the model's forward becomes dp.glu,
// and the derivatives dp-backward made for the pair become one dp.glu_grad
// (up * gelu(gate), the other operand order, too).
dp.model @m {
  dp.param @gate : tensor<8x4xf32>
  dp.param @up : tensor<8x4xf32>
  dp.param @gate2 : tensor<8x8xf32>
  dp.param @up2 : tensor<8x8xf32>
  dp.param @down : tensor<3x8xf32>
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %g = dp.linear @gate(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %u = dp.linear @up(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %s = dp.silu %g : tensor<?x8xf32>
    %p = dp.mul %s, %u : tensor<?x8xf32>
    %g2 = dp.linear @gate2(%p) : tensor<?x8xf32> -> tensor<?x8xf32>
    %u2 = dp.linear @up2(%p) : tensor<?x8xf32> -> tensor<?x8xf32>
    %a2 = dp.gelu %g2 tanh : tensor<?x8xf32>
    %p2 = dp.mul %u2, %a2 : tensor<?x8xf32>
    %o = dp.linear @down(%p2) : tensor<?x8xf32> -> tensor<?x3xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.forward
// CHECK-NOT:   dp.silu
// CHECK:       dp.glu silu %{{.*}}, %{{.*}} : tensor<2x8xf32>
// CHECK:       dp.glu gelu_tanh %{{.*}}, %{{.*}} : tensor<2x8xf32>
// CHECK-LABEL: dp.step
// CHECK-NOT:   dp.silu
// CHECK-NOT:   dp.gelu
// CHECK:       %[[G:.*]] = dp.linear @gate(
// CHECK:       %[[U:.*]] = dp.linear @up(
// CHECK:       %[[P:.*]] = dp.glu silu %[[G]], %[[U]] : tensor<2x8xf32>
// CHECK:       %[[G2:.*]] = dp.linear @gate2(%[[P]])
// CHECK:       %[[U2:.*]] = dp.linear @up2(%[[P]])
// CHECK:       dp.glu gelu_tanh %[[G2]], %[[U2]] : tensor<2x8xf32>
// CHECK-NOT:   dp.mul_grad
// CHECK-NOT:   dp.activation_grad
// CHECK:       %[[DG2:.*]], %[[DU2:.*]] = dp.glu_grad gelu_tanh %[[G2]], %[[U2]], %{{.*}} : tensor<2x8xf32>
// CHECK:       dp.linear_grad_input @up2(%[[DU2]])
// CHECK:       dp.linear_grad_input @gate2(%[[DG2]]) acc(
// CHECK:       %[[DG:.*]], %[[DU:.*]] = dp.glu_grad silu %[[G]], %[[U]], %{{.*}} : tensor<2x8xf32>
// CHECK:       dp.linear_grad_weight @up(%{{.*}}, %[[DU]])
// CHECK:       dp.linear_grad_weight @gate(%{{.*}}, %[[DG]])

// -----

// The activation's result read by another layer too: kept apart (the
// product's derivative needs it stored anyway).
dp.model @m {
  dp.param @gate : tensor<8x4xf32>
  dp.param @up : tensor<8x4xf32>
  dp.param @down : tensor<3x8xf32>
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %g = dp.linear @gate(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %u = dp.linear @up(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %s = dp.silu %g : tensor<?x8xf32>
    %p = dp.mul %s, %u : tensor<?x8xf32>
    %q = dp.add %p, %s : tensor<?x8xf32>
    %o = dp.linear @down(%q) : tensor<?x8xf32> -> tensor<?x3xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.forward
// CHECK:       dp.silu
// CHECK:       dp.mul
// CHECK-LABEL: dp.step
// CHECK-NOT:   dp.glu
// CHECK:       dp.silu
// CHECK:       dp.mul_grad
// CHECK:       dp.activation_grad silu

// -----

// A product of two linear layers (no activation) stays a product.
dp.model @m {
  dp.param @a : tensor<8x4xf32>
  dp.param @b : tensor<8x4xf32>
  dp.param @down : tensor<3x8xf32>
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %ha = dp.linear @a(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %hb = dp.linear @b(%x) : tensor<?x4xf32> -> tensor<?x8xf32>
    %p = dp.mul %ha, %hb : tensor<?x8xf32>
    %o = dp.linear @down(%p) : tensor<?x8xf32> -> tensor<?x3xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.step
// CHECK-NOT:   dp.glu
// CHECK:       dp.mul_grad
