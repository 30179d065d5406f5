//===- Optimizers.cpp - Optimizer steps on parameter shards on the CPU ----===//
//
// Master weights, gradients and optimizer state are acc buffers; each
// element is updated in f64 and rounded once. The learning rate, its
// schedule factor lrScale, the weight decay, gradScale (1 / B_expected) and
// the step count come from the StepState in the arena, as on the GPU, so
// that the run sets them and a captured step stays valid.
//
// Each optimizer is one element step (Sgd, Momentum, AdamW) that the plain
// update and the *_update_rows form both run, on a gradient read from a
// buffer or formed from materialized rows, so that the two give the same
// bits by construction.
//
//===----------------------------------------------------------------------===//

#include "Element.h"
#include "GradientNoise.h"
#include "WeightedRows.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

namespace dprt::cpu {

namespace {

/// The step's scalars from the StepState.
struct Step {
  double lr, weightDecay, gradScale;
  explicit Step(const StepState &st)
      : lr(st.lr * st.lrScale), weightDecay(st.weightDecay),
        gradScale(st.gradScale) {}

  /// w -= lr * (d + weightDecay * w), rounded once: every optimizer's last
  /// operation, on its direction d.
  template <class A> void descend(A &w, double d) const {
    w = A(double(w) - lr * (d + weightDecay * double(w)));
  }
};

template <class A> struct Sgd {
  A *w;
  void operator()(const Step &s, int64_t i, double g) const {
    s.descend(w[i], g);
  }
};

template <class A> struct Momentum {
  A *w, *velocity;
  double momentum;
  bool nesterov;
  void operator()(const Step &s, int64_t i, double g) const {
    double v = momentum * double(velocity[i]) + g;
    velocity[i] = A(v);
    s.descend(w[i], nesterov ? g + momentum * v : v);
  }
};

template <class A> struct AdamW {
  A *w, *m, *v;
  double beta1, beta2, eps;
  /// Bias corrections 1 - beta^t, t = StepState::step (from 1).
  double c1, c2;
  AdamW(const StepState &st, A *w, A *m, A *v, double beta1, double beta2,
        double eps)
      : w(w), m(m), v(v), beta1(beta1), beta2(beta2), eps(eps),
        c1(1.0 - std::pow(beta1, double(st.step))),
        c2(1.0 - std::pow(beta2, double(st.step))) {}
  void operator()(const Step &s, int64_t i, double g) const {
    double mi = beta1 * double(m[i]) + (1.0 - beta1) * g;
    double vi = beta2 * double(v[i]) + (1.0 - beta2) * g * g;
    m[i] = A(mi);
    v[i] = A(vi);
    s.descend(w[i], (mi / c1) / (std::sqrt(vi / c2) + eps));
  }
};

/// Elements a rows update forms at a time: its sums stay in cache.
constexpr int64_t kRowsBlock = 4096;

/// Runs `opt` on elements [0, n) with the gradient values block(begin, end)
/// points to (element i at [i - begin]), plus the noise at noiseIndex + i.
/// A gradient value that is not finite sets st.nonFiniteGradient (the
/// driver's check after dp_apply; backend.inc's updatesMetNonFinite).
template <class A, class Opt, class Block>
void applyUpdate(StepState &st, int64_t n, int64_t noiseIndex,
                 int64_t blockElems, const Opt &opt, const Block &block) {
  const Step s(st);
  const GradientNoise noise(st, noiseIndex >= 0);
  bool finite = true;
  for (int64_t begin = 0; begin < n; begin += blockElems) {
    const int64_t end = std::min(n, begin + blockElems);
    const A *g = block(begin, end);
    for (int64_t i = begin; i < end; ++i) {
      finite &= std::isfinite(g[i - begin]);
      opt(s, i, double(noise.add(g[i - begin], noiseIndex + i)) * s.gradScale);
    }
  }
  if (!finite)
    st.nonFiniteGradient = 1;
}

/// The optimizer on the gradient buffer `grad`; makeOpt(A{}) builds it.
template <class MakeOpt>
void updateFromBuffer(Rank *rank, DType acc, const void *grad, int64_t n,
                      int64_t noiseIndex, const MakeOpt &makeOpt) {
  StepState &st = mutableStepState(rank);
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *g = static_cast<const A *>(grad);
    applyUpdate<A>(st, n, noiseIndex, std::max<int64_t>(n, 1), makeOpt(tag),
                   [g](int64_t begin, int64_t) { return g + begin; });
  });
}

