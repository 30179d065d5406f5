//===- GPT2.cpp - GPT-2
//------------------------------------------------------===//
//
// transformers' modeling_gpt2.py:
//
//   x = wte[tok] + wpe[t]
//   per layer: q, k, v = split(c_attn(ln_1(x)))
//              h = x + c_proj(attn(q, k, v))
//              x = h + mlp.c_proj(act(c_fc(ln_2(h))))
//   logits = lm_head(ln_f(x)),  lm_head.weight = wte.weight when tied
//
// LayerNorms and Conv1D projections have biases. Conv1D stores its weight as
// [in, out] (y = x W + b), the transpose of dp.linear's [out, in], and c_attn
// holds q, k and v side by side: each dp parameter names its slice (hf.rows).
//
// The learned positions are a dp.position_embedding of table @pos
// (transformer.wpe.weight, n_positions rows); the tied head is dp.linear
// reading @emb, the embedding's own table (docs/huggingface.md).
//
//===----------------------------------------------------------------------===//

#include "Families.h"

#include "llvm/Support/FormatVariadic.h"

using namespace dpc::hf;
using llvm::StringRef;

namespace {

class GPT2Importer : public FamilyImporter {
public:
  void readConfig(ConfigReader &config) override;
  int64_t maxPositions() const override { return positions; }
  StringRef maxPositionsField() const override { return "n_positions"; }
  int64_t vocab() const override { return vocabSize; }
  int64_t width() const override { return hidden; }
  int64_t blocks() const override { return layers; }
  double initializerRange() const override { return initStd; }
  void write(ModelWriter &writer) const override;

private:
  int64_t vocabSize = 1, hidden = 1, layers = 1, heads = 1, inner = 1;
  int64_t positions = 1;
  double eps = 1e-5, initStd = 0.02;
  bool tied = true;
  Activation act = Activation::GeluTanh;
};

void GPT2Importer::readConfig(ConfigReader &config) {
  vocabSize = config.requirePositive("vocab_size");
  hidden = config.requirePositive("n_embd");
  layers = config.requirePositive("n_layer");
  heads = config.requirePositive("n_head");
  if (hidden % heads != 0)
    config.refuse("n_head",
                  llvm::formatv("must divide n_embd = {0}", hidden).str());
  inner = config.positive("n_inner", 4 * hidden);
  positions = config.positive("n_positions", 1024);
  eps = config.positiveReal("layer_norm_epsilon", 1e-5);
  initStd = config.nonNegativeReal("initializer_range", 0.02);
  if (std::optional<Activation> a =
          readActivation(config, "activation_function", "gelu_new"))
    act = *a;

  // GPT2Config's dropouts default to 0.1, not 0.
  for (StringRef key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"})
    if (config.nonNegativeReal(key, 0.1) != 0.0)
      config.refuse(key, "dp has no dropout; set it to 0.0 to train without");
  if (!config.flag("scale_attn_weights", true))
    config.refuse("scale_attn_weights",
                  "dp.attention always scales scores by head_size^-1/2");
  if (config.flag("scale_attn_by_inverse_layer_idx", false))
    config.refuse("scale_attn_by_inverse_layer_idx",
                  "dp.attention always scales scores by head_size^-1/2");
  if (config.flag("add_cross_attention", false))
    config.refuse("add_cross_attention", "a causal LM has no encoder to "
                                         "attend to");
  // Only GPT2DoubleHeadsModel reads summary_*; reordering and upcasting
  // change rounding, not the function; n_ctx is an old alias of n_positions.
  config.harmless({"summary_type", "summary_use_proj", "summary_activation",
                   "summary_proj_to_labels", "summary_first_dropout",
                   "summary_last_dropout", "reorder_and_upcast_attn", "n_ctx"});

  tied = config.flag("tie_word_embeddings", true);
}

void GPT2Importer::write(ModelWriter &w) const {
  auto conv1d = [&](StringRef name, int64_t out, int64_t in,
                    const std::string &hfName,
                    std::optional<std::pair<int64_t, int64_t>> rows = {}) {
    return w.param(name, {out, in}, Init::Normal,
                   {hfName + ".weight", /*transposed=*/true, rows});
  };
  auto convBias = [&](StringRef name, int64_t out, const std::string &hfName,
                      std::optional<std::pair<int64_t, int64_t>> rows = {}) {
    return w.param(name, {out}, Init::Zeros, {hfName + ".bias", false, rows});
  };
  auto layerNorm = [&](StringRef name, const std::string &hfName,
                       mlir::Value x) {
    auto scale = w.param(name, {hidden}, Init::Ones, {hfName + ".weight"});
    auto bias =
        w.param((name + ".b").str(), {hidden}, Init::Zeros, {hfName + ".bias"});
    return w.layerNorm(scale, bias, x, eps);
  };

  auto emb = w.param("emb", {vocabSize, hidden}, Init::Normal,
                     {"transformer.wte.weight"});
  auto pos = w.param("pos", {positions, hidden}, Init::Normal,
                     {"transformer.wpe.weight"});
  mlir::Value x = w.positionEmbedding(pos, w.embedding(emb, hidden));
  for (int64_t i = 0; i < layers; ++i) {
    std::string b = "b" + std::to_string(i);
    std::string hf = "transformer.h." + std::to_string(i);
    std::string attn = hf + ".attn.c_attn";

    mlir::Value h = layerNorm(b + ".n1", hf + ".ln_1", x);
    std::pair<int64_t, int64_t> qRows{0, hidden}, kRows{hidden, 2 * hidden},
        vRows{2 * hidden, 3 * hidden};
    mlir::Value q =
        w.linear(conv1d(b + ".wq", hidden, hidden, attn, qRows),
                 convBias(b + ".wq.b", hidden, attn, qRows), h, hidden);
    mlir::Value k =
        w.linear(conv1d(b + ".wk", hidden, hidden, attn, kRows),
                 convBias(b + ".wk.b", hidden, attn, kRows), h, hidden);
    mlir::Value v =
        w.linear(conv1d(b + ".wv", hidden, hidden, attn, vRows),
                 convBias(b + ".wv.b", hidden, attn, vRows), h, hidden);
    mlir::Value a = w.attention(q, k, v, heads, heads, std::nullopt);
    mlir::Value o =
        w.linear(conv1d(b + ".wo", hidden, hidden, hf + ".attn.c_proj"),
                 convBias(b + ".wo.b", hidden, hf + ".attn.c_proj"), a, hidden);
    mlir::Value r = w.add(x, o);

    mlir::Value m = layerNorm(b + ".n2", hf + ".ln_2", r);
    mlir::Value u =
        w.linear(conv1d(b + ".up", inner, hidden, hf + ".mlp.c_fc"),
                 convBias(b + ".up.b", inner, hf + ".mlp.c_fc"), m, inner);
    mlir::Value d =
        w.linear(conv1d(b + ".down", hidden, inner, hf + ".mlp.c_proj"),
                 convBias(b + ".down.b", hidden, hf + ".mlp.c_proj"),
                 w.activation(act, u), hidden);
    x = w.add(r, d);
  }
  mlir::Value f = layerNorm("norm", "transformer.ln_f", x);
  auto head = tied ? emb
                   : w.param("head", {vocabSize, hidden}, Init::Normal,
                             {"lm_head.weight"});
  w.crossEntropy(w.linear(head, nullptr, f, vocabSize));
}

} // namespace

std::unique_ptr<FamilyImporter> dpc::hf::createGPT2Importer() {
  return std::make_unique<GPT2Importer>();
}
