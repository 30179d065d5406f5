//===- Progress.h - Progress on stderr and the metrics file -----*- C++ -*-===//

#ifndef DPRT_DRIVER_PROGRESS_H
#define DPRT_DRIVER_PROGRESS_H

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace dprt::driver {

/// What one optimizer step did, for the progress line and the metrics file.
/// One rank's part of a step, reported when the ranks are processes: a slow
/// rank takes longer, a stuck one stops reporting.
struct RankHeartbeat {
  int rank = 0;
  double stepSeconds = 0;  ///< from the step's start to this rank's end
  int64_t memoryBytes = 0; ///< this rank's peak
};

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
  /// Rows the micro-steps ran beyond the real records, over all ranks: the
  /// padding of the last physical batches (and empty user slots).
  int64_t paddingRows = 0;
  /// From the end of the step before when this one was queued ahead (below),
  /// else from the step's start, to when its ranks met after their wait (the
  /// next step already queued, if it runs ahead): the steps' times add up.
  double stepSeconds = 0;
  double wallSeconds = 0; ///< since the start of the program
  /// The step's work went to the devices while the host finished the step
  /// before, after that step's wait (Trainer::runsAhead in TrainLoop.h).
  bool queuedAhead = false;
  int64_t memoryBytes = 0; ///< rank 0's peak
  /// Time compute waited for communication in this step, mean over the
  /// ranks (Rank::exposedCommSeconds); NaN when not measured (no --trace).
  double exposedCommSeconds = std::nan("");
  /// The step took no update: its loss or gradient was not finite
  /// (--skip-nonfinite-steps).
  bool skipped = false;
  /// User-level DP (the privacy unit is one user of at most
  /// maxRecordsPerUser records): the users of the step's batch, whose
  /// records `samples` counts. -1 when one record is the unit.
  int64_t users = -1;
  int64_t maxRecordsPerUser = 0;
  /// Every rank's heartbeat ("ranks" in the JSON) when launched with several
  /// processes; empty otherwise.
  std::vector<RankHeartbeat> ranks;
};

/// One JSON object on one line (no newline).
std::string toJsonLine(const StepMetrics &m);

/// One evaluation on --eval-data (Evaluation.h).
struct EvalResult {
  int64_t step = 0;      ///< the optimizer steps taken before it
  double loss = 0;       ///< eval_loss
  double perplexity = 0; ///< eval_ppl; NaN unless the loss is a cross-entropy
  int64_t samples = 0;   ///< records evaluated
  int64_t tokens = 0;    ///< counted targets (language models) or samples
  double seconds = 0;
};

/// One JSON object on one line (no newline): {"step", "eval_loss",
/// "eval_ppl" (cross-entropy models), "eval_samples", "eval_tokens",
/// "eval_time_s"}.
std::string toJsonLine(const EvalResult &r);

/// The progress display on stderr: a bar redrawn in place when stderr is a
/// terminal, a plain line every ~5 % of the steps otherwise, nothing when
/// quiet.
class Progress {
public:
  Progress(bool quiet, int64_t firstStep, int64_t lastStep);
  void update(const StepMetrics &m);
  /// Prints an evaluation's line (unless quiet) and shows its loss on the
  /// progress lines that follow.
  void evaluation(const EvalResult &r);
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
  double evalLoss_ = std::nan(""); ///< the latest evaluation's loss
};

/// "1.5 KiB", "12.0 MiB".
std::string formatBytes(int64_t bytes);

} // namespace dprt::driver

#endif // DPRT_DRIVER_PROGRESS_H
