//===- PldAccountantTest.cpp - PLD of the sampled Gaussian ----------------===//
//
// The discretization against quadrature of the mechanism, the composition
// against the analytic Gaussian and a direct convolution, and the epsilons
// against dp-accounting's PLDAccountant (a committed table written by
// test/privacy/generate_pld_table.py).
//
//===----------------------------------------------------------------------===//

#include "privacy/PldAccountant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace dprt::privacy;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

double normalDensity(double x, double mean, double sigma) {
  double z = (x - mean) / sigma;
  return std::exp(-0.5 * z * z) / (sigma * std::sqrt(2 * M_PI));
}

/// The densities of one direction of the add-or-remove pair, spelled out
/// from the definition (not from the accountant's loss formulas).
struct Densities {
  bool remove;
  double q, sigma;
  double p(double x) const {
    return remove ? (1 - q) * normalDensity(x, 0, sigma) +
                        q * normalDensity(x, -1, sigma)
                  : normalDensity(x, 0, sigma);
  }
  double qd(double x) const {
    return remove ? normalDensity(x, 0, sigma)
                  : (1 - q) * normalDensity(x, 0, sigma) +
                        q * normalDensity(x, 1, sigma);
  }
};

/// The hockey-stick divergence int (p - e^eps q)_+ dx by quadrature: the
/// integrand is positive exactly left of the crossing x* (the loss decreases
/// in x), found by bisection within 30 sigma (where the densities are still
/// normal doubles); Simpson's rule on [x* - 30 sigma - 1, x*].
double hockeyStickByQuadrature(const Densities &d, double epsilon) {
  double scale = std::exp(epsilon);
  auto excess = [&](double x) { return d.p(x) - scale * d.qd(x); };
  double lo = -30 * d.sigma - 1, hi = 30 * d.sigma + 1;
  if (excess(lo) <= 0)
    return 0;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (excess(mid) > 0 ? lo : hi) = mid;
  }
  const double top = lo, bottom = top - 30 * d.sigma - 1;
  const int intervals = 200000;
  const double h = (top - bottom) / intervals;
  double sum = 0;
  for (int i = 0; i <= intervals; ++i) {
    double weight = (i == 0 || i == intervals) ? 1 : (i % 2 ? 4 : 2);
    sum += weight * std::max(excess(bottom + i * h), 0.0);
  }
  return sum * h / 3;
}

double totalMass(const DiscretePld &pld) {
  double mass = pld.infinityMass;
  for (double p : pld.probabilities)
    mass += p;
  return mass;
}

// Connect-the-dots keeps the hockey-stick divergence of the mechanism at
// every grid point and lies above it in between: the discrete distribution
// dominates the mechanism.
TEST(PldDiscretization, HasTheMechanismsDeltaAtGridPointsAndMoreBetween) {
  struct Case {
    double q, sigma, interval;
  };
  for (const Case &c : {Case{0.01, 1.0, 1e-3}, Case{0.2, 0.7, 1e-2},
                        Case{1.0, 2.0, 1e-3}, Case{1e-3, 0.5, 1e-3}}) {
    PldPair pld = sampledGaussianPld(c.q, c.sigma, c.interval);
    for (bool remove : {true, false}) {
      const DiscretePld &one = remove ? pld.remove : pld.add;
      EXPECT_NEAR(totalMass(one), 1.0, 1e-12);
      Densities densities{remove, c.q, c.sigma};
      // Grid points spread over the support, including the top one.
      size_t n = one.probabilities.size();
      for (size_t j : {n / 7, n / 3, n / 2, 2 * n / 3, n - 2, n - 1}) {
        double epsilon = one.loss(j);
        if (epsilon < 0)
          continue;
        double exact = hockeyStickByQuadrature(densities, epsilon);
        EXPECT_NEAR(one.deltaForEpsilon(epsilon), exact, 1e-8 * exact + 1e-15)
            << "q=" << c.q << " sigma=" << c.sigma << " remove=" << remove
            << " eps=" << epsilon;
        double between = epsilon + 0.5 * c.interval;
        EXPECT_GE(one.deltaForEpsilon(between),
                  hockeyStickByQuadrature(densities, between) * (1 - 1e-8))
            << "q=" << c.q << " sigma=" << c.sigma << " remove=" << remove
            << " eps=" << between;
      }
    }
  }
}

