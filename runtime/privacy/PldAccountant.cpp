//===- PldAccountant.cpp - PLD accountant of the sampled Gaussian ---------===//
//
// Learned from dp_accounting/pld (dp-accounting 0.6.0): the same mechanism
// pair, truncation of the Gaussian tails, connect-the-dots grid and Chernoff
// window for the composition, written anew. Two differences that do not
// change the numbers beyond rounding: the connect-the-dots masses are computed
// per grid interval from the two measures' masses (nonnegative by
// construction) instead of from second differences of delta(eps), and both
// directions share one complex FFT (remove in the real part, add in the
// imaginary part).
//
//===----------------------------------------------------------------------===//

#include "privacy/PldAccountant.h"

#include "privacy/Fft.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <complex>
#include <limits>
#include <map>
#include <memory>
#include <utility>

namespace dprt::privacy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// dp-accounting's log_mass_truncation_bound: each Gaussian is cut where its
/// tail mass is exp(-50) / 2.
constexpr double kLogTruncatedTailMass = -50;

/// The standard normal quantile z < 0 with Phi(z) = exp(kLogTruncatedTailMass)
/// / 2, by Newton's method on log erfc: Phi(z) = erfc(-z / sqrt 2) / 2.
double truncationQuantile() {
  static const double z = [] {
    // Solve logErfc(y) = kLogTruncatedTailMass for y = -z / sqrt(2) > 0;
    // d/dy log erfc(y) = -(2 / sqrt(pi)) exp(-y^2 - log erfc(y)).
    double y = 6.0;
    for (int i = 0; i < 50; ++i) {
      double f = logErfc(y) - kLogTruncatedTailMass;
      double slope = -2.0 / std::sqrt(M_PI) * std::exp(-y * y - logErfc(y));
      double step = f / slope;
      y -= step;
      if (std::fabs(step) < 1e-15 * y)
        break;
    }
    return -std::sqrt(2.0) * y;
  }();
  return z;
}

/// log(1 - q + q exp(u)) for q in (0, 1], without overflow or cancellation.
double logMixtureRatio(double q, double u) {
  if (q == 1.0)
    return u;
  if (u > 0)
    return u + std::log(q + (1 - q) * std::exp(-u));
  return std::log1p(q * std::expm1(u));
}

/// The u with log(1 - q + q exp(u)) = value, for value > log(1 - q), given
/// log q.
double inverseLogMixtureRatio(double q, double logQ, double value) {
  if (q == 1.0)
    return value;
  // exp(u) = 1 + expm1(value) / q.
  if (value > 1)
    return value + std::log1p(-(1 - q) * std::exp(-value)) - logQ;
  return std::log1p(std::expm1(value) / q);
}

/// w * exp(e) for w >= 0, also where exp(e) overflows and w underflows.
double timesExp(double w, double e) {
  if (w <= 0)
    return 0;
  if (e < 700)
    return w * std::exp(e);
  return std::exp(e + std::log(w));
}

/// One direction of the add-or-remove pair, both measures mixtures of
/// N(0, sigma^2) and N(shift, sigma^2):
///   remove: P = (1-q) N_0 + q N_-1, Q = N_0,
///     L(x) = log(1 - q + q exp(-(x + 1/2) / sigma^2));
///   add:    P = N_0, Q = (1-q) N_0 + q N_1,
///     L(x) = -log(1 - q + q exp((x - 1/2) / sigma^2)).
/// In both, L decreases in x.
struct GaussianPair {
  GaussianPair(bool remove, double q, double sigma)
      : remove(remove), q(q), sigma(sigma), logQ(std::log(q)),
        log1mQ(std::log1p(-q)) {}

  bool remove;
  double q;
  double sigma;
  /// log q and log(1 - q), used at every grid point.
  double logQ, log1mQ;

  double shift() const { return remove ? -1.0 : 1.0; }
  /// The weights of N_shift in P and in Q.
  double pShiftWeight() const { return remove ? q : 0.0; }
  double qShiftWeight() const { return remove ? 0.0 : q; }

  double loss(double x) const {
    double s2 = sigma * sigma;
    if (remove)
      return logMixtureRatio(q, -(x + 0.5) / s2);
    return -logMixtureRatio(q, (x - 0.5) / s2);
  }

