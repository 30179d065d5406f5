//===- HfAdapters.cpp - peft adapters in and out of a LoRA model ----------===//
//
// --init-adapter reads a peft adapter into a program with #dp.lora;
// --export writes one (adapter_config.json and adapter_model.safetensors
// with peft's names), --export-merged the model with W + (alpha / r) B A;
// the LoRA description travels in checkpoints as JSON. The model's own
// weights go in and out in HfWeights.cpp.
//
//===----------------------------------------------------------------------===//

#include "HfWeights.h"

#include "Checkpoint.h"
#include "Dataset.h"
#include "Json.h"
#include "Options.h"
#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <sstream>
#include <unistd.h>

#include "HfFolder.h"

namespace dprt::driver {

namespace fs = std::filesystem;

using privacy::jsonString;

namespace {

/// A number as a person writes it: "16", "0.5".
std::string numberText(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

/// The program's adapters (lora_A and lora_B, in the model's order) and
/// its parameters without the adapters' parts (the model a merged export
/// writes).
std::vector<ParamSpec> adapterParams(const std::vector<ParamSpec> &params) {
  std::vector<ParamSpec> out;
  for (const ParamSpec &p : params)
    if (p.lora.role == LoRARole::A || p.lora.role == LoRARole::B)
      out.push_back(p);
  return out;
}
std::vector<ParamSpec> baseParams(const std::vector<ParamSpec> &params) {
  std::vector<ParamSpec> out;
  for (const ParamSpec &p : params)
    if (p.lora.role == LoRARole::None)
      out.push_back(p);
  return out;
}

/// The shortest text that reads back to `value`, as Python's repr writes a
/// float ("16" for a whole number, as peft keeps lora_alpha = 16).
std::string shortestNumber(double value) {
  if (value == std::floor(value) && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  return text;
}

/// `values` with each adapted weight W replaced by W + (alpha / r) B A,
/// computed in f64 from the values of W, A and B and rounded once to
/// `valueType`. The last merged weight is kept: the writer asks for a
/// parameter's elements in order.
ParamValues mergedValues(const std::vector<ParamSpec> &params,
                         const LoRASpec &lora, DType valueType,
                         ParamValues values) {
  struct Adapter {
    ParamSpec a, b;
  };
  auto adapters = std::make_shared<std::map<std::string, Adapter>>();
  for (const ParamSpec &p : params)
    if (p.lora.role == LoRARole::A)
      (*adapters)[p.lora.base].a = p;
    else if (p.lora.role == LoRARole::B)
      (*adapters)[p.lora.base].b = p;
  struct Cache {
    std::string name;
    std::vector<unsigned char> data;
  };
  auto cache = std::make_shared<Cache>();
  const double scaling = lora.alpha / double(lora.rank);
  return [adapters, cache, scaling, valueType,
          values](const ParamSpec &p, int64_t first, int64_t count, void *out) {
    auto it = adapters->find(p.name);
    if (it == adapters->end())
      return values(p, first, count, out);
    const int64_t bytes = sizeOf(valueType);
    if (cache->name != p.name) {
      auto read = [&](const ParamSpec &q) {
        const int64_t n = product(q.shape);
        std::vector<unsigned char> raw(static_cast<size_t>(n * bytes));
        values(q, 0, n, raw.data());
        std::vector<double> out(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          out[i] = loadAs(valueType, raw.data() + i * bytes);
        return out;
      };
      const std::vector<double> w = read(p), a = read(it->second.a),
                                b = read(it->second.b);
      const int64_t rows = p.shape[0], cols = p.shape[1];
      const int64_t rank = it->second.a.shape[0];
      cache->data.resize(static_cast<size_t>(rows * cols * bytes));
      for (int64_t o = 0; o < rows; ++o)
        for (int64_t i = 0; i < cols; ++i) {
          double delta = 0;
          for (int64_t k = 0; k < rank; ++k)
            delta += b[o * rank + k] * a[k * cols + i];
          storeAs(valueType, w[o * cols + i] + scaling * delta,
                  cache->data.data() + (o * cols + i) * bytes);
        }
      cache->name = p.name;
    }
    std::memcpy(out, cache->data.data() + first * bytes,
                static_cast<size_t>(count * bytes));
  };
}

} // namespace

//===----------------------------------------------------------------------===//
// --init-adapter: a peft adapter into the program's lora_A and lora_B
//===----------------------------------------------------------------------===//

std::unique_ptr<HfInit> HfInit::adapter(const std::string &dir,
                                        const std::vector<ParamSpec> &params,
                                        const LoRASpec &lora) {
  const std::string where = "--init-adapter '" + dir + "': ";
  if (!lora.present())
    throw UsageError(where + "the program has no LoRA (#dp.lora in its "
                             "recipe; dpc import-hf --lora R)");
  const std::string configPath = dir + "/adapter_config.json";
  std::error_code ec;
  if (!fs::is_regular_file(configPath, ec))
    throw UsageError(where + "not a peft adapter folder: it has no "
                             "adapter_config.json");
  std::vector<std::string> problems;
  try {
    const JsonValue root = JsonValue::parse(readTextFile(configPath));
    auto field = [&](const char *key) { return root.find(key); };
    auto text = [](const JsonValue &v) {
      return v.isString() ? "'" + v.string() + "'"
                          : std::string("a non-string");
    };
    const std::string in = "adapter_config.json: ";
    const JsonValue *type = field("peft_type");
    if (!type || !type->isString() || type->string() != "LORA")
      problems.push_back(in + "peft_type is " +
                         (type ? text(*type) : std::string("missing")) +
                         ", not 'LORA'");
    const JsonValue *r = field("r");
    if (!r || r->number() != double(lora.rank))
      problems.push_back(
          in + "r is " + (r ? numberText(r->number()) : "missing") +
          ", the program's LoRA has rank " + std::to_string(lora.rank));
    const JsonValue *alpha = field("lora_alpha");
    if (!alpha || alpha->number() != lora.alpha)
      problems.push_back(in + "lora_alpha is " +
                         (alpha ? numberText(alpha->number()) : "missing") +
                         ", the program's LoRA has alpha " +
                         numberText(lora.alpha));
    const JsonValue *targets = field("target_modules");
    std::set<std::string> theirs,
        ours(lora.targets.begin(), lora.targets.end());
    if (targets && targets->isArray())
      for (const JsonValue &t : targets->array())
        theirs.insert(t.string());
    auto list = [](const std::set<std::string> &names) {
      std::string out;
      for (const std::string &n : names)
        out += (out.empty() ? "" : ", ") + n;
      return "[" + out + "]";
    };
    if (!targets || !targets->isArray())
      problems.push_back(in + "target_modules is not a list of module names "
                              "(a regular expression is not read)");
    else if (theirs != ours)
      problems.push_back(in + "target_modules are " + list(theirs) +
                         ", the program's LoRA targets " + list(ours));
    // What would change the function or add tensors DPC does not have.
    for (const char *flag : {"use_rslora", "use_dora", "lora_bias"})
      if (const JsonValue *v = field(flag); v && !v->isNull() && v->boolean())
        problems.push_back(in + flag + " is true, which DPC's LoRA is not");
    if (const JsonValue *bias = field("bias");
        bias && !(bias->isString() && bias->string() == "none"))
      problems.push_back(in + "bias is " + text(*bias) +
                         ", DPC's LoRA trains no bias ('none')");
    for (const char *pattern : {"rank_pattern", "alpha_pattern"})
      if (const JsonValue *v = field(pattern);
          v && !v->isNull() && !v->object().empty())
        problems.push_back(in + pattern +
                           " is not empty: DPC's adapters have one rank and "
                           "one alpha");
    for (const char *list : {"modules_to_save", "layers_to_transform",
                             "trainable_token_indices", "target_parameters"})
      if (const JsonValue *v = field(list);
          v && !v->isNull() && !(v->isArray() && v->array().empty()))
        problems.push_back(in + list +
                           " is set, which DPC's LoRA does not "
                           "support");
  } catch (const JsonError &e) {
    throw UsageError(
        where + "adapter_config.json is not a valid peft config: " + e.what());
  }
  if (!problems.empty()) {
    for (std::string &p : problems)
      p = where + p;
    throwProblems(problems);
  }

  std::unique_ptr<HfInit> init(new HfInit());
  init->dir_ = dir;
  try {
    init->folder_ =
        std::make_unique<SafetensorsFolder>(dir, "adapter_model.safetensors");
  } catch (const std::runtime_error &e) {
    throw UsageError(std::string("--init-adapter: ") + e.what());
  }
  // The adapters' tensors are their peft names; nothing else is read.
  std::vector<ParamSpec> adapters;
  for (const ParamSpec &p : params)
    if (!p.lora.peftName.empty()) {
      adapters.push_back(p);
      adapters.back().hf = HfSource{p.lora.peftName, false, -1, -1};
    }
  init->match(adapters, HfConfig{}, where);
  return init;
}

//===----------------------------------------------------------------------===//
// LoRA: the peft adapter and the merged model
//===----------------------------------------------------------------------===//

std::string peftAdapterConfig(const LoRASpec &lora,
                              const std::vector<ParamSpec> &params,
                              const std::string &baseModel) {
  // peft sets fan_in_fan_out for GPT-2's Conv1D layers, whose weights are
  // stored [in, out] (hf.transposed).
  bool fanInFanOut = false;
  for (const ParamSpec &p : params)
    if (p.lora.role == LoRARole::A)
      for (const ParamSpec &w : params)
        if (w.name == p.lora.base && w.hf.transposed)
          fanInFanOut = true;
  std::set<std::string> targets(lora.targets.begin(), lora.targets.end());
  std::string targetList = "[";
  for (const std::string &t : targets)
    targetList +=
        (targetList.size() > 1 ? ",\n    " : "\n    ") + jsonString(t);
  targetList += "\n  ]";
  // LoraConfig.to_dict() as save_pretrained writes it: json.dumps(indent=2,
  // sort_keys=True), every key of peft 0.21.2.
  const std::vector<std::pair<const char *, std::string>> fields = {
      {"alora_invocation_tokens", "null"},
      {"alpha_pattern", "{}"},
      {"arrow_config", "null"},
      {"auto_mapping", "null"},
      {"base_model_name_or_path",
       baseModel.empty() ? "null" : jsonString(baseModel)},
      {"bias", "\"none\""},
      {"corda_config", "null"},
      {"ensure_weight_tying", "false"},
      {"eva_config", "null"},
      {"exclude_modules", "null"},
      {"fan_in_fan_out", fanInFanOut ? "true" : "false"},
      {"inference_mode", "true"},
      {"init_lora_weights", "true"},
      {"kasa_config", "null"},
      {"layer_replication", "null"},
      {"layers_pattern", "null"},
      {"layers_to_transform", "null"},
      {"loftq_config", "{}"},
      {"lora_alpha", shortestNumber(lora.alpha)},
      {"lora_bias", "false"},
      {"lora_dropout", "0.0"},
      {"lora_ga_config", "null"},
      {"megatron_config", "null"},
      {"megatron_core", "\"megatron.core\""},
      {"modules_to_save", "null"},
      {"monteclora_config", "null"},
      {"peft_type", "\"LORA\""},
      {"peft_version", "\"0.21.2\""},
      {"qalora_group_size", "16"},
      {"r", std::to_string(lora.rank)},
      {"rank_pattern", "{}"},
      {"revision", "null"},
      {"target_modules", targetList},
      {"target_parameters", "null"},
      {"task_type", "\"CAUSAL_LM\""},
      {"trainable_token_indices", "null"},
      {"use_bdlora", "null"},
      {"use_dora", "false"},
      {"use_qalora", "false"},
      {"use_rslora", "false"},
      {"velora_config", "null"}};
  std::string out = "{";
  for (size_t i = 0; i < fields.size(); ++i)
    out += std::string(i ? ",\n  " : "\n  ") + jsonString(fields[i].first) +
           ": " + fields[i].second;
  return out + "\n}";
}

void checkHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, const LoRASpec &lora) {
  switch (options.kind) {
  case HfExportKind::Model:
    if (lora.present())
      throw UsageError("the program trains LoRA adapters: its export is a "
                       "peft adapter or the merged model");
    checkHfExport(options, params);
    return;
  case HfExportKind::Merged:
    if (!lora.present())
      throw UsageError("the merged export needs a program with LoRA "
                       "(#dp.lora); export the model as it is instead");
    checkHfExport(options, baseParams(params));
    return;
  case HfExportKind::Adapter: {
    if (!lora.present())
      throw UsageError("a peft adapter export needs a program with LoRA "
                       "(#dp.lora)");
    const std::vector<ParamSpec> adapters = adapterParams(params);
    if (adapters.empty())
      throw UsageError("the program's LoRA has no adapter parameters");
    for (const ParamSpec &p : adapters)
      if (p.lora.peftName.empty())
        throw UsageError("adapter parameter '" + p.name +
                         "' has no peft name (peft.name)");
    std::error_code ec;
    if (!options.like.empty() && !fs::is_directory(options.like, ec))
      throw UsageError("'" + options.like + "' is not a folder");
    checkExportFolder(options.dir);
    return;
  }
  }
}

void writeHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, const LoRASpec &lora,
                   DType valueType, const ParamValues &values) {
  checkHfExport(options, params, lora);
  if (options.kind == HfExportKind::Model)
    return writeHfFolder(options, params, valueType, values);
  if (options.kind == HfExportKind::Merged)
    return writeHfFolder(options, baseParams(params), valueType,
                         mergedValues(params, lora, valueType, values));

  const std::vector<ParamSpec> adapters = adapterParams(params);
  const std::string baseModel =
      options.like.empty()
          ? std::string()
          : fs::absolute(fs::path(options.like)).lexically_normal().string();
  writeAtomically(options.dir, [&](const std::string &temporary) {
    std::error_code ec;
    writeFileDurably(temporary + "/adapter_config.json",
                     peftAdapterConfig(lora, params, baseModel));
    if (!options.like.empty())
      for (const char *file : kCompanionFiles)
        if (std::string(file) != "generation_config.json" &&
            fs::is_regular_file(options.like + "/" + file, ec))
          copyFileDurably(options.like + "/" + file, temporary + "/" + file);
    std::vector<TensorInfo> infos;
    for (const ParamSpec &p : adapters)
      infos.push_back({p.lora.peftName, options.dtype, p.shape});
    SafetensorsWriter writer(temporary + "/adapter_model.safetensors", infos,
                             {{"format", "pt"}});
    const int64_t inBytes = sizeOf(valueType), outBytes = sizeOf(options.dtype);
    for (const ParamSpec &p : adapters) {
      const int64_t numel = product(p.shape);
      std::vector<unsigned char> in(static_cast<size_t>(numel * inBytes));
      std::vector<unsigned char> out(static_cast<size_t>(numel * outBytes));
      values(p, 0, numel, in.data());
      for (int64_t i = 0; i < numel; ++i) {
        const double v = loadAs(valueType, in.data() + i * inBytes);
        if (!std::isfinite(v))
          throw std::runtime_error("not exporting to '" + options.dir +
                                   "': element " + std::to_string(i) +
                                   " of parameter '" + p.name +
                                   "' is not finite");
        storeAs(options.dtype, v, out.data() + i * outBytes);
      }
      writer.write(out.data());
    }
    writer.close();
  });
}

std::string loraJson(const LoRASpec &lora) {
  if (!lora.present())
    return "";
  std::string targets;
  for (const std::string &t : lora.targets)
    targets += (targets.empty() ? "" : ", ") + jsonString(t);
  return "{\"r\": " + std::to_string(lora.rank) +
         ", \"lora_alpha\": " + privacy::jsonNumber(lora.alpha) +
         ", \"target_modules\": [" + targets + "]}";
}

LoRASpec loraFromJson(const std::string &json, const std::string &what) {
  LoRASpec lora;
  try {
    const JsonValue root = JsonValue::parse(json);
    lora.rank = root.at("r").integer();
    lora.alpha = root.at("lora_alpha").number();
    for (const JsonValue &t : root.at("target_modules").array())
      lora.targets.push_back(t.string());
    if (lora.rank <= 0 || !(lora.alpha > 0) || lora.targets.empty())
      throw JsonError("rank, alpha or targets out of range");
  } catch (const JsonError &e) {
    throw UsageError(what + ": the LoRA is malformed: " + e.what());
  }
  return lora;
}

} // namespace dprt::driver