/// delta(eps) of the Gaussian mechanism with noise s and sensitivity 1
/// (Balle and Wang 2018): Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s).
double gaussianDelta(double s, double epsilon) {
  auto phi = [](double z) { return 0.5 * std::erfc(-z * M_SQRT1_2); };
  return phi(0.5 / s - epsilon * s) -
         std::exp(epsilon) * phi(-0.5 / s - epsilon * s);
}

double gaussianEpsilon(double s, double delta) {
  double lo = 0, hi = 1;
  while (gaussianDelta(s, hi) > delta)
    hi *= 2;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (gaussianDelta(s, mid) > delta ? lo : hi) = mid;
  }
  return hi;
}

// With q = 1, T steps of noise sigma are one Gaussian mechanism with noise
// sigma / sqrt(T): an exact answer for the whole FFT composition, also past
// 1e5 steps where the grid is refined.
TEST(PldComposition, FullBatchIsTheAnalyticGaussian) {
  struct Case {
    double sigma;
    int64_t steps;
    double delta;
  };
  for (const Case &c :
       {Case{1.0, 1, 1e-5}, Case{2.0, 10, 1e-6}, Case{5.0, 1000, 1e-5},
        Case{100.0, 10000, 1e-8}, Case{0.8, 3, 1e-3},
        Case{3000.0, 1000000, 1e-5}, Case{3162.0, 10000000, 1e-6}}) {
    double exact = gaussianEpsilon(
        c.sigma / std::sqrt(static_cast<double>(c.steps)), c.delta);
    double pld = pldEpsilon({{1.0, c.sigma, c.steps}}, c.delta).epsilon;
    // An upper bound, above by less than the grid's effect (measured: at
    // most 9e-4 relative).
    EXPECT_GE(pld, exact * (1 - 1e-9)) << c.sigma << " " << c.steps;
    EXPECT_LE(pld, exact * (1 + 2e-3)) << c.sigma << " " << c.steps;
  }
}

/// p convolved with itself `times` times, directly.
std::vector<double> convolvePower(const std::vector<double> &p, int times) {
  std::vector<double> result = p;
  for (int t = 1; t < times; ++t) {
    std::vector<double> next(result.size() + p.size() - 1, 0.0);
    for (size_t i = 0; i < result.size(); ++i)
      for (size_t j = 0; j < p.size(); ++j)
        next[i + j] += result[i] * p[j];
    result = std::move(next);
  }
  return result;
}

TEST(PldComposition, FftPowerMatchesDirectConvolution) {
  const double q = 0.3, sigma = 2.0, interval = 1e-2;
  const int steps = 3;
  PldPair one = sampledGaussianPld(q, sigma, interval);
  PldOptions options;
  options.interval = interval;
  options.tailMass = 1e-30;
  PldPair composed = composeSampledGaussian({{q, sigma, steps}}, options);
  for (bool remove : {true, false}) {
    const DiscretePld &single = remove ? one.remove : one.add;
    DiscretePld direct;
    direct.interval = interval;
    direct.offset = steps * single.offset;
    direct.probabilities = convolvePower(single.probabilities, steps);
    direct.infinityMass =
        1 - std::pow(1 - single.infinityMass, static_cast<double>(steps));
    const DiscretePld &fft = remove ? composed.remove : composed.add;
    for (double epsilon : {0.0, 0.1, 0.5, 1.0, 2.0, 3.0})
      EXPECT_NEAR(fft.deltaForEpsilon(epsilon), direct.deltaForEpsilon(epsilon),
                  1e-13)
          << "remove=" << remove << " eps=" << epsilon;
  }
}

