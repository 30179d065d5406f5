//===- HfWeightsTest.cpp - Hugging Face layouts in and out ----------------===//
//
// The layouts no importable fixture has yet (test/hf-weights covers the
// plain ones end to end): GPT-2's Conv1D weights stored [in, out]
// (hf.transposed), q, k and v as row ranges of one c_attn tensor (hf.rows),
// GPT2Model's names without "transformer.", a head read from tied input
// embeddings, and buffers transformers ignores; then the same parameters
// written back (writeHfFolder) byte for byte, and the mapping's JSON.
// LoRA (docs/lora.md): the peft adapter export against the parameters
// (names, shapes, config, values), its reading back (--init-adapter), the
// merged export against W + (alpha / r) B A computed here, and the errors.
//
//===----------------------------------------------------------------------===//

#include "HfWeights.h"
#include "Checkpoint.h"
#include "Json.h"
#include "Options.h"
#include "ProcessHelpers.h"
#include "Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

using namespace dprt;
using namespace dprt::driver;
using dpctest::TempDir;
using dpctest::writeFile;

namespace {

constexpr int64_t kIn = 4, kHead = 3, kVocab = 5;

ParamSpec param(const std::string &name, std::vector<int64_t> shape,
                const std::string &hfName, bool transposed = false,
                int64_t rowBegin = -1, int64_t rowEnd = -1) {
  ParamSpec p{name, std::move(shape), 0, 0, 0, true, {}, {}};
  p.hf.name = hfName;
  p.hf.transposed = transposed;
  p.hf.rowBegin = rowBegin;
  p.hf.rowEnd = rowEnd;
  return p;
}

/// q, k, v (weights and biases) of one GPT-2 block and the tied embeddings,
/// under transformers' GPT2LMHeadModel names.
std::vector<ParamSpec> gpt2Params(bool withHead) {
  const std::string attn = "transformer.h.0.attn.c_attn.";
  std::vector<ParamSpec> params = {
      param("emb", {kVocab, kIn}, "transformer.wte.weight"),
      param("b0.wq", {kHead, kIn}, attn + "weight", true, 0, kHead),
      param("b0.wk", {kHead, kIn}, attn + "weight", true, kHead, 2 * kHead),
      param("b0.wv", {kHead, kIn}, attn + "weight", true, 2 * kHead, 3 * kHead),
      param("b0.wq.b", {kHead}, attn + "bias", false, 0, kHead),
      param("b0.wk.b", {kHead}, attn + "bias", false, kHead, 2 * kHead),
      param("b0.wv.b", {kHead}, attn + "bias", false, 2 * kHead, 3 * kHead),
  };
  if (withHead)
    params.push_back(param("head", {kVocab, kIn}, "lm_head.weight"));
  return params;
}

std::vector<float> iota(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = scale * static_cast<float>(i + 1);
  return v;
}

/// A GPT2Model folder (names without "transformer."): c_attn.weight is
/// [in, 3 * head] with S[i][j] = 1000 + 10 i + j, plus the causal-mask buffer.
struct Gpt2Folder {
  TempDir dir;
  std::vector<float> wte = iota(kVocab * kIn, 0.5f);
  std::vector<float> attn, bias = iota(3 * kHead, -0.25f);
  std::vector<float> mask = iota(4, 1);

