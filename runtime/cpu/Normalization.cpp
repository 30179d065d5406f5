//===- Normalization.cpp - RMSNorm and LayerNorm on the CPU ---------------===//
//
// Row statistics and the row reductions of the backward pass accumulate in
// f64 whatever the storage type; the per-sample gamma/beta gradients they
// produce feed the per-sample norms (norm_rows), which must not lose
// precision to bf16 operands.
//
//===----------------------------------------------------------------------===//

#include "Element.h"

#include "dprt/kernels.h"

namespace dprt::cpu {

namespace {

/// Row r of RMSNorm's result, x * rstd * gamma, from the stored rstd.
template <class T>
void rmsNormOutput(const T *x, const T *gamma, const AccOf<T> *rstd, T *y,
                   int64_t r, int64_t dim) {
  const double s = rstd[r];
  for (int64_t j = 0; j < dim; ++j)
    store(y + r * dim, j,
          double(load(x + r * dim, j)) * s * double(load(gamma, j)));
}

template <class T>
void rmsNormForward(const T *x, const T *gamma, T *y, AccOf<T> *rstd,
                    int64_t rows, int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim;
    double ss = 0;
    for (int64_t j = 0; j < dim; ++j) {
      double v = load(xr, j);
      ss += v * v;
    }
    // y from the stored rstd, so that rms_norm_backward can make the same
    // bits again (rmsNormOutput).
    rstd[r] = AccOf<T>(1.0 / std::sqrt(ss / double(dim) + eps));
    rmsNormOutput(x, gamma, rstd, y, r, dim);
  }
}

template <class T>
void layerNormForward(const T *x, const T *gamma, const T *beta, T *y,
                      AccOf<T> *mean, AccOf<T> *rstd, int64_t rows, int64_t dim,
                      double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim;
    // Two passes: the mean, then the biased variance around it.
    double mu = 0;
    for (int64_t j = 0; j < dim; ++j)
      mu += load(xr, j);
    mu /= double(dim);
    double var = 0;
    for (int64_t j = 0; j < dim; ++j) {
      double c = double(load(xr, j)) - mu;
      var += c * c;
    }
    var /= double(dim);
    double s = 1.0 / std::sqrt(var + eps);
    mean[r] = AccOf<T>(mu);
    rstd[r] = AccOf<T>(s);
    for (int64_t j = 0; j < dim; ++j) {
      double v = (double(load(xr, j)) - mu) * s * double(load(gamma, j));
      if (beta)
        v += load(beta, j);
      store(y + r * dim, j, v);
    }
  }
}

/// Shared by both norms: with g = dy * gamma and xhat given per element,
///   dx (+)= rstd * (g - centre * mean_j(g) - xhat * mean_j(g * xhat)),
/// centre = 0 for RMSNorm and 1 for LayerNorm; the per-sample sums
///   dgamma[b, j] = sum_t dy * xhat,  dbeta[b, j] = sum_t dy
/// are written when not null.
/// With n2 not null, ||dgamma_b||^2 + ||dbeta_b||^2 is added to n2[b] from
/// the sums in double, before they are rounded to the acc type.
template <class T, class XHat>
void normBackward(const T *gamma, const AccOf<T> *rstd, const T *dy, T *dx,
                  AccOf<T> *dgamma, AccOf<T> *dbeta, AccOf<T> *n2,
                  int64_t batch, int64_t tokens, int64_t dim, bool accumulate,
                  bool centre, XHat xhatOf) {
  double *gsum = (dgamma || dbeta) ? scratch<double>(0, 2 * dim) : nullptr;
  double *xh = scratch<double>(1, dim);
  for (int64_t b = 0; b < batch; ++b) {
    if (gsum)
      std::fill(gsum, gsum + 2 * dim, 0.0);
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      const T *dyr = dy + r * dim;
      double s = rstd[r];
      double meanG = 0, meanGX = 0;
      for (int64_t j = 0; j < dim; ++j) {
        xh[j] = xhatOf(r, j);
        double g = double(load(dyr, j)) * double(load(gamma, j));
        meanG += g;
        meanGX += g * xh[j];
      }
      meanG /= double(dim);
      meanGX /= double(dim);
      T *dxr = dx + r * dim;
      for (int64_t j = 0; j < dim; ++j) {
        double g = double(load(dyr, j)) * double(load(gamma, j));
        double v = s * (g - (centre ? meanG : 0.0) - xh[j] * meanGX);
        if (accumulate)
          v += load(dxr, j);
        store(dxr, j, v);
      }
      if (gsum)
        for (int64_t j = 0; j < dim; ++j) {
          double d = load(dyr, j);
          gsum[j] += d * xh[j];
          gsum[dim + j] += d;
        }
    }
    double squares = 0;
    for (int64_t j = 0; j < dim; ++j) {
      if (dgamma) {
        dgamma[b * dim + j] = AccOf<T>(gsum[j]);
        squares += gsum[j] * gsum[j];
      }
      if (dbeta) {
        dbeta[b * dim + j] = AccOf<T>(gsum[dim + j]);
        squares += gsum[dim + j] * gsum[dim + j];
      }
    }
    if (n2)
      n2[b] = AccOf<T>(double(n2[b]) + squares);
  }
}

} // namespace

