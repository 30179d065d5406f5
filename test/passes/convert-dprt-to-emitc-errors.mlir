// RUN: dp-opt %s --split-input-file --verify-diagnostics --convert-dprt-to-emitc

// dp_describe passes offsets: a buffer the memory plan did not place has
// none, and the conversion says so instead of passing -1.
dprt.program @p attributes {arena_bytes = 4096 : i64, peak_bytes = 4096 : i64} {
  dprt.global @state {bytes = 256}
  // expected-error @+1 {{uses a buffer without a planned offset, or a view beyond what a 64-bit offset can count}}
  dprt.func @dp_describe attributes {describe} {
    %s = dprt.get_global @state
    dprt.call "describe_input"(%s) {args = ["input0", #dprt.input_role<Features>, 0 : index, 8, 0, 0]}
    dprt.return
  }
}

// -----

// A view's offset adds to its base's: the sum is checked.
dprt.program @p attributes {arena_bytes = 4096 : i64, peak_bytes = 4096 : i64} {
  dprt.global @w {bytes = 256, offset = 9223372036854775000}
  // expected-error @+1 {{uses a buffer without a planned offset, or a view beyond what a 64-bit offset can count}}
  dprt.func @dp_microstep {
    %w = dprt.get_global @w
    %v = dprt.view %w[1000]
    dprt.call "zero"(%v) {args = [0 : index, 64]}
    dprt.return
  }
}
