// Every dprt op and attribute: parsed, printed and parsed again, in the
// custom and the generic form.
// RUN: dp-opt %s | dp-opt | FileCheck %s
// RUN: dp-opt %s --mlir-print-op-generic | dp-opt | FileCheck %s
// RUN: dp-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC
// GENERIC: "dprt.alloc"() <{bytes = 4096 : i64, name = "gathered", offset = 2048 : i64}> : () -> !dprt.buffer

// CHECK-LABEL: dprt.program @m.program attributes {arena_bytes = 8192 : i64, peak_bytes = 6144 : i64, prefetch = 1 : i64} {
dprt.program @m.program attributes {prefetch = 1 : i64, arena_bytes = 8192 : i64, peak_bytes = 6144 : i64} {
// CHECK-NEXT: dprt.global @state {bytes = 256 : i64, offset = 0 : i64}
  dprt.global @state {bytes = 256, offset = 0}
// CHECK-NEXT: dprt.global @tokens {bytes = 64 : i64, offset = 256 : i64}
  dprt.global @tokens {bytes = 64, offset = 256}
// CHECK-NEXT: dprt.global @params {bytes = 1024 : i64, offset = 512 : i64}
  dprt.global @params {bytes = 1024, offset = 512}
// CHECK-NEXT: dprt.global @loss {bytes = 32 : i64, offset = 1536 : i64}
  dprt.global @loss {bytes = 32, offset = 1536}
// CHECK-LABEL: dprt.func @dp_microstep {
  dprt.func @dp_microstep {
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @tokens
    %t = dprt.get_global @tokens
// CHECK-NEXT: %[[P:.*]] = dprt.get_global @params
    %p = dprt.get_global @params
// CHECK-NEXT: %[[W:.*]] = dprt.view %[[P]][512]
    %w = dprt.view %p[512]
// CHECK-NEXT: %[[G:.*]] = dprt.alloc {bytes = 4096 : i64, name = "gathered", offset = 2048 : i64}
    %g = dprt.alloc {bytes = 4096, offset = 2048, name = "gathered"}
// CHECK-NEXT: dprt.record_event {event = 0 : i32, stream = 0 : i32}
    dprt.record_event {stream = 0 : i32, event = 0 : i32}
// CHECK-NEXT: dprt.wait_event {event = 0 : i32, stream = 1 : i32}
    dprt.wait_event {stream = 1 : i32, event = 0 : i32}
// CHECK-NEXT: dprt.call "all_gather"(%[[P]], %[[G]]) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 512], stream = 1 : i32}
    dprt.call "all_gather"(%p, %g) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 512], stream = 1 : i32}
// CHECK-NEXT: dprt.record_event {event = 1 : i32, stream = 1 : i32}
    dprt.record_event {stream = 1 : i32, event = 1 : i32}
// CHECK-NEXT: dprt.wait_event %[[G]] {event = 1 : i32, stream = 0 : i32}
    dprt.wait_event %g {stream = 0 : i32, event = 1 : i32}
// CHECK-NEXT: %[[Y:.*]] = dprt.alloc {bytes = 512 : i64}
    %y = dprt.alloc {bytes = 512}
// CHECK-NEXT: dprt.call "linear_forward"(%[[G]], %[[W]], %[[Y]]) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 32, 16]}
    dprt.call "linear_forward"(%g, %w, %y) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 8, 32, 16]}
