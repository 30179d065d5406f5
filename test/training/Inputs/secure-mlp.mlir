// A two-layer MLP classifier for 64 features and 10 classes (the shape of
// scikit-learn's 8x8 digits), trained with DP-SGD on one rank.
//
//   dpc examples/mlp.mlir -o mlp && ./mlp --data digits.csv
//
// Each CSV line is one record (the privacy unit): 64 features, then the label.

dp.model @mlp attributes {features = 64, classes = 10} {
  dp.param @fc1.w : tensor<128x64xf32> {init = #dp.normal<0.125>}
  dp.param @fc1.b : tensor<128xf32>
  dp.param @ln.g : tensor<128xf32>
  dp.param @ln.b : tensor<128xf32>
  dp.param @fc2.w : tensor<10x128xf32> {init = #dp.normal<0.088>}
  dp.param @fc2.b : tensor<10xf32>

  dp.forward(%x: tensor<?x64xf32>, %label: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @fc1.w, @fc1.b(%x) : tensor<?x64xf32> -> tensor<?x128xf32>
    %n = dp.layer_norm @ln.g, @ln.b(%h) : tensor<?x128xf32>
    %a = dp.relu %n : tensor<?x128xf32>
    %logits = dp.linear @fc2.w, @fc2.b(%a) : tensor<?x128xf32> -> tensor<?x10xf32>
    %loss = dp.cross_entropy %logits, %label : tensor<?x10xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %loss : tensor<?xf32>
  }
}

dp.recipe @train for @mlp {
  clip = #dp.clip<flat, max_norm = 1.0>,
  noise = #dp.noise<sigma = 1.0, delta = 1.0e-5, generator = secure>,
  sampling = #dp.poisson<expected_batch = 64, physical_batch = 32>,
  optimizer = #dp.momentum<lr = 0.5, momentum = 0.9>,
  steps = 3
}
