//===- Clipping.cpp - Per-sample clip factors on the CPU ------------------===//

#include "Element.h"

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cpu {

void clip_factors(Rank *rank, DType acc, const void *n2, const void *mask,
                  void *c, int64_t batch, int64_t unitRecords, ClipMode mode,
                  double clipShare, double gamma, double relErr) {
  if (unitRecords < 1 || batch % unitRecords != 0)
    throw std::invalid_argument("clip_factors: the batch " +
                                std::to_string(batch) +
                                " is not a multiple of the unit's " +
                                std::to_string(unitRecords) + " records");
  // The run's C (StepState::clipNorm) times this factor's share of it.
  const double maxNorm = stepState(rank).clipNorm * clipShare;
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *n2a = static_cast<const A *>(n2);
    auto *m = static_cast<const A *>(mask);
    auto *ca = static_cast<A *>(c);
    for (int64_t b = 0; b < batch; ++b) {
      double sq = n2a[b / unitRecords];
      // A masked sample, or one whose norm is NaN (min(1, NaN) would let
      // it through unclipped), contributes nothing. A Gram norm can round
      // to slightly below zero; its true value is >= 0.
      if (m[b] == A(0) || std::isnan(sq)) {
        ca[b] = A(0);
        continue;
      }
      double n = std::sqrt(std::max(sq, 0.0)) * (1.0 + relErr);
      double f = mode == ClipMode::Automatic
                     ? maxNorm / (n + gamma)
                     : std::min(1.0, maxNorm / (n + 1e-6));
      // Rounded toward zero into an f32 c, so that storing c never lifts
      // ||c grad|| above the bound computed in f64.
      double v = double(m[b]) * f;
      A stored = A(v);
      if (double(stored) > v)
        stored = std::nextafter(stored, A(0));
      ca[b] = stored;
    }
  });
}

} // namespace dprt::cpu
