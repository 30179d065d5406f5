//===- Accountant.cpp - RDP accountant of the sampled Gaussian ------------===//
//
// Mirrors dp_accounting/rdp/rdp_privacy_accountant.py (dp-accounting 0.6.0):
// same orders, same terms in the same order, same stopping rules, so that
// the results agree to rounding. Where that file calls scipy, the C library
// function with the same definition is used (lgamma for gammaln; log erfc
// from erfc and its asymptotic series for log_ndtr).
//
//===----------------------------------------------------------------------===//

#include "privacy/Accountant.h"
#include "privacy/PldAccountant.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>

namespace dprt::privacy {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// _MAX_STEPS_LOG_A_FRAC.
constexpr int kMaxFractionalTerms = 1000;
} // namespace

const std::vector<double> &defaultRdpOrders() {
  static const std::vector<double> orders = [] {
    std::vector<double> result;
    for (int x = 1; x < 100; ++x)
      result.push_back(1.0 + x / 10.0);
    for (int order = 11; order < 64; ++order)
      result.push_back(order);
    for (double order : {128.0, 256.0, 512.0, 1024.0})
      result.push_back(order);
    return result;
  }();
  return orders;
}

double logAdd(double logX, double logY) {
  double a = std::min(logX, logY), b = std::max(logX, logY);
  if (a == -kInf)
    return b;
  // exp(a) + exp(b) = (exp(a - b) + 1) exp(b).
  return std::log1p(std::exp(a - b)) + b;
}

double logErfc(double x) {
  // erfc(x) = 2 - erfc(-x): near 2, log1p keeps the small erfc(-x) exact.
  if (x < -4.0)
    return std::log(2.0) + std::log1p(-0.5 * std::erfc(-x));
  // erfc keeps full relative accuracy down to its underflow near x = 26.5;
  // stop well before, where the asymptotic series below has converged to
  // rounding.
  if (x < 14.0)
    return std::log(std::erfc(x));
  // erfc(x) = exp(-x^2) / (x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n.
  double y = 1.0 / (2.0 * x * x);
  double term = 1.0, sum = 1.0;
  for (int n = 1; n < 60 && std::fabs(term) > 1e-17; ++n) {
    term *= -(2.0 * n - 1.0) * y;
    sum += term;
  }
  const double kLogSqrtPi = 0.57236494292470008707;
  return -x * x - std::log(x) - kLogSqrtPi + std::log(sum);
}

double logBinomial(double n, double k) {
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}

double logAInteger(double q, double sigma, int64_t alpha) {
  double logA = -kInf;
  double logQ = std::log(q), log1mQ = std::log1p(-q);
  double twoSigmaSquared = 2 * (sigma * sigma);
  for (int64_t i = 0; i <= alpha; ++i) {
    double logCoef =
        logBinomial(static_cast<double>(alpha), static_cast<double>(i)) +
        i * logQ + (alpha - i) * log1mQ;
    double s = logCoef + static_cast<double>(i * i - i) / twoSigmaSquared;
    logA = logAdd(logA, s);
  }
  return logA;
}

double logAFractional(double q, double sigma, double alpha) {
  // A_alpha = integral over (-inf, z0] + integral over [z0, inf), each a
  // series of binomial terms times Gaussian tails, where z0 is the point at
  // which the two mixture components' densities cross.
  double logA0 = -kInf, logA1 = -kInf;
  double sigmaSquared = sigma * sigma;
  double z0 = sigmaSquared * std::log(1 / q - 1) + 0.5;
  double logQ = std::log(q), log1mQ = std::log1p(-q);
  double tailScale = std::sqrt(2.0) * sigma;
  double lastS0 = -kInf, lastS1 = -kInf;
  for (int i = 0; i < kMaxFractionalTerms; ++i) {
    double logCoef = logBinomial(alpha, i);
    double j = alpha - i;

    double logT0 = logCoef + i * logQ + j * log1mQ;
    double logT1 = logCoef + j * logQ + i * log1mQ;

    double logE0 = std::log(0.5) + logErfc((i - z0) / tailScale);
    double logE1 = std::log(0.5) + logErfc((z0 - j) / tailScale);

    double logS0 =
        logT0 + static_cast<double>(i * i - i) / (2 * sigmaSquared) + logE0;
    double logS1 = logT1 + (j * j - j) / (2 * sigmaSquared) + logE1;

    logA0 = logAdd(logA0, logS0);
    logA1 = logAdd(logA1, logS1);
    double total = logAdd(logA0, logA1);

    // Both halves' terms decreasing and negligible (e^-30) against the sum.
    if (logS0 < lastS0 && logS1 < lastS1 && std::max(logS0, logS1) < total - 30)
      return total;
    lastS0 = logS0;
    lastS1 = logS1;
  }
  return kInf;
}

