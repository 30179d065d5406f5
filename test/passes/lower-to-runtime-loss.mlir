// RUN: dp-opt %s --split-input-file --dp-compile | FileCheck %s
//
// dp-lower-to-runtime, losses: where nothing but a cross-entropy and its
// gradient read the logits and the gradient's seed (the step's mask) is
// there before the loss, one call makes the loss and, in place, the
// gradient (cross_entropy_forward_backward): the logits are read once.

dp.model @lm {
  dp.param @emb : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @out.w : tensor<16x8xf32> {init = #dp.normal<0.2>}
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %o = dp.linear @out.w(%x) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %o, %tgt per_sample = mean ignore_index = -1
        : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @lm {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 8, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      %[[MASK:.*]] = dprt.get_global @mask
// CHECK:      %[[LOGITS:.*]] = dprt.alloc {bytes = 1024 : i64, name = "linear"
// CHECK:      "linear_forward"(%{{.*}}, %{{.*}}, %[[LOGITS]])
// CHECK-NOT:  "cross_entropy_forward"(
// CHECK:      "cross_entropy_forward_backward"(%[[LOGITS]], %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 4, 4, 16, true, -1, #dprt.reduction<Mean>]}
// The gradient is in the logits' buffer, where the head's backward reads it.
// CHECK-NOT:  "cross_entropy_backward"
// CHECK:      "linear_backward_input"(%[[LOGITS]],
// CHECK-NOT:  "cross_entropy_backward"
// CHECK-LABEL: dprt.func @dp_apply
// Evaluation and generation have no gradient: the loss alone.
// CHECK-LABEL: dprt.func @dp_forward
// CHECK:      "cross_entropy_forward"(
// CHECK-NOT:  "cross_entropy_forward_backward"
// CHECK-LABEL: dprt.func @dp_describe

// -----

// Two losses read the same logits: each loss and gradient goes alone, and
// neither gradient overwrites the logits the other reads.
dp.model @lm2 {
  dp.param @emb : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @out.w : tensor<16x8xf32> {init = #dp.normal<0.2>}
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %o = dp.linear @out.w(%x) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %o, %tgt per_sample = mean ignore_index = -1
        : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    %m = dp.cross_entropy %o, %tok per_sample = sum
        : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    %s = dp.add %l, %m : tensor<?xf32>
    dp.return %s : tensor<?xf32>
  }
}
dp.recipe @r for @lm2 {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 8, physical_batch = 4>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-NOT:  "cross_entropy_forward_backward"
// CHECK:      "cross_entropy_forward"(%[[L:[0-9]+]],
// CHECK:      "cross_entropy_forward"(%[[L]],
// CHECK:      "cross_entropy_backward"(%[[L]], %{{.*}}, %{{.*}}, %{{.*}}, %[[D1:[0-9]+]])
// CHECK:      "cross_entropy_backward"(%[[L]], %{{.*}}, %{{.*}}, %{{.*}}, %[[D2:[0-9]+]])
// CHECK-NOT:  "cross_entropy_forward_backward"
// CHECK-LABEL: dprt.func @dp_apply