  /// The largest x with loss(x) >= epsilon: +inf when every x qualifies,
  /// -inf when none does.
  double inverseLoss(double epsilon) const {
    double s2 = sigma * sigma;
    if (remove) {
      // The remove loss exceeds log(1 - q) everywhere.
      if (q < 1 && epsilon <= log1mQ)
        return kInf;
      return -0.5 - s2 * inverseLogMixtureRatio(q, logQ, epsilon);
    }
    // The add loss stays below -log(1 - q).
    if (q < 1 && epsilon >= -log1mQ)
      return -kInf;
    return 0.5 + s2 * inverseLogMixtureRatio(q, logQ, -epsilon);
  }

  /// Where dp-accounting cuts the Gaussians (privacy_loss_tail): the tails
  /// of N_0 and N_shift beyond have mass <= exp(-50) / 2 each.
  std::pair<double, double> truncation() const {
    double z = truncationQuantile();
    double lo = sigma * z, hi = -sigma * z;
    if (remove)
      lo -= 1;
    else
      hi += 1;
    return {lo, hi};
  }
};

/// The mass of N(center, sigma^2) below or above x, whichever is smaller,
/// and on which side: masses of intervals come out as differences of two
/// tails on the same side (or one minus two tails), never of two numbers
/// near 1.
struct NormalTail {
  double mass;
  bool upper;

  static NormalTail at(double x, double center, double sigma) {
    if (x == kInf)
      return {0.0, true};
    if (x == -kInf)
      return {0.0, false};
    double u = (x - center) / sigma;
    return {0.5 * std::erfc(std::fabs(u) * M_SQRT1_2), u >= 0};
  }

  double below() const { return upper ? 1 - mass : mass; }
  double above() const { return upper ? mass : 1 - mass; }
};

/// The mass in (a, b] given the tails at a <= b.
double massBetween(const NormalTail &a, const NormalTail &b) {
  double m;
  if (a.upper && b.upper)
    m = a.mass - b.mass;
  else if (!a.upper && !b.upper)
    m = b.mass - a.mass;
  else if (!a.upper && b.upper)
    m = 1 - a.mass - b.mass;
  else
    m = 0; // a >= b: an empty interval
  return std::max(m, 0.0);
}

/// One direction of one step, discretized with connect-the-dots on the grid
/// k * interval for k in [kmin, kmax], where [kmin d, kmax d] covers the
/// losses of the truncated Gaussians.
DiscretePld discretize(const GaussianPair &pair, double interval) {
  auto [xLo, xHi] = pair.truncation();
  int64_t kmin = static_cast<int64_t>(std::floor(pair.loss(xHi) / interval));
  int64_t kmax = static_cast<int64_t>(std::ceil(pair.loss(xLo) / interval));
  DiscretePld pld;
  pld.interval = interval;
  pld.offset = kmin;
  pld.probabilities.assign(static_cast<size_t>(kmax - kmin + 1), 0.0);

  const double pShift = pair.pShiftWeight(), qShift = pair.qShiftWeight();
  const double shift = pair.shift(), sigma = pair.sigma;
  struct Point {
    double epsilon;
    NormalTail base, shifted;
    /// exp(epsilon), or +inf where that overflows (then timesExp is used).
    double expEpsilon;
  };
  auto pointAt = [&](int64_t k) {
    double epsilon = static_cast<double>(k) * interval;
    double x = pair.inverseLoss(epsilon);
    return Point{epsilon, NormalTail::at(x, 0.0, sigma),
                 NormalTail::at(x, shift, sigma),
                 epsilon < 700 ? std::exp(epsilon) : kInf};
  };
  auto qMassTimesExp = [](double v, const Point &point) {
    return point.expEpsilon < kInf ? v * point.expEpsilon
                                   : timesExp(v, point.epsilon);
  };
  auto pMass = [&](double base, double shifted) {
    return (1 - pShift) * base + pShift * shifted;
  };
  auto qMass = [&](double base, double shifted) {
    return (1 - qShift) * base + qShift * shifted;
  };

  // Splitting P-mass w with Q-mass v (loss in [e_k, e_k + d)) between the
  // grid points e_k and e_k + d so that both masses are kept:
  //   to e_k + d: (w - exp(e_k) v) / (1 - exp(-d)),
  //   to e_k:     (exp(e_k + d) v - w) / (exp(d) - 1).
  const double upDenominator = -std::expm1(-interval);
  const double downDenominator = std::expm1(interval);
  std::vector<double> &p = pld.probabilities;

  // The grid points below and above the current interval of losses; x
  // decreases as the loss grows, so the interval is (above.x, below.x].
  Point below = pointAt(kmin);
  // Losses below the lowest grid point (beyond the truncation): rounded up.
  p[0] += pMass(below.base.above(), below.shifted.above());
  for (int64_t k = kmin; k < kmax; ++k) {
    Point above = pointAt(k + 1);
    double base = massBetween(above.base, below.base);
    double shifted = massBetween(above.shifted, below.shifted);
    double w = pMass(base, shifted), v = qMass(base, shifted);
    if (w > 0) {
      double up = (w - qMassTimesExp(v, below)) / upDenominator;
      double down = (qMassTimesExp(v, above) - w) / downDenominator;
      p[k + 1 - kmin] += std::max(up, 0.0);
      p[k - kmin] += std::max(down, 0.0);
    }
    below = above;
  }
  // Losses at or above the top grid point e: kept at e with the Q-mass they
  // have there, the rest of their P-mass at +inf; the mass at +inf is then
  // exactly delta(e).
  double w = pMass(below.base.below(), below.shifted.below());
  double v = qMass(below.base.below(), below.shifted.below());
  double atTop = std::min(qMassTimesExp(v, below), w);
  p.back() += atTop;
  pld.infinityMass = w - atTop;
  return pld;
}

