//===- Attention.cpp - Rotary embedding and attention on the CPU ----------===//
//
// Attention is computed per (sample, head) with two GEMMs forward (S = Q K^T,
// O = P V) and four backward, on the T x T score matrix: O(T^2 headDim) work
// and T^2 scratch, no tiling. bf16 operands are widened to f32 once per call.
//
//===----------------------------------------------------------------------===//

#include "Element.h"

#include "dprt/kernels.h"

#include <limits>

namespace dprt::cpu {

namespace {

/// cos/sin of angle = t * f_i for t < tokens, i < headDim/2, as
/// [tokens, headDim/2] pairs (cos, sin) in scratch; f_i = invFreq[i], or
/// theta^(-2i/headDim) without a table.
const double *ropeTable(int64_t tokens, int64_t headDim, double theta,
                        const double *invFreq) {
  int64_t half = headDim / 2;
  double *cs = scratch<double>(0, 2 * tokens * half);
  for (int64_t i = 0; i < half; ++i) {
    double freq = invFreq ? invFreq[i]
                          : std::pow(theta, -2.0 * double(i) / double(headDim));
    for (int64_t t = 0; t < tokens; ++t) {
      double angle = double(t) * freq;
      cs[2 * (t * half + i)] = std::cos(angle);
      cs[2 * (t * half + i) + 1] = std::sin(angle);
    }
  }
  return cs;
}

/// Rotates each (x[i], x[i + half]) pair by +angle (forward) or -angle (the
/// transpose, backward). `in` may equal `out` unless accumulating.
template <class T>
void rope(const T *in, T *out, const double *invFreq, int64_t batch,
          int64_t tokens, int64_t heads, int64_t headDim, double theta,
          bool inverse, bool accumulate) {
  int64_t half = headDim / 2;
  const double *cs = ropeTable(tokens, headDim, theta, invFreq);
  double sign = inverse ? -1.0 : 1.0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = ((b * tokens + t) * heads + h) * headDim;
        const T *x = in + base;
        T *y = out + base;
        for (int64_t i = 0; i < half; ++i) {
          double c = cs[2 * (t * half + i)];
          double s = sign * cs[2 * (t * half + i) + 1];
          double x1 = load(x, i), x2 = load(x, i + half);
          double y1 = x1 * c - x2 * s;
          double y2 = x2 * c + x1 * s;
          if (accumulate) {
            y1 += load(y, i);
            y2 += load(y, i + half);
          }
          store(y, i, y1);
          store(y, i + half, y2);
        }
      }
}

/// The shapes of one attention call.
struct AttentionShape {
  int64_t batch, tokens, heads, kvHeads, headDim;
  bool causal;
  int64_t ldq() const { return heads * headDim; }
  int64_t ldk() const { return kvHeads * headDim; }
  /// Offset of head h's first element of sample b in a q/o buffer.
  int64_t qOffset(int64_t b, int64_t h) const {
    return b * tokens * ldq() + h * headDim;
  }
  /// Offset of the key/value head that query head h reads.
  int64_t kOffset(int64_t b, int64_t h) const {
    return b * tokens * ldk() + (h / (heads / kvHeads)) * headDim;
  }
  /// Last key index token t attends to.
  int64_t lastKey(int64_t t) const { return causal ? t : tokens - 1; }
};

/// S = scale Q K^T for one (sample, head) into s [T, T].
template <class C>
void scores(const AttentionShape &a, const C *q, const C *k, C *s) {
  double scale = 1.0 / std::sqrt(double(a.headDim));
  gemm(false, true, a.tokens, a.tokens, a.headDim, scale, q, a.ldq(), k,
       a.ldk(), 0.0, s, a.tokens);
}

template <class C>
void attentionForward(const AttentionShape &a, const C *q, const C *k,
                      const C *v, C *o, C *lse) {
  int64_t T = a.tokens;
  C *p = scratch<C>(8, T * T);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      scores(a, q + a.qOffset(b, h), k + a.kOffset(b, h), p);
      // Stable softmax: e = exp(S - max) (in the compute type; the sum in
      // f64), P = e / sum e, lse = max + log sum e.
      for (int64_t t = 0; t < T; ++t) {
        C *row = p + t * T;
        int64_t last = a.lastKey(t);
        C mx = -std::numeric_limits<C>::infinity();
        for (int64_t s = 0; s <= last; ++s)
          mx = std::max(mx, row[s]);
        double sum = 0;
        for (int64_t s = 0; s <= last; ++s) {
          row[s] = std::exp(row[s] - mx);
          sum += row[s];
        }
        double l = double(mx) + std::log(sum);
        C inv = C(1.0 / sum);
        for (int64_t s = 0; s <= last; ++s)
          row[s] *= inv;
        for (int64_t s = last + 1; s < T; ++s)
          row[s] = 0;
        lse[(b * a.heads + h) * T + t] = C(l);
      }
      gemm(false, false, T, a.headDim, T, 1.0, p, T, v + a.kOffset(b, h),
           a.ldk(), 0.0, o + a.qOffset(b, h), a.ldq());
    }
}

