//===- Progress.h - Progress on stderr and the metrics file -----*- C++ -*-===//

#ifndef DPRT_DRIVER_PROGRESS_H
#define DPRT_DRIVER_PROGRESS_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dprt::driver {

/// What one optimizer step did, for the progress line and the metrics file.
struct StepMetrics {
  int64_t step = 0;
  double loss = 0;    ///< mean over the real samples; NaN if none
  double epsilon = 0; ///< spent after this step (see epsilonExact)
  /// Whether `epsilon` is exact, or the epsilon of a later step (an upper
  /// bound; PrivacySession::metricsEpsilon).
  bool epsilonExact = true;
  double lr = 0;       ///< the step's learning rate: lr * the schedule's factor
  int64_t samples = 0; ///< the logical batch
  int64_t tokens = 0;  ///< counted target tokens (samples for CSV)
  int64_t microSteps = 0;
  double stepSeconds = 0;
  double wallSeconds = 0;  ///< since the start of the program
  int64_t memoryBytes = 0; ///< rank 0's peak
  /// Time compute waited for communication in this step, mean over the
  /// ranks (Rank::exposedCommSeconds); NaN when not measured (no --trace).
  double exposedCommSeconds = std::nan("");
  /// The step took no update: its loss or gradient was not finite
  /// (--skip-nonfinite-steps).
  bool skipped = false;
};

/// One JSON object on one line (no newline).
std::string toJsonLine(const StepMetrics &m);

/// The progress display on stderr: a bar redrawn in place when stderr is a
/// terminal, a plain line every ~5 % of the steps otherwise, nothing when
/// quiet.
class Progress {
public:
  Progress(bool quiet, int64_t firstStep, int64_t lastStep);
  void update(const StepMetrics &m);
  /// Ends the bar's line (before other output).
  void finish();

private:
  bool quiet_;
  bool terminal_;
  int64_t firstStep_;
  int64_t lastStep_;
  int64_t every_;
  double lastDraw_ = -1;
  bool drawn_ = false;
};

/// "1.5 KiB", "12.0 MiB".
std::string formatBytes(int64_t bytes);

} // namespace dprt::driver

#endif // DPRT_DRIVER_PROGRESS_H
