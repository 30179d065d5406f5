//===- Import.cpp - config.json to a dp model and a default recipe --------===//

#include "HuggingFace.h"

#include "Families.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace dpc;
using namespace dpc::hf;
using llvm::StringRef;

namespace {

struct Architecture {
  StringRef name;
  /// config.json's model_type for it.
  StringRef modelType;
  std::function<std::unique_ptr<FamilyImporter>()> create;
};

const std::vector<Architecture> &architectures() {
  static const std::vector<Architecture> table = {
      {"LlamaForCausalLM", "llama",
       [] { return createLlamaFamilyImporter("LlamaForCausalLM"); }},
      {"MistralForCausalLM", "mistral",
       [] { return createLlamaFamilyImporter("MistralForCausalLM"); }},
      {"Qwen2ForCausalLM", "qwen2",
       [] { return createLlamaFamilyImporter("Qwen2ForCausalLM"); }},
      {"GPT2LMHeadModel", "gpt2", [] { return createGPT2Importer(); }},
  };
  return table;
}

/// The recipe written for every import; the user edits it.
constexpr double kDeltaPlaceholder = 1e-6;
constexpr double kEpsilon = 8.0;
constexpr int64_t kExpectedBatch = 256;
constexpr double kLearningRate = 3e-4;
constexpr int64_t kSteps = 1000;
/// Tokens a sample when --seq is not given (and the model allows as many).
constexpr int64_t kDefaultSeq = 1024;

/// Fields of mixture-of-experts configs (Mixtral, Qwen2-MoE, DeepSeek): the
/// layers they describe are not dense MLPs.
constexpr StringRef kMixtureOfExpertsFields[] = {
    "num_local_experts",     "num_experts",
    "num_experts_per_tok",   "n_routed_experts",
    "moe_intermediate_size", "shared_expert_intermediate_size",
    "router_aux_loss_coef",  "output_router_logits",
    "decoder_sparse_step",   "mlp_only_layers",
};

const Architecture *readArchitecture(ConfigReader &config) {
  const llvm::json::Value *v = config.value("architectures");
  const llvm::json::Array *list = v ? v->getAsArray() : nullptr;
  std::string supported;
  for (const Architecture &a : architectures())
    supported += (supported.empty() ? "" : ", ") + a.name.str();
  if (!config.has("architectures")) {
    config.error("field 'architectures' is missing; it names the model "
                 "class (supported: " +
                 supported + ")");
    return nullptr;
  }
  if (!list || list->size() != 1 || !(*list)[0].getAsString()) {
    config.refuse(
        "architectures",
        "expected a list of one model class (supported: " + supported + ")");
    return nullptr;
  }
  StringRef name = *(*list)[0].getAsString();
  for (const Architecture &a : architectures()) {
    if (a.name != name)
      continue;
    std::string modelType = config.string("model_type", a.modelType);
    if (modelType != a.modelType)
      config.refuse("model_type", "does not match " + name + " (model_type " +
                                      a.modelType + ")");
    return &a;
  }
  config.refuse("architectures",
                "unsupported architecture (supported: " + supported + ")");
  return nullptr;
}

/// --dtype, or the checkpoint's dtype (`dtype` since transformers 5,
/// `torch_dtype` before), or f32.
Type readElementType(ConfigReader &config, const ImportOptions &options,
                     MLIRContext &context) {
  auto parse = [&](StringRef name) -> Type {
    if (name == "bf16" || name == "bfloat16")
      return BFloat16Type::get(&context);
    if (name == "f32" || name == "float32")
      return Float32Type::get(&context);
    if (name == "f64" || name == "float64")
      return Float64Type::get(&context);
    return nullptr;
  };
  StringRef key = config.has("dtype") ? "dtype" : "torch_dtype";
  std::string stored = config.string(key, "float32");
  if (config.has("dtype"))
    config.harmless({"torch_dtype"});
  if (options.dtype) {
    if (Type t = parse(*options.dtype))
      return t;
    config.error("--dtype must be bf16, f32 or f64, not '" + *options.dtype +
                 "'");
    return nullptr;
  }
  if (Type t = parse(stored))
    return t;
  config.refuse(key, "DPC trains in bfloat16, float32 or float64; choose one "
                     "with --dtype");
  return nullptr;
}

/// The recipe's #dp.lora, or null. Every target must name the module of a
/// linear layer's weight (the last components of its hf.name before
/// `.weight`), and the rank must fit each targeted weight; otherwise an error
/// naming the option goes to `errors`.
dp::LoRAAttr loraAttr(dp::ModelOp model,
                      const std::optional<ImportOptions::LoRA> &lora,
                      ImportErrors &errors) {
  if (!lora)
    return nullptr;
  MLIRContext *ctx = model.getContext();
  if (lora->rank <= 0)
    errors.push_back("--lora: the rank must be a positive integer, not " +
                     std::to_string(lora->rank));
  if (!(lora->alpha > 0) || !std::isfinite(lora->alpha))
    errors.push_back("--lora: alpha must be a positive number, not " +
                     llvm::formatv("{0}", lora->alpha).str());
  if (lora->targets.empty())
    errors.push_back("--lora-targets: name at least one module");
  SmallVector<Attribute> targets;
  for (const std::string &target : lora->targets) {
    targets.push_back(StringAttr::get(ctx, target));
    bool found = false;
    model.getForward().walk([&](dp::LinearOp linear) {
      auto weight = SymbolTable::lookupNearestSymbolFrom<dp::ParamOp>(
          model, linear.getWeightAttr());
      auto hfName = weight->getAttrOfType<StringAttr>("hf.name");
      if (!hfName)
        return;
      StringRef module = hfName.getValue();
      module.consume_back(".weight");
      if (module != target && !module.ends_with("." + target))
        return;
      found = true;
      int64_t width = std::min(weight.getTensorType().getDimSize(0),
                               weight.getTensorType().getDimSize(1));
      if (lora->rank > width)
        errors.push_back(llvm::formatv("--lora: rank {0} is above the width "
                                       "{1} of {2}",
                                       lora->rank, width, module)
                             .str());
    });
    if (!found)
      errors.push_back("--lora-targets: '" + target +
                       "' is no linear module of this model (Llama: q_proj, "
                       "k_proj, v_proj, o_proj, gate_proj, up_proj, "
                       "down_proj; GPT-2: c_attn, c_proj, c_fc)");
  }
  if (!errors.empty())
    return nullptr;
  return dp::LoRAAttr::get(ctx, lora->rank, APFloat(lora->alpha),
                           ArrayAttr::get(ctx, targets));
}

void addRecipe(ModuleOp module, dp::ModelOp model, Type element, int64_t batch,
               dp::LoRAAttr lora) {
  MLIRContext *ctx = module.getContext();
  OpBuilder builder(ctx);
  builder.setInsertionPointToEnd(module.getBody());
  Type master = element.isF64() ? element : Float32Type::get(ctx);
  dp::RecipeOp::create(
      builder, module.getLoc(), builder.getStringAttr("train"),
      FlatSymbolRefAttr::get(model.getSymNameAttr()),
      dp::ClipAttr::get(ctx, dp::ClipMode::flat, APFloat(1.0), APFloat(0.01)),
      dp::TargetAttr::get(ctx, APFloat(kEpsilon), APFloat(kDeltaPlaceholder),
                          dp::NoiseGenerator::fast),
      dp::PoissonAttr::get(ctx, kExpectedBatch, APFloat(0.0), batch),
      dp::AdamWAttr::get(ctx, APFloat(kLearningRate), APFloat(0.9),
                         APFloat(0.999), APFloat(1e-8), APFloat(0.0)),
      builder.getI64IntegerAttr(kSteps),
      dp::PrecisionAttr::get(ctx, element, master),
      dp::FSDPAttr::get(ctx, dp::ShardUnit::block,
                        /*reshard_after_forward=*/true, /*prefetch=*/1),
      FlatSymbolRefAttr::get(ctx, "ranks"), builder.getI64IntegerAttr(0),
      /*train=*/ArrayAttr(), /*freeze=*/ArrayAttr(), lora,
      /*schedule=*/dp::ScheduleAttr(), /*unit=*/dp::PrivacyUnitAttr());
}

} // namespace

