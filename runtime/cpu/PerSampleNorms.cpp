//===- PerSampleNorms.cpp - Per-sample squared gradient norms on the CPU --===//
//
// Every kernel ADDS ||grad_b||^2 of one parameter into n2[b]. Sums of squares
// run in f64; the Gram matrices and the direct per-sample gradient are BLAS
// products in the acc type (f32 for f32 and bf16 models, whose operands are
// widened to f32 first), never in bf16.
//
//===----------------------------------------------------------------------===//

#include "Element.h"
#include "WeightedRows.h"

#include "dprt/kernels.h"

#include <numeric>

namespace dprt::cpu {

namespace {

template <class T> double sumSquares(const T *p, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = load(p, i);
    s += v * v;
  }
  return s;
}

} // namespace

void norm_rank1(Rank *, DType dt, const void *x, const void *dy, void *n2,
                int64_t batch, int64_t in, int64_t out) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *dyt = static_cast<const T *>(dy);
    auto *n = static_cast<AccOf<T> *>(n2);
    // ||dy_b x_b^T||_F^2 = ||x_b||^2 ||dy_b||^2.
    for (int64_t b = 0; b < batch; ++b)
      n[b] = AccOf<T>(double(n[b]) + sumSquares(xt + b * in, in) *
                                         sumSquares(dyt + b * out, out));
  });
}

void norm_rank1_bias(Rank *, DType dt, const void *x, const void *dy, void *n2,
                     int64_t batch, int64_t in, int64_t out) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xt = static_cast<const T *>(x);
    auto *dyt = static_cast<const T *>(dy);
    auto *n = static_cast<AccOf<T> *>(n2);
    // [x_b, 1] is the input of the weight with its bias as a last column.
    for (int64_t b = 0; b < batch; ++b)
      n[b] = AccOf<T>(double(n[b]) + (sumSquares(xt + b * in, in) + 1.0) *
                                         sumSquares(dyt + b * out, out));
  });
}

void gram(Rank *, DType dt, const void *x, void *K, int64_t batch,
          int64_t tokens, int64_t dim, bool accumulate) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *xc = asCompute(static_cast<const T *>(x), batch * tokens * dim, 0);
    auto *k = static_cast<AccOf<T> *>(K);
    // K[b] (+)= X_b X_b^T, symmetric: syrk computes one triangle.
    for (int64_t b = 0; b < batch; ++b)
      syrk(tokens, dim, 1.0, xc + b * tokens * dim, dim, accumulate ? 1.0 : 0.0,
           k + b * tokens * tokens, tokens);
  });
}

void gram_dot(Rank *, DType acc, const void *Ka, const void *Kg, void *n2,
              int64_t batch, int64_t tokens) {
  dispatchAcc(acc, [&](auto tag) {
    using A = decltype(tag);
    auto *ka = static_cast<const A *>(Ka);
    auto *kg = static_cast<const A *>(Kg);
    auto *n = static_cast<A *>(n2);
    int64_t tt = tokens * tokens;
    // <Ka, Kg>_F = sum_{t,s} (a_t . a_s)(g_t . g_s) = ||G^T A||_F^2.
    for (int64_t b = 0; b < batch; ++b) {
      double s = 0;
      for (int64_t i = 0; i < tt; ++i)
        s += double(ka[b * tt + i]) * double(kg[b * tt + i]);
      n[b] = A(double(n[b]) + s);
    }
  });
}

void gram_norm(Rank *rank, DType dt, const void *dy, const void *Ka, void *Kg,
               void *n2, int64_t batch, int64_t tokens, int64_t dim) {
  gram(rank, dt, dy, Kg, batch, tokens, dim, false);
  gram_dot(rank, accOf(dt), Ka, Kg, n2, batch, tokens);
}

namespace {

/// norm_direct and (withBias) norm_direct_bias: each sample's W_b = dy_b^T
/// x_b [out, in] formed in the workspace and its squared Frobenius norm
/// added; with the bias also that of its column, sum_t dy_bt.
void directNorms(DType dt, const void *x, const void *dy, void *n2,
                 int64_t batch, int64_t tokens, int64_t in, int64_t out,
                 void *workspace, bool withBias) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xc = asCompute(static_cast<const T *>(x), batch * tokens * in, 0);
    auto *dyc = asCompute(static_cast<const T *>(dy), batch * tokens * out, 1);
    auto *ws = static_cast<A *>(workspace);
    auto *n = static_cast<A *>(n2);
    double *g = withBias ? scratch<double>(0, out) : nullptr;
    for (int64_t b = 0; b < batch; ++b) {
      gemm(true, false, out, in, tokens, 1.0, dyc + b * tokens * out, out,
           xc + b * tokens * in, in, 0.0, ws, in);
      if (!withBias) {
        n[b] = A(double(n[b]) + sumSquares(ws, out * in));
        continue;
      }
      // The bias column, from the widened dy already in cache.
      std::fill(g, g + out, 0.0);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < out; ++j)
          g[j] += double(dyc[(b * tokens + t) * out + j]);
      n[b] = A(double(n[b]) + sumSquares(ws, out * in) + sumSquares(g, out));
    }
  });
}

} // namespace

