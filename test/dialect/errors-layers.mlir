// RUN: dp-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect
//
// One case per diagnostic of the layers with parameters (linear, embedding,
// normalizations) and of the elementwise layers.

// A layer reading a parameter that does not exist.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{reads unknown parameter @v}}
    %h = dp.linear @v(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A layer reading a symbol that is not a parameter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  shard.grid @g(shape = 2)
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{@g is not a dp.param}}
    %h = dp.linear @g(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A weight of the wrong shape (out x in expected).
dp.model @m {
  dp.param @w : tensor<8x4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{weight @w has shape 8x4 but this layer needs 4x8}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A bias of the wrong size.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{bias @b has shape 8 but this layer needs 4}}
    %h = dp.linear @w, @b(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Parameters and activations share one float type.
dp.model @m {
  dp.param @w : tensor<4x8xbf16>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{parameter @w is 'bf16' but the activations are 'f32'}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Linear layers take samples x features or samples x tokens x features.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x2x3x8xf32>, %y: tensor<?x2x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input must be samples x features or samples x tokens x features, got rank 4}}
    %h = dp.linear @w(%x) : tensor<?x2x3x8xf32> -> tensor<?x2x3x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x2x3x4xf32>, tensor<?x2x3xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A linear layer does not change the element type.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input and output element types differ}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xbf16>
    %l = "test.loss"(%h, %y) : (tensor<?x4xbf16>, tensor<?xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A linear layer keeps the sample and token dimensions.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x3x8xf32>, %y: tensor<?x3xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input ?x3x8 and output ?x5x4 must agree on all dimensions but the last}}
    %h = dp.linear @w(%x) : tensor<?x3x8xf32> -> tensor<?x5x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x5x4xf32>, tensor<?x3xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An embedding table is vocabulary x width.
dp.model @m {
  dp.param @emb : tensor<16xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{table @emb must be 2-D (vocabulary x width), got 16}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An embedding's output is the token shape followed by the width.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{output shape ?x4x16 must be the token shape followed by the table width, ?x4x8}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Token ids are integers.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xf32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values}}
    %x = dp.embedding @emb(%t) : tensor<?x4xf32> -> tensor<?x4x8xf32>
    %l = dp.cross_entropy %x, %y : tensor<?x4x8xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A normalization scale spans the last dimension.
dp.model @m {
  dp.param @g : tensor<4xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{scale @g has shape 4 but this layer needs 8}}
    %h = dp.rms_norm @g(%x) : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Normalization needs eps > 0 so that a zero row does not divide by zero.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be > 0, got 0}}
    %h = dp.rms_norm @g(%x) {eps = 0.0} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Normalization needs a feature dimension besides the samples.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{input needs a sample and a feature dimension}}
    %h = dp.rms_norm @g(%x) : tensor<8xf32>
    %l = "test.loss"(%h, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// A layer-norm bias spans the last dimension.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.param @b : tensor<3xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{bias @b has shape 3 but this layer needs 8}}
    %h = dp.layer_norm @g, @b(%x) : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Layer norm needs eps > 0.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be > 0, got -1e-05}}
    %h = dp.layer_norm @g(%x) {eps = -1.0e-5} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Layer norm needs a feature dimension besides the samples.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{input needs a sample and a feature dimension}}
    %h = dp.layer_norm @g(%x) : tensor<8xf32>
    %l = "test.loss"(%h, %y) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    dp.return %l : tensor<8xf32>
  }
}

// -----

// Residual sums need equal types.
dp.model @m {
  // expected-note @+1 {{prior use here}}
  dp.forward(%x: tensor<?x4xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{use of value '%y' expects different type than prior uses: 'tensor<?x4xf32>' vs 'tensor<?x8xf32>'}}
    %s = dp.add %x, %y : tensor<?x4xf32>
    %l = dp.mse %s, %x : tensor<?x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// GELU has two forms.
dp.model @m {
  dp.forward(%x: tensor<?x4xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{expected ':'}}
    %a = dp.gelu %x sigmoid : tensor<?x4xf32>
    %l = dp.mse %a, %x : tensor<?x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An infinite eps (1.0e400 reached the C++ compiler as INFINITY).
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be finite, got inf}}
    %h = dp.rms_norm @g(%x) {eps = 1.0e400} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A NaN eps.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps must be finite, got nan}}
    %h = dp.rms_norm @g(%x) {eps = 0x7FF8000000000000 : f64} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An eps that flushes to zero in f32.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps (added in f32) must lie in [1.17549e-38, 3.40282e+38], got 1e-50}}
    %h = dp.layer_norm @g(%x) {eps = 1.0e-50} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An eps that is infinite in f32.
dp.model @m {
  dp.param @g : tensor<8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{eps (added in f32) must lie in [1.17549e-38, 3.40282e+38], got 1e+300}}
    %h = dp.layer_norm @g(%x) {eps = 1.0e300} : tensor<?x8xf32>
    %l = dp.mse %h, %y : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Learned positions: samples x tokens x features.
dp.model @m {
  dp.param @pos : tensor<4x8xf32>
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{input must be samples x tokens x features, got rank 2}}
    %p = dp.position_embedding @pos(%x) : tensor<?x8xf32>
    %h = dp.linear @w(%p) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A position table of the wrong width.
dp.model @m {
  dp.param @pos : tensor<8x6xf32>
  dp.forward(%x: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{table @pos has shape 8x6 but this layer needs positions x 8}}
    %p = dp.position_embedding @pos(%x) : tensor<?x4x8xf32>
    %l = dp.mse %p, %x : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A position table with fewer rows than a sample has tokens.
dp.model @m {
  dp.param @pos : tensor<3x8xf32>
  dp.forward(%x: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{table @pos holds 3 positions but a sample has 4 tokens}}
    %p = dp.position_embedding @pos(%x) : tensor<?x4x8xf32>
    %l = dp.mse %p, %x : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
