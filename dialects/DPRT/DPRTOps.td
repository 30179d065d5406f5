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

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

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
  }];
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

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
    Attributes after planning: `arena_bytes` (the arena of one rank) and
    `peak_bytes` (the largest extent actually in use at once).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
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
  }];
  let arguments = (ins I64Attr:$bytes, OptionalAttr<I64Attr>:$offset,
                       OptionalAttr<StrAttr>:$name);
  let results = (outs DPRT_BufferType:$buffer);
  let assemblyFormat = "attr-dict";
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
}

def DPRT_CallOp : DPRT_Op<"call"> {
  let summary = "one call of a runtime function";
  let description = [{
    ```mlir
    dprt.call "linear_forward"(%x, %w, %y) {args = [#emitc.opaque<"dprt::DType::F32">, 0 : index,
        1 : index, #emitc.opaque<"nullptr">, 2 : index, 128 : i64, 64 : i64, 32 : i64]}
    ```
    calls `dprt::linear_forward(rank, ...)` with `args` in order: an index
    stands for that operand (a pointer into the arena), any other attribute
    is a literal. Calls marked `collective` run on stream `stream` (set by
    dprt-schedule), which the EmitC lowering passes as the last argument.
    The buffers listed in `int32_buffers` hold int32 values (token ids):
    they are passed as `int32_t *`, every other buffer as `char *`.
  }];
  let arguments = (ins StrAttr:$callee, Variadic<DPRT_BufferType>:$buffers,
                       ArrayAttr:$args, UnitAttr:$collective,
                       DefaultValuedAttr<I32Attr, "0">:$stream,
                       OptionalAttr<DenseI64ArrayAttr>:$int32_buffers);
  let assemblyFormat = "$callee `(` $buffers `)` attr-dict";
  let hasVerifier = 1;
}

def DPRT_RecordEventOp : DPRT_Op<"record_event"> {
  let summary = "records an event on a stream";
  let arguments = (ins I32Attr:$stream, I32Attr:$event);
  let assemblyFormat = "attr-dict";
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
}

#endif // DPRT_OPS_TD
