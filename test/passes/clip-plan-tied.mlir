// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan | FileCheck %s
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan | dp-opt --split-input-file | FileCheck %s

// A head tied to the embedding table (@emb read by dp.embedding and as the
// weight of dp.linear) and learned positions. V = 32, d = 8, T = 4: the head
// alone would take the Gram norm (T(d + p) = 160 < dp = 256; 1312 FLOP per
// sample), the embedding norm 64 and the cross term 2 T T d + 2 T T = 288,
// against 2 T V d + T d + V d = 2336 for the formed tied gradient: the head's
// Gram norm, the embedding norm and dp.norm_tied_cross. Backward gives @emb
// both weight-gradient ops, scaled by the one clip factor.
dp.model @m {
  dp.param @emb : tensor<32x8xf32>
  dp.param @pos : tensor<6x8xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %x = dp.position_embedding @pos(%e) : tensor<?x4x8xf32>
    %s = dp.silu %x : tensor<?x4x8xf32>
    %o = dp.linear @emb(%s) : tensor<?x4x8xf32> -> tensor<?x4x32xf32>
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
// CHECK-NEXT: %[[DS:.*]] = dp.linear_grad_input @emb(%[[DLOGITS]])
// CHECK-NEXT: %[[DX:.*]] = dp.activation_grad silu %{{.*}}, %[[DS]]
// CHECK-NEXT: %[[NPOS:.*]] = dp.norm_position_embedding %[[DX]] [@pos]
// CHECK-NEXT: %[[NHEAD:.*]] = dp.norm_gram %[[S:.*]], %[[DLOGITS]] [@emb]
// CHECK-NEXT: %[[NEMB:.*]] = dp.norm_embedding %[[TOK:.*]], %[[DX]] [@emb]
// CHECK-NEXT: %[[NCROSS:.*]] = dp.norm_tied_cross %[[TOK]], %[[DX]], %[[S]], %[[DLOGITS]] [@emb]
// CHECK-NEXT: %[[SUM:.*]] = dp.norm_sum %[[NHEAD]], %[[NEMB]], %[[NCROSS]], %[[NPOS]]
// CHECK-NEXT: %[[C:.*]] = dp.clip_factor %[[SUM]]
// CHECK-DAG:  dp.linear_grad_weight @emb(%[[S]], %[[DLOGITS]]) scale(%[[C]])
// CHECK-DAG:  dp.position_embedding_grad @pos(%[[DX]]) scale(%[[C]])
// CHECK-DAG:  dp.embedding_grad @emb(%[[TOK]], %[[DX]]) scale(%[[C]])
// CHECK:      dp.yield

// -----

// V = 4, d = 8, T = 8: the head alone takes the direct norm (T(d + p) = 96
// >= dp = 32; 544), with the embedding norm (128) and the cross term (1152)
// 1824 against 608 for the formed tied gradient: one dp.norm_tied_direct.
// Per-layer clipping: the tied table is one parameter with one factor, for
// both of its weight-gradient ops (L = 1, so C_l = C).
dp.model @small {
  dp.param @emb : tensor<4x8xf32>
  dp.forward(%tok: tensor<?x8xi32>, %tgt: tensor<?x8xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x8xi32> -> tensor<?x8x8xf32>
    %o = dp.linear @emb(%e) : tensor<?x8x8xf32> -> tensor<?x8x4xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x8x4xf32>, tensor<?x8xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @small {
  clip = #dp.clip<per_layer, max_norm = 2.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @small
// CHECK:      %[[DLOGITS:.*]] = dp.cross_entropy_grad
// CHECK-NEXT: %[[DX:.*]] = dp.linear_grad_input @emb(%[[DLOGITS]])
// CHECK-NEXT: %[[N:.*]] = dp.norm_tied_direct %[[TOK:.*]], %[[DX]], %[[E:.*]], %[[DLOGITS]] [@emb]
// CHECK-NEXT: %[[C:.*]] = dp.clip_factor %[[N]], %{{.*}} per_layer {gamma = {{.*}}, max_norm = 2.000000e+00 : f64
// CHECK-NEXT: dp.linear_grad_weight @emb(%[[E]], %[[DLOGITS]]) scale(%[[C]])
// CHECK-NEXT: dp.embedding_grad @emb(%[[TOK]], %[[DX]]) scale(%[[C]])
// CHECK-NOT:  dp.clip_factor

// -----

// Per-layer clipping with the cross term: the tied table's three parts are
// summed into its one norm before its factor, with C_l = C / sqrt(2) for
// the two trainable parameters (@emb once, @pos).
dp.model @m {
  dp.param @emb : tensor<32x8xf32>
  dp.param @pos : tensor<6x8xf32>
  dp.forward(%tok: tensor<?x4xi32>, %tgt: tensor<?x4xi32>) -> tensor<?xf32> {
    %e = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %x = dp.position_embedding @pos(%e) : tensor<?x4x8xf32>
    %o = dp.linear @emb(%x) : tensor<?x4x8xf32> -> tensor<?x4x32xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x4x32xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<per_layer, max_norm = 2.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// CHECK-LABEL: dp.model @m
// CHECK:      %[[NPOS:.*]] = dp.norm_position_embedding %[[DX:.*]] [@pos]
// CHECK-NEXT: %[[CPOS:.*]] = dp.clip_factor %[[NPOS]], %{{.*}} per_layer {gamma = {{.*}}, max_norm = 1.4142135623730949 : f64
// CHECK-NEXT: dp.position_embedding_grad @pos(%[[DX]]) scale(%[[CPOS]])
// CHECK-NEXT: %[[NHEAD:.*]] = dp.norm_gram
// CHECK-NEXT: %[[NEMB:.*]] = dp.norm_embedding
// CHECK-NEXT: %[[NCROSS:.*]] = dp.norm_tied_cross
// CHECK-NEXT: %[[N:.*]] = dp.norm_sum %[[NHEAD]], %[[NEMB]], %[[NCROSS]]
// CHECK-NEXT: %[[C:.*]] = dp.clip_factor %[[N]], %{{.*}} per_layer {gamma = {{.*}}, max_norm = 1.4142135623730949 : f64
// CHECK-NEXT: dp.linear_grad_weight @emb(%{{.*}}) scale(%[[C]])
// CHECK-NEXT: dp.embedding_grad @emb(%{{.*}}) scale(%[[C]])