std::optional<Activation> dpc::hf::readActivation(ConfigReader &config,
                                                  StringRef key,
                                                  StringRef fallback) {
  std::string name = config.string(key, fallback);
  // transformers' ACT2FN: gelu_new and gelu_pytorch_tanh are the tanh
  // approximation, gelu the exact erf form, swish another name of silu.
  std::optional<Activation> kind =
      llvm::StringSwitch<std::optional<Activation>>(name)
          .Case("relu", Activation::Relu)
          .Cases({"silu", "swish"}, Activation::Silu)
          .Cases({"gelu", "gelu_python"}, Activation::GeluErf)
          .Cases({"gelu_new", "gelu_pytorch_tanh", "gelu_python_tanh"},
                 Activation::GeluTanh)
          .Default(std::nullopt);
  if (!kind && config.has(key))
    config.refuse(key, "unsupported activation (supported: relu, silu, swish, "
                       "gelu, gelu_python, gelu_new, gelu_pytorch_tanh, "
                       "gelu_python_tanh)");
  return kind;
}

void dpc::hf::markGenericHarmlessFields(ConfigReader &config) {
  // Token ids matter to the tokenizer and generation, not to the function;
  // the rest switch outputs, caching and kernels or are bookkeeping.
  // pad_token_id also sets nn.Embedding's padding_idx, which in PyTorch only
  // keeps that row's gradient at zero; DPC trains every row
  // (docs/huggingface.md).
  config.harmless({"bos_token_id", "eos_token_id", "pad_token_id",
                   "sep_token_id", "decoder_start_token_id", "use_cache",
                   "transformers_version", "_name_or_path", "return_dict",
                   "output_attentions", "output_hidden_states", "torchscript",
                   "tokenizer_class", "id2label", "label2id",
                   "task_specific_params", "attn_implementation",
                   "_attn_implementation", "use_bfloat16"});
}

