//===- Accountant.h - RDP accountant of the sampled Gaussian ----*- C++ -*-===//
//
// Rényi-DP accounting of DP-SGD: each step is the Poisson-subsampled Gaussian
// mechanism (sampling rate q, noise multiplier sigma = noise std / clip
// bound); steps compose by adding RDP order by order; the total is converted
// to (epsilon, delta).
//
// The formulas and the grid of orders are those of Google's dp-accounting
// 0.6.0 (dp_accounting/rdp/rdp_privacy_accountant.py), function for function,
// so that the epsilon reported here matches that package to rounding:
//  - integer orders: the exact binomial expansion of Mironov, Talwar, Zhang,
//    "Rényi Differential Privacy of the Sampled Gaussian Mechanism" (2019),
//    summed in log space (_compute_log_a_int);
//  - fractional orders: the two-sided series of Section 3.3 of that paper
//    (_compute_log_a_frac), at most 1000 terms; an order whose series does
//    not converge gets RDP = +inf and so drops out of the minimum;
//  - RDP -> (epsilon, delta): Balle, Barthe, Gaboardi, Hsu, Sato, "Hypothesis
//    testing interpretations and Rényi differential privacy" (2020),
//    Proposition 12, as in compute_epsilon.
//
// The neighbouring relation is add-or-remove-one record (the record is the
// privacy unit), which is what Poisson sampling amplification assumes; as in
// dp-accounting (NeighboringRelation.ADD_OR_REMOVE_ONE), the RDP of the
// remove direction is used, which bounds the add direction too (MTZ19,
// Section 3).
//
// PrivacyAccountant is the interface that both this accountant and the
// tighter PLD accountant (PldAccountant.h) implement; makeAccountant and the
// AccountantKind overloads of epsilon and calibrateSigma select one by kind.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PRIVACY_ACCOUNTANT_H
#define DPRT_PRIVACY_ACCOUNTANT_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dprt::privacy {

/// dp-accounting's DEFAULT_RDP_ORDERS: 1.1, 1.2, ..., 10.9 (computed as
/// 1 + x / 10.0), 11, 12, ..., 63, 128, 256, 512, 1024.
const std::vector<double> &defaultRdpOrders();

/// log(exp(logX) + exp(logY)) without overflow.
double logAdd(double logX, double logY);

/// log(erfc(x)), accurate also where erfc(x) underflows (x > 26).
double logErfc(double x);

/// log |binomial(n, k)| = lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1); n may be
/// fractional.
double logBinomial(double n, double k);

/// log A_alpha for integer alpha >= 1 and 0 < q < 1, where
///   A_alpha = sum_{i=0}^{alpha} C(alpha, i) q^i (1-q)^(alpha-i)
///             exp((i^2 - i) / (2 sigma^2)).
double logAInteger(double q, double sigma, int64_t alpha);

/// log A_alpha for fractional alpha > 1 and 0 < q < 1 (MTZ19 Section 3.3),
/// or +inf when the series has not converged after 1000 terms.
double logAFractional(double q, double sigma, double alpha);

/// RDP at `order` of one step of the Poisson-subsampled Gaussian mechanism:
/// 0 if q = 0; +inf if sigma = 0 or order = inf; order / (2 sigma^2) if q = 1
/// (the plain Gaussian mechanism); log A_order / (order - 1) otherwise.
/// Requires q in [0, 1], sigma >= 0, order > 1.
double rdpSampledGaussian(double q, double sigma, double order);

/// rdpSampledGaussian at every order.
std::vector<double> rdpSampledGaussian(double q, double sigma,
                                       const std::vector<double> &orders);

/// `steps` consecutive steps with the same sampling rate and noise.
struct SampledGaussianSegment {
  double q;
  double sigma;
  int64_t steps;
};

/// RDP of the composition of the segments: sum of steps * rdp per order.
std::vector<double>
composeRdp(const std::vector<SampledGaussianSegment> &segments,
           const std::vector<double> &orders = defaultRdpOrders());