/// A distribution composed `steps` times, as one factor of a composition.
struct Factor {
  const DiscretePld *pld;
  int64_t steps;
};

/// Masses at evenly spaced positions first + spacing * i (in grid points).
struct MassProfile {
  const double *masses;
  size_t size;
  double first, spacing;
};

/// K(mu) = log sum_i m_i exp(mu s x_i) and its derivative s E_mu[x] (the
/// mean under the tilted distribution), for the sign s = +1 or -1 and mu > 0
/// per grid point. Summed by Horner's rule from the end where the exponent
/// is smallest, relative to the largest, so that nothing overflows.
std::pair<double, double> cumulant(const MassProfile &profile, double mu,
                                   double sign) {
  const double factor = std::exp(-mu * profile.spacing);
  const double *m = profile.masses;
  const size_t n = profile.size;
  auto position = [&](size_t i) {
    return profile.first + profile.spacing * static_cast<double>(i);
  };
  double a = 0, b = 0;
  if (sign > 0) {
    for (size_t i = 0; i < n; ++i) {
      a = a * factor + m[i];
      b = b * factor + position(i) * m[i];
    }
    return {mu * position(n - 1) + std::log(a), b / a};
  }
  for (size_t i = n; i-- > 0;) {
    a = a * factor + m[i];
    b = b * factor + position(i) * m[i];
  }
  return {-mu * position(0) + std::log(a), -b / a};
}