TEST(PldComposition, SegmentsAndTheRunningAccountant) {
  const double delta = 1e-5;
  PldAccountant accountant;
  for (int i = 0; i < 500; ++i)
    accountant.compose(0.01, 1.0);
  accountant.compose(0.02, 1.0, 250);
  accountant.compose(0.02, 1.0, 250);
  EXPECT_EQ(accountant.steps(), 1000);
  ASSERT_EQ(accountant.segments().size(), 2u);
  double mixed = accountant.epsilon(delta).epsilon;
  EXPECT_EQ(mixed,
            pldEpsilon({{0.01, 1.0, 500}, {0.02, 1.0, 500}}, delta).epsilon);
  // Composition does not depend on the order of the steps.
  EXPECT_NEAR(pldEpsilon({{0.02, 1.0, 500}, {0.01, 1.0, 500}}, delta).epsilon,
              mixed, 1e-12 * mixed);
  // A schedule between its extremes.
  EXPECT_GT(mixed, pldEpsilon({{0.01, 1.0, 1000}}, delta).epsilon);
  EXPECT_LT(mixed, pldEpsilon({{0.02, 1.0, 1000}}, delta).epsilon);
  // Different noise levels in one composition: two FFT factors.
  double twoSigmas =
      pldEpsilon({{0.01, 1.0, 500}, {0.01, 2.0, 500}}, delta).epsilon;
  EXPECT_GT(twoSigmas, pldEpsilon({{0.01, 2.0, 1000}}, delta).epsilon);
  EXPECT_LT(twoSigmas, pldEpsilon({{0.01, 1.0, 1000}}, delta).epsilon);
  // Resume from the segments.
  PldAccountant resumed;
  for (const SampledGaussianSegment &s : accountant.segments())
    resumed.compose(s.q, s.sigma, s.steps);
  EXPECT_EQ(resumed.epsilon(delta).epsilon, mixed);
  // Clones compose on their own.
  std::unique_ptr<PrivacyAccountant> next = accountant.clone();
  next->compose(0.02, 1.0, 100);
  EXPECT_EQ(accountant.epsilon(delta).epsilon, mixed);
  EXPECT_GT(next->epsilon(delta).epsilon, mixed);
}

TEST(PldEpsilon, StaysBelowRdpForLongRuns) {
  // Past 1e5 steps the grid is refined as 1 / sqrt(steps), so the
  // discretization's excess (which grows like steps d^2) does not make PLD
  // looser than RDP.
  for (int64_t steps : {1000000, 10000000}) {
    EpsilonAndOrder pld = pldEpsilon({{1e-4, 2.0, steps}}, 1e-5);
    EXPECT_LT(pld.interval, 1e-4);
    EXPECT_LT(pld.epsilon, epsilon(1e-4, 2.0, steps, 1e-5).epsilon) << steps;
  }
  EXPECT_EQ(pldEpsilon({{1e-4, 2.0, kMaxPldSteps + 1}}, 1e-5).epsilon, kInf);
}

// Where one step's losses are small next to 1e-4 (small q, large sigma) the
// grid is refined: epsilon halves and falls below RDP's, and a grid four
// times finer still moves it by less than 1 %.
TEST(PldEpsilon, RefinesTheGridForSmallLosses) {
  for (auto [q, sigma, steps] :
       {std::tuple{1e-4, 5.0, 100000}, std::tuple{1e-4, 2.0, 10000},
        std::tuple{1e-3, 5.0, 1000}}) {
    for (double delta : {1e-8, 1e-5}) {
      EpsilonAndOrder refined = pldEpsilon({{q, sigma, steps}}, delta);
      EXPECT_LT(refined.interval, 1e-4);
      PldOptions fixed;
      fixed.refine = false;
      EpsilonAndOrder coarse = pldEpsilon({{q, sigma, steps}}, delta, fixed);
      EXPECT_LT(refined.epsilon, coarse.epsilon);
      EXPECT_LT(refined.epsilon, epsilon(q, sigma, steps, delta).epsilon);
      PldOptions finer = fixed;
      finer.interval = refined.interval / 4;
      double converged = pldEpsilon({{q, sigma, steps}}, delta, finer).epsilon;
      EXPECT_LE(converged, refined.epsilon * (1 + 1e-9));
      EXPECT_GT(converged, refined.epsilon * (1 - 1e-2))
          << q << " " << sigma << " " << steps << " " << delta;
    }
  }
  // Typical settings keep dp-accounting's default grid.
  EXPECT_EQ(pldEpsilon({{0.01, 1.1, 10000}}, 1e-5).interval, 1e-4);
  EXPECT_EQ(pldEpsilon({{256.0 / 60000, 0.9, 2000}}, 1e-5).interval, 1e-4);
}

