// RUN: dp-opt %s --split-input-file --dprt-schedule | FileCheck %s
// RUN: dp-opt %s --split-input-file --dprt-schedule=prefetch=0 | FileCheck %s --check-prefix=NOPREFETCH

// Two units gathered and used one after the other, then three
// reduce-scatters. Collectives run on stream 1 after waiting for the compute
// issued before them (record on 0, wait on 1); the first use of a gathered
// unit waits for its all-gather. With the program's prefetch 1, the
// all-gather of b is issued before the first use of a, so that it overlaps
// computing with a.
// CHECK-LABEL: dprt.func @dp_microstep
// CHECK:      %[[AG:.*]] = dprt.alloc {bytes = 512 : i64, name = "a.gathered"}
// CHECK-NEXT: dprt.record_event {event = 0 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.wait_event {event = 0 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.call "all_gather"(%{{.*}}, %[[AG]]) {{.*}}, stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 1 : i32, stream = 1 : i32}
// CHECK:      %[[BG:.*]] = dprt.alloc {bytes = 512 : i64, name = "b.gathered"}
// CHECK-NEXT: dprt.record_event {event = 2 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.wait_event {event = 2 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.call "all_gather"(%{{.*}}, %[[BG]]) {{.*}}, stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 3 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.wait_event {event = 1 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.call "linear_forward"(%{{.*}}, %[[AG]], %{{.*}})
// CHECK:      dprt.wait_event {event = 3 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.call "linear_forward"(%{{.*}}, %[[BG]], %{{.*}})
//
// A reduce-scatter reads its full gradient until its event: the third one
// waits for the first (at most two in flight), and the function ends with
// stream 0 joined with the last two. The waits keep the gradient buffers
// live for the memory plan.
// CHECK:      %[[FA:.*]] = dprt.alloc {bytes = 512 : i64, name = "a.fullgrad"}
// CHECK:      dprt.record_event {event = 4 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.wait_event {event = 4 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.call "reduce_scatter"(%[[FA]], %{{.*}}) {{.*}}, stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 5 : i32, stream = 1 : i32}
// CHECK:      %[[FB:.*]] = dprt.alloc {bytes = 512 : i64, name = "b.fullgrad"}
// CHECK:      dprt.call "reduce_scatter"(%[[FB]], %{{.*}}) {{.*}}, stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 7 : i32, stream = 1 : i32}
// CHECK:      %[[FC:.*]] = dprt.alloc {bytes = 512 : i64, name = "c.fullgrad"}
// CHECK:      dprt.wait_event %[[FA]] {event = 5 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.record_event {event = 8 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.wait_event {event = 8 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.call "reduce_scatter"(%[[FC]], %{{.*}}) {{.*}}, stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 9 : i32, stream = 1 : i32}
// CHECK-NEXT: dprt.wait_event %[[FB]] {event = 7 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.wait_event %[[FC]] {event = 9 : i32, stream = 0 : i32}
// CHECK-NEXT: dprt.return
//
// Without prefetch the all-gather of b waits until a has been used.
// NOPREFETCH-LABEL: dprt.func @dp_microstep
// NOPREFETCH:      dprt.call "all_gather"
// NOPREFETCH:      dprt.wait_event {event = 1 : i32, stream = 0 : i32}
// NOPREFETCH-NEXT: dprt.call "linear_forward"
// NOPREFETCH-NEXT: dprt.get_global @b.params
// NOPREFETCH-NEXT: dprt.alloc {bytes = 512 : i64, name = "b.gathered"}
// NOPREFETCH-NEXT: dprt.record_event {event = 2 : i32, stream = 0 : i32}
// NOPREFETCH-NEXT: dprt.wait_event {event = 2 : i32, stream = 1 : i32}
// NOPREFETCH-NEXT: dprt.call "all_gather"
dprt.program @p attributes {prefetch = 1 : i64} {
  dprt.global @x {bytes = 256}
  dprt.global @a.params {bytes = 256}
  dprt.global @b.params {bytes = 256}
  dprt.global @a.grad {bytes = 256}
  dprt.global @b.grad {bytes = 256}
  dprt.global @c.grad {bytes = 256}
  dprt.func @dp_microstep {
    %x = dprt.get_global @x
    %ap = dprt.get_global @a.params
    %ag = dprt.alloc {bytes = 512, name = "a.gathered"}
    dprt.call "all_gather"(%ap, %ag) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64]}
    %h = dprt.alloc {bytes = 256, name = "h"}
    dprt.call "linear_forward"(%x, %ag, %h) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 8, 8]}
    %bp = dprt.get_global @b.params
    %bg = dprt.alloc {bytes = 512, name = "b.gathered"}
    dprt.call "all_gather"(%bp, %bg) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64]}
    %y = dprt.alloc {bytes = 256, name = "y"}
    dprt.call "linear_forward"(%h, %bg, %y) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 8, 8]}
    %fa = dprt.alloc {bytes = 512, name = "a.fullgrad"}
    dprt.call "zero"(%fa) {args = [0 : index, 512]}
    %ga = dprt.get_global @a.grad
    dprt.call "reduce_scatter"(%fa, %ga) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64, true]}
    %fb = dprt.alloc {bytes = 512, name = "b.fullgrad"}
    dprt.call "zero"(%fb) {args = [0 : index, 512]}
    %gb = dprt.get_global @b.grad
    dprt.call "reduce_scatter"(%fb, %gb) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64, true]}
    %fc = dprt.alloc {bytes = 512, name = "c.fullgrad"}
    dprt.call "zero"(%fc) {args = [0 : index, 512]}
    %gc = dprt.get_global @c.grad
    dprt.call "reduce_scatter"(%fc, %gc) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64, true]}
    dprt.return
  }
}

// -----

// No collective (one rank): no event.
// CHECK-LABEL: dprt.program @one
// CHECK-NOT:   event
dprt.program @one {
  dprt.global @w {bytes = 256}
  dprt.func @dp_microstep {
    %w = dprt.get_global @w
    %h = dprt.alloc {bytes = 256}
    dprt.call "linear_forward"(%h, %w, %h) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 8, 8]}
    dprt.return
  }
}