/// The smallest u such that, by the Chernoff bound
///   P[s S >= u] <= exp(K(mu) - mu u),  K(mu) = sum_f steps_f K_f(mu),
/// the composition S (in grid points relative to the factors' offsets) has
/// P[s S >= u] <= tailMass / 2. The best mu solves mu K'(mu) - K(mu) = c
/// (c = log(2 / tailMass)); the left side grows with mu, so bisection on
/// log mu finds it. Any mu gives a valid bound, the best one only the
/// narrowest window: the search runs on the distributions summed into at
/// most 4096 blocks (cheap, nearly the same K), the bound itself on the
/// distributions.
double chernoffBound(const std::vector<Factor> &factors, double sign,
                     double tailMass) {
  const double c = std::log(2 / tailMass);
  constexpr size_t kBlocks = 4096;
  std::vector<std::vector<double>> blockMasses;
  std::vector<MassProfile> exact, coarse;
  for (const Factor &f : factors) {
    const std::vector<double> &p = f.pld->probabilities;
    exact.push_back({p.data(), p.size(), 0.0, 1.0});
    size_t block = (p.size() + kBlocks - 1) / kBlocks;
    std::vector<double> &sums = blockMasses.emplace_back();
    for (size_t i = 0; i < p.size(); i += block) {
      double sum = 0;
      for (size_t j = i; j < std::min(i + block, p.size()); ++j)
        sum += p[j];
      sums.push_back(sum);
    }
  }
  for (size_t f = 0; f < factors.size(); ++f) {
    size_t n = factors[f].pld->probabilities.size();
    double block = static_cast<double>((n + kBlocks - 1) / kBlocks);
    coarse.push_back({blockMasses[f].data(), blockMasses[f].size(),
                      0.5 * (block - 1), block});
  }
  auto evaluate = [&](const std::vector<MassProfile> &profiles, double mu) {
    double k = 0, slope = 0;
    for (size_t f = 0; f < factors.size(); ++f) {
      auto [kf, slopeF] = cumulant(profiles[f], mu, sign);
      k += static_cast<double>(factors[f].steps) * kf;
      slope += static_cast<double>(factors[f].steps) * slopeF;
    }
    return std::pair<double, double>{k, mu * slope - k - c};
  };
  // 20 halvings of log mu's range (31) leave mu within 0.003 %.
  double logLo = std::log(1e-12), logHi = std::log(50.0);
  for (int i = 0; i < 20; ++i) {
    double mid = 0.5 * (logLo + logHi);
    if (evaluate(coarse, std::exp(mid)).second < 0)
      logLo = mid;
    else
      logHi = mid;
  }
  double best = kInf;
  for (double logMu : {logLo, logHi}) {
    double mu = std::exp(logMu);
    best = std::min(best, (evaluate(exact, mu).first + c) / mu);
  }
  return best;
}

/// The range [lo, hi] of the composition's grid indices (relative to the
/// sum of the factors' offsets) outside which each tail has mass <= tailMass
/// / 2; whole numbers, as doubles (they may exceed int64_t before the grid is
/// coarsened).
std::pair<double, double> chernoffWindow(const std::vector<Factor> &factors,
                                         double tailMass) {
  double top = 0;
  for (const Factor &f : factors)
    top += static_cast<double>(f.steps) *
           static_cast<double>(f.pld->probabilities.size() - 1);
  double hi = std::min(top, std::ceil(chernoffBound(factors, 1.0, tailMass)));
  double lo = std::max(0.0, -std::ceil(chernoffBound(factors, -1.0, tailMass)));
  return {lo, std::max(hi, lo)};
}

/// z^n by repeated squaring (n >= 1); 0 when |z|^n < exp(-700).
std::complex<double> power(std::complex<double> z, int64_t n,
                           double negligibleNorm) {
  double re = z.real(), im = z.imag();
  if (re * re + im * im < negligibleNorm)
    return 0.0;
  double rr = 1, ri = 0;
  while (true) {
    if (n & 1) {
      double t = rr * re - ri * im;
      ri = rr * im + ri * re;
      rr = t;
    }
    n >>= 1;
    if (n == 0)
      break;
    double t = re * re - im * im;
    im = 2 * re * im;
    re = t;
  }
  return {rr, ri};
}

size_t nextPowerOfTwo(int64_t n) {
  size_t p = 1;
  while (p < static_cast<size_t>(n))
    p *= 2;
  return p;
}

/// The transform of that length, kept per thread: a calibration composes
/// dozens of times at nearly the same length.
const Fft &fftOfLength(size_t size) {
  thread_local std::unique_ptr<Fft> cached;
  if (!cached || cached->size() != size)
    cached = std::make_unique<Fft>(size);
  return *cached;
}