void norm_direct(Rank *, DType dt, const void *x, const void *dy, void *n2,
                 int64_t batch, int64_t tokens, int64_t in, int64_t out,
                 void *workspace) {
  directNorms(dt, x, dy, n2, batch, tokens, in, out, workspace, false);
}

void norm_direct_bias(Rank *, DType dt, const void *x, const void *dy, void *n2,
                      int64_t batch, int64_t tokens, int64_t in, int64_t out,
                      void *workspace) {
  directNorms(dt, x, dy, n2, batch, tokens, in, out, workspace, true);
}

void norm_bias(Rank *, DType dt, const void *dy, void *n2, int64_t batch,
               int64_t tokens, int64_t out) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *dyt = static_cast<const T *>(dy);
    auto *n = static_cast<AccOf<T> *>(n2);
    double *g = scratch<double>(0, out);
    // ||sum_t dy_t||^2.
    for (int64_t b = 0; b < batch; ++b) {
      std::fill(g, g + out, 0.0);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < out; ++j)
          g[j] += load(dyt + (b * tokens + t) * out, j);
      n[b] = AccOf<T>(double(n[b]) + sumSquares(g, out));
    }
  });
}

void norm_embedding(Rank *, DType dt, const int32_t *tok, const void *dy,
                    void *n2, int64_t batch, int64_t tokens, int64_t dim) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *dyt = static_cast<const T *>(dy);
    auto *n = static_cast<AccOf<T> *>(n2);
    std::vector<int64_t> order(tokens);
    double *g = scratch<double>(0, dim);
    // sum_v ||sum_{t: tok_t = v} dy_t||^2: sort the sample's positions by
    // token and sum each run of equal tokens (O(T log T + T dim)).
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t *tb = tok + b * tokens;
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t c) { return tb[a] < tb[c]; });
      double s = 0;
      for (int64_t i = 0; i < tokens;) {
        std::fill(g, g + dim, 0.0);
        int64_t j = i;
        for (; j < tokens && tb[order[j]] == tb[order[i]]; ++j)
          for (int64_t d = 0; d < dim; ++d)
            g[d] += load(dyt + (b * tokens + order[j]) * dim, d);
        s += sumSquares(g, dim);
        i = j;
      }
      n[b] = AccOf<T>(double(n[b]) + s);
    }
  });
}

void norm_position_embedding(Rank *, DType dt, const void *dy, void *n2,
                             int64_t batch, int64_t tokens, int64_t dim) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    auto *dyt = static_cast<const T *>(dy);
    auto *n = static_cast<AccOf<T> *>(n2);
    // Row t < T of sample b's table gradient is dy_bt: ||dy_b||^2.
    int64_t block = tokens * dim;
    for (int64_t b = 0; b < batch; ++b)
      n[b] = AccOf<T>(double(n[b]) + sumSquares(dyt + b * block, block));
  });
}

void norm_tied_cross(Rank *, DType dt, const int32_t *tok, const void *dyEmb,
                     const void *x, const void *dyHead, void *n2, int64_t batch,
                     int64_t tokensEmb, int64_t tokensHead, int64_t vocab,
                     int64_t dim, void *workspace) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xc =
        asCompute(static_cast<const T *>(x), batch * tokensHead * dim, 0);
    auto *ec =
        asCompute(static_cast<const T *>(dyEmb), batch * tokensEmb * dim, 1);
    auto *g = static_cast<const T *>(dyHead);
    auto *m = static_cast<A *>(workspace);
    auto *n = static_cast<A *>(n2);
    int64_t block = tokensHead * tokensEmb;
    for (int64_t b = 0; b < batch; ++b) {
      // M_b = X_b DyEmb_b^T [tokensHead, tokensEmb]: M[s, t] = x_s . dyEmb_t.
      A *mb = m + b * block;
      gemm(false, true, tokensHead, tokensEmb, dim, 1.0,
           xc + b * tokensHead * dim, dim, ec + b * tokensEmb * dim, dim, 0.0,
           mb, tokensEmb);
      // 2 <E_b, L_b> = 2 sum_{s,t} dyHead_b[s, tok_t] M[s, t].
      const int32_t *tb = tok + b * tokensEmb;
      double cross = 0;
      for (int64_t s = 0; s < tokensHead; ++s) {
        const T *row = g + (b * tokensHead + s) * vocab;
        for (int64_t t = 0; t < tokensEmb; ++t)
          cross += double(load(row, tb[t])) * double(mb[s * tokensEmb + t]);
      }
      n[b] = A(double(n[b]) + 2.0 * cross);
    }
  });
}