TEST(PldEpsilon, SpecialCases) {
  EXPECT_EQ(pldEpsilon({}, 1e-5).epsilon, 0.0);
  EXPECT_EQ(pldEpsilon({{0.0, 1.0, 100}}, 1e-5).epsilon, 0.0);
  EXPECT_EQ(pldEpsilon({{0.1, 1.0, 0}}, 1e-5).epsilon, 0.0);
  EXPECT_EQ(pldEpsilon({{0.1, 0.0, 10}}, 1e-5).epsilon, kInf);
  EXPECT_EQ(pldEpsilon({{0.1, 1.0, 10}, {0.1, 0.0, 1}}, 1e-5).epsilon, kInf);
  PldAccountant accountant;
  EXPECT_EQ(accountant.epsilon(1e-5).epsilon, 0.0);
  EXPECT_EQ(accountant.delta(0.0), 0.0);
  accountant.compose(0.5, 0.0, 1);
  EXPECT_EQ(accountant.delta(10.0), 1.0);
  // Below the tail mass the composition cuts (1e-15), no epsilon is finite.
  EXPECT_EQ(pldEpsilon({{0.01, 1.0, 10}}, 1e-16).epsilon, kInf);
}

TEST(PldEpsilon, IsTighterThanRdpAndMonotone) {
  const double delta = 1e-6;
  // (q = 1 is FullBatchIsTheAnalyticGaussian.)
  for (double q : {1e-4, 1e-2, 0.2}) {
    for (double sigma : {0.6, 1.0, 3.0}) {
      double previous = 0;
      for (int64_t steps : {1, 30, 1000}) {
        EpsilonAndOrder pld =
            epsilon(AccountantKind::Pld, q, sigma, steps, delta);
        double rdp = epsilon(q, sigma, steps, delta).epsilon;
        EXPECT_LE(pld.epsilon, rdp) << q << " " << sigma << " " << steps;
        EXPECT_GE(pld.epsilon, previous) << q << " " << sigma << " " << steps;
        EXPECT_EQ(pld.order, 0.0);
        EXPECT_GT(pld.interval, 0.0);
        previous = pld.epsilon;
      }
    }
  }
  EXPECT_GT(pldEpsilon({{0.01, 1.0, 1000}}, delta).epsilon,
            pldEpsilon({{0.01, 1.1, 1000}}, delta).epsilon);
  EXPECT_GT(pldEpsilon({{0.01, 1.0, 1000}}, 1e-8).epsilon,
            pldEpsilon({{0.01, 1.0, 1000}}, 1e-5).epsilon);
}

// Halving the grid only refines: the finer grid's points include the
// coarser one's, so the coarser distribution dominates the finer.
TEST(PldEpsilon, CoarserGridsArePessimistic) {
  for (auto [q, sigma, steps] :
       {std::tuple{0.01, 1.0, 1000}, std::tuple{0.1, 2.0, 100},
        std::tuple{1e-3, 0.7, 10000}}) {
    double previous = 0;
    for (double interval : {1e-4, 2e-4, 4e-4, 1.6e-3, 1.28e-2}) {
      PldOptions options;
      options.interval = interval;
      options.refine = false;
      EpsilonAndOrder result = pldEpsilon({{q, sigma, steps}}, 1e-5, options);
      EXPECT_EQ(result.interval, interval);
      EXPECT_GE(result.epsilon, previous * (1 - 1e-9))
          << q << " " << sigma << " " << steps << " " << interval;
      previous = result.epsilon;
    }
  }
}

// Where the composition would not fit in PldOptions::maxPoints the grid is
// coarsened: still an upper bound, still below RDP.
TEST(PldEpsilon, CoarsensTheGridForHugeCompositions) {
  EpsilonAndOrder result = pldEpsilon({{0.1, 0.5, 100000}}, 1e-5);
  EXPECT_GT(result.interval, 1e-4);
  EXPECT_TRUE(std::isfinite(result.epsilon));
  EXPECT_LT(result.epsilon, epsilon(0.1, 0.5, 100000, 1e-5).epsilon);
  PldOptions small;
  small.maxPoints = 1 << 12;
  EpsilonAndOrder coarse = pldEpsilon({{0.01, 1.0, 10000}}, 1e-5, small);
  EXPECT_GT(coarse.interval, 1e-4);
  EXPECT_GE(coarse.epsilon, pldEpsilon({{0.01, 1.0, 10000}}, 1e-5).epsilon);
}

