// RUN: dp-opt %s --split-input-file --verify-diagnostics

// A call's argument names a buffer it does not have.
dprt.program @p {
  dprt.func @f {
    %a = dprt.alloc {bytes = 16}
    // expected-error @+1 {{argument refers to buffer #1 of 1}}
    dprt.call "zero"(%a) {args = [0 : index, 1 : index]}
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
