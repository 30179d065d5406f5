// RUN: dp-opt %s --dprt-plan-memory --split-input-file --verify-diagnostics | FileCheck %s

// A carried buffer lives to the end of the first function that allocates it
// (so %late cannot take its bytes although %rows is dead by then: it
// takes %a's), and a later function's alloc of the same key lands on the
// same bytes, live for that whole function: @apply's own temporary goes
// beside it although it dies before %rows is first used.
// CHECK-LABEL: dprt.program @p attributes {arena_bytes = 2304 : i64, peak_bytes = 2304 : i64}
// CHECK: dprt.func @step
// CHECK: dprt.alloc {bytes = 1024 : i64, carried = "rows.0", name = "rows", offset = 256 : i64}
// CHECK: dprt.alloc {bytes = 512 : i64, offset = 1280 : i64}
// CHECK: dprt.alloc {bytes = 1024 : i64, offset = 1280 : i64}
// CHECK: dprt.func @apply
// CHECK: dprt.alloc {bytes = 1024 : i64, offset = 1280 : i64}
// CHECK: dprt.alloc {bytes = 1024 : i64, carried = "rows.0", name = "rows.0", offset = 256 : i64}
dprt.program @p {
  dprt.global @g {bytes = 100}
  dprt.func @step {
    %rows = dprt.alloc {bytes = 1024, name = "rows", carried = "rows.0"}
    %a = dprt.alloc {bytes = 512}
    dprt.call "accumulate"(%rows, %a) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 128]}
    %late = dprt.alloc {bytes = 1024}
    dprt.call "zero"(%late) {args = [0 : index, 1024]}
    dprt.return
  }
  dprt.func @apply {
    %own = dprt.alloc {bytes = 1024}
    dprt.call "zero"(%own) {args = [0 : index, 1024]}
    %rows = dprt.alloc {bytes = 1024, name = "rows.0", carried = "rows.0"}
    dprt.call "zero"(%rows) {args = [0 : index, 1024]}
    dprt.return
  }
}

// -----

// The same key at another size is an error: the bytes would not be the
// ones the first function left.
dprt.program @q {
  dprt.func @step {
    %rows = dprt.alloc {bytes = 1024, carried = "rows.0"}
    dprt.call "zero"(%rows) {args = [0 : index, 1024]}
    dprt.return
  }
  dprt.func @apply {
    // expected-error @below {{carries 'rows.0' as 2048 bytes; an earlier function allocated it as 1024}}
    %rows = dprt.alloc {bytes = 2048, carried = "rows.0"}
    dprt.call "zero"(%rows) {args = [0 : index, 2048]}
    dprt.return
  }
}
