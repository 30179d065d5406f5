//===- AccountantTest.cpp - RDP of the sampled Gaussian, calibration ------===//

#include "privacy/Accountant.h"
#include "privacy/PldAccountant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace dprt::privacy;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(RdpOrders, AreDpAccountingDefaults) {
  const std::vector<double> &orders = defaultRdpOrders();
  ASSERT_EQ(orders.size(), 99u + 53u + 4u);
  EXPECT_EQ(orders.front(), 1.1);
  EXPECT_EQ(orders[8], 1.9);
  EXPECT_EQ(orders[9], 2.0); // 1 + 10 / 10.0: an integer order
  EXPECT_EQ(orders[98], 10.9);
  EXPECT_EQ(orders[99], 11.0);
  EXPECT_EQ(orders[151], 63.0);
  EXPECT_EQ(orders.back(), 1024.0);
}

TEST(LogSpace, AddAndErfc) {
  EXPECT_DOUBLE_EQ(logAdd(std::log(2.0), std::log(3.0)), std::log(5.0));
  EXPECT_EQ(logAdd(-kInf, 1.5), 1.5);
  EXPECT_EQ(logAdd(-kInf, -kInf), -kInf);
  EXPECT_DOUBLE_EQ(logAdd(1000.0, 1000.0), 1000.0 + std::log(2.0));
  // Where erfc does not underflow, every branch matches log(erfc(x)); the
  // asymptotic branch starts at 14.
  for (double x = -6.0; x <= 26.0; x += 0.37)
    EXPECT_NEAR(logErfc(x), std::log(std::erfc(x)),
                1e-13 * std::max(1.0, std::fabs(std::log(std::erfc(x)))))
        << "x = " << x;
  // Beyond the underflow, the Laurent series at infinity:
  // log erfc(x) = -x^2 - log(x sqrt(pi)) - 1/(2x^2) + 5/(8x^4) + O(x^-6).
  for (double x : {30.0, 100.0, 1000.0}) {
    double series = -x * x - std::log(x * std::sqrt(M_PI)) - 1 / (2 * x * x) +
                    5 / (8 * std::pow(x, 4));
    EXPECT_NEAR(logErfc(x), series, 1e-15 * x * x + 2 / std::pow(x, 6));
  }
  EXPECT_TRUE(std::isfinite(logErfc(1e5)));
}

/// log A_alpha by Simpson quadrature of the definition in MTZ19,
///   A_alpha = E_{z ~ N(0, s^2)} [((1-q) + q exp((2z - 1) / (2 s^2)))^alpha]
/// with s = sigma, independent of the series.
double logAByQuadrature(double q, double sigma, double alpha) {
  const int intervals = 20000;
  double lo = -40 * sigma, hi = 40 * sigma + alpha, h = (hi - lo) / intervals;
  auto logIntegrand = [&](double z) {
    double logRatio =
        logAdd(std::log1p(-q), std::log(q) + (2 * z - 1) / (2 * sigma * sigma));
    return -z * z / (2 * sigma * sigma) -
           std::log(std::sqrt(2 * M_PI) * sigma) + alpha * logRatio;
  };
  double peak = -kInf;
  for (int i = 0; i <= intervals; ++i)
    peak = std::max(peak, logIntegrand(lo + i * h));
  double sum = 0;
  for (int i = 0; i <= intervals; ++i) {
    double weight = (i == 0 || i == intervals) ? 1 : (i % 2 ? 4 : 2);
    sum += weight * std::exp(logIntegrand(lo + i * h) - peak);
  }
  return peak + std::log(sum * h / 3);
}

TEST(SampledGaussian, IntegerOrdersAreExact) {
  for (auto [q, sigma, alpha] : {std::tuple{0.1, 1.5, 3},
                                 {0.01, 0.7, 2},
                                 {0.3, 2.0, 8},
                                 {0.05, 1.0, 20}}) {
    double quadrature = logAByQuadrature(q, sigma, alpha);
    EXPECT_NEAR(logAInteger(q, sigma, alpha), quadrature,
                1e-9 * std::fabs(quadrature))
        << q << " " << sigma << " " << alpha;
  }
}

