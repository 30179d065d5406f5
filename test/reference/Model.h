//===- Model.h - f64 reference DP-SGD on per-sample backprop ----*- C++ -*-===//
//
// A model is a list of layer records over named per-sample values, built in
// forward order and ending with a per-sample loss. The reference runs it on
// ONE sample at a time (forward, then a reverse sweep over the records), so
// every per-sample gradient of every parameter exists explicitly; DP-SGD is
// then applied literally:
//   n_b^2 = sum_p ||grad_{p,b}||^2,  c_b = min(1, C / (n_b + 1e-6))   (flat)
//   c_{p,b} = min(1, C_l / (||grad_{p,b}|| + 1e-6)), C_l = C / sqrt(L)  (per
//             layer; L = number of trainable parameters)
//   c_b = C / (n_b + gamma)                                           (auto)
// (with n_b scaled by 1 + Recipe::normRelErr when a test asks for a
// program's rounding slack),
//   g_p = sum_b mask_b c_{p,b} grad_{p,b},  theta <- optimizer(g / B_exp),
// noise off. With the user as privacy unit the same clipping applies to
// each user's G_{p,u} = sum over its samples of mask_b grad_{p,b}, and
// g_p = sum_u c_{p,u} G_{p,u}; with clipping off every c is 1.
//
// A layer that names a parameter an earlier layer declared reads that same
// parameter (tied weights, e.g. Hugging Face's tie_word_embeddings: the
// embedding table [vocab, d] is also the head's weight [out = vocab, in = d]);
// the shapes must agree. Its per-sample gradient is the sum of the uses'
// gradients, so its norm includes their cross terms:
//   ||g_emb + g_head||^2 = ||g_emb||^2 + ||g_head||^2 + 2 <g_emb, g_head>.
//
// Example (an MLP classifier):
//
//   Model m(/*tokens=*/1);
//   m.realInput("x", 8);
//   m.tokenInput("label");
//   m.linear("fc1", "fc1.b", "x", "h", 8, 16);
//   m.activation(dprt::Activation::Relu, "h", "a");
//   m.linear("fc2", "", "a", "logits", 16, 4);   // no bias
//   m.crossEntropy("logits", "label", 4);
//   m.param("fc1") = ...;                        // [16, 8] row-major
//   StepResult r = m.dpStep(batch, mask, recipe);
//
//===----------------------------------------------------------------------===//

#ifndef DPC_REFERENCE_MODEL_H
#define DPC_REFERENCE_MODEL_H

#include "reference/Layers.h"

#include <map>
#include <string>

namespace dpc::reference {

/// What one clipped gradient covers: one sample, or every sample a user has
/// in the batch (user-level DP).
enum class PrivacyUnit { Sample, User };

/// The part of a training recipe one step uses.
struct Recipe {
  dprt::ClipMode clip = dprt::ClipMode::Flat;
  double maxNorm = 1.0;
  double gamma = 0.01; ///< automatic clipping
  dprt::OptimizerKind optimizer = dprt::OptimizerKind::SGD;
  double lr = 0.1, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
         weightDecay = 0.0;
  bool nesterov = false;
  /// The gradient sum is divided by this before the update (gradScale).
  double expectedBatch = 1.0;
  /// Clip factors are computed from n (1 + normRelErr) instead of n: the
  /// slack a program adds for the rounding error of its norms
  /// (docs/clip-planning.md, "Rounding of the norm"). 0 is the textbook
  /// definition.
  double normRelErr = 0.0;
  /// User: the per-sample gradients of each user's samples in the batch
  /// (Batch::users; at most k of them, the caller passes what it sampled)
  /// are summed, and each user's sum is clipped in place of a sample's.
  PrivacyUnit unit = PrivacyUnit::Sample;
  /// false turns DP off (the non-private baseline): every clip factor is 1,
  /// masked samples still 0, so the step takes the plain sum of the
  /// per-sample gradients.
  bool clipping = true;
};

/// A physical batch: every input's values for `size` samples back to back.
struct Batch {
  int64_t size = 0;
  std::map<std::string, Tokens> tokens; ///< int inputs [size * tokens]
  std::map<std::string, Vec> reals;     ///< real inputs [size*tokens*width]
  /// The user of each sample [size]; read when Recipe::unit is User.
  std::vector<int64_t> users;
};

struct StepResult {
  Vec loss; ///< per sample
  /// Per-sample gradient of every trainable parameter: grads[p][b].
  std::map<std::string, PerSample> grads;
  std::map<std::string, Vec> norm2; ///< ||grad_{p,b}||^2, per parameter
  Vec norm;                         ///< sqrt(sum_p norm2[p][b])
  /// Clip factor of each parameter and sample (0 for masked samples; the
  /// same for every parameter unless clipping is per layer).
  std::map<std::string, Vec> clip;
  std::map<std::string, Vec> clippedSum; ///< sum_b c_{p,b} grad_{p,b}