  explicit Gpt2Folder(bool extra = false) {
    for (int64_t i = 0; i < kIn; ++i)
      for (int64_t j = 0; j < 3 * kHead; ++j)
        attn.push_back(static_cast<float>(1000 + 10 * i + j));
    writeFile(dir / "config.json",
              "{\"model_type\": \"gpt2\", \"tie_word_embeddings\": true, "
              "\"torch_dtype\": \"float32\"}\n");
    writeFile(dir / "tokenizer.json", "{}\n");
    std::vector<TensorInfo> infos = {
        {"wte.weight", DType::F32, {kVocab, kIn}},
        {"h.0.attn.c_attn.weight", DType::F32, {kIn, 3 * kHead}},
        {"h.0.attn.c_attn.bias", DType::F32, {3 * kHead}},
        {"h.0.attn.bias", DType::F32, {2, 2}}};
    if (extra)
      infos.push_back({"h.0.attn.c_proj.weight", DType::F32, {2, 2}});
    SafetensorsWriter w(dir / "model.safetensors", infos, {});
    w.write(wte.data());
    w.write(attn.data());
    w.write(bias.data());
    w.write(mask.data());
    if (extra)
      w.write(mask.data());
    w.close();
  }
};

std::vector<float> readAll(const HfInit &init, const ParamSpec &p) {
  int64_t n = 1;
  for (int64_t d : p.shape)
    n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  init.read(p, 0, n, DType::F32, out.data());
  return out;
}

TEST(HfWeights, Gpt2LayoutsLoad) {
  Gpt2Folder folder;
  const std::vector<ParamSpec> params = gpt2Params(/*withHead=*/true);
  HfInit init(folder.dir.path(), params);
  EXPECT_TRUE(init.unsourced().empty());
  EXPECT_EQ(readAll(init, params[0]), folder.wte);
  // The head of tied embeddings is the input embedding.
  EXPECT_EQ(readAll(init, params[7]), folder.wte);
  // b0.w{q,k,v}[r][c] = L[k * head + r][c] = S[c][k * head + r].
  for (int k = 0; k < 3; ++k) {
    const std::vector<float> w = readAll(init, params[1 + k]);
    const std::vector<float> b = readAll(init, params[4 + k]);
    for (int64_t r = 0; r < kHead; ++r) {
      EXPECT_EQ(b[r], folder.bias[k * kHead + r]);
      for (int64_t c = 0; c < kIn; ++c)
        EXPECT_EQ(w[r * kIn + c], 1000 + 10 * c + k * kHead + r)
            << "parameter " << params[1 + k].name << " [" << r << "][" << c
            << "]";
    }
  }
  // A part of a parameter, as one rank's shard reads it: elements 5..8 of
  // b0.wk are rows 1 and 2.
  std::vector<float> part(4);
  init.read(params[2], 5, 4, DType::F32, part.data());
  EXPECT_EQ(part, (std::vector<float>{1000 + 10 * 1 + 4, 1000 + 10 * 2 + 4,
                                      1000 + 10 * 3 + 4, 1000 + 10 * 0 + 5}));
  // Into f64.
  double d = 0;
  init.read(params[4], 2, 1, DType::F64, &d);
  EXPECT_EQ(d, folder.bias[2]);
}

TEST(HfWeights, Gpt2LayoutsExportByteForByte) {
  Gpt2Folder folder;
  const std::vector<ParamSpec> params = gpt2Params(/*withHead=*/false);
  HfInit init(folder.dir.path(), params);
  TempDir out;
  HfExportOptions options;
  options.dir = out / "exported";
  options.like = folder.dir.path();
  writeHfFolder(
      options, params, DType::F32,
      [&](const ParamSpec &p, int64_t first, int64_t count, void *values) {
        init.read(p, first, count, DType::F32, values);
      });
  SafetensorsReader exported(options.dir + "/model.safetensors");
  ASSERT_EQ(exported.tensors().size(), 3u);
  auto expect = [&](const std::string &name, const std::vector<float> &want,
                    std::vector<int64_t> shape) {
    const TensorInfo *t = exported.find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape, shape) << name;
    std::vector<float> got(want.size());
    exported.read(*t, got.data());
    EXPECT_EQ(got, want) << name;
  };
  expect("transformer.wte.weight", folder.wte, {kVocab, kIn});
  expect("transformer.h.0.attn.c_attn.weight", folder.attn, {kIn, 3 * kHead});
  expect("transformer.h.0.attn.c_attn.bias", folder.bias, {3 * kHead});
  EXPECT_EQ(exported.metadata().at("format"), "pt");
  // torch_dtype set to what is written, the tokenizer copied.
  EXPECT_NE(readTextFile(options.dir + "/config.json")
                .find("\"torch_dtype\": \"float32\""),
            std::string::npos);
  EXPECT_EQ(readTextFile(options.dir + "/tokenizer.json"), "{}\n");
}

