//===- PlanQueries.cpp - What a planned module holds ----------------------===//

#include "PlanQueries.h"

#include "DP/DPOps.h"
#include "DP/DPSizes.h"
#include "DPRT/DPRTDialect.h"

#include <algorithm>

using namespace mlir;

int64_t dpc::arenaOf(ModuleOp planned) {
  int64_t arena = 0;
  for (auto program : planned.getOps<rt::ProgramOp>())
    arena = std::max<int64_t>(arena, program.getArenaBytes().value_or(0));
  return arena;
}

bool dpc::gathersAgain(ModuleOp planned) {
  bool again = false;
  planned.walk([&](dp::AllGatherOp op) {
    again |= op.getPhase() == dp::GatherPhase::backward;
  });
  return again;
}

bool dpc::hasCastUnits(ModuleOp planned) {
  bool cast = false;
  planned.walk(
      [&](rt::CallOp call) { cast |= call.getCallee() == "gather_master"; });
  return cast;
}

int64_t dpc::materializedOf(ModuleOp planned) {
  int64_t bytes = 0;
  planned.walk([&](dp::LinearPerSampleGradOp op) {
    // MXFP8 rows with their scales, as the lowering allocates them.
    bytes += dp::getNumBytes(cast<RankedTensorType>(op.getGrads().getType()))
                 .value_or(0);
  });
  return bytes;
}