  /// Recipe::unit = User: the batch's user ids in ascending order (u indexes
  /// them); each user's gradient G_{p,u} = sum over its samples b of
  /// mask_b grad_{p,b}, its squared norm, the users' norms, and their clip
  /// factors c_{p,u} (0 for a user whose samples are all masked). Then
  /// clippedSum[p] = sum_u c_{p,u} G_{p,u}, and clip[p][b] is the weight
  /// sample b gets in it, mask_b c_{p,user(b)}.
  std::vector<int64_t> users;
  std::map<std::string, PerSample> userGrads;
  std::map<std::string, Vec> userNorm2;
  Vec userNorm;
  std::map<std::string, Vec> userClip;

  /// The per-sample gradients of `param` as one row-major [batch, numel]
  /// matrix (a "materialized" per-sample gradient): row b is grads[param][b].
  Vec gradMatrix(const std::string &param) const;
};

class Model {
public:
  /// tokens: the tokens of each sample (1 for a classifier); every value of
  /// a sample is a [tokens, width] matrix.
  explicit Model(int64_t tokens) : tokens_(tokens) {}

  /// int32 [tokens] per sample (tokens, targets, labels).
  void tokenInput(const std::string &name);
  /// f64 [tokens, width] per sample.
  void realInput(const std::string &name, int64_t width);

  /// Parameter `table` [vocab, dim].
  void embedding(const std::string &table, const std::string &tokens,
                 const std::string &out, int64_t vocab, int64_t dim);
  /// Parameter `table` [maxPositions, dim]: out[t] = x[t] + table[t] for
  /// t < tokens (learned absolute positions, GPT-2's wpe); rows t >= tokens
  /// get a zero gradient.
  void positionEmbedding(const std::string &table, const std::string &x,
                         const std::string &out, int64_t maxPositions,
                         int64_t dim);
  /// Parameters `weight` [out, in] and `bias` [out] ("" for none).
  void linear(const std::string &weight, const std::string &bias,
              const std::string &x, const std::string &out, int64_t in,
              int64_t outDim);
  /// peft's LoRA linear, y = x W^T + bias + scaling (x A^T) B^T, with the
  /// frozen base `weight` [out, in] and `bias` [out] ("" for none) and the
  /// trainable `loraA` [rank, in] and `loraB` [out, rank]; peft's scaling is
  /// lora_alpha / rank (lora_alpha / sqrt(rank) with use_rslora). Built from
  /// records: linear (the base), linear A, linear B, scale, add, through
  /// values named `out` + ".base", ".lora_A", ".lora_B", ".lora".
  void loraLinear(const std::string &weight, const std::string &bias,
                  const std::string &loraA, const std::string &loraB,
                  const std::string &x, const std::string &out, int64_t in,
                  int64_t outDim, int64_t rank, double scaling);
  /// Parameter `gamma` [dim].
  void rmsNorm(const std::string &gamma, const std::string &x,
               const std::string &out, int64_t dim, double eps);
  /// Parameters `gamma` [dim] and `beta` [dim] ("" for none).
  void layerNorm(const std::string &gamma, const std::string &beta,
                 const std::string &x, const std::string &out, int64_t dim,
                 double eps);
  /// Rotary embedding with inv_freq_j = theta^(-2j/headDim).
  void rope(const std::string &x, const std::string &out, int64_t heads,
            int64_t headDim, double theta);
  /// Rotary embedding with an explicit table of headDim/2 inverse
  /// frequencies (e.g. llama3InverseFrequencies).
  void rope(const std::string &x, const std::string &out, int64_t heads,
            int64_t headDim, const Vec &invFreq);
  void attention(const std::string &q, const std::string &k,
                 const std::string &v, const std::string &out, int64_t heads,
                 int64_t kvHeads, int64_t headDim, bool causal);
  void activation(dprt::Activation act, const std::string &x,
                  const std::string &out);
  /// out = factor * x.
  void scale(const std::string &x, const std::string &out, double factor);
  void mul(const std::string &a, const std::string &b, const std::string &out);
  void add(const std::string &a, const std::string &b, const std::string &out);
  /// The loss (last record): logits [tokens, classes], targets a token input.
  void crossEntropy(const std::string &logits, const std::string &targets,
                    int64_t classes, bool hasIgnore = false,
                    int64_t ignoreIndex = -1,
                    dprt::Reduction reduction = dprt::Reduction::Mean);
  /// The loss: prediction and target (a real input) [tokens, features].
  void mse(const std::string &prediction, const std::string &target,
           dprt::Reduction reduction = dprt::Reduction::Mean);

