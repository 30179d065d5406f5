// RUN: dp-opt %s --dp-specialize --dp-backward --dp-clip-plan="norm-methods=emb=materialized" --verify-diagnostics
// RUN: not dp-opt %s --dp-specialize --dp-backward --dp-clip-plan="norm-methods=w1=fast" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not dp-opt %s --dp-specialize --dp-backward --dp-clip-plan="norm-methods=nothere=gram" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// A forced norm method names a trainable linear weight and one of gram,
// direct and materialized; the error is at the step (the forward pass).
dp.model @m {
  dp.param @emb : tensor<32x16xf32>
  dp.param @w1 : tensor<32x16xf32>
  // expected-error@+1 {{norm-methods entry 'emb=materialized' names @emb, which is not the trainable weight of a linear layer}}
  dp.forward(%tok: tensor<?x4xi32>, %t: tensor<?x4x32xf32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%tok) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %h = dp.linear @w1(%x) : tensor<?x4x16xf32> -> tensor<?x4x32xf32>
    %l = dp.mse %h, %t : tensor<?x4x32xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}
// METHOD: error: 'dp.step' op norm-methods entry 'w1=fast' is not PARAM=METHOD with METHOD gram, direct or materialized
// UNKNOWN: error: 'dp.step' op norm-methods entry 'nothere=gram' names @nothere, which is not the trainable weight of a linear layer
