//===- HfWeightsTest.cpp - Hugging Face layouts in and out ----------------===//
//
// The layouts no importable fixture has yet (test/hf-weights covers the
// plain ones end to end): GPT-2's Conv1D weights stored [in, out]
// (hf.transposed), q, k and v as row ranges of one c_attn tensor (hf.rows),
// GPT2Model's names without "transformer.", a head read from tied input
// embeddings, and buffers transformers ignores; then the same parameters
// written back (writeHfFolder) byte for byte, and the mapping's JSON.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "HfWeights.h"
#include "Options.h"
#include "ProcessHelpers.h"
#include "Safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
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
  ParamSpec p{name, std::move(shape), 0, 0, 0, true, {}};
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

} // namespace