  /// Parameters in declaration order (a tied parameter once); values start
  /// at zero, gammas at one.
  const std::vector<std::string> &paramNames() const { return paramOrder_; }
  Vec &param(const std::string &name);
  const Vec &param(const std::string &name) const;
  const std::vector<int64_t> &paramShape(const std::string &name) const;
  void setTrainable(const std::string &name, bool trainable);
  std::vector<std::string> trainableParams() const;

  /// Per-sample losses (forward only).
  Vec losses(const Batch &batch) const;
  /// Losses, per-sample gradients and their norms; no clipping, no update.
  StepResult perSampleGradients(const Batch &batch) const;
  /// One DP-SGD step (noise off): clipping (of samples or of users, or none
  /// with Recipe::clipping off), the clipped sum, the optimizer update of
  /// every trainable parameter. mask [batch.size]: 0 drops a sample. Under
  /// user-level DP the batch is the whole logical batch: a user's samples in
  /// another batch would form another clipped sum.
  StepResult dpStep(const Batch &batch, const Vec &mask, const Recipe &recipe);
  /// Optimizer steps taken so far.
  int64_t steps() const { return steps_; }

private:
  enum class Op {
    Embedding,
    PositionEmbedding,
    Linear,
    RmsNorm,
    LayerNorm,
    Rope,
    Attention,
    Activation,
    Scale,
    Mul,
    Add,
    CrossEntropy,
    Mse
  };
  struct Layer {
    Op op;
    std::vector<std::string> in;
    std::string out;
    std::string weight, bias; ///< parameter names, "" when none
    int64_t inDim = 0, outDim = 0;
    int64_t heads = 0, kvHeads = 0, headDim = 0;
    double eps = 0;
    double factor = 1; ///< scale
    Vec invFreq;       ///< rope
    bool causal = false, hasIgnore = false;
    int64_t ignoreIndex = -1;
    dprt::Activation act = dprt::Activation::Relu;
    dprt::Reduction reduction = dprt::Reduction::Mean;
  };
  struct Param {
    std::vector<int64_t> shape;
    Vec value;
    bool trainable = true;
    Vec state1, state2; ///< optimizer state
  };
  /// The values of one sample: real values [tokens, width], token inputs.
  struct Sample {
    std::map<std::string, Vec> values;
    std::map<std::string, Tokens> tokens;
    double loss = 0;
  };

  /// Declares `name`, or ties this use to the parameter an earlier layer
  /// declared under that name.
  void addParam(const std::string &name, std::vector<int64_t> shape,
                double init);
  void defineValue(const std::string &name, int64_t width);
  int64_t width(const std::string &value) const;
  void requireOpen() const;
  Sample forwardSample(const Batch &batch, int64_t b) const;
  /// Fills r.clip and r.clippedSum, one clipped gradient per sample.
  void clipSamples(StepResult &r, const Vec &mask, const Recipe &recipe) const;
  /// Fills r.users, r.userGrads, ..., r.clip and r.clippedSum, one clipped
  /// gradient per user.
  void clipUsers(StepResult &r, const Batch &batch, const Vec &mask,
                 const Recipe &recipe) const;
  /// Per-parameter gradients of sample s's loss.
  std::map<std::string, Vec> backwardSample(const Sample &s) const;

  int64_t tokens_;
  std::vector<Layer> layers_;
  std::map<std::string, int64_t> widths_; ///< real values and real inputs
  std::vector<std::string> tokenInputs_, realInputs_;
  std::map<std::string, Param> params_;
  std::vector<std::string> paramOrder_;
  int64_t steps_ = 0;
};

} // namespace dpc::reference

#endif // DPC_REFERENCE_MODEL_H
