//===- HuggingFace.h - Hugging Face configs to dp models --------*- C++ -*-===//
//
// Reads the config.json of a Hugging Face causal language model and writes the
// dp model that computes the same function, with a default DP recipe. Every
// dp.param records the checkpoint tensor it comes from (hf.name, hf.transposed,
// hf.rows; docs/huggingface.md), so that weights can be loaded and exported by
// name.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_IMPORTERS_HUGGINGFACE_HUGGINGFACE_H
#define DPC_IMPORTERS_HUGGINGFACE_HUGGINGFACE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace dpc::hf {

struct ImportOptions {
  /// Tokens per sample; by default max_position_embeddings, at most 1024.
  std::optional<int64_t> seq;
  /// Samples per rank and physical batch, written into the recipe.
  int64_t batch = 8;
  /// "bf16", "f32" or "f64"; by default the checkpoint's torch_dtype.
  std::optional<std::string> dtype;
  /// LoRA adapters written into the recipe (#dp.lora): rank, lora_alpha and
  /// the Hugging Face module names they target (peft's target_modules).
  struct LoRA {
    int64_t rank = 0;
    double alpha = 0;
    std::vector<std::string> targets;
  };
  std::optional<LoRA> lora;
};

/// What the importer could not honour or understand: one message a problem,
/// each naming the config field and its value. Empty on success.
using ImportErrors = std::vector<std::string>;

/// Builds the dp model and recipe for `config` (the parsed config.json). On
/// failure returns null and fills `errors`; the module it returns verifies.
mlir::OwningOpRef<mlir::ModuleOp> importConfig(mlir::MLIRContext &context,
                                               const llvm::json::Value &config,
                                               const ImportOptions &options,
                                               ImportErrors &errors);

/// Prints an imported module as a model file: the grid, the model and the
/// recipe, with comments on what the user should edit in the recipe.
void printImportedModule(mlir::ModuleOp module, llvm::StringRef source,
                         llvm::raw_ostream &os);

} // namespace dpc::hf

#endif // DPC_IMPORTERS_HUGGINGFACE_HUGGINGFACE_H
