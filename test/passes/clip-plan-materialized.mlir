// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="norm-methods=*=materialized" | FileCheck %s --check-prefix=FORCED
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=-1" | FileCheck %s --check-prefix=ALL
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=5120" | FileCheck %s --check-prefix=SOME
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=1023" | FileCheck %s --check-prefix=NONE
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=-1 norm-methods=w2=direct" | FileCheck %s --check-prefix=MIXED
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=-1" --dp-fuse-norms | FileCheck %s --check-prefix=FUSED

// The materialized norm method: each sample's weight gradient
// dy_b^T x_b is formed (dp.linear_per_sample_grad, B x p x d in the compute
// type: f32 here, bf16 in the last case), its
// norm summed (dp.norm_rows) and, once the clip factors are known, the
// clipped sum of the B slices added (dp.vector_grad): the weight-gradient
// product dp.linear_grad_weight is gone. T = 64, d = 16: the usual choice
// is the direct norm for w1 (32 x 16), w2 (16 x 32) and head (8 x 16)
// alike, and on the cpu time model materializing saves time for each.
// Bytes: 2 x 512 x 4 = 4096 for w1 and w2, 2 x 128 x 4 = 1024 for head.
dp.model @m {
  dp.param @emb : tensor<32x16xf32>
  dp.param @w1 : tensor<32x16xf32>
  dp.param @w2 : tensor<16x32xf32>
  dp.param @head : tensor<8x16xf32>
  dp.param @head.b : tensor<8xf32>
  dp.forward(%tok: tensor<?x64xi32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x64xi32> -> tensor<?x64x16xf32>
    %h = dp.linear @w1(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %a = dp.relu %h : tensor<?x64x32xf32>
    %y = dp.linear @w2(%a) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %o = dp.linear @head, @head.b(%y) : tensor<?x64x16xf32> -> tensor<?x64x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xf32>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// FORCED-LABEL: dp.model @m
// FORCED:      %[[DLOGITS:.*]] = dp.cross_entropy_grad
// FORCED-NEXT: %[[GHEAD:.*]] = dp.linear_per_sample_grad %[[Y:.*]], %[[DLOGITS]] : tensor<2x64x16xf32>, tensor<2x64x8xf32> -> tensor<2x128xf32>
// FORCED-NEXT: %[[NHEAD:.*]] = dp.norm_rows %[[GHEAD]] [@head] : tensor<2x128xf32> -> tensor<2xf32>
// FORCED-NEXT: %[[NBIAS:.*]] = dp.norm_bias %[[DLOGITS]] [@head.b]
// FORCED-NEXT: %[[DY:.*]] = dp.linear_grad_input @head(%[[DLOGITS]])
// FORCED-NEXT: %[[GW2:.*]] = dp.linear_per_sample_grad %{{.*}}, %[[DY]] : tensor<2x64x32xf32>, tensor<2x64x16xf32> -> tensor<2x512xf32>
// FORCED-NEXT: %[[NW2:.*]] = dp.norm_rows %[[GW2]] [@w2]
// FORCED:      %[[GW1:.*]] = dp.linear_per_sample_grad %{{.*}}, %{{.*}} : tensor<2x64x16xf32>, tensor<2x64x32xf32> -> tensor<2x512xf32>
// FORCED-NEXT: %[[NW1:.*]] = dp.norm_rows %[[GW1]] [@w1]
// FORCED:      %[[NE:.*]] = dp.norm_embedding
// FORCED-NEXT: %[[SUM:.*]] = dp.norm_sum %[[NHEAD]], %[[NBIAS]], %[[NW2]], %[[NW1]], %[[NE]]
// FORCED-NEXT: %[[C:.*]] = dp.clip_factor %[[SUM]]
// FORCED-NEXT: dp.vector_grad @head(%[[GHEAD]]) scale(%[[C]])
// FORCED-NEXT: dp.bias_grad @head.b(%[[DLOGITS]]) scale(%[[C]])
// FORCED-NEXT: dp.vector_grad @w2(%[[GW2]]) scale(%[[C]])
// FORCED-NEXT: dp.vector_grad @w1(%[[GW1]]) scale(%[[C]])
// FORCED-NEXT: dp.embedding_grad @emb
// FORCED-NOT:  dp.linear_grad_weight

// No limit: every parameter whose predicted time drops.
// ALL-LABEL: dp.model @m
// ALL-COUNT-3: dp.linear_per_sample_grad
// ALL-NOT:     dp.linear_grad_weight
// ALL-NOT:     dp.norm_direct

// 5120 bytes: by time saved per byte, head (1024 bytes) first, then w1,
// whose book-keeping product scales the wider output gradient (p = 32);
// w2 no longer fits and keeps the direct norm.
// SOME-LABEL: dp.model @m
// SOME:     dp.linear_per_sample_grad %{{.*}} -> tensor<2x128xf32>
// SOME:     dp.norm_direct %{{.*}}, %{{.*}} [@w2]
// SOME:     dp.linear_per_sample_grad %{{.*}} : tensor<2x64x16xf32>, tensor<2x64x32xf32> -> tensor<2x512xf32>
// SOME:     dp.vector_grad @head
// SOME-NEXT: dp.bias_grad @head.b
// SOME-NEXT: dp.linear_grad_weight @w2
// SOME-NEXT: dp.vector_grad @w1

// 1023 bytes: nothing fits; the plan is the book-keeping one.
// NONE-LABEL: dp.model @m
// NONE-NOT: dp.linear_per_sample_grad
// NONE-COUNT-3: dp.norm_direct
// NONE-NOT: dp.linear_per_sample_grad

// A method forced for one parameter holds whatever the budget allows.
// MIXED-LABEL: dp.model @m
// MIXED:     dp.linear_per_sample_grad %{{.*}} -> tensor<2x128xf32>
// MIXED:     dp.norm_direct %{{.*}}, %{{.*}} [@w2]
// MIXED:     dp.linear_per_sample_grad %{{.*}} -> tensor<2x512xf32>
// MIXED:     dp.linear_grad_weight @w2

// dp-fuse-norms: the kernel that forms the slices adds their norms.
// FUSED-LABEL: dp.model @m
// FUSED-COUNT-3: dp.norm_rows %{{.*}} [@{{w1|w2|head}}] {fused}

// -----

// Per-layer clipping: each parameter's slices live until its own factor,
// right after its norm, so the allowance bounds the largest of them alone
// (4096 bytes each for w1 and w2 with materialize-bytes=5120). DP off
// (below) never materializes: there is no norm.
dp.model @pl {
  dp.param @w1 : tensor<32x16xf32>
  dp.param @w2 : tensor<16x32xf32>
  dp.forward(%x: tensor<?x64x16xf32>, %t: tensor<?x64x16xf32>) -> tensor<?xf32> {
    %h = dp.linear @w1(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %a = dp.relu %h : tensor<?x64x32xf32>
    %y = dp.linear @w2(%a) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %l = dp.mse %y, %t : tensor<?x64x16xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @pl {
  clip = #dp.clip<per_layer, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// ALL-LABEL: dp.model @pl
// NONE-LABEL: dp.model @pl
// SOME-LABEL: dp.model @pl
// SOME:      %[[G2:.*]] = dp.linear_per_sample_grad
// SOME-NEXT: %[[N2:.*]] = dp.norm_rows %[[G2]] [@w2]
// SOME-NEXT: %[[C2:.*]] = dp.clip_factor %[[N2]], %{{.*}} per_layer
// SOME-NEXT: dp.vector_grad @w2(%[[G2]]) scale(%[[C2]])
// SOME:      %[[G1:.*]] = dp.linear_per_sample_grad
// SOME-NEXT: %[[N1:.*]] = dp.norm_rows %[[G1]] [@w1]
// SOME-NEXT: %[[C1:.*]] = dp.clip_factor %[[N1]], %{{.*}} per_layer
// SOME-NEXT: dp.vector_grad @w1(%[[G1]]) scale(%[[C1]])
// SOME-NOT:  dp.linear_grad_weight

// -----

dp.model @off {
  dp.param @w1 : tensor<32x16xf32>
  dp.forward(%x: tensor<?x64x16xf32>, %t: tensor<?x64x32xf32>) -> tensor<?xf32> {
    %h = dp.linear @w1(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %l = dp.mse %h, %t : tensor<?x64x32xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @off {
  clip = #dp.clip<none>, noise = #dp.none,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// SOME-LABEL: dp.model @off
// FORCED-LABEL: dp.model @off
// FORCED-NOT:  dp.linear_per_sample_grad
// FORCED-NOT:  dp.norm_
// FORCED:      dp.linear_grad_weight @w1(%{{.*}}, %{{.*}}) scale(%arg2)

// -----

// A bf16 model: the slices are stored in bf16, half the bytes of f32 ones
// (2 x 512 x 2 = 2048 for w1 and w2, 2 x 128 x 2 = 512 for head), so all
// three fit in the 5120 bytes that held two of the f32 model's above.
dp.model @half {
  dp.param @emb : tensor<32x16xbf16>
  dp.param @w1 : tensor<32x16xbf16>
  dp.param @w2 : tensor<16x32xbf16>
  dp.param @head : tensor<8x16xbf16>
  dp.forward(%tok: tensor<?x64xi32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x64xi32> -> tensor<?x64x16xbf16>
    %h = dp.linear @w1(%x) : tensor<?x64x16xbf16> -> tensor<?x64x32xbf16>
    %a = dp.relu %h : tensor<?x64x32xbf16>
    %y = dp.linear @w2(%a) : tensor<?x64x32xbf16> -> tensor<?x64x16xbf16>
    %o = dp.linear @head(%y) : tensor<?x64x16xbf16> -> tensor<?x64x8xbf16>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xbf16>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @half {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// FORCED-LABEL: dp.model @half
// FORCED:      %[[G:.*]] = dp.linear_per_sample_grad %{{.*}}, %{{.*}} : tensor<2x64x16xbf16>, tensor<2x64x8xbf16> -> tensor<2x128xbf16>
// FORCED-NEXT: dp.norm_rows %[[G]] [@head] : tensor<2x128xbf16> -> tensor<2xf32>
// FORCED:      dp.vector_grad @head(%[[G]]) scale(%{{.*}}) : tensor<2x128xbf16>, tensor<2xf32>
// SOME-LABEL: dp.model @half
// SOME-COUNT-3: dp.linear_per_sample_grad %{{.*}} -> tensor<2x{{128|512}}xbf16>
// SOME-NOT:     dp.norm_direct
