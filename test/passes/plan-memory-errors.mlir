// RUN: dp-opt %s --split-input-file --verify-diagnostics --dprt-plan-memory

// Every size and offset of the plan is checked arithmetic: one that a
// 64-bit size cannot hold is an error naming the buffer, never a wrapped,
// negative offset.
dprt.program @p {
  dprt.func @f {
    // expected-error @+1 {{'dprt.alloc' op of 9223372036854775807 bytes cannot be aligned to 256 bytes within what a 64-bit size can count}}
    %a = dprt.alloc {bytes = 9223372036854775807, name = "huge"}
    dprt.call "zero"(%a) {args = [0 : index, 64]}
    dprt.return
  }
}

// -----

dprt.program @p {
  dprt.global @a {bytes = 9223372036854775000}
  // expected-error @+1 {{'dprt.global' op of 1024 bytes at offset 9223372036854775040 ends beyond what a 64-bit size can count}}
  dprt.global @b {bytes = 1024}
}

// -----

// Two temporaries live at once go side by side: the second ends at 2^63.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 4611686018427387904}
    // expected-error @+1 {{'dprt.alloc' op of 4611686018427387904 bytes at offset 4611686018427387904 ends beyond what a 64-bit size can count}}
    %b = dprt.alloc {bytes = 4611686018427387904}
    dprt.call "accumulate"(%a, %b) {args = [#dprt.dtype<F32>, 0 : index, 1 : index, 4]}
    dprt.return
  }
}

// -----

// A plan larger than any device (2^40 bytes) is an error giving its size:
// 256 bytes of globals and 2^40 of temporaries.
// expected-error @+1 {{@p needs an arena of 1099511628032 bytes (1024.0 GiB) per rank; no device holds more than 1099511627776 bytes (1 TiB)}}
dprt.program @p {
  dprt.global @state {bytes = 256}
  dprt.func @f {
    %a = dprt.alloc {bytes = 1099511627776}
    dprt.call "zero"(%a) {args = [0 : index, 64]}
    dprt.return
  }
}

// -----

// Exactly 2^40 bytes is a plan (no diagnostic).
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 1099511627776}
    dprt.call "zero"(%a) {args = [0 : index, 64]}
    dprt.return
  }
}
