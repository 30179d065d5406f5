// RUN: dp-opt %s --split-input-file --verify-diagnostics
//
// One case per diagnostic of the FSDP units (dp.unit) and their collectives
// (dp.all_gather, dp.reduce_scatter), as dp-shard writes them.

// One offset per parameter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{has 2 parameters but 1 offsets}}
  dp.unit @u params [@w, @b] offsets [0] {numel = 36, shard = 18, ranks = 2}
}

// -----

// A unit lives on at least one rank.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{needs at least one rank, a non-negative shard and a non-negative numel; got ranks = 0, shard = 32, numel = 32}}
  dp.unit @u params [@w] offsets [0] {numel = 32, shard = 32, ranks = 0}
}

// -----

// A negative shard (the accessors read it as 2^64 - 1).
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{needs at least one rank, a non-negative shard and a non-negative numel; got ranks = 2, shard = -1, numel = 32}}
  dp.unit @u params [@w] offsets [0] {numel = 32, shard = -1, ranks = 2}
}

// -----

// The flat buffer's size overflows int64 (and wrapped to 0 before).
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{4 shards of 4611686018427387904 elements overflow int64}}
  dp.unit @u params [@w] offsets [0] {numel = 32, shard = 4611686018427387904, ranks = 4}
}

// -----

// The shards hold the unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{holds 36 elements but 2 shards of 16 hold fewer}}
  dp.unit @u params [@w, @b] offsets [0, 32] {numel = 36, shard = 16, ranks = 2}
}

// -----

// A parameter starts inside the unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{offset -5 of @w lies outside the unit's 32 elements}}
  dp.unit @u params [@w] offsets [-5] {numel = 32, shard = 16, ranks = 2}
}

// -----

// Parameters lie in the order of their offsets, one after the other.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{offsets must increase}}
  dp.unit @u params [@w, @b] offsets [0, 0] {numel = 36, shard = 18, ranks = 2}
}

// -----

// A unit holds parameters of the model.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{holds unknown parameter @v}}
  dp.unit @u params [@w, @v] offsets [0, 32] {numel = 36, shard = 18, ranks = 2}
}

// -----

// Parameters do not overlap.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{parameter @w of 32 elements at offset 0 overruns the next parameter's offset 16}}
  dp.unit @u params [@w, @b] offsets [0, 16] {numel = 36, shard = 18, ranks = 2}
}

// -----

// The last parameter ends inside the unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  // expected-error @+1 {{parameter @b of 4 elements at offset 32 overruns the unit's numel 34}}
  dp.unit @u params [@w, @b] offsets [0, 32] {numel = 34, shard = 17, ranks = 2}
}

// -----

// A gather names a unit.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{refers to unknown unit @u}}
    dp.all_gather @u forward
    dp.yield %mask : tensor<2xf32>
  }
}

// -----

// So does a reduce-scatter.
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.param @b : tensor<4xf32>
  dp.forward(%x: tensor<2x8xf32>, %y: tensor<2xi32>) -> tensor<2xf32> {
    %h = dp.linear @w, @b(%x) : tensor<2x8xf32> -> tensor<2x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<2x4xf32>, tensor<2xi32> -> tensor<2xf32>
    dp.return %l : tensor<2xf32>
  }
  dp.unit @u params [@w, @b] offsets [0, 32] {numel = 36, shard = 18, ranks = 2}
  dp.step(%x: tensor<2x8xf32>, %y: tensor<2xi32>, %mask: tensor<2xf32>) -> tensor<2xf32> {
    dp.all_gather @u backward
    // expected-error @+1 {{refers to unknown unit @w}}
    dp.reduce_scatter @w
    dp.yield %mask : tensor<2xf32>
  }
}
