//===- HfWeights.h - Hugging Face weights in and out of a model -*- C++ -*-===//
//
// The parameters of an imported model name the Hugging Face tensor they come
// from (ParamSpec::hf, from the hf.* attributes dpc-import-hf writes;
// docs/huggingface.md). This file maps between a folder's tensors and the
// model's parameters:
//  - HfInit checks a folder against the model before anything is loaded
//    (every tensor a parameter needs is there, with its shape and a type
//    that converts; no tensor is left over) and then reads any element range
//    of a parameter, converted, from the mapped files (--init);
//  - writeHfFolder writes a folder transformers loads (--export, dpc
//    export): the parameters under their Hugging Face names and layouts,
//    config.json and the tokenizer files of a source folder;
//  - with LoRA (docs/lora.md), HfInit::adapter checks and reads a peft
//    adapter folder (--init-adapter), and writeHfExport writes one, or the
//    model with the adapters merged into their weights;
//  - hfSourcesJson / applyHfSources (and loraJson / loraFromJson): the
//    mapping as JSON, which checkpoints record so that they can be exported
//    offline.
//
// Tied embeddings: with `tie_word_embeddings`, transformers keeps one table
// for the input embedding and the head, and `save_pretrained` may or may not
// write lm_head.weight. A parameter whose source is lm_head.weight (a model
// with its own head) then reads the input embedding when lm_head.weight is
// absent; a stored lm_head.weight that no parameter reads is ignored, as
// transformers ignores it (the input embedding wins). A model whose one
// parameter serves as both reads and writes model.embed_tokens.weight only.
//
// Backend-independent; the ranks' side is HfShards.h.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_HFWEIGHTS_H
#define DPRT_DRIVER_HFWEIGHTS_H

#include "Safetensors.h"

#include "dprt/program.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprt::driver {

/// What the loader and the exporter read of a folder's config.json.
struct HfConfig {
  std::string text;      ///< the file as it is
  std::string modelType; ///< "model_type", or ""
  /// tie_word_embeddings, or when absent the config class's default: false
  /// for llama, mistral and qwen2, true otherwise (PretrainedConfig's).
  bool tiedEmbeddings = false;

  /// Reads DIR/config.json; throws UsageError naming the file.
  static HfConfig read(const std::string &dir);
};

/// A Hugging Face folder checked against a model, for --init.
class HfInit {
public:
  /// Opens DIR (config.json and the weights: SafetensorsFolder) and checks
  /// it against every parameter of `params` that has a Hugging Face source.
  /// Throws UsageError naming the tensor (and, for a shape, both shapes)
  /// when a tensor is missing, left over, of another shape, of a type that
  /// does not convert (F64, F32, BF16 and F16 do), or when a file is
  /// truncated or the index is bad: all of it before anything is loaded.
  HfInit(const std::string &dir, const std::vector<ParamSpec> &params);

  /// A peft adapter folder (--init-adapter): DIR/adapter_config.json must
  /// match `lora` (peft_type LORA, r, lora_alpha, target_modules as a set;
  /// no rslora, DoRA, bias, rank or alpha patterns, modules_to_save), and
  /// DIR/adapter_model.safetensors must hold exactly the lora_A and lora_B
  /// tensors of the program's adapters (LoRAPart::peftName), of their
  /// shapes. Throws UsageError naming the field or the tensor.
  static std::unique_ptr<HfInit> adapter(const std::string &dir,
                                         const std::vector<ParamSpec> &params,
                                         const LoRASpec &lora);

  /// Whether `param` is loaded from the folder (it has a source).
  bool loads(const ParamSpec &param) const {
    return sources_.count(param.name) != 0;
  }
  /// Converts elements [first, first + count) of `param` (row-major, in the
  /// model's layout) to `to` into `out`. Throws UsageError naming the
  /// tensor and the element when a value is not finite.
  void read(const ParamSpec &param, int64_t first, int64_t count, DType to,
            void *out) const;
  /// "llama (model.safetensors: 21 tensors, F32)".
  std::string describe() const;
  /// The parameters without a Hugging Face source: they keep their
  /// initializers.
  const std::vector<std::string> &unsourced() const { return unsourced_; }

private:
  HfInit() = default;
  /// Maps the tensors of folder_ to the parameters with a source in
  /// `params`; `where` starts each problem.
  void match(const std::vector<ParamSpec> &params, const HfConfig &config,
             const std::string &where);

  /// Where a parameter's values are: L (S, or S^T) has `rows` x `cols`
  /// elements, and the parameter starts at row `firstRow` of it.
  struct Source {
    SafetensorsReader *file = nullptr;
    const TensorInfo *tensor = nullptr;
    bool transposed = false;
    int64_t rows = 0, cols = 0, firstRow = 0;
  };

