// RUN: dp-opt %s --split-input-file --dp-lora --dp-freeze --verify-diagnostics
//
// The recipe's LoRA targets and train/freeze patterns against the model:
// each must match something, the rank must fit each targeted layer, and
// something must be left to train.

// A target that matches no linear layer.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op lora target 'q_proj' matches no linear layer of model @m}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  lora = #dp.lora<rank = 2, alpha = 2.0, targets = ["w", "q_proj"]>
}

// -----

// A rank above the layer's width (min(in, out) = 4).
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op lora rank 5 is above the width of @w (4 x 8): a rank-r adapter needs r <= min(in, out)}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  lora = #dp.lora<rank = 5, alpha = 5.0, targets = ["w"]>
}

// -----

// A freeze pattern that freezes everything.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op leaves no parameter of model @m to train}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  freeze = ["*"]
}

// -----

// A pattern that matches no parameter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op freeze pattern 'v*' matches no parameter of model @m}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  freeze = ["v*"]
}

// -----

// A train pattern that matches no parameter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
// expected-error @+1 {{'dp.recipe' op train pattern 'head' matches no parameter of model @m}}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 4>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  train = ["w", "head"]
}
