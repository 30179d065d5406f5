//===- Layers.cpp - f64 reference layers on explicit loops ----------------===//

#include "reference/Layers.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

namespace dpc::reference {

using dprt::Activation;
using dprt::ClipMode;
using dprt::Reduction;

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

Vec embeddingForward(const Tokens &tok, const Vec &table, int64_t dim) {
  Vec out(tok.size() * dim);
  for (size_t r = 0; r < tok.size(); ++r)
    for (int64_t j = 0; j < dim; ++j)
      out[r * dim + j] = table[tok[r] * dim + j];
  return out;
}

Vec positionEmbeddingForward(const Vec &x, const Vec &table, int64_t batch,
                             int64_t tokens, int64_t dim) {
  if (int64_t(table.size()) < tokens * dim)
    throw std::invalid_argument("position embedding: fewer positions than "
                                "tokens");
  Vec y(x.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < dim; ++j)
        y[(b * tokens + t) * dim + j] =
            x[(b * tokens + t) * dim + j] + table[t * dim + j];
  return y;
}

Vec linearForward(const Vec &x, const Vec &w, const Vec *bias, int64_t rows,
                  int64_t in, int64_t out) {
  Vec y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

namespace {

double rowRstdRms(const Vec &x, int64_t r, int64_t dim, double eps) {
  double ms = 0;
  for (int64_t j = 0; j < dim; ++j)
    ms += x[r * dim + j] * x[r * dim + j];
  return 1.0 / std::sqrt(ms / dim + eps);
}

void rowMeanRstd(const Vec &x, int64_t r, int64_t dim, double eps, double &mean,
                 double &rstd) {
  mean = 0;
  for (int64_t j = 0; j < dim; ++j)
    mean += x[r * dim + j];
  mean /= dim;
  double var = 0;
  for (int64_t j = 0; j < dim; ++j)
    var += (x[r * dim + j] - mean) * (x[r * dim + j] - mean);
  var /= dim;
  rstd = 1.0 / std::sqrt(var + eps);
}

} // namespace

Vec rmsNormForward(const Vec &x, const Vec &gamma, int64_t rows, int64_t dim,
                   double eps, Vec *rstd) {
  Vec y(rows * dim);
  if (rstd)
    rstd->assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = rowRstdRms(x, r, dim, eps);
    if (rstd)
      (*rstd)[r] = s;
    for (int64_t j = 0; j < dim; ++j)
      y[r * dim + j] = x[r * dim + j] * s * gamma[j];
  }
  return y;
}

Vec layerNormForward(const Vec &x, const Vec &gamma, const Vec *beta,
                     int64_t rows, int64_t dim, double eps, Vec *mean,
                     Vec *rstd) {
  Vec y(rows * dim);
  if (mean)
    mean->assign(rows, 0.0);
  if (rstd)
    rstd->assign(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu, s;
    rowMeanRstd(x, r, dim, eps, mu, s);
    if (mean)
      (*mean)[r] = mu;
    if (rstd)
      (*rstd)[r] = s;
    for (int64_t j = 0; j < dim; ++j)
      y[r * dim + j] =
          (x[r * dim + j] - mu) * s * gamma[j] + (beta ? (*beta)[j] : 0.0);
  }
  return y;
}

namespace {

/// Applies the 2x2 rotation [[c, -s], [s, c]] of angle t * invFreq[i] to
/// each (i, i + hd/2) pair, or its transpose.
Vec rotate(const Vec &x, int64_t batch, int64_t tokens, int64_t heads,
           int64_t headDim, const Vec &invFreq, bool transpose) {
  if (headDim % 2 || int64_t(invFreq.size()) != headDim / 2)
    throw std::invalid_argument("rope: headDim/2 frequencies needed");
  Vec y(x.size());
  int64_t half = headDim / 2;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          double angle = double(t) * invFreq[i];
          double m[2][2] = {{std::cos(angle), -std::sin(angle)},
                            {std::sin(angle), std::cos(angle)}};
          int64_t base = ((b * tokens + t) * heads + h) * headDim;
          int64_t idx[2] = {base + i, base + i + half};
          for (int row = 0; row < 2; ++row) {
            double s = 0;
            for (int col = 0; col < 2; ++col)
              s += (transpose ? m[col][row] : m[row][col]) * x[idx[col]];
            y[idx[row]] = s;
          }
        }
  return y;
}

/// Index of element j of token t of head h of sample b in a buffer of
/// `heads` heads.
int64_t at(const AttentionShape &s, int64_t heads, int64_t b, int64_t t,
           int64_t h, int64_t j) {
  return ((b * s.tokens + t) * heads + h) * s.headDim + j;
}

bool visible(const AttentionShape &s, int64_t t, int64_t u) {
  return !s.causal || u <= t;
}

/// P[t][u] of one (sample, head): the softmax of scaled scores over the
/// visible keys, 0 elsewhere.
std::vector<Vec> attentionProbs(const Vec &q, const Vec &k,
                                const AttentionShape &s, int64_t b, int64_t h,
                                Vec *lse) {
  int64_t g = h / (s.heads / s.kvHeads);
  double scale = 1.0 / std::sqrt(double(s.headDim));
  std::vector<Vec> p(s.tokens, Vec(s.tokens, 0.0));
  for (int64_t t = 0; t < s.tokens; ++t) {
    Vec sc(s.tokens, 0.0);
    double mx = -INFINITY;
    for (int64_t u = 0; u < s.tokens; ++u) {
      if (!visible(s, t, u))
        continue;
      double d = 0;
      for (int64_t j = 0; j < s.headDim; ++j)
        d += q[at(s, s.heads, b, t, h, j)] * k[at(s, s.kvHeads, b, u, g, j)];
      sc[u] = d * scale;
      mx = std::max(mx, sc[u]);
    }
    double z = 0;
    for (int64_t u = 0; u < s.tokens; ++u)
      if (visible(s, t, u))
        z += std::exp(sc[u] - mx);
    for (int64_t u = 0; u < s.tokens; ++u)
      if (visible(s, t, u))
        p[t][u] = std::exp(sc[u] - mx) / z;
    if (lse)
      (*lse)[(b * s.heads + h) * s.tokens + t] = mx + std::log(z);
  }
  return p;
}

} // namespace