TEST(HfWeights, ExportRefusesATiedConfigForAModelWithItsOwnHead) {
  Gpt2Folder folder;
  TempDir out;
  HfExportOptions options;
  options.dir = out / "x";
  options.like = folder.dir.path();
  try {
    checkHfExport(options, gpt2Params(/*withHead=*/true));
    FAIL() << "no error";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find("tie_word_embeddings"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfWeights, RowsThatDoNotPartitionTheTensorAreAnError) {
  Gpt2Folder folder;
  std::vector<ParamSpec> params = gpt2Params(/*withHead=*/false);
  params[2].hf.rowBegin = 4; // b0.wk: rows [4, 6) leave row 3 out
  params[2].hf.rowEnd = 7;
  try {
    HfInit init(folder.dir.path(), params);
    FAIL() << "no error";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "do not split tensor 'transformer.h.0.attn.c_attn.weight'"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfWeights, ALeftOverTensorIsNamed) {
  Gpt2Folder folder(/*extra=*/true);
  try {
    HfInit init(folder.dir.path(), gpt2Params(/*withHead=*/true));
    FAIL() << "no error";
  } catch (const UsageError &e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tensor 'h.0.attn.c_proj.weight' in "
                        "model.safetensors is not a parameter of the model"),
              std::string::npos)
        << what;
    // The causal-mask buffer is not reported.
    EXPECT_EQ(what.find("h.0.attn.bias'"), std::string::npos) << what;
  }
}

TEST(HfWeights, SourcesRoundTripThroughJson) {
  const std::vector<ParamSpec> params = gpt2Params(/*withHead=*/true);
  const std::string json = hfSourcesJson(params);
  std::vector<ParamSpec> bare = params;
  for (ParamSpec &p : bare)
    p.hf = HfSource{};
  applyHfSources(json, bare, "test");
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(bare[i].hf.name, params[i].hf.name);
    EXPECT_EQ(bare[i].hf.transposed, params[i].hf.transposed);
    EXPECT_EQ(bare[i].hf.rowBegin, params[i].hf.rowBegin);
    EXPECT_EQ(bare[i].hf.rowEnd, params[i].hf.rowEnd);
  }
  EXPECT_THROW(applyHfSources("{\"nosuch\": {\"name\": \"x\"}}", bare, "t"),
               UsageError);
  EXPECT_THROW(applyHfSources("{\"b0.wq\": {\"name\": \"x\", \"rows\": [0, "
                              "2]}}",
                              bare, "t"),
               UsageError);
}

//===----------------------------------------------------------------------===//
// LoRA
//===----------------------------------------------------------------------===//

constexpr int64_t kOut = 6, kWidth = 5, kRank = 2;
constexpr double kAlpha = 3.0; // scaling alpha / r = 1.5

ParamSpec adapterPart(const std::string &name, std::vector<int64_t> shape,
                      LoRARole role, const std::string &peft) {
  ParamSpec p{name, std::move(shape), 0, 0, 0, role != LoRARole::Scale, {}, {}};
  p.lora.role = role;
  p.lora.base = "b0.wq";
  p.lora.peftName = peft;
  return p;
}

/// A norm and q_proj with its adapter, as dp-lora and describe_adapter make
/// them.
std::vector<ParamSpec> loraParams() {
  const std::string peft = "base_model.model.model.layers.0.self_attn.q_proj.";
  return {
      param("b0.n1", {kWidth}, "model.layers.0.input_layernorm.weight"),
      param("b0.wq", {kOut, kWidth}, "model.layers.0.self_attn.q_proj.weight"),
      adapterPart("b0.wq.lora_A", {kRank, kWidth}, LoRARole::A,
                  peft + "lora_A.weight"),
      adapterPart("b0.wq.lora_B", {kOut, kRank}, LoRARole::B,
                  peft + "lora_B.weight"),
      adapterPart("b0.wq.lora_scale", {kRank, kRank}, LoRARole::Scale, "")};
}

LoRASpec loraSpec() {
  LoRASpec lora;
  lora.rank = kRank;
  lora.alpha = kAlpha;
  lora.targets = {"v_proj", "q_proj"};
  return lora;
}

/// Distinct values per parameter, none of them round: sin of the element
/// index and a per-parameter phase.
std::vector<float> valuesOf(const ParamSpec &p) {
  int64_t n = 1;
  for (int64_t d : p.shape)
    n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  const double phase = static_cast<double>(p.name.size());
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(std::sin(0.7 * double(i) + phase));
  return v;
}

ParamValues valuesFunction() {
  return [](const ParamSpec &p, int64_t first, int64_t count, void *out) {
    const std::vector<float> all = valuesOf(p);
    std::memcpy(out, all.data() + first, static_cast<size_t>(count) * 4);
  };
}

/// A model folder with config.json and a tokenizer file.
struct LlamaLike {
  TempDir dir;
  LlamaLike() {
    writeFile(dir / "config.json",
              "{\"model_type\": \"llama\", \"dtype\": \"float32\"}\n");
    writeFile(dir / "tokenizer.json", "{\"t\": 1}\n");
  }
};

std::vector<float> readTensor(SafetensorsReader &file, const std::string &name,
                              std::vector<int64_t> shape) {
  const TensorInfo *t = file.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t)
    return {};
  EXPECT_EQ(t->shape, shape) << name;
  EXPECT_EQ(t->storedName, "F32") << name;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  file.read(*t, out.data());
  return out;
}

