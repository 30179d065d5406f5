// A bf16 model with two linear layers over T = 4 tokens: w1 (16 x 32) reads
// an input 32 wide, a multiple of MXFP8's 32-element scale block, w2 (8 x 16)
// one 16 wide. With dpc --per-sample-rows=mxfp8 and both materialized, w1's
// per-sample gradients are MXFP8 rows (B x 512 e4m3 bytes, then B x 16
// scale bytes) and w2's stay bf16. dpc-per-sample-rows.test.
dp.model @m {
  dp.param @w1 : tensor<16x32xbf16>
  dp.param @w2 : tensor<8x16xbf16>
  dp.forward(%x: tensor<?x4x32xbf16>, %t: tensor<?x4x8xbf16>) -> tensor<?xf32> {
    %h = dp.linear @w1(%x) : tensor<?x4x32xbf16> -> tensor<?x4x16xbf16>
    %a = dp.relu %h : tensor<?x4x16xbf16>
    %y = dp.linear @w2(%a) : tensor<?x4x16xbf16> -> tensor<?x4x8xbf16>
    %l = dp.mse %y, %t : tensor<?x4x8xbf16> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// Poisson sampling: the clipped sums in the micro-step (rows_weighted_sum).
dp.recipe @poisson for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  precision = #dp.precision<compute = bf16, master = f32>
}
// One micro-step a step: the clipped sums in the update (adamw_update_rows).
dp.recipe @shuffle for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>, optimizer = #dp.adamw<lr = 0.001>, steps = 10,
  precision = #dp.precision<compute = bf16, master = f32>
}
