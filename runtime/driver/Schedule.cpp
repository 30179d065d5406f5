//===- Schedule.cpp - The run's learning rate, decay and schedule ---------===//

#include "Schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dprt::driver {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

} // namespace

double LrSchedule::factor(int64_t step) const {
  if (warmup > 0 && step <= warmup)
    return static_cast<double>(step) / static_cast<double>(warmup);
  if (decay == LrDecay::Constant)
    return 1.0;
  const double span =
      static_cast<double>(std::max<int64_t>(1, horizon - warmup));
  const double p =
      std::min(1.0, std::max(0.0, static_cast<double>(step - warmup) / span));
  const double r = minLrRatio;
  if (decay == LrDecay::Linear)
    return r + (1 - r) * (1 - p);
  return r + (1 - r) * 0.5 * (1 + std::cos(kPi * p));
}

std::string LrSchedule::describe() const {
  std::ostringstream os;
  if (warmup > 0)
    os << "linear warmup over " << warmup << " steps, then ";
  if (decay == LrDecay::Constant)
    os << "constant";
  else
    os << nameOf(decay) << " decay to " << minLrRatio << " of it at step "
       << horizon;
  return os.str();
}

Hyperparameters resolveHyperparameters(const Options &o, const RecipeSpec &r,
                                       int64_t totalSteps,
                                       const CheckpointState *resumed,
                                       std::vector<std::string> &notes) {
  Hyperparameters h;
  if (resumed) {
    h.lr = resumed->lr;
    h.weightDecay = resumed->weightDecay;
    h.schedule.warmup = resumed->warmup;
    if (!parseLrDecay(resumed->decay, h.schedule.decay))
      throw UsageError("the checkpoint's schedule has an unknown decay '" +
                       resumed->decay + "'");
    h.schedule.minLrRatio = resumed->minLrRatio;
  } else {
    h.lr = r.lr;
    h.weightDecay = r.weightDecay;
    h.schedule.warmup = r.warmup;
    h.schedule.decay = r.decay;
    h.schedule.minLrRatio = r.minLrRatio;
  }
  // The decay ends at the run's last step. A resumed run that trains to
  // another total (--steps) ends it there, not where the checkpoint's run
  // would have: an extended run keeps decaying rather than training on at
  // the floor. Repeating the command line with --resume changes nothing.
  h.schedule.horizon = totalSteps;
  // A flag overrides; on resume, one that changes the checkpoint's value is
  // noted: from here on the run differs from the uninterrupted one.
  auto apply = [&](auto &field, const auto &flag, const char *name,
                   const std::string &shown) {
    if (!flag)
      return;
    if (resumed && *flag != field)
      notes.push_back(std::string(name) + " " + shown +
                      " replaces the checkpoint's value from this step on: "
                      "the resumed run no longer equals an uninterrupted "
                      "one");
    field = *flag;
  };
  apply(h.lr, o.lr, "--lr", o.lr ? number(*o.lr) : "");
  apply(h.weightDecay, o.weightDecay, "--weight-decay",
        o.weightDecay ? number(*o.weightDecay) : "");
  apply(h.schedule.warmup, o.warmup, "--warmup",
        o.warmup ? std::to_string(*o.warmup) : "");
  apply(h.schedule.decay, o.decay, "--decay", o.decay ? nameOf(*o.decay) : "");
  apply(h.schedule.minLrRatio, o.minLrRatio, "--min-lr-ratio",
        o.minLrRatio ? number(*o.minLrRatio) : "");
  if (resumed && resumed->lrHorizon > 0 && resumed->lrHorizon != totalSteps &&
      h.schedule.decay != LrDecay::Constant)
    notes.push_back("the " + std::string(nameOf(h.schedule.decay)) +
                    " decay now ends at step " + std::to_string(totalSteps) +
                    " (--steps), the checkpoint's run ended it at step " +
                    std::to_string(resumed->lrHorizon) +
                    ": the resumed run no longer equals an uninterrupted "
                    "one");
  if (o.minLrRatio && h.schedule.decay == LrDecay::Constant)
    throw UsageError("--min-lr-ratio sets where a decay ends, but the "
                     "learning rate is constant (the " +
                     std::string(o.decay ? "--decay" : "recipe's") +
                     " decay); add --decay cosine or --decay linear");
  if (h.schedule.warmup > totalSteps && totalSteps > 0)
    notes.push_back("the warmup of " + std::to_string(h.schedule.warmup) +
                    " steps is longer than the run's " +
                    std::to_string(totalSteps) +
                    ": the learning rate never reaches its peak");
  return h;
}

void saveHyperparameters(const Hyperparameters &h, CheckpointState &s) {
  s.lr = h.lr;
  s.weightDecay = h.weightDecay;
  s.warmup = h.schedule.warmup;
  s.decay = nameOf(h.schedule.decay);
  s.minLrRatio = h.schedule.minLrRatio;
  s.lrHorizon = h.schedule.horizon;
}

} // namespace dprt::driver
