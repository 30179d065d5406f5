// RUN: dp-opt %s --split-input-file --dp-freeze | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-freeze --dp-backward --dp-clip-plan --dp-shard | FileCheck %s --check-prefix=STEP

// `freeze` patterns freeze what they match; the rest trains.
// CHECK-LABEL: dp.model @mlp
// CHECK: dp.param @fc1 : tensor<16x8xf32> {trainable = false}
// CHECK-NEXT: dp.param @fc1.b : tensor<16xf32> {trainable = false}
// CHECK-NEXT: dp.param @fc2 : tensor<4x16xf32>{{$}}
// A frozen layer gets no weight gradient and no norm; its input gradient is
// not needed either (nothing trainable is upstream). Frozen parameters form
// their own unit, which is never reduce-scattered.
// STEP-LABEL: dp.model @mlp
// STEP: dp.unit @unit.root.frozen params [@fc1]
// STEP-NEXT: dp.unit @unit.fc1.frozen params [@fc1.b]
// STEP-NEXT: dp.unit @unit.root params [@fc2]
// STEP-NOT: dp.linear_grad_weight @fc1
// STEP-NOT: dp.bias_grad @fc1.b
// STEP-NOT: dp.linear_grad_input
// STEP: dp.norm_rank1 {{.*}} [@fc2]
// STEP: dp.linear_grad_weight @fc2
dp.model @mlp {
  dp.param @fc1 : tensor<16x8xf32>
  dp.param @fc1.b : tensor<16xf32>
  dp.param @fc2 : tensor<4x16xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %a = dp.relu %h : tensor<?x16xf32>
    %o = dp.linear @fc2(%a) : tensor<?x16xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @mlp {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  freeze = ["fc1*"]
}