Vec ropeForward(const Vec &x, int64_t batch, int64_t tokens, int64_t heads,
                int64_t headDim, const Vec &invFreq) {
  return rotate(x, batch, tokens, heads, headDim, invFreq, false);
}

Vec ropeForward(const Vec &x, int64_t batch, int64_t tokens, int64_t heads,
                int64_t headDim, double theta) {
  return ropeForward(x, batch, tokens, heads, headDim,
                     ropeInverseFrequencies(theta, headDim));
}

Vec ropeInverseFrequencies(double theta, int64_t headDim) {
  Vec f(headDim / 2);
  for (int64_t i = 0; i < headDim / 2; ++i)
    f[i] = std::pow(theta, -2.0 * double(i) / double(headDim));
  return f;
}

Vec llama3InverseFrequencies(double theta, int64_t headDim,
                             const Llama3RopeScaling &scaling) {
  const double low = scaling.lowFreqFactor, high = scaling.highFreqFactor;
  if (!(scaling.factor > 0 && low > 0 && high > low &&
        scaling.originalMaxPositions > 0))
    throw std::invalid_argument(
        "llama3 rope: need factor > 0, 0 < low_freq_factor < "
        "high_freq_factor, original_max_position_embeddings > 0");
  const double context = double(scaling.originalMaxPositions);
  // Wavelengths (in positions) beyond which a frequency is scaled fully,
  // and below which it is kept.
  const double longWave = context / low, shortWave = context / high;
  Vec f = ropeInverseFrequencies(theta, headDim);
  for (double &fj : f) {
    double wave = 2.0 * M_PI / fj;
    if (wave < shortWave)
      continue;
    if (wave > longWave) {
      fj /= scaling.factor;
      continue;
    }
    double s = (context / wave - low) / (high - low);
    fj = (1.0 - s) * fj / scaling.factor + s * fj;
  }
  return f;
}

