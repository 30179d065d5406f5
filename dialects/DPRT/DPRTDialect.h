//===- DPRTDialect.h - The scheduled program --------------------*- C++ -*-===//

#ifndef DPC_DIALECTS_DPRT_DPRTDIALECT_H
#define DPC_DIALECTS_DPRT_DPRTDIALECT_H

#include "DPRT/DPRTKernels.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "DPRT/DPRTOpsDialect.h.inc"

#include "DPRT/DPRTEnums.h.inc"

#include "DPRT/DPRTAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "DPRT/DPRTAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "DPRT/DPRTOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "DPRT/DPRTOps.h.inc"

#endif // DPC_DIALECTS_DPRT_DPRTDIALECT_H