/// dk, dv must be zero on entry (query heads of a group add into them).
template <class C>
void attentionBackward(const AttentionShape &a, const C *q, const C *k,
                       const C *v, const C *lse, const C *dout, C *dq, C *dk,
                       C *dv) {
  int64_t T = a.tokens, dh = a.headDim;
  double scale = 1.0 / std::sqrt(double(dh));
  C *p = scratch<C>(8, T * T);
  C *dp = scratch<C>(9, T * T);
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h) {
      int64_t qo = a.qOffset(b, h), ko = a.kOffset(b, h);
      // P recomputed from the scores and the forward pass's lse.
      scores(a, q + qo, k + ko, p);
      for (int64_t t = 0; t < T; ++t) {
        C l = lse[(b * a.heads + h) * T + t];
        C *row = p + t * T;
        int64_t last = a.lastKey(t);
        for (int64_t s = 0; s <= last; ++s)
          row[s] = std::exp(row[s] - l);
        for (int64_t s = last + 1; s < T; ++s)
          row[s] = 0;
      }
      // dV += P^T dO;  dP = dO V^T.
      gemm(true, false, T, dh, T, 1.0, p, T, dout + qo, a.ldq(), 1.0, dv + ko,
           a.ldk());
      gemm(false, true, T, T, dh, 1.0, dout + qo, a.ldq(), v + ko, a.ldk(), 0.0,
           dp, T);
      // dS = P (dP - D) with D_t = sum_s P[t, s] dP[t, s], which equals
      // the usual rowsum(dO * O) but is formed from P and dP in the compute
      // type: with bf16 storage the rounding of O to bf16 would enter dS
      // wherever dP - D cancels (a 4x larger error in the tests).
      for (int64_t t = 0; t < T; ++t) {
        double d = 0;
        for (int64_t s = 0; s < T; ++s)
          d += double(p[t * T + s]) * double(dp[t * T + s]);
        for (int64_t s = 0; s < T; ++s)
          dp[t * T + s] = C(double(p[t * T + s]) * (double(dp[t * T + s]) - d));
      }
      // dQ = scale dS K;  dK += scale dS^T Q.
      gemm(false, false, T, dh, T, scale, dp, T, k + ko, a.ldk(), 0.0, dq + qo,
           a.ldq());
      gemm(true, false, T, dh, T, scale, dp, T, q + qo, a.ldq(), 1.0, dk + ko,
           a.ldk());
    }
}

} // namespace

void rope_forward(Rank *, DType dt, const void *x, void *y, const void *invFreq,
                  int64_t batch, int64_t tokens, int64_t heads, int64_t headDim,
                  double theta) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    rope(static_cast<const T *>(x), static_cast<T *>(y),
         static_cast<const double *>(invFreq), batch, tokens, heads, headDim,
         theta, false, false);
  });
}

