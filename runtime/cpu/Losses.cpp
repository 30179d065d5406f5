//===- Losses.cpp - Per-sample losses on the CPU --------------------------===//
//
// One loss per sample (the privacy unit). Sums over classes and tokens run
// in f64.
//
//===----------------------------------------------------------------------===//

#include "Element.h"

#include "dprt/kernels.h"

#include <limits>

namespace dprt::cpu {

namespace {

bool counted(const int32_t *targets, int64_t r, bool hasIgnore,
             int64_t ignoreIndex) {
  return !(hasIgnore && int64_t(targets[r]) == ignoreIndex);
}

/// Weight of each counted token of a sample in its loss: 1/count for Mean,
/// 1 for Sum; 0 when no token counts.
double tokenWeight(const int32_t *targets, int64_t b, int64_t tokens,
                   bool hasIgnore, int64_t ignoreIndex, Reduction reduction) {
  int64_t count = 0;
  for (int64_t t = 0; t < tokens; ++t)
    count += counted(targets, b * tokens + t, hasIgnore, ignoreIndex);
  if (count == 0)
    return 0.0;
  return reduction == Reduction::Mean ? 1.0 / double(count) : 1.0;
}

template <class T>
void crossEntropyForward(const T *logits, const int32_t *targets,
                         AccOf<T> *loss, AccOf<T> *lse, int64_t batch,
                         int64_t tokens, int64_t classes, bool hasIgnore,
                         int64_t ignoreIndex, Reduction reduction) {
  for (int64_t b = 0; b < batch; ++b) {
    double w =
        tokenWeight(targets, b, tokens, hasIgnore, ignoreIndex, reduction);
    double sum = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      const T *row = logits + r * classes;
      // lse = max + log sum_c exp(logit_c - max).
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < classes; ++c)
        mx = std::max(mx, double(load(row, c)));
      double s = 0;
      for (int64_t c = 0; c < classes; ++c)
        s += std::exp(double(load(row, c)) - mx);
      double l = mx + std::log(s);
      lse[r] = AccOf<T>(l);
      if (counted(targets, r, hasIgnore, ignoreIndex))
        sum += l - double(load(row, targets[r]));
    }
    loss[b] = AccOf<T>(w * sum);
  }
}

template <class T>
void crossEntropyBackward(const T *logits, const int32_t *targets,
                          const AccOf<T> *lse, const AccOf<T> *dloss,
                          T *dlogits, int64_t batch, int64_t tokens,
                          int64_t classes, bool hasIgnore, int64_t ignoreIndex,
                          Reduction reduction) {
  for (int64_t b = 0; b < batch; ++b) {
    double scale = double(dloss[b]) * tokenWeight(targets, b, tokens, hasIgnore,
                                                  ignoreIndex, reduction);
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      const T *row = logits + r * classes;
      T *out = dlogits + r * classes;
      if (!counted(targets, r, hasIgnore, ignoreIndex)) {
        for (int64_t c = 0; c < classes; ++c)
          store(out, c, 0.0);
        continue;
      }
      // scale * (softmax_c - [c == target]), softmax_c = exp(logit_c - lse).
      double l = lse[r];
      for (int64_t c = 0; c < classes; ++c) {
        double p = std::exp(double(load(row, c)) - l);
        store(out, c, scale * (p - (c == targets[r] ? 1.0 : 0.0)));
      }
    }
  }
}

} // namespace

void cross_entropy_forward(Rank *, DType dt, const void *logits,
                           const int32_t *targets, void *loss, void *lse,
                           int64_t batch, int64_t tokens, int64_t classes,
                           bool hasIgnore, int64_t ignoreIndex,
                           Reduction reduction) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    crossEntropyForward(static_cast<const T *>(logits), targets,
                        static_cast<AccOf<T> *>(loss),
                        static_cast<AccOf<T> *>(lse), batch, tokens, classes,
                        hasIgnore, ignoreIndex, reduction);
  });
}

void cross_entropy_backward(Rank *, DType dt, const void *logits,
                            const int32_t *targets, const void *lse,
                            const void *dloss, void *dlogits, int64_t batch,
                            int64_t tokens, int64_t classes, bool hasIgnore,
                            int64_t ignoreIndex, Reduction reduction) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    crossEntropyBackward(static_cast<const T *>(logits), targets,
                         static_cast<const AccOf<T> *>(lse),
                         static_cast<const AccOf<T> *>(dloss),
                         static_cast<T *>(dlogits), batch, tokens, classes,
                         hasIgnore, ignoreIndex, reduction);
  });
}

void mse_forward(Rank *, DType dt, const void *prediction, const void *target,
                 void *loss, int64_t batch, int64_t features,
                 Reduction reduction) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *p = static_cast<const T *>(prediction);
    auto *y = static_cast<const T *>(target);
    auto *l = static_cast<AccOf<T> *>(loss);
    for (int64_t b = 0; b < batch; ++b) {
      double s = 0;
      for (int64_t j = 0; j < features; ++j) {
        double d = double(load(p, b * features + j)) -
                   double(load(y, b * features + j));
        s += d * d;
      }
      l[b] = AccOf<T>(reduction == Reduction::Mean ? s / double(features) : s);
    }
  });
}

void mse_backward(Rank *, DType dt, const void *prediction, const void *target,
                  const void *dloss, void *dprediction, int64_t batch,
                  int64_t features, Reduction reduction) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *p = static_cast<const T *>(prediction);
    auto *y = static_cast<const T *>(target);
    auto *dl = static_cast<const AccOf<T> *>(dloss);
    auto *dp = static_cast<T *>(dprediction);
    for (int64_t b = 0; b < batch; ++b) {
      // d/dp of mean (p - t)^2 is 2 (p - t) / features.
      double scale = 2.0 * double(dl[b]) /
                     (reduction == Reduction::Mean ? double(features) : 1.0);
      for (int64_t j = 0; j < features; ++j) {
        int64_t i = b * features + j;
        store(dp, i, scale * (double(load(p, i)) - double(load(y, i))));
      }
    }
  });
}

} // namespace dprt::cpu
