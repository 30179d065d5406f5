//===- DPOps.h - Models, layers and recipes ---------------------*- C++ -*-===//

#ifndef DPC_DIALECTS_DP_DPOPS_H
#define DPC_DIALECTS_DP_DPOPS_H

#include "DP/DPAttrs.h"
#include "DP/DPDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace dpc::dp {
class ForwardOp;
class ParamOp;

/// What weight-gradient ops write: the gradients of the parameters.
struct GradientResource
    : public mlir::SideEffects::Resource::Base<GradientResource> {
  llvm::StringRef getName() final { return "dp.gradients"; }
};
} // namespace dpc::dp

#include "DP/DPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "DP/DPOps.h.inc"

#endif // DPC_DIALECTS_DP_DPOPS_H