OwningOpRef<ModuleOp> dpc::hf::importConfig(MLIRContext &context,
                                            const llvm::json::Value &json,
                                            const ImportOptions &options,
                                            ImportErrors &errors) {
  const llvm::json::Object *object = json.getAsObject();
  if (!object) {
    errors.push_back("config.json must hold a JSON object");
    return nullptr;
  }
  ConfigReader config(*object);
  const Architecture *architecture = readArchitecture(config);
  for (StringRef key : kMixtureOfExpertsFields)
    if (config.value(key))
      config.refuse(key, "mixture-of-experts layers are not supported");
  if (!architecture) {
    errors = config.takeErrors();
    return nullptr;
  }
  markGenericHarmlessFields(config);
  std::unique_ptr<FamilyImporter> family = architecture->create();
  family->readConfig(config);
  Type element = readElementType(config, options, context);

  // Token t sees keys s with t - s < window (masking_utils'
  // sliding_window_overlay): a window of at least T is plain causal
  // attention. The default length is one that imports.
  std::optional<int64_t> window = family->slidingWindow();
  int64_t seq = std::min(
      {kDefaultSeq, family->maxPositions(), window.value_or(kDefaultSeq)});
  if (options.seq) {
    seq = *options.seq;
    if (seq <= 0)
      config.error("--seq must be positive");
    else if (seq > family->maxPositions())
      config.refuse(family->maxPositionsField(),
                    llvm::formatv("--seq {0} is longer than the positions "
                                  "the model was made for",
                                  seq)
                        .str());
  }
  if (window && *window < seq)
    config.refuse("sliding_window",
                  llvm::formatv("shorter than the {0} tokens of a sample; "
                                "dp.attention has no sliding window yet "
                                "(import with --seq {1} or less)",
                                seq, *window)
                      .str());
  if (options.batch <= 0)
    config.error("--batch must be positive");
  config.reportUnknownFields();
  if (config.failed()) {
    errors = config.takeErrors();
    return nullptr;
  }

  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  OpBuilder builder(&context);
  builder.setInsertionPointToEnd(module->getBody());
  shard::GridOp::create(builder, module->getLoc(), "ranks",
                        ArrayRef<int64_t>{ShapedType::kDynamic});
  ModelWriter writer(*module, architecture->modelType, element, seq,
                     family->initializerRange());
  family->write(writer);
  dp::ModelOp model = writer.model();
  model->setAttr("vocab", builder.getI64IntegerAttr(family->vocab()));
  model->setAttr("seq", builder.getI64IntegerAttr(seq));
  model->setAttr("width", builder.getI64IntegerAttr(family->width()));
  model->setAttr("blocks", builder.getI64IntegerAttr(family->blocks()));
  model->setAttr("hf.architecture", builder.getStringAttr(architecture->name));
  dp::LoRAAttr lora = loraAttr(model, options.lora, errors);
  if (!errors.empty())
    return nullptr;
  addRecipe(*module, model, element, options.batch, lora);
  if (failed(verify(*module))) {
    errors.push_back("internal error: the imported model does not verify");
    return nullptr;
  }
  return module;
}

void dpc::hf::printImportedModule(ModuleOp module, StringRef source,
                                  llvm::raw_ostream &os) {
  auto model = *module.getOps<dp::ModelOp>().begin();
  auto attr = [&](StringRef name) {
    return model->getAttrOfType<IntegerAttr>(name).getInt();
  };
  Type element = (*model.getBody().front().getOps<dp::ParamOp>().begin())
                     .getTensorType()
                     .getElementType();
  os << "// Imported by dpc-import-hf from " << source << " ("
     << model->getAttrOfType<StringAttr>("hf.architecture").getValue()
     << "):\n// " << attr("blocks") << " blocks, width " << attr("width")
     << ", vocabulary " << attr("vocab") << ", " << attr("seq")
     << " tokens a sample, " << element << ".\n"
     << "// Each dp.param names the checkpoint tensor it is loaded from "
        "(hf.name;\n// hf.transposed and hf.rows: docs/huggingface.md).\n\n";
  for (Operation &op : module.getBody()->getOperations()) {
    if (isa<dp::RecipeOp>(op))
      os << "// A default recipe to edit before training. delta = "
         << llvm::format("%g", kDeltaPlaceholder)
         << " is a placeholder:\n// set it below 1/N for a dataset of N "
            "records (it suits fewer than "
         << llvm::format("%g", 1.0 / kDeltaPlaceholder)
         << ").\n// epsilon, the clip bound, the expected batch, the "
            "optimizer and the steps\n// are starting points too.\n";
    op.print(os);
    os << "\n\n";
  }
}
