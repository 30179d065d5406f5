// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime --verify-diagnostics | FileCheck %s

// dp_describe passes each parameter's Hugging Face source (hf.name,
// hf.transposed, hf.rows; docs/huggingface.md) to describe_param: "", false,
// -1, -1 for a parameter without one. describe_loss gives the per-sample
// reduction.
dp.model @m {
  dp.param @emb : tensor<16x8xf32> {hf.name = "transformer.wte.weight"}
  dp.param @wq : tensor<8x8xf32> {hf.name = "transformer.h.0.attn.c_attn.weight", hf.transposed, hf.rows = array<i64: 0, 8>}
  dp.param @wq.b : tensor<8xf32> {hf.name = "transformer.h.0.attn.c_attn.bias", hf.rows = array<i64: 0, 8>}
  dp.param @head : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %q = dp.linear @wq, @wq.b(%x) : tensor<?x4x8xf32> -> tensor<?x4x8xf32>
    %o = dp.linear @head(%q) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %o, %y per_sample = sum : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 4, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 1
}
// CHECK-LABEL: dprt.func @dp_describe
// CHECK: "describe_loss"() {args = [#dprt.reduction<Sum>]}
// CHECK-DAG: "describe_param"() {args = ["emb", {{.*}}, 16, 8, 0, 0, "transformer.wte.weight", false, -1, -1]}
// CHECK-DAG: "describe_param"() {args = ["wq", {{.*}}, 8, 8, 0, 0, "transformer.h.0.attn.c_attn.weight", true, 0, 8]}
// CHECK-DAG: "describe_param"() {args = ["wq.b", {{.*}}, 8, 0, 0, 0, "transformer.h.0.attn.c_attn.bias", false, 0, 8]}
// CHECK-DAG: "describe_param"() {args = ["head", {{.*}}, 16, 8, 0, 0, "", false, -1, -1]}

// -----

dp.model @m {
  // expected-error @+1 {{'dp.param' op hf.rows must be [begin, end) with end - begin = 8 (the parameter's rows)}}
  dp.param @w : tensor<8x8xf32> {hf.name = "c_attn.weight", hf.rows = array<i64: 8, 24>}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %o = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x8xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x8xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 4, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 1
}

// -----

dp.model @m {
  // expected-error @+1 {{'dp.param' op has hf.transposed or hf.rows but no hf.name}}
  dp.param @w : tensor<8x8xf32> {hf.transposed}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %o = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x8xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x8xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<expected_batch = 4, physical_batch = 2>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 1
}
