//===- DPRTOps.td - The scheduled program ---------------------*- tablegen -*-===//
//
// The `dprt` dialect is the program after lowering from `dp`: explicit
// buffers in one arena per rank, one op per runtime call, collectives on
// their own stream, events between streams. The schedule and memory plan are
// passes over it, and the EmitC lowering maps each op to one C++ statement.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_OPS_TD
#define DPRT_OPS_TD

include "DPRT/DPRTAttrs.td"
include "DPRT/DPRTBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class DPRT_Op<string mnemonic, list<Trait> traits = []>
    : Op<DPRT_Dialect, mnemonic, traits>;

def DPRT_BufferType : TypeDef<DPRT_Dialect, "Buffer"> {
  let mnemonic = "buffer";
  let summary = "a byte range of the arena";
  let builderCall = "$_builder.getType<::dpc::rt::BufferType>()";
}

def DPRT_ProgramOp : DPRT_Op<"program", [Symbol, SymbolTable,
    IsolatedFromAbove, SingleBlock, NoTerminator, NoRegionArguments]> {
  let summary = "a training program for one model and recipe";
  let description = [{
    `prefetch` is the recipe's all-gather prefetch depth (dprt-schedule
    reads it); after dprt-plan-memory, `arena_bytes` is the arena of one
    rank and `peak_bytes` the largest extent actually in use at once.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       OptionalAttr<I64Attr>:$prefetch,
                       OptionalAttr<I64Attr>:$arena_bytes,
                       OptionalAttr<I64Attr>:$peak_bytes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
}

def DPRT_GlobalOp : DPRT_Op<"global", [Symbol, HasParent<"ProgramOp">]> {
  let summary = "a buffer that lives as long as the program";
  let description = [{
    `dprt.global @unit.b0.master {bytes = 4096}`: parameter shards, master
    weights, gradient shards, optimizer state, inputs, mask, loss and the
    step state. `offset` is set by dprt-plan-memory.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$bytes,
                       OptionalAttr<I64Attr>:$offset);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def DPRT_FuncOp : DPRT_Op<"func", [Symbol, HasParent<"ProgramOp">,
    IsolatedFromAbove, SingleBlock, NoRegionArguments]> {
  let summary = "one entry point of the program";
  let description = [{
    Runs on every rank with the rank's context. A function of kind
    `describe` fills the ProgramSpec instead: its buffer operands stand for
    their offsets.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, UnitAttr:$describe);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
}

def DPRT_ReturnOp : DPRT_Op<"return", [Terminator, HasParent<"FuncOp">]> {
  let summary = "ends a function; its operands stay live until the end";
  let arguments = (ins Variadic<DPRT_BufferType>:$keep);
  let assemblyFormat = "($keep^)? attr-dict";
}

def DPRT_AllocOp : DPRT_Op<"alloc"> {
  let summary = "a temporary buffer";
  let description = [{
    `%b = dprt.alloc {bytes = 1024, name = "h0"}`: live from its first use to
    its last use in the function; `offset` is set by dprt-plan-memory.

    With `carried = "key"` the buffer outlives its function: in the first
    function that allocates `key` it lives from its first use to the end of
    the function, and every later function's alloc of the same key is the
    same bytes at the same offset, live for that whole function (dp_apply
    reads the per-sample gradients and clip factors dp_microstep left; the
    driver runs nothing on the arena between the two).
  }];
  let arguments = (ins I64Attr:$bytes, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<StrAttr>:$name,
                       OptionalAttr<StrAttr>:$carried);
  let results = (outs DPRT_BufferType:$buffer);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def DPRT_GetGlobalOp : DPRT_Op<"get_global", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the buffer of a dprt.global";
  let arguments = (ins FlatSymbolRefAttr:$global);
  let results = (outs DPRT_BufferType:$buffer);
  let assemblyFormat = "$global attr-dict";
}

def DPRT_ViewOp : DPRT_Op<"view", [Pure]> {
  let summary = "a buffer that starts `offset` bytes into another";
  let arguments = (ins DPRT_BufferType:$source, I64Attr:$offset);
  let results = (outs DPRT_BufferType:$buffer);
  let assemblyFormat = "$source `[` $offset `]` attr-dict";
  let hasVerifier = 1;
}

def DPRT_CallOp : DPRT_Op<"call"> {
  let summary = "one call of a runtime function";
  let description = [{
    ```mlir
    dprt.call "linear_forward"(%x, %w, %y) {args = [#dprt.dtype<F32>,
        0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, 128 : i64,
        64 : i64, 32 : i64]}
    ```
    calls `dprt::linear_forward(rank, ...)` with `args` in order: an index
    stands for that buffer operand (a pointer into the arena; its offset in
    a describe function), any other attribute is a value. The callee and
    the kind of each argument are checked against the runtime's table of
    functions, runtime/include/dprt/kernels.def: a buffer, an int32 buffer,
    a buffer or `#dprt.null`, a `#dprt` enum, an `i64`, `i32` or `f64`
    number, a bool, a string, or a `#dprt.planned` number. Collectives
    (functions whose last parameter is a stream) run on stream `stream`,
    set by dprt-schedule; every other call on stream 0.
  }];
  let arguments = (ins StrAttr:$callee, Variadic<DPRT_BufferType>:$buffers,
                       ArrayAttr:$args,
                       DefaultValuedAttr<I32Attr, "0">:$stream);
  let assemblyFormat = "$callee `(` $buffers `)` attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The callee's entry in the runtime's table; null for an unknown callee
    /// (which the verifier rejects).
    const ::dpc::rt::KernelSignature *getSignature();
    /// Whether the callee is a collective, which runs on `stream`.
    bool isCollective();
  }];
}

def DPRT_RecordEventOp : DPRT_Op<"record_event"> {
  let summary = "records an event on a stream";
  let arguments = (ins I32Attr:$stream, I32Attr:$event);
  let assemblyFormat = "attr-dict";
  let hasVerifier = 1;
}

def DPRT_WaitEventOp : DPRT_Op<"wait_event"> {
  let summary = "makes a stream wait for an event";
  let description = [{
    Its buffer operands are those an asynchronous collective still reads
    or writes until the event: they stay live (for the memory plan) until
    here.
  }];
  let arguments = (ins Variadic<DPRT_BufferType>:$keep, I32Attr:$stream,
                       I32Attr:$event);
  let assemblyFormat = "($keep^)? attr-dict";
  let hasVerifier = 1;
}

#endif // DPRT_OPS_TD