// The fractional series, summed with |binomial(alpha, i)| as dp-accounting
// does, bounds A_alpha from above (the safe side) and is close to it.
TEST(SampledGaussian, FractionalOrdersAreATightUpperBound) {
  for (auto [q, sigma, alpha] : {std::tuple{0.1, 1.5, 2.5},
                                 {0.01, 0.7, 1.5},
                                 {0.3, 2.0, 7.3},
                                 {0.05, 1.0, 20.5}}) {
    double quadrature = logAByQuadrature(q, sigma, alpha);
    double series = logAFractional(q, sigma, alpha);
    // In log space: A_alpha itself is overestimated by less than 0.02 %.
    EXPECT_GE(series, quadrature - 1e-12);
    EXPECT_LT(series, quadrature + 2e-4) << q << " " << sigma << " " << alpha;
  }
}

TEST(SampledGaussian, FractionalSeriesIsContinuousAtIntegers) {
  for (double alpha : {2.0, 3.0, 10.0, 32.0}) {
    double atInteger = rdpSampledGaussian(0.02, 1.2, alpha);
    EXPECT_NEAR(rdpSampledGaussian(0.02, 1.2, alpha + 1e-7), atInteger,
                1e-4 * atInteger);
  }
}

TEST(SampledGaussian, SpecialCases) {
  // q = 1: the plain Gaussian mechanism, alpha / (2 sigma^2).
  for (double alpha : {1.5, 2.0, 33.0, 1024.0})
    EXPECT_DOUBLE_EQ(rdpSampledGaussian(1.0, 0.8, alpha),
                     alpha / (2 * 0.8 * 0.8));
  EXPECT_EQ(rdpSampledGaussian(0.5, 0.0, 2.0), kInf);
  EXPECT_EQ(rdpSampledGaussian(0.0, 0.0, 2.0), 0.0);
  EXPECT_EQ(rdpSampledGaussian(0.5, 1.0, kInf), kInf);
  EXPECT_EQ(epsilon(0.5, 0.0, 10, 1e-5).epsilon, kInf);
  EXPECT_EQ(epsilon(0.0, 1.0, 10, 1e-5).epsilon, 0.0);
  EXPECT_EQ(epsilon(0.1, 1.0, 0, 1e-5).epsilon, 0.0);
}

// q = 1 in closed form: RDP T alpha / (2 sigma^2), then Balle et al.'s
// conversion minimised over the orders, computed here independently.
TEST(Epsilon, FullBatchClosedForm) {
  const double sigma = 3.0, delta = 1e-6;
  const int64_t steps = 50;
  double best = kInf, bestOrder = 0;
  for (double a : defaultRdpOrders()) {
    double rdp = steps * a / (2 * sigma * sigma);
    double eps =
        rdp + std::log((a - 1) / a) - (std::log(delta) + std::log(a)) / (a - 1);
    if (eps < best) {
      best = eps;
      bestOrder = a;
    }
  }
  EpsilonAndOrder result = epsilon(1.0, sigma, steps, delta);
  EXPECT_NEAR(result.epsilon, best, 1e-12 * best);
  EXPECT_EQ(result.order, bestOrder);
}

// Values printed by Google's dp-accounting 0.6.0 (RdpAccountant with
// PoissonSampledDpEvent(q, GaussianDpEvent(sigma)) composed `steps` times,
// get_epsilon_and_optimal_order(delta)). test/privacy compares many more.
TEST(Epsilon, MatchesDpAccountingReferenceValues) {
  struct Case {
    double q, sigma;
    int64_t steps;
    double delta, epsilon, order;
  };
  const Case cases[] = {
      {0.01, 1.1, 10000, 1e-5, 5.632010670081592, 4.7},
      {0.5, 0.5, 1, 1e-5, 9.721757109629905, 3.2},
      {1e-4, 10.0, 100000, 1e-8, 0.015404853944928125, 1024},
      {0.1, 0.8, 1000, 1e-6, 48.57386274719662, 1.8},
      {0.001, 2.0, 50000, 1e-6, 0.5213005766384327, 38},
  };
  for (const Case &c : cases) {
    EpsilonAndOrder result = epsilon(c.q, c.sigma, c.steps, c.delta);
    EXPECT_NEAR(result.epsilon, c.epsilon, 1e-10 * c.epsilon)
        << "q=" << c.q << " sigma=" << c.sigma << " steps=" << c.steps;
    EXPECT_EQ(result.order, c.order);
  }
}

