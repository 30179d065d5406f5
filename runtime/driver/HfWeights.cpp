//===- HfWeights.cpp - Hugging Face weights in and out of a model ---------===//

#include "HfWeights.h"

#include "Checkpoint.h"
#include "Dataset.h"
#include "HfFolder.h"
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

namespace dprt::driver {
namespace {

namespace fs = std::filesystem;

using privacy::jsonString;

/// The name transformers gives the output head, and the input embeddings it
/// is tied to (Llama, Mistral, Qwen2; GPT2LMHeadModel; GPT2Model).
constexpr const char *kHeadName = "lm_head.weight";
constexpr const char *kInputEmbeddingNames[] = {
    "model.embed_tokens.weight", "transformer.wte.weight", "wte.weight"};

/// Tensors of Hugging Face checkpoints that are buffers, not parameters:
/// transformers drops them on load (older Llama checkpoints saved the rotary
/// inverse frequencies; GPT-2's the causal mask).
bool isIgnoredBuffer(const std::string &name, const std::string &modelType) {
  auto endsWith = [&](const std::string &suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) ==
               0;
  };
  if (endsWith(".rotary_emb.inv_freq"))
    return true;
  return modelType == "gpt2" &&
         (endsWith(".attn.bias") || endsWith(".attn.masked_bias"));
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string baseName(const std::string &path) {
  return fs::path(path).filename().string();
}

/// The stored tensor a group of parameters forms: one parameter that is the
/// whole tensor, or parameters whose rows partition it (GPT-2's c_attn).
struct TensorLayout {
  std::vector<int64_t> stored; ///< S's shape
  bool transposed = false;
  int64_t rows = 0, cols = 0; ///< L = S or S^T: rows x cols
};

/// The layout `group` (parameters with one hf.name) needs, or "" in
/// `problem` and an empty layout when the group does not form a tensor.
TensorLayout layoutOf(std::vector<const ParamSpec *> group,
                      std::string &problem) {
  TensorLayout layout;
  const ParamSpec &first = *group.front();
  layout.transposed = first.hf.transposed;
  const std::vector<int64_t> rest(first.shape.begin() + 1, first.shape.end());
  layout.cols = product(rest);
  auto names = [&] {
    std::string text;
    for (size_t i = 0; i < group.size(); ++i)
      text += (i ? ", '" : "'") + group[i]->name + "'";
    return text;
  };
  if (!first.hf.hasRows()) {
    if (group.size() > 1) {
      problem =
          "parameters " + names() + " all are tensor '" + first.hf.name + "'";
      return {};
    }
    layout.rows = first.shape[0];
  } else {
    std::sort(group.begin(), group.end(),
              [](const ParamSpec *a, const ParamSpec *b) {
                return a->hf.rowBegin < b->hf.rowBegin;
              });
    for (const ParamSpec *p : group) {
      const std::vector<int64_t> pRest(p->shape.begin() + 1, p->shape.end());
      if (!p->hf.hasRows() || p->hf.transposed != layout.transposed ||
          pRest != rest || p->hf.rowBegin != layout.rows) {
        problem = "parameters " + names() + " do not split tensor '" +
                  first.hf.name +
                  "' into consecutive row ranges from row 0 of one layout";
        return {};
      }
      layout.rows = p->hf.rowEnd;
    }
  }
  if (layout.transposed)
    layout.stored = {layout.cols, layout.rows};
  else {
    layout.stored = {layout.rows};
    layout.stored.insert(layout.stored.end(), rest.begin(), rest.end());
  }
  return layout;
}

/// Replaces the string (or null) value of the top-level `key` of a JSON
/// object text by `value`; false if the object has no such key. Everything
/// else stays byte for byte.
bool replaceTopLevelString(std::string &text, const std::string &key,
                           const std::string &value) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"')
        end += text[end] == '\\' ? 2 : 1;
      const std::string token = text.substr(i + 1, end - i - 1);
      size_t next = text.find_first_not_of(" \t\r\n", end + 1);
      const bool isKey = next != std::string::npos && text[next] == ':';
      if (depth == 1 && isKey && token == key) {
        size_t v = text.find_first_not_of(" \t\r\n", next + 1);
        size_t vEnd = std::string::npos;
        if (v != std::string::npos && text[v] == '"') {
          vEnd = v + 1;
          while (vEnd < text.size() && text[vEnd] != '"')
            vEnd += text[vEnd] == '\\' ? 2 : 1;
          ++vEnd;
        } else if (v != std::string::npos && text.compare(v, 4, "null") == 0) {
          vEnd = v + 4;
        }
        if (vEnd == std::string::npos)
          return false;
        text.replace(v, vEnd - v, jsonString(value));
        return true;
      }
      i = end;
    }
  }
  return false;
}