/// The optimizer on the gradient rows_weighted_sum(rows, g, c) would store
/// into a zeroed buffer, formed a block at a time.
template <class MakeOpt>
void updateFromRows(Rank *rank, DType rows, const void *g, const void *c,
                    int64_t batch, int64_t n, int64_t noiseIndex,
                    const MakeOpt &makeOpt) {
  StepState &st = mutableStepState(rank);
  dispatchRows(rows, g, n, [&](const auto &gt, auto accTag) {
    using A = decltype(accTag);
    auto *ca = static_cast<const A *>(c);
    double *sum = scratch<double>(0, kRowsBlock);
    A *grad = scratch<A>(1, kRowsBlock);
    applyUpdate<A>(st, n, noiseIndex, kRowsBlock, makeOpt(A{}),
                   [&](int64_t begin, int64_t end) {
                     std::fill(sum, sum + (end - begin), 0.0);
                     addWeightedRows(gt, ca, batch, n, begin, end, sum);
                     // rows_weighted_sum's A(double(out[j]) + sum[j]) with
                     // out[j] = +0, which turns a -0 sum into +0.
                     for (int64_t j = 0; j < end - begin; ++j)
                       grad[j] = A(double(0) + sum[j]);
                     return static_cast<const A *>(grad);
                   });
  });
}

/// The compute-type copy of the updated master, when the caller keeps one
/// (params != nullptr): cast's bits, by construction.
void storeCopy(Rank *rank, DType acc, const void *master, DType dt,
               void *params, int64_t n) {
  if (params && n > 0)
    cast(rank, acc, master, dt, params, n);
}

} // namespace

bool updatesMetNonFinite(Rank *rank) {
  return stepState(rank).nonFiniteGradient != 0;
}

void sgd_update(Rank *rank, DType acc, void *master, const void *grad,
                int64_t n, int64_t noiseIndex, DType dt, void *params) {
  updateFromBuffer(rank, acc, grad, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return Sgd<A>{static_cast<A *>(master)};
  });
  storeCopy(rank, acc, master, dt, params, n);
}

void sgd_update_rows(Rank *rank, DType rows, void *master, const void *g,
                     const void *c, int64_t batch, int64_t n,
                     int64_t noiseIndex, DType dt, void *params) {
  updateFromRows(rank, rows, g, c, batch, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return Sgd<A>{static_cast<A *>(master)};
  });
  storeCopy(rank, accOf(rows), master, dt, params, n);
}

void momentum_update(Rank *rank, DType acc, void *master, void *velocity,
                     const void *grad, int64_t n, double momentum,
                     bool nesterov, int64_t noiseIndex, DType dt,
                     void *params) {
  updateFromBuffer(rank, acc, grad, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return Momentum<A>{static_cast<A *>(master), static_cast<A *>(velocity),
                       momentum, nesterov};
  });
  storeCopy(rank, acc, master, dt, params, n);
}

void momentum_update_rows(Rank *rank, DType rows, void *master, void *velocity,
                          const void *g, const void *c, int64_t batch,
                          int64_t n, double momentum, bool nesterov,
                          int64_t noiseIndex, DType dt, void *params) {
  updateFromRows(rank, rows, g, c, batch, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return Momentum<A>{static_cast<A *>(master), static_cast<A *>(velocity),
                       momentum, nesterov};
  });
  storeCopy(rank, accOf(rows), master, dt, params, n);
}

void adamw_update(Rank *rank, DType acc, void *master, void *m, void *v,
                  const void *grad, int64_t n, double beta1, double beta2,
                  double eps, int64_t noiseIndex, DType dt, void *params) {
  updateFromBuffer(rank, acc, grad, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return AdamW<A>(stepState(rank), static_cast<A *>(master),
                    static_cast<A *>(m), static_cast<A *>(v), beta1, beta2,
                    eps);
  });
  storeCopy(rank, acc, master, dt, params, n);
}

void adamw_update_rows(Rank *rank, DType rows, void *master, void *m, void *v,
                       const void *g, const void *c, int64_t batch, int64_t n,
                       double beta1, double beta2, double eps,
                       int64_t noiseIndex, DType dt, void *params) {
  updateFromRows(rank, rows, g, c, batch, n, noiseIndex, [&](auto tag) {
    using A = decltype(tag);
    return AdamW<A>(stepState(rank), static_cast<A *>(master),
                    static_cast<A *>(m), static_cast<A *>(v), beta1, beta2,
                    eps);
  });
  storeCopy(rank, accOf(rows), master, dt, params, n);
}

// Every update has run when its call returns: a group has nothing to defer.
void update_group(Rank *, bool) {}

} // namespace dprt::cpu
