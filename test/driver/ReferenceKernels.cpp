//===- ReferenceKernels.cpp - Plain-loop CPU kernels for driver tests -----===//
//
// The driver's tests run hand-written programs that call the kernel API.
// When the build has runtime/cpu's dprt_cpu_kernels, the tests link those;
// this file stands in only where that library is not part of the build, so
// that the driver, its checkpoints and its collectives can be tested on
// their own. It implements just the kernels the fixtures call, for f32 and
// f64, as direct loops over kernels.h's formulas with double accumulation.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace dprt::cpu {
namespace {

template <class Body> void dispatch(DType dt, const char *kernel, Body body) {
  if (dt == DType::F32)
    body(float{});
  else if (dt == DType::F64)
    body(double{});
  else
    throw std::invalid_argument(std::string(kernel) +
                                ": the reference kernels take f32 or f64");
}

const StepState &stepState(const Rank *rank) {
  return *reinterpret_cast<const StepState *>(rank->arena + rank->stateOffset);
}

} // namespace

void linear_forward(Rank *, DType dt, const void *x, const void *w,
                    const void *bias, void *y, int64_t rows, int64_t in,
                    int64_t out) {
  dispatch(dt, "linear_forward", [&](auto tag) {
    using T = decltype(tag);
    auto *X = static_cast<const T *>(x), *W = static_cast<const T *>(w);
    auto *b = static_cast<const T *>(bias);
    auto *Y = static_cast<T *>(y);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = b ? double(b[o]) : 0.0;
        for (int64_t i = 0; i < in; ++i)
          s += double(X[r * in + i]) * double(W[o * in + i]);
        Y[r * out + o] = T(s);
      }
  });
}

void embedding_forward(Rank *, DType dt, const int32_t *tokens,
                       const void *table, void *out, int64_t rows,
                       int64_t vocab, int64_t dim) {
  dispatch(dt, "embedding_forward", [&](auto tag) {
    using T = decltype(tag);
    for (int64_t r = 0; r < rows; ++r) {
      if (tokens[r] < 0 || tokens[r] >= vocab)
        throw std::out_of_range("embedding_forward: token out of range");
      std::memcpy(static_cast<T *>(out) + r * dim,
                  static_cast<const T *>(table) + tokens[r] * dim,
                  sizeof(T) * dim);
    }
  });
}

void cross_entropy_forward(Rank *, DType dt, const void *logits,
                           const int32_t *targets, void *loss, void *lse,
                           int64_t batch, int64_t tokens, int64_t classes,
                           bool hasIgnore, int64_t ignoreIndex,
                           Reduction reduction) {
  dispatch(dt, "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    auto *L = static_cast<const T *>(logits);
    auto *lossOut = static_cast<T *>(loss);
    auto *lseOut = static_cast<T *>(lse);
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0;
      int64_t counted = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t r = b * tokens + t;
        double m = -INFINITY;
        for (int64_t c = 0; c < classes; ++c)
          m = std::max(m, double(L[r * classes + c]));
        double z = 0;
        for (int64_t c = 0; c < classes; ++c)
          z += std::exp(double(L[r * classes + c]) - m);
        const double l = m + std::log(z);
        lseOut[r] = T(l);
        if (hasIgnore && targets[r] == ignoreIndex)
          continue;
        sum += l - double(L[r * classes + targets[r]]);
        ++counted;
      }
      lossOut[b] = T(
          reduction == Reduction::Mean ? (counted ? sum / counted : 0.0) : sum);
    }
  });
}

void cross_entropy_backward(Rank *, DType dt, const void *logits,
                            const int32_t *targets, const void *lse,
                            const void *dloss, void *dlogits, int64_t batch,
                            int64_t tokens, int64_t classes, bool hasIgnore,
                            int64_t ignoreIndex, Reduction reduction) {
  dispatch(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    auto *L = static_cast<const T *>(logits);
    auto *lseIn = static_cast<const T *>(lse);
    auto *seed = static_cast<const T *>(dloss);
    auto *D = static_cast<T *>(dlogits);
    for (int64_t b = 0; b < batch; ++b) {
      int64_t counted = 0;
      for (int64_t t = 0; t < tokens; ++t)
        counted += !(hasIgnore && targets[b * tokens + t] == ignoreIndex);
      const double weight =
          reduction == Reduction::Mean ? (counted ? 1.0 / counted : 0.0) : 1.0;
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t r = b * tokens + t;
        const bool ignored = hasIgnore && targets[r] == ignoreIndex;
        for (int64_t c = 0; c < classes; ++c) {
          double p = std::exp(double(L[r * classes + c]) - double(lseIn[r]));
          double g = p - (c == targets[r] ? 1.0 : 0.0);
          D[r * classes + c] = ignored ? T(0) : T(double(seed[b]) * weight * g);
        }
      }
    }
  });
}

