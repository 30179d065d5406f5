// The number of ranks, when given, is 1 to 2^31 - 1 (the runtime counts
// ranks in an int32_t): 0 and negatives used to build a 1-rank program and
// 2^32 + 1 was cut to 1. dp-specialize checks its option, the dp-compile
// pipeline hands its own to dp-specialize, and the lowering checks the grid
// it is given (lower-to-runtime-ranks.mlir).
// RUN: not dp-opt %s --dp-specialize=ranks=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dp-opt %s --dp-specialize=ranks=-3 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not dp-opt %s --dp-specialize=ranks=4294967297 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: not dp-opt %s --dp-compile=ranks=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dp-opt %s --dp-compile="ranks=4294967297 backend=cuda" 2>&1 | FileCheck %s --check-prefix=WIDE
// ZERO: error: ranks = 0 is not a number of ranks; give 1 to 2147483647
// NEGATIVE: error: ranks = -3 is not a number of ranks; give 1 to 2147483647
// WIDE: error: ranks = 4294967297 is not a number of ranks; give 1 to 2147483647
//
// Not given (-1), the grid decides (1 without one); the largest number is
// fine.
// RUN: dp-opt %s --dp-compile | FileCheck %s --check-prefix=DEFAULT
// RUN: dp-opt %s --dp-compile=ranks=-1 | FileCheck %s --check-prefix=DEFAULT
// RUN: dp-opt %s --dp-specialize=ranks=2147483647 | FileCheck %s --check-prefix=MOST
// DEFAULT: "describe_program"({{.*}}) {args = ["m", "cpu", 1 : i32,
// MOST: shard.grid @dp_ranks(shape = 2147483647)
dp.model @m {
  dp.param @w : tensor<4x8xf32>
  dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
    %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
    %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @r for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
}

