//===- Families.h - One importer per model family ---------------*- C++ -*-===//
//
// A family reads the fields of config.json it knows (honouring or refusing
// each), then writes its layers. Import.cpp picks the family from
// `architectures`, settles the sequence length and dtype, and adds the recipe.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_IMPORTERS_HUGGINGFACE_FAMILIES_H
#define DPC_IMPORTERS_HUGGINGFACE_FAMILIES_H

#include "ConfigReader.h"
#include "ModelWriter.h"

#include <memory>

namespace dpc::hf {

class FamilyImporter {
public:
  virtual ~FamilyImporter() = default;

  /// Reads every field of the family (records problems in `config`).
  virtual void readConfig(ConfigReader &config) = 0;
  /// The longest sequence the checkpoint was made for, and the field that
  /// says so.
  virtual int64_t maxPositions() const = 0;
  virtual llvm::StringRef maxPositionsField() const = 0;
  /// The attention window of the layers that slide, if any.
  virtual std::optional<int64_t> slidingWindow() const { return std::nullopt; }
  /// Model attributes and initializer scale for the writer.
  virtual int64_t vocab() const = 0;
  virtual int64_t width() const = 0;
  virtual int64_t blocks() const = 0;
  virtual double initializerRange() const = 0;
  /// Writes parameters and layers; called only when nothing was refused.
  virtual void write(ModelWriter &writer) const = 0;
};

/// LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM.
std::unique_ptr<FamilyImporter>
createLlamaFamilyImporter(llvm::StringRef architecture);
/// GPT2LMHeadModel.
std::unique_ptr<FamilyImporter> createGPT2Importer();

/// Reads `hidden_act` / `activation_function`: transformers' ACT2FN names
/// that dp has an op for.
std::optional<Activation> readActivation(ConfigReader &config,
                                         llvm::StringRef key,
                                         llvm::StringRef fallback);

/// Fields of every transformers config that do not change what a causal LM
/// computes (token ids, caching, output switches, bookkeeping).
void markGenericHarmlessFields(ConfigReader &config);

} // namespace dpc::hf

#endif // DPC_IMPORTERS_HUGGINGFACE_FAMILIES_H