/// transformers' name for a dtype in config.json.
const char *torchDTypeName(DType dt) {
  switch (dt) {
  case DType::BF16:
    return "bfloat16";
  case DType::F32:
    return "float32";
  case DType::F64:
    return "float64";
  }
  return "float32";
}

/// A tensor of the exported folder and the parameters it is made of.
struct ExportTensor {
  std::string name;
  std::vector<const ParamSpec *> params;
  TensorLayout layout;
  int64_t bytes = 0;
};

/// The exported tensors in the order of the model's parameters; throws
/// UsageError when a parameter has no source or a group does not form one
/// tensor.
std::vector<ExportTensor> planExport(const std::vector<ParamSpec> &params,
                                     DType dtype) {
  std::vector<ExportTensor> tensors;
  std::map<std::string, size_t> byName;
  std::vector<std::string> problems;
  for (const ParamSpec &p : params) {
    if (!p.hf.present()) {
      problems.push_back("parameter '" + p.name +
                         "' has no Hugging Face name (hf.name), so the model "
                         "cannot be written as a Hugging Face folder");
      continue;
    }
    auto [it, fresh] = byName.try_emplace(p.hf.name, tensors.size());
    if (fresh)
      tensors.push_back({p.hf.name, {}, {}, 0});
    tensors[it->second].params.push_back(&p);
  }
  for (ExportTensor &t : tensors) {
    std::string problem;
    t.layout = layoutOf(t.params, problem);
    if (!problem.empty())
      problems.push_back(problem);
    t.bytes = product(t.layout.stored) * sizeOf(dtype);
  }
  if (!problems.empty())
    throwProblems(problems);
  return tensors;
}

/// Where element e (row-major, the parameter's layout) of a parameter lies
/// in the stored tensor: L row r = firstRow + e / cols, column j = e % cols;
/// S = L, or S^T when transposed.
inline int64_t storedIndex(int64_t e, int64_t cols, int64_t rows,
                           int64_t firstRow, bool transposed) {
  const int64_t r = firstRow + e / cols, j = e % cols;
  return transposed ? j * rows + r : r * cols + j;
}

} // namespace

//===----------------------------------------------------------------------===//
// config.json
//===----------------------------------------------------------------------===//

HfConfig HfConfig::read(const std::string &dir) {
  const std::string path = dir + "/config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw UsageError("'" + dir + "' is not a Hugging Face model folder: it " +
                     "has no config.json");
  HfConfig config;
  config.text = readTextFile(path);
  try {
    const JsonValue root = JsonValue::parse(config.text);
    if (const JsonValue *type = root.find("model_type");
        type && type->isString())
      config.modelType = type->string();
    const std::string &m = config.modelType;
    config.tiedEmbeddings = !(m == "llama" || m == "mistral" || m == "qwen2");
    if (const JsonValue *tie = root.find("tie_word_embeddings"))
      config.tiedEmbeddings = tie->boolean();
  } catch (const JsonError &e) {
    throw UsageError("'" + path + "' is not a valid config: " + e.what());
  }
  return config;
}

//===----------------------------------------------------------------------===//
// --init
//===----------------------------------------------------------------------===//

HfInit::HfInit(const std::string &dir, const std::vector<ParamSpec> &params)
    : dir_(dir) {
  const HfConfig config = HfConfig::read(dir);
  try {
    folder_ = std::make_unique<SafetensorsFolder>(dir);
  } catch (const std::runtime_error &e) {
    throw UsageError(std::string("--init: ") + e.what());
  }
  match(params, config, "--init '" + dir + "': ");
}

