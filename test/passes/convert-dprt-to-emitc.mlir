// RUN: dp-opt %s --convert-dprt-to-emitc | FileCheck %s
// RUN: dp-opt %s --convert-dprt-to-emitc | mlir-translate --mlir-to-cpp | FileCheck %s --check-prefix=CPP

// Each buffer becomes arena + offset, computed once per offset; buffers the
// kernel takes as int32 (kernels.def: tokens) are cast; calls get the rank
// first and, for collectives, their stream last; events become calls. Only
// here does the program become C++: enums through their stringify
// functions, #dprt.null as nullptr, strings as C++ literals. dp_describe
// passes offsets (-1 for #dprt.null) and the planned numbers instead of
// pointers.
// CHECK: emitc.include "dprt/kernels.h"
// CHECK: emitc.include "dprt/program.h"
// CHECK-LABEL: emitc.func @dp_microstep
// CHECK-SAME: (%[[R:.*]]: !emitc.ptr<!emitc.opaque<"dprt::Rank">>)
// CHECK:      %[[A:.*]] = call_opaque "dprt::arena"(%[[R]])
// CHECK-DAG:  %[[C512:.*]] = "emitc.constant"() <{value = 512 : i64}>
// CHECK-DAG:  %[[P512:.*]] = add %[[A]], %[[C512]]
// CHECK-DAG:  %[[T:.*]] = cast %[[P512]] : !emitc.ptr<!emitc.opaque<"char">> to !emitc.ptr<i32>
// CHECK:      call_opaque "dprt::embedding_forward"(%[[R]], %[[T]], %{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::F32">, 1 : index, 2 : index, 3 : index, 8, 16, 4]}
// CHECK:      call_opaque "dprt::linear_forward"(%[[R]], %{{.*}}, %{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::BF16">, 1 : index, 2 : index, #emitc.opaque<"nullptr">, #emitc.opaque<"nullptr">, 3 : index, 8, 4, 4]}
// CHECK:      call_opaque "dprt::activation_backward"(%[[R]], {{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::F32">, #emitc.opaque<"dprt::Activation::GeluTanh">, 1 : index, 2 : index, 3 : index, 32, true]}
// CHECK:      call_opaque "dprt::record_event"(%[[R]]) {args = [0 : index, 0 : i32, 3 : i32]}
// CHECK:      call_opaque "dprt::all_gather"(%[[R]], %{{.*}}, %{{.*}}) {args = [0 : index, #emitc.opaque<"dprt::DType::F32">, 1 : index, 2 : index, 64, 1 : i32]}
// CHECK:      call_opaque "dprt::wait_event"(%[[R]]) {args = [0 : index, 0 : i32, 4 : i32]}
// CHECK-LABEL: emitc.func @dp_forward
// CHECK-LABEL: emitc.func @dp_describe
// CHECK-SAME: (%[[S:.*]]: !emitc.ptr<!emitc.opaque<"dprt::ProgramSpec">>)
// CHECK:      call_opaque "dprt::describe_program"(%[[S]]) {args = [0 : index, #emitc.opaque<"\22m\22">, #emitc.opaque<"\22cpu\22">, 2 : i32, 4096, 512, #emitc.opaque<"dprt::DType::F32">, 8, 1, 512, 1024, 2048, 4, 4000]}
// CHECK:      call_opaque "dprt::describe_unit"(%[[S]]) {args = [0 : index, #emitc.opaque<{{.*}}>, 128, 64, 1024, 1024, 1024, -1, -1, false]}
// CHECK-NOT:  dprt.
// CPP: void dp_microstep(dprt::Rank* [[R:v[0-9]+]]) {
// CPP: int32_t* [[T:v[0-9]+]] = (int32_t*) v{{[0-9]+}};
// CPP: dprt::embedding_forward([[R]], dprt::DType::F32, [[T]],
// CPP: dprt::linear_forward([[R]], dprt::DType::BF16, v{{[0-9]+}}, v{{[0-9]+}}, nullptr, nullptr, v{{[0-9]+}}, 8, 4, 4);
// CPP: dprt::activation_backward([[R]], dprt::DType::F32, dprt::Activation::GeluTanh, {{.*}}, 32, true);
// CPP: dprt::all_gather([[R]], dprt::DType::F32, v{{[0-9]+}}, v{{[0-9]+}}, 64, 1);
// CPP: void dp_describe(dprt::ProgramSpec* [[S:v[0-9]+]]) {
// CPP: dprt::describe_program([[S]], "m", "cpu", 2, 4096, 512, dprt::DType::F32, 8, 1, 512, 1024, 2048, 4, 4000);
// CPP: dprt::describe_unit([[S]], "u\\\"v\011", 128, 64, 1024, 1024, 1024, -1, -1, false);
dprt.program @m.program attributes {arena_bytes = 4096 : i64, peak_bytes = 4000 : i64} {
  dprt.global @tokens {bytes = 32, offset = 512}
  dprt.global @table {bytes = 512, offset = 1024}
  dprt.func @dp_microstep {
    %t = dprt.get_global @tokens
    %e = dprt.get_global @table
    %out = dprt.alloc {bytes = 512, offset = 2048}
    dprt.call "embedding_forward"(%t, %e, %out) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 8, 16, 4]}
    %y = dprt.alloc {bytes = 64, offset = 2560}
    dprt.call "linear_forward"(%out, %e, %y) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 4, 4]}
    dprt.call "activation_backward"(%out, %y, %out) {args = [#dprt.dtype<F32>, #dprt.activation<GeluTanh>, 0 : index, 1 : index, 2 : index, 32, true]}
    %g = dprt.alloc {bytes = 512, offset = 2560}
    dprt.record_event {stream = 0 : i32, event = 3 : i32}
    dprt.call "all_gather"(%e, %g) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 64], stream = 1 : i32}
    dprt.wait_event {stream = 0 : i32, event = 4 : i32}
    dprt.return
  }
  dprt.func @dp_forward {
    %logits = dprt.alloc {bytes = 64, offset = 2048}
    dprt.call "zero"(%logits) {args = [0 : index, 64]}
    dprt.return %logits
  }
  dprt.func @dp_describe attributes {describe} {
    %t = dprt.get_global @tokens
    %e = dprt.get_global @table
    dprt.call "describe_program"(%t, %e) {args = ["m", "cpu", 2 : i32, #dprt.planned<arena_bytes>, 0 : index, #dprt.dtype<F32>, 8, 1, 0 : index, 1 : index, #dprt.planned<logits_offset>, 4, #dprt.planned<peak_bytes>]}
    dprt.call "describe_unit"(%e) {args = ["u\\\"v\09", 128, 64, 0 : index, 0 : index, 0 : index, #dprt.null, #dprt.null, false]}
    dprt.return
  }
}
