//===- RunReport.h - The report at the end of a run -------------*- C++ -*-===//
//
// Collects what the steps did (time, samples, tokens, memory, exposed
// communication, the last loss) and writes the final report: the model, the
// steps done and why training stopped, the data, throughput, memory against
// the plan's prediction, and the privacy report with where sigma and the
// noise key came from.
//
// Backend-independent (in dprt_driver_objects).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_RUNREPORT_H
#define DPRT_DRIVER_RUNREPORT_H

#include "PrivacySession.h"
#include "Progress.h"
#include "Schedule.h"

#include "dprt/program.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

namespace dprt::driver {

/// How the step loop ended.
struct RunEnding {
  int64_t step = 0;       ///< steps completed
  int64_t totalSteps = 0; ///< steps asked for
  bool stoppedByBudget = false;
};

class RunReport {
public:
  /// Adds a trained step.
  void addStep(const StepMetrics &m);
  /// Records an evaluation (--eval-data); the report shows the last one.
  void addEvaluation(const EvalResult &r) { lastEval_ = r; }
  /// The backend's kernel tuning on the leader's rank (a line when it
  /// timed any shapes: it is part of the first step's time).
  void setKernelTuning(int64_t shapes, double seconds) {
    tunedShapes_ = shapes;
    tuningSeconds_ = seconds;
  }
  double lastLoss() const { return lastLoss_; }

  /// The report, lines of "  key   value" under "training report".
  /// `data` describes the data ("" without), `world` is the number of
  /// ranks; the exposed-communication line appears when `exposedMeasured`
  /// (--trace) and there is more than one rank. The optimizer and schedule
  /// lines give the hyperparameters used (the privacy report gives C, q,
  /// sigma, delta and the accountant).
  std::string text(const ProgramSpec &spec, int world, const std::string &data,
                   const RunEnding &ending, const PrivacySession &privacy,
                   const Hyperparameters &hyperparameters,
                   bool exposedMeasured) const;

private:
  double trainSeconds_ = 0;
  /// Communication compute waited for, mean over the ranks, summed over the
  /// steps (measured with --trace only).
  double exposedCommSeconds_ = 0;
  int64_t trainedSamples_ = 0;
  int64_t trainedTokens_ = 0;
  /// Rows run beyond the real records (StepMetrics::paddingRows), summed.
  int64_t paddingRows_ = 0;
  int64_t stepsRun_ = 0;
  int64_t peakBytes_ = 0;
  int64_t skippedSteps_ = 0;
  double lastLoss_ = std::nan("");
  std::optional<EvalResult> lastEval_;
  double lastLr_ = std::nan("");
  int64_t tunedShapes_ = 0;
  double tuningSeconds_ = 0;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_RUNREPORT_H
