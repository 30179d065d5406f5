//===- DPDialect.cpp - The dp dialect -------------------------------------===//

#include "DP/DPDialect.h"
#include "DP/DPOps.h"

using namespace dpc::dp;

#include "DP/DPOpsDialect.cpp.inc"

void DPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "DP/DPOps.cpp.inc"
      >();
  registerAttributes();
}