  std::string dir_;
  std::unique_ptr<SafetensorsFolder> folder_;
  std::map<std::string, Source> sources_; ///< by parameter name
  std::vector<std::string> unsourced_;
  std::map<std::string, int> storedTypes_; ///< tensors per stored type
};

/// What an export writes (docs/lora.md):
///  - Model: the model as a Hugging Face folder (a program without LoRA);
///  - Adapter: a peft adapter, adapter_config.json and
///    adapter_model.safetensors with the lora_A and lora_B weights under
///    their peft names (a program with #dp.lora);
///  - Merged: the model with each adapted weight W replaced by
///    W + (alpha / r) B A, as a Model export of the program without LoRA.
enum class HfExportKind { Model, Adapter, Merged };

/// What --export and dpc export write.
struct HfExportOptions {
  HfExportKind kind = HfExportKind::Model;
  std::string dir;  ///< the folder to write (it must not exist, or be empty)
  std::string like; ///< the folder whose config.json and tokenizer files go
  DType dtype = DType::F32; ///< BF16 or F32
  /// A larger model is written in shards of at most this many bytes (a
  /// tensor larger than it gets a shard of its own), as transformers'
  /// max_shard_size does.
  int64_t maxShardBytes = 5'000'000'000;
};

/// Elements [first, first + count) of a parameter's values (the model's
/// layout, row-major) into `out`, in the type writeHfFolder is given.
using ParamValues = std::function<void(const ParamSpec &param, int64_t first,
                                       int64_t count, void *out)>;

/// Checks, before training, what writeHfFolder will need: every parameter
/// has a Hugging Face source, the tensors they form are whole, the source
/// folder has a config.json that does not tie a head the model keeps apart,
/// and `dir` can be created. Throws UsageError naming the problem.
void checkHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params);

/// Writes options.dir: config.json (the source's, with "dtype" and
/// "torch_dtype" set to the written type), the tokenizer and generation
/// files the source folder has, and the parameters as Hugging Face tensors
/// (transposed back, row-split tensors joined) in model.safetensors, or in
/// model-0000k-of-0000n.safetensors with model.safetensors.index.json as
/// transformers writes them above maxShardBytes. One tensor is in memory at
/// a time; everything goes into a temporary folder beside options.dir,
/// which is renamed into place once every file is synced. `values` gives
/// parameters in `valueType`. A value that is not finite is an error naming
/// the parameter.
void writeHfFolder(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, DType valueType,
                   const ParamValues &values);

/// Checks (checkHfExport) and writes (writeHfFolder) what options.kind
/// asks for. Adapter and Merged need `lora` present, Model needs it
/// absent: UsageError otherwise. An adapter folder gets adapter_config.json
/// (as peft 0.21 writes it: every key, sorted, indent 2;
/// base_model_name_or_path the absolute path of options.like) and
/// adapter_model.safetensors in options.dtype, and the tokenizer files of
/// options.like but no config.json (peft writes none: transformers would
/// take the folder for a model).
void checkHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, const LoRASpec &lora);
void writeHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, const LoRASpec &lora,
                   DType valueType, const ParamValues &values);

/// adapter_config.json for `lora` as peft 0.21.2 writes it.
std::string peftAdapterConfig(const LoRASpec &lora,
                              const std::vector<ParamSpec> &params,
                              const std::string &baseModel);

/// The LoRA of a program as JSON ({"r": 8, "lora_alpha": 16.0,
/// "target_modules": ["q_proj", "v_proj"]}), "" without one, for
/// checkpoints; loraFromJson reads it back (UsageError naming `what`).
std::string loraJson(const LoRASpec &lora);
LoRASpec loraFromJson(const std::string &json, const std::string &what);

/// The Hugging Face sources of `params` as one JSON object, {"emb":
/// {"name": "model.embed_tokens.weight"}, "b0.wq": {"name": ...,
/// "transposed": true, "rows": [0, 768]}, ...}; parameters without one are
/// left out, and so is the whole (returning "") when none has one. A LoRA
/// adapter's part is {"lora": {"role": "A", "base": "b0.wq", "peft":
/// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"}}.
std::string hfSourcesJson(const std::vector<ParamSpec> &params);
/// Sets ParamSpec::hf (and ::lora) of each parameter `json` names
/// (hfSourcesJson's form);
/// throws UsageError naming `what` when the JSON is malformed or names a
/// parameter not in `params`.
void applyHfSources(const std::string &json, std::vector<ParamSpec> &params,
                    const std::string &what);

/// The metadata key of params.safetensors under which checkpoints record
/// hfSourcesJson (and the manifest key of loraJson: "lora").
inline constexpr const char kHfSourcesMetadataKey[] = "hf_sources";

/// "bf16" / "f32" -> the export type; throws UsageError naming `flag`.
DType parseExportDType(const std::string &flag, const std::string &text);

} // namespace dprt::driver

#endif // DPRT_DRIVER_HFWEIGHTS_H