struct EpsilonAndOrder {
  double epsilon;
  /// The RDP order at which the minimum is attained (0 from the PLD
  /// accountant, which has no orders).
  double order;
  /// The PLD accountant's loss grid spacing (0 from the RDP accountant).
  double interval = 0;
};

/// The smallest epsilon over the orders for which the RDP curve gives
/// (epsilon, delta)-DP, with Balle et al.'s conversion
///   epsilon = rdp + log1p(-1/a) - log(delta a) / (a - 1)   (a > 1.01),
/// epsilon = 0 where delta^2 > 1 - exp(-rdp) (the KL bound), clamped at 0.
/// Requires delta > 0 and orders.size() == rdp.size().
EpsilonAndOrder epsilonFromRdp(const std::vector<double> &orders,
                               const std::vector<double> &rdp, double delta);

/// Epsilon after `steps` steps with rate q and noise multiplier sigma, over
/// the default orders.
EpsilonAndOrder epsilon(double q, double sigma, int64_t steps, double delta);

/// Epsilon after the segments (for example a schedule that varies q).
EpsilonAndOrder epsilon(const std::vector<SampledGaussianSegment> &segments,
                        double delta);

/// The smallest delta over the orders for which the RDP curve gives
/// (epsilon, delta)-DP: the inverse of epsilonFromRdp's conversion,
///   log delta = (a - 1)(rdp - epsilon + log1p(-1/a)) - log a   (a > 1.01),
/// or the KL bound log delta = log(1 - exp(-rdp)) / 2, whichever is smaller
/// (dp-accounting's compute_delta); at most 1. Requires epsilon >= 0.
double deltaFromRdp(const std::vector<double> &orders,
                    const std::vector<double> &rdp, double epsilon);

/// Returns what is wrong with an (epsilon, delta) accounting request, or an
/// empty string if it is valid: q in [0, 1], sigma >= 0, steps >= 0, delta in
/// (0, 1), all finite.
std::string checkEpsilonRequest(double q, double sigma, double steps,
                                double delta);

/// Which accountant turns the steps into (epsilon, delta).
enum class AccountantKind {
  /// Renyi DP over a grid of orders, converted by Balle et al.'s bound.
  Rdp,
  /// Privacy loss distributions (PldAccountant.h): no conversion loss, so a
  /// smaller epsilon for the same noise.
  Pld,
};

/// The accountant used when none is named: PLD, which matches dp-accounting's
/// PLD accountant to 1 % on the test grid (test/privacy).
constexpr AccountantKind kDefaultAccountant = AccountantKind::Pld;

/// "rdp" or "pld".
const char *accountantName(AccountantKind kind);

/// The kind called `name` ("rdp" or "pld"), or nothing.
std::optional<AccountantKind> parseAccountantKind(const std::string &name);

/// Epsilon after the segments by the chosen accountant (the PLD one with its
/// default grid). For PLD, `order` is 0 and `interval` the grid spacing.
EpsilonAndOrder epsilon(AccountantKind kind,
                        const std::vector<SampledGaussianSegment> &segments,
                        double delta);

/// Epsilon after `steps` steps with rate q and noise multiplier sigma by the
/// chosen accountant.
EpsilonAndOrder epsilon(AccountantKind kind, double q, double sigma,
                        int64_t steps, double delta);

/// Outcome of calibrateSigma: `sigma` and `epsilon` are meaningful only when
/// `error` is empty.
struct SigmaCalibration {
  double sigma = 0;
  /// Epsilon reached at `sigma` (<= the target) and its order (RDP) or grid
  /// interval (PLD), as in EpsilonAndOrder.
  double epsilon = 0;
  double order = 0;
  double interval = 0;
  std::string error;

  bool ok() const { return error.empty(); }
};

