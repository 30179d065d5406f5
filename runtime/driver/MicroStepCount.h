//===- MicroStepCount.h - Steps a program can run ---------------*- C++ -*-===//
//
// A program compiled for steps of exactly one micro-step (every step one
// physical batch on one rank) runs no other: its update may form clipped
// sums from that micro-step's per-sample gradients, and its micro-step may
// write gradients instead of adding to them (docs/training-program.md).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_MICROSTEPCOUNT_H
#define DPRT_DRIVER_MICROSTEPCOUNT_H

#include "dprt/program.h"

#include <cstdint>

namespace dprt::driver {

/// Throws unless a step of `microSteps` micro-steps suits the program: one
/// whose update forms clipped sums from a micro-step's per-sample gradients
/// (describe_update_from_rows) or whose micro-step writes gradients instead
/// of adding to them (describe_gradient_overwritten) takes exactly one.
void requireMicroStepCount(const ProgramSpec &spec, int64_t microSteps);

} // namespace dprt::driver

#endif // DPRT_DRIVER_MICROSTEPCOUNT_H
