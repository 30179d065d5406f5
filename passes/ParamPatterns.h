//===- ParamPatterns.h - Recipe patterns over parameter names ---*- C++ -*-===//
//
// The recipe names parameters by glob patterns: `train` and `freeze` match
// parameter names (dp-freeze), LoRA targets match module names (dp-lora).
// The attributes dp-lora leaves on the adapters it adds are spelled here.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_PARAMPATTERNS_H
#define DPC_PASSES_PARAMPATTERNS_H

#include "DP/DPOps.h"

#include "llvm/Support/GlobPattern.h"

#include <optional>
#include <string>

namespace dpc {

/// On a parameter dp-lora added: the weight it adapts.
constexpr llvm::StringLiteral kLoRABaseAttr = "lora.base";
/// On lora_A and lora_B: the tensor's name in a peft adapter file,
/// base_model.model.<module>.lora_A.weight.
constexpr llvm::StringLiteral kPeftNameAttr = "peft.name";

/// A glob pattern (`*`, `?`, `[...]`) over names.
class ParamPattern {
public:
  /// The pattern, or nullopt when `text` is not a glob (the recipe's
  /// verifier has rejected those).
  static std::optional<ParamPattern> create(llvm::StringRef text);

  /// The whole name matches.
  bool matches(llvm::StringRef name) const { return glob.match(name); }
  /// The whole module name or a suffix of it after a `.` matches, as peft's
  /// target_modules do: `q_proj` matches `model.layers.0.self_attn.q_proj`.
  bool matchesModule(llvm::StringRef module) const;

private:
  explicit ParamPattern(llvm::GlobPattern glob) : glob(std::move(glob)) {}
  llvm::GlobPattern glob;
};

/// The module a weight belongs to: its Hugging Face name (`hf.name`)
/// without the trailing `.weight`, or its parameter name when it has none.
std::string moduleName(dp::ParamOp weight);

/// Whether dp-lora added `param` as a trainable adapter (lora_A, lora_B).
bool isLoRAAdapter(dp::ParamOp param);

} // namespace dpc

#endif // DPC_PASSES_PARAMPATTERNS_H
