//===- Layers.h - f64 reference layers on explicit loops --------*- C++ -*-===//
//
// The float64 reference every runtime kernel is checked against. It shares
// no code with the runtime (only the enums of dprt/types.h) and is written
// to be obviously right rather than fast: explicit loops, f64 everywhere,
// backward passes through explicit Jacobians where the runtime uses a
// simplified closed form (the norms), the softmax Jacobian where the runtime
// uses rowsum(dO * O) (attention), and so on.
//
// Layout as in dprt/kernels.h: row-major, B samples of T tokens are B*T rows
// ("rows"), sample b owns rows [b*T, (b+1)*T).
//
//===----------------------------------------------------------------------===//

#ifndef DPC_REFERENCE_LAYERS_H
#define DPC_REFERENCE_LAYERS_H

#include "dprt/types.h"

#include <cstdint>
#include <vector>

namespace dpc::reference {

using Vec = std::vector<double>;
using Tokens = std::vector<int32_t>;
/// One gradient (or other vector) per sample.
using PerSample = std::vector<Vec>;

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// out[r, :] = table[tok[r], :].
Vec embeddingForward(const Tokens &tok, const Vec &table, int64_t dim);

/// y[b, t, :] = x[b, t, :] + table[t, :]: learned absolute positions
/// (GPT-2's wpe); table [maxPositions, dim], tokens <= maxPositions.
Vec positionEmbeddingForward(const Vec &x, const Vec &table, int64_t batch,
                             int64_t tokens, int64_t dim);

/// y = x W^T + bias; w [out, in], bias [out] or null.
Vec linearForward(const Vec &x, const Vec &w, const Vec *bias, int64_t rows,
                  int64_t in, int64_t out);

/// y = x / sqrt(mean x^2 + eps) * gamma; rstd [rows] when not null.
Vec rmsNormForward(const Vec &x, const Vec &gamma, int64_t rows, int64_t dim,
                   double eps, Vec *rstd = nullptr);

/// y = (x - mean) / sqrt(var + eps) * gamma + beta (biased variance).
Vec layerNormForward(const Vec &x, const Vec &gamma, const Vec *beta,
                     int64_t rows, int64_t dim, double eps, Vec *mean = nullptr,
                     Vec *rstd = nullptr);

/// Rotate-half rotary embedding; x [batch*tokens, heads*headDim]. Pair
/// (j, j + headDim/2) of token t turns by the angle t * invFreq[j].
Vec ropeForward(const Vec &x, int64_t batch, int64_t tokens, int64_t heads,
                int64_t headDim, const Vec &invFreq);
/// The same with invFreq = ropeInverseFrequencies(theta, headDim).
Vec ropeForward(const Vec &x, int64_t batch, int64_t tokens, int64_t heads,
                int64_t headDim, double theta);

/// The unscaled rotary frequencies: inv_freq_j = theta^(-2j/headDim),
/// j < headDim/2.
Vec ropeInverseFrequencies(double theta, int64_t headDim);

/// Llama 3.1's rope scaling (Hugging Face rope_type "llama3").
struct Llama3RopeScaling {
  double factor = 8.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192; ///< original_max_position_embeddings
};

/// The scaled table: with wavelength w_j = 2 pi / f_j of the unscaled
/// f_j = theta^(-2j/headDim) and L = originalMaxPositions, f_j is kept
/// where w_j < L / highFreqFactor, divided by `factor` where
/// w_j > L / lowFreqFactor, and in between interpolated,
///   f'_j = (1 - s) f_j / factor + s f_j,
///   s = (L / w_j - lowFreqFactor) / (highFreqFactor - lowFreqFactor).
Vec llama3InverseFrequencies(double theta, int64_t headDim,
                             const Llama3RopeScaling &scaling);

struct AttentionShape {
  int64_t batch, tokens, heads, kvHeads, headDim;
  bool causal;
};

/// softmax(Q K^T / sqrt(headDim)) V per sample and head (GQA: head h reads
/// kv head h / (heads / kvHeads)); lse [batch, heads, tokens].
Vec attentionForward(const Vec &q, const Vec &k, const Vec &v,
                     const AttentionShape &s, Vec *lse = nullptr);

double activation(dprt::Activation act, double x);
Vec activationForward(dprt::Activation act, const Vec &x);
/// y = factor * x (LoRA's alpha / r).
Vec scaleForward(const Vec &x, double factor);
Vec mulForward(const Vec &a, const Vec &b);
Vec addForward(const Vec &a, const Vec &b);

/// Per-sample softmax cross-entropy (mean over counted tokens or sum);
/// lse [batch*tokens].
Vec crossEntropyForward(const Vec &logits, const Tokens &targets, int64_t batch,
                        int64_t tokens, int64_t classes, bool hasIgnore,
                        int64_t ignoreIndex, dprt::Reduction reduction,
                        Vec *lse = nullptr);

/// Per-sample squared error (mean or sum over features).
Vec mseForward(const Vec &prediction, const Vec &target, int64_t batch,
               int64_t features, dprt::Reduction reduction);

//===----------------------------------------------------------------------===//
// Backward: input gradients
//===----------------------------------------------------------------------===//

/// dx = dy W.
Vec linearBackwardInput(const Vec &dy, const Vec &w, int64_t rows, int64_t in,
                        int64_t out);

/// dx[j] = sum_k dy[k] dy_k/dx_j through the explicit Jacobian of a row.
Vec rmsNormBackward(const Vec &x, const Vec &gamma, const Vec &dy, int64_t rows,
                    int64_t dim, double eps);
Vec layerNormBackward(const Vec &x, const Vec &gamma, const Vec &dy,
                      int64_t rows, int64_t dim, double eps);

/// The inverse rotation.
Vec ropeBackward(const Vec &dy, int64_t batch, int64_t tokens, int64_t heads,
                 int64_t headDim, const Vec &invFreq);
Vec ropeBackward(const Vec &dy, int64_t batch, int64_t tokens, int64_t heads,
                 int64_t headDim, double theta);

struct AttentionGrads {
  Vec dq, dk, dv;
};
AttentionGrads attentionBackward(const Vec &q, const Vec &k, const Vec &v,
                                 const Vec &dout, const AttentionShape &s);

double activationDerivative(dprt::Activation act, double x);
Vec activationBackward(dprt::Activation act, const Vec &x, const Vec &dy);

/// dlogits for the per-sample loss seeds dloss [batch].
Vec crossEntropyBackward(const Vec &logits, const Tokens &targets,
                         const Vec &dloss, int64_t batch, int64_t tokens,
                         int64_t classes, bool hasIgnore, int64_t ignoreIndex,
                         dprt::Reduction reduction);
Vec mseBackward(const Vec &prediction, const Vec &target, const Vec &dloss,
                int64_t batch, int64_t features, dprt::Reduction reduction);

//===----------------------------------------------------------------------===//
// Per-sample parameter gradients, formed explicitly
//===----------------------------------------------------------------------===//

/// grad W_b [out, in] = sum_t dy_{b,t} x_{b,t}^T.
PerSample linearWeightGradPerSample(const Vec &x, const Vec &dy, int64_t batch,
                                    int64_t tokens, int64_t in, int64_t out);
/// grad bias_b = sum_t dy_{b,t}.
PerSample biasGradPerSample(const Vec &dy, int64_t batch, int64_t tokens,
                            int64_t out);
/// grad E_b [vocab, dim]: row v = sum over t with tok = v of dy_{b,t}.
PerSample embeddingGradPerSample(const Tokens &tok, const Vec &dy,
                                 int64_t batch, int64_t tokens, int64_t vocab,
                                 int64_t dim);
/// grad P_b [maxPositions, dim]: row t = dy_{b,t} for t < tokens, and 0 for
/// the positions a sample of `tokens` tokens does not reach.
PerSample positionEmbeddingGradPerSample(const Vec &dy, int64_t batch,
                                         int64_t tokens, int64_t maxPositions,
                                         int64_t dim);
/// grad gamma_b = sum_t dy * xhat (xhat = x / rms).
PerSample rmsNormGammaGradPerSample(const Vec &x, const Vec &dy, int64_t batch,
                                    int64_t tokens, int64_t dim, double eps);
/// grad gamma_b = sum_t dy * xhat (xhat = (x - mean) / std).
PerSample layerNormGammaGradPerSample(const Vec &x, const Vec &dy,
                                      int64_t batch, int64_t tokens,
                                      int64_t dim, double eps);

//===----------------------------------------------------------------------===//
// Clipping and optimizers
//===----------------------------------------------------------------------===//

double sumSquares(const Vec &v);

/// Flat/PerLayer: min(1, maxNorm / (norm + 1e-6)); Automatic:
/// maxNorm / (norm + gamma).
double clipFactor(dprt::ClipMode mode, double norm, double maxNorm,
                  double gamma);

/// sum_b c[b] g[b].
Vec weightedSum(const PerSample &g, const Vec &c);

/// One optimizer step on w for the (already scaled) gradient g.
void sgdStep(Vec &w, const Vec &g, double lr, double weightDecay);
void momentumStep(Vec &w, Vec &velocity, const Vec &g, double lr,
                  double momentum, bool nesterov, double weightDecay);
/// t: the step count from 1 (bias correction).
void adamwStep(Vec &w, Vec &m, Vec &v, const Vec &g, int64_t t, double lr,
               double beta1, double beta2, double eps, double weightDecay);

} // namespace dpc::reference

#endif // DPC_REFERENCE_LAYERS_H
