//===- DPInterfaces.td - Interfaces of the dp dialect --------*- tablegen -*-===//

#ifndef DP_INTERFACES_TD
#define DP_INTERFACES_TD

include "mlir/IR/OpBase.td"

def DP_ParamUserOpInterface : OpInterface<"ParamUserOpInterface"> {
  let cppNamespace = "::dpc::dp";
  let description = [{
    An op that reads model parameters by symbol (`dp.linear @w(%x)`). The
    model verifier uses it to find unused and tied parameters; the passes use
    it to find the parameters whose per-sample gradients a layer produces.
  }];
  let methods = [
    InterfaceMethod<"The parameters this op reads, weight first.",
      "::llvm::SmallVector<::mlir::FlatSymbolRefAttr, 2>", "getParamRefs">,
  ];
}

#endif // DP_INTERFACES_TD
