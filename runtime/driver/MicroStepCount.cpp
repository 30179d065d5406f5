//===- MicroStepCount.cpp - Steps a program can run -----------------------===//

#include "MicroStepCount.h"

#include <stdexcept>
#include <string>

namespace dprt::driver {

void requireMicroStepCount(const ProgramSpec &spec, int64_t microSteps) {
  // dp_apply reads the per-sample gradients of the last micro-step only,
  // and an overwritten gradient holds the last micro-step's alone (or, in a
  // step of none, the last step's).
  if (microSteps == 1)
    return;
  for (const ParamSpec &p : spec.params)
    if (p.sumFromRows || p.gradOverwritten)
      throw std::runtime_error(
          "a step of " + std::to_string(microSteps) +
          " micro-steps, but the program's " +
          (p.sumFromRows
               ? "update forms '" + p.name +
                     "''s clipped sum from one micro-step's per-sample "
                     "gradients (compile with dpc --sum-in-update=off)"
               : "micro-step writes '" + p.name +
                     "''s gradient instead of adding to it (compile with "
                     "dpc --overwrite-gradients=off)"));
}

} // namespace dprt::driver
