// RUN: dp-opt %s --split-input-file --verify-diagnostics

// A call's argument names a buffer it does not have.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #0 of 'zero' refers to buffer #1 of 1}}
    dprt.call "zero"(%a) {args = [1 : index, 16]}
    dprt.return
  }
}

// -----

// A global that does not exist.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{refers to unknown global @nowhere}}
    %a = dprt.get_global @nowhere
    dprt.return
  }
}

// -----

// The callee must be a function of the runtime (kernels.def).
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{calls 'zeros', which is not a runtime function (runtime/include/dprt/kernels.def)}}
    dprt.call "zeros"(%a) {args = [0 : index, 16]}
    dprt.return
  }
}

// -----

// Events have their own ops, which dprt-schedule places.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{calls 'record_event', which only dprt.record_event issues}}
    dprt.call "record_event"() {args = [0 : i32, 1 : i32]}
    dprt.return
  }
}

// -----

// describe_* fill the ProgramSpec: only dp_describe calls them.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{calls 'describe_optimizer', which fills the ProgramSpec, outside a describe function}}
    dprt.call "describe_optimizer"() {args = [#dprt.optimizer<SGD>, 0.1, 0.0, false, 0.0, 0.0, 0.0, 0.0]}
    dprt.return
  }
}

// -----

// ... and nothing else.
dprt.program @p {
  dprt.func @dp_describe attributes {describe} {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{calls 'zero', which runs on a rank, in a describe function}}
    dprt.call "zero"(%a) {args = [0 : index, 16]}
    dprt.return
  }
}

// -----

// As many arguments as the kernel has parameters.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{passes 3 arguments to 'zero', which takes 2}}
    dprt.call "zero"(%a) {args = [0 : index, 16, 16]}
    dprt.return
  }
}

// -----

// Each argument of the kind of its parameter: a byte count is an i64.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #1 of 'zero' must be an i64, not 16 : i32}}
    dprt.call "zero"(%a) {args = [0 : index, 16 : i32]}
    dprt.return
  }
}

// -----

// A buffer the kernel needs cannot be #dprt.null.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{argument #0 of 'zero' must be a buffer, not #dprt.null}}
    dprt.call "zero"() {args = [#dprt.null, 16]}
    dprt.return
  }
}

// -----

// A number is not a buffer.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    %b = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #2 of 'accumulate' must be a buffer, not 4}}
    dprt.call "accumulate"(%a, %b) {args = [#dprt.dtype<F32>, 0 : index, 4, 1 : index]}
    dprt.return
  }
}

// -----

// Enums are typed: a clip mode is not a reduction, nor C++ text.
dprt.program @p {
  dprt.func @f {
    %n = dprt.alloc {bytes = 16}
    %c = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #6 of 'clip_factors' must be a #dprt.clip_mode, not #dprt.reduction<Mean>}}
    dprt.call "clip_factors"(%n, %n, %c) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 4, 1, #dprt.reduction<Mean>, 1.0, 0.01, 0.0]}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @f {
    %n = dprt.alloc {bytes = 16}
    %c = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #0 of 'clip_factors' must be a #dprt.dtype, not #emitc.opaque<"dprt::DType::F32">}}
    dprt.call "clip_factors"(%n, %n, %c) {args = [#emitc.opaque<"dprt::DType::F32">, 0 : index, 1 : index, 2 : index, 4, 1, #dprt.clip_mode<Flat>, 1.0, 0.01, 0.0]}
    dprt.return
  }
}

// -----

// Only the parameters the memory plan decides take #dprt.planned.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument #1 of 'zero' must be an i64, not #dprt.planned<arena_bytes>}}
    dprt.call "zero"(%a) {args = [0 : index, #dprt.planned<arena_bytes>]}
    dprt.return
  }
}

// -----

// Strings, bools and doubles are what their parameters take.
dprt.program @p {
  dprt.func @dp_describe attributes {describe} {
    // expected-error @+1 {{argument #0 of 'describe_param' must be a string, not @w}}
    dprt.call "describe_param"() {args = [@w, 0 : i32, 0, 0, true, 4, 0, 0, 0, "", false, -1, -1]}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @dp_describe attributes {describe} {
    // expected-error @+1 {{argument #4 of 'describe_param' must be a bool, not 1}}
    dprt.call "describe_param"() {args = ["w", 0 : i32, 0, 0, 1, 4, 0, 0, 0, "", false, -1, -1]}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @dp_describe attributes {describe} {
    // expected-error @+1 {{argument #9 of 'describe_param' must be a string, not 0 : i64}}
    dprt.call "describe_param"() {args = ["w", 0 : i32, 0, 0, true, 4, 0, 0, 0, 0, false, -1, -1]}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @dp_describe attributes {describe} {
    // expected-error @+1 {{argument #1 of 'describe_optimizer' must be an f64, not 1.000000e-01 : f32}}
    dprt.call "describe_optimizer"() {args = [#dprt.optimizer<SGD>, 0.1 : f32, 0.0, false, 0.0, 0.0, 0.0, 0.0]}
    dprt.return
  }
}

// -----

// Every buffer operand is an argument.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    %b = dprt.alloc {bytes = 16}
    // expected-error @+1 {{buffer #1 is no argument of 'zero'}}
    dprt.call "zero"(%a, %b) {args = [0 : index, 16]}
    dprt.return
  }
}

// -----

// Only collectives leave the compute stream.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{runs 'zero' on stream 1; only collectives leave the compute stream 0}}
    dprt.call "zero"(%a) {args = [0 : index, 16], stream = 1 : i32}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    %b = dprt.alloc {bytes = 64}
    // expected-error @+1 {{runs on stream -1}}
    dprt.call "all_gather"(%a, %b) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 4], stream = -1 : i32}
    dprt.return
  }
}

// -----

// Sizes and offsets in the arena are never negative.
dprt.program @p {
  // expected-error @+1 {{bytes must not be negative, got -8}}
  dprt.global @g {bytes = -8}
}

// -----

dprt.program @p {
  // expected-error @+1 {{offset must not be negative, got -256}}
  dprt.global @g {bytes = 8, offset = -256}
}

// -----

dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{bytes must not be negative, got -9223372036854775807}}
    %a = dprt.alloc {bytes = -9223372036854775807}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{offset must not be negative, got -1}}
    %a = dprt.alloc {bytes = 16, offset = -1}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{offset must not be negative, got -4}}
    %b = dprt.view %a[-4]
    dprt.return
  }
}

// -----

// Streams and events are numbered from 0.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{names stream -1 and event 0; both are numbered from 0}}
    dprt.record_event {stream = -1 : i32, event = 0 : i32}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{names stream 0 and event -2; both are numbered from 0}}
    dprt.wait_event {stream = 0 : i32, event = -2 : i32}
    dprt.return
  }
}

// -----

// An enum attribute holds one of the runtime's enumerators.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+2 {{expected ::dpc::rt::DType to be one of: F64, F32, BF16}}
    // expected-error @+1 {{failed to parse DPRT_DTypeAttr parameter 'value'}}
    dprt.call "zero"(%a) {args = [#dprt.dtype<F16>, 16]}
    dprt.return
  }
}
