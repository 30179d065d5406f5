// RUN: dp-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect
//
// One case per diagnostic of the per-sample losses, dp.cross_entropy and
// dp.mse.

// Cross-entropy takes samples x classes or samples x tokens x vocabulary.
dp.model @m {
  dp.forward(%x: tensor<?x2x3x4xf32>, %y: tensor<?x2x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{logits must be samples x classes or samples x tokens x vocabulary}}
    %l = dp.cross_entropy %x, %y : tensor<?x2x3x4xf32>, tensor<?x2x3xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One target per token.
dp.model @m {
  dp.forward(%x: tensor<?x3x4xf32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{targets ?x4 must match the logits ?x3x4 without their last dimension}}
    %l = dp.cross_entropy %x, %y : tensor<?x3x4xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Per-sample losses of f32 models are f32.
dp.model @m {
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf64> {
    // expected-error @+1 {{the per-sample loss must be 'f32', got 'f64'}}
    %l = dp.cross_entropy %x, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf64>
    dp.return %l : tensor<?xf64>
  }
}

// -----

// One loss per sample.
dp.model @m {
  dp.forward(%x: tensor<8x4xf32>, %y: tensor<8xi32>) -> tensor<8xf32> {
    // expected-error @+1 {{the loss has 4 entries but the batch has 8 samples}}
    %l = dp.cross_entropy %x, %y : tensor<8x4xf32>, tensor<8xi32> -> tensor<4xf32>
    %m = "test.widen"(%l) : (tensor<4xf32>) -> tensor<8xf32>
    dp.return %m : tensor<8xf32>
  }
}

// -----

// A regression prediction has features.
dp.model @m {
  dp.forward(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{prediction needs a sample and a feature dimension}}
    %l = dp.mse %x, %x : tensor<8xf32> -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// An ignore_index no i32 target can hold would ignore nothing.
dp.model @m {
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{ignore_index 4294967295 is outside the range of the i32 targets}}
    %l = dp.cross_entropy %x, %y ignore_index = 4294967295 : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
