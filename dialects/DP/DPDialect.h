//===- DPDialect.h - The dp dialect -----------------------------*- C++ -*-===//

#ifndef DPC_DIALECTS_DP_DPDIALECT_H
#define DPC_DIALECTS_DP_DPDIALECT_H

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/Dialect.h"

#include "DP/DPOpsDialect.h.inc"

#endif // DPC_DIALECTS_DP_DPDIALECT_H
