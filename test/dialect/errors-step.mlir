// RUN: dp-opt %s --split-input-file --verify-diagnostics --allow-unregistered-dialect
//
// One case per diagnostic of the training step (dp.step, dp.yield) and of
// the ops the passes put in it: input gradients, per-sample norms and clip
// factors. Each model has the forward pass of a fixed batch of 2 samples.

// A model has one training step.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {

    dp.yield %mask : tensor<2xf32>
  }
  // expected-error @+1 {{a model has one training step}}
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {

    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The step takes the inputs of the forward pass and a mask.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{takes the forward pass's inputs and a mask}}
  dp.step(%mask: tensor<2xf32>) -> tensor<2xf32> {

    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The mask is a static 1-D float tensor, one entry per sample.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{the last input is the mask, a static 1-D float tensor; got 'tensor<2x1xf32>'}}
  dp.step(%x: tensor<2x8xf32>, %mask: tensor<2x1xf32>) -> tensor<2xf32> {

    %l = "test.loss"(%mask) : (tensor<2x1xf32>) -> tensor<2xf32>
    dp.yield %l : tensor<2xf32>
  }
}

// -----

// dp.yield returns what the step declares.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{must end with dp.yield of its result types}}
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {

    dp.yield %x : tensor<2x8xf32>
  }
}

// -----

// Only dp ops run in a step.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{cannot appear in a dp.step}}
    %s = "test.scale"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// Every result of a step has the physical batch as its leading dimension.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %z: tensor<3x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{results in a dp.step are static tensors with 2 samples in their leading dimension; got 'tensor<3x4xf32>'}}
    %r = dp.relu %z : tensor<3x4xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The gradient of a cross-entropy reuses the loss it differentiates.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    // expected-error @+1 {{the loss operand must be the result of the dp.cross_entropy being differentiated}}
    %g = dp.cross_entropy_grad %h, %y, %mask, %mask : tensor<2x4xf32>, tensor<2xi32>, tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// ... and the logits and targets of that cross-entropy.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    %r = dp.relu %h : tensor<2x4xf32>
    // expected-error @+1 {{logits and targets must be those of the dp.cross_entropy that produced the loss}}
    %g = dp.cross_entropy_grad %r, %y, %l, %mask : tensor<2x4xf32>, tensor<2xi32>, tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The gradient of attention reuses the output it differentiates.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %q: tensor<2x4x8xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the output operand must be the result of the dp.attention being differentiated}}
    %dq, %dk, %dv = dp.attention_grad %q, %q, %q, %q, %q {heads = 2} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// ... and the query, key and value of that attention.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %q: tensor<2x4x8xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    %o = dp.attention %q, %q, %q {heads = 2} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %k = dp.relu %q : tensor<2x4x8xf32>
    // expected-error @+1 {{query, key and value must be those of the dp.attention that produced the output}}
    %dq, %dk, %dv = dp.attention_grad %q, %k, %k, %o, %o {heads = 2} : tensor<2x4x8xf32>, tensor<2x4x8xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A Gram norm needs the output gradient of a layer.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{needs the output gradient of at least one layer}}
    %n = "dp.norm_gram"(%x) <{params = [@w]}> : (tensor<2x8xf32>) -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A Gram norm names one parameter per output gradient.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %dy: tensor<2x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{names 2 parameters for 1 output gradients}}
    %n = dp.norm_gram %x, %dy [@w, @v] : tensor<2x8xf32>, tensor<2x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A Gram norm's output gradients have the rows of its input.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%a: tensor<2x3x8xf32>, %dy: tensor<2x5x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{every output gradient must have the rows of the input}}
    %n = dp.norm_gram %a, %dy [@w] : tensor<2x3x8xf32>, tensor<2x5x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A sum of norms needs a part.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{expected 1 or more operands, but found 0}}
    %n = "dp.norm_sum"() : () -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A clip factor needs a positive bound.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{max_norm must be > 0, got -1}}
    %c = dp.clip_factor %mask, %mask flat {gamma = 0.01 : f64, max_norm = -1.0 : f64, rel_err = 0.0 : f64} : tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A NaN stability constant.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{gamma must be finite, got nan}}
    %c = dp.clip_factor %mask, %mask automatic {gamma = 0x7FF8000000000000 : f64, max_norm = 1.0 : f64, rel_err = 0.0 : f64} : tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// An infinite bound on the norm's relative error.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{rel_err must be finite, got inf}}
    %c = dp.clip_factor %mask, %mask flat {gamma = 0.01 : f64, max_norm = 1.0 : f64, rel_err = 1.0e400 : f64} : tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// A tied norm is one table's.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%tok: tensor<2x3xi32>, %de: tensor<2x3x8xf32>, %x: tensor<2x5x8xf32>, %dl: tensor<2x5x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{names 2 parameters; a tied norm is one table's}}
    %n = dp.norm_tied_cross %tok, %de, %x, %dl [@w, @w] : tensor<2x3xi32>, tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x5x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The head's input and output gradient have the same rows.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%tok: tensor<2x3xi32>, %de: tensor<2x3x8xf32>, %x: tensor<2x5x8xf32>, %dl: tensor<2x3x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the head's input and output gradient must have the same rows}}
    %n = dp.norm_tied_direct %tok, %de, %x, %dl [@w] : tensor<2x3xi32>, tensor<2x3x8xf32>, tensor<2x5x8xf32>, tensor<2x3x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The head reads the table's width.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%tok: tensor<2x3xi32>, %de: tensor<2x3x8xf32>, %x: tensor<2x5x6xf32>, %dl: tensor<2x5x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the head reads width 6 but the table has width 8}}
    %n = dp.norm_tied_cross %tok, %de, %x, %dl [@w] : tensor<2x3xi32>, tensor<2x3x8xf32>, tensor<2x5x6xf32>, tensor<2x5x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The embedding's output gradient has the token shape and the width.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%tok: tensor<2x3xi32>, %de: tensor<2x4x8xf32>, %x: tensor<2x5x8xf32>, %dl: tensor<2x5x4xf32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the embedding's output gradient must have the token shape followed by the width}}
    %n = dp.norm_tied_cross %tok, %de, %x, %dl [@w] : tensor<2x3xi32>, tensor<2x4x8xf32>, tensor<2x5x8xf32>, tensor<2x5x4xf32> -> tensor<2xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// Materialized per-sample weight gradients are stored in the operands'