TEST(Epsilon, IsMonotoneInStepsRateAndNoise) {
  const double delta = 1e-6;
  for (double q : {1e-6, 1e-4, 1e-2, 0.5}) {
    for (double sigma : {0.3, 1.0, 10.0, 100.0}) {
      double previous = 0;
      for (int64_t steps : {1, 10, 1000, 100000, 10000000}) {
        double eps = epsilon(q, sigma, steps, delta).epsilon;
        EXPECT_TRUE(std::isfinite(eps)) << q << " " << sigma << " " << steps;
        EXPECT_GE(eps, previous) << q << " " << sigma << " " << steps;
        previous = eps;
      }
    }
  }
  for (double sigma : {0.3, 1.0, 10.0}) {
    double previous = 0;
    for (double q : {1e-6, 1e-4, 1e-2, 0.1, 0.5, 1.0}) {
      double eps = epsilon(q, sigma, 1000, delta).epsilon;
      EXPECT_GE(eps, previous) << "q " << q << " sigma " << sigma;
      previous = eps;
    }
  }
  for (double q : {1e-3, 0.1, 1.0}) {
    double previous = kInf;
    for (double sigma : {0.3, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0}) {
      double eps = epsilon(q, sigma, 1000, delta).epsilon;
      EXPECT_LE(eps, previous) << "q " << q << " sigma " << sigma;
      previous = eps;
    }
  }
  // Strict where epsilon is far from 0.
  EXPECT_LT(epsilon(0.01, 1.0, 1000, delta).epsilon,
            epsilon(0.01, 1.0, 2000, delta).epsilon);
  EXPECT_LT(epsilon(0.01, 1.0, 1000, delta).epsilon,
            epsilon(0.02, 1.0, 1000, delta).epsilon);
  EXPECT_GT(epsilon(0.01, 1.0, 1000, delta).epsilon,
            epsilon(0.01, 1.1, 1000, delta).epsilon);
  // Smaller delta costs epsilon.
  EXPECT_GT(epsilon(0.01, 1.0, 1000, 1e-8).epsilon,
            epsilon(0.01, 1.0, 1000, 1e-5).epsilon);
}

TEST(Epsilon, SegmentsComposeLikeOneRun) {
  double whole = epsilon(0.01, 1.0, 3000, 1e-5).epsilon;
  double split = epsilon({{0.01, 1.0, 1000}, {0.01, 1.0, 2000}}, 1e-5).epsilon;
  EXPECT_NEAR(split, whole, 1e-12 * whole);
  // A schedule that varies q lies between its extremes.
  double mixed = epsilon({{0.01, 1.0, 1500}, {0.02, 1.0, 1500}}, 1e-5).epsilon;
  EXPECT_GT(mixed, whole);
  EXPECT_LT(mixed, epsilon(0.02, 1.0, 3000, 1e-5).epsilon);
}

TEST(RdpAccountant, StepByStepMatchesTheClosedCount) {
  RdpAccountant accountant;
  for (int i = 0; i < 500; ++i)
    accountant.compose(0.01, 1.0);
  accountant.compose(0.02, 1.0, 250);
  accountant.compose(0.02, 1.0, 250);
  EXPECT_EQ(accountant.steps(), 1000);
  ASSERT_EQ(accountant.segments().size(), 2u);
  EXPECT_EQ(accountant.segments()[0].steps, 500);
  EXPECT_EQ(accountant.segments()[1].steps, 500);
  double expected = epsilon({{0.01, 1.0, 500}, {0.02, 1.0, 500}}, 1e-5).epsilon;
  EXPECT_NEAR(accountant.epsilon(1e-5).epsilon, expected, 1e-9 * expected);
  // A resumed run rebuilds the same state from the saved segments.
  RdpAccountant resumed;
  for (const SampledGaussianSegment &s : accountant.segments())
    resumed.compose(s.q, s.sigma, s.steps);
  EXPECT_NEAR(resumed.epsilon(1e-5).epsilon, expected, 1e-12 * expected);
}