/// Noise multipliers searched by calibrateSigma.
constexpr double kMinCalibratedSigma = 1e-2;
constexpr double kMaxCalibratedSigma = 1e6;

/// The smallest noise multiplier sigma with epsilon(kind, q, sigma, steps,
/// delta) <= targetEpsilon, by bisection on log sigma until the bracket's
/// relative width is below `relativeTolerance`; the upper end of the bracket
/// (which meets the target) is returned. Fails with a message when the
/// inputs are invalid (targetEpsilon <= 0, delta outside (0, 1), q outside
/// (0, 1], steps < 1) or when sigma would leave [kMinCalibratedSigma,
/// kMaxCalibratedSigma].
SigmaCalibration calibrateSigma(AccountantKind kind, double targetEpsilon,
                                double delta, double q, int64_t steps,
                                double relativeTolerance = 1e-7);

/// calibrateSigma with the RDP accountant.
SigmaCalibration calibrateSigma(double targetEpsilon, double delta, double q,
                                int64_t steps, double relativeTolerance = 1e-7);

/// A running accountant for a training loop: compose each step (or a run of
/// steps) as it happens and ask for epsilon so far. The history is kept as
/// segments so that a checkpoint can save it and a resumed run rebuild the
/// same state with compose(). makeAccountant(kind) gives one of either kind.
class PrivacyAccountant {
public:
  virtual ~PrivacyAccountant() = default;

  virtual AccountantKind kind() const = 0;

  /// Adds `steps` steps of the sampled Gaussian mechanism (rate q, noise
  /// multiplier sigma). Requires q in [0, 1], sigma >= 0, steps >= 0.
  virtual void compose(double q, double sigma, int64_t steps = 1) = 0;

  /// The smallest epsilon for which the steps so far are (epsilon,
  /// delta)-DP, as this accountant bounds it. Requires delta in (0, 1).
  virtual EpsilonAndOrder epsilon(double delta) const = 0;

  /// The smallest delta for which the steps so far are (epsilon, delta)-DP,
  /// as this accountant bounds it. Requires epsilon >= 0.
  virtual double delta(double epsilon) const = 0;

  /// The composed history, consecutive steps with the same (q, sigma)
  /// merged.
  virtual const std::vector<SampledGaussianSegment> &segments() const = 0;

  int64_t steps() const;

  virtual std::unique_ptr<PrivacyAccountant> clone() const = 0;
};

/// A new accountant of the given kind with no steps (PLD with its default
/// grid).
std::unique_ptr<PrivacyAccountant> makeAccountant(AccountantKind kind);

/// The RDP accountant.
class RdpAccountant final : public PrivacyAccountant {
public:
  explicit RdpAccountant(std::vector<double> orders = defaultRdpOrders());

  AccountantKind kind() const override { return AccountantKind::Rdp; }

  /// Adds `steps` steps of the sampled Gaussian mechanism (rate q, noise
  /// multiplier sigma). Requires q in [0, 1], sigma >= 0, steps >= 0.
  void compose(double q, double sigma, int64_t steps = 1) override;

  EpsilonAndOrder epsilon(double delta) const override;
  double delta(double epsilon) const override;

  const std::vector<double> &orders() const { return orders_; }
  const std::vector<double> &rdp() const { return rdp_; }
  const std::vector<SampledGaussianSegment> &segments() const override {
    return segments_;
  }

  std::unique_ptr<PrivacyAccountant> clone() const override;

private:
  std::vector<double> orders_;
  std::vector<double> rdp_;
  std::vector<SampledGaussianSegment> segments_;
  // One step's RDP for the last (q, sigma) seen: a training loop composes the
  // same mechanism every step, and one evaluation costs up to milliseconds.
  double cachedQ_ = -1;
  double cachedSigma_ = -1;
  std::vector<double> cachedStepRdp_;
};

} // namespace dprt::privacy

#endif // DPRT_PRIVACY_ACCOUNTANT_H