double rdpSampledGaussian(double q, double sigma, double order) {
  assert(q >= 0 && q <= 1 && "sampling rate outside [0, 1]");
  assert(sigma >= 0 && "negative noise multiplier");
  assert(order > 1 && "RDP order must exceed 1");
  if (q == 0)
    return 0;
  if (std::isinf(order) || sigma == 0)
    return kInf;
  if (q == 1.0)
    return order / (2 * (sigma * sigma));
  double logA = order == std::floor(order)
                    ? logAInteger(q, sigma, static_cast<int64_t>(order))
                    : logAFractional(q, sigma, order);
  return logA / (order - 1);
}

std::vector<double> rdpSampledGaussian(double q, double sigma,
                                       const std::vector<double> &orders) {
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double order : orders)
    rdp.push_back(rdpSampledGaussian(q, sigma, order));
  return rdp;
}

std::vector<double>
composeRdp(const std::vector<SampledGaussianSegment> &segments,
           const std::vector<double> &orders) {
  std::vector<double> total(orders.size(), 0.0);
  for (const SampledGaussianSegment &segment : segments) {
    assert(segment.steps >= 0 && "negative step count");
    // Zero steps contribute nothing, even where one step's RDP is infinite.
    if (segment.steps == 0)
      continue;
    std::vector<double> step =
        rdpSampledGaussian(segment.q, segment.sigma, orders);
    for (size_t k = 0; k < orders.size(); ++k)
      total[k] += static_cast<double>(segment.steps) * step[k];
  }
  return total;
}

EpsilonAndOrder epsilonFromRdp(const std::vector<double> &orders,
                               const std::vector<double> &rdp, double delta) {
  assert(delta > 0 && "delta must be positive");
  assert(orders.size() == rdp.size() && !orders.empty());
  // First minimum wins, as numpy's argmin.
  double bestEpsilon = kInf, bestOrder = orders.front();
  bool first = true;
  for (size_t k = 0; k < orders.size(); ++k) {
    double a = orders[k], r = rdp[k];
    assert(a >= 1 && "RDP order below 1");
    double eps;
    if (r < 0) {
      // Only rounding makes RDP negative (dp-accounting logs a warning and
      // also returns 0).
      eps = 0;
    } else if (delta * delta + std::expm1(-r) > 0) {
      // delta <= sqrt(1 - exp(-KL)): (0, delta)-DP from the KL bound.
      eps = 0;
    } else if (a > 1.01) {
      // Balle et al. 2020, Proposition 12; unstable as a -> 1, hence 1.01.
      eps = r + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    } else {
      eps = kInf;
    }
    if (first || eps < bestEpsilon) {
      bestEpsilon = eps;
      bestOrder = a;
      first = false;
    }
  }
  return {std::max(0.0, bestEpsilon), bestOrder};
}

double deltaFromRdp(const std::vector<double> &orders,
                    const std::vector<double> &rdp, double epsilon) {
  assert(epsilon >= 0 && "epsilon must be non-negative");
  assert(orders.size() == rdp.size() && !orders.empty());
  double bestLogDelta = kInf;
  for (size_t k = 0; k < orders.size(); ++k) {
    double a = orders[k], r = rdp[k];
    // Negative RDP comes only from rounding; dp-accounting returns 0 too.
    double logDelta = r <= 0 ? -kInf : 0.5 * std::log1p(-std::exp(-r));
    if (a > 1.01)
      logDelta = std::min(
          logDelta, (a - 1) * (r - epsilon + std::log1p(-1 / a)) - std::log(a));
    bestLogDelta = std::min(bestLogDelta, logDelta);
  }
  return std::min(std::exp(bestLogDelta), 1.0);
}

