// RUN: dp-opt %s --split-input-file --dp-specialize=ranks=3 --dp-backward --dp-clip-plan --dp-shard | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize=ranks=3 --dp-backward --dp-clip-plan --dp-shard=reshard=1 | FileCheck %s --check-prefix=AGAIN

// unit = layer: each layer's parameters form a unit (weight and bias
// together); with reshard_after_forward = false the forward gathers stay
// valid in backward: no backward all-gather. Units are padded to a multiple
// of 3 ranks x 64 elements.
dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32>
  dp.param @fc1.b : tensor<16xf32>
  dp.param @fc2.w : tensor<4x16xf32> {unit = "head"}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %o = dp.linear @fc2.w(%h) : tensor<?x16xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  shard = #dp.fsdp<unit = layer, reshard_after_forward = false>
}
// CHECK:      dp.unit @unit.fc1.w params [@fc1.w, @fc1.b] offsets [0, 128] {numel = 144 : i64, ranks = 3 : i64, shard = 64 : i64}
// CHECK-NEXT: dp.unit @unit.head params [@fc2.w] offsets [0] {numel = 64 : i64, ranks = 3 : i64, shard = 64 : i64}
// The step records the units whose forward gather serves their backward:
// the head (fc1 has no backward reader, its input needs no gradient).
// CHECK:      dp.step{{.*}}attributes {dp.kept_gathers = 1 : i64}
// CHECK:      dp.all_gather @unit.fc1.w forward
// CHECK:      dp.all_gather @unit.head forward
// CHECK-NOT:  backward
// CHECK:      dp.reduce_scatter @unit.head
// CHECK:      dp.reduce_scatter @unit.fc1.w

// dp-shard's reshard=1 (dpc --reshard-after-forward=on) gathers again
// whatever the recipe says; reshard=0 keeps the forward's gathers.
// AGAIN-NOT:  dp.kept_gathers
// AGAIN:      dp.all_gather @unit.fc1.w forward
// AGAIN:      dp.all_gather @unit.head forward
// AGAIN:      dp.all_gather @unit.head backward
