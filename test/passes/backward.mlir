// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward | FileCheck %s
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-backward 2>&1 | FileCheck %s --check-prefix=TWICE

// Every layer gets its derivative, in reverse order; weight gradients are
// separate ops; gradients of values read twice accumulate through acc().
dp.model @every {
  dp.param @emb : tensor<16x8xf32>
  dp.param @n1 : tensor<8xf32>
  dp.param @wq : tensor<8x8xf32>
  dp.param @wk : tensor<4x8xf32>
  dp.param @wv : tensor<4x8xf32>
  dp.param @ln.g : tensor<8xf32>
  dp.param @ln.b : tensor<8xf32>
  dp.param @up : tensor<12x8xf32>
  dp.param @up.b : tensor<12xf32>
  dp.param @gate : tensor<12x8xf32>
  dp.param @head : tensor<16x12xf32>
  dp.forward(%tok: tensor<?x5xi32>, %tgt: tensor<?x5xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x5xi32> -> tensor<?x5x8xf32>
    %h = dp.rms_norm @n1(%x) : tensor<?x5x8xf32>
    %q = dp.linear @wq(%h) : tensor<?x5x8xf32> -> tensor<?x5x8xf32>
    %k = dp.linear @wk(%h) : tensor<?x5x8xf32> -> tensor<?x5x4xf32>
    %v = dp.linear @wv(%h) : tensor<?x5x8xf32> -> tensor<?x5x4xf32>
    %a = dp.attention %q, %k, %v {causal, heads = 2, kv_heads = 1, rope} : tensor<?x5x8xf32>, tensor<?x5x4xf32>
    %r = dp.add %x, %a : tensor<?x5x8xf32>
    %n = dp.layer_norm @ln.g, @ln.b(%r) : tensor<?x5x8xf32>
    %u = dp.linear @up, @up.b(%n) : tensor<?x5x8xf32> -> tensor<?x5x12xf32>
    %g = dp.linear @gate(%n) : tensor<?x5x8xf32> -> tensor<?x5x12xf32>
    %s = dp.silu %g : tensor<?x5x12xf32>
    %p = dp.mul %s, %u : tensor<?x5x12xf32>
    %e = dp.gelu %p tanh : tensor<?x5x12xf32>
    %logits = dp.linear @head(%e) : tensor<?x5x12xf32> -> tensor<?x5x16xf32>
    %l = dp.cross_entropy %logits, %tgt ignore_index = -1 : tensor<?x5x16xf32>, tensor<?x5xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @every {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @every
// CHECK: dp.step(%[[TOK:.*]]: tensor<2x5xi32>, %[[TGT:.*]]: tensor<2x5xi32>, %[[MASK:.*]]: tensor<2xf32>) -> tensor<2xf32>
// CHECK:      %[[X:.*]] = dp.embedding @emb(%[[TOK]])
// CHECK-NEXT: %[[H:.*]] = dp.rms_norm @n1(%[[X]])
// CHECK-NEXT: %[[Q:.*]] = dp.linear @wq(%[[H]])
// CHECK-NEXT: %[[K:.*]] = dp.linear @wk(%[[H]])
// CHECK-NEXT: %[[V:.*]] = dp.linear @wv(%[[H]])
// CHECK-NEXT: %[[A:.*]] = dp.attention %[[Q]], %[[K]], %[[V]]
// CHECK-NEXT: %[[R:.*]] = dp.add %[[X]], %[[A]]
// CHECK-NEXT: %[[N:.*]] = dp.layer_norm @ln.g, @ln.b(%[[R]])
// CHECK-NEXT: %[[U:.*]] = dp.linear @up, @up.b(%[[N]])
// CHECK-NEXT: %[[G:.*]] = dp.linear @gate(%[[N]])
// CHECK-NEXT: %[[S:.*]] = dp.silu %[[G]]
// CHECK-NEXT: %[[P:.*]] = dp.mul %[[S]], %[[U]]
// CHECK-NEXT: %[[E:.*]] = dp.gelu %[[P]] tanh
// CHECK-NEXT: %[[LOGITS:.*]] = dp.linear @head(%[[E]])
// CHECK-NEXT: %[[LOSS:.*]] = dp.cross_entropy %[[LOGITS]], %[[TGT]]
// The seed of each sample's loss is its mask.
// CHECK-NEXT: %[[DLOGITS:.*]] = dp.cross_entropy_grad %[[LOGITS]], %[[TGT]], %[[LOSS]], %[[MASK]]
// CHECK-NEXT: dp.linear_grad_weight @head(%[[E]], %[[DLOGITS]])
// CHECK-NEXT: %[[DE:.*]] = dp.linear_grad_input @head(%[[DLOGITS]])
// CHECK-NEXT: %[[DP:.*]] = dp.activation_grad gelu_tanh %[[P]], %[[DE]]
// CHECK-NEXT: %[[DS:.*]], %[[DU:.*]] = dp.mul_grad %[[S]], %[[U]], %[[DP]]
// CHECK-NEXT: %[[DG:.*]] = dp.activation_grad silu %[[G]], %[[DS]]
// CHECK-NEXT: dp.linear_grad_weight @gate(%[[N]], %[[DG]])
// CHECK-NEXT: %[[DN1:.*]] = dp.linear_grad_input @gate(%[[DG]])
// CHECK-NEXT: dp.linear_grad_weight @up(%[[N]], %[[DU]])
// CHECK-NEXT: dp.bias_grad @up.b(%[[DU]])
// CHECK-NEXT: %[[DN:.*]] = dp.linear_grad_input @up(%[[DU]]) acc(%[[DN1]] : tensor<2x5x8xf32>)
// CHECK-NEXT: %[[DR:.*]], %[[GS:.*]], %[[BS:.*]] = dp.layer_norm_grad @ln.g, @ln.b(%[[R]], %[[N]], %[[DN]])
// CHECK-NEXT: dp.vector_grad @ln.g(%[[GS]]) : tensor<2x8xf32>
// CHECK-NEXT: dp.vector_grad @ln.b(%[[BS]]) : tensor<2x8xf32>
// The residual passes its gradient to both operands: attention gets it as is.
// CHECK-NEXT: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dp.attention_grad %[[Q]], %[[K]], %[[V]], %[[A]], %[[DR]] {causal, heads = 2 : i64, kv_heads = 1 : i64, rope
// The weight gradients of the projections that read the RMSNorm's result
// wait for the norm's derivative (dp-rematerialize folds the norm's clone
// into it); their input gradients do not.
// CHECK-NEXT: %[[DH1:.*]] = dp.linear_grad_input @wv(%[[DV]])
// CHECK-NEXT: %[[DH2:.*]] = dp.linear_grad_input @wk(%[[DK]]) acc(%[[DH1]] : tensor<2x5x8xf32>)
// CHECK-NEXT: %[[DH:.*]] = dp.linear_grad_input @wq(%[[DQ]]) acc(%[[DH2]] : tensor<2x5x8xf32>)
// ... and the embedding output gets the residual's gradient plus the norm's.
// CHECK-NEXT: %[[DX:.*]], %[[NS:.*]] = dp.rms_norm_grad @n1(%[[X]], %[[H]], %[[DH]]) acc(%[[DR]] : tensor<2x5x8xf32>)
// CHECK-NEXT: dp.vector_grad @n1(%[[NS]])
// CHECK-NEXT: dp.linear_grad_weight @wv(%[[H]], %[[DV]])
// CHECK-NEXT: dp.linear_grad_weight @wk(%[[H]], %[[DK]])
// CHECK-NEXT: dp.linear_grad_weight @wq(%[[H]], %[[DQ]])
// CHECK-NEXT: dp.embedding_grad @emb(%[[TOK]], %[[DX]])
// CHECK-NEXT: dp.yield %[[LOSS]] : tensor<2xf32>

// -----

// A frozen parameter gets no weight gradient, and nothing upstream of the
// first trainable parameter is differentiated. x * x sums both operand
// gradients; the regression loss differentiates the prediction.
dp.model @frozen {
  dp.param @fixed : tensor<6x3xf64> {trainable = false}
  dp.param @w : tensor<2x6xf64>
  dp.param @w.b : tensor<2xf64>
  dp.forward(%x: tensor<?x3xf64>, %y: tensor<?x2xf64>) -> tensor<?xf64> {
    %f = dp.linear @fixed(%x) : tensor<?x3xf64> -> tensor<?x6xf64>
    %r = dp.relu %f : tensor<?x6xf64>
    %sq = dp.mul %r, %r : tensor<?x6xf64>
    %p = dp.linear @w, @w.b(%sq) : tensor<?x6xf64> -> tensor<?x2xf64>
    %pp = dp.mul %p, %p : tensor<?x2xf64>
    %l = dp.mse %pp, %y per_sample = sum : tensor<?x2xf64> -> tensor<?xf64>
    dp.return %l : tensor<?xf64>
  }
}
dp.recipe @r for @frozen {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 3>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @frozen
// CHECK: dp.step(%{{.*}}: tensor<3x3xf64>, %[[Y:.*]]: tensor<3x2xf64>, %[[MASK:.*]]: tensor<3xf64>) -> tensor<3xf64>
// CHECK:      %[[SQ:.*]] = dp.mul
// CHECK-NEXT: %[[P:.*]] = dp.linear @w, @w.b(%[[SQ]])
// CHECK-NEXT: %[[PP:.*]] = dp.mul %[[P]], %[[P]]
// CHECK-NEXT: %[[L:.*]] = dp.mse %[[PP]], %[[Y]] per_sample = sum
// CHECK-NEXT: %[[DPP:.*]] = dp.mse_grad %[[PP]], %[[Y]], %[[MASK]] per_sample = sum
// CHECK-NEXT: %[[D1:.*]], %[[D2:.*]] = dp.mul_grad %[[P]], %[[P]], %[[DPP]] : tensor<3x2xf64>
// CHECK-NEXT: %[[DP:.*]] = dp.add %[[D1]], %[[D2]]
// CHECK-NEXT: dp.linear_grad_weight @w(%[[SQ]], %[[DP]])
// CHECK-NEXT: dp.bias_grad @w.b(%[[DP]])
// CHECK-NEXT: dp.yield %[[L]]
// CHECK-NOT: @fixed
// CHECK-NOT: relu

// TWICE: exists already; dp-backward runs once