EpsilonAndOrder epsilon(double q, double sigma, int64_t steps, double delta) {
  return epsilon(std::vector<SampledGaussianSegment>{{q, sigma, steps}}, delta);
}

EpsilonAndOrder epsilon(const std::vector<SampledGaussianSegment> &segments,
                        double delta) {
  const std::vector<double> &orders = defaultRdpOrders();
  return epsilonFromRdp(orders, composeRdp(segments, orders), delta);
}

std::string checkEpsilonRequest(double q, double sigma, double steps,
                                double delta) {
  std::ostringstream os;
  if (!std::isfinite(q) || q < 0 || q > 1)
    os << "sampling rate q must be in [0, 1], got " << q;
  else if (!std::isfinite(sigma) || sigma < 0)
    os << "noise multiplier sigma must be finite and >= 0, got " << sigma;
  else if (!std::isfinite(steps) || steps < 0 || steps != std::floor(steps))
    os << "steps must be a whole number >= 0, got " << steps;
  else if (!std::isfinite(delta) || delta <= 0 || delta >= 1)
    os << "delta must be in (0, 1), got " << delta;
  return os.str();
}

const char *accountantName(AccountantKind kind) {
  switch (kind) {
  case AccountantKind::Rdp:
    return "rdp";
  case AccountantKind::Pld:
    return "pld";
  }
  return "unknown";
}

std::optional<AccountantKind> parseAccountantKind(const std::string &name) {
  for (AccountantKind kind : {AccountantKind::Rdp, AccountantKind::Pld})
    if (name == accountantName(kind))
      return kind;
  return std::nullopt;
}

EpsilonAndOrder epsilon(AccountantKind kind,
                        const std::vector<SampledGaussianSegment> &segments,
                        double delta) {
  if (kind == AccountantKind::Pld)
    return pldEpsilon(segments, delta);
  return epsilon(segments, delta);
}

EpsilonAndOrder epsilon(AccountantKind kind, double q, double sigma,
                        int64_t steps, double delta) {
  return epsilon(kind, std::vector<SampledGaussianSegment>{{q, sigma, steps}},
                 delta);
}

