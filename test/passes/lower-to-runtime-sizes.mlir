// RUN: dp-opt %s --split-input-file --verify-diagnostics --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime

// Byte sizes are checked arithmetic: a physical batch of 2^63 - 1 samples
// needs more bytes than a 64-bit size can count, and the lowering says
// which buffer, instead of a program with negative sizes.
// expected-error @+1 {{the size of buffer 'input0' (9223372036854775807 x 8 x 4 bytes) does not fit in 64 bits}}
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 9223372036854775807>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

// -----

// 2^55 samples of 8 features fit (2^60 bytes); their 64 hidden features
// (2^63 bytes) do not.
dp.model @m {
  dp.param @w1 : tensor<64x8xf32>
  dp.param @w2 : tensor<4x64xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{'dp.linear' op result #0 is 'tensor<36028797018963968x64xf32>', more bytes than a 64-bit size can count}}
    %h = dp.linear @w1(%x) : tensor<?x8xf32> -> tensor<?x64xf32>
    %o = dp.linear @w2(%h) : tensor<?x64xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 36028797018963968>,
  optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
