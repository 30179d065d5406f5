// RUN: dp-opt %s --dp-compile | FileCheck %s
// RUN: dp-opt %s --dp-compile=ranks=2 | FileCheck %s --check-prefix=RANKS
// RUN: dp-opt %s --dp-compile --dp-report -o /dev/null | FileCheck %s --check-prefix=TABLE
// RUN: dp-opt %s --dp-compile --dp-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
//
// Every step one micro-step on one rank (shuffled batches of the physical
// batch's size): a weight whose one linear_grad_weight makes its gradient
// has it written, not added (the last argument, accumulate, is false), the
// program says so (describe_gradient_overwritten), and dp_apply zeroes only
// the other gradients of the unit for the next step (emb and n: 144 f32
// of the unit's 448, w1 the rest). The tied table gets
// two gradient ops (its embedding_grad and the head's linear_grad_weight),
// which add into one gradient: it keeps accumulate = true and is zeroed.
dp.model @tied {
  dp.param @emb : tensor<8x16xf32>
  dp.param @n : tensor<16xf32>
  dp.param @w1 : tensor<16x16xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %h = dp.rms_norm @n(%x) : tensor<?x4x16xf32>
    %y = dp.linear @w1(%h) : tensor<?x4x16xf32> -> tensor<?x4x16xf32>
    %o = dp.linear @emb(%y) : tensor<?x4x16xf32> -> tensor<?x4x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x8xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @tied {
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK-DAG: "linear_weight_grad"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, 2 : index, 2, 4, 16, 8, #dprt.null, true]}
// CHECK-DAG: "linear_weight_grad"({{.*}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, 2 : index, 2, 4, 16, 16, #dprt.null, false]}
// CHECK-LABEL: dprt.func @dp_apply
// CHECK: "sgd_update_range"
// CHECK: "zero"
// CHECK-SAME: 576]
// CHECK-NOT: "zero"
// CHECK-LABEL: dprt.func @dp_describe
// CHECK: "describe_param"() {args = ["w1"
// CHECK-NEXT: "describe_gradient_overwritten"() {args = ["w1"]}
// CHECK-NOT: "describe_gradient_overwritten"

// Two ranks: the gradients are reduce-scattered shards; nothing overwrites.
// RANKS-NOT: "describe_gradient_overwritten"
// RANKS-NOT: {{"linear_weight_grad".*false\]}}
// RANKS: "linear_weight_grad"{{.*}}#dprt.null, true]}

// The report counts them and marks each in the JSON.
// TABLE: weight gradients written by the micro-step instead of added into zeroed ones (one micro-step a step): 1 parameters
// JSON: "gradient_written": false,
// JSON-NEXT: "name": "emb",
// JSON: "gradient_written": false,
// JSON-NEXT: "name": "n",
// JSON: "gradient_written": true,
// JSON-NEXT: "name": "w1",