void rope_backward(Rank *, DType dt, const void *dy, void *dx,
                   const void *invFreq, int64_t batch, int64_t tokens,
                   int64_t heads, int64_t headDim, double theta,
                   bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    rope(static_cast<const T *>(dy), static_cast<T *>(dx),
         static_cast<const double *>(invFreq), batch, tokens, heads, headDim,
         theta, true, accumulate);
  });
}

void rope_llama3_frequencies(Rank *, void *invFreq, int64_t headDim,
                             double theta, double factor, double lowFreqFactor,
                             double highFreqFactor,
                             int64_t originalMaxPositions) {
  auto *f = static_cast<double *>(invFreq);
  const double context = double(originalMaxPositions);
  // Wavelengths (in positions) above which a frequency is divided by the
  // factor, and below which it is kept.
  const double longWave = context / lowFreqFactor;
  const double shortWave = context / highFreqFactor;
  for (int64_t i = 0; i < headDim / 2; ++i) {
    double freq = std::pow(theta, -2.0 * double(i) / double(headDim));
    double wave = 2.0 * M_PI / freq;
    if (wave > longWave) {
      freq /= factor;
    } else if (wave >= shortWave) {
      double s =
          (context / wave - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      freq = (1.0 - s) * freq / factor + s * freq;
    }
    f[i] = freq;
  }
}

void attention_forward(Rank *, DType dt, const void *q, const void *k,
                       const void *v, void *o, void *lse, int64_t batch,
                       int64_t tokens, int64_t heads, int64_t kvHeads,
                       int64_t headDim, bool causal) {
  AttentionShape a{batch, tokens, heads, kvHeads, headDim, causal};
  int64_t nq = batch * tokens * a.ldq(), nk = batch * tokens * a.ldk();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *ot = static_cast<T *>(o);
    auto *oc = asComputeOutput(ot, nq, 3, false);
    attentionForward(a, asCompute(static_cast<const T *>(q), nq, 0),
                     asCompute(static_cast<const T *>(k), nk, 1),
                     asCompute(static_cast<const T *>(v), nk, 2), oc,
                     static_cast<AccOf<T> *>(lse));
    finishOutput(ot, oc, nq);
  });
}

void attention_backward(Rank *, DType dt, const void *q, const void *k,
                        const void *v, const void *o, const void *lse,
                        const void *dout, void *dq, void *dk, void *dv,
                        int64_t batch, int64_t tokens, int64_t heads,
                        int64_t kvHeads, int64_t headDim, bool causal,
                        void *workspace) {
  // o is not read: see the computation of D in attentionBackward. The CPU
  // needs no workspace (the compiler reserves one for CUDA only).
  (void)o;
  (void)workspace;
  AttentionShape a{batch, tokens, heads, kvHeads, headDim, causal};
  int64_t nq = batch * tokens * a.ldq(), nk = batch * tokens * a.ldk();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *dqt = static_cast<T *>(dq);
    auto *dkt = static_cast<T *>(dk);
    auto *dvt = static_cast<T *>(dv);
    auto *dqc = asComputeOutput(dqt, nq, 5, false);
    auto *dkc = asComputeOutput(dkt, nk, 6, false);
    auto *dvc = asComputeOutput(dvt, nk, 7, false);
    std::fill(dkc, dkc + nk, 0);
    std::fill(dvc, dvc + nk, 0);
    attentionBackward(a, asCompute(static_cast<const T *>(q), nq, 0),
                      asCompute(static_cast<const T *>(k), nk, 1),
                      asCompute(static_cast<const T *>(v), nk, 2),
                      static_cast<const AccOf<T> *>(lse),
                      asCompute(static_cast<const T *>(dout), nq, 4), dqc, dkc,
                      dvc);
    finishOutput(dqt, dqc, nq);
    finishOutput(dkt, dkc, nk);
    finishOutput(dvt, dvc, nk);
  });
}

} // namespace dprt::cpu
