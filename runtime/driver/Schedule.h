//===- Schedule.h - The run's learning rate, decay and schedule -*- C++ -*-===//
//
// The optimizer hyperparameters the command line sets without recompiling:
// the learning rate, the decoupled weight decay and the learning-rate
// schedule. The kernels read them from the StepState (dprt/rank.h): lr and
// weightDecay as given, lrScale = the schedule's factor at the step. The
// recipe's values are the defaults; a resumed run keeps its checkpoint's.
// (The clipping bound and the sampling rate change the privacy guarantee:
// PrivacySession owns them.)
//
// Backend-independent (in dprt_driver_objects).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_SCHEDULE_H
#define DPRT_DRIVER_SCHEDULE_H

#include "Checkpoint.h"
#include "Options.h"

#include "dprt/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dprt::driver {

/// The learning rate of step s (from 1) is lr * factor(s):
///   s <= warmup:        s / warmup                  (linear warmup)
///   after, with p = min(1, (s - warmup) / max(1, horizon - warmup)):
///     constant:         1
///     linear:           r + (1 - r) (1 - p)
///     cosine:           r + (1 - r) (1 + cos(pi p)) / 2
/// with r = minLrRatio: the peak is reached at step `warmup` (at step 1
/// without warmup) and the decay ends at r at step `horizon`, the run's
/// last step, and stays there after it.
struct LrSchedule {
  int64_t warmup = 0;
  LrDecay decay = LrDecay::Constant;
  double minLrRatio = 0.0;
  /// The step at which the decay reaches minLrRatio: the run's total steps
  /// (on resume, the total it now trains to).
  int64_t horizon = 0;

  double factor(int64_t step) const;
  /// "constant", "warmup 100, then cosine to 0.1 at step 2000", ...
  std::string describe() const;
};

struct Hyperparameters {
  double lr = 0;
  double weightDecay = 0;
  LrSchedule schedule;
};

/// The hyperparameters of a run of `totalSteps` steps: each flag (--lr,
/// --weight-decay, --warmup, --decay, --min-lr-ratio), else the
/// checkpoint's when resuming from `resumed` (a checkpoint of step > 0),
/// else the recipe's. A flag that changes a resumed run's value is allowed
/// (it changes no privacy parameter) and named in `notes`, since the run
/// then no longer equals an uninterrupted one; so is a decay that now ends
/// at another step (a resumed run with another --steps) and a warmup longer
/// than the run. Throws UsageError for --min-lr-ratio with a constant decay.
Hyperparameters resolveHyperparameters(const Options &options,
                                       const RecipeSpec &recipe,
                                       int64_t totalSteps,
                                       const CheckpointState *resumed,
                                       std::vector<std::string> &notes);

/// Copies them into a checkpoint's state.
void saveHyperparameters(const Hyperparameters &h, CheckpointState &state);

} // namespace dprt::driver

#endif // DPRT_DRIVER_SCHEDULE_H
