// RUN: dp-opt %s --split-input-file --dp-lora --dp-freeze | FileCheck %s

// q_proj and v_proj (by their Hugging Face module) get rank-2 adapters
// scaled by alpha / r = 4 through a frozen 2 x 2 diagonal; every other
// parameter is frozen; the adapters carry their peft tensor names.
// CHECK-LABEL: dp.model @attn
// CHECK: dp.param @wq : tensor<8x8xf32> {hf.name = "model.layers.0.self_attn.q_proj.weight", trainable = false}
// CHECK-NEXT: dp.param @wq.lora_scale : tensor<2x2xf32> {init = #dp.diagonal<4.0>, lora.base = @wq, trainable = false}
// CHECK-NEXT: dp.param @wq.lora_B : tensor<8x2xf32> {init = #dp.zeros, lora.base = @wq, peft.name = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"}
// CHECK-NEXT: dp.param @wq.lora_A : tensor<2x8xf32> {init = #dp.uniform<0.35355339059327373>, lora.base = @wq, peft.name = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"}
// CHECK: dp.param @wk : tensor<4x8xf32> {hf.name = "model.layers.0.self_attn.k_proj.weight", trainable = false}
// CHECK-NEXT: dp.param @wv : tensor<4x8xf32> {hf.name = "model.layers.0.self_attn.v_proj.weight", trainable = false}
// CHECK-NEXT: dp.param @wv.lora_scale
// CHECK: dp.param @head : tensor<16x8xf32> {trainable = false}
// CHECK: %[[Q:.*]] = dp.linear @wq(%[[H:.*]]) :
// CHECK-NEXT: %[[A:.*]] = dp.linear @wq.lora_A(%[[H]]) : tensor<2x5x8xf32> -> tensor<2x5x2xf32>
// CHECK-NEXT: %[[S:.*]] = dp.linear @wq.lora_scale(%[[A]]) : tensor<2x5x2xf32> -> tensor<2x5x2xf32>
// CHECK-NEXT: %[[B:.*]] = dp.linear @wq.lora_B(%[[S]]) : tensor<2x5x2xf32> -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[QL:.*]] = dp.add %[[Q]], %[[B]]
// CHECK: dp.linear @wk(%[[H]])
// CHECK-NEXT: dp.linear @wv(%[[H]])
// CHECK: dp.attention %[[QL]],
dp.model @attn {
  dp.param @emb : tensor<16x8xf32>
  dp.param @wq : tensor<8x8xf32> {hf.name = "model.layers.0.self_attn.q_proj.weight"}
  dp.param @wk : tensor<4x8xf32> {hf.name = "model.layers.0.self_attn.k_proj.weight"}
  dp.param @wv : tensor<4x8xf32> {hf.name = "model.layers.0.self_attn.v_proj.weight"}
  dp.param @head : tensor<16x8xf32>
  dp.forward(%tok: tensor<2x5xi32>, %tgt: tensor<2x5xi32>) -> tensor<2xf32> {
    %h = dp.embedding @emb(%tok) : tensor<2x5xi32> -> tensor<2x5x8xf32>
    %q = dp.linear @wq(%h) : tensor<2x5x8xf32> -> tensor<2x5x8xf32>
    %k = dp.linear @wk(%h) : tensor<2x5x8xf32> -> tensor<2x5x4xf32>
    %v = dp.linear @wv(%h) : tensor<2x5x8xf32> -> tensor<2x5x4xf32>
    %a = dp.attention %q, %k, %v {causal, heads = 2, kv_heads = 1} : tensor<2x5x8xf32>, tensor<2x5x4xf32>
    %logits = dp.linear @head(%a) : tensor<2x5x8xf32> -> tensor<2x5x16xf32>
    %l = dp.cross_entropy %logits, %tgt : tensor<2x5x16xf32>, tensor<2x5xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
}
dp.recipe @r for @attn {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  lora = #dp.lora<rank = 2, alpha = 8.0, targets = ["q_proj", "v_proj"]>
}

// -----

// Without hf.name a target matches the parameter's name (or a suffix after
// a dot); alpha = r needs no scaling; `train` keeps the head trainable.
// CHECK-LABEL: dp.model @plain
// CHECK: dp.param @b0.w : tensor<4x8xf32> {trainable = false}
// CHECK-NEXT: dp.param @b0.w.lora_B : tensor<4x3xf32> {init = #dp.zeros, lora.base = @b0.w, peft.name = "base_model.model.b0.w.lora_B.weight"}
// CHECK-NEXT: dp.param @b0.w.lora_A : tensor<3x8xf32>
// CHECK-NEXT: dp.param @head : tensor<4x4xf32>
// CHECK-NOT: trainable
// CHECK: dp.linear @b0.w.lora_A
// CHECK-NEXT: dp.linear @b0.w.lora_B
dp.model @plain {
  dp.param @b0.w : tensor<4x8xf32>
  dp.param @head : tensor<4x4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @b0.w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %o = dp.linear @head(%h) : tensor<2x4xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
}
dp.recipe @r for @plain {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  train = ["head"], lora = #dp.lora<rank = 3, alpha = 3, targets = ["w"]>
}
