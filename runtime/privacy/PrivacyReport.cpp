//===- PrivacyReport.cpp - What a training run guarantees -----------------===//

#include "privacy/PrivacyReport.h"

#include "privacy/Accountant.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace dprt::privacy {

PrivacyReport makePrivacyReport(double noiseMultiplier, double maxGradNorm,
                                double samplingRate, int64_t steps,
                                double delta, std::string sampler,
                                std::string noiseGenerator) {
  PrivacyReport report;
  report.noiseMultiplier = noiseMultiplier;
  report.maxGradNorm = maxGradNorm;
  report.samplingRate = samplingRate;
  report.steps = steps;
  report.delta = delta;
  report.sampler = std::move(sampler);
  report.noiseGenerator = std::move(noiseGenerator);
  EpsilonAndOrder eps = epsilon(samplingRate, noiseMultiplier, steps, delta);
  report.epsilon = eps.epsilon;
  report.rdpOrder = eps.order;
  return report;
}

const char *shuffleSamplingNote() {
  return "the RDP bound assumes Poisson sampling; this run used shuffling";
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  return buffer;
}

std::string jsonString(const std::string &value) {
  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
        out += escaped;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

std::string PrivacyReport::unitDescription() const {
  if (userRecords == 0)
    return "one record (sample)";
  return "one user (at most " + std::to_string(userRecords) + " record" +
         (userRecords == 1 ? "" : "s") + ")";
}

std::string toJson(const PrivacyReport &report) {
  std::ostringstream os;
  os << "{\"accountant\": " << jsonString(report.accountant)
     << ", \"sampler\": " << jsonString(report.sampler)
     << ", \"noise_generator\": " << jsonString(report.noiseGenerator)
     << ", \"noise_multiplier\": " << jsonNumber(report.noiseMultiplier)
     << ", \"max_grad_norm\": " << jsonNumber(report.maxGradNorm)
     << ", \"sampling_rate\": " << jsonNumber(report.samplingRate)
     << ", \"steps\": " << report.steps
     << ", \"delta\": " << jsonNumber(report.delta)
     << ", \"epsilon\": " << jsonNumber(report.epsilon)
     << ", \"rdp_order\": " << jsonNumber(report.rdpOrder);
  if (report.userRecords > 0)
    os << ", \"privacy_unit\": " << jsonString(report.unitDescription())
       << ", \"max_records_per_user\": " << report.userRecords;
  if (!report.isPrivate)
    os << ", \"private\": false";
  if (report.accountant == "pld")
    os << ", \"pld_interval\": " << jsonNumber(report.pldInterval);
  if (report.samplerMismatch())
    os << ", \"note\": " << jsonString(shuffleSamplingNote());
  os << "}";
  return os.str();
}

void printPrivacyReport(std::ostream &os, const PrivacyReport &report) {
  auto number = [](double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.6g", value);
    return std::string(buffer);
  };
  if (!report.isPrivate) {
    os << "privacy report\n"
       << "  guarantee         none: this run is NOT differentially private "
          "(no clipping, no noise: compiled with clip = #dp.clip<none>, "
          "noise = #dp.none)\n"
       << "  sampler           " << report.sampler
       << ", rate q = " << number(report.samplingRate) << "\n"
       << "  steps             " << report.steps << "\n";
    return;
  }
  os << "privacy report\n"
     << "  guarantee         (epsilon = " << number(report.epsilon)
     << ", delta = " << number(report.delta) << ")-DP, "
     << report.unitDescription() << " as the privacy unit\n"
     << "  accountant        " << report.accountant;
  if (report.accountant == "pld")
    os << " (privacy loss distribution of the sampled Gaussian, grid interval "
       << number(report.pldInterval) << ")\n";
  else
    os << " (sampled Gaussian, best order " << number(report.rdpOrder) << ")\n";
  os << "  sampler           " << report.sampler
     << ", rate q = " << number(report.samplingRate) << "\n"
     << "  steps             " << report.steps << "\n"
     << "  noise multiplier  sigma = " << number(report.noiseMultiplier)
     << " (noise std sigma * C = "
     << number(report.noiseMultiplier * report.maxGradNorm) << ", "
     << report.noiseGenerator << ")\n"
     << "  clipping bound    C = " << number(report.maxGradNorm) << "\n";
  if (report.samplerMismatch())
    os << "  note              " << shuffleSamplingNote() << "\n";
}

} // namespace dprt::privacy
