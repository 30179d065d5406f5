//===- FiniteChecks.h - What the driver checks before dp_apply --*- C++ -*-===//
//
// With --skip-nonfinite-steps the driver checks before dp_apply that the
// step's clipped gradient sum is finite (docs/training-program.md,
// "Non-finite steps"), so that a NaN never reaches the parameters of a run
// that goes on; this says which arena ranges hold it. (A run that stops at
// such a step leaves the check to the update kernels.)
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_FINITECHECKS_H
#define DPRT_DRIVER_FINITECHECKS_H

#include "dprt/program.h"

#include <cstdint>
#include <vector>

namespace dprt::driver {

/// The arena ranges (offsets, counts of acc elements) the driver checks for
/// finiteness before dp_apply: each trainable unit's gradient shard, but in
/// a unit with parameters whose clipped sum dp_apply forms from the
/// per-sample gradients (ParamSpec::sumFromRows) only its other trainable
/// parameters' ranges. Those sums are finite by construction: clip_factors
/// gives c_b = 0 unless sample b's squared norm, which sums the squares of
/// the very values the update reads, is finite, and then every element of
/// c_b g_b is at most C.
void finiteCheckRanges(const ProgramSpec &spec, std::vector<int64_t> &offsets,
                       std::vector<int64_t> &counts);

} // namespace dprt::driver

#endif // DPRT_DRIVER_FINITECHECKS_H
