//===- Models.h - The example models as reference models --------*- C++ -*-===//
//
// examples/mlp.mlir and examples/tinylm.mlir at any size, with the same
// parameter names, so that a test can load one parameter set into a
// compiled program and into the reference. Parameters start at the
// Model's defaults (zeros, gammas one); tests set them.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_REFERENCE_MODELS_H
#define DPC_REFERENCE_MODELS_H

#include "reference/Model.h"

#include <optional>
#include <string>
#include <vector>

namespace dpc::reference {

/// Inputs "x" [features] and "label"; fc1.w (+fc1.b) -> layer_norm (ln.g,
/// ln.b) -> relu -> fc2.w (+fc2.b) -> cross-entropy.
Model mlpClassifier(int64_t features, int64_t hidden, int64_t classes);

struct TinyLmShape {
  int64_t vocab = 16, tokens = 8, width = 16, blocks = 1, heads = 4,
          kvHeads = 2, ffn = 24;
  double eps = 1e-5, theta = 10000.0;
  /// The Hugging Face variations: a learned position table "pos"
  /// [positions, width] added to the embedding (0: none), the head tied to
  /// "emb" (no "head" parameter), Llama 3's scaled rotary frequencies.
  int64_t positions = 0;
  bool tied = false;
  std::optional<Llama3RopeScaling> llama3;
  /// peft LoRA on the block linears named here ("wq", "wv", ...): each
  /// becomes loraLinear with adapters <weight>.lora_A and <weight>.lora_B
  /// of rank loraRank, scaled by loraScaling; its base weight is frozen.
  std::vector<std::string> loraTargets;
  int64_t loraRank = 0;
  double loraScaling = 1.0;
};

/// Inputs "tok" and "tgt" (-1 ignored, mean per sample); emb -> blocks of
/// [rms_norm b.n1 -> wq, wk, wv -> rope(q, k) -> causal GQA attention -> wo
/// -> residual; rms_norm b.n2 -> silu(gate) * up -> down -> residual] ->
/// rms_norm norm -> head -> cross-entropy. No biases. With positions,
/// pos[t] is added to x0 (into "x0p"); with tied, the head reads "emb".
Model tinyLm(const TinyLmShape &s);

} // namespace dpc::reference

#endif // DPC_REFERENCE_MODELS_H
