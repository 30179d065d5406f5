// RUN: dp-opt %s --split-input-file --dp-specialize --dp-fuse-residual --dp-backward | FileCheck %s
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-fuse-residual 2>&1 | FileCheck %s --check-prefix=ORDER

// Both residual connections of a block (x + o(a) and r + d(m), either
// operand order) become the linear layer's addend; the add's gradient
// becomes the addend's: the output gradient, added to what the norm's
// derivative gives x.
dp.model @m {
  dp.param @in : tensor<4x4xf32>
  dp.param @n1 : tensor<4xf32>
  dp.param @o : tensor<4x4xf32>
  dp.param @up : tensor<8x4xf32>
  dp.param @down : tensor<4x8xf32>
  dp.param @head : tensor<3x4xf32>
  dp.forward(%e: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %x = dp.linear @in(%e) : tensor<?x4xf32> -> tensor<?x4xf32>
    %h = dp.rms_norm @n1(%x) : tensor<?x4xf32>
    %a = dp.relu %h : tensor<?x4xf32>
    %p = dp.linear @o(%a) : tensor<?x4xf32> -> tensor<?x4xf32>
    %r = dp.add %x, %p : tensor<?x4xf32>
    %u = dp.linear @up(%r) : tensor<?x4xf32> -> tensor<?x8xf32>
    %d = dp.linear @down(%u) : tensor<?x8xf32> -> tensor<?x4xf32>
    %s = dp.add %d, %r : tensor<?x4xf32>
    %l0 = dp.linear @head(%s) : tensor<?x4xf32> -> tensor<?x3xf32>
    %l = dp.cross_entropy %l0, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.forward
// CHECK:       %[[X:.*]] = dp.linear @in(
// CHECK-NOT:   dp.add
// CHECK:       %[[R:.*]] = dp.linear @o(%{{.*}}) plus %[[X]] : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK:       %[[U:.*]] = dp.linear @up(%[[R]])
// CHECK:       %[[S:.*]] = dp.linear @down(%[[U]]) plus %[[R]] : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK:       dp.linear @head(%[[S]])
// CHECK-NOT:   dp.add
// CHECK-LABEL: dp.step
// CHECK:       %[[SX:.*]] = dp.linear @in(
// CHECK:       %[[SH:.*]] = dp.rms_norm @n1(%[[SX]])
// CHECK:       %[[SR:.*]] = dp.linear @o(%{{.*}}) plus %[[SX]]
// CHECK:       %[[SU:.*]] = dp.linear @up(%[[SR]])
// CHECK:       dp.linear @down(%[[SU]]) plus %[[SR]]
// CHECK-NOT:   dp.add
// CHECK:       %[[DS:.*]] = dp.linear_grad_input @head(
// CHECK:       dp.linear_grad_weight @down(%[[SU]], %[[DS]])
// CHECK:       %[[DU:.*]] = dp.linear_grad_input @down(%[[DS]])
// CHECK:       %[[DR:.*]] = dp.linear_grad_input @up(%[[DU]]) acc(%[[DS]] :
// CHECK:       dp.linear_grad_weight @o(%{{.*}}, %[[DR]])
// CHECK:       %[[DA:.*]] = dp.linear_grad_input @o(%[[DR]])
// CHECK:       %[[DH:.*]] = dp.activation_grad relu %[[SH]], %[[DA]]
// CHECK:       dp.rms_norm_grad @n1(%[[SX]], %[[SH]], %[[DH]]) acc(%[[DR]] :
// CHECK-NOT:   dp.add

// ORDER: dp-fuse-residual runs on the model's forward before dp-backward derives the step

// -----

// Not fused: the projection has another reader, the other operand comes
// after the linear layer, and a sum of two stored values.
dp.model @m {
  dp.param @o : tensor<4x4xf32>
  dp.param @v : tensor<4x4xf32>
  dp.param @head : tensor<3x4xf32>
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %p = dp.linear @o(%x) : tensor<?x4xf32> -> tensor<?x4xf32>
    %q = dp.relu %p : tensor<?x4xf32>
    %r = dp.add %x, %p : tensor<?x4xf32>
    %w = dp.linear @v(%x) : tensor<?x4xf32> -> tensor<?x4xf32>
    %later = dp.relu %x : tensor<?x4xf32>
    %s = dp.add %w, %later : tensor<?x4xf32>
    %t = dp.add %r, %q : tensor<?x4xf32>
    %u = dp.add %t, %s : tensor<?x4xf32>
    %l0 = dp.linear @head(%u) : tensor<?x4xf32> -> tensor<?x3xf32>
    %l = dp.cross_entropy %l0, %y : tensor<?x3xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.forward
// CHECK:       dp.linear @o(%{{.*}}) : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK:       dp.add
// CHECK:       dp.linear @v(%{{.*}}) : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK:       dp.add
// CHECK:       dp.add
// CHECK:       dp.add
// CHECK-NOT:   plus
