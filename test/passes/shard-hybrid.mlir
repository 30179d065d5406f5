// Hybrid sharding on a 2-D grid of replicas x shards: dp-specialize fixes
// the dynamic dimension from the number of ranks (6 ranks: 2 x 3), dp-shard
// splits the units over the 3 ranks of a replica and marks the 2 replicas,
// the step keeps the collectives of 3-rank FSDP, and dp_apply sums each
// trainable unit's gradient shard over the replicas (one all_reduce of a
// shard each, on the communication stream, before any noise or update).
// RUN: dp-opt %s --dp-specialize=ranks=6 --dp-backward --dp-clip-plan --dp-shard | FileCheck %s --check-prefix=SHARD
// RUN: dp-opt %s --dp-compile=ranks=6 | FileCheck %s --check-prefix=CALLS
// RUN: dp-opt %s --dp-compile=ranks=6 --dp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dp-opt %s --dp-compile=ranks=6 --dp-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
//
// Two replicas of one rank each: plain data parallelism, no all-gather or
// reduce-scatter, the all-reduce alone.
// RUN: dp-opt %s --dp-compile=ranks=2 | FileCheck %s --check-prefix=DDP

// SHARD: shard.grid @g(shape = 2x3)
// SHARD: dp.unit @unit.root params [@emb, @head] offsets [0, 128] {numel = 224 : i64, ranks = 3 : i64, replicas = 2 : i64, shard = 128 : i64}
// SHARD-NEXT: dp.unit @unit.b0 params [@b0.n, @b0.w] offsets [0, 64] {numel = 128 : i64, ranks = 3 : i64, replicas = 2 : i64, shard = 64 : i64}
// SHARD: dp.step
// SHARD: dp.all_gather @unit.root forward
// SHARD: dp.reduce_scatter @unit.b0
// SHARD-NOT: all_reduce

// CALLS-LABEL: dprt.func @dp_microstep
// CALLS-NOT: "all_reduce"
// CALLS-LABEL: dprt.func @dp_apply
// CALLS: dprt.call "all_reduce"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 128], stream = 1 : i32}
// CALLS-NEXT: dprt.record_event {event = [[ROOT:[0-9]+]] : i32, stream = 1 : i32}
// CALLS: dprt.call "all_reduce"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 64], stream = 1 : i32}
// CALLS-NOT: "all_reduce"
// CALLS: dprt.wait_event {event = [[ROOT]] : i32, stream = 0 : i32}
// CALLS-NEXT: dprt.call "sgd_update_range"
// CALLS-LABEL: dprt.func @dp_forward
// CALLS-NOT: "all_reduce"
// CALLS-LABEL: dprt.func @dp_describe
// CALLS: dprt.call "describe_program"
// CALLS-NEXT: dprt.call "describe_grid"() {args = [2 : i32]}

// REPORT: 6 ranks (2 replicas x 3 shards)
// REPORT: across replicas per step and rank: 2 all-reduces of gradient shards

// A ring all-reduce over R = 2 replicas moves 2 (R - 1) / R of the shards,
// (128 + 64) x 4 bytes: 768.
// JSON: "all_reduce_bytes_per_rank": 768,
// JSON-NEXT: "all_reduces": 2
// JSON: "replicas": 2,
// JSON-NEXT: "shards": 3,

// DDP: dp.unit
// DDP-LABEL: dprt.func @dp_microstep
// DDP-NOT: all_gather
// DDP-NOT: reduce_scatter
// DDP-LABEL: dprt.func @dp_apply
// DDP: dprt.call "all_reduce"

shard.grid @g(shape = 2x?)

dp.model @m {
  dp.param @emb : tensor<12x8xf32>
  dp.param @b0.n : tensor<8xf32>
  dp.param @b0.w : tensor<8x8xf32>
  dp.param @head : tensor<12x8xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x0 = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %h0 = dp.rms_norm @b0.n(%x0) : tensor<?x4x8xf32>
    %y0 = dp.linear @b0.w(%h0) : tensor<?x4x8xf32> -> tensor<?x4x8xf32>
    %x1 = dp.add %x0, %y0 : tensor<?x4x8xf32>
    %logits = dp.linear @head(%x1) : tensor<?x4x8xf32> -> tensor<?x4x12xf32>
    %loss = dp.cross_entropy %logits, %tgt : tensor<?x4x12xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>,
  steps = 10,
  grid = @g
}