/// The composition of the factors' remove and add distributions, each
/// windowed to its Chernoff range, on an FFT of length `size`.
PldPair composeFactors(const std::vector<Factor> &removeFactors,
                       const std::vector<Factor> &addFactors,
                       std::pair<int64_t, int64_t> removeWindow,
                       std::pair<int64_t, int64_t> addWindow, size_t size,
                       double tailMass) {
  const Fft &fft = fftOfLength(size);
  const size_t mask = size - 1;
  std::vector<std::complex<double>> total(size), scratch;
  for (size_t f = 0; f < removeFactors.size(); ++f) {
    std::vector<std::complex<double>> &z = f == 0 ? total : scratch;
    z.assign(size, 0.0);
    // Folding modulo the length is exact for a cyclic convolution; the
    // window is no longer than the length, so no two kept indices collide.
    const std::vector<double> &pr = removeFactors[f].pld->probabilities;
    const std::vector<double> &pa = addFactors[f].pld->probabilities;
    for (size_t i = 0; i < pr.size(); ++i)
      z[i & mask] += std::complex<double>(pr[i], 0.0);
    for (size_t i = 0; i < pa.size(); ++i)
      z[i & mask] += std::complex<double>(0.0, pa[i]);
    fft.forward(z.data());

    const int64_t steps = removeFactors[f].steps;
    const double negligible = std::exp(-1400.0 / static_cast<double>(steps));
    const std::complex<double> i1(0.0, 1.0);
    // With z = x + i y for real x, y: X_k = (Z_k + conj Z_{N-k}) / 2,
    // Y_k = (Z_k - conj Z_{N-k}) / (2i); X_{N-k} = conj X_k, same for Y.
    // Positions p and partner(p) hold frequencies k and N - k.
    auto visit = [&](size_t p, size_t partner) {
      std::complex<double> zp = z[p], zq = z[partner];
      std::complex<double> x = 0.5 * (zp + std::conj(zq));
      std::complex<double> y = -0.5 * i1 * (zp - std::conj(zq));
      std::complex<double> xt = power(x, steps, negligible);
      std::complex<double> yt = power(y, steps, negligible);
      if (f > 0) {
        std::complex<double> tp = total[p], tq = total[partner];
        xt *= 0.5 * (tp + std::conj(tq));
        yt *= -0.5 * i1 * (tp - std::conj(tq));
      }
      total[p] = xt + i1 * yt;
      total[partner] = std::conj(xt) + i1 * std::conj(yt);
    };
    visit(0, 0);
    if (size > 1)
      visit(1, 1);
    for (size_t block = 2; block < size; block *= 2)
      for (size_t p = block; p < block + block / 2; ++p)
        visit(p, Fft::partnerPosition(p));
  }
  fft.inverse(total.data());

  auto extract = [&](const std::vector<Factor> &factors,
                     std::pair<int64_t, int64_t> window, bool imaginary) {
    DiscretePld pld;
    pld.interval = factors.front().pld->interval;
    double logKept = 0;
    int64_t offset = 0;
    for (const Factor &f : factors) {
      offset += f.steps * f.pld->offset;
      logKept +=
          static_cast<double>(f.steps) * std::log1p(-f.pld->infinityMass);
    }
    pld.offset = offset + window.first;
    pld.probabilities.resize(
        static_cast<size_t>(window.second - window.first + 1));
    const double scale = 1.0 / static_cast<double>(size);
    for (size_t j = 0; j < pld.probabilities.size(); ++j) {
      std::complex<double> v =
          total[(static_cast<size_t>(window.first) + j) & mask];
      // Rounding (of the transforms, and of the powers: a relative 1e-16
      // per step in each coefficient) leaves tiny values of either sign
      // where the mass is ~0; negative ones are dropped (more mass is the
      // safe side).
      pld.probabilities[j] =
          std::max(scale * (imaginary ? v.imag() : v.real()), 0.0);
    }
    // Mass at +inf: a step's +inf mass makes the composition's infinite.
    // The tails outside the window (<= tailMass / 2 each) fold into the
    // window's entries, which only adds mass; the upper one, whose losses
    // are the largest, is also counted at +inf by adding tailMass.
    pld.infinityMass = std::min(1.0, -std::expm1(logKept) + tailMass);
    return pld;
  };
  PldPair result;
  result.remove = extract(removeFactors, removeWindow, false);
  result.add = extract(addFactors, addWindow, true);
  return result;
}

PldPair nonPrivatePld(double interval) {
  PldPair pair;
  for (DiscretePld *pld : {&pair.remove, &pair.add}) {
    pld->interval = interval;
    pld->infinityMass = 1;
  }
  return pair;
}

PldPair identityPld(double interval) {
  PldPair pair;
  for (DiscretePld *pld : {&pair.remove, &pair.add}) {
    pld->interval = interval;
    pld->probabilities = {1.0};
  }
  return pair;
}

} // namespace

