// RUN: dp-opt %s --convert-dprt-to-emitc | FileCheck %s
// RUN: dp-opt %s --convert-dprt-to-emitc | mlir-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP

// Each buffer becomes arena + offset, computed once per offset; int32
// buffers are cast; calls get the rank first and, for collectives, their
// stream last; events become calls; dp_describe passes offsets and the
// planned sizes instead of pointers.
// CHECK: emitc.include "dprt/kernels.h"
// CHECK: emitc.include "dprt/program.h"
// CHECK-LABEL: emitc.func @dp_microstep
// CHECK-SAME: (%[[R:.*]]: !emitc.ptr<!emitc.opaque<"dprt::Rank">>)
// CHECK:      %[[A:.*]] = call_opaque "dprt::arena"(%[[R]])
// CHECK-DAG:  %[[C512:.*]] = "emitc.constant"() <{value = 512 : i64}>
// CHECK-DAG:  %[[P512:.*]] = add %[[A]], %[[C512]]
// CHECK-DAG:  %[[T:.*]] = cast %[[P512]] : !emitc.ptr<!emitc.opaque<"char">> to !emitc.ptr<i32>
// CHECK:      call_opaque "dprt::embedding_forward"(%[[R]], %[[T]], %{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::F32">, 1 : index, 2 : index, 3 : index, 8, 16, 4]}
// CHECK:      call_opaque "dprt::record_event"(%[[R]]) {args = [0 : index, 0 : i32, 3 : i32]}
// CHECK:      call_opaque "dprt::all_gather"(%[[R]], %{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::F32">, 1 : index, 2 : index, 64, 1 : i32]}
// CHECK:      call_opaque "dprt::wait_event"(%[[R]]) {args = [0 : index, 0 : i32, 4 : i32]}
// CHECK-LABEL: emitc.func @dp_describe
// CHECK-SAME: (%[[S:.*]]: !emitc.ptr<!emitc.opaque<"dprt::ProgramSpec">>)
// CHECK:      call_opaque "dprt::describe_program"(%[[S]]) {args = [0 : index, #emitc.opaque<"\22m\22">, 4096, 512, -1]}
// CHECK-NOT:  dprt.
// CPP: void dp_microstep(dprt::Rank* [[R:v[0-9]+]]) {
// CPP: int32_t* [[T:v[0-9]+]] = (int32_t*) v{{[0-9]+}};
// CPP: dprt::embedding_forward([[R]], dprt::DType::F32, [[T]],
dprt.program @m.program attributes {arena_bytes = 4096 : i64, peak_bytes = 4000 : i64} {
  dprt.global @tokens {bytes = 32, offset = 512}
  dprt.global @table {bytes = 512, offset = 1024}
  dprt.func @dp_microstep {
    %t = dprt.get_global @tokens
    %e = dprt.get_global @table
    %out = dprt.alloc {bytes = 512, offset = 2048}
    dprt.call "embedding_forward"(%t, %e, %out) {args = [#emitc.opaque<"dprt::DType::F32">, 0 : index, 1 : index, 2 : index, 8, 16, 4], int32_buffers = array<i64: 0>}
    %g = dprt.alloc {bytes = 512, offset = 2560}
    dprt.record_event {stream = 0 : i32, event = 3 : i32}
    dprt.call "all_gather"(%e, %g) {args = [#emitc.opaque<"dprt::DType::F32">, 0 : index, 1 : index, 64], collective, stream = 1 : i32}
    dprt.wait_event {stream = 0 : i32, event = 4 : i32}
    dprt.return
  }
  dprt.func @dp_describe attributes {describe} {
    %t = dprt.get_global @tokens
    dprt.call "describe_program"(%t) {args = [#emitc.opaque<"\"m\"">, "arena_bytes", 0 : index, "logits_offset"]}
    dprt.return
  }
}