void norm_tied_direct(Rank *, DType dt, const int32_t *tok, const void *dyEmb,
                      const void *x, const void *dyHead, void *n2,
                      int64_t batch, int64_t tokensEmb, int64_t tokensHead,
                      int64_t vocab, int64_t dim, void *workspace) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xc =
        asCompute(static_cast<const T *>(x), batch * tokensHead * dim, 0);
    auto *gc = asCompute(static_cast<const T *>(dyHead),
                         batch * tokensHead * vocab, 1);
    auto *e = static_cast<const T *>(dyEmb);
    auto *ws = static_cast<A *>(workspace);
    auto *n = static_cast<A *>(n2);
    for (int64_t b = 0; b < batch; ++b) {
      // The head's L_b = dyHead_b^T x_b [vocab, dim], then the embedding's
      // rows added where its tokens are: the tied table's gradient.
      gemm(true, false, vocab, dim, tokensHead, 1.0,
           gc + b * tokensHead * vocab, vocab, xc + b * tokensHead * dim, dim,
           0.0, ws, dim);
      for (int64_t t = 0; t < tokensEmb; ++t) {
        int64_t r = b * tokensEmb + t;
        A *row = ws + int64_t(tok[r]) * dim;
        for (int64_t j = 0; j < dim; ++j)
          row[j] = A(double(row[j]) + double(load(e + r * dim, j)));
      }
      n[b] = A(double(n[b]) + sumSquares(ws, vocab * dim));
    }
  });
}

void norm_rows(Rank *, DType rows, const void *g, void *n2, int64_t batch,
               int64_t dim) {
  dispatchRows(rows, g, dim, [&](const auto &gt, auto accTag) {
    using A = decltype(accTag);
    auto *n = static_cast<A *>(n2);
    for (int64_t b = 0; b < batch; ++b) {
      double squares = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const double v = load(gt, b * dim + j);
        squares += v * v;
      }
      n[b] = A(double(n[b]) + squares);
    }
  });
}

void linear_per_sample_grad(Rank *, DType dt, DType rows, const void *x,
                            const void *dy, void *g, void *n2, int64_t batch,
                            int64_t tokens, int64_t in, int64_t out) {
  if (rows != dt && !(rows == DType::MXFP8 && dt != DType::F64 &&
                      in % kMxBlock == 0))
    throw std::invalid_argument(
        "linear_per_sample_grad: rows are of the compute type, or MXFP8 for "
        "f32 or bf16 operands with in a multiple of 32");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    using A = AccOf<T>;
    auto *xc = asCompute(static_cast<const T *>(x), batch * tokens * in, 0);
    auto *dyc = asCompute(static_cast<const T *>(dy), batch * tokens * out, 1);
    auto *n = static_cast<A *>(n2);
    // g_b = dy_b^T x_b [out, in], one GEMM per sample (K = tokens), rounded
    // once to the rows' type; its squared Frobenius norm is that of the
    // rounded values, the ones rows_weighted_sum adds.
    for (int64_t b = 0; b < batch; ++b) {
      double squares;
      if (rows == DType::MXFP8) {
        if constexpr (std::is_same_v<A, float>) {
          float *acc = scratch<float>(2, out * in);
          gemm(true, false, out, in, tokens, 1.0, dyc + b * tokens * out, out,
               xc + b * tokens * in, in, 0.0, acc, in);
          uint8_t *row = static_cast<uint8_t *>(g) +
                         b * storageBytes(DType::MXFP8, out * in);
          squares = quantizeMx(acc, out * in, row, row + out * in);
        }
      } else {
        T *gb = static_cast<T *>(g) + b * out * in;
        A *acc = asComputeOutput(gb, out * in, 2, false);
        gemm(true, false, out, in, tokens, 1.0, dyc + b * tokens * out, out,
             xc + b * tokens * in, in, 0.0, acc, in);
        finishOutput(gb, acc, out * in);
        squares = sumSquares(gb, out * in);
      }
      if (n)
        n[b] = A(double(n[b]) + squares);
    }
  });
}

} // namespace dprt::cpu