void rms_norm_forward(Rank *, DType dt, const void *x, const void *gamma,
                      void *y, void *rstd, int64_t rows, int64_t dim,
                      double eps) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    rmsNormForward(static_cast<const T *>(x), static_cast<const T *>(gamma),
                   static_cast<T *>(y), static_cast<AccOf<T> *>(rstd), rows,
                   dim, eps);
  });
}

void layer_norm_forward(Rank *, DType dt, const void *x, const void *gamma,
                        const void *beta, void *y, void *mean, void *rstd,
                        int64_t rows, int64_t dim, double eps) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    layerNormForward(static_cast<const T *>(x), static_cast<const T *>(gamma),
                     static_cast<const T *>(beta), static_cast<T *>(y),
                     static_cast<AccOf<T> *>(mean),
                     static_cast<AccOf<T> *>(rstd), rows, dim, eps);
  });
}

void rms_norm_backward_norm(Rank *, DType dt, const void *x, const void *gamma,
                            const void *rstd, const void *dy, void *dx,
                            void *dgammaPerSample, void *n2, void *y,
                            int64_t batch, int64_t tokens, int64_t dim,
                            bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xt = static_cast<const T *>(x);
    auto *s = static_cast<const A *>(rstd);
    // xhat = x * rstd.
    auto xhat = [&](int64_t r, int64_t j) {
      return double(load(xt + r * dim, j)) * double(s[r]);
    };
    normBackward(static_cast<const T *>(gamma), s, static_cast<const T *>(dy),
                 static_cast<T *>(dx), static_cast<A *>(dgammaPerSample),
                 static_cast<A *>(nullptr), static_cast<A *>(n2), batch, tokens,
                 dim, accumulate, false, xhat);
    if (y)
      for (int64_t r = 0; r < batch * tokens; ++r)
        rmsNormOutput(xt, static_cast<const T *>(gamma), s, static_cast<T *>(y),
                      r, dim);
  });
}

void layer_norm_backward_norm(Rank *, DType dt, const void *x,
                              const void *gamma, const void *mean,
                              const void *rstd, const void *dy, void *dx,
                              void *dgammaPerSample, void *dbetaPerSample,
                              void *n2, int64_t batch, int64_t tokens,
                              int64_t dim, bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xt = static_cast<const T *>(x);
    auto *mu = static_cast<const A *>(mean);
    auto *s = static_cast<const A *>(rstd);
    // xhat = (x - mean) * rstd.
    auto xhat = [&](int64_t r, int64_t j) {
      return (double(load(xt + r * dim, j)) - double(mu[r])) * double(s[r]);
    };
    normBackward(static_cast<const T *>(gamma), s, static_cast<const T *>(dy),
                 static_cast<T *>(dx), static_cast<A *>(dgammaPerSample),
                 static_cast<A *>(dbetaPerSample), static_cast<A *>(n2), batch,
                 tokens, dim, accumulate, true, xhat);
  });
}

void rms_norm_backward(Rank *rank, DType dt, const void *x, const void *gamma,
                       const void *rstd, const void *dy, void *dx,
                       void *dgammaPerSample, void *y, int64_t batch,
                       int64_t tokens, int64_t dim, bool accumulate) {
  rms_norm_backward_norm(rank, dt, x, gamma, rstd, dy, dx, dgammaPerSample,
                         nullptr, y, batch, tokens, dim, accumulate);
}

void layer_norm_backward(Rank *rank, DType dt, const void *x, const void *gamma,
                         const void *mean, const void *rstd, const void *dy,
                         void *dx, void *dgammaPerSample, void *dbetaPerSample,
                         int64_t batch, int64_t tokens, int64_t dim,
                         bool accumulate) {
  layer_norm_backward_norm(rank, dt, x, gamma, mean, rstd, dy, dx,
                           dgammaPerSample, dbetaPerSample, nullptr, batch,
                           tokens, dim, accumulate);
}

} // namespace dprt::cpu
