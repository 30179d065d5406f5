//===- Passes.h - DPC's passes ----------------------------------*- C++ -*-===//

#ifndef DPC_PASSES_PASSES_H
#define DPC_PASSES_PASSES_H

#include "DP/DPOps.h"
#include "DPRT/DPRTDialect.h"
#include "passes/OptionValues.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace dpc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace dpc

#endif // DPC_PASSES_PASSES_H