void norm_rank1(Rank *, DType dt, const void *x, const void *dy, void *n2,
                int64_t batch, int64_t in, int64_t out) {
  dispatch(dt, "norm_rank1", [&](auto tag) {
    using T = decltype(tag);
    auto *X = static_cast<const T *>(x), *G = static_cast<const T *>(dy);
    auto *N = static_cast<T *>(n2);
    for (int64_t b = 0; b < batch; ++b) {
      double xx = 0, gg = 0;
      for (int64_t i = 0; i < in; ++i)
        xx += double(X[b * in + i]) * double(X[b * in + i]);
      for (int64_t o = 0; o < out; ++o)
        gg += double(G[b * out + o]) * double(G[b * out + o]);
      N[b] = T(double(N[b]) + xx * gg);
    }
  });
}

void norm_bias(Rank *, DType dt, const void *dy, void *n2, int64_t batch,
               int64_t tokens, int64_t out) {
  dispatch(dt, "norm_bias", [&](auto tag) {
    using T = decltype(tag);
    auto *G = static_cast<const T *>(dy);
    auto *N = static_cast<T *>(n2);
    for (int64_t b = 0; b < batch; ++b) {
      double s2 = 0;
      for (int64_t o = 0; o < out; ++o) {
        double s = 0;
        for (int64_t t = 0; t < tokens; ++t)
          s += double(G[(b * tokens + t) * out + o]);
        s2 += s * s;
      }
      N[b] = T(double(N[b]) + s2);
    }
  });
}

void norm_embedding(Rank *, DType dt, const int32_t *tok, const void *dy,
                    void *n2, int64_t batch, int64_t tokens, int64_t dim) {
  dispatch(dt, "norm_embedding", [&](auto tag) {
    using T = decltype(tag);
    auto *G = static_cast<const T *>(dy);
    auto *N = static_cast<T *>(n2);
    for (int64_t b = 0; b < batch; ++b) {
      double s2 = 0;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t s = 0; s < tokens; ++s) {
          if (tok[b * tokens + t] != tok[b * tokens + s])
            continue;
          for (int64_t j = 0; j < dim; ++j)
            s2 += double(G[(b * tokens + t) * dim + j]) *
                  double(G[(b * tokens + s) * dim + j]);
        }
      N[b] = T(double(N[b]) + s2);
    }
  });
}

void clip_factors(Rank *, DType acc, const void *n2, const void *mask, void *c,
                  int64_t batch, ClipMode mode, double maxNorm, double gamma,
                  double relErr) {
  dispatch(acc, "clip_factors", [&](auto tag) {
    using T = decltype(tag);
    auto *N = static_cast<const T *>(n2), *M = static_cast<const T *>(mask);
    auto *C = static_cast<T *>(c);
    for (int64_t b = 0; b < batch; ++b) {
      double n = std::sqrt(double(N[b])) * (1 + relErr);
      double f = mode == ClipMode::Automatic
                     ? maxNorm / (n + gamma)
                     : std::min(1.0, maxNorm / (n + 1e-6));
      C[b] = T(double(M[b]) * f);
    }
  });
}

void linear_weight_grad(Rank *, DType dt, const void *x, const void *dy,
                        const void *c, void *dw, int64_t batch, int64_t tokens,
                        int64_t in, int64_t out, void *) {
  dispatch(dt, "linear_weight_grad", [&](auto tag) {
    using T = decltype(tag);
    auto *X = static_cast<const T *>(x), *G = static_cast<const T *>(dy);
    auto *C = static_cast<const T *>(c);
    auto *W = static_cast<T *>(dw);
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t t = 0; t < tokens; ++t) {
            const int64_t r = b * tokens + t;
            s += double(C[b]) * double(G[r * out + o]) * double(X[r * in + i]);
          }
        W[o * in + i] = T(double(W[o * in + i]) + s);
      }
  });
}