TEST(PldEpsilon, DeltaAndEpsilonAreInverse) {
  PldAccountant accountant;
  accountant.compose(0.01, 1.1, 10000);
  for (double delta : {1e-9, 1e-6, 1e-3, 0.1}) {
    double eps = accountant.epsilon(delta).epsilon;
    EXPECT_NEAR(accountant.delta(eps), delta, 1e-9 * delta);
    EXPECT_GT(accountant.delta(eps * 0.99), delta);
  }
}

struct ReferenceRow {
  std::string query;
  std::vector<SampledGaussianSegment> segments;
  double interval, given, expected;
};

std::vector<ReferenceRow> readReferenceTable() {
  std::ifstream in(DPC_PLD_REFERENCE_TABLE);
  std::vector<ReferenceRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream fields(line);
    ReferenceRow row;
    std::string segments;
    fields >> row.query >> segments >> row.interval >> row.given >>
        row.expected;
    std::istringstream list(segments);
    std::string segment;
    while (std::getline(list, segment, ',')) {
      SampledGaussianSegment s;
      char slash;
      std::istringstream parts(segment);
      parts >> s.q >> slash >> s.sigma >> slash >> s.steps;
      row.segments.push_back(s);
    }
    rows.push_back(row);
  }
  return rows;
}

// The default PLD accountant within 1 % of dp-accounting's PLDAccountant on
// the same grid, for q in [1e-4, 0.1], sigma in [0.5, 5], steps in [1, 1e5],
// delta in [1e-8, 1e-3] and a few schedules of several segments.
TEST(PldEpsilon, MatchesDpAccountingTable) {
  std::vector<ReferenceRow> rows = readReferenceTable();
  ASSERT_GE(rows.size(), 390u) << DPC_PLD_REFERENCE_TABLE;
  const double tolerance = 1e-2;
  double worstEpsilon = 0, worstDelta = 0;
  // Consecutive rows of one composition share one accountant.
  std::unique_ptr<PldAccountant> accountant;
  const ReferenceRow *composed = nullptr;
  for (const ReferenceRow &row : rows) {
    std::ostringstream where;
    for (const SampledGaussianSegment &s : row.segments)
      where << s.q << "/" << s.sigma << "/" << s.steps << " ";
    where << row.query << "(" << row.given << ")";
    if (!composed || composed->interval != row.interval ||
        composed->segments.size() != row.segments.size() ||
        !std::equal(row.segments.begin(), row.segments.end(),
                    composed->segments.begin(),
                    [](const SampledGaussianSegment &a,
                       const SampledGaussianSegment &b) {
                      return a.q == b.q && a.sigma == b.sigma &&
                             a.steps == b.steps;
                    })) {
      // One segment: the default accountant, which must pick the table's
      // grid. Several: the table's grid (the finest of the segments').
      PldOptions options;
      if (row.segments.size() > 1) {
        options.interval = row.interval;
        options.refine = false;
      }
      accountant = std::make_unique<PldAccountant>(options);
      for (const SampledGaussianSegment &s : row.segments)
        accountant->compose(s.q, s.sigma, s.steps);
      composed = &row;
      // The same grid as dp-accounting.
      EXPECT_EQ(accountant->epsilon(0.5).interval, row.interval) << where.str();
    }
    if (row.query == "epsilon") {
      double ours = accountant->epsilon(row.given).epsilon;
      double difference = std::fabs(ours - row.expected);
      EXPECT_LE(difference, tolerance * row.expected)
          << where.str() << ": " << ours << " vs " << row.expected;
      if (row.expected > 0)
        worstEpsilon = std::max(worstEpsilon, difference / row.expected);
    } else {
      ASSERT_EQ(row.query, "delta");
      double ours = accountant->delta(row.given);
      double difference = std::fabs(ours - row.expected);
      EXPECT_LE(difference, tolerance * row.expected + 1e-15)
          << where.str() << ": " << ours << " vs " << row.expected;
      if (row.expected > 0)
        worstDelta = std::max(worstDelta, difference / row.expected);
    }
  }
  std::printf("%zu rows: worst relative difference %.3g (epsilon), %.3g "
              "(delta)\n",
              rows.size(), worstEpsilon, worstDelta);
}

} // namespace