Vec attentionForward(const Vec &q, const Vec &k, const Vec &v,
                     const AttentionShape &s, Vec *lse) {
  Vec o(s.batch * s.tokens * s.heads * s.headDim, 0.0);
  if (lse)
    lse->assign(s.batch * s.heads * s.tokens, 0.0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      int64_t g = h / (s.heads / s.kvHeads);
      std::vector<Vec> p = attentionProbs(q, k, s, b, h, lse);
      for (int64_t t = 0; t < s.tokens; ++t)
        for (int64_t j = 0; j < s.headDim; ++j) {
          double acc = 0;
          for (int64_t u = 0; u < s.tokens; ++u)
            acc += p[t][u] * v[at(s, s.kvHeads, b, u, g, j)];
          o[at(s, s.heads, b, t, h, j)] = acc;
        }
    }
  return o;
}

double activation(Activation act, double x) {
  switch (act) {
  case Activation::Relu:
    return x > 0 ? x : 0.0;
  case Activation::Silu:
    return x / (1.0 + std::exp(-x));
  case Activation::GeluErf:
    // Phi(x) = erfc(-x / sqrt 2) / 2, accurate in the negative tail.
    return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  case Activation::GeluTanh: {
    // 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)), accurate in the negative tail.
    double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + std::exp(-2.0 * u));
  }
  }
  throw std::invalid_argument("unknown activation");
}

Vec activationForward(Activation act, const Vec &x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = activation(act, x[i]);
  return y;
}

Vec scaleForward(const Vec &x, double factor) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = factor * x[i];
  return y;
}

Vec mulForward(const Vec &a, const Vec &b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    y[i] = a[i] * b[i];
  return y;
}

Vec addForward(const Vec &a, const Vec &b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    y[i] = a[i] + b[i];
  return y;
}

namespace {

bool isCounted(const Tokens &targets, int64_t r, bool hasIgnore,
               int64_t ignoreIndex) {
  return !hasIgnore || targets[r] != ignoreIndex;
}

/// 1/count for Mean, 1 for Sum, 0 when the sample has no counted token.
double sampleTokenWeight(const Tokens &targets, int64_t b, int64_t tokens,
                         bool hasIgnore, int64_t ignoreIndex,
                         Reduction reduction) {
  int64_t count = 0;
  for (int64_t t = 0; t < tokens; ++t)
    if (isCounted(targets, b * tokens + t, hasIgnore, ignoreIndex))
      ++count;
  if (count == 0)
    return 0.0;
  return reduction == Reduction::Mean ? 1.0 / count : 1.0;
}

double rowLogSumExp(const Vec &logits, int64_t r, int64_t classes) {
  double mx = -INFINITY;
  for (int64_t c = 0; c < classes; ++c)
    mx = std::max(mx, logits[r * classes + c]);
  double z = 0;
  for (int64_t c = 0; c < classes; ++c)
    z += std::exp(logits[r * classes + c] - mx);
  return mx + std::log(z);
}

} // namespace

Vec crossEntropyForward(const Vec &logits, const Tokens &targets, int64_t batch,
                        int64_t tokens, int64_t classes, bool hasIgnore,
                        int64_t ignoreIndex, Reduction reduction, Vec *lse) {
  Vec loss(batch, 0.0);
  if (lse)
    lse->assign(batch * tokens, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    double w = sampleTokenWeight(targets, b, tokens, hasIgnore, ignoreIndex,
                                 reduction);
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      double l = rowLogSumExp(logits, r, classes);
      if (lse)
        (*lse)[r] = l;
      if (isCounted(targets, r, hasIgnore, ignoreIndex))
        loss[b] += w * (l - logits[r * classes + targets[r]]);
    }
  }
  return loss;
}

