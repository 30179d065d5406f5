//===- DPRTDialect.cpp - The scheduled program ----------------------------===//

#include "DPRT/DPRTDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace dpc::rt;

#include "DPRT/DPRTDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "DPRT/DPRTTypes.cpp.inc"

#define GET_OP_CLASSES
#include "DPRT/DPRTOps.cpp.inc"

void DPRTDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "DPRT/DPRTTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "DPRT/DPRTOps.cpp.inc"
      >();
}

LogicalResult GetGlobalOp::verifySymbolUses(SymbolTableCollection &tables) {
  if (!tables.lookupNearestSymbolFrom<GlobalOp>(*this, getGlobalAttr()))
    return emitOpError("refers to unknown global ") << getGlobalAttr();
  return success();
}

LogicalResult CallOp::verify() {
  for (Attribute arg : getArgs()) {
    auto index = dyn_cast<IntegerAttr>(arg);
    if (!index || !index.getType().isIndex())
      continue;
    if (index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(getBuffers().size()))
      return emitOpError("argument refers to buffer #")
             << index.getInt() << " of " << getBuffers().size();
  }
  return success();
}