// dp-accounting 0.6.0's RdpAccountant.get_delta(epsilon) for the same
// compositions (compute_delta).
TEST(RdpDelta, MatchesDpAccountingAndInvertsEpsilon) {
  struct Case {
    double q, sigma;
    int64_t steps;
    double epsilon, delta;
  };
  const Case cases[] = {
      {0.01, 1.1, 10000, 5.0, 9.012931613298095e-05},
      {0.5, 0.5, 1, 10.0, 5.388179363393333e-06},
      {0.001, 2.0, 50000, 0.5, 2.18300360864107e-06},
  };
  for (const Case &c : cases) {
    RdpAccountant accountant;
    accountant.compose(c.q, c.sigma, c.steps);
    EXPECT_NEAR(accountant.delta(c.epsilon), c.delta, 1e-9 * c.delta)
        << c.q << " " << c.sigma << " " << c.steps;
    // At epsilon(delta) the best order gives delta back.
    for (double delta : {1e-8, 1e-5, 1e-2}) {
      double eps = accountant.epsilon(delta).epsilon;
      if (eps > 0)
        EXPECT_NEAR(accountant.delta(eps), delta, 1e-9 * delta);
    }
  }
  RdpAccountant none;
  EXPECT_EQ(none.delta(1.0), 0.0);
  none.compose(0.5, 0.0, 1);
  EXPECT_EQ(none.delta(1.0), 1.0);
}

TEST(PrivacyAccountant, MakesEitherKindBehindOneInterface) {
  EXPECT_STREQ(accountantName(AccountantKind::Rdp), "rdp");
  EXPECT_STREQ(accountantName(AccountantKind::Pld), "pld");
  EXPECT_EQ(parseAccountantKind("pld"), AccountantKind::Pld);
  EXPECT_EQ(parseAccountantKind("rdp"), AccountantKind::Rdp);
  EXPECT_FALSE(parseAccountantKind("PLD").has_value());
  EXPECT_FALSE(parseAccountantKind("").has_value());
  EXPECT_EQ(kDefaultAccountant, AccountantKind::Pld);
  for (AccountantKind kind : {AccountantKind::Rdp, AccountantKind::Pld}) {
    std::unique_ptr<PrivacyAccountant> accountant = makeAccountant(kind);
    EXPECT_EQ(accountant->kind(), kind);
    accountant->compose(0.01, 1.0, 600);
    accountant->compose(0.01, 1.0, 400);
    EXPECT_EQ(accountant->steps(), 1000);
    ASSERT_EQ(accountant->segments().size(), 1u);
    EpsilonAndOrder direct = epsilon(kind, 0.01, 1.0, 1000, 1e-5);
    // 600 r + 400 r against 1000 r: equal up to rounding.
    EXPECT_NEAR(accountant->epsilon(1e-5).epsilon, direct.epsilon,
                1e-12 * direct.epsilon);
    EXPECT_EQ(accountant->epsilon(1e-5).order, direct.order);
    EXPECT_EQ(accountant->epsilon(1e-5).interval, direct.interval);
  }
  // The RDP kind is the RDP accountant: same numbers as the free functions.
  EXPECT_EQ(epsilon(AccountantKind::Rdp, 0.01, 1.1, 10000, 1e-5).epsilon,
            epsilon(0.01, 1.1, 10000, 1e-5).epsilon);
}

TEST(Calibration, RoundTripsThroughEpsilon) {
  struct Case {
    double epsilon, delta, q;
    int64_t steps;
  };
  const Case cases[] = {
      {8.0, 1e-5, 256.0 / 60000, 2000},
      {1.0, 1e-5, 0.01, 10000},
      {3.0, 1e-6, 0.5, 10},
      {0.5, 1e-8, 1e-4, 100000},
      {2.0, 1e-5, 1.0, 100},
      {1.0, 1e-8, 1e-6, 10000000},
  };
  for (const Case &c : cases) {
    SigmaCalibration result = calibrateSigma(c.epsilon, c.delta, c.q, c.steps);
    ASSERT_TRUE(result.ok()) << result.error;
    double reached = epsilon(c.q, result.sigma, c.steps, c.delta).epsilon;
    EXPECT_EQ(reached, result.epsilon);
    EXPECT_LE(reached, c.epsilon);
    EXPECT_GT(reached, c.epsilon * (1 - 1e-4));
    // The smallest such sigma: a little less noise misses the target.
    EXPECT_GT(epsilon(c.q, result.sigma * (1 - 1e-5), c.steps, c.delta).epsilon,
              c.epsilon);
  }
}

