//===- PlanQueries.h - What a planned module holds ------------*- C++ -*-===//
//
// The facts about a compiled plan that dpc's automatic choices compare
// (--materialized-norms, --rematerialize, --reshard-after-forward,
// --compute-copy auto): each compiles the plan more than one way and keeps
// the one these say is better.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TOOLS_DPC_PLANQUERIES_H
#define DPC_TOOLS_DPC_PLANQUERIES_H

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace dpc {

/// The largest arena of the plan's programs: what a rank allocates.
int64_t arenaOf(mlir::ModuleOp planned);

/// Whether the plan gathers some unit a second time, before its backward.
bool gathersAgain(mlir::ModuleOp planned);

/// Whether the plan casts some unit from its master where layers read it.
bool hasCastUnits(mlir::ModuleOp planned);

/// Bytes of the per-sample weight gradients the plan materializes.
int64_t materializedOf(mlir::ModuleOp planned);

} // namespace dpc

#endif // DPC_TOOLS_DPC_PLANQUERIES_H
