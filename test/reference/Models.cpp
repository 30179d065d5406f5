//===- Models.cpp - The example models as reference models ----------------===//

#include "reference/Models.h"

#include <algorithm>

namespace dpc::reference {

Model mlpClassifier(int64_t features, int64_t hidden, int64_t classes) {
  Model m(1);
  m.realInput("x", features);
  m.tokenInput("label");
  m.linear("fc1.w", "fc1.b", "x", "h", features, hidden);
  m.layerNorm("ln.g", "ln.b", "h", "n", hidden, 1e-5);
  m.activation(dprt::Activation::Relu, "n", "a");
  m.linear("fc2.w", "fc2.b", "a", "logits", hidden, classes);
  m.crossEntropy("logits", "label", classes);
  return m;
}

Model tinyLm(const TinyLmShape &s) {
  int64_t headDim = s.width / s.heads, kvWidth = s.kvHeads * headDim;
  Model m(s.tokens);
  auto linear = [&](const std::string &w, const std::string &x,
                    const std::string &out, int64_t in, int64_t outDim) {
    std::string module = w.substr(w.find('.') + 1);
    if (std::find(s.loraTargets.begin(), s.loraTargets.end(), module) ==
        s.loraTargets.end())
      m.linear(w, "", x, out, in, outDim);
    else
      m.loraLinear(w, "", w + ".lora_A", w + ".lora_B", x, out, in, outDim,
                   s.loraRank, s.loraScaling);
  };
  m.tokenInput("tok");
  m.tokenInput("tgt");
  m.embedding("emb", "tok", "x0", s.vocab, s.width);
  std::string x = "x0";
  if (s.positions > 0) {
    m.positionEmbedding("pos", "x0", "x0p", s.positions, s.width);
    x = "x0p";
  }
  const Vec invFreq =
      s.llama3 ? llama3InverseFrequencies(s.theta, headDim, *s.llama3)
               : ropeInverseFrequencies(s.theta, headDim);
  for (int64_t i = 0; i < s.blocks; ++i) {
    std::string b = "b" + std::to_string(i) + ".";
    m.rmsNorm(b + "n1", x, b + "h", s.width, s.eps);
    linear(b + "wq", b + "h", b + "q", s.width, s.width);
    linear(b + "wk", b + "h", b + "k", s.width, kvWidth);
    linear(b + "wv", b + "h", b + "v", s.width, kvWidth);
    m.rope(b + "q", b + "qr", s.heads, headDim, invFreq);
    m.rope(b + "k", b + "kr", s.kvHeads, headDim, invFreq);
    m.attention(b + "qr", b + "kr", b + "v", b + "a", s.heads, s.kvHeads,
                headDim, /*causal=*/true);
    linear(b + "wo", b + "a", b + "o", s.width, s.width);
    m.add(x, b + "o", b + "r");
    m.rmsNorm(b + "n2", b + "r", b + "m", s.width, s.eps);
    linear(b + "gate", b + "m", b + "g", s.width, s.ffn);
    linear(b + "up", b + "m", b + "u", s.width, s.ffn);
    m.activation(dprt::Activation::Silu, b + "g", b + "s");
    m.mul(b + "s", b + "u", b + "p");
    linear(b + "down", b + "p", b + "d", s.ffn, s.width);
    std::string next = "x" + std::to_string(i + 1);
    m.add(b + "r", b + "d", next);
    x = next;
  }
  m.rmsNorm("norm", x, "f", s.width, s.eps);
  m.linear(s.tied ? "emb" : "head", "", "f", "logits", s.width, s.vocab);
  m.crossEntropy("logits", "tgt", s.vocab, /*hasIgnore=*/true, -1,
                 dprt::Reduction::Mean);
  return m;
}

} // namespace dpc::reference