void HfInit::match(const std::vector<ParamSpec> &params, const HfConfig &config,
                   const std::string &where) {
  std::vector<std::string> problems;

  // Each parameter's stored tensor: its name, GPT2Model's name without
  // "transformer.", or for a head of tied embeddings the input embedding.
  std::map<const TensorInfo *, std::vector<const ParamSpec *>> users;
  std::map<const ParamSpec *, SafetensorsFolder::Entry> entryOf;
  for (const ParamSpec &p : params) {
    if (!p.hf.present()) {
      unsourced_.push_back(p.name);
      continue;
    }
    SafetensorsFolder::Entry entry = folder_->find(p.hf.name);
    const std::string prefix = "transformer.";
    if (!entry.tensor && p.hf.name.rfind(prefix, 0) == 0)
      entry = folder_->find(p.hf.name.substr(prefix.size()));
    if (!entry.tensor && p.hf.name == kHeadName && config.tiedEmbeddings)
      for (const char *input : kInputEmbeddingNames)
        if (!entry.tensor)
          entry = folder_->find(input);
    if (!entry.tensor) {
      problems.push_back(where + "the model's parameter '" + p.name +
                         "' needs tensor '" + p.hf.name + "', which " +
                         folder_->describe() + " does not hold");
      continue;
    }
    entryOf[&p] = entry;
    users[entry.tensor].push_back(&p);
  }

  for (const auto &[tensor, group] : users) {
    const SafetensorsFolder::Entry entry = entryOf[group.front()];
    const std::string in =
        "tensor '" + tensor->name + "' in " + baseName(entry.file->path());
    if (tensor->stored == StoredType::Other) {
      problems.push_back(where + in + " is stored as " + tensor->storedName +
                         ", which does not convert (F64, F32, BF16 and F16 "
                         "do)");
      continue;
    }
    // Parameters with rows share the tensor; others each read all of it
    // (a model with its own head reading tied embeddings).
    std::vector<std::vector<const ParamSpec *>> layouts;
    const bool rows =
        std::any_of(group.begin(), group.end(),
                    [](const ParamSpec *p) { return p->hf.hasRows(); });
    if (rows)
      layouts.push_back(group);
    else
      for (const ParamSpec *p : group)
        layouts.push_back({p});
    for (const auto &members : layouts) {
      std::string problem;
      const TensorLayout layout = layoutOf(members, problem);
      if (!problem.empty()) {
        problems.push_back(where + problem);
        continue;
      }
      if (layout.stored != tensor->shape) {
        std::string needs = "the model's parameter '" + members[0]->name + "'";
        if (members.size() > 1) {
          needs = "the model's parameters";
          for (const ParamSpec *p : members)
            needs += " '" + p->name + "'";
        }
        problems.push_back(where + in + " has shape " +
                           shapeText(tensor->shape) + ", " + needs + " needs " +
                           shapeText(layout.stored) +
                           (layout.transposed ? " (stored transposed)" : ""));
        continue;
      }
      for (const ParamSpec *p : members)
        sources_[p->name] = {
            entry.file,  tensor,      layout.transposed,
            layout.rows, layout.cols, p->hf.hasRows() ? p->hf.rowBegin : 0};
    }
    ++storedTypes_[tensor->storedName];
  }

  for (const SafetensorsFolder::Entry &entry : folder_->entries()) {
    if (users.count(entry.tensor))
      continue;
    const std::string &name = entry.tensor->name;
    if (isIgnoredBuffer(name, config.modelType) ||
        (name == kHeadName && config.tiedEmbeddings))
      continue;
    problems.push_back(where + "tensor '" + name + "' in " +
                       baseName(entry.file->path()) +
                       " is not a parameter of the model (no parameter names "
                       "it in hf.name)");
  }
  if (sources_.empty() && problems.empty())
    problems.push_back(where + "no parameter of the model has a Hugging Face "
                               "name (import the model with dpc import-hf)");
  if (!problems.empty())
    throwProblems(problems);
}

void HfInit::read(const ParamSpec &param, int64_t first, int64_t count,
                  DType to, void *out) const {
  const Source &s = sources_.at(param.name);
  const unsigned char *base = s.file->mapped(*s.tensor);
  const int64_t inBytes = storedSize(s.tensor->stored);
  const int64_t outBytes = sizeOf(to);
  auto *dst = static_cast<unsigned char *>(out);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t e = first + k;
    const int64_t at = storedIndex(e, s.cols, s.rows, s.firstRow, s.transposed);
    const double value = loadStored(s.tensor->stored, base + at * inBytes);
    if (!std::isfinite(value))
      throw UsageError("--init '" + dir_ + "': element " + std::to_string(at) +
                       " of tensor '" + s.tensor->name + "' in " +
                       baseName(s.file->path()) + " (for parameter '" +
                       param.name + "') is not finite");
    storeAs(to, value, dst + k * outBytes);
  }
}

std::string HfInit::describe() const {
  std::string types;
  for (const auto &[type, count] : storedTypes_)
    types += (types.empty() ? "" : ", ") + type;
  return "'" + dir_ + "' (" + folder_->describe() + ", " +
         std::to_string(sources_.size()) + " parameters from " + types +
         " tensors)";
}

//===----------------------------------------------------------------------===//
// --export
//===----------------------------------------------------------------------===//