TEST(HfLoRA, AdapterExportIsPeftsFolder) {
  LlamaLike like;
  TempDir out;
  const std::vector<ParamSpec> params = loraParams();
  HfExportOptions options;
  options.kind = HfExportKind::Adapter;
  options.dir = out / "adapter";
  options.like = like.dir.path();
  writeHfExport(options, params, loraSpec(), DType::F32, valuesFunction());

  // The tensors: lora_A and lora_B under their peft names, as they are
  // (peft's lora_A.weight is [r, in], lora_B.weight [out, r]); nothing else.
  SafetensorsReader file(options.dir + "/adapter_model.safetensors");
  EXPECT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(readTensor(file, params[2].lora.peftName, {kRank, kWidth}),
            valuesOf(params[2]));
  EXPECT_EQ(readTensor(file, params[3].lora.peftName, {kOut, kRank}),
            valuesOf(params[3]));

  // adapter_config.json: peft's fields; no config.json (the folder is not a
  // model), the tokenizer copied.
  const JsonValue config =
      JsonValue::parse(readTextFile(options.dir + "/adapter_config.json"));
  EXPECT_EQ(config.at("peft_type").string(), "LORA");
  EXPECT_EQ(config.at("task_type").string(), "CAUSAL_LM");
  EXPECT_EQ(config.at("r").integer(), kRank);
  EXPECT_EQ(config.at("lora_alpha").number(), kAlpha);
  ASSERT_EQ(config.at("target_modules").array().size(), 2u);
  EXPECT_EQ(config.at("target_modules").array()[0].string(), "q_proj");
  EXPECT_EQ(config.at("target_modules").array()[1].string(), "v_proj");
  EXPECT_EQ(config.at("bias").string(), "none");
  EXPECT_FALSE(config.at("fan_in_fan_out").boolean());
  EXPECT_FALSE(config.at("use_rslora").boolean());
  EXPECT_EQ(config.at("lora_dropout").number(), 0.0);
  EXPECT_EQ(
      config.at("base_model_name_or_path").string(),
      std::filesystem::absolute(like.dir.path()).lexically_normal().string());
  EXPECT_EQ(config.object().size(), 41u); // every key peft 0.21.2 writes
  EXPECT_FALSE(std::filesystem::exists(options.dir + "/config.json"));
  EXPECT_EQ(readTextFile(options.dir + "/tokenizer.json"), "{\"t\": 1}\n");

  // Read back as --init-adapter reads it: the same values.
  std::unique_ptr<HfInit> init =
      HfInit::adapter(options.dir, params, loraSpec());
  EXPECT_FALSE(init->loads(params[1]));
  EXPECT_FALSE(init->loads(params[4]));
  for (int i : {2, 3}) {
    ASSERT_TRUE(init->loads(params[i]));
    EXPECT_EQ(readAll(*init, params[i]), valuesOf(params[i]));
  }
}

TEST(HfLoRA, MergedExportIsWPlusScaledBA) {
  LlamaLike like;
  TempDir out;
  const std::vector<ParamSpec> params = loraParams();
  HfExportOptions options;
  options.kind = HfExportKind::Merged;
  options.dir = out / "merged";
  options.like = like.dir.path();
  writeHfExport(options, params, loraSpec(), DType::F32, valuesFunction());
  SafetensorsReader file(options.dir + "/model.safetensors");
  EXPECT_EQ(file.tensors().size(), 2u); // the norm and q_proj, no adapter
  EXPECT_EQ(readTensor(file, "model.layers.0.input_layernorm.weight", {kWidth}),
            valuesOf(params[0]));
  const std::vector<float> merged = readTensor(
      file, "model.layers.0.self_attn.q_proj.weight", {kOut, kWidth});
  const std::vector<float> w = valuesOf(params[1]), a = valuesOf(params[2]),
                           b = valuesOf(params[3]);
  double largest = 0;
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t i = 0; i < kWidth; ++i) {
      double ba = 0;
      for (int64_t k = 0; k < kRank; ++k)
        ba += double(b[o * kRank + k]) * double(a[k * kWidth + i]);
      const double want = double(w[o * kWidth + i]) + kAlpha / kRank * ba;
      // One rounding to f32: half an ulp of |want| (< 4 here).
      EXPECT_NEAR(merged[o * kWidth + i], want, 2.4e-7)
          << "element " << o << ", " << i;
      largest = std::max(largest, std::fabs(kAlpha / kRank * ba));
    }
  // The adapter is not negligible: the test would see it missing.
  EXPECT_GT(largest, 0.5);
  EXPECT_NE(readTextFile(options.dir + "/config.json").find("\"float32\""),
            std::string::npos);
}

