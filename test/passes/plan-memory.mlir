// RUN: dp-opt %s --dprt-plan-memory | FileCheck %s

// Globals first (256-byte aligned), then temporaries by liveness, largest
// first at the lowest free offset: %c reuses the bytes of %a, which is dead
// by then; %b lives across both and goes above them. A keep operand of
// dprt.return extends a buffer to the end.
// CHECK-LABEL: dprt.program @p attributes {arena_bytes = 1792 : i64, peak_bytes = 1792 : i64}
// CHECK: dprt.global @g {bytes = 100 : i64, offset = 0 : i64}
// CHECK: dprt.alloc {bytes = 1000 : i64, offset = 256 : i64}
// CHECK: dprt.alloc {bytes = 500 : i64, offset = 1280 : i64}
// CHECK: dprt.alloc {bytes = 800 : i64, offset = 256 : i64}
// CHECK: dprt.alloc {bytes = 64 : i64, offset = 1280 : i64}
dprt.program @p {
  dprt.global @g {bytes = 100}
  dprt.func @f {
    %a = dprt.alloc {bytes = 1000}
    %b = dprt.alloc {bytes = 500}
    dprt.call "accumulate"(%a, %b) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 125]}
    %c = dprt.alloc {bytes = 800}
    dprt.call "accumulate"(%b, %c) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 125]}
    %d = dprt.alloc {bytes = 64}
    dprt.call "zero"(%d) {args = [0 : index, 64]}
    dprt.return %c
  }
}
