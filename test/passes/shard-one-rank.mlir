// On one rank a trainable unit of bf16 parameters keeps no bf16 copy: the
// step "gathers" it like a split unit, and the lowering casts its f32
// master into a buffer that lives while layers read it (gather_master, on
// the communication stream). f32 models (the parameters are the master)
// and frozen units are read in place. No reduce-scatter: one rank's
// gradients are whole.
// RUN: dp-opt %s --split-input-file --dp-specialize=ranks=1 --dp-backward --dp-clip-plan --dp-shard | FileCheck %s --check-prefix=SHARD
// RUN: dp-opt %s --split-input-file --dp-compile=ranks=1 | FileCheck %s --check-prefix=LOWER

dp.model @m {
  dp.param @fc1.w : tensor<16x8xbf16>
  dp.param @fc2.w : tensor<4x16xbf16> {unit = "head"}
  dp.forward(%x: tensor<?x8xbf16>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w(%x) : tensor<?x8xbf16> -> tensor<?x16xbf16>
    %o = dp.linear @fc2.w(%h) : tensor<?x16xbf16> -> tensor<?x4xbf16>
    %l = dp.cross_entropy %o, %y : tensor<?x4xbf16>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  shard = #dp.fsdp<unit = layer>
}
// SHARD:      dp.all_gather @unit.fc1.w forward
// SHARD:      dp.all_gather @unit.head forward
// SHARD:      dp.all_gather @unit.head backward
// SHARD-NOT:  dp.reduce_scatter
// SHARD-NOT:  dp.all_gather @unit.fc1.w backward

// LOWER-NOT:  dprt.global @unit.fc1.w.params
// LOWER-NOT:  dprt.global @unit.head.params
// LOWER:      dprt.global @unit.fc1.w.master
// LOWER:      dprt.func @dp_microstep
// LOWER:      dprt.call "gather_master"(%{{.*}}, %{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, #dprt.dtype<BF16>, 1 : index, {{.*}}], stream = 1
// LOWER-NOT:  "cast"
// LOWER:      dprt.func @dp_apply
// LOWER-NOT:  "cast"
// LOWER:      dprt.return
// LOWER:      "describe_unit"

// -----

// f32: the parameters are the master; nothing is gathered.
dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %o = dp.linear @fc1.w(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x16xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// SHARD-NOT:  dp.all_gather
// LOWER:      dprt.global @unit.fc1.params
// LOWER-NOT:  gather_master