SigmaCalibration calibrateSigma(AccountantKind kind, double targetEpsilon,
                                double delta, double q, int64_t steps,
                                double relativeTolerance) {
  SigmaCalibration result;
  std::ostringstream error;
  if (!std::isfinite(targetEpsilon) || targetEpsilon <= 0)
    error << "target epsilon must be finite and > 0, got " << targetEpsilon;
  else if (!std::isfinite(delta) || delta <= 0 || delta >= 1)
    error << "delta must be in (0, 1), got " << delta;
  else if (!std::isfinite(q) || q <= 0 || q > 1)
    error << "sampling rate q must be in (0, 1], got " << q;
  else if (steps < 1)
    error << "steps must be >= 1, got " << steps;
  else if (kind == AccountantKind::Pld && steps > kMaxPldSteps)
    error << "the PLD accountant composes at most " << kMaxPldSteps
          << " steps, got " << steps;
  else if (!(relativeTolerance > 0 && relativeTolerance < 0.5))
    error << "relative tolerance must be in (0, 0.5), got "
          << relativeTolerance;
  if (!error.str().empty()) {
    result.error = error.str();
    return result;
  }

  // Epsilon does not increase with sigma (each order's RDP does not, nor
  // does the hockey-stick divergence of the PLD), so the feasible set is
  // [sigma*, inf). Bracket sigma* in [lo, hi] with epsilon(lo) > target >=
  // epsilon(hi), then bisect geometrically.
  auto epsilonAt = [&](double sigma) {
    return epsilon(kind, q, sigma, steps, delta);
  };
  // The bracket search starts at 1, or for PLD at the RDP answer: a PLD
  // epsilon costs a composition (tens of milliseconds), an RDP one a
  // fraction, and RDP's bound is looser, so its sigma is just above the PLD
  // one. The noise levels probed on the way then stay near the answer,
  // where the composed distribution is narrow (cheap).
  double hi = 1.0;
  if (kind == AccountantKind::Pld) {
    SigmaCalibration rdp = calibrateSigma(AccountantKind::Rdp, targetEpsilon,
                                          delta, q, steps, 1e-3);
    if (rdp.ok())
      hi = rdp.sigma;
  }
  EpsilonAndOrder atHi = epsilonAt(hi);
  double lo;
  if (atHi.epsilon > targetEpsilon) {
    do {
      lo = hi;
      hi *= 2;
      if (hi > kMaxCalibratedSigma) {
        EpsilonAndOrder atMax = epsilonAt(kMaxCalibratedSigma);
        if (atMax.epsilon > targetEpsilon) {
          error << "impossible: target epsilon " << targetEpsilon
                << " needs a noise multiplier above " << kMaxCalibratedSigma
                << " (epsilon there is " << atMax.epsilon << " for q = " << q
                << ", steps = " << steps << ", delta = " << delta << ")";
          result.error = error.str();
          return result;
        }
        hi = kMaxCalibratedSigma;
        atHi = atMax;
        break;
      }
      atHi = epsilonAt(hi);
    } while (atHi.epsilon > targetEpsilon);
  } else {
    lo = hi;
    while (true) {
      lo /= 2;
      if (lo < kMinCalibratedSigma) {
        EpsilonAndOrder atMin = epsilonAt(kMinCalibratedSigma);
        if (atMin.epsilon <= targetEpsilon) {
          error << "target epsilon " << targetEpsilon
                << " is met with a noise multiplier below "
                << kMinCalibratedSigma << " (epsilon " << atMin.epsilon
                << " at sigma = " << kMinCalibratedSigma
                << "); noise this small is outside the calibrated range";
          result.error = error.str();
          return result;
        }
        lo = kMinCalibratedSigma;
        break;
      }
      EpsilonAndOrder atLo = epsilonAt(lo);
      if (atLo.epsilon > targetEpsilon)
        break;
      hi = lo;
      atHi = atLo;
    }
  }

  while (hi / lo - 1 > relativeTolerance) {
    double mid = std::sqrt(lo * hi);
    EpsilonAndOrder atMid = epsilonAt(mid);
    if (atMid.epsilon > targetEpsilon) {
      lo = mid;
    } else {
      hi = mid;
      atHi = atMid;
    }
  }
  result.sigma = hi;
  result.epsilon = atHi.epsilon;
  result.order = atHi.order;
  result.interval = atHi.interval;
  return result;
}

SigmaCalibration calibrateSigma(double targetEpsilon, double delta, double q,
                                int64_t steps, double relativeTolerance) {
  return calibrateSigma(AccountantKind::Rdp, targetEpsilon, delta, q, steps,
                        relativeTolerance);
}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {}

void RdpAccountant::compose(double q, double sigma, int64_t steps) {
  assert(steps >= 0 && "negative step count");
  if (steps == 0)
    return;
  if (q != cachedQ_ || sigma != cachedSigma_) {
    cachedStepRdp_ = rdpSampledGaussian(q, sigma, orders_);
    cachedQ_ = q;
    cachedSigma_ = sigma;
  }
  for (size_t k = 0; k < orders_.size(); ++k)
    rdp_[k] += static_cast<double>(steps) * cachedStepRdp_[k];
  if (!segments_.empty() && segments_.back().q == q &&
      segments_.back().sigma == sigma)
    segments_.back().steps += steps;
  else
    segments_.push_back({q, sigma, steps});
}

EpsilonAndOrder RdpAccountant::epsilon(double delta) const {
  return epsilonFromRdp(orders_, rdp_, delta);
}

double RdpAccountant::delta(double epsilon) const {
  return deltaFromRdp(orders_, rdp_, epsilon);
}

std::unique_ptr<PrivacyAccountant> RdpAccountant::clone() const {
  return std::make_unique<RdpAccountant>(*this);
}

int64_t PrivacyAccountant::steps() const {
  int64_t total = 0;
  for (const SampledGaussianSegment &segment : segments())
    total += segment.steps;
  return total;
}

std::unique_ptr<PrivacyAccountant> makeAccountant(AccountantKind kind) {
  if (kind == AccountantKind::Pld)
    return std::make_unique<PldAccountant>();
  return std::make_unique<RdpAccountant>();
}

} // namespace dprt::privacy
