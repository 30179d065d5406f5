// Passes run out of order or on input they cannot handle stop with a located
// error and a non-zero exit, never a crash.
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-clip-plan 2>&1 | FileCheck %s --check-prefix=CLIP-EARLY
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-shard 2>&1 | FileCheck %s --check-prefix=SHARD-EARLY
// RUN: not dp-opt %s --split-input-file --dp-backward 2>&1 | FileCheck %s --check-prefix=UNSPECIALIZED
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-clip-plan 2>&1 | FileCheck %s --check-prefix=CLIP-TWICE
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-shard 2>&1 | FileCheck %s --check-prefix=SHARD-TWICE
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-report 2>&1 | FileCheck %s --check-prefix=REPORT-EARLY
// RUN: not dp-opt %s --split-input-file --dp-compile --dp-report=format=xml 2>&1 | FileCheck %s --check-prefix=REPORT-FORMAT
// RUN: not dp-opt %s --split-input-file --dp-specialize --dp-backward --dp-clip-plan --dp-shard --dp-lower-to-runtime --convert-dprt-to-emitc 2>&1 | FileCheck %s --check-prefix=UNPLANNED

// CLIP-EARLY: error: 'dp.model' op has no dp.step; run dp-backward before dp-clip-plan
// SHARD-EARLY: error: 'dp.model' op has no dp.step; run dp-backward before dp-shard
// UNSPECIALIZED: error: 'dp.forward' op has a dynamic batch; run dp-specialize before dp-backward
// CLIP-TWICE: error: 'dp.linear_grad_weight' op is already clipped; dp-clip-plan runs once
// SHARD-TWICE: error: 'dp.unit' op exists already; dp-shard runs once
// REPORT-EARLY: error: dp-report runs after the whole pipeline up to dprt-plan-memory
// REPORT-FORMAT: for the --format option: Cannot find option named 'xml'!
// UNPLANNED: error: 'dprt.program' op has no memory plan; run dprt-plan-memory first
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