Vec mseForward(const Vec &prediction, const Vec &target, int64_t batch,
               int64_t features, Reduction reduction) {
  Vec loss(batch, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < features; ++j) {
      double d = prediction[b * features + j] - target[b * features + j];
      loss[b] += d * d;
    }
    if (reduction == Reduction::Mean)
      loss[b] /= features;
  }
  return loss;
}

//===----------------------------------------------------------------------===//
// Backward: input gradients
//===----------------------------------------------------------------------===//

Vec linearBackwardInput(const Vec &dy, const Vec &w, int64_t rows, int64_t in,
                        int64_t out) {
  Vec dx(rows * in, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        dx[r * in + i] += dy[r * out + o] * w[o * in + i];
  return dx;
}

Vec rmsNormBackward(const Vec &x, const Vec &gamma, const Vec &dy, int64_t rows,
                    int64_t dim, double eps) {
  Vec dx(rows * dim, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = rowRstdRms(x, r, dim, eps);
    const double *xr = &x[r * dim];
    // y_k = gamma_k x_k s,  ds/dx_j = -s^3 x_j / dim:
    // dy_k/dx_j = gamma_k (delta_kj s - x_k x_j s^3 / dim).
    for (int64_t j = 0; j < dim; ++j)
      for (int64_t k = 0; k < dim; ++k) {
        double jac =
            gamma[k] * ((k == j ? s : 0.0) - xr[k] * xr[j] * s * s * s / dim);
        dx[r * dim + j] += dy[r * dim + k] * jac;
      }
  }
  return dx;
}

Vec layerNormBackward(const Vec &x, const Vec &gamma, const Vec &dy,
                      int64_t rows, int64_t dim, double eps) {
  Vec dx(rows * dim, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double mu, s;
    rowMeanRstd(x, r, dim, eps, mu, s);
    // c_k = x_k - mu, dc_k/dx_j = delta_kj - 1/dim, ds/dx_j = -s^3 c_j / dim:
    // dy_k/dx_j = gamma_k ((delta_kj - 1/dim) s - c_k c_j s^3 / dim).
    for (int64_t j = 0; j < dim; ++j)
      for (int64_t k = 0; k < dim; ++k) {
        double ck = x[r * dim + k] - mu, cj = x[r * dim + j] - mu;
        double jac = gamma[k] * (((k == j ? 1.0 : 0.0) - 1.0 / dim) * s -
                                 ck * cj * s * s * s / dim);
        dx[r * dim + j] += dy[r * dim + k] * jac;
      }
  }
  return dx;
}

Vec ropeBackward(const Vec &dy, int64_t batch, int64_t tokens, int64_t heads,
                 int64_t headDim, const Vec &invFreq) {
  return rotate(dy, batch, tokens, heads, headDim, invFreq, true);
}

Vec ropeBackward(const Vec &dy, int64_t batch, int64_t tokens, int64_t heads,
                 int64_t headDim, double theta) {
  return ropeBackward(dy, batch, tokens, heads, headDim,
                      ropeInverseFrequencies(theta, headDim));
}

AttentionGrads attentionBackward(const Vec &q, const Vec &k, const Vec &v,
                                 const Vec &dout, const AttentionShape &s) {
  AttentionGrads g{Vec(q.size(), 0.0), Vec(k.size(), 0.0), Vec(v.size(), 0.0)};
  double scale = 1.0 / std::sqrt(double(s.headDim));
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.heads; ++h) {
      int64_t kv = h / (s.heads / s.kvHeads);
      std::vector<Vec> p = attentionProbs(q, k, s, b, h, nullptr);
      for (int64_t t = 0; t < s.tokens; ++t) {
        // dP[t][u] = dO_t . V_u;  dV_u += P[t][u] dO_t.
        Vec dp(s.tokens, 0.0);
        for (int64_t u = 0; u < s.tokens; ++u)
          for (int64_t j = 0; j < s.headDim; ++j) {
            dp[u] += dout[at(s, s.heads, b, t, h, j)] *
                     v[at(s, s.kvHeads, b, u, kv, j)];
            g.dv[at(s, s.kvHeads, b, u, kv, j)] +=
                p[t][u] * dout[at(s, s.heads, b, t, h, j)];
          }
        // Softmax Jacobian: dS[t][u] = P[t][u] (dP[t][u] - sum_w P[t][w]
        // dP[t][w]).
        double pdp = 0;
        for (int64_t u = 0; u < s.tokens; ++u)
          pdp += p[t][u] * dp[u];
        for (int64_t u = 0; u < s.tokens; ++u) {
          double ds = p[t][u] * (dp[u] - pdp);
          for (int64_t j = 0; j < s.headDim; ++j) {
            g.dq[at(s, s.heads, b, t, h, j)] +=
                scale * ds * k[at(s, s.kvHeads, b, u, kv, j)];
            g.dk[at(s, s.kvHeads, b, u, kv, j)] +=
                scale * ds * q[at(s, s.heads, b, t, h, j)];
          }
        }
      }
    }
  return g;
}

