// RUN: dp-opt %s --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime | FileCheck %s
// RUN: dp-opt %s --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime=backend=cuda | FileCheck %s --check-prefix=CUDA
// CUDA: "describe_program"({{.*}}) {args = ["m", "cuda", 1 : i32,

// Units under the block policy: fc1.w and fc1.b form @unit.fc1 (numel 144:
// 128 + 16 after aligning fc1.b to 64), the dot-less frozen @fixed forms
// @unit.root.frozen (its compute shard only: no gradient, no AdamW state),
// fc2.w its own. AdamW keeps two states per trained unit.
dp.model @m {
  dp.param @fc1.w : tensor<16x8xf32> {init = #dp.normal<0.5>}
  dp.param @fc1.b : tensor<16xf32>
  dp.param @fixed : tensor<4x16xf32> {trainable = false, init = #dp.uniform<0.25>}
  dp.param @fc2.w : tensor<4x4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %f = dp.linear @fixed(%h) : tensor<?x16xf32> -> tensor<?x4xf32>
    %o = dp.linear @fc2.w(%f) : tensor<?x4xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.5, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 20, physical_batch = 2>,
  optimizer = #dp.adamw<lr = 0.01, weight_decay = 0.1>, steps = 10, seed = 3,
  shard = #dp.fsdp<unit = block>
}
// CHECK-LABEL: dprt.program @m.program
// CHECK-DAG: dprt.global @state {bytes = 256 : i64}
// CHECK-DAG: dprt.global @input0 {bytes = 64 : i64}
// CHECK-DAG: dprt.global @input1 {bytes = 8 : i64}
// CHECK-DAG: dprt.global @mask {bytes = 8 : i64}
// CHECK-DAG: dprt.global @loss {bytes = 8 : i64}
// CHECK-DAG: dprt.global @unit.fc1.params {bytes = 768 : i64}
// CHECK-DAG: dprt.global @unit.fc1.opt2 {bytes = 768 : i64}
// CHECK-DAG: dprt.global @unit.root.frozen.params {bytes = 256 : i64}
// CHECK-NOT: dprt.global @unit.root.frozen.grad
// CHECK-NOT: dprt.global @unit.root.frozen.opt

// Initializers are keyed by the global element index: fc1.w at 0, fc1.b at
// 128, @fixed at 144 (after the 144 elements of unit fc1), fc2.w at 208.
// CHECK-LABEL: dprt.func @dp_init
// CHECK: "init_normal_range"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 192, 0, 128, 0, 5.000000e-01]}
// CHECK: "fill_range"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 192, 128, 16, 0.000000e+00]}
// CHECK: "init_uniform_range"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 64, 0, 64, 144, 2.500000e-01]}
// CHECK: "init_normal_range"(%{{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 64, 0, 16, 208, 2.000000e-02]}

// The micro-step: forward (a layer without bias passes #dprt.null), per-sample
// norms into one buffer, clip factors, then the clipped weight gradients
// straight into the gradient shards.
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      "linear_forward"({{.*}}2, 8, 16]}
// CHECK:      "linear_forward"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 2, 16, 4]}
// CHECK:      "linear_forward"({{.*}}2, 4, 4]}
// CHECK:      "cross_entropy_forward"({{.*}}, 2, 1, 4, false, 0, #dprt.reduction<Mean>]}
// CHECK:      %[[N2:.*]] = dprt.alloc {bytes = 8 : i64, name = "n2"}
// CHECK-NEXT: "zero"(%[[N2]])
// CHECK-NEXT: "norm_rank1"(%{{.*}}, %{{.*}}, %[[N2]])
// CHECK:      "norm_rank1"(%{{.*}}, %{{.*}}, %[[N2]])
// CHECK-NEXT: "norm_bias"(%{{.*}}, %[[N2]])
// CHECK:      %[[C:.*]] = dprt.alloc {bytes = 8 : i64, name = "clip_factors"}
// CHECK-NEXT: "clip_factors"(%[[N2]], %{{.*}}, %[[C]]) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 1, #dprt.clip_mode<Flat>, 1.000000e+00
// CHECK:      "linear_weight_grad"(%{{.*}}, %{{.*}}, %[[C]],
// CHECK:      "linear_weight_grad"(%{{.*}}, %{{.*}}, %[[C]],
// CHECK:      "bias_grad"(%{{.*}}, %[[C]],
// CHECK-NOT:  "linear_weight_grad"

// Noise and AdamW only on the trainable range of each shard: fc1.w and fc1.b
// (positions 0 to 144 of unit fc1, global indices from 0), fc2.w (from
// 208); never @fixed. The update adds the noise itself (its last argument,
// the global index of the range's first element): no add_noise pass.
// CHECK-LABEL: dprt.func @dp_apply
// CHECK-NOT:  "add_noise_range"
// The learning rate and the weight decay come from the StepState: only
// the betas and eps are compiled in.
// CHECK:      "adamw_update_range"({{.*}}192, 0, 144, 9.000000e-01, 0.99899999999999999, 1.000000e-08, 0, #dprt.dtype<F32>, #dprt.null]}
// CHECK:      "adamw_update_range"({{.*}}64, 0, 16, 9.000000e-01, 0.99899999999999999, 1.000000e-08, 208, #dprt.dtype<F32>, #dprt.null]}
// CHECK-NOT:  144, 9.000000e-01

// CHECK-LABEL: dprt.func @dp_forward
// CHECK: "cross_entropy_forward"(%[[L2:.*]], %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: dprt.return %[[L2]]

// The driver learns the recipe and the inputs' roles from dp_describe.
// CHECK-LABEL: dprt.func @dp_describe attributes {describe}
// CHECK: "describe_program"({{.*}}) {args = ["m", "cpu", 1 : i32, #dprt.planned<arena_bytes>, 0 : index, #dprt.dtype<F32>, 2, 1, 1 : index, 2 : index, #dprt.planned<logits_offset>, 4, #dprt.planned<peak_bytes>]}
// CHECK: "describe_loss"() {args = [#dprt.reduction<Mean>]}
// CHECK: "describe_recipe"() {args = [#dprt.clip_mode<Flat>, 1.000000e+00, 1.000000e-02, false, 1.500000e+00, 0.000000e+00, 1.000000e-05, #dprt.noise_generator<Philox>, #dprt.sampling<Poisson>, 20, 0.000000e+00, 0, 10, 3]}
// CHECK: "describe_optimizer"() {args = [#dprt.optimizer<AdamW>, 1.000000e-02
// CHECK: "describe_schedule"() {args = [0, "constant", 0.000000e+00]}
// CHECK: "describe_accountant"() {args = ["pld"]}
// CHECK: "describe_input"({{.*}}) {args = ["input0", #dprt.input_role<Features>, 0 : index, 8, 0, 0]}
// CHECK: "describe_input"({{.*}}) {args = ["input1", #dprt.input_role<Label>, 0 : index, 0, 0, 0]}
// A frozen unit: its parameter shard is its "master"; no gradient, no state.
// CHECK: "describe_unit"(%{{.*}}, %{{.*}}) {args = ["unit.root.frozen", 64, 64, 0 : index, 1 : index, #dprt.null, #dprt.null, #dprt.null, false]}
// CHECK: "describe_param"() {args = ["fc1.w", 0 : i32, 0, 0, true, 16, 8, 0, 0, "", false, -1, -1]}
// CHECK: "describe_param"() {args = ["fixed", 1 : i32, 0, 144, false, 4, 16, 0, 0, "", false, -1, -1]}