// CHECK-NEXT: dprt.call "activation_forward"(%{{[0-9]+}}, %{{[0-9]+}}) {args = [#dprt.dtype<BF16>, #dprt.activation<Silu>, 0 : index, 1 : index, 128]}
    dprt.call "activation_forward"(%y, %y) {args = [#dprt.dtype<BF16>, #dprt.activation<Silu>, 0 : index, 1 : index, 128]}
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @loss
    %l = dprt.get_global @loss
// CHECK-NEXT: %{{[0-9]+}} = dprt.alloc {bytes = 32 : i64}
    %lse = dprt.alloc {bytes = 32}
// CHECK-NEXT: dprt.call "cross_entropy_forward"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 4, 16, true, -1, #dprt.reduction<Sum>]}
    dprt.call "cross_entropy_forward"(%y, %t, %l, %lse) {args = [#dprt.dtype<BF16>, 0 : index, 1 : index, 2 : index, 3 : index, 2, 4, 16, true, -1, #dprt.reduction<Sum>]}
// CHECK-NEXT: %{{[0-9]+}} = dprt.alloc {bytes = 8 : i64}
    %c = dprt.alloc {bytes = 8}
// CHECK-NEXT: dprt.call "clip_factors"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 1, #dprt.clip_mode<PerLayer>, 1.000000e+00, 1.000000e-02, 2.000000e-06]}
    dprt.call "clip_factors"(%l, %l, %c) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 2, 1, #dprt.clip_mode<PerLayer>, 1.0, 0.01, 2.0e-06]}
// MXFP8 per-sample gradient rows: 2 x 512 e4m3 bytes and 32 scale bytes.
// CHECK-NEXT: %[[R:.*]] = dprt.alloc {bytes = 1056 : i64}
    %rows = dprt.alloc {bytes = 1056}
// CHECK-NEXT: dprt.call "linear_per_sample_grad"(%[[G]], %[[Y]], %[[R]]) {args = [#dprt.dtype<BF16>, #dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, #dprt.null, 2, 4, 32, 16]}
    dprt.call "linear_per_sample_grad"(%g, %y, %rows) {args = [#dprt.dtype<BF16>, #dprt.dtype<MXFP8>, 0 : index, 1 : index, 2 : index, #dprt.null, 2, 4, 32, 16]}
// CHECK-NEXT: dprt.return %[[Y]]
    dprt.return %y
  }
// CHECK-LABEL: dprt.func @dp_describe attributes {describe} {
  dprt.func @dp_describe attributes {describe} {
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @state
    %s = dprt.get_global @state
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @tokens
    %t = dprt.get_global @tokens
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @params
    %p = dprt.get_global @params
// CHECK-NEXT: %{{[0-9]+}} = dprt.get_global @loss
    %l = dprt.get_global @loss
// CHECK-NEXT: dprt.call "describe_program"(%{{[0-9]+}}, %{{[0-9]+}}) {args = ["m", "cuda", 2 : i32, #dprt.planned<arena_bytes>, 0 : index, #dprt.dtype<F64>, 2, 4, 1 : index, 1 : index, #dprt.planned<logits_offset>, 16, #dprt.planned<peak_bytes>]}
    dprt.call "describe_program"(%s, %l) {args = ["m", "cuda", 2 : i32, #dprt.planned<arena_bytes>, 0 : index, #dprt.dtype<F64>, 2, 4, 1 : index, 1 : index, #dprt.planned<logits_offset>, 16, #dprt.planned<peak_bytes>]}
// CHECK-NEXT: dprt.call "describe_recipe"() {args = [#dprt.clip_mode<Automatic>, 1.000000e+00, 1.000000e-02, true, 0.000000e+00, 3.000000e+00, 1.000000e-05, #dprt.noise_generator<ChaCha20>, #dprt.sampling<Shuffle>, 0, 0.000000e+00, 64, 100, 7]}
    dprt.call "describe_recipe"() {args = [#dprt.clip_mode<Automatic>, 1.0, 0.01, true, 0.0, 3.0, 1.0e-05, #dprt.noise_generator<ChaCha20>, #dprt.sampling<Shuffle>, 0, 0.0, 64, 100, 7]}
// CHECK-NEXT: dprt.call "describe_optimizer"() {args = [#dprt.optimizer<Momentum>, 5.000000e-01, 9.000000e-01, false, 0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00]}
    dprt.call "describe_optimizer"() {args = [#dprt.optimizer<Momentum>, 0.5, 0.9, false, 0.0, 0.0, 0.0, 0.0]}
// CHECK-NEXT: dprt.call "describe_input"(%{{[0-9]+}}) {args = ["input0", #dprt.input_role<NextTokens>, 0 : index, 4, 0, 0]}
    dprt.call "describe_input"(%t) {args = ["input0", #dprt.input_role<NextTokens>, 0 : index, 4, 0, 0]}
// CHECK-NEXT: dprt.call "describe_unit"(%{{[0-9]+}}) {args = ["root", 512, 256, 0 : index, 0 : index, 0 : index, #dprt.null, #dprt.null, false]}
    dprt.call "describe_unit"(%p) {args = ["root", 512, 256, 0 : index, 0 : index, 0 : index, #dprt.null, #dprt.null, false]}
// CHECK-NEXT: dprt.return
    dprt.return
  }
}
