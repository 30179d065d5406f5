// RUN: dp-opt %s --dp-compile=ranks=2 --dp-report=format=json -o /dev/null | FileCheck %s
// RUN: dp-opt %s --dp-compile=ranks=2 --dp-report -o /dev/null | FileCheck %s --check-prefix=TABLE
// Predicted times: 2 shards on nodes of 1 rank cross the network (10 GB/s):
// (2816 + 1536) bytes / 1e10 B/s = 4.352e-7 s per physical batch against
// 23456 FLOP / 1e14 FLOP/s of compute; 3 physical batches a step.
// RUN: dp-opt %s --dp-compile=ranks=2 --dp-report="format=json tflops=100 network-gbps=10 gpus-per-node=1" -o /dev/null | FileCheck %s --check-prefix=TIME
// TIME: "predicted": {
// TIME-NEXT: "all_reduce_seconds_per_step": 0,
// TIME-NEXT: "communication_seconds_per_physical_batch": 4.35199{{[0-9]*}}e-07,
// TIME-NEXT: "compute_seconds_per_physical_batch": 2.3456{{[0-9]*}}e-10,
// TIME: "step_seconds": 1.3055{{[0-9]*}}e-06,
//
// The numbers below are computed by hand from the formulas of
// docs/clip-planning.md, for B = 2 samples of T = 4 tokens per rank.
//   emb (8 x 16): embedding norm 2 B T d = 256; gradient 2 (B T) d = 256.
//   n (16): per-sample vector, B (2 T d + 2 d) = 320; gradient 2 B d = 64.
//   w1 (16 -> 16): T(d+p) = 128 < dp = 256, Gram:
//     A A^T 2 B T^2 d = 1024 and G G^T with the inner product
//     2 B (T^2 p + T^2) = 1088: 2112; clipped gradient 2 (B T) d p + (B T) p
//     = 4096 + 128 = 4224.
//   head (16 -> 8): 96 < 128, Gram: 1024 + 2 B (16 * 8 + 16) = 1600;
//     gradient 2 * 8 * 16 * 8 + 8 * 8 = 2112.
//   head.b (8): bias norm B (T p + 2 p) = 96; gradient 2 (B T) p = 128.
// Forward 2 (B T)(16 * 16 + 16 * 8) = 6144, input gradients the same;
// norms 4384, weight gradients 6784, total 23456.
// Units: root = emb (0), n (128), w1 (192), head (448): 576 elements, shard
// 320 (288 rounded up to 64); unit.head = head.b: shard 64. All-gathers:
// root and unit.head in forward, root in backward (head.b is not read in
// backward): (2-1) * 4 bytes * (320 + 64 + 320) = 2816 bytes per rank;
// reduce-scatters (320 + 64) * 4 = 1536. Expected batch 10 over 2 ranks x 2
// samples: 3 physical batches per step.
// Predicted seconds on the cpu time model (1e11 FLOP/s, 1e10 B/s): w1
// (6336 FLOP; bytes moved 2 B T p 4 = 1024 for diag(c) G and 4 B T^2 4 = 512
// for the Grams) 6.336e-8 + 1.536e-7 = 2.1696e-7; head (3712 FLOP, 512 + 512
// bytes) 1.3952e-7; emb, n and head.b their FLOPs / 1e11: 5.12e-9,
// 3.84e-9, 2.24e-9; in all 3.6768e-7.
dp.model @small {
  dp.param @emb : tensor<8x16xf32>
  dp.param @n : tensor<16xf32>
  dp.param @w1 : tensor<16x16xf32>
  dp.param @head : tensor<8x16xf32>
  dp.param @head.b : tensor<8xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %h = dp.rms_norm @n(%x) : tensor<?x4x16xf32>
    %y = dp.linear @w1(%h) : tensor<?x4x16xf32> -> tensor<?x4x16xf32>
    %o = dp.linear @head, @head.b(%y) : tensor<?x4x16xf32> -> tensor<?x4x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x8xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @small {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 10, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}
// CHECK: "expected_physical_batches_per_step": 3
// CHECK: "params": [
// CHECK:   "name": "emb",
// CHECK:   "norm_flops": 256,
// CHECK:   "norm_method": "embedding",
// CHECK:   "predicted_seconds": 5.1199999999999997e-09,
// CHECK:   "weight_grad_flops": 256
// CHECK:   "name": "n",
// CHECK:   "norm_flops": 320,
// CHECK:   "norm_method": "per-sample vector (fused)",
// CHECK:   "predicted_seconds": 3.84e-09,
// CHECK:   "weight_grad_flops": 64
// CHECK:   "name": "w1",
// CHECK:   "norm_flops": 2112,
// CHECK:   "norm_method": "gram",
// CHECK:   "predicted_seconds": 2.1696000000000001e-07,
// CHECK:   "weight_grad_flops": 4224
// CHECK:   "name": "head",
// CHECK:   "norm_flops": 1600,
// CHECK:   "norm_method": "gram",
// CHECK:   "predicted_seconds": {{1.3951999+[0-9]*|1.3952000+[0-9]*}}e-07,
// CHECK:   "weight_grad_flops": 2112
// CHECK:   "name": "head.b",
// CHECK:   "norm_flops": 96,
// CHECK:   "norm_method": "bias",
// CHECK:   "predicted_seconds": 2.2400000000000001e-09,
// CHECK:   "weight_grad_flops": 128
// CHECK: "per_physical_batch": {
// CHECK-NEXT: "all_gather_bytes_per_rank": 2816,
// CHECK-NEXT: "all_gathers": 3,
// CHECK-NEXT: "forward_flops": 6144,
// CHECK-NEXT: "input_grad_flops": 6144,
// CHECK-NEXT: "norm_and_weight_grad_seconds": {{3.6767999+[0-9]*|3.6768000+[0-9]*}}e-07,
// CHECK-NEXT: "norm_flops": 4384,
// CHECK-NEXT: "recompute_flops": 0,
// CHECK-NEXT: "reduce_scatter_bytes_per_rank": 1536,
// CHECK-NEXT: "reduce_scatters": 2,
// CHECK-NEXT: "total_flops": 23456,
// CHECK-NEXT: "units_kept_from_forward": 0,
// CHECK-NEXT: "weight_grad_flops": 6784

// TABLE: DP training plan: model @small, recipe @r, 2 ranks, 2 samples x 4 tokens per rank and physical batch, f32
// TABLE: parameter  shape  norm method        norm GFLOP  weight-grad GFLOP  predicted us
// TABLE: w1         16x16  gram                    0.000              0.000         0.217
// TABLE: predicted time of norms and clipped weight gradients: 0.000 ms (cpu time model)
// TABLE: communication per rank: 3 all-gathers, 0.00 MiB received; 2 reduce-scatters, 0.00 MiB
// TABLE: per logical step: 3 physical batch(es) expected
// TABLE-NOT: recomputed before their backward
// TABLE: predicted at 400 TFLOP/s sustained, 450 GB/s within a node of 8, 50 GB/s between nodes: per physical batch compute 0.00 ms, communication 0.00 ms (0.00 ms exposed); step 0.000 s
