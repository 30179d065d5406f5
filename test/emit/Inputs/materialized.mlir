// Three linear layers reading one activation (T = 32, d = p = 64: the
// direct norm, and on the cpu time model each gains from the materialized
// method). Each one's per-sample gradients take 4 x 64 x 64 x 4 = 65536
// bytes and free only its own output gradient (32768 bytes): the input
// stays for the others. dpc-memory-budget.test.
dp.model @m {
  dp.param @wq : tensor<64x64xf32>
  dp.param @wk : tensor<64x64xf32>
  dp.param @wv : tensor<64x64xf32>
  dp.forward(%x: tensor<?x32x64xf32>, %t: tensor<?x32x64xf32>) -> tensor<?xf32> {
    %q = dp.linear @wq(%x) : tensor<?x32x64xf32> -> tensor<?x32x64xf32>
    %k = dp.linear @wk(%x) : tensor<?x32x64xf32> -> tensor<?x32x64xf32>
    %v = dp.linear @wv(%x) : tensor<?x32x64xf32> -> tensor<?x32x64xf32>
    %qk = dp.mul %q, %k : tensor<?x32x64xf32>
    %y = dp.add %qk, %v : tensor<?x32x64xf32>
    %l = dp.mse %y, %t : tensor<?x32x64xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @flat for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
dp.recipe @per_layer for @m {
  clip = #dp.clip<per_layer, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
