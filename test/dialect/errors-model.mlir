// RUN: dp-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect
//
// One case per diagnostic of dp.model, dp.param and its initializers,
// dp.forward and dp.return.

// Normal initializers need a non-negative deviation.
dp.model @m {
  // expected-error @+1 {{standard deviation must be >= 0, got -0.02}}
  dp.param @w : tensor<4x8xf32> {init = #dp.normal<-0.02>}
}

// -----

// Uniform initializers need a non-negative bound.
dp.model @m {
  // expected-error @+1 {{bound must be >= 0, got -1}}
  dp.param @w : tensor<4x8xf32> {init = #dp.uniform<-1.0>}
}

// -----

// An initializer must be one of the dp initializers.
dp.model @m {
  // expected-error @+1 {{init must be #dp.normal, #dp.uniform, #dp.zeros, #dp.ones or #dp.diagonal, got 1.000000e+00 : f32}}
  dp.param @w : tensor<4x8xf32> {init = 1.0 : f32}
}

// -----

// Parameters are float tensors.
dp.model @m {
  // expected-error @+1 {{parameters are float tensors, got 'tensor<4x8xi32>'}}
  dp.param @w : tensor<4x8xi32>
}

// -----

// Parameters have static shapes.
dp.model @m {
  // expected-error @+1 {{attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
  dp.param @w : tensor<?x8xf32>
}

// -----

// An empty parameter.
dp.model @m {
  // expected-error @+1 {{parameter has no elements}}
  dp.param @w : tensor<0x8xf32>
}

// -----

// A named FSDP unit needs a name.
dp.model @m {
  // expected-error @+1 {{unit name must not be empty}}
  dp.param @w : tensor<4x8xf32> {unit = ""}
}

// -----

// Parameters live in a model.
// expected-error @+1 {{'dp.param' op expects parent op 'dp.model'}}
dp.param @w : tensor<4x8xf32>

// -----

// A model must have a forward pass.
// expected-error @+1 {{has no dp.forward}}
dp.model @m {
  dp.param @w : tensor<4x8xf32>
}

// -----

// A model has one forward pass.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
  // expected-error @+1 {{a model has one forward pass; the first is at}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Only parameters and the forward pass belong in a model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{cannot appear in a dp.model, which holds only dp.param and dp.forward}}
  shard.grid @g(shape = 2)
}

// -----

// Every parameter is used.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{parameter @spare is never read by the forward pass}}
  dp.param @spare : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A parameter may be shared only as an embedding table that one dp.linear
// also reads as its weight (tied input and output embeddings); two
// embeddings of one table are refused.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.param @w : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-note @+1 {{first read here}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    // expected-error @+1 {{reads parameter @emb which another layer already reads; a parameter may be shared only as the table of one dp.embedding that is also the weight of one dp.linear (tied input and output embeddings)}}
    %x2 = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %s = dp.add %x, %x2 : tensor<?x4x8xf32>
    %h = dp.linear @w(%s) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Two linear layers of one weight.
dp.model @m {
  dp.param @w : tensor<8x8xf32>
  dp.param @head : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    // expected-note @+1 {{first read here}}
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x8xf32>
    // expected-error @+1 {{reads parameter @w which another layer already reads}}
    %h2 = dp.linear @w(%h) : tensor<?x8xf32> -> tensor<?x8xf32>
    %o = dp.linear @head(%h2) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %o, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A tied table read a third time.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-note @+1 {{first read here}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<?x4x8xf32>
    %h = dp.linear @emb(%x) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    // expected-error @+1 {{reads parameter @emb which two other layers already read}}
    %h2 = dp.linear @emb(%x) : tensor<?x4x8xf32> -> tensor<?x4x16xf32>
    %s = dp.add %h, %h2 : tensor<?x4x16xf32>
    %l = dp.cross_entropy %s, %y : tensor<?x4x16xf32>, tensor<?x4xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One float type in a model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{parameter @e is 'bf16' but the model's other parameters are 'f32'; one model computes in one float type}}
  dp.param @e : tensor<16x8xbf16>
  dp.forward(%x: tensor<?x8xf32>, %t: tensor<?xi32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %unused = dp.embedding @e(%t) : tensor<?xi32> -> tensor<?x8xbf16>
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The forward pass returns one loss per sample, not several values.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{returns exactly one value, the per-sample loss}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> (tensor<?xf32>, tensor<?xf32>) {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l, %l : tensor<?xf32>, tensor<?xf32>
  }
}

// -----

// A batch-mean loss would hide the per-sample losses.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{must return a 1-D float tensor (one loss per sample), got 'tensor<?x4xf32>'}}
  dp.forward(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    dp.return %h : tensor<?x4xf32>
  }
}

// -----

// dp.return must return what dp.forward declares.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    // expected-error @+1 {{returns 'tensor<?x4xf32>' but the forward pass is declared to return 'tensor<?xf32>'}}
    dp.return %h : tensor<?x4xf32>
  }
}

// -----

// A forward pass without inputs has no samples.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{needs at least one input}}
  dp.forward() -> tensor<?xf32> {
    %l = "test.make_loss"() : () -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Inputs disagree on the number of samples.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{input #1 has 8 samples in its leading dimension but the forward pass has ?}}
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<8xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<?x4xf32>, tensor<8xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Only dp layers run in the forward pass.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    // expected-error @+1 {{is not a layer; dp.forward holds only dp layers}}
    %s = "test.scale"(%h) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %l = dp.cross_entropy %s, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A layer whose result has another number of samples.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.param @w : tensor<4x8xf32>
  dp.forward(%t: tensor<?x4xi32>, %y: tensor<?x4xi32>) -> tensor<?xf32> {
    // expected-error @+1 {{result #0 has 2 samples in its leading dimension but the forward pass has ?}}
    %x = dp.embedding @emb(%t) : tensor<?x4xi32> -> tensor<2x4x8xf32>
    %h = dp.linear @w(%x) : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %l = "test.loss"(%h, %y) : (tensor<2x4x4xf32>, tensor<?x4xi32>) -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// dp.forward lives in a model.
// expected-error @+1 {{'dp.forward' op expects parent op 'dp.model'}}
dp.forward(%x: tensor<?x8xf32>) -> tensor<?xf32> {
  %l = "test.loss"(%x) : (tensor<?x8xf32>) -> tensor<?xf32>
  dp.return %l : tensor<?xf32>
}

// -----

// dp.return belongs to dp.forward.
dp.model @m {
  // expected-error @+1 {{'dp.return' op expects parent op 'dp.forward'}}
  dp.return
}

// -----

// An infinite standard deviation.
dp.model @m {
  // expected-error @+1 {{standard deviation must be finite, got inf}}
  dp.param @w : tensor<4x8xf32> {init = #dp.normal<1.0e400>}
}

// -----

// An infinite uniform bound.
dp.model @m {
  // expected-error @+1 {{bound must be finite, got -inf}}
  dp.param @w : tensor<4x8xf32> {init = #dp.uniform<-1.0e400>}
}

// -----

// A parameter with more elements than int64 counts (2^64, which wraps to 0).
dp.model @m {
  // expected-error @+1 {{parameter @w of shape 4294967296x4294967296 has more bytes than int64 counts}}
  dp.param @w : tensor<4294967296x4294967296xf32>
}

// -----

// A parameter no device holds.
dp.model @m {
  // expected-error @+1 {{parameter @w of shape 65536x65536x65536 takes 1.0 PiB, more than the 1 TiB that no device holds}}
  dp.param @w : tensor<65536x65536x65536xf32>
}

// -----

// Only the sample dimension may be dynamic: the others are the shape of a
// sample.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  // expected-error @+1 {{input #1 of shape ?x? has a dynamic dimension #1; only the leading (sample) dimension may be '?'}}
  dp.forward(%x: tensor<?x8xf32>, %z: tensor<?x?xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %r = dp.relu %z : tensor<?x?xf32>
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A sequence of no tokens.
dp.model @m {
  dp.param @emb : tensor<16x8xf32>
  dp.param @w : tensor<16x8xf32>
  // expected-error @+1 {{input #0 of shape ?x0 has a dimension of size 0: it holds nothing}}
  dp.forward(%t: tensor<?x0xi32>, %y: tensor<?x0xi32>) -> tensor<?xf32> {
    %x = dp.embedding @emb(%t) : tensor<?x0xi32> -> tensor<?x0x8xf32>
    %h = dp.linear @w(%x) : tensor<?x0x8xf32> -> tensor<?x0x16xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x0x16xf32>, tensor<?x0xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One sample no device holds.
dp.model @m {
  dp.param @g : tensor<4xf32>
  // expected-error @+1 {{input #0 of shape ?x1048576x1048576x4 takes 16.0 TiB per sample, more than the 1 TiB that no device holds}}
  dp.forward(%x: tensor<?x1048576x1048576x4xf32>, %t: tensor<?x1048576x1048576x4xf32>) -> tensor<?xf32> {
    %h = dp.rms_norm @g(%x) : tensor<?x1048576x1048576x4xf32>
    %l = dp.mse %h, %t : tensor<?x1048576x1048576x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// One sample with more elements than int64 counts.
dp.model @m {
  dp.param @g : tensor<4xf32>
  // expected-error @+1 {{input #0 of shape ?x4611686018427387904x4 has more bytes per sample than int64 counts}}
  dp.forward(%x: tensor<?x4611686018427387904x4xf32>, %t: tensor<?x4611686018427387904x4xf32>) -> tensor<?xf32> {
    %h = dp.rms_norm @g(%x) : tensor<?x4611686018427387904x4xf32>
    %l = dp.mse %h, %t : tensor<?x4611686018427387904x4xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A batch of fixed size is counted whole.
dp.model @m {
  dp.param @g : tensor<4xf32>
  // expected-error @+1 {{input #0 of shape 1048576x1048576x1x1x4 takes 16.0 TiB in all, more than the 1 TiB that no device holds}}
  dp.forward(%x: tensor<1048576x1048576x1x1x4xf32>, %t: tensor<1048576x1048576x1x1x4xf32>) -> tensor<1048576xf32> {
    %h = dp.rms_norm @g(%x) : tensor<1048576x1048576x1x1x4xf32>
    %l = dp.mse %h, %t : tensor<1048576x1048576x1x1x4xf32> -> tensor<1048576xf32>
    dp.return %l : tensor<1048576xf32>
  }
}

// -----

// #dp.diagonal initializes square matrices only.
dp.model @m {
  // expected-error @+1 {{#dp.diagonal initializes a square matrix, not 'tensor<4x8xf32>'}}
  dp.param @w : tensor<4x8xf32> {init = #dp.diagonal<1.0>}
}
