// RUN: dp-opt %s --dp-specialize --dp-backward --dp-clip-plan | FileCheck %s --check-prefix=PLAN --implicit-check-not=dp.norm --implicit-check-not=dp.clip_factor
// RUN: dp-opt %s --dp-compile=ranks=2 | FileCheck %s --check-prefix=LOWER --implicit-check-not='"norm_' --implicit-check-not='"clip_factors"' --implicit-check-not='"add_noise'
// RUN: dp-opt %s --dp-compile=ranks=2 --dp-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: dp-opt %s --dp-compile=ranks=2 --dp-report -o /dev/null | FileCheck %s --check-prefix=TABLE
//
// DP off (clip = #dp.clip<none>, noise = #dp.none): the model and sizes of
// report.mlir. No per-sample norm, no clip factor and no noise: every
// weight gradient is the sum of the per-sample gradients weighted by the
// mask (0 for padding samples), formed by the private program's kernels.
// The report's FLOPs are report.mlir's without the norms: forward 6144,
// input gradients 6144, weight gradients 6784, total 19072.
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
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.poisson<expected_batch = 10, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10
}
// PLAN: dp.step(%{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>, %[[MASK:.*]]: tensor<2xf32>)
// PLAN-DAG: dp.linear_grad_weight @head(%{{.*}}, %{{.*}}) scale(%[[MASK]])
// PLAN-DAG: dp.bias_grad @head.b(%{{.*}}) scale(%[[MASK]])
// PLAN-DAG: dp.linear_grad_weight @w1(%{{.*}}, %{{.*}}) scale(%[[MASK]])
// PLAN-DAG: dp.vector_grad @n(%{{.*}}) scale(%[[MASK]])
// PLAN-DAG: dp.embedding_grad @emb(%{{.*}}, %{{.*}}) scale(%[[MASK]])

// The weight-gradient kernels of the private program, and the recipe
// described as DP off: clip mode None with bound 0, no sigma or delta, the
// None generator.
// The mask, the backward's seed, already zeroes padding samples' dy: the
// weight gradients take no clip factors and no workspace (#dprt.null).
// LOWER-DAG: "linear_weight_grad"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, 2 : index, 2, 4, 16, 8, #dprt.null, true]}
// LOWER-DAG: "linear_weight_grad"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, 2 : index, 2, 4, 16, 16, #dprt.null, true]}
// LOWER-DAG: "bias_grad"
// LOWER-DAG: "embedding_grad"
// LOWER-DAG: "rows_weighted_sum"
// No noise: the updates' noise index is -1.
// LOWER-DAG: "sgd_update_range"({{.*}}, -1, #dprt.dtype<F32>, #dprt.null]}
// LOWER: "describe_recipe"() {args = [#dprt.clip_mode<None>, 0.000000e+00, 1.000000e-02, false, 0.000000e+00, 0.000000e+00, 0.000000e+00, #dprt.noise_generator<None>,

// JSON: "norm_flops": 0,
// JSON-NEXT: "norm_method": "none",
// JSON: "per_physical_batch": {
// JSON: "norm_flops": 0,
// JSON: "total_flops": 19072,
// JSON-NEXT: "units_kept_from_forward": 0,
// JSON-NEXT: "weight_grad_flops": 6784
// JSON: "private": false,

// TABLE: DP off: no clipping and no noise; the program is NOT differentially private
// TABLE: w1         16x16  none                    0.000              0.000