TEST(HfLoRA, ExportKindsNeedTheirProgram) {
  LlamaLike like;
  TempDir out;
  HfExportOptions options;
  options.dir = out / "x";
  options.like = like.dir.path();
  // A LoRA program is not exported as a plain model.
  EXPECT_THROW(checkHfExport(options, loraParams(), loraSpec()), UsageError);
  options.kind = HfExportKind::Merged;
  EXPECT_THROW(checkHfExport(options, loraParams(), LoRASpec{}), UsageError);
  options.kind = HfExportKind::Adapter;
  EXPECT_THROW(checkHfExport(options, loraParams(), LoRASpec{}), UsageError);
  EXPECT_NO_THROW(checkHfExport(options, loraParams(), loraSpec()));
}

/// The UsageError's text of HfInit::adapter, or "" when it loads.
std::string adapterError(const std::string &dir, const LoRASpec &lora) {
  try {
    HfInit::adapter(dir, loraParams(), lora);
  } catch (const UsageError &e) {
    return e.what();
  }
  return "";
}

TEST(HfLoRA, AMismatchedAdapterIsNamed) {
  LlamaLike like;
  TempDir out;
  HfExportOptions options;
  options.kind = HfExportKind::Adapter;
  options.dir = out / "adapter";
  options.like = like.dir.path();
  writeHfExport(options, loraParams(), loraSpec(), DType::F32,
                valuesFunction());
  EXPECT_EQ(adapterError(options.dir, loraSpec()), "");

  LoRASpec rank = loraSpec();
  rank.rank = 3;
  EXPECT_NE(adapterError(options.dir, rank)
                .find("r is 2, the program's LoRA has rank 3"),
            std::string::npos);
  LoRASpec targets = loraSpec();
  targets.targets = {"q_proj"};
  EXPECT_NE(adapterError(options.dir, targets)
                .find("target_modules are [q_proj, v_proj], the program's "
                      "LoRA targets [q_proj]"),
            std::string::npos)
      << adapterError(options.dir, targets);
  LoRASpec alpha = loraSpec();
  alpha.alpha = 4;
  EXPECT_NE(adapterError(options.dir, alpha).find("lora_alpha is 3"),
            std::string::npos);
  EXPECT_NE(adapterError(options.dir, LoRASpec{}).find("has no LoRA"),
            std::string::npos);
  EXPECT_NE(adapterError(like.dir.path(), loraSpec())
                .find("not a peft adapter folder: it has no "
                      "adapter_config.json"),
            std::string::npos);
  std::filesystem::remove(options.dir + "/adapter_model.safetensors");
  EXPECT_NE(adapterError(options.dir, loraSpec())
                .find("has no adapter_model.safetensors"),
            std::string::npos);
  writeFile(options.dir + "/adapter_config.json", "{\"r\": ");
  EXPECT_NE(adapterError(options.dir, loraSpec())
                .find("adapter_config.json is not a valid peft config"),
            std::string::npos);
}

TEST(HfLoRA, PartsAndSpecRoundTripThroughJson) {
  const std::vector<ParamSpec> params = loraParams();
  std::vector<ParamSpec> bare = params;
  for (ParamSpec &p : bare) {
    p.hf = HfSource{};
    p.lora = LoRAPart{};
  }
  applyHfSources(hfSourcesJson(params), bare, "test");
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(bare[i].hf.name, params[i].hf.name);
    EXPECT_EQ(bare[i].lora.role, params[i].lora.role);
    EXPECT_EQ(bare[i].lora.base, params[i].lora.base);
    EXPECT_EQ(bare[i].lora.peftName, params[i].lora.peftName);
  }
  const LoRASpec lora = loraFromJson(loraJson(loraSpec()), "test");
  EXPECT_EQ(lora.rank, kRank);
  EXPECT_EQ(lora.alpha, kAlpha);
  EXPECT_EQ(lora.targets, loraSpec().targets);
  EXPECT_EQ(loraJson(LoRASpec{}), "");
  EXPECT_THROW(loraFromJson("{\"r\": 0, \"lora_alpha\": 1, "
                            "\"target_modules\": [\"q\"]}",
                            "t"),
               UsageError);
}

} // namespace
