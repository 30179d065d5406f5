// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan=share-gram=false | FileCheck %s --check-prefix=NOSHARE

// Flat clipping with book-keeping. T = 4 tokens: for wq and wk (d = 8,
// p = 64) T(d+p) = 288 < dp = 512, so Gram, and they read the same activation,
// so one A A^T is shared; for the head (d = 64, p = 32) 384 < 2048: Gram.
// Every norm comes first, then one clip factor, then each clipped weight
// gradient once. wv's output is unused: its gradient is zero and it needs
// neither a norm nor a weight gradient.
dp.model @m {
  dp.param @emb : tensor<32x8xf32>
  dp.param @n : tensor<8xf32>
  dp.param @wq : tensor<64x8xf32>
  dp.param @wk : tensor<64x8xf32>
  dp.param @wv : tensor<8x8xf32>
  dp.param @head : tensor<32x64xf32>
  dp.param @head.b : tensor<32xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %h = dp.rms_norm @n(%x) : tensor<?x4x8xf32>
    %q = dp.linear @wq(%h) : tensor<?x4x8xf32> -> tensor<?x4x64xf32>
    %k = dp.linear @wk(%h) : tensor<?x4x8xf32> -> tensor<?x4x64xf32>
    %v = dp.linear @wv(%h) : tensor<?x4x8xf32> -> tensor<?x4x8xf32>
    %s = dp.add %q, %k : tensor<?x4x64xf32>
    %o = dp.linear @head, @head.b(%s) : tensor<?x4x64xf32> -> tensor<?x4x32xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x32xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 2.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @m
// CHECK:      %[[DLOGITS:.*]] = dp.cross_entropy_grad
// CHECK-NEXT: %[[NHEAD:.*]] = dp.norm_gram %[[S:.*]], %[[DLOGITS]] [@head]
// CHECK-NEXT: %[[NBIAS:.*]] = dp.norm_bias %[[DLOGITS]] [@head.b]
// CHECK-NEXT: %[[DS:.*]] = dp.linear_grad_input @head(%[[DLOGITS]])
// CHECK-NEXT: dp.linear_grad_input @wk(%[[DS]])
// CHECK-NEXT: dp.linear_grad_input @wq
// CHECK-NEXT: %[[DX:.*]], %[[GS:.*]] = dp.rms_norm_grad @n
// CHECK-NEXT: %[[NN:.*]] = dp.norm_rows %[[GS]] [@n]
// The projections' weight gradients come after the norm's (dp-backward).
// CHECK-NEXT: %[[NQK:.*]] = dp.norm_gram %[[H:.*]], %[[DS]], %[[DS]] [@wk, @wq]
// CHECK-NEXT: %[[NE:.*]] = dp.norm_embedding %{{.*}}, %[[DX]] [@emb]
// CHECK-NEXT: %[[SUM:.*]] = dp.norm_sum %[[NBIAS]], %[[NN]], %[[NE]], %[[NHEAD]], %[[NQK]] : tensor<2xf32>
// CHECK-NEXT: %[[C:.*]] = dp.clip_factor %[[SUM]], %{{.*}} flat {gamma = {{.*}}, max_norm = 2.000000e+00 : f64, rel_err = {{.*}}}
// CHECK-NEXT: dp.linear_grad_weight @head(%[[S]], %[[DLOGITS]]) scale(%[[C]])
// CHECK-NEXT: dp.bias_grad @head.b(%[[DLOGITS]]) scale(%[[C]])
// CHECK-NEXT: dp.vector_grad @n(%[[GS]]) scale(%[[C]])
// CHECK-NEXT: dp.linear_grad_weight @wk(%[[H]], %[[DS]]) scale(%[[C]])
// CHECK-NEXT: dp.linear_grad_weight @wq(%[[H]], %[[DS]]) scale(%[[C]])
// CHECK-NEXT: dp.embedding_grad @emb(%{{.*}}, %[[DX]]) scale(%[[C]])
// CHECK-NEXT: dp.yield
// CHECK-NOT: @wv(

// NOSHARE-LABEL: dp.model @m
// NOSHARE: dp.norm_gram %{{.*}}, %{{.*}} [@wk]
// NOSHARE: dp.norm_gram %{{.*}}, %{{.*}} [@wq]

// -----

// One row per sample: rank-1 norms ||a||^2 ||g||^2. Per-layer clipping: each
// parameter's factor right after its norm with bound C / sqrt(L), L = 4
// trainable parameters, and its weight gradient not deferred.
dp.model @mlp {
  dp.param @fc1.w : tensor<16x8xf32>
  dp.param @fc1.b : tensor<16xf32>
  dp.param @fc2.w : tensor<4x16xf32>
  dp.param @fc2.b : tensor<4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x8xf32> -> tensor<?x16xf32>
    %a = dp.relu %h : tensor<?x16xf32>
    %o = dp.linear @fc2.w, @fc2.b(%a) : tensor<?x16xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @mlp {
  clip = #dp.clip<per_layer, max_norm = 4.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 8>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @mlp
// CHECK:      %[[N:.*]] = dp.norm_rank1 %[[A:.*]], %[[D:.*]] [@fc2.w] : tensor<8x16xf32>, tensor<8x4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[C:.*]] = dp.clip_factor %[[N]], %{{.*}} per_layer {{{.*}}max_norm = 2.000000e+00 : f64
// CHECK-NEXT: dp.linear_grad_weight @fc2.w(%[[A]], %[[D]]) scale(%[[C]])
// CHECK:      %[[NB:.*]] = dp.norm_bias %[[D]] [@fc2.b]
// CHECK-NEXT: %[[CB:.*]] = dp.clip_factor %[[NB]], %{{.*}} per_layer
// CHECK-NEXT: dp.bias_grad @fc2.b(%[[D]]) scale(%[[CB]])
// CHECK:      dp.norm_rank1 {{.*}} [@fc1.w]
// CHECK-NEXT: dp.clip_factor
// CHECK-NEXT: dp.linear_grad_weight @fc1.w
// CHECK:      dp.norm_bias {{.*}} [@fc1.b]
// CHECK-NEXT: dp.clip_factor
// CHECK-NEXT: dp.bias_grad @fc1.b
// CHECK-NOT:  dp.norm_sum

// -----

// Long sequences: T = 64 tokens of width 8 into 8: T(d+p) = 1024 > dp = 64,
// so the direct norm. Automatic clipping keeps its gamma.
dp.model @long {
  dp.param @w : tensor<8x8xf32>
  dp.forward(%x: tensor<?x64x8xf32>, %y: tensor<?x64x8xf32>) -> tensor<?xf32> {
    %p = dp.linear @w(%x) : tensor<?x64x8xf32> -> tensor<?x64x8xf32>
    %l = dp.mse %p, %y : tensor<?x64x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @long {
  clip = #dp.clip<automatic, max_norm = 1.0, gamma = 0.05>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @long
// CHECK: %[[N:.*]] = dp.norm_direct %{{.*}}, %{{.*}} [@w] : tensor<2x64x8xf32>, tensor<2x64x8xf32> -> tensor<2xf32>
// CHECK: %[[SUM:.*]] = dp.norm_sum %[[N]]
// CHECK: dp.clip_factor %[[SUM]], %{{.*}} automatic {gamma = 5.000000e-02 : f64, max_norm = 1.000000e+00 : f64
