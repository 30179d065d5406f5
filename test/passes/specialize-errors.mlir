// RUN: dp-opt %s --split-input-file --verify-diagnostics --dp-specialize=ranks=4

// A static grid must agree with the ranks asked for.
// expected-error @+1 {{has 2 ranks but 4 were asked for; declare it with shape = ? to choose the number of ranks when compiling}}
shard.grid @g(shape = 2)
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
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// Nothing to compile without a recipe.
// expected-error @+1 {{no dp.recipe: nothing says how to train the model}}
module {
  dp.model @m {
    dp.param @w : tensor<4x8xf32>
    dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
      %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
      %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
      dp.return %l : tensor<?xf32>
    }
  }
}

// -----

// Two recipes and no choice.
// expected-error @+1 {{several dp.recipe ops; choose one (dp-specialize recipe=NAME, or dpc --recipe NAME)}}
module {
  dp.model @m {
    dp.param @w : tensor<4x8xf32>
    dp.forward(%x: tensor<?x8xf32>, %y: tensor<?xi32>) -> tensor<?xf32> {
      %h = dp.linear @w(%x) : tensor<?x8xf32> -> tensor<?x4xf32>
      %l = dp.cross_entropy %h, %y : tensor<?x4xf32>, tensor<?xi32> -> tensor<?xf32>
      dp.return %l : tensor<?xf32>
    }
  }
  dp.recipe @a for @m {
    clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
    sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
  }
  dp.recipe @b for @m {
    clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
    sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10
  }
}

// -----

// A 2-D grid (hybrid sharding): the ranks must divide into its replicas.
// expected-error @+1 {{has shape 3x?: 4 ranks do not divide into 3 replicas of equal size}}
shard.grid @g(shape = 3x?)
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
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// Neither dimension fixed: the ranks do not say the split.
// expected-error @+1 {{has shape ?x?: 4 ranks do not say how many replicas and how many shards; fix one of the two dimensions}}
shard.grid @g(shape = ?x?)
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
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}

// -----

// A static 2-D grid must agree with the ranks asked for.
// expected-error @+1 {{has shape 2x3, 6 ranks, but 4 were asked for; declare a dimension as ? to choose it from the number of ranks when compiling}}
shard.grid @g(shape = 2x3)
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
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>,
  steps = 10, grid = @g
}