DType parseExportDType(const std::string &flag, const std::string &text) {
  if (text == "bf16")
    return DType::BF16;
  if (text == "f32")
    return DType::F32;
  throw UsageError("option " + flag + " must be bf16 or f32, got '" + text +
                   "'");
}

void checkHfExport(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params) {
  planExport(params, options.dtype);
  const HfConfig config = HfConfig::read(options.like);
  if (config.tiedEmbeddings)
    for (const ParamSpec &p : params)
      if (p.hf.name == kHeadName)
        throw UsageError(
            "the model has its own head (parameter '" + p.name +
            "', lm_head.weight) but '" + options.like +
            "/config.json' ties it to the input embeddings "
            "(tie_word_embeddings): transformers would load the embeddings in "
            "its place; set tie_word_embeddings to false in that config");
  checkExportFolder(options.dir);
}

void writeHfFolder(const HfExportOptions &options,
                   const std::vector<ParamSpec> &params, DType valueType,
                   const ParamValues &values) {
  checkHfExport(options, params);
  const std::vector<ExportTensor> tensors = planExport(params, options.dtype);

  // Shards as huggingface_hub's split_torch_state_dict_into_shards cuts
  // them: in order, a new shard when the next tensor would overflow this
  // one, a tensor larger than the limit alone.
  std::vector<std::vector<const ExportTensor *>> shards;
  std::vector<const ExportTensor *> current;
  int64_t currentBytes = 0;
  for (const ExportTensor &t : tensors) {
    if (t.bytes > options.maxShardBytes) {
      shards.push_back({&t});
      continue;
    }
    if (!current.empty() && currentBytes + t.bytes > options.maxShardBytes) {
      shards.push_back(std::move(current));
      current.clear();
      currentBytes = 0;
    }
    current.push_back(&t);
    currentBytes += t.bytes;
  }
  if (!current.empty())
    shards.push_back(std::move(current));
  auto shardName = [&](size_t k) {
    if (shards.size() == 1)
      return std::string("model.safetensors");
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1,
                  shards.size());
    return std::string(name);
  };

  writeAtomically(options.dir, [&](const std::string &temporary) {
    std::error_code ec;
    // config.json, its dtype the one written.
    std::string config = HfConfig::read(options.like).text;
    const bool named =
        replaceTopLevelString(config, "dtype", torchDTypeName(options.dtype));
    const bool namedOld = replaceTopLevelString(config, "torch_dtype",
                                                torchDTypeName(options.dtype));
    if (!named && !namedOld) {
      const size_t brace = config.find('{');
      if (brace != std::string::npos)
        config.insert(brace + 1, std::string("\n  \"dtype\": ") +
                                     jsonString(torchDTypeName(options.dtype)) +
                                     ",");
    }
    writeFileDurably(temporary + "/config.json", config);
    for (const char *file : kCompanionFiles)
      if (fs::is_regular_file(options.like + "/" + file, ec))
        copyFileDurably(options.like + "/" + file, temporary + "/" + file);

    const int64_t outBytes = sizeOf(options.dtype);
    const int64_t inBytes = sizeOf(valueType);
    constexpr int64_t kChunk = int64_t{1} << 22;
    std::vector<char> chunk;
    const std::map<std::string, std::string> metadata = {{"format", "pt"}};
    int64_t totalSize = 0, totalParameters = 0;
    for (size_t k = 0; k < shards.size(); ++k) {
      std::vector<TensorInfo> infos;
      for (const ExportTensor *t : shards[k])
        infos.push_back({t->name, options.dtype, t->layout.stored});
      SafetensorsWriter writer(temporary + "/" + shardName(k), infos, metadata);
      for (const ExportTensor *t : shards[k]) {
        const TensorLayout &l = t->layout;
        std::vector<unsigned char> tensor(static_cast<size_t>(t->bytes));
        for (const ParamSpec *p : t->params) {
          const int64_t numel = product(p->shape);
          const int64_t firstRow = p->hf.hasRows() ? p->hf.rowBegin : 0;
          for (int64_t first = 0; first < numel; first += kChunk) {
            const int64_t count = std::min(kChunk, numel - first);
            chunk.resize(static_cast<size_t>(count * inBytes));
            values(*p, first, count, chunk.data());
            for (int64_t i = 0; i < count; ++i) {
              const double v = loadAs(valueType, chunk.data() + i * inBytes);
              if (!std::isfinite(v))
                throw std::runtime_error(
                    "not exporting to '" + options.dir + "': element " +
                    std::to_string(first + i) + " of parameter '" + p->name +
                    "' is not finite");
              storeAs(options.dtype, v,
                      tensor.data() + storedIndex(first + i, l.cols, l.rows,
                                                  firstRow, l.transposed) *
                                          outBytes);
            }
          }
        }
        writer.write(tensor.data());
        totalSize += t->bytes;
        totalParameters += product(l.stored);
      }
      writer.close();
    }
    if (shards.size() > 1) {
      // As transformers writes it: json.dumps(index, indent=2,
      // sort_keys=True) + "\n".
      std::map<std::string, std::string> weightMap;
      for (size_t k = 0; k < shards.size(); ++k)
        for (const ExportTensor *t : shards[k])
          weightMap[t->name] = shardName(k);
      std::ostringstream index;
      index << "{\n  \"metadata\": {\n    \"total_parameters\": "
            << totalParameters << ",\n    \"total_size\": " << totalSize
            << "\n  },\n  \"weight_map\": {";
      bool firstEntry = true;
      for (const auto &[name, file] : weightMap) {
        index << (firstEntry ? "\n" : ",\n") << "    " << jsonString(name)
              << ": " << jsonString(file);
        firstEntry = false;
      }
      index << "\n  }\n}\n";
      writeFileDurably(temporary + "/model.safetensors.index.json",
                       index.str());
    }
  });
}

