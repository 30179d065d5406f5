//===- PlanQueries.cpp - What a planned module holds ----------------------===//

#include "PlanQueries.h"

#include "DP/DPOps.h"
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
    auto type = cast<RankedTensorType>(op.getGrads().getType());
    bytes += type.getNumElements() * int64_t(type.getElementTypeBitWidth() / 8);
  });
  return bytes;
}
