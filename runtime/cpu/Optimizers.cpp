//===- Optimizers.cpp - Optimizer steps on parameter shards on the CPU ----===//
//
// Master weights, gradients and optimizer state are acc buffers; each
// element is updated in f64 and rounded once. The learning rate, its
// schedule factor lrScale, the weight decay, gradScale (1 / B_expected) and
// the step count come from the StepState in the arena, as on the GPU, so
// that the run sets them and a captured step stays valid.
//
//===----------------------------------------------------------------------===//

#include "Element.h"
#include "GradientNoise.h"

#include "dprt/kernels.h"

namespace dprt::cpu {

void sgd_update(Rank *rank, DType acc, void *master, const void *grad,
                int64_t n, int64_t noiseIndex) {
  const StepState &st = stepState(rank);
  const GradientNoise noise(st, noiseIndex >= 0);
  const double step = st.lr * st.lrScale, weightDecay = st.weightDecay;
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *w = static_cast<A *>(master);
    auto *g = static_cast<const A *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      double gi = double(noise.add(g[i], noiseIndex + i)) * st.gradScale;
      w[i] = A(double(w[i]) - step * (gi + weightDecay * double(w[i])));
    }
  });
}

void momentum_update(Rank *rank, DType acc, void *master, void *velocity,
                     const void *grad, int64_t n, double momentum,
                     bool nesterov, int64_t noiseIndex) {
  const StepState &st = stepState(rank);
  const GradientNoise noise(st, noiseIndex >= 0);
  const double step = st.lr * st.lrScale, weightDecay = st.weightDecay;
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *w = static_cast<A *>(master);
    auto *vel = static_cast<A *>(velocity);
    auto *g = static_cast<const A *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      double gi = double(noise.add(g[i], noiseIndex + i)) * st.gradScale;
      double v = momentum * double(vel[i]) + gi;
      vel[i] = A(v);
      double d = nesterov ? gi + momentum * v : v;
      w[i] = A(double(w[i]) - step * (d + weightDecay * double(w[i])));
    }
  });
}

void adamw_update(Rank *rank, DType acc, void *master, void *m, void *v,
                  const void *grad, int64_t n, double beta1, double beta2,
                  double eps, int64_t noiseIndex) {
  const StepState &st = stepState(rank);
  const GradientNoise noise(st, noiseIndex >= 0);
  const double step = st.lr * st.lrScale, weightDecay = st.weightDecay;
  // Bias corrections 1 - beta^t, t = StepState::step (from 1).
  double t = double(st.step);
  double c1 = 1.0 - std::pow(beta1, t);
  double c2 = 1.0 - std::pow(beta2, t);
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *w = static_cast<A *>(master);
    auto *ma = static_cast<A *>(m);
    auto *va = static_cast<A *>(v);
    auto *g = static_cast<const A *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      double gi = double(noise.add(g[i], noiseIndex + i)) * st.gradScale;
      double mi = beta1 * double(ma[i]) + (1.0 - beta1) * gi;
      double vi = beta2 * double(va[i]) + (1.0 - beta2) * gi * gi;
      ma[i] = A(mi);
      va[i] = A(vi);
      double u = (mi / c1) / (std::sqrt(vi / c2) + eps);
      w[i] = A(double(w[i]) - step * (u + weightDecay * double(w[i])));
    }
  });
}

} // namespace dprt::cpu
