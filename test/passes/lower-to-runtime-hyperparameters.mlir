// RUN: dp-opt %s --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime | FileCheck %s
//
// The run-time hyperparameters: the learning rate, the weight decay and the
// clipping bound C reach the kernels through the StepState, so the emitted
// calls carry none of them. A clip factor gets its share of C instead:
// per-layer clipping of the three trainable parameters clips each to
// C / sqrt(3), whatever C the run gives. The recipe's values, its schedule
// and its accountant are dp_describe's defaults.

dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @fc1.b : tensor<16xf32>
  dp.param @fc2.w : tensor<4x16xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %o = dp.linear @fc2.w(%h) : tensor<?x16xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<per_layer, max_norm = 2.0>,
  noise = #dp.target<epsilon = 4.0, delta = 1.0e-5, accountant = rdp>,
  sampling = #dp.poisson<expected_batch = 20, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.25, weight_decay = 0.125>,
  schedule = #dp.schedule<warmup = 3, decay = cosine, min_lr_ratio = 0.1>,
  steps = 10
}

// One factor per parameter, each with the share 1/sqrt(3) of C.
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-COUNT-3: "clip_factors"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 1, #dprt.clip_mode<PerLayer>, 0.57735026918962584, 1.000000e-02,

// CHECK-LABEL: dprt.func @dp_apply
// The last argument: the global index of the range's noise.
// CHECK:      "sgd_update_range"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 192, 0, 144, 0, #dprt.dtype<F32>, #dprt.null]}
// CHECK:      "sgd_update_range"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64, 0, 64, 144, #dprt.dtype<F32>, #dprt.null]}

// CHECK-LABEL: dprt.func @dp_describe attributes {describe}
// CHECK: "describe_recipe"() {args = [#dprt.clip_mode<PerLayer>, 2.000000e+00, 1.000000e-02, true, 0.000000e+00, 4.000000e+00, 1.000000e-05,
// CHECK: "describe_optimizer"() {args = [#dprt.optimizer<SGD>, 2.500000e-01, 0.000000e+00, false, 0.000000e+00, 0.000000e+00, 0.000000e+00, 1.250000e-01]}
// CHECK: "describe_schedule"() {args = [3, "cosine", 1.000000e-01]}
// CHECK: "describe_accountant"() {args = ["rdp"]}