double activationDerivative(Activation act, double x) {
  switch (act) {
  case Activation::Relu:
    return x > 0 ? 1.0 : 0.0;
  case Activation::Silu: {
    double sig = 1.0 / (1.0 + std::exp(-x));
    return sig + x * sig * (1.0 - sig);
  }
  case Activation::GeluErf:
    return 0.5 * std::erfc(-x / std::sqrt(2.0)) +
           x * std::exp(-x * x / 2.0) / std::sqrt(2.0 * M_PI);
  case Activation::GeluTanh: {
    double c = std::sqrt(2.0 / M_PI);
    double u = c * (x + 0.044715 * x * x * x);
    double sech2 = 1.0 / (std::cosh(u) * std::cosh(u));
    return 1.0 / (1.0 + std::exp(-2.0 * u)) +
           0.5 * x * sech2 * c * (1.0 + 3.0 * 0.044715 * x * x);
  }
  }
  throw std::invalid_argument("unknown activation");
}

Vec activationBackward(Activation act, const Vec &x, const Vec &dy) {
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    dx[i] = dy[i] * activationDerivative(act, x[i]);
  return dx;
}

Vec crossEntropyBackward(const Vec &logits, const Tokens &targets,
                         const Vec &dloss, int64_t batch, int64_t tokens,
                         int64_t classes, bool hasIgnore, int64_t ignoreIndex,
                         Reduction reduction) {
  Vec d(batch * tokens * classes, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    double w = sampleTokenWeight(targets, b, tokens, hasIgnore, ignoreIndex,
                                 reduction);
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      if (!isCounted(targets, r, hasIgnore, ignoreIndex))
        continue;
      double l = rowLogSumExp(logits, r, classes);
      for (int64_t c = 0; c < classes; ++c) {
        double softmax = std::exp(logits[r * classes + c] - l);
        d[r * classes + c] =
            dloss[b] * w * (softmax - (c == targets[r] ? 1.0 : 0.0));
      }
    }
  }
  return d;
}

Vec mseBackward(const Vec &prediction, const Vec &target, const Vec &dloss,
                int64_t batch, int64_t features, Reduction reduction) {
  Vec d(batch * features);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < features; ++j) {
      int64_t i = b * features + j;
      d[i] = dloss[b] * 2.0 * (prediction[i] - target[i]);
      if (reduction == Reduction::Mean)
        d[i] /= features;
    }
  return d;
}

//===----------------------------------------------------------------------===//
// Per-sample parameter gradients
//===----------------------------------------------------------------------===//