double DiscretePld::deltaForEpsilon(double epsilon) const {
  double delta = infinityMass;
  for (size_t j = probabilities.size(); j-- > 0;) {
    double l = loss(j);
    if (l <= epsilon)
      break;
    delta += probabilities[j] * -std::expm1(epsilon - l);
  }
  return std::min(delta, 1.0);
}

double DiscretePld::epsilonForDelta(double delta) const {
  if (infinityMass > delta)
    return kInf;
  // Going down the grid: above = P-mass at losses > l_j (with +inf), and
  // belowRatio = sum_{i > j} p_i exp(l_j - l_i), so that for eps in
  // [l_j, l_{j+1}], delta(eps) = above - exp(eps - l_j) belowRatio.
  const double decay = std::exp(-interval);
  double above = infinityMass, belowRatio = 0;
  for (size_t j = probabilities.size(); j-- > 0;) {
    double l = loss(j);
    if (l + interval <= 0)
      return 0; // delta(0) <= delta(l_{j+1}) <= target
    if (above - belowRatio > delta) {
      if (belowRatio <= 0)
        return std::max(0.0, l + interval);
      return std::max(0.0, l + std::log((above - delta) / belowRatio));
    }
    above += probabilities[j];
    belowRatio = decay * (belowRatio + probabilities[j]);
  }
  // Below the lowest grid point l_0: delta(eps) = above - exp(eps - l_0 + d)
  // belowRatio.
  if (probabilities.empty() || above <= delta || belowRatio <= 0)
    return 0;
  double l = loss(0) - interval;
  return std::max(0.0, l + std::log((above - delta) / belowRatio));
}

double PldPair::epsilonForDelta(double delta) const {
  return std::max(remove.epsilonForDelta(delta), add.epsilonForDelta(delta));
}

double PldPair::deltaForEpsilon(double epsilon) const {
  return std::max(remove.deltaForEpsilon(epsilon),
                  add.deltaForEpsilon(epsilon));
}

PldPair sampledGaussianPld(double q, double sigma, double interval) {
  assert(q > 0 && q <= 1 && sigma > 0 && interval > 0);
  PldPair pair;
  pair.remove = discretize(GaussianPair(true, q, sigma), interval);
  pair.add = discretize(GaussianPair(false, q, sigma), interval);
  return pair;
}

