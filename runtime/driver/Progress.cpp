//===- Progress.cpp - Progress on stderr and the metrics file -------------===//

#include "Progress.h"

#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <unistd.h>

namespace dprt::driver {

using privacy::jsonNumber;

std::string toJsonLine(const StepMetrics &m) {
  const double perSecond = m.stepSeconds > 0 ? 1 / m.stepSeconds : 0;
  std::ostringstream os;
  os << "{\"step\": " << m.step
     << ", \"loss\": " << (std::isnan(m.loss) ? "null" : jsonNumber(m.loss))
     << ", \"epsilon\": " << jsonNumber(m.epsilon)
     << ", \"epsilon_exact\": " << (m.epsilonExact ? "true" : "false")
     << ", \"lr\": " << jsonNumber(m.lr) << ", \"samples\": " << m.samples
     << ", \"tokens\": " << m.tokens << ", \"micro_steps\": " << m.microSteps
     << ", \"padding_rows\": " << m.paddingRows
     << ", \"step_time_s\": " << jsonNumber(m.stepSeconds)
     << ", \"samples_per_s\": " << jsonNumber(m.samples * perSecond)
     << ", \"tokens_per_s\": " << jsonNumber(m.tokens * perSecond)
     << ", \"wall_time_s\": " << jsonNumber(m.wallSeconds)
     << ", \"memory_bytes\": " << m.memoryBytes
     << ", \"skipped\": " << (m.skipped ? "true" : "false")
     << ", \"queued_ahead\": " << (m.queuedAhead ? "true" : "false");
  if (m.users >= 0)
    os << ", \"users\": " << m.users
       << ", \"privacy_unit\": \"one user (at most " << m.maxRecordsPerUser
       << " records)\"";
  if (!std::isnan(m.exposedCommSeconds))
    os << ", \"exposed_comm_s\": " << jsonNumber(m.exposedCommSeconds);
  if (!m.ranks.empty()) {
    os << ", \"ranks\": [";
    for (size_t r = 0; r < m.ranks.size(); ++r)
      os << (r ? ", " : "") << "{\"rank\": " << m.ranks[r].rank
         << ", \"step_time_s\": " << jsonNumber(m.ranks[r].stepSeconds)
         << ", \"memory_bytes\": " << m.ranks[r].memoryBytes << "}";
    os << "]";
  }
  os << "}";
  return os.str();
}

std::string toJsonLine(const EvalResult &r) {
  std::ostringstream os;
  os << "{\"step\": " << r.step << ", \"eval_loss\": " << jsonNumber(r.loss);
  if (!std::isnan(r.perplexity))
    os << ", \"eval_ppl\": "
       << (std::isfinite(r.perplexity) ? jsonNumber(r.perplexity) : "null");
  os << ", \"eval_samples\": " << r.samples << ", \"eval_tokens\": " << r.tokens
     << ", \"eval_time_s\": " << jsonNumber(r.seconds) << "}";
  return os.str();
}

std::string formatBytes(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), unit ? "%.1f %s" : "%.0f %s", value,
                units[unit]);
  return buffer;
}

Progress::Progress(bool quiet, int64_t firstStep, int64_t lastStep)
    : quiet_(quiet), terminal_(isatty(STDERR_FILENO)), firstStep_(firstStep),
      lastStep_(lastStep),
      every_(std::max<int64_t>(1, (lastStep - firstStep + 1) / 20)) {}

void Progress::update(const StepMetrics &m) {
  if (quiet_)
    return;
  const double rate = m.stepSeconds > 0 ? m.samples / m.stepSeconds : 0;
  const double tokenRate = m.stepSeconds > 0 ? m.tokens / m.stepSeconds : 0;
  char loss[64];
  if (std::isnan(m.loss))
    std::snprintf(loss, sizeof(loss), "-");
  else
    std::snprintf(loss, sizeof(loss), "%.4f", m.loss);
  if (!std::isnan(evalLoss_))
    std::snprintf(loss + std::strlen(loss), sizeof(loss) - std::strlen(loss),
                  "  eval_loss %.4f", evalLoss_);
  if (!terminal_) {
    if ((m.step - firstStep_ + 1) % every_ != 0 && m.step != lastStep_)
      return;
    std::fprintf(stderr,
                 "step %lld/%lld  loss %s  lr %.3g  epsilon %.4g  %.0f "
                 "samples/s  %.0f tokens/s\n",
                 static_cast<long long>(m.step),
                 static_cast<long long>(lastStep_), loss, m.lr, m.epsilon, rate,
                 tokenRate);
    return;
  }
  // Redraw at most ten times a second, and always for the last step; ESC [K
  // clears what a longer previous line left.
  if (m.step != lastStep_ && lastDraw_ >= 0 && m.wallSeconds - lastDraw_ < 0.1)
    return;
  lastDraw_ = m.wallSeconds;
  const int width = 24;
  const double done =
      lastStep_ > firstStep_ - 1
          ? double(m.step - firstStep_ + 1) / double(lastStep_ - firstStep_ + 1)
          : 1.0;
  const int filled = static_cast<int>(done * width);
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr,
               "\r[%s] %lld/%lld  loss %s  eps %.3g  %.0f samples/s  %.0f "
               "tok/s\x1b[K",
               bar.c_str(), static_cast<long long>(m.step),
               static_cast<long long>(lastStep_), loss, m.epsilon, rate,
               tokenRate);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::evaluation(const EvalResult &r) {
  evalLoss_ = r.loss;
  if (quiet_)
    return;
  finish();
  char ppl[48] = "";
  if (!std::isnan(r.perplexity))
    std::snprintf(ppl, sizeof ppl, "  eval_ppl %.4f", r.perplexity);
  std::fprintf(stderr,
               "eval at step %lld  eval_loss %.6f%s  (%lld samples, %lld "
               "tokens, %.2f s)\n",
               static_cast<long long>(r.step), r.loss, ppl,
               static_cast<long long>(r.samples),
               static_cast<long long>(r.tokens), r.seconds);
}

void Progress::finish() {
  if (drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

} // namespace dprt::driver