PerSample linearWeightGradPerSample(const Vec &x, const Vec &dy, int64_t batch,
                                    int64_t tokens, int64_t in, int64_t out) {
  PerSample g(batch, Vec(out * in, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          g[b][o * in + i] += dy[r * out + o] * x[r * in + i];
    }
  return g;
}

PerSample biasGradPerSample(const Vec &dy, int64_t batch, int64_t tokens,
                            int64_t out) {
  PerSample g(batch, Vec(out, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t o = 0; o < out; ++o)
        g[b][o] += dy[(b * tokens + t) * out + o];
  return g;
}

PerSample embeddingGradPerSample(const Tokens &tok, const Vec &dy,
                                 int64_t batch, int64_t tokens, int64_t vocab,
                                 int64_t dim) {
  PerSample g(batch, Vec(vocab * dim, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      for (int64_t j = 0; j < dim; ++j)
        g[b][tok[r] * dim + j] += dy[r * dim + j];
    }
  return g;
}

PerSample positionEmbeddingGradPerSample(const Vec &dy, int64_t batch,
                                         int64_t tokens, int64_t maxPositions,
                                         int64_t dim) {
  if (tokens > maxPositions)
    throw std::invalid_argument("position embedding: fewer positions than "
                                "tokens");
  PerSample g(batch, Vec(maxPositions * dim, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < dim; ++j)
        g[b][t * dim + j] += dy[(b * tokens + t) * dim + j];
  return g;
}

PerSample rmsNormGammaGradPerSample(const Vec &x, const Vec &dy, int64_t batch,
                                    int64_t tokens, int64_t dim, double eps) {
  PerSample g(batch, Vec(dim, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      double s = rowRstdRms(x, r, dim, eps);
      for (int64_t j = 0; j < dim; ++j)
        g[b][j] += dy[r * dim + j] * x[r * dim + j] * s;
    }
  return g;
}

PerSample layerNormGammaGradPerSample(const Vec &x, const Vec &dy,
                                      int64_t batch, int64_t tokens,
                                      int64_t dim, double eps) {
  PerSample g(batch, Vec(dim, 0.0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t) {
      int64_t r = b * tokens + t;
      double mu, s;
      rowMeanRstd(x, r, dim, eps, mu, s);
      for (int64_t j = 0; j < dim; ++j)
        g[b][j] += dy[r * dim + j] * (x[r * dim + j] - mu) * s;
    }
  return g;
}

//===----------------------------------------------------------------------===//
// Clipping and optimizers
//===----------------------------------------------------------------------===//

double sumSquares(const Vec &v) {
  double s = 0;
  for (double e : v)
    s += e * e;
  return s;
}

double clipFactor(ClipMode mode, double norm, double maxNorm, double gamma) {
  if (mode == ClipMode::Automatic)
    return maxNorm / (norm + gamma);
  return std::min(1.0, maxNorm / (norm + 1e-6));
}

Vec weightedSum(const PerSample &g, const Vec &c) {
  assert(g.size() == c.size());
  Vec s(g.empty() ? 0 : g[0].size(), 0.0);
  for (size_t b = 0; b < g.size(); ++b)
    if (c[b] != 0)
      for (size_t i = 0; i < s.size(); ++i)
        s[i] += c[b] * g[b][i];
  return s;
}

void sgdStep(Vec &w, const Vec &g, double lr, double weightDecay) {
  for (size_t i = 0; i < w.size(); ++i)
    w[i] -= lr * (g[i] + weightDecay * w[i]);
}

void momentumStep(Vec &w, Vec &velocity, const Vec &g, double lr,
                  double momentum, bool nesterov, double weightDecay) {
  for (size_t i = 0; i < w.size(); ++i) {
    velocity[i] = momentum * velocity[i] + g[i];
    double d = nesterov ? g[i] + momentum * velocity[i] : velocity[i];
    w[i] -= lr * (d + weightDecay * w[i]);
  }
}

void adamwStep(Vec &w, Vec &m, Vec &v, const Vec &g, int64_t t, double lr,
               double beta1, double beta2, double eps, double weightDecay) {
  for (size_t i = 0; i < w.size(); ++i) {
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
    double mhat = m[i] / (1 - std::pow(beta1, double(t)));
    double vhat = v[i] / (1 - std::pow(beta2, double(t)));
    w[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + weightDecay * w[i]);
  }
}

} // namespace dpc::reference
