// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="norm-methods=*=materialized per-sample-rows=mxfp8" | FileCheck %s --check-prefix=FORCED
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="norm-methods=*=materialized per-sample-rows=mxfp8" | dp-opt --split-input-file | FileCheck %s --check-prefix=FORCED
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=4224" | FileCheck %s --check-prefix=COMPUTE
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=4224 per-sample-rows=mxfp8" | FileCheck %s --check-prefix=MXFP8
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="materialize-bytes=4223 per-sample-rows=mxfp8" | FileCheck %s --check-prefix=TIGHT
// RUN: dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan="norm-methods=*=materialized per-sample-rows=compute" | FileCheck %s --check-prefix=DEFAULT

// per-sample-rows=mxfp8: the materialized per-sample gradients of a weight
// whose input width d is a multiple of 32 are f8E4M3FN rows (MXFP8, one
// scale per 32 elements, within a row of the weight); the norm and the
// clipped sum read those rows. w2 (16 x 32: d = 32) gets them; w1 and head
// (d = 16) keep f32 rows, as every weight does with per-sample-rows=compute.
dp.model @m {
  dp.param @emb : tensor<32x16xf32>
  dp.param @w1 : tensor<32x16xf32>
  dp.param @w2 : tensor<16x32xf32>
  dp.param @head : tensor<8x16xf32>
  dp.forward(%tok: tensor<?x64xi32>, %tgt: tensor<?x64xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x64xi32> -> tensor<?x64x16xf32>
    %h = dp.linear @w1(%x) : tensor<?x64x16xf32> -> tensor<?x64x32xf32>
    %a = dp.relu %h : tensor<?x64x32xf32>
    %y = dp.linear @w2(%a) : tensor<?x64x32xf32> -> tensor<?x64x16xf32>
    %o = dp.linear @head(%y) : tensor<?x64x16xf32> -> tensor<?x64x8xf32>
    %l = dp.cross_entropy %o, %tgt : tensor<?x64x8xf32>, tensor<?x64xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// FORCED-LABEL: dp.model @m
// FORCED:      %[[GHEAD:.*]] = dp.linear_per_sample_grad %{{.*}}, %{{.*}} : tensor<2x64x16xf32>, tensor<2x64x8xf32> -> tensor<2x128xf32>
// FORCED:      %[[GW2:.*]] = dp.linear_per_sample_grad %{{.*}}, %{{.*}} : tensor<2x64x32xf32>, tensor<2x64x16xf32> -> tensor<2x512xf8E4M3FN>
// FORCED-NEXT: %[[NW2:.*]] = dp.norm_rows %[[GW2]] [@w2] : tensor<2x512xf8E4M3FN> -> tensor<2xf32>
// FORCED:      %[[GW1:.*]] = dp.linear_per_sample_grad %{{.*}}, %{{.*}} : tensor<2x64x16xf32>, tensor<2x64x32xf32> -> tensor<2x512xf32>
// FORCED:      %[[C:.*]] = dp.clip_factor
// FORCED:      dp.vector_grad @head(%[[GHEAD]]) scale(%[[C]]) : tensor<2x128xf32>, tensor<2xf32>
// FORCED-NEXT: dp.vector_grad @w2(%[[GW2]]) scale(%[[C]]) : tensor<2x512xf8E4M3FN>, tensor<2xf32>
// FORCED-NEXT: dp.vector_grad @w1(%[[GW1]]) scale(%[[C]]) : tensor<2x512xf32>, tensor<2xf32>

// DEFAULT-LABEL: dp.model @m
// DEFAULT-NOT:   f8E4M3FN
// DEFAULT-COUNT-3: dp.linear_per_sample_grad %{{.*}} -> tensor<2x{{128|512}}xf32>
// DEFAULT-NOT:   f8E4M3FN

// COMPUTE-LABEL: dp.model @m
// MXFP8-LABEL: dp.model @m
// TIGHT-LABEL: dp.model @m

// -----

// The allowance counts MXFP8 rows at their size: three bf16 weights of
// 32 x 32 (d = 32), whose 2 x 1024 per-sample gradient elements take 4096
// bytes as bf16 and 2048 + 2048 / 32 = 2112 as MXFP8. 4224 bytes hold one
// weight's bf16 rows but two weights' MXFP8 rows; 4223 bytes hold one
// weight's MXFP8 rows only (at one byte an element, without the scales, two
// would fit: 4096).
dp.model @budget {
  dp.param @w1 : tensor<32x32xbf16>
  dp.param @w2 : tensor<32x32xbf16>
  dp.param @w3 : tensor<32x32xbf16>
  dp.forward(%x: tensor<?x64x32xbf16>, %t: tensor<?x64x32xbf16>) -> tensor<?xf32> {
    %h1 = dp.linear @w1(%x) : tensor<?x64x32xbf16> -> tensor<?x64x32xbf16>
    %a1 = dp.relu %h1 : tensor<?x64x32xbf16>
    %h2 = dp.linear @w2(%a1) : tensor<?x64x32xbf16> -> tensor<?x64x32xbf16>
    %a2 = dp.relu %h2 : tensor<?x64x32xbf16>
    %y = dp.linear @w3(%a2) : tensor<?x64x32xbf16> -> tensor<?x64x32xbf16>
    %l = dp.mse %y, %t : tensor<?x64x32xbf16> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @budget {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// COMPUTE-LABEL: dp.model @budget
// COMPUTE-COUNT-1: dp.linear_per_sample_grad %{{.*}} -> tensor<2x1024xbf16>
// COMPUTE-NOT:     dp.linear_per_sample_grad
// COMPUTE-COUNT-2: dp.linear_grad_weight

// MXFP8-LABEL: dp.model @budget
// MXFP8-COUNT-2: dp.linear_per_sample_grad %{{.*}} -> tensor<2x1024xf8E4M3FN>
// MXFP8-NOT:     dp.linear_per_sample_grad
// MXFP8-COUNT-1: dp.linear_grad_weight
// MXFP8-NOT:     dp.linear_grad_weight

// TIGHT-LABEL: dp.model @budget
// TIGHT-COUNT-1: dp.linear_per_sample_grad %{{.*}} -> tensor<2x1024xf8E4M3FN>
// TIGHT-NOT:     dp.linear_per_sample_grad
// TIGHT-COUNT-2: dp.linear_grad_weight

// -----

// An f64 model keeps f64 rows: the runtime sums MXFP8 rows' norms and
// clipped sums in f32, not in the f64 model's accumulation type.
dp.model @double {
  dp.param @w : tensor<32x32xf64>
  dp.forward(%x: tensor<?x64x32xf64>, %t: tensor<?x64x32xf64>) -> tensor<?xf64> {
    %y = dp.linear @w(%x) : tensor<?x64x32xf64> -> tensor<?x64x32xf64>
    %l = dp.mse %y, %t : tensor<?x64x32xf64> -> tensor<?xf64>
    dp.return %l : tensor<?xf64>
  }
}
dp.recipe @r for @double {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// COMPUTE-LABEL: dp.model @double
// MXFP8-LABEL: dp.model @double
// TIGHT-LABEL: dp.model @double
// FORCED-LABEL: dp.model @double
// FORCED: dp.linear_per_sample_grad %{{.*}} -> tensor<2x1024xf64>
