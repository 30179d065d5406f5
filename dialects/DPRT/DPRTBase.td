//===- DPRTBase.td - The dprt dialect -------------------------*- tablegen -*-===//

#ifndef DPRT_BASE_TD
#define DPRT_BASE_TD

include "mlir/IR/OpBase.td"

def DPRT_Dialect : Dialect {
  let name = "dprt";
  let cppNamespace = "::dpc::rt";
  let summary = "Arena buffers, runtime calls, streams and events";
  let description = [{
    A `dprt.program` holds the persistent buffers (`dprt.global`) of a
    training program and its functions (`dprt.func`): `dp_init`,
    `dp_microstep`, `dp_apply`, `dp_forward` and `dp_describe`. Functions
    allocate temporaries with `dprt.alloc`; `dprt-plan-memory` gives every
    buffer an offset in the rank's arena.

    The IR holds no C++: the arguments of a runtime call are buffers,
    numbers, strings and the attributes below, and only
    convert-dprt-to-emitc spells them as C++.
    - `#dprt.dtype<F32>`, `#dprt.activation<Silu>`,
      `#dprt.reduction<Mean>`, `#dprt.clip_mode<Flat>`,
      `#dprt.noise_generator<Philox>`, `#dprt.optimizer<AdamW>`,
      `#dprt.sampling<Poisson>`, `#dprt.input_role<Tokens>`: the enums of
      runtime/include/dprt/types.h and program.h, with the same names and
      values.
    - `#dprt.null`: no buffer (`nullptr`; -1 for an offset in dp_describe).
    - `#dprt.planned<arena_bytes>`, `<peak_bytes>`, `<logits_offset>`: a
      number only the memory plan knows.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

#endif // DPRT_BASE_TD
