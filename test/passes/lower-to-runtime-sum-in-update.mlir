// RUN: dp-opt %s --split-input-file --dp-compile="norm-methods=*=materialized" | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-compile="norm-methods=*=materialized sum-in-update=false" | FileCheck %s --check-prefix=OFF
// RUN: dp-opt %s --split-input-file --dp-compile="materialize-bytes=-1 norm-methods=w2=direct" | FileCheck %s --check-prefix=MIXED

// Shuffled batches of the physical batch on one rank: every step is one
// micro-step, so dp_apply's update forms each materialized weight's clipped
// sum from the per-sample gradients (momentum_update_rows) instead of
// dp_microstep adding it into the gradient (rows_weighted_sum). Those
// buffers, the clip factors and the norms are carried: the same offset in
// dp_microstep, dp_apply and dp_describe. The embedding and the head's bias
// keep their gradient ops and range updates, and only their gradient
// ranges are zeroed; dp_describe names each weight and its norms.
dp.model @m {
  dp.param @emb : tensor<32x16xf32>
  dp.param @w1 : tensor<32x16xf32>
  dp.param @w2 : tensor<16x32xf32>
  dp.param @head : tensor<8x16xf32>
  dp.param @head.b : tensor<8xf32>
  dp.forward(%tok: tensor<?x64xi32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x64xi32> -> tensor<?x64x16xf32>
    %h = dp.linear @w1(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %a = dp.relu %h : tensor<?x64x32xf32>
    %y = dp.linear @w2(%a) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %o = dp.linear @head, @head.b(%y) : tensor<?x64x16xf32> -> tensor<?x64x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xf32>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>,
  optimizer = #dp.momentum<lr = 0.1, momentum = 0.9>, steps = 4, seed = 1
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK: dprt.alloc {bytes = 1024 : i64, carried = "[[HEAD:per_sample_grads\.[0-9]+]]", name = "per_sample_grads", offset = [[HEADOFF:[0-9]+]] : i64}
// CHECK: dprt.alloc {bytes = 8 : i64, carried = "[[FACTORS:clip_factors\.[0-9]+]]", name = "clip_factors", offset = [[COFF:[0-9]+]] : i64}
// CHECK-NOT: rows_weighted_sum
// CHECK: "embedding_grad"
// CHECK-NOT: rows_weighted_sum
// CHECK: "bias_grad"
// CHECK-NOT: rows_weighted_sum
// CHECK-LABEL: dprt.func @dp_apply
// CHECK-DAG: dprt.alloc {bytes = 1024 : i64, carried = "[[HEAD]]", name = "[[HEAD]]", offset = [[HEADOFF]] : i64}
// CHECK-DAG: dprt.alloc {bytes = 8 : i64, carried = "[[FACTORS]]", name = "[[FACTORS]]", offset = [[COFF]] : i64}
// The _rows updates in one group, which closes after the last unit.
// CHECK: "update_group"() {args = [true]}
// CHECK-COUNT-3: "momentum_update_rows"
// CHECK: "momentum_update_range"({{.*}}) {args = [{{.*}}, 1664, 0, 512,
// CHECK-NOT: "zero"({{.*}}) {args = [0 : index, 6656]}
// CHECK: "zero"({{.*}}) {args = [0 : index, 2048]}
// CHECK: "momentum_update_range"
// CHECK: "zero"({{.*}}) {args = [0 : index, 256]}
// CHECK-NEXT: "update_group"() {args = [false]}
// CHECK-LABEL: dprt.func @dp_describe
// CHECK: "describe_update_from_rows"() {args = ["w1"]}
// CHECK: "describe_update_from_rows"() {args = ["w2"]}
// CHECK: "describe_update_from_rows"() {args = ["head"]}

// OFF-LABEL: dprt.func @dp_microstep
// OFF-NOT: carried
// OFF-COUNT-3: "rows_weighted_sum"
// OFF-LABEL: dprt.func @dp_apply
// OFF-NOT: update_group
// OFF-NOT: _update_rows
// OFF-LABEL: dprt.func @dp_describe
// OFF-NOT: describe_update_from_rows

// MIXED-LABEL: dprt.func @dp_apply
// MIXED-COUNT-2: "momentum_update_rows"
// MIXED-NOT: "momentum_update_rows"
// MIXED-LABEL: dprt.func @dp_describe

// -----

// Poisson batches vary, and a step can take several micro-steps: the sums
// go into the gradient as they are made.
dp.model @m {
  dp.param @w2 : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %o = dp.linear @w2(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 2, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 4, seed = 1
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-NOT: carried
// CHECK: "rows_weighted_sum"
// CHECK-LABEL: dprt.func @dp_apply
// CHECK-NOT: update_group
// CHECK-NOT: _update_rows
// CHECK: "sgd_update_range"
