//===- Llama.cpp - Llama, Mistral and Qwen2
//---------------------------------===//
//
// The three share one decoder (transformers' modeling_llama.py,
// modeling_mistral.py, modeling_qwen2.py):
//
//   x = embed_tokens[tok]
//   per layer: h = x + o_proj(attn(rope(q_proj(rms(x))), rope(k_proj(..)),
//                                  v_proj(..)))
//              x = h + down_proj(act(gate_proj(rms(h))) * up_proj(rms(h)))
//   logits = lm_head(rms(x))
//
// with attention scaled by head_dim^-1/2 and rotary embedding in the
// rotate-half convention, as dp.attention computes. They differ in which
// projections have biases, the sliding window and their defaults.
//
//===----------------------------------------------------------------------===//

#include "Families.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace dpc::hf;
using llvm::StringRef;

namespace {

enum class Window { None, AllLayers, Qwen2Layers };

/// What the three architectures do differently, with transformers' defaults
/// for fields absent from config.json.
struct Variant {
  StringRef architecture;
  /// 0: num_attention_heads.
  int64_t defaultKVHeads;
  int64_t defaultMaxPositions;
  /// Llama: attention_bias and mlp_bias fields; Qwen2: q/k/v always biased.
  bool biasFields, qkvBias;
  Window window;
};

constexpr Variant kVariants[] = {
    {"LlamaForCausalLM", 0, 2048, true, false, Window::None},
    {"MistralForCausalLM", 8, 131072, false, false, Window::AllLayers},
    {"Qwen2ForCausalLM", 32, 32768, false, true, Window::Qwen2Layers},
};

class LlamaFamilyImporter : public FamilyImporter {
public:
  explicit LlamaFamilyImporter(const Variant &variant) : variant(variant) {}

  void readConfig(ConfigReader &config) override;
  int64_t maxPositions() const override { return maxPositionEmbeddings; }
  StringRef maxPositionsField() const override {
    return "max_position_embeddings";
  }
  std::optional<int64_t> slidingWindow() const override { return window; }
  int64_t vocab() const override { return vocabSize; }
  int64_t width() const override { return hidden; }
  int64_t blocks() const override { return layers; }
  double initializerRange() const override { return initStd; }
  void write(ModelWriter &writer) const override;

private:
  void readRope(ConfigReader &config);
  void readSlidingWindow(ConfigReader &config);

