//===- Elementwise.cpp - Activations, products, sums and casts on the CPU -===//
//
// Each element is computed in f64 and rounded once to the storage type.
//
//===----------------------------------------------------------------------===//

#include "Element.h"

#include "dprt/kernels.h"

namespace dprt::cpu {

namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

double activation(Activation act, double x) {
  switch (act) {
  case Activation::Relu:
    return x > 0 ? x : 0.0;
  case Activation::Silu:
    return x * sigmoid(x);
  // 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 sigmoid(2u) without the
  // cancellation of 1 + (-1 + tiny) for negative x.
  case Activation::GeluErf:
    return 0.5 * x * std::erfc(-x * kSqrt1_2);
  case Activation::GeluTanh:
    return x * sigmoid(2.0 * kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  }
  throw std::invalid_argument("dprt::cpu: unknown activation");
}

double activationDerivative(Activation act, double x) {
  switch (act) {
  case Activation::Relu:
    return x > 0 ? 1.0 : 0.0;
  case Activation::Silu: {
    // d/dx x s(x) = s (1 + x (1 - s)).
    double s = sigmoid(x);
    return s * (1.0 + x * (1.0 - s));
  }
  case Activation::GeluErf:
    // Phi(x) + x phi(x).
    return 0.5 * std::erfc(-x * kSqrt1_2) +
           x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
  case Activation::GeluTanh: {
    // u = sqrt(2/pi) (x + 0.044715 x^3):
    // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
    //   = s + 2 x s (1 - s) u' with s = sigmoid(2u), 1 - s = sigmoid(-2u).
    double u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    double s = sigmoid(2.0 * u), sn = sigmoid(-2.0 * u);
    double du = kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
    return s + 2.0 * x * s * sn * du;
  }
  }
  throw std::invalid_argument("dprt::cpu: unknown activation");
}

} // namespace

void activation_forward(Rank *, DType dt, Activation act, const void *x,
                        void *y, int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i)
      store(yt, i, activation(act, load(xt, i)));
  });
}

void activation_backward(Rank *, DType dt, Activation act, const void *x,
                         const void *dy, void *dx, int64_t n, bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *dyt = static_cast<const T *>(dy);
    auto *dxt = static_cast<T *>(dx);
    for (int64_t i = 0; i < n; ++i) {
      double v = double(load(dyt, i)) * activationDerivative(act, load(xt, i));
      if (accumulate)
        v += load(dxt, i);
      store(dxt, i, v);
    }
  });
}

void mul_forward(Rank *, DType dt, const void *a, const void *b, void *y,
                 int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *at = static_cast<const T *>(a);
    auto *bt = static_cast<const T *>(b);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i)
      store(yt, i, double(load(at, i)) * double(load(bt, i)));
  });
}

void add_forward(Rank *, DType dt, const void *a, const void *b, void *y,
                 int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *at = static_cast<const T *>(a);
    auto *bt = static_cast<const T *>(b);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i)
      store(yt, i, double(load(at, i)) + double(load(bt, i)));
  });
}

void glu_forward(Rank *, DType dt, Activation act, const void *gate,
                 const void *up, void *y, int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *g = static_cast<const T *>(gate);
    auto *u = static_cast<const T *>(up);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i)
      store(yt, i, activation(act, load(g, i)) * double(load(u, i)));
  });
}

void glu_backward(Rank *, DType dt, Activation act, const void *gate,
                  const void *up, const void *dy, void *dgate, void *dup,
                  void *y, int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *g = static_cast<const T *>(gate);
    auto *u = static_cast<const T *>(up);
    auto *d = static_cast<const T *>(dy);
    auto *dg = static_cast<T *>(dgate);
    auto *du = static_cast<T *>(dup);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i) {
      double x = load(g, i), grad = load(d, i);
      if (dg)
        store(dg, i, grad * double(load(u, i)) * activationDerivative(act, x));
      if (du)
        store(du, i, grad * activation(act, x));
      // glu_forward's expression: the same bits.
      if (yt)
        store(yt, i, activation(act, x) * double(load(u, i)));
    }
  });
}

void mul_backward(Rank *, DType dt, const void *a, const void *b,
                  const void *dy, void *da, void *db, int64_t n,
                  bool accumulateA, bool accumulateB) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *at = static_cast<const T *>(a);
    auto *bt = static_cast<const T *>(b);
    auto *dyt = static_cast<const T *>(dy);
    // da (+)= dy * b, db (+)= dy * a.
    auto grad = [&](const T *other, T *out, bool acc) {
      if (!out)
        return;
      for (int64_t i = 0; i < n; ++i) {
        double v = double(load(dyt, i)) * double(load(other, i));
        if (acc)
          v += load(out, i);
        store(out, i, v);
      }
    };
    grad(bt, static_cast<T *>(da), accumulateA);
    grad(at, static_cast<T *>(db), accumulateB);
  });
}

void accumulate(Rank *, DType dt, const void *x, void *y, int64_t n) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *yt = static_cast<T *>(y);
    for (int64_t i = 0; i < n; ++i)
      store(yt, i, double(load(yt, i)) + double(load(xt, i)));
  });
}

void cast(Rank *, DType from, const void *src, DType to, void *dst, int64_t n) {
  // Through f64, which holds every f32 and bf16 value exactly; the one
  // rounding is the store (doubleToBf16 rounds f64 -> bf16 directly).
  dispatch(from, [&](auto fromTag) {
    using S = decltype(fromTag);
    dispatch(to, [&](auto toTag) {
      using D = decltype(toTag);
      auto *s = static_cast<const S *>(src);
      auto *d = static_cast<D *>(dst);
      for (int64_t i = 0; i < n; ++i)
        store(d, i, double(load(s, i)));
    });
  });
}

void gather_master(Rank *rank, DType from, const void *master, DType to,
                   void *full, int64_t elems, int32_t) {
  // One process, no streams: the cast, where the step would gather.
  cast(rank, from, master, to, full, elems);
}

void fill(Rank *, DType dt, void *p, int64_t n, double value) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *pt = static_cast<T *>(p);
    for (int64_t i = 0; i < n; ++i)
      store(pt, i, value);
  });
}

void zero(Rank *, void *p, int64_t bytes) { std::memset(p, 0, bytes); }

} // namespace dprt::cpu
