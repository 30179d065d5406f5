// RUN: dp-opt %s --dp-compile="recipe=poisson norm-methods=*=materialized per-sample-rows=mxfp8" | FileCheck %s
// RUN: dp-opt %s --dp-compile="recipe=shuffle norm-methods=*=materialized per-sample-rows=mxfp8" | FileCheck %s --check-prefix=UPDATE
// RUN: dp-opt %s --dp-specialize=recipe=poisson --dp-backward --dp-clip-plan="norm-methods=*=materialized per-sample-rows=mxfp8" --dp-shard --dp-lower-to-runtime | FileCheck %s --check-prefix=UNFUSED
// RUN: dp-opt %s --dp-compile="recipe=poisson norm-methods=*=materialized" | FileCheck %s --check-prefix=COMPUTE

// MXFP8 per-sample gradient rows (dp-clip-plan per-sample-rows=mxfp8) in
// the runtime program. w1 (16 x 32) reads an input 32 wide: its rows are
// MXFP8, 2 x 512 e4m3 bytes followed by 2 x 512 / 32 = 32 scale bytes, 1056
// bytes (bf16: 2048), and linear_per_sample_grad, norm_rows,
// rows_weighted_sum and the update from rows all take them as
// dprt::DType::MXFP8 from the start of that buffer. w2 (8 x 16) reads an
// input 16 wide and keeps bf16 rows (2 x 128 x 2 = 512 bytes). Without the
// option every call names the compute type twice.
dp.model @m {
  dp.param @w1 : tensor<16x32xbf16>
  dp.param @w2 : tensor<8x16xbf16>
  dp.forward(%x: tensor<?x4x32xbf16>, %t: tensor<?x4x8xbf16>) -> tensor<?xf32> {
    %h = dp.linear @w1(%x) : tensor<?x4x32xbf16> -> tensor<?x4x16xbf16>
    %a = dp.relu %h : tensor<?x4x16xbf16>
    %y = dp.linear @w2(%a) : tensor<?x4x16xbf16> -> tensor<?x4x8xbf16>
    %l = dp.mse %y, %t : tensor<?x4x8xbf16> -> tensor<?xf32>
    dp.return %l : tensor<?xf32>
  }
}
dp.recipe @poisson for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.poisson<rate = 0.01, physical_batch = 2>, optimizer = #dp.sgd<lr = 0.1>, steps = 10,
  precision = #dp.precision<compute = bf16, master = f32>
}
dp.recipe @shuffle for @m {
  clip = #dp.clip<flat, max_norm = 1.0>, noise = #dp.noise<sigma = 1.0, delta = 1.0e-5>,
  sampling = #dp.shuffle<batch = 2, physical_batch = 2>, optimizer = #dp.adamw<lr = 0.001>, steps = 10,
  precision = #dp.precision<compute = bf16, master = f32>
}

// The norms fused into the product (dp-fuse-norms): its n2 operand.
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      %[[G2:.*]] = dprt.alloc {bytes = 512 : i64, name = "per_sample_grads", offset = {{[0-9]+}} : i64}
// CHECK:      dprt.call "linear_per_sample_grad"({{.*}}, %[[G2]], %[[N2:.*]]) {args = [#dprt.dtype<BF16>, #dprt.dtype<BF16>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 4, 16, 8]}
// CHECK:      %[[G1:.*]] = dprt.alloc {bytes = 1056 : i64, name = "per_sample_grads", offset = {{[0-9]+}} : i64}
// CHECK-NEXT: dprt.call "linear_per_sample_grad"({{.*}}, %[[G1]], %[[N2]]) {args = [#dprt.dtype<BF16>, #dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 4, 32, 16]}
// CHECK-NOT:  "norm_rows"
// CHECK:      dprt.call "rows_weighted_sum"(%[[G2]], {{.*}}) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 2 : index, 2, 128]}
// CHECK:      dprt.call "rows_weighted_sum"(%[[G1]], {{.*}}) {args = [#dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, 2, 512]}
// CHECK-LABEL: dprt.func @dp_apply

// One micro-step a step: the rows are carried into dp_apply at their size,
// and the update reads them as MXFP8 from the buffer's first byte (the
// scales follow the 2 x 512 elements there).
// UPDATE-LABEL: dprt.func @dp_microstep
// UPDATE:      dprt.alloc {bytes = 1056 : i64, carried = "[[ROWS:per_sample_grads\.[0-9]+]]", name = "per_sample_grads", offset = [[OFF:[0-9]+]] : i64}
// UPDATE-NEXT: dprt.call "linear_per_sample_grad"({{.*}}) {args = [#dprt.dtype<BF16>, #dprt.dtype<MXFP8>,
// UPDATE-NOT:  "rows_weighted_sum"
// UPDATE-LABEL: dprt.func @dp_apply
// UPDATE:      %[[R1:.*]] = dprt.alloc {bytes = 1056 : i64, carried = "[[ROWS]]", name = "[[ROWS]]", offset = [[OFF]] : i64}
// UPDATE:      %[[V1:.*]] = dprt.view %[[R1]][0]
// UPDATE-NEXT: dprt.call "adamw_update_rows"({{.*}}, %[[V1]], {{.*}}) {args = [#dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 2, 512,
// UPDATE:      dprt.call "adamw_update_rows"({{.*}}) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 2 : index, 3 : index, 4 : index, 2, 128,

// Without dp-fuse-norms: norm_rows reads the MXFP8 rows.
// UNFUSED-LABEL: dprt.func @dp_microstep
// UNFUSED:      %[[G1:.*]] = dprt.alloc {bytes = 1056 : i64, name = "per_sample_grads"}
// UNFUSED-NEXT: dprt.call "linear_per_sample_grad"({{.*}}, %[[G1]]) {args = [#dprt.dtype<BF16>, #dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, #dprt.null, 2, 4, 32, 16]}
// UNFUSED:      dprt.call "norm_rows"(%[[G1]], {{.*}}) {args = [#dprt.dtype<MXFP8>, 0 : index, 1 : index, 2, 512]}
// UNFUSED:      dprt.call "rows_weighted_sum"(%[[G1]], {{.*}}) {args = [#dprt.dtype<MXFP8>,

// COMPUTE-LABEL: dprt.func @dp_microstep
// COMPUTE-NOT:   MXFP8
// COMPUTE:       dprt.call "linear_per_sample_grad"({{.*}}) {args = [#dprt.dtype<BF16>, #dprt.dtype<BF16>, {{.*}}, 2, 4, 16, 8]}
// COMPUTE:       dprt.alloc {bytes = 2048 : i64, name = "per_sample_grads"
// COMPUTE-NEXT:  dprt.call "linear_per_sample_grad"({{.*}}) {args = [#dprt.dtype<BF16>, #dprt.dtype<BF16>, {{.*}}, 2, 4, 32, 16]}
// COMPUTE-NOT:   MXFP8