  const Variant &variant;
  int64_t vocabSize = 1, hidden = 1, layers = 1, heads = 1, kvHeads = 1;
  int64_t headDim = 1, intermediate = 1, maxPositionEmbeddings = 1;
  double eps = 1e-6, ropeTheta = 10000.0, initStd = 0.02;
  bool attentionBias = false, mlpBias = false, tied = false;
  /// rope_type "llama3": its four numbers.
  struct Llama3Rope {
    double factor, lowFreqFactor, highFreqFactor;
    int64_t originalMaxPositions;
  };
  std::optional<Llama3Rope> llama3;
  Activation act = Activation::Silu;
  /// The window of the layers that slide.
  std::optional<int64_t> window;
};

void LlamaFamilyImporter::readConfig(ConfigReader &config) {
  vocabSize = config.requirePositive("vocab_size");
  hidden = config.requirePositive("hidden_size");
  layers = config.requirePositive("num_hidden_layers");
  heads = config.requirePositive("num_attention_heads");
  intermediate = config.requirePositive("intermediate_size");
  kvHeads =
      config.positive("num_key_value_heads",
                      variant.defaultKVHeads ? variant.defaultKVHeads : heads);
  if (heads % kvHeads != 0)
    config.refuse(
        "num_key_value_heads",
        llvm::formatv("must divide num_attention_heads = {0}", heads).str());
  std::optional<int64_t> givenHeadDim = config.optionalPositive("head_dim");
  if (givenHeadDim) {
    headDim = *givenHeadDim;
  } else if (hidden % heads != 0) {
    config.error(llvm::formatv("hidden_size = {0} is not divisible by "
                               "num_attention_heads = {1} and head_dim is "
                               "not given",
                               hidden, heads)
                     .str());
  } else {
    headDim = hidden / heads;
  }
  // Rotary embedding rotates pairs of features.
  if (headDim % 2 != 0 && givenHeadDim)
    config.refuse("head_dim", "is odd; rotary embedding rotates pairs of "
                              "features");
  else if (headDim % 2 != 0 && hidden % heads == 0)
    config.error(llvm::formatv("the head size hidden_size / "
                               "num_attention_heads = {0} is odd; rotary "
                               "embedding rotates pairs of features",
                               headDim)
                     .str());
  maxPositionEmbeddings =
      config.positive("max_position_embeddings", variant.defaultMaxPositions);
  eps = config.positiveReal("rms_norm_eps", 1e-6);
  initStd = config.nonNegativeReal("initializer_range", 0.02);
  if (std::optional<Activation> a =
          readActivation(config, "hidden_act", "silu"))
    act = *a;
  if (variant.biasFields) {
    attentionBias = config.flag("attention_bias", false);
    mlpBias = config.flag("mlp_bias", false);
  }
  tied = config.flag("tie_word_embeddings", false);
  if (double dropout = config.nonNegativeReal("attention_dropout", 0.0);
      dropout != 0.0)
    config.refuse("attention_dropout", "dp has no dropout; set it to 0.0 to "
                                       "train without");
  // Tensor-parallel slicing of the same matrix products: the same function.
  config.harmless({"pretraining_tp"});
  readRope(config);
  readSlidingWindow(config);
}

/// transformers 4 writes `rope_theta` and `rope_scaling`, transformers 5 one
/// `rope_parameters` dict; a theta in the dict wins, as in
/// convert_rope_params_to_dict.
void LlamaFamilyImporter::readRope(ConfigReader &config) {
  ropeTheta = config.positiveReal("rope_theta", 10000.0);
  if (config.value("partial_rotary_factor"))
    if (config.positiveReal("partial_rotary_factor", 1.0) != 1.0)
      config.refuse("partial_rotary_factor",
                    "dp.attention rotates the whole head");
  for (StringRef key : {"rope_scaling", "rope_parameters"}) {
    const llvm::json::Value *v = config.value(key);
    if (!v)
      continue;
    const llvm::json::Object *rope = v->getAsObject();
    if (!rope) {
      config.refuse(key, "expected an object");
      continue;
    }
    std::optional<StringRef> type = rope->getString("rope_type");
    if (!type)
      type = rope->getString("type");
    bool isLlama3 = type && *type == "llama3";
    if (type && *type != "default" && !isLlama3) {
      config.refuse(key, "RoPE scaling ('" + *type +
                             "') is not supported; dp.attention has plain "
                             "rotary embedding and rope_type \"llama3\"");
      continue;
    }
    // llama3: the four numbers of _compute_llama3_parameters, each required
    // (transformers has no defaults for them).
    Llama3Rope scaling{0, 0, 0, 0};
    bool ok = true;
    auto number = [](const llvm::json::Value &value, double &out) {
      std::optional<double> n = value.getAsNumber();
      if (!n || !(*n > 0))
        return false;
      out = *n;
      return true;
    };
    int seen = 0;
    for (const auto &[name, value] : *rope) {
      if (name == "rope_type" || name == "type")
        continue;
      if (name == "rope_theta" && value.getAsNumber() &&
          *value.getAsNumber() > 0) {
        ropeTheta = *value.getAsNumber();
        continue;
      }
      if (name == "partial_rotary_factor" && value.getAsNumber() &&
          *value.getAsNumber() == 1.0)
        continue;
      if (isLlama3) {
        double original = 0;
        if (name == "factor" && number(value, scaling.factor)) {
          ++seen;
          continue;
        }
        if (name == "low_freq_factor" && number(value, scaling.lowFreqFactor)) {
          ++seen;
          continue;
        }
        if (name == "high_freq_factor" &&
            number(value, scaling.highFreqFactor)) {
          ++seen;
          continue;
        }
        if (name == "original_max_position_embeddings" &&
            number(value, original) && original == std::floor(original)) {
          scaling.originalMaxPositions = int64_t(original);
          ++seen;
          continue;
        }
      }
      ok = false;
    }
    if (!isLlama3) {
      if (!ok)
        config.refuse(key, "only rope_type = \"default\" with a positive "
                           "rope_theta (and partial_rotary_factor 1), or "
                           "\"llama3\", is supported");
      continue;
    }
    // The blend divides by high_freq_factor - low_freq_factor.
    if (!ok || seen != 4 || !(scaling.highFreqFactor > scaling.lowFreqFactor)) {
      config.refuse(key, "rope_type \"llama3\" needs positive factor, "
                         "low_freq_factor < high_freq_factor and an integer "
                         "original_max_position_embeddings (and a positive "
                         "rope_theta), nothing else");
      continue;
    }
    llama3 = scaling;
  }
}

void LlamaFamilyImporter::readSlidingWindow(ConfigReader &config) {
  switch (variant.window) {
  case Window::None:
    return;
  case Window::AllLayers:
    window = config.has("sliding_window")
                 ? config.optionalPositive("sliding_window")
                 : std::optional<int64_t>(4096);
    return;
  case Window::Qwen2Layers: {
    // Qwen2Config: the window exists only with use_sliding_window, and then
    // on the layers layer_types marks (by default those from
    // max_window_layers on).
    bool use = config.flag("use_sliding_window", false);
    std::optional<int64_t> size =
        config.has("sliding_window") ? config.optionalPositive("sliding_window")
                                     : std::optional<int64_t>(4096);
    int64_t firstSliding = config.count("max_window_layers", 28);
    bool anySliding = firstSliding < layers;
    if (const llvm::json::Value *types = config.value("layer_types")) {
      const llvm::json::Array *list = types->getAsArray();
      anySliding = false;
      bool ok = list && int64_t(list->size()) == layers;
      if (list)
        for (const llvm::json::Value &t : *list) {
          std::optional<StringRef> s = t.getAsString();
          ok &= s && (*s == "full_attention" || *s == "sliding_attention");
          anySliding |= s && *s == "sliding_attention";
        }
      if (!ok)
        config.refuse("layer_types", llvm::formatv("expected {0} entries, each "
                                                   "\"full_attention\" or "
                                                   "\"sliding_attention\"",
                                                   layers)
                                         .str());
    }
    if (use && size && anySliding)
      window = size;
    return;
  }
  }
}

void LlamaFamilyImporter::write(ModelWriter &w) const {
  int64_t qWidth = heads * headDim, kvWidth = kvHeads * headDim;
  auto weight = [&](StringRef name, llvm::ArrayRef<int64_t> shape,
                    const std::string &hfName) {
    return w.param(name, shape, Init::Normal, {hfName + ".weight"});
  };
  auto bias = [&](bool present, StringRef name, int64_t size,
                  const std::string &hfName) {
    return present ? w.param(name, {size}, Init::Zeros, {hfName + ".bias"})
                   : mlir::FlatSymbolRefAttr();
  };
  auto norm = [&](StringRef name, const std::string &hfName) {
    return w.param(name, {hidden}, Init::Ones, {hfName + ".weight"});
  };

  mlir::Attribute ropeScaling;
  if (llama3)
    ropeScaling = dpc::dp::RopeLlama3Attr::get(
        w.model().getContext(), llvm::APFloat(llama3->factor),
        llvm::APFloat(llama3->lowFreqFactor),
        llvm::APFloat(llama3->highFreqFactor), llama3->originalMaxPositions);

  auto emb = weight("emb", {vocabSize, hidden}, "model.embed_tokens");
  mlir::Value x = w.embedding(emb, hidden);
  bool qkvBias = variant.qkvBias || attentionBias;
  for (int64_t i = 0; i < layers; ++i) {
    std::string b = "b" + std::to_string(i);
    std::string hf = "model.layers." + std::to_string(i);
    std::string attn = hf + ".self_attn", mlp = hf + ".mlp";

    mlir::Value h = w.rmsNorm(norm(b + ".n1", hf + ".input_layernorm"), x, eps);
    auto wq = weight(b + ".wq", {qWidth, hidden}, attn + ".q_proj");
    mlir::Value q = w.linear(
        wq, bias(qkvBias, b + ".wq.b", qWidth, attn + ".q_proj"), h, qWidth);
    auto wk = weight(b + ".wk", {kvWidth, hidden}, attn + ".k_proj");
    mlir::Value k = w.linear(
        wk, bias(qkvBias, b + ".wk.b", kvWidth, attn + ".k_proj"), h, kvWidth);
    auto wv = weight(b + ".wv", {kvWidth, hidden}, attn + ".v_proj");
    mlir::Value v = w.linear(
        wv, bias(qkvBias, b + ".wv.b", kvWidth, attn + ".v_proj"), h, kvWidth);
    mlir::Value a =
        w.attention(q, k, v, heads, kvHeads, ropeTheta, ropeScaling);
    auto wo = weight(b + ".wo", {hidden, qWidth}, attn + ".o_proj");
    mlir::Value o =
        w.linear(wo, bias(attentionBias, b + ".wo.b", hidden, attn + ".o_proj"),
                 a, hidden);
    mlir::Value r = w.add(x, o);

    mlir::Value m =
        w.rmsNorm(norm(b + ".n2", hf + ".post_attention_layernorm"), r, eps);
    auto gate = weight(b + ".gate", {intermediate, hidden}, mlp + ".gate_proj");
    mlir::Value g = w.linear(
        gate, bias(mlpBias, b + ".gate.b", intermediate, mlp + ".gate_proj"), m,
        intermediate);
    auto up = weight(b + ".up", {intermediate, hidden}, mlp + ".up_proj");
    mlir::Value u =
        w.linear(up, bias(mlpBias, b + ".up.b", intermediate, mlp + ".up_proj"),
                 m, intermediate);
    mlir::Value p = w.mul(w.activation(act, g), u);
    auto down = weight(b + ".down", {hidden, intermediate}, mlp + ".down_proj");
    mlir::Value d =
        w.linear(down, bias(mlpBias, b + ".down.b", hidden, mlp + ".down_proj"),
                 p, hidden);
    x = w.add(r, d);
  }
  mlir::Value f = w.rmsNorm(norm("norm", "model.norm"), x, eps);
  // Tied checkpoints store no lm_head.weight: the head is the embedding
  // table, read a second time (dp.model's one kind of shared parameter).
  auto head = tied ? emb : weight("head", {vocabSize, hidden}, "lm_head");
  w.crossEntropy(w.linear(head, nullptr, f, vocabSize));
}

} // namespace

std::unique_ptr<FamilyImporter>
dpc::hf::createLlamaFamilyImporter(StringRef architecture) {
  for (const Variant &variant : kVariants)
    if (variant.architecture == architecture)
      return std::make_unique<LlamaFamilyImporter>(variant);
  return nullptr;
}
