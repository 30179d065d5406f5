// RUN: dp-opt %s --split-input-file --dp-compile | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-compile --dp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: not dp-opt %s.positions --dp-compile 2>&1 | FileCheck %s.positions --check-prefix=ERR
// RUN: not dp-opt %s --split-input-file --dp-compile="norm-methods=*=materialized" 2>&1 | FileCheck %s --check-prefix=FORCED
//
// Materialized per-sample gradients are one per record, a user's norm that
// of its records' sum: never chosen under user-level DP, refused if forced.
// FORCED: cannot force the materialized norm method under user-level DP
//
// User-level DP (`unit = #dp.unit<user, max_records = k>`): a user fills k
// consecutive slots, and every norm kernel runs on B/k units of k T tokens
// (the user's records stacked), so that each norm is that of the user's
// summed gradient, cross terms included; clip_factors gives slot b the
// factor of unit b / k. The normalization layer's scale norm is not fused
// into its backward kernel (which would add per-record norms): the
// materialized per-record gradients go through norm_bias over k rows.

// T = 4, B = 4, k = 2: two units of 8 tokens.
dp.model @lm {
  dp.param @emb : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @n : tensor<8xf32> {init = #dp.uniform<1.5>}
  dp.param @out.w : tensor<16x8xf32> {init = #dp.normal<0.2>}
  dp.param @out.b : tensor<16xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %h = dp.rms_norm @n(%x) {eps = 1.0e-5} : tensor<?x4x8xf32>
    %o = dp.linear @out.w, @out.b(%h) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %o, %tgt per_sample = mean ignore_index = -1
        : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @lm {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 8, physical_batch = 4>,
  unit = #dp.unit<user, max_records = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// (The head's Gram norm reads the rematerialized norm's result, which the
// norm's backward makes: it comes after it.)
// CHECK:      "norm_bias"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 8, 16]}
// CHECK:      "rms_norm_backward"({{.*}}, 4, 4, 8, false]}
// CHECK-NEXT: "norm_bias"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 2, 8]}
// CHECK:      "gram"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 8, 8, false]}
// CHECK-NEXT: "gram_norm"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 8, 16]}
// CHECK-NEXT: "norm_embedding"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 8, 8]}
// CHECK:      "clip_factors"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 4, 2, #dprt.clip_mode<Flat>,
// CHECK-LABEL: dprt.func @dp_describe
// CHECK:      "describe_privacy_unit"() {args = [2]}
// REPORT: privacy unit: one user (at most 2 records in consecutive slots), its records' gradients summed and clipped together
// REPORT: privacy unit: one user (at most 3 records in consecutive slots)

// -----

// T = 1 (an MLP), B = 6, k = 3, per-layer clipping: a user's weight
// gradient sum_j g_j a_j^T is no longer rank one; its norm is the Gram norm
// of T = 3, its bias norm ||sum_j g_j||^2.
dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @fc1.b : tensor<16xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x16xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<per_layer, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 8, physical_batch = 6>,
  unit = #dp.unit<user, max_records = 3>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-NOT:  "norm_rank1
// CHECK:      "gram"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 3, 8, false]}
// CHECK-NEXT: "gram_norm"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 3, 16]}
// CHECK:      "clip_factors"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 6, 3, #dprt.clip_mode<PerLayer>,
// CHECK:      "norm_bias"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2, 3, 16]}
// CHECK:      "clip_factors"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 6, 3, #dprt.clip_mode<PerLayer>,

