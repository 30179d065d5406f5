//===- PldAccountant.h - PLD accountant of the sampled Gaussian -*- C++ -*-===//
//
// Privacy loss distribution (PLD) accounting of DP-SGD: the distribution of
// the privacy loss L = log(p(o) / q(o)), o ~ P, of one step of the
// Poisson-subsampled Gaussian mechanism is discretized on a grid of spacing
// d, composed over the steps by convolution (one FFT, a pointwise power per
// segment, one inverse FFT), and its hockey-stick divergence
//   delta(eps) = P[L = inf] + E_P[(1 - exp(eps - L))_+]
// gives the tightest (eps, delta) of the composition up to the grid. Unlike
// RDP, nothing is lost in a conversion: PLD's epsilon is smaller, so a target
// epsilon needs less noise.
//
// Neighbouring relation: add or remove one record, as the RDP accountant and
// dp-accounting's default (NeighboringRelation.ADD_OR_REMOVE_ONE). With
// N = N(0, sigma^2) and N_s = N(s, sigma^2), one step is the pair
//   remove: P = (1-q) N + q N_-1,  Q = N              (D has the record)
//   add:    P = N,                 Q = (1-q) N + q N_1 (D' has the record)
// Each direction is composed on its own (a neighbouring pair is in the same
// direction at every step) and the reported epsilon is the larger of the two,
// as dp-accounting's PrivacyLossDistribution does. The one-dimensional pair
// is the worst case of the multi-dimensional mechanism with clipping bound 1
// (sensitivity 1, noise multiplier sigma).
//
// Discretization (pessimistic "connect the dots", Doroshenko, Ghazi, Kamath,
// Kumar, Manurangsi, "Connect the Dots: Tighter Discrete Approximations of
// Privacy Loss Distributions", PETS 2022): the mass of P whose loss lies in
// [k d, (k+1) d) is split between the two grid points so that both its
// P-mass and its Q-mass (E_P[exp(-L)]) are kept; the mass above the largest
// grid point is split between that point and +inf the same way, the mass
// below the smallest is moved up to it. The discrete PLD then has exactly
// the true delta(eps) at every grid point and a larger one in between
// (delta is convex in exp(eps)), so it dominates the mechanism, and so does
// its composition: the reported epsilon is an upper bound, up to rounding.
// The grid, the Gaussian tails cut at mass exp(-50) and the composition's
// tails cut by a Chernoff bound at total mass 1e-15 (added to P[L = inf])
// follow Google's dp-accounting 0.6.0 (PLDAccountant,
// value_discretization_interval 1e-4), whose epsilon this one matches on
// the same grid to 1e-5 relative at delta >= 1e-5 and to 3.3e-4 at delta =
// 1e-8, where the FFT's rounding shows (test/privacy/pld_reference.tsv,
// docs/privacy.md). PldOptions::refine makes the grid finer where 1e-4 is
// needlessly loose.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PRIVACY_PLDACCOUNTANT_H
#define DPRT_PRIVACY_PLDACCOUNTANT_H

#include "privacy/Accountant.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace dprt::privacy {

/// A privacy loss distribution on a grid: mass probabilities[j] at loss
/// (offset + j) * interval, and infinityMass at +inf (outcomes that Q cannot
/// produce, or mass cut away pessimistically).
struct DiscretePld {
  double interval = 0;
  int64_t offset = 0;
  std::vector<double> probabilities;
  double infinityMass = 0;

  double loss(size_t j) const {
    return static_cast<double>(offset + static_cast<int64_t>(j)) * interval;
  }

  /// The hockey-stick divergence at `epsilon`:
  ///   infinityMass + sum_j p_j (1 - exp(epsilon - loss_j))_+.
  double deltaForEpsilon(double epsilon) const;

  /// The smallest epsilon >= 0 with deltaForEpsilon(epsilon) <= delta (+inf
  /// when infinityMass > delta). Between two grid points delta(eps) is
  /// U - exp(eps) V with U, V the P- and Q-mass above, solved exactly.
  double epsilonForDelta(double delta) const;
};

/// Both directions of the add-or-remove neighbouring relation.
struct PldPair {
  DiscretePld remove;
  DiscretePld add;

  /// The larger epsilon of the two directions.
  double epsilonForDelta(double delta) const;
  /// The larger delta of the two directions.
  double deltaForEpsilon(double epsilon) const;
};