// The same target epsilon buys less noise under the tighter PLD accountant;
// the PLD calibration meets its target by its own accountant.
TEST(Calibration, PldNeedsLessNoiseThanRdp) {
  struct Case {
    double epsilon, delta, q;
    int64_t steps;
  };
  const Case cases[] = {
      {8.0, 1e-5, 256.0 / 60000, 2000},
      {1.0, 1e-5, 0.01, 10000},
      {3.0, 1e-6, 0.5, 10},
  };
  for (const Case &c : cases) {
    SigmaCalibration rdp = calibrateSigma(c.epsilon, c.delta, c.q, c.steps);
    SigmaCalibration pld =
        calibrateSigma(AccountantKind::Pld, c.epsilon, c.delta, c.q, c.steps);
    ASSERT_TRUE(pld.ok()) << pld.error;
    EXPECT_LT(pld.sigma, rdp.sigma);
    EXPECT_EQ(pld.order, 0.0);
    EXPECT_EQ(pld.interval, 1e-4);
    double reached =
        epsilon(AccountantKind::Pld, c.q, pld.sigma, c.steps, c.delta).epsilon;
    EXPECT_EQ(reached, pld.epsilon);
    EXPECT_LE(reached, c.epsilon);
    EXPECT_GT(reached, c.epsilon * (1 - 1e-4));
  }
  EXPECT_NE(calibrateSigma(AccountantKind::Pld, 1.0, 0.0, 0.01, 100)
                .error.find("delta"),
            std::string::npos);
  EXPECT_NE(
      calibrateSigma(AccountantKind::Pld, 1.0, 1e-5, 0.01, kMaxPldSteps + 1)
          .error.find("at most"),
      std::string::npos);
}

TEST(Calibration, RejectsInvalidAndImpossibleRequests) {
  auto errorOf = [](double eps, double delta, double q, int64_t steps) {
    return calibrateSigma(eps, delta, q, steps).error;
  };
  EXPECT_NE(errorOf(1.0, 0.0, 0.01, 100).find("delta"), std::string::npos);
  EXPECT_NE(errorOf(1.0, 1.0, 0.01, 100).find("delta"), std::string::npos);
  EXPECT_NE(errorOf(1.0, 1e-5, 0.0, 100).find("q"), std::string::npos);
  EXPECT_NE(errorOf(1.0, 1e-5, 1.5, 100).find("q"), std::string::npos);
  EXPECT_NE(errorOf(1.0, 1e-5, 0.01, 0).find("steps"), std::string::npos);
  EXPECT_NE(errorOf(0.0, 1e-5, 0.01, 100).find("epsilon"), std::string::npos);
  EXPECT_NE(errorOf(-1.0, 1e-5, 0.01, 100).find("epsilon"), std::string::npos);
  // Full batches for 10^7 steps: epsilon 1e-3 needs sigma > 10^6.
  std::string impossible = errorOf(1e-3, 1e-8, 1.0, 10000000);
  EXPECT_NE(impossible.find("impossible"), std::string::npos) << impossible;
  // So much epsilon that almost no noise is needed.
  EXPECT_FALSE(calibrateSigma(1e6, 0.9, 0.5, 1).ok());
}

TEST(EpsilonRequest, ChecksEveryInput) {
  EXPECT_EQ(checkEpsilonRequest(0.01, 1.0, 100, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(-0.1, 1.0, 100, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(1.1, 1.0, 100, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(0.01, -1.0, 100, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(0.01, 1.0, -1, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(0.01, 1.0, 2.5, 1e-5), "");
  EXPECT_NE(checkEpsilonRequest(0.01, 1.0, 100, 0.0), "");
  EXPECT_NE(checkEpsilonRequest(0.01, 1.0, 100, 1.0), "");
  EXPECT_NE(checkEpsilonRequest(0.01, NAN, 100, 1e-5), "");
}

} // namespace
