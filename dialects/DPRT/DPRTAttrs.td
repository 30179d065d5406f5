//===- DPRTAttrs.td - Arguments of runtime calls --------------*- tablegen -*-===//
//
// The enums of the runtime's C++ API as enum attributes, the null buffer and
// the numbers the memory plan decides. The runtime enums' names and values
// are pinned to runtime/include/dprt/types.h and program.h by static
// assertions in DPRTDialect.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_ATTRS_TD
#define DPRT_ATTRS_TD

include "DPRT/DPRTBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def DPRT_RuntimeEnumAttrInterface : AttrInterface<"RuntimeEnumAttrInterface"> {
  let cppNamespace = "::dpc::rt";
  let description = [{
    An enumerator of the runtime's C++ API. convert-dprt-to-emitc spells it
    through this interface, from the enum's generated stringify function.
  }];
  let methods = [
    InterfaceMethod<"The enumerator as C++ names it: `dprt::ClipMode::Flat`.",
                    "std::string", "getCppEnumerator">,
  ];
}

/// An enum of the runtime; each case is named like the C++ enumerator.
class DPRT_RuntimeEnum<string name, string summary,
                       list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let cppNamespace = "::dpc::rt";
  let genSpecializedAttr = 0;
}

class DPRT_RuntimeEnumAttr<DPRT_RuntimeEnum enum, string mnemonic>
    : EnumAttr<DPRT_Dialect, enum, mnemonic,
               [DPRT_RuntimeEnumAttrInterface]> {
  let assemblyFormat = "`<` $value `>`";
  let extraClassDeclaration = [{
    std::string getCppEnumerator() const {
      return ("dprt::}] # enum.className # [{::" +
              stringifyEnum(getValue())).str();
    }
  }];
}

def DPRT_DType : DPRT_RuntimeEnum<"DType", "element type of a buffer", [
    I32EnumAttrCase<"F64", 0>,
    I32EnumAttrCase<"F32", 1>,
    I32EnumAttrCase<"BF16", 2>,
    I32EnumAttrCase<"MXFP8", 3>]>;
def DPRT_DTypeAttr : DPRT_RuntimeEnumAttr<DPRT_DType, "dtype">;

def DPRT_Activation : DPRT_RuntimeEnum<"Activation", "elementwise activation", [
    I32EnumAttrCase<"Relu", 0>,
    I32EnumAttrCase<"Silu", 1>,
    I32EnumAttrCase<"GeluErf", 2>,
    I32EnumAttrCase<"GeluTanh", 3>]>;
def DPRT_ActivationAttr : DPRT_RuntimeEnumAttr<DPRT_Activation, "activation">;

def DPRT_Reduction : DPRT_RuntimeEnum<"Reduction",
    "how a sample's token losses combine", [
    I32EnumAttrCase<"Mean", 0>,
    I32EnumAttrCase<"Sum", 1>]>;
def DPRT_ReductionAttr : DPRT_RuntimeEnumAttr<DPRT_Reduction, "reduction">;

def DPRT_ClipMode : DPRT_RuntimeEnum<"ClipMode", "per-sample clipping mode", [
    I32EnumAttrCase<"Flat", 0>,
    I32EnumAttrCase<"PerLayer", 1>,
    I32EnumAttrCase<"Automatic", 2>,
    I32EnumAttrCase<"None", 3>]>;
def DPRT_ClipModeAttr : DPRT_RuntimeEnumAttr<DPRT_ClipMode, "clip_mode">;

def DPRT_NoiseGeneratorKind : DPRT_RuntimeEnum<"NoiseGeneratorKind",
    "generator of the privacy noise", [
    I32EnumAttrCase<"Philox", 0>,
    I32EnumAttrCase<"ChaCha20", 1>,
    I32EnumAttrCase<"None", 2>]>;
def DPRT_NoiseGeneratorKindAttr
    : DPRT_RuntimeEnumAttr<DPRT_NoiseGeneratorKind, "noise_generator">;

def DPRT_OptimizerKind : DPRT_RuntimeEnum<"OptimizerKind", "optimizer", [
    I32EnumAttrCase<"SGD", 0>,
    I32EnumAttrCase<"Momentum", 1>,
    I32EnumAttrCase<"AdamW", 2>]>;
def DPRT_OptimizerKindAttr
    : DPRT_RuntimeEnumAttr<DPRT_OptimizerKind, "optimizer">;

def DPRT_SamplingKind : DPRT_RuntimeEnum<"SamplingKind",
    "how the driver draws logical batches", [
    I32EnumAttrCase<"Poisson", 0>,
    I32EnumAttrCase<"Shuffle", 1>]>;
def DPRT_SamplingKindAttr
    : DPRT_RuntimeEnumAttr<DPRT_SamplingKind, "sampling">;

def DPRT_InputRole : DPRT_RuntimeEnum<"InputRole",
    "what a forward-pass input holds", [
    I32EnumAttrCase<"Tokens", 0>,
    I32EnumAttrCase<"NextTokens", 1>,
    I32EnumAttrCase<"Features", 2>,
    I32EnumAttrCase<"Label", 3>,
    I32EnumAttrCase<"Target", 4>]>;
def DPRT_InputRoleAttr : DPRT_RuntimeEnumAttr<DPRT_InputRole, "input_role">;

def DPRT_NullAttr : AttrDef<DPRT_Dialect, "Null"> {
  let mnemonic = "null";
  let summary = "no buffer";
  let description = [{
    `#dprt.null` in place of a buffer the runtime function may go without:
    C++ `nullptr`, or -1 for a buffer's offset in dp_describe.
  }];
}

def DPRT_PlannedValue : I32EnumAttr<"PlannedValue",
    "a number the memory plan decides", [
    I32EnumAttrCase<"ArenaBytes", 0, "arena_bytes">,
    I32EnumAttrCase<"PeakBytes", 1, "peak_bytes">,
    I32EnumAttrCase<"LogitsOffset", 2, "logits_offset">]> {
  let cppNamespace = "::dpc::rt";
  let genSpecializedAttr = 0;
}

def DPRT_PlannedAttr : EnumAttr<DPRT_Dialect, DPRT_PlannedValue, "planned"> {
  let summary = "a number only the memory plan knows";
  let description = [{
    `#dprt.planned<arena_bytes>` and `<peak_bytes>` are the program's
    `arena_bytes` and `peak_bytes` after dprt-plan-memory;
    `<logits_offset>` is the offset of the buffer dp_forward returns.
    convert-dprt-to-emitc replaces each by the number.
  }];
  let assemblyFormat = "`<` $value `>`";
}

#endif // DPRT_ATTRS_TD
