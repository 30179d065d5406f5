//===- ProgramHarness.cpp - Compiled training programs vs the reference ---===//

#include "ProgramHarness.h"

#include "ProcessHelpers.h"
#include "reference/Models.h"

#include "dprt/keys.h"
#include "dprt/rng.h"
#include "privacy/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace dpc::programs {

namespace fs = std::filesystem;
namespace ref = dpc::reference;

namespace {

[[noreturn]] void fail(const std::string &what) {
  throw std::runtime_error("program harness: " + what);
}

std::string modelFile(const ProgramId &id) {
  return std::string(DPC_PROGRAM_MODELS) + "/" + id.model + ".mlir";
}

//===----------------------------------------------------------------------===//
// Recipe text
//===----------------------------------------------------------------------===//

/// The text of `dp.recipe @name ... { ... }` in the model file.
std::string recipeText(const ProgramId &id) {
  const std::string text = dpctest::readFile(modelFile(id));
  const std::string head = "dp.recipe @" + id.recipe + " for ";
  size_t begin = text.find(head);
  if (begin == std::string::npos)
    fail(modelFile(id) + " has no recipe @" + id.recipe);
  size_t end = text.find("\n}", begin);
  return text.substr(begin, end - begin);
}

double numberAfter(const std::string &text, const std::string &key) {
  std::smatch m;
  std::regex re("\\b" + key + " = ([-+0-9.eE]+)");
  if (!std::regex_search(text, m, re))
    fail("recipe has no '" + key + " = <number>': " + text);
  return std::stod(m[1]);
}

/// The strings of `key = ["a", "b"]` in the recipe, empty without the key.
std::vector<std::string> stringsAfter(const std::string &text,
                                      const std::string &key) {
  std::smatch m;
  if (!std::regex_search(text, m,
                         std::regex("\\b" + key + " = \\[([^\\]]*)\\]")))
    return {};
  std::vector<std::string> out;
  const std::string list = m[1];
  std::regex item("\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), item);
       it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

std::string ProgramId::name() const {
  return model + "." + recipe + (normMethod.empty() ? "" : "." + normMethod) +
         ".r" + std::to_string(ranks) +
         (recompute.empty() ? "" : ".rc" + recompute) +
         (rematerialize ? "" : ".keep") +
         (reshard.empty() ? "" : ".reshard-" + reshard) +
         (sumInUpdate ? "" : ".sumoff") + (overwriteGradients ? "" : ".owoff") +
         (lastBatchSizes.empty() ? "" : ".sizes-" + lastBatchSizes) +
         (computeCopy.empty() ? "" : ".copy-" + computeCopy) +
         (perSampleRows.empty() ? "" : ".rows-" + perSampleRows);
}

bool ProgramId::isLanguageModel() const {
  return model.rfind("tinylm", 0) == 0;
}

bool ProgramId::isF64() const {
  return model.size() >= 3 && model.compare(model.size() - 3, 3, "f64") == 0;
}

std::string programPath(const ProgramId &id) {
  const std::string path = std::string(DPC_PROGRAM_DIR) + "/" + id.name();
  // ctest compiles every binary afresh (the dpc-programs fixture); a test run
  // by hand recompiles one older than its model file, dpc or a runtime
  // archive it links.
  std::error_code ec;
  const auto built = fs::last_write_time(path, ec);
  bool fresh = !ec && fs::exists(path + ".cpp") &&
               built >= fs::last_write_time(modelFile(id)) &&
               built >= fs::last_write_time(DPC_COMPILER);
  std::istringstream linked(dpctest::readFile(DPC_RUNTIME_LINK_ITEMS));
  for (std::string item; fresh && linked >> item;)
    if (item.size() > 2 && item.compare(item.size() - 2, 2, ".a") == 0)
      fresh = built >= fs::last_write_time(item);
  if (fresh)
    return path;
  // Compiled under a private name and renamed, so that tests running at the
  // same time never see half a binary.
  fs::create_directories(DPC_PROGRAM_DIR);
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::vector<std::string> args = {
      modelFile(id), "--recipe", id.recipe, "--ranks", std::to_string(id.ranks),
      "--keep-cpp",  "-o",       tmp};
  if (!id.recompute.empty())
    args.insert(args.end(), {"--recompute", id.recompute});
  if (!id.normMethod.empty())
    args.push_back("--norm-method=*=" + id.normMethod);
  // Every program rematerializes what it can (dpc's auto keeps the clones
  // only where they lower the arena); RematerializeBits compares with off.
  args.push_back(id.rematerialize ? "--rematerialize=on"
                                  : "--rematerialize=off");
  if (!id.reshard.empty())
    args.push_back("--reshard-after-forward=" + id.reshard);
  if (!id.sumInUpdate)
    args.push_back("--sum-in-update=off");
  if (!id.overwriteGradients)
    args.push_back("--overwrite-gradients=off");
  if (!id.lastBatchSizes.empty())
    args.push_back("--last-batch-sizes=" + id.lastBatchSizes);
  if (!id.computeCopy.empty())
    args.push_back("--compute-copy=" + id.computeCopy);
  if (!id.perSampleRows.empty())
    args.push_back("--per-sample-rows=" + id.perSampleRows);
  dpctest::RunResult r = dpctest::runProgram(DPC_COMPILER, args);
  if (r.status != 0)
    fail("dpc failed for " + id.name() + ":\n" + r.err);
  fs::rename(tmp + ".cpp", path + ".cpp");
  fs::rename(tmp, path);
  return path;
}

std::vector<ParamLayout> programLayout(const ProgramId &id) {
  const std::string cpp = dpctest::readFile(programPath(id) + ".cpp");
  // describe_param(spec, "name", unit, offsetInUnit, globalIndex, trainable,
  //                dim0, dim1, dim2, dim3, "hf name", ...)
  std::regex re("describe_param\\(\\w+, \"([^\"]+)\", (\\d+), (\\d+), (\\d+), "
                "(true|false), (\\d+), (\\d+), (\\d+), (\\d+), ");
  std::vector<ParamLayout> layout;
  for (auto it = std::sregex_iterator(cpp.begin(), cpp.end(), re);
       it != std::sregex_iterator(); ++it) {
    const std::smatch &m = *it;
    ParamLayout p;
    p.name = m[1];
    p.globalIndex = std::stoll(m[4]);
    p.trainable = m[5] == "true";
    p.numel = 1;
    for (int d = 6; d <= 9; ++d)
      if (std::stoll(m[d]) > 0)
        p.numel *= std::stoll(m[d]);
    layout.push_back(p);
  }
  if (layout.empty())
    fail("no describe_param in " + programPath(id) + ".cpp");
  return layout;
}

double programNormRelErr(const ProgramId &id) {
  const std::string cpp = dpctest::readFile(programPath(id) + ".cpp");
  if (!readRecipe(id).step.clipping) {
    // DP off: no clip factor, so no slack either.
    if (cpp.find("clip_factors(") != std::string::npos)
      fail(id.name() + ": a program without clipping calls clip_factors");
    return 0;
  }
  std::regex re("clip_factors\\([^;]*, ([-+0-9.eE]+)\\);");
  double relErr = -1;
  for (auto it = std::sregex_iterator(cpp.begin(), cpp.end(), re);
       it != std::sregex_iterator(); ++it) {
    const double v = std::stod((*it)[1]);
    if (relErr >= 0 && v != relErr)
      fail(id.name() + ": clip_factors calls with different slacks");
    relErr = v;
  }
  if (relErr < 0)
    fail("no clip_factors call in " + programPath(id) + ".cpp");
  return relErr;
}

RecipeValues readRecipe(const ProgramId &id) {
  const std::string text = recipeText(id);
  RecipeValues v;
  std::smatch m;
  if (!std::regex_search(
          text, m, std::regex("#dp\\.clip<(flat|per_layer|automatic|none)")))
    fail("recipe @" + id.recipe + " has no clip mode");
  v.step.clip = m[1] == "flat"        ? dprt::ClipMode::Flat
                : m[1] == "per_layer" ? dprt::ClipMode::PerLayer
                : m[1] == "none"      ? dprt::ClipMode::None
                                      : dprt::ClipMode::Automatic;
  // DP off: the reference takes the plain (masked) sum.
  v.step.clipping = v.step.clip != dprt::ClipMode::None;
  v.step.maxNorm = v.step.clipping ? numberAfter(text, "max_norm") : 0.0;
  if (v.step.clip == dprt::ClipMode::Automatic)
    v.step.gamma = numberAfter(text, "gamma");
  v.expectedBatch = static_cast<int64_t>(numberAfter(text, "expected_batch"));
  v.physicalBatch = static_cast<int64_t>(numberAfter(text, "physical_batch"));
  if (!std::regex_search(text, m,
                         std::regex("optimizer = #dp\\.(sgd|momentum|adamw)<"
                                    "([^>]*)>")))
    fail("recipe @" + id.recipe + " has no optimizer");
  const std::string kind = m[1], args = m[2];
  v.step.lr = numberAfter(args, "lr");
  v.step.weightDecay = numberAfter(args, "weight_decay");
  if (kind == "sgd") {
    v.step.optimizer = dprt::OptimizerKind::SGD;
  } else if (kind == "momentum") {
    v.step.optimizer = dprt::OptimizerKind::Momentum;
    v.step.momentum = numberAfter(args, "momentum");
    v.step.nesterov = args.find("nesterov = true") != std::string::npos;
  } else {
    v.step.optimizer = dprt::OptimizerKind::AdamW;
    v.step.beta1 = numberAfter(args, "beta1");
    v.step.beta2 = numberAfter(args, "beta2");
    v.step.eps = numberAfter(args, "eps");
  }
  return v;
}

std::string runProgram(const ProgramId &id,
                       const std::vector<std::string> &args) {
  std::vector<std::string> all = args;
  all.push_back("--quiet");
  dpctest::RunResult r = dpctest::runProgram(programPath(id), all);
  std::string command = id.name();
  for (const std::string &a : all)
    command += " " + a;
  if (r.status != 0)
    fail(command + " exited with " + std::to_string(r.status) + ":\n" + r.err +
         r.out);
  return r.err + r.out;
}

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

Records makeText(std::mt19937_64 &rng, int64_t count, int64_t maxBytes) {
  Records r;
  r.text = true;
  std::uniform_int_distribution<int64_t> length(1, maxBytes);
  std::uniform_int_distribution<int> byte(' ', '~');
  for (int64_t i = 0; i < count; ++i) {
    std::string line(length(rng), ' ');
    for (char &c : line)
      c = static_cast<char>(byte(rng));
    r.lines.push_back(line);
  }
  return r;
}

Records makeClassification(std::mt19937_64 &rng, int64_t count,
                           int64_t features, int64_t classes, bool f32) {
  Records r;
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int32_t> label(0, int32_t(classes) - 1);
  for (int64_t i = 0; i < count; ++i) {
    Vec x(features);
    for (double &v : x) {
      v = normal(rng);
      if (f32)
        v = static_cast<float>(v);
    }
    r.features.push_back(x);
    r.labels.push_back(label(rng));
  }
  return r;
}

void writeRecords(const Records &records, const std::string &path) {
  std::ostringstream os;
  if (records.text) {
    for (const std::string &line : records.lines)
      os << line << "\n";
  } else {
    char buf[64];
    for (int64_t i = 0; i < records.size(); ++i) {
      for (double v : records.features[i]) {
        // 17 significant digits give back every double (and so every f32
        // value) exactly.
        std::snprintf(buf, sizeof buf, "%.17g,", v);
        os << buf;
      }
      os << records.labels[i] << "\n";
    }
  }
  dpctest::writeFile(path, os.str());
}

ref::Batch referenceBatch(const Records &records,
                          const std::vector<int64_t> &indices, int64_t tokens) {
  ref::Batch b;
  b.size = static_cast<int64_t>(indices.size());
  if (records.text) {
    ref::Tokens &tok = b.tokens["tok"], &tgt = b.tokens["tgt"];
    for (int64_t index : indices) {
      std::vector<int32_t> ids;
      if (index >= 0) {
        ids.push_back('\n');
        for (unsigned char c : records.lines[index])
          ids.push_back(c);
        ids.push_back('\n');
      }
      const int64_t n = ids.empty() ? 0 : int64_t(ids.size()) - 1;
      if (n > tokens)
        fail("a record is longer than the model's positions");
      for (int64_t t = 0; t < tokens; ++t) {
        tok.push_back(t < n ? ids[t] : 0);
        tgt.push_back(t < n ? ids[t + 1] : -1);
      }
    }
    return b;
  }
  const int64_t features = int64_t(records.features.at(0).size());
  Vec &x = b.reals["x"];
  ref::Tokens &label = b.tokens["label"];
  for (int64_t index : indices) {
    for (int64_t j = 0; j < features; ++j)
      x.push_back(index >= 0 ? records.features[index][j] : 0.0);
    label.push_back(index >= 0 ? records.labels[index] : 0);
  }
  return b;
}

namespace {

/// The run's noise key as the driver derives it from --seed: the ChaCha20
/// key of NoiseKey::fromSeed packed into StepState::noiseKey, read back by
/// keys.h (Philox uses its first 64 bits). The sampler uses the same key.
dprt::NoiseKey runNoiseKey(uint64_t seed) {
  const dprt::NoiseKey derived = dprt::NoiseKey::fromSeed(seed);
  dprt::StepState state{};
  for (int i = 0; i < 4; ++i)
    state.noiseKey[i] = uint64_t(derived.chachaKey[2 * i]) |
                        (uint64_t(derived.chachaKey[2 * i + 1]) << 32);
  return dprt::noiseKeyOf(state);
}

} // namespace

std::vector<int64_t> logicalBatch(uint64_t seed, int64_t records,
                                  int64_t expectedBatch, int64_t step) {
  const double q = static_cast<double>(expectedBatch) / records;
  return dprt::privacy::PoissonSampler(runNoiseKey(seed), records, q,
                                       dprt::NoiseGenerator::Philox)
      .sample(step);
}

double gradientNoise(uint64_t seed, int64_t step, int64_t index, bool f64) {
  const dprt::NoiseKey key = runNoiseKey(seed);
  if (f64)
    return dprt::gaussianF64(dprt::NoiseGenerator::Philox, key, uint64_t(step),
                             uint64_t(index), dprt::kGradientNoiseStream);
  return dprt::gradientNoiseF32(dprt::NoiseGenerator::Philox, key,
                                uint64_t(step), uint64_t(index));
}

//===----------------------------------------------------------------------===//
// Reference models
//===----------------------------------------------------------------------===//

namespace {

// The shapes of models/*.mlir.
constexpr int64_t kMlpFeatures = 6, kMlpHidden = 16, kMlpHidden2 = 12,
                  kMlpClasses = 4;

/// tinylm-*.mlir; tinylm-hf-*.mlir adds Hugging Face's variations: learned
/// positions (20 rows), the head tied to the embedding, Llama 3's rotary
/// scaling over an original context of 64 (at head size 8 and theta 1e4 it
/// keeps frequency 0, blends 1 and divides 2 and 3).
ref::TinyLmShape tinyLmShape(const ProgramId &id) {
  ref::TinyLmShape s;
  if (id.model.rfind("tinylm-hf", 0) == 0) {
    s.positions = 20;
    s.tied = true;
    s.llama3 = ref::Llama3RopeScaling{8.0, 1.0, 4.0, 64};
  }
  s.vocab = 256;
  s.tokens = 16;
  s.width = 32;
  s.blocks = 2;
  s.heads = 4;
  s.kvHeads = 2;
  s.ffn = 64;
  s.eps = 1e-5;
  s.theta = 10000.0;
  return s;
}

/// models/mlp-*.mlir: fc1 -> layer_norm -> gelu (erf in f64, tanh in f32)
/// -> fc2 -> relu -> fc3 -> cross-entropy, every linear with a bias.
ref::Model mlp(dprt::Activation gelu) {
  ref::Model m(1);
  m.realInput("x", kMlpFeatures);
  m.tokenInput("label");
  m.linear("fc1.w", "fc1.b", "x", "h", kMlpFeatures, kMlpHidden);
  m.layerNorm("ln.g", "ln.b", "h", "n", kMlpHidden, 1e-5);
  m.activation(gelu, "n", "a");
  m.linear("fc2.w", "fc2.b", "a", "h2", kMlpHidden, kMlpHidden2);
  m.activation(dprt::Activation::Relu, "h2", "a2");
  m.linear("fc3.w", "fc3.b", "a2", "logits", kMlpHidden2, kMlpClasses);
  m.crossEntropy("logits", "label", kMlpClasses);
  return m;
}

} // namespace

Records makeRecords(const ProgramId &id, uint64_t seed, int64_t count) {
  std::mt19937_64 rng(seed);
  if (id.isLanguageModel())
    return makeText(rng, count, modelTokens(id) - 1);
  return makeClassification(rng, count, kMlpFeatures, kMlpClasses,
                            /*f32=*/!id.isF64());
}

int64_t modelTokens(const ProgramId &id) {
  return id.isLanguageModel() ? tinyLmShape(id).tokens : 1;
}

TrainedParams readTrainedParams(const ProgramId &id) {
  const std::string text = recipeText(id);
  TrainedParams t;
  t.freeze = stringsAfter(text, "freeze");
  if (text.find("lora = #dp.lora<") != std::string::npos) {
    t.loraRank = static_cast<int64_t>(numberAfter(text, "rank"));
    t.loraScaling = numberAfter(text, "alpha") / double(t.loraRank);
    t.loraTargets = stringsAfter(text, "targets");
  }
  return t;
}

ref::Model referenceModel(const ProgramId &id, const Tensors &params) {
  const TrainedParams trained = readTrainedParams(id);
  ref::TinyLmShape shape = tinyLmShape(id);
  shape.loraTargets = trained.loraTargets;
  shape.loraRank = trained.loraRank;
  shape.loraScaling = trained.loraScaling;
  ref::Model m = id.isLanguageModel()
                     ? ref::tinyLm(shape)
                     : mlp(id.isF64() ? dprt::Activation::GeluErf
                                      : dprt::Activation::GeluTanh);
  // What dp-freeze does: with LoRA only the adapters train; a freeze
  // pattern (a name, or a prefix ending in '*') freezes what it matches.
  for (const std::string &name : m.paramNames()) {
    const bool adapter =
        name.size() > 7 && (name.compare(name.size() - 7, 7, ".lora_A") == 0 ||
                            name.compare(name.size() - 7, 7, ".lora_B") == 0);
    bool frozen = !trained.loraTargets.empty() && !adapter;
    for (const std::string &pattern : trained.freeze)
      frozen = frozen || (pattern.back() == '*'
                              ? name.compare(0, pattern.size() - 1, pattern, 0,
                                             pattern.size() - 1) == 0
                              : name == pattern);
    if (frozen)
      m.setTrainable(name, false);
  }
  // The program's frozen scaling alpha / r between A and B is no parameter
  // of the reference, whose loraLinear scales by it: it must be s I.
  Tensors checked = params;
  for (auto it = checked.begin(); it != checked.end();) {
    const std::string &name = it->first;
    if (name.size() < 11 ||
        name.compare(name.size() - 11, 11, ".lora_scale") != 0) {
      ++it;
      continue;
    }
    const int64_t r = trained.loraRank;
    for (int64_t i = 0; i < r * r; ++i)
      if (it->second.size() != size_t(r * r) ||
          it->second[i] != (i % (r + 1) == 0 ? trained.loraScaling : 0.0))
        fail(id.name() + ": " + name + " is not " +
             std::to_string(trained.loraScaling) + " I");
    it = checked.erase(it);
  }
  return fillReferenceModel(id, std::move(m), checked);
}

ref::Model fillReferenceModel(const ProgramId &id, ref::Model m,
                              const Tensors &params) {
  if (params.size() != m.paramNames().size())
    fail(id.name() + ": the checkpoint has " + std::to_string(params.size()) +
         " tensors, the reference model " +
         std::to_string(m.paramNames().size()));
  for (const std::string &name : m.paramNames()) {
    auto it = params.find(name);
    if (it == params.end())
      fail(id.name() + ": the checkpoint has no tensor '" + name + "'");
    if (it->second.size() != m.param(name).size())
      fail(id.name() + ": tensor '" + name + "' has " +
           std::to_string(it->second.size()) + " elements, the reference " +
           std::to_string(m.param(name).size()));
    m.param(name) = it->second;
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Errors and seeds
//===----------------------------------------------------------------------===//

double relativeError(const Vec &a, const Vec &b) {
  if (a.size() != b.size())
    return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

double relativeErrorBeyond(const Vec &a, const Vec &b, double slack) {
  if (a.size() != b.size())
    return INFINITY;
  const double excess = std::max(0.0, norm(difference(a, b)) - slack);
  const double scale = norm(b);
  return scale > 0 ? excess / scale : excess;
}

double norm(const Vec &a) {
  double s = 0;
  for (double v : a)
    s += v * v;
  return std::sqrt(s);
}

double unitRoundoff(const ProgramId &id) {
  return id.isF64() ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
}

Vec difference(const Vec &a, const Vec &b) {
  Vec d(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    d[i] = a[i] - b[i];
  return d;
}

std::string caseName(const std::string &model, const std::string &recipe) {
  std::string name;
  bool upper = true;
  for (char c : model + "_" + recipe) {
    if (c == '-' || c == '_') {
      upper = true;
      continue;
    }
    name += upper ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

uint64_t testSeed(uint64_t salt) {
  uint64_t seed;
  if (const char *env = std::getenv("DPC_TEST_SEED"))
    seed = std::strtoull(env, nullptr, 10) + salt;
  else
    seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[seed] %s: %llu (DPC_TEST_SEED=%llu reproduces it)\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->name(),
              static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed - salt));
  return seed;
}

} // namespace dpc::programs