// (compute) type or as MXFP8 (f8E4M3FN), which the norm and the clipped sum
// both read.
dp.model @m {
  dp.param @w : tensor<4x8xbf16>
  dp.forward(%x: tensor<2x8xbf16>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x8xbf16> -> tensor<2x4xbf16>
    %l = dp.cross_entropy %h, %y : tensor<2x4xbf16>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x3x8xbf16>, %dy: tensor<2x3x4xbf16>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{result must be in the operands' type 'bf16' or f8E4M3FN (MXFP8); got 'bf16' and 'f32'}}
    %g = dp.linear_per_sample_grad %x, %dy : tensor<2x3x8xbf16>, tensor<2x3x4xbf16> -> tensor<2x32xf32>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// An MXFP8 scale covers 32 consecutive elements of a row: they lie in one
// row of the weight only when the input width is a multiple of 32.
dp.model @m {
  dp.param @w : tensor<4x48xbf16>
  dp.forward(%x: tensor<2x48xbf16>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w(%x) : tensor<2x48xbf16> -> tensor<2x4xbf16>
    %l = dp.cross_entropy %h, %y : tensor<2x4xbf16>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x3x48xbf16>, %dy: tensor<2x3x4xbf16>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{MXFP8 (f8E4M3FN) rows need an input width that is a multiple of 32 (one scale per 32 elements of a weight row); got 48}}
    %g = dp.linear_per_sample_grad %x, %dy : tensor<2x3x48xbf16>, tensor<2x3x4xbf16> -> tensor<2x192xf8E4M3FN>
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// The runtime sums MXFP8 rows in f32: not in an f64 model.
dp.model @m {
  dp.param @w : tensor<4x32xf64>
  dp.forward(%x: tensor<2x32xf64>, %y: tensor<2xi32>) -> tensor<2xf64> {
    %h = dp.linear @w(%x) : tensor<2x32xf64> -> tensor<2x4xf64>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf64>, tensor<2xi32> -> tensor<2xf64>
    dp.return %l : tensor<2xf64>
  }
  dp.step(%x: tensor<2x3x32xf64>, %dy: tensor<2x3x4xf64>, %mask: tensor<2xf64>) -> tensor<2xf64> {
    // expected-error @+1 {{MXFP8 (f8E4M3FN) rows need a bf16 or f32 model, whose accumulation type is f32; got 'f64'}}
    %g = dp.linear_per_sample_grad %x, %dy : tensor<2x3x32xf64>, tensor<2x3x4xf64> -> tensor<2x128xf8E4M3FN>
    dp.yield %mask : tensor<2xf64>
  }
}
