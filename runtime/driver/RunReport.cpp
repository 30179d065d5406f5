//===- RunReport.cpp - The report at the end of a run ---------------------===//

#include "RunReport.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dprt::driver {

void RunReport::addStep(const StepMetrics &m) {
  trainSeconds_ += m.stepSeconds;
  trainedSamples_ += m.samples;
  trainedTokens_ += m.tokens;
  paddingRows_ += m.paddingRows;
  ++stepsRun_;
  peakBytes_ = std::max(peakBytes_, m.memoryBytes);
  if (std::isfinite(m.loss))
    lastLoss_ = m.loss;
  lastLr_ = m.lr;
  if (m.skipped)
    ++skippedSteps_;
  if (!std::isnan(m.exposedCommSeconds))
    exposedCommSeconds_ += m.exposedCommSeconds;
}

std::string RunReport::text(const ProgramSpec &spec, int world,
                            const std::string &data, const RunEnding &ending,
                            const PrivacySession &privacy,
                            const Hyperparameters &h,
                            bool exposedMeasured) const {
  std::ostringstream os;
  os << "training report\n"
     << "  model             " << spec.model << " (" << spec.backend
     << " backend, " << world << (world == 1 ? " rank" : " ranks") << ")\n"
     << "  steps             " << ending.step << " of " << ending.totalSteps;
  if (ending.stoppedByBudget)
    os << " (stopped: the next step would exceed epsilon = "
       << privacy.targetEpsilon() << ")";
  os << "\n";
  if (!data.empty())
    os << "  data              " << data << "\n";
  if (!std::isnan(lastLoss_))
    os << "  last loss         " << lastLoss_ << "\n";
  if (lastEval_) {
    os << "  eval loss         " << lastEval_->loss;
    if (!std::isnan(lastEval_->perplexity))
      os << " (perplexity " << lastEval_->perplexity << ")";
    os << " after step " << lastEval_->step << ", " << lastEval_->samples
       << " samples, " << lastEval_->tokens
       << " tokens; not accounted for in epsilon\n";
  }
  const RecipeSpec &r = spec.recipe;
  os << "  optimizer         " << optimizerName(r.optimizer)
     << ", lr = " << h.lr << ", weight decay = " << h.weightDecay;
  if (r.optimizer == OptimizerKind::Momentum)
    os << ", momentum = " << r.momentum << (r.nesterov ? " (Nesterov)" : "");
  if (r.optimizer == OptimizerKind::AdamW)
    os << ", beta1 = " << r.beta1 << ", beta2 = " << r.beta2
       << ", eps = " << r.eps;
  os << "\n  lr schedule       " << h.schedule.describe();
  if (!std::isnan(lastLr_))
    os << "; last step's lr " << lastLr_;
  os << "\n"
     << "  batch             expected " << privacy.expectedBatch()
     << " records a step\n";
  if (skippedSteps_ > 0)
    os << "  skipped steps     " << skippedSteps_
       << " (loss or gradient not finite: no update, counted for epsilon)\n";
  char line[160];
  if (stepsRun_ > 0) {
    const int64_t rows = trainedSamples_ + paddingRows_;
    std::snprintf(line, sizeof(line),
                  "  padding rows      %lld of the %lld rows the micro-steps "
                  "ran (%.2f %%)\n",
                  static_cast<long long>(paddingRows_),
                  static_cast<long long>(rows),
                  rows > 0 ? 100.0 * double(paddingRows_) / double(rows) : 0.0);
    os << line;
  }
  const double seconds = trainSeconds_ > 0 ? trainSeconds_ : 0;
  std::snprintf(line, sizeof(line),
                "  throughput        %.1f samples/s, %.1f tokens/s (%lld "
                "steps in %.2f s)\n",
                seconds > 0 ? trainedSamples_ / seconds : 0.0,
                seconds > 0 ? trainedTokens_ / seconds : 0.0,
                static_cast<long long>(stepsRun_), seconds);
  os << line;
  os << "  memory per rank   peak " << formatBytes(peakBytes_) << "; predicted "
     << formatBytes(spec.predictedPeakBytes);
  if (peakBytes_ > 0) {
    std::snprintf(line, sizeof(line), " (%.1f %% of the peak)",
                  100.0 * spec.predictedPeakBytes / peakBytes_);
    os << line;
  }
  os << "; arena " << formatBytes(spec.arenaBytes);
  if (spec.predictedPeakBytes > spec.arenaBytes)
    os << " and " << formatBytes(spec.predictedPeakBytes - spec.arenaBytes)
       << " of cuBLASLt workspace";
  os << "\n";
  if (tunedShapes_ > 0) {
    std::snprintf(line, sizeof(line),
                  "  kernel tuning     %lld product shapes timed in %.2f s "
                  "(in the first steps; DPRT_GEMM_TUNING=0 skips it)\n",
                  static_cast<long long>(tunedShapes_), tuningSeconds_);
    os << line;
  }
  if (exposedMeasured && world > 1) {
    std::snprintf(line, sizeof(line),
                  "  exposed comm      %.3f s (%.1f %% of the training time): "
                  "compute waiting for communication, mean over ranks\n",
                  exposedCommSeconds_,
                  seconds > 0 ? 100.0 * exposedCommSeconds_ / seconds : 0.0);
    os << line;
  }
  privacy::printPrivacyReport(os, privacy.report(ending.step));
  if (!privacy.report(ending.step).isPrivate)
    return os.str();
  os << "  noise source      sigma " << privacy.sigmaSource() << "\n";
  if (!privacy.noiseKeySource().empty())
    os << "  noise key         secret ChaCha20 key " << privacy.noiseKeySource()
       << "; checkpoints hold it: keep them as secret as the key\n";
  if (privacy.sigma() == 0)
    os << "  warning           no noise: this run is not differentially "
          "private\n";
  return os.str();
}

} // namespace dprt::driver