struct PldOptions {
  /// The grid spacing d of the losses (dp-accounting's
  /// value_discretization_interval), or the largest one with `refine`.
  /// Smaller is tighter and slower; every grid gives an upper bound.
  double interval = 1e-4;
  /// Make the grid finer where `interval` would make epsilon needlessly
  /// loose (a matter of tightness, not of safety):
  ///  - past 1e5 steps, d * sqrt(1e5 / T): the discretization's excess
  ///    grows like T d^2 (PLD would be looser than RDP near 1e7 steps);
  ///  - where one step's losses are small next to d (small q, large sigma),
  ///    d <= 0.1 Var(L) / E|L| for every step: connect-the-dots adds about
  ///    d E|L| to a step's variance Var(L), so this keeps the added variance
  ///    near 10 %. With Var(L) ~ q^2 (e^(1/sigma^2) - 1) (the chi-square
  ///    divergence) and E|L| ~ 2 q TV(N_0, N_1) = 2 q erf(1 / (2 sqrt(2)
  ///    sigma)); e.g. q = 1e-4, sigma = 5 gets d = 2.6e-6 and half the
  ///    epsilon of d = 1e-4.
  bool refine = true;
  /// The composed distribution keeps at most this many grid points per
  /// direction (an FFT of this length, 16 bytes a point): where the
  /// composition would need more, the interval is doubled until it fits.
  /// A coarser grid is still pessimistic, only less tight; the interval used
  /// is reported.
  int64_t maxPoints = int64_t(1) << 21;
  /// Bound on the mass cut from the tails of the composition, added to the
  /// mass at +inf (dp-accounting's tail_mass_truncation).
  double tailMass = 1e-15;
};

/// The most steps a PLD composes. The FFT power's rounding grows with the
/// steps (a relative 1e-16 per step in each Fourier coefficient): at 1e9
/// steps it moves epsilon at delta = 1e-8 by tens of percent (upwards in the
/// tests), at 1e12 it would be noise. Longer compositions get epsilon = +inf
/// (no guarantee computed); the RDP accountant has no such limit.
constexpr int64_t kMaxPldSteps = 1000000000;

/// One step of the Poisson-subsampled Gaussian (rate q in (0, 1], noise
/// multiplier sigma > 0) discretized on the grid of spacing `interval`.
PldPair sampledGaussianPld(double q, double sigma, double interval);

/// The composition of the segments (each `steps` steps of the sampled
/// Gaussian with its q and sigma) on a grid of spacing options.interval, or
/// a coarser one where the result would exceed options.maxPoints (the
/// interval of the result says which). Segments with q = 0 or steps = 0
/// compose nothing; one with sigma = 0 (and q > 0, steps > 0) makes the
/// result non-private: all mass at +inf, as does a total of more than
/// kMaxPldSteps steps. Requires q in [0, 1], sigma >= 0, steps >= 0.
PldPair
composeSampledGaussian(const std::vector<SampledGaussianSegment> &segments,
                       const PldOptions &options = {});

/// Epsilon of the composition of the segments for `delta`, and the grid
/// interval used (EpsilonAndOrder::order is 0: a PLD has no order).
EpsilonAndOrder pldEpsilon(const std::vector<SampledGaussianSegment> &segments,
                           double delta, const PldOptions &options = {});

/// Running PLD accountant for a training loop, with RdpAccountant's
/// interface: compose steps as they happen, ask for epsilon so far. The
/// composed distribution is cached until the next compose(), so asking for
/// several deltas, or twice, costs one composition. Not thread-safe (the
/// cache is filled by the const queries).
class PldAccountant final : public PrivacyAccountant {
public:
  explicit PldAccountant(PldOptions options = {});

  AccountantKind kind() const override { return AccountantKind::Pld; }
  void compose(double q, double sigma, int64_t steps = 1) override;
  /// Epsilon for `delta`; `order` is 0, `interval` the grid spacing used.
  EpsilonAndOrder epsilon(double delta) const override;
  double delta(double epsilon) const override;
  const std::vector<SampledGaussianSegment> &segments() const override {
    return segments_;
  }
  std::unique_ptr<PrivacyAccountant> clone() const override;

  const PldOptions &options() const { return options_; }
  /// The composed distribution of the steps so far.
  const PldPair &distribution() const;

private:
  PldOptions options_;
  std::vector<SampledGaussianSegment> segments_;
  mutable std::shared_ptr<const PldPair> composed_;
};

} // namespace dprt::privacy

#endif // DPRT_PRIVACY_PLDACCOUNTANT_H