//===----------------------------------------------------------------------===//
// The mapping in checkpoints
//===----------------------------------------------------------------------===//

std::string hfSourcesJson(const std::vector<ParamSpec> &params) {
  std::string out;
  for (const ParamSpec &p : params) {
    if (!p.hf.present() && p.lora.role == LoRARole::None)
      continue;
    out += (out.empty() ? "{" : ", ") + jsonString(p.name) + ": {";
    if (p.hf.present()) {
      out += "\"name\": " + jsonString(p.hf.name);
      if (p.hf.transposed)
        out += ", \"transposed\": true";
      if (p.hf.hasRows())
        out += ", \"rows\": [" + std::to_string(p.hf.rowBegin) + ", " +
               std::to_string(p.hf.rowEnd) + "]";
    }
    if (p.lora.role != LoRARole::None) {
      const char *role = p.lora.role == LoRARole::A   ? "A"
                         : p.lora.role == LoRARole::B ? "B"
                                                      : "scale";
      out += std::string(p.hf.present() ? ", " : "") +
             "\"lora\": {\"role\": \"" + role +
             "\", \"base\": " + jsonString(p.lora.base);
      if (!p.lora.peftName.empty())
        out += ", \"peft\": " + jsonString(p.lora.peftName);
      out += "}";
    }
    out += "}";
  }
  return out.empty() ? out : out + "}";
}

void applyHfSources(const std::string &json, std::vector<ParamSpec> &params,
                    const std::string &what) {
  try {
    const JsonValue root = JsonValue::parse(json);
    for (const auto &[name, source] : root.object()) {
      auto it =
          std::find_if(params.begin(), params.end(),
                       [&](const ParamSpec &p) { return p.name == name; });
      if (it == params.end())
        throw JsonError("names '" + name + "', which is not a parameter");
      if (const JsonValue *lora = source.find("lora")) {
        const std::string &role = lora->at("role").string();
        it->lora.role = role == "A"   ? LoRARole::A
                        : role == "B" ? LoRARole::B
                        : role == "scale"
                            ? LoRARole::Scale
                            : throw JsonError("the LoRA role of '" + name +
                                              "' is not A, B or scale");
        it->lora.base = lora->at("base").string();
        if (const JsonValue *peft = lora->find("peft"))
          it->lora.peftName = peft->string();
        if ((it->lora.role == LoRARole::Scale) != it->lora.peftName.empty())
          throw JsonError("the peft name of '" + name + "' does not fit its " +
                          "role");
        if (!source.find("name"))
          continue;
      }
      HfSource hf;
      hf.name = source.at("name").string();
      if (const JsonValue *t = source.find("transposed"))
        hf.transposed = t->boolean();
      if (const JsonValue *rows = source.find("rows")) {
        const auto &range = rows->array();
        if (range.size() != 2)
          throw JsonError("rows of '" + name + "' are not [begin, end)");
        hf.rowBegin = range[0].integer();
        hf.rowEnd = range[1].integer();
      }
      if (hf.name.empty() || (hf.transposed && it->shape.size() != 2) ||
          (hf.hasRows() && hf.rowEnd - hf.rowBegin != it->shape[0]))
        throw JsonError("the source of '" + name + "' does not fit its shape " +
                        shapeText(it->shape));
      it->hf = hf;
    }
  } catch (const JsonError &e) {
    throw UsageError(what +
                     ": the Hugging Face names are malformed: " + e.what());
  }
}

} // namespace dprt::driver
