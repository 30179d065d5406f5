// RUN: dp-opt %s --split-input-file --verify-diagnostics
//
// One case per diagnostic of dp.attention.

// Attention takes samples x tokens x features.
dp.model @m {
  dp.forward(%q: tensor<?x8xf32>, %k: tensor<?x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query and key must be samples x tokens x features}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x8xf32>, tensor<?x8xf32>
    %l = dp.mse %a, %q : tensor<?x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query and key have the same samples and tokens.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x5x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query ?x4x8 and key ?x5x8 must have the same samples and tokens}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x4x8xf32>, tensor<?x5x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query and key share an element type.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xbf16>) -> tensor<?xf32> {
    // expected-error @+1 {{query and key element types differ}}
    %a = dp.attention %q, %k, %k {heads = 2} : tensor<?x4x8xf32>, tensor<?x4x8xbf16>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The query width splits into whole heads.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query width 8 is not divisible by 3 heads}}
    %a = dp.attention %q, %q, %q {heads = 3} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Query heads group evenly over key/value heads.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x6xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{4 query heads cannot be grouped over 3 key/value heads}}
    %a = dp.attention %q, %k, %k {heads = 4, kv_heads = 3} : tensor<?x4x8xf32>, tensor<?x4x6xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Keys hold kv_heads heads of the query head size.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %k: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{key width 8 must be kv_heads x head size = 1 x 4}}
    %a = dp.attention %q, %k, %k {heads = 2, kv_heads = 1} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Rotary embeddings rotate pairs of features.
dp.model @m {
  dp.forward(%q: tensor<?x4x6xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rotary embedding needs an even head size, got 3}}
    %a = dp.attention %q, %q, %q {heads = 2, rope} : tensor<?x4x6xf32>, tensor<?x4x6xf32>
    %l = dp.mse %a, %q : tensor<?x4x6xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The rotary base is positive.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rope_theta must be > 0}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_theta = 0.0} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// At least one head.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    %a = dp.attention %q, %q, %q {heads = 0} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// An infinite rotary base.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %t: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rope_theta must be finite, got inf}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_theta = 1.0e400} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %t : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// A NaN rotary base.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>, %t: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{rope_theta must be finite, got nan}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_theta = 0x7FF8000000000000 : f64} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %t : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// The head geometry needs the widths.
dp.model @m {
  dp.forward(%q: tensor<?x4x?xf32>, %t: tensor<?x4x?xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{query ?x4x? and key ?x4x? need static widths}}
    %a = dp.attention %q, %q, %q {heads = 2} : tensor<?x4x?xf32>, tensor<?x4x?xf32>
    %l = dp.mse %a, %t : tensor<?x4x?xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Scaled rotary frequencies need the rotary embedding.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{has rope_scaling but no rotary embedding (rope)}}
    %a = dp.attention %q, %q, %q {heads = 2, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 16>} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

// Llama 3's blend divides by high_freq_factor - low_freq_factor.
dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{high_freq_factor (1) must be above low_freq_factor (1)}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 1.0, original_max_position_embeddings = 16>} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{factor must be > 0}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_scaling = #dp.rope_llama3<factor = 0.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 16>} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}

// -----

dp.model @m {
  dp.forward(%q: tensor<?x4x8xf32>) -> tensor<?xf32> {
    // expected-error @+1 {{original_max_position_embeddings must be >= 1, got 0}}
    %a = dp.attention %q, %q, %q {heads = 2, rope, rope_scaling = #dp.rope_llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position_embeddings = 0>} : tensor<?x4x8xf32>, tensor<?x4x8xf32>
    %l = dp.mse %a, %q : tensor<?x4x8xf32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
