//===- PrivacyReport.h - What a training run guarantees ---------*- C++ -*-===//
//
// The privacy parameters of a run and the (epsilon, delta) they give, as JSON
// for machines and as a text block for people. `dpc --report` prints one
// before training; the trained binary writes one at the end.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PRIVACY_PRIVACYREPORT_H
#define DPRT_PRIVACY_PRIVACYREPORT_H

#include <cstdint>
#include <ostream>
#include <string>

namespace dprt::privacy {

struct PrivacyReport {
  /// sigma: the noise standard deviation is sigma * maxGradNorm.
  double noiseMultiplier = 0;
  /// C: every per-sample gradient is clipped to norm <= C.
  double maxGradNorm = 0;
  /// q: the Poisson sampling rate (expected batch / dataset size).
  double samplingRate = 0;
  int64_t steps = 0;
  double delta = 0;
  double epsilon = 0;
  /// The RDP order at which epsilon is attained (RDP accountant).
  double rdpOrder = 0;
  /// The loss grid spacing of the PLD accountant (0 for RDP).
  double pldInterval = 0;
  /// "poisson" or "shuffle".
  std::string sampler = "poisson";
  /// "rdp" or "pld" (accountantName).
  std::string accountant = "rdp";
  /// "philox" or "chacha20" ("none" for a run without noise).
  std::string noiseGenerator = "philox";
  /// false: the program adds no noise (noise = #dp.none), so the run is not
  /// differentially private; epsilon is infinite and the rest is unused.
  bool isPrivate = true;
  /// User-level DP: one user, at most this many of its records a step, is
  /// the privacy unit (q and the accountant count users); 0: one record.
  int64_t userRecords = 0;

  /// "one record (sample)" or "one user (at most k records)".
  std::string unitDescription() const;
  /// True when the accountant's assumption (Poisson sampling) does not hold.
  bool samplerMismatch() const { return sampler != "poisson"; }
};

/// A report whose epsilon and order come from the RDP accountant for
/// `steps` steps at (samplingRate, noiseMultiplier).
PrivacyReport makePrivacyReport(double noiseMultiplier, double maxGradNorm,
                                double samplingRate, int64_t steps,
                                double delta, std::string sampler = "poisson",
                                std::string noiseGenerator = "philox");

/// The note printed when the sampler is not Poisson.
const char *shuffleSamplingNote();

/// A JSON number that reads back to the same double (%.17g); JSON has no
/// infinity or NaN, so those are written as null.
std::string jsonNumber(double value);

/// A JSON string literal, with quotes and escapes.
std::string jsonString(const std::string &value);

/// The report as one JSON object on one line, keys:
/// accountant, sampler, noise_generator, noise_multiplier, max_grad_norm,
/// sampling_rate, steps, delta, epsilon (null when infinite), rdp_order,
/// pld_interval (only for the PLD accountant), private (only when false: a
/// run without noise), and note (only when the sampler is not Poisson).
std::string toJson(const PrivacyReport &report);

/// The report as an indented block of text, ending with a newline.
void printPrivacyReport(std::ostream &os, const PrivacyReport &report);

} // namespace dprt::privacy

#endif // DPRT_PRIVACY_PRIVACYREPORT_H