void bias_grad(Rank *, DType dt, const void *dy, const void *c, void *db,
               int64_t batch, int64_t tokens, int64_t out) {
  dispatch(dt, "bias_grad", [&](auto tag) {
    using T = decltype(tag);
    auto *G = static_cast<const T *>(dy), *C = static_cast<const T *>(c);
    auto *D = static_cast<T *>(db);
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < tokens; ++t)
          s += double(C[b]) * double(G[(b * tokens + t) * out + o]);
      D[o] = T(double(D[o]) + s);
    }
  });
}

void embedding_grad(Rank *, DType dt, const int32_t *tok, const void *dy,
                    const void *c, void *dtable, int64_t batch, int64_t tokens,
                    int64_t, int64_t dim) {
  dispatch(dt, "embedding_grad", [&](auto tag) {
    using T = decltype(tag);
    auto *G = static_cast<const T *>(dy), *C = static_cast<const T *>(c);
    auto *D = static_cast<T *>(dtable);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t r = b * tokens + t;
        for (int64_t j = 0; j < dim; ++j)
          D[tok[r] * dim + j] = T(double(D[tok[r] * dim + j]) +
                                  double(C[b]) * double(G[r * dim + j]));
      }
  });
}

void fill(Rank *, DType dt, void *p, int64_t n, double value) {
  dispatch(dt, "fill", [&](auto tag) {
    using T = decltype(tag);
    std::fill(static_cast<T *>(p), static_cast<T *>(p) + n, T(value));
  });
}

void zero(Rank *, void *p, int64_t bytes) { std::memset(p, 0, bytes); }

void cast(Rank *, DType from, const void *src, DType to, void *dst, int64_t n) {
  dispatch(from, "cast", [&](auto fromTag) {
    using F = decltype(fromTag);
    dispatch(to, "cast", [&](auto toTag) {
      using T = decltype(toTag);
      for (int64_t i = 0; i < n; ++i)
        static_cast<T *>(dst)[i] = T(static_cast<const F *>(src)[i]);
    });
  });
}

void sgd_update(Rank *rank, DType acc, void *master, const void *grad,
                int64_t n, double lr, double weightDecay) {
  const StepState &s = stepState(rank);
  dispatch(acc, "sgd_update", [&](auto tag) {
    using T = decltype(tag);
    auto *w = static_cast<T *>(master);
    auto *g = static_cast<const T *>(grad);
    for (int64_t i = 0; i < n; ++i)
      w[i] = T(double(w[i]) -
               lr * s.lrScale *
                   (double(g[i]) * s.gradScale + weightDecay * double(w[i])));
  });
}

void momentum_update(Rank *rank, DType acc, void *master, void *velocity,
                     const void *grad, int64_t n, double lr, double momentum,
                     bool nesterov, double weightDecay) {
  const StepState &s = stepState(rank);
  dispatch(acc, "momentum_update", [&](auto tag) {
    using T = decltype(tag);
    auto *w = static_cast<T *>(master), *v = static_cast<T *>(velocity);
    auto *g = static_cast<const T *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      double gi = double(g[i]) * s.gradScale;
      double vi = momentum * double(v[i]) + gi;
      v[i] = T(vi);
      double d = nesterov ? gi + momentum * vi : vi;
      w[i] =
          T(double(w[i]) - lr * s.lrScale * (d + weightDecay * double(w[i])));
    }
  });
}

void adamw_update(Rank *rank, DType acc, void *master, void *m, void *v,
                  const void *grad, int64_t n, double lr, double beta1,
                  double beta2, double eps, double weightDecay) {
  const StepState &s = stepState(rank);
  const double c1 = 1 - std::pow(beta1, double(s.step));
  const double c2 = 1 - std::pow(beta2, double(s.step));
  dispatch(acc, "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    auto *w = static_cast<T *>(master), *M = static_cast<T *>(m),
         *V = static_cast<T *>(v);
    auto *g = static_cast<const T *>(grad);
    for (int64_t i = 0; i < n; ++i) {
      double gi = double(g[i]) * s.gradScale;
      double mi = beta1 * double(M[i]) + (1 - beta1) * gi;
      double vi = beta2 * double(V[i]) + (1 - beta2) * gi * gi;
      M[i] = T(mi);
      V[i] = T(vi);
      w[i] = T(double(w[i]) - lr * s.lrScale *
                                  ((mi / c1) / (std::sqrt(vi / c2) + eps) +
                                   weightDecay * double(w[i])));
    }
  });
}

} // namespace dprt::cpu