PldPair
composeSampledGaussian(const std::vector<SampledGaussianSegment> &segments,
                       const PldOptions &options) {
  assert(options.interval > 0 && options.maxPoints >= 2 &&
         options.tailMass > 0 && options.tailMass < 1);
  // Composition commutes: steps with the same (q, sigma) form one factor.
  std::map<std::pair<double, double>, int64_t> mechanisms;
  for (const SampledGaussianSegment &s : segments) {
    assert(s.q >= 0 && s.q <= 1 && s.sigma >= 0 && s.steps >= 0);
    if (s.q == 0 || s.steps == 0)
      continue;
    if (s.sigma == 0)
      return nonPrivatePld(options.interval);
    mechanisms[{s.q, s.sigma}] += s.steps;
  }
  if (mechanisms.empty())
    return identityPld(options.interval);

  double totalSteps = 0;
  for (const auto &[mechanism, steps] : mechanisms)
    totalSteps += static_cast<double>(steps);
  if (totalSteps > static_cast<double>(kMaxPldSteps))
    return nonPrivatePld(options.interval);
  double interval = options.interval;
  if (options.refine) {
    constexpr double kRefineAbove = 100000;
    if (totalSteps > kRefineAbove)
      interval *= std::sqrt(kRefineAbove / totalSteps);
    for (const auto &[mechanism, steps] : mechanisms) {
      auto [q, sigma] = mechanism;
      // 0.1 Var(L) / E|L| ~ 0.1 q (e^(1/sigma^2) - 1) / (2 TV); +inf (no
      // limit) where e^(1/sigma^2) overflows.
      double lossScale = q * std::expm1(1 / (sigma * sigma)) /
                         (2 * std::erf(1 / (2 * M_SQRT2 * sigma)));
      interval = std::min(interval, 0.1 * lossScale);
    }
  }
  const double maxPoints = static_cast<double>(options.maxPoints);
  // The factor, a power of two, by which the grid is coarsened so that
  // `points` grid points become at most maxPoints.
  auto coarsening = [&](double points) {
    return std::max(2.0, std::exp2(std::ceil(std::log2(points / maxPoints))));
  };
  while (true) {
    // One step's grid spans the losses of the truncated Gaussians; coarsen
    // before building one that is too long.
    double widest = 0;
    for (const auto &[mechanism, steps] : mechanisms) {
      for (bool remove : {true, false}) {
        GaussianPair pair(remove, mechanism.first, mechanism.second);
        auto [xLo, xHi] = pair.truncation();
        widest =
            std::max(widest, (pair.loss(xLo) - pair.loss(xHi)) / interval + 2);
      }
    }
    if (widest > maxPoints) {
      interval *= coarsening(widest);
      continue;
    }

    std::vector<PldPair> steps;
    steps.reserve(mechanisms.size());
    for (const auto &[mechanism, count] : mechanisms)
      steps.push_back(
          sampledGaussianPld(mechanism.first, mechanism.second, interval));
    std::vector<Factor> removeFactors, addFactors;
    size_t f = 0;
    for (const auto &[mechanism, count] : mechanisms) {
      removeFactors.push_back({&steps[f].remove, count});
      addFactors.push_back({&steps[f].add, count});
      ++f;
    }
    auto removeWindow = chernoffWindow(removeFactors, options.tailMass);
    auto addWindow = chernoffWindow(addFactors, options.tailMass);
    double width = std::max(removeWindow.second - removeWindow.first,
                            addWindow.second - addWindow.first) +
                   1;
    if (width > maxPoints) {
      interval *= coarsening(width);
      continue;
    }
    // The composed grid indices, sum_f steps_f offset_f + window, must fit
    // in int64_t: a concern only for astronomically many steps.
    double reach = 0;
    for (const std::vector<Factor> *factors : {&removeFactors, &addFactors})
      for (const Factor &factor : *factors)
        reach += static_cast<double>(factor.steps) *
                 std::fabs(static_cast<double>(factor.pld->offset));
    if (reach + removeWindow.second + addWindow.second > 0x1p62) {
      interval *= 2;
      continue;
    }
    auto toIndices = [](std::pair<double, double> window) {
      return std::pair<int64_t, int64_t>{static_cast<int64_t>(window.first),
                                         static_cast<int64_t>(window.second)};
    };
    return composeFactors(removeFactors, addFactors, toIndices(removeWindow),
                          toIndices(addWindow),
                          nextPowerOfTwo(static_cast<int64_t>(width)),
                          options.tailMass);
  }
}

EpsilonAndOrder pldEpsilon(const std::vector<SampledGaussianSegment> &segments,
                           double delta, const PldOptions &options) {
  assert(delta > 0 && delta < 1 && "delta must be in (0, 1)");
  PldPair pld = composeSampledGaussian(segments, options);
  return {pld.epsilonForDelta(delta), 0.0, pld.remove.interval};
}

PldAccountant::PldAccountant(PldOptions options) : options_(options) {}

void PldAccountant::compose(double q, double sigma, int64_t steps) {
  assert(q >= 0 && q <= 1 && sigma >= 0 && steps >= 0);
  if (steps == 0)
    return;
  if (!segments_.empty() && segments_.back().q == q &&
      segments_.back().sigma == sigma)
    segments_.back().steps += steps;
  else
    segments_.push_back({q, sigma, steps});
  composed_.reset();
}

const PldPair &PldAccountant::distribution() const {
  if (!composed_)
    composed_ = std::make_shared<const PldPair>(
        composeSampledGaussian(segments_, options_));
  return *composed_;
}

EpsilonAndOrder PldAccountant::epsilon(double delta) const {
  assert(delta > 0 && delta < 1 && "delta must be in (0, 1)");
  const PldPair &pld = distribution();
  return {pld.epsilonForDelta(delta), 0.0, pld.remove.interval};
}

double PldAccountant::delta(double epsilon) const {
  assert(epsilon >= 0 && "epsilon must be non-negative");
  return distribution().deltaForEpsilon(epsilon);
}

std::unique_ptr<PrivacyAccountant> PldAccountant::clone() const {
  return std::make_unique<PldAccountant>(*this);
}

} // namespace dprt::privacy
