//===- DataTest.cpp - Data files, JSON, safetensors, checkpoint state -----===//

#include "Checkpoint.h"
#include "Checksum.h"
#include "Dataset.h"
#include "Json.h"
#include "ProcessHelpers.h"
#include "Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace dprt;
using namespace dprt::driver;
using dpctest::readFile;
using dpctest::TempDir;
using dpctest::writeFile;

namespace {

DataLayout languageModel(int64_t tokens) {
  DataLayout layout;
  layout.languageModel = true;
  layout.tokens = tokens;
  layout.vocab = 256;
  return layout;
}

std::vector<int32_t> row(const Dataset &data, InputRole role, int64_t record,
                         int64_t tokens) {
  InputSpec input{"x", role, 0, {tokens}};
  std::vector<int32_t> out(tokens);
  data.writeRow(input, record, out.data());
  return out;
}

std::string loadError(const std::string &path, const DataLayout &layout) {
  try {
    Dataset::load(path, layout);
  } catch (const UsageError &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(Dataset, TextRecordsAreBytesBetweenNewlines) {
  TempDir dir;
  writeFile(dir / "c.txt", "ab\r\n\n\xff\n");
  Dataset data = Dataset::load(dir / "c.txt", languageModel(4));
  ASSERT_EQ(data.size(), 2); // the blank line is skipped
  EXPECT_EQ(row(data, InputRole::Tokens, 0, 4),
            (std::vector<int32_t>{'\n', 'a', 'b', 0}));
  EXPECT_EQ(row(data, InputRole::NextTokens, 0, 4),
            (std::vector<int32_t>{'a', 'b', '\n', -1}));
  EXPECT_EQ(row(data, InputRole::Tokens, 1, 4),
            (std::vector<int32_t>{'\n', 255, 0, 0}));
  EXPECT_EQ(row(data, InputRole::NextTokens, 1, 4),
            (std::vector<int32_t>{255, '\n', -1, -1}));
  EXPECT_EQ(row(data, InputRole::Tokens, -1, 4),
            (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(row(data, InputRole::NextTokens, -1, 4),
            (std::vector<int32_t>{-1, -1, -1, -1}));
  EXPECT_EQ(data.tokensOf(0), 3);
  EXPECT_EQ(data.describe(), "2 lines of text");
}

TEST(Dataset, TokenFilesShiftTheIdsByOne) {
  TempDir dir;
  writeFile(dir / "c.tok", "5 6 7\n  \n1 2 3 4 9\n");
  Dataset data = Dataset::load(dir / "c.tok", languageModel(4));
  ASSERT_EQ(data.size(), 2);
  EXPECT_EQ(row(data, InputRole::Tokens, 0, 4),
            (std::vector<int32_t>{5, 6, 0, 0}));
  EXPECT_EQ(row(data, InputRole::NextTokens, 0, 4),
            (std::vector<int32_t>{6, 7, -1, -1}));
  EXPECT_EQ(row(data, InputRole::Tokens, 1, 4),
            (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(row(data, InputRole::NextTokens, 1, 4),
            (std::vector<int32_t>{2, 3, 4, 9}));
  writeFile(dir / "long.tok", "1 2 3 4 5 6\n");
  EXPECT_NE(loadError(dir / "long.tok", languageModel(4))
                .find("long.tok:1: the record has 6 token ids but this model "
                      "reads at most 5"),
            std::string::npos);
}

TEST(Dataset, CsvWithHeaderFeaturesAndLabel) {
  TempDir dir;
  writeFile(dir / "d.csv", "x, y ,label\n0.5, -2 ,1\n\n3,4e1,0\n");
  DataLayout layout;
  layout.features = 2;
  layout.label = true;
  layout.classes = 2;
  layout.compute = DType::F64;
  Dataset data = Dataset::load(dir / "d.csv", layout);
  ASSERT_EQ(data.size(), 2);
  InputSpec features{"f", InputRole::Features, 0, {2}};
  InputSpec label{"l", InputRole::Label, 0, {}};
  double f[2];
  int32_t l;
  data.writeRow(features, 1, f);
  data.writeRow(label, 1, &l);
  EXPECT_EQ(f[0], 3.0);
  EXPECT_EQ(f[1], 40.0);
  EXPECT_EQ(l, 0);
  data.writeRow(features, 0, f);
  data.writeRow(label, 0, &l);
  EXPECT_EQ(f[1], -2.0);
  EXPECT_EQ(l, 1);
  data.writeRow(features, -1, f);
  data.writeRow(label, -1, &l);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(l, 0);
}

TEST(Dataset, CsvRegressionTargetsInBf16) {
  TempDir dir;
  writeFile(dir / "r.csv", "1,2,3.5,-1\n");
  DataLayout layout;
  layout.features = 2;
  layout.targets = 2;
  layout.compute = DType::BF16;
  Dataset data = Dataset::load(dir / "r.csv", layout);
  InputSpec target{"t", InputRole::Target, 0, {2}};
  uint16_t t[2];
  data.writeRow(target, 0, t);
  EXPECT_EQ(loadAs(DType::BF16, &t[0]), 3.5);
  EXPECT_EQ(loadAs(DType::BF16, &t[1]), -1.0);
  writeFile(dir / "short.csv", "1,2,3\n");
  EXPECT_NE(loadError(dir / "short.csv", layout)
                .find("short.csv:1: 3 fields, expected 4 (CSV rows of 2 "
                      "features, then 2 targets)"),
            std::string::npos);
}

// A value finite in double but not in the compute type would enter the
// model as infinity: a data error naming the file and line, as nan and inf.
TEST(Dataset, ValuesOutsideTheComputeTypeAreDataErrors) {
  TempDir dir;
  DataLayout layout;
  layout.features = 2;
  layout.targets = 1;
  layout.compute = DType::F32;
  writeFile(dir / "big.csv", "1,2,3\n1,1e39,3\n");
  EXPECT_NE(loadError(dir / "big.csv", layout)
                .find("big.csv:2: field 2 '1e39' overflows the model's "
                      "compute type f32"),
            std::string::npos)
      << loadError(dir / "big.csv", layout);
  writeFile(dir / "ok64.csv", "1,1e39,3\n");
  layout.compute = DType::F64;
  EXPECT_EQ(loadError(dir / "ok64.csv", layout), "");
  // bf16's largest finite value is 3.3895e38; from the midpoint to the
  // next power, 3.3962e38, values round to infinity.
  layout.compute = DType::BF16;
  writeFile(dir / "bf16.csv", "1,3.3960e38,3\n1,3.3970e38,3\n");
  EXPECT_NE(loadError(dir / "bf16.csv", layout)
                .find("bf16.csv:2: field 2 '3.3970e38' overflows the model's "
                      "compute type bf16"),
            std::string::npos)
      << loadError(dir / "bf16.csv", layout);
  layout.compute = DType::F32;
  for (const char *bad : {"nan", "inf", "-inf", "1e400"}) {
    writeFile(dir / "bad.csv", std::string("1,2,3\n4,") + bad + ",6\n");
    EXPECT_NE(loadError(dir / "bad.csv", layout)
                  .find(std::string("bad.csv:2: field 2 '") + bad +
                        "' is not a finite number"),
              std::string::npos)
        << bad << ": " << loadError(dir / "bad.csv", layout);
  }
  // A first line of non-finite numbers is data, not a header.
  writeFile(dir / "first.csv", "nan,nan,nan\n1,2,3\n");
  EXPECT_NE(loadError(dir / "first.csv", layout)
                .find("first.csv:1: field 1 'nan' is not a finite number"),
            std::string::npos)
      << loadError(dir / "first.csv", layout);
}

// Token ids and labels are int32 in the inputs: without a vocabulary or a
// class count they are still bounded before the conversion.
TEST(Dataset, IdsAndLabelsFitInt32WithoutAVocabulary) {
  TempDir dir;
  DataLayout lm = languageModel(8);
  lm.vocab = 0;
  writeFile(dir / "big.tok", "1 2\n3 4294967297\n");
  EXPECT_NE(loadError(dir / "big.tok", lm)
                .find("big.tok:2: token id 4294967297 is outside the "
                      "vocabulary [0, 2147483648)"),
            std::string::npos)
      << loadError(dir / "big.tok", lm);
  DataLayout csv;
  csv.features = 1;
  csv.label = true;
  csv.classes = 0;
  writeFile(dir / "label.csv", "1,0\n2,4294967297\n");
  EXPECT_NE(loadError(dir / "label.csv", csv)
                .find("label.csv:2: the label 4294967297 is not a class of "
                      "this model [0, 2147483648)"),
            std::string::npos)
      << loadError(dir / "label.csv", csv);
}

TEST(Dataset, Bf16RoundsToNearestEven) {
  uint16_t h;
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  storeAs(DType::BF16, 1.0 + std::ldexp(1.0, -8), &h);
  EXPECT_EQ(h, 0x3f80);
  storeAs(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -8), &h);
  EXPECT_EQ(h, 0x3f82);
}

TEST(Dataset, FingerprintFollowsTheContent) {
  TempDir dir;
  writeFile(dir / "a.txt", "hello\nworld\n");
  writeFile(dir / "b.txt", "hello\nworle\n");
  writeFile(dir / "c.txt", "hello\r\n\nworld");
  auto fp = [&](const std::string &name) {
    return Dataset::load(dir / name, languageModel(8)).fingerprint();
  };
  EXPECT_NE(fp("a.txt"), fp("b.txt"));
  EXPECT_EQ(fp("a.txt"), fp("c.txt"));
}

TEST(Dataset, LayoutNeedsASupportedCombinationOfRoles) {
  ProgramSpec spec;
  describe_program(&spec, "m", "cpu", 1, 1 << 16, 0, DType::F32, 2, 4, -1, -1,
                   -1, 0, 0);
  describe_input(&spec, "t", InputRole::Tokens, 256, 4, 0, 0);
  describe_input(&spec, "l", InputRole::Label, 512, 0, 0, 0);
  try {
    DataLayout::of(spec);
    FAIL() << "tokens + label accepted";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find("inputs (tokens, label)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Json, ParsesWhatTheProgramWrites) {
  JsonValue v = JsonValue::parse(
      R"({"a": [1, -2.5e3, true, null], "s": "x\"\u00e9\n", "o": {}})");
  EXPECT_EQ(v.at("a").array()[1].number(), -2500);
  EXPECT_TRUE(v.at("a").array()[2].boolean());
  EXPECT_TRUE(v.at("a").array()[3].isNull());
  EXPECT_EQ(v.at("s").string(), "x\"\xc3\xa9\n");
  EXPECT_TRUE(v.at("o").object().empty());
  EXPECT_EQ(v.find("missing"), nullptr);
  EXPECT_THROW(v.at("missing"), JsonError);
  EXPECT_THROW(v.at("s").number(), JsonError);
  for (const char *bad :
       {"", "{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "[1] 2", "{\"a\":1,}"})
    EXPECT_THROW(JsonValue::parse(bad), JsonError) << bad;
}

TEST(Safetensors, RoundTripsAndFollowsTheFormat) {
  TempDir dir;
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<double> b = {-0.0, 1e-300};
  {
    SafetensorsWriter w(
        dir / "t.safetensors",
        {{"layer.a", DType::F32, {2, 3}}, {"b", DType::F64, {2}}},
        {{"step", "7"}});
    w.write(a.data());
    w.write(b.data());
    w.close();
  }
  std::string bytes = readFile(dir / "t.safetensors");
  uint64_t headerSize = 0;
  std::memcpy(&headerSize, bytes.data(), 8);
  EXPECT_EQ((8 + headerSize) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + headerSize + 6 * 4 + 2 * 8);
  JsonValue header = JsonValue::parse(bytes.substr(8, headerSize));
  EXPECT_EQ(header.at("layer.a").at("dtype").string(), "F32");
  EXPECT_EQ(header.at("b").at("data_offsets").array()[0].integer(), 24);
  EXPECT_EQ(header.at("__metadata__").at("step").string(), "7");

  SafetensorsReader r(dir / "t.safetensors");
  ASSERT_EQ(r.tensors().size(), 2u);
  EXPECT_EQ(r.metadata().at("step"), "7");
  std::vector<float> a2(6);
  std::vector<double> b2(2);
  r.read(*r.find("layer.a"), a2.data());
  r.read(*r.find("b"), b2.data());
  EXPECT_EQ(a2, a);
  EXPECT_TRUE(std::signbit(b2[0]));
  EXPECT_EQ(b2[1], 1e-300);

  writeFile(dir / "bad.safetensors", std::string("\xff\xff\xff\xff\xff\xff"
                                                 "\xff\x7f",
                                                 8));
  EXPECT_THROW(SafetensorsReader(dir / "bad.safetensors"), std::runtime_error);
}

TEST(CheckpointState, RoundTripsThroughJson) {
  CheckpointState s;
  s.model = "m";
  s.backend = "cpu";
  s.compute = "f32";
  s.ranks = 2;
  s.step = 12;
  s.totalSteps = 40;
  s.seed = 0xfedcba9876543210ull;
  s.initKey = 3;
  s.noiseKey[3] = ~0ull;
  s.generator = "chacha20";
  s.sampler = "poisson";
  s.nextSamplerStep = 13;
  s.q = 0.1 / 3;
  s.datasetRecords = 300;
  s.datasetFingerprint = 0x8000000000000001ull;
  s.sigma = 1.2345678901234567;
  s.maxNorm = 1;
  s.delta = 1e-5;
  s.targetEpsilon = 3;
  s.epsilon = 1.5;
  s.segments = {{0.1 / 3, 1.2345678901234567, 12}};
  s.optimizer = "adamw";
  s.lr = 1e-3;
  s.beta1 = 0.9;
  s.beta2 = 0.999;
  s.eps = 1e-8;
  CheckpointState t = checkpointStateFromJson(toJson(s), "state.json");
  EXPECT_EQ(toJson(t), toJson(s));
  EXPECT_EQ(t.seed, s.seed);
  EXPECT_EQ(t.noiseKey[3], ~0ull);
  EXPECT_EQ(t.q, s.q);
  EXPECT_EQ(t.sigma, s.sigma);
  EXPECT_EQ(t.segments[0].steps, 12);
  EXPECT_THROW(checkpointStateFromJson("{}", "x"), UsageError);
}

// Every integer of state.json is range-checked before it fills its field:
// ranks (int32), steps (the 56-bit counter), and the accountant's history,
// which a resume replays step by step, bounded by the step.
TEST(CheckpointState, IntegersOutOfRangeAreErrorsNamingTheKey) {
  CheckpointState s;
  s.model = "m";
  s.backend = "cpu";
  s.compute = "f32";
  s.step = 12;
  s.totalSteps = 40;
  s.generator = "philox";
  s.sampler = "poisson";
  s.nextSamplerStep = 13;
  s.q = 0.1;
  s.sigma = 1;
  s.maxNorm = 1;
  s.delta = 1e-5;
  s.segments = {{0.1, 1, 12}};
  s.optimizer = "sgd";
  const std::string good = toJson(s);
  EXPECT_NO_THROW(checkpointStateFromJson(good, "state.json"));
  auto error = [&](const std::string &from, const std::string &to) {
    std::string text = good;
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    try {
      checkpointStateFromJson(text, "ck/state.json");
    } catch (const UsageError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("\"ranks\": 1", "\"ranks\": 4294967297")
                .find("'ck/state.json' is not valid: \"ranks\" must be in "
                      "[1, 2147483647], got 4294967297"),
            std::string::npos);
  EXPECT_NE(error("\"step\": 12", "\"step\": -1")
                .find("\"step\" must be in [0, 72057594037927935], got -1"),
            std::string::npos);
  EXPECT_NE(error("\"total_steps\": 40", "\"total_steps\": -3")
                .find("\"total_steps\" must be in [0, 72057594037927935], "
                      "got -3"),
            std::string::npos);
  EXPECT_NE(error("\"dataset_records\": 0", "\"dataset_records\": -5")
                .find("\"dataset_records\" must be in [0, "),
            std::string::npos);
  EXPECT_NE(error("\"steps\": 12}", "\"steps\": 1000000000000}")
                .find("\"steps\" must be in [0, 12], got 1000000000000"),
            std::string::npos);
  EXPECT_NE(error("\"q\": 0.10000000000000001,", "\"q\": 2,")
                .find("\"q\" must be in [0, 1], got 2"),
            std::string::npos)
      << good;
  EXPECT_NE(error("\"total_steps\": 40", "\"total_steps\": 5")
                .find("inconsistent step counters"),
            std::string::npos);
}

// XXH3-64 with seed 0, as xxHash 0.8 defines it (the empty input's value
// is the one xxHash's own tests list); streamed in pieces it is the same.
TEST(Checksum, IsXxh3With64BitsKnownAnswers) {
  EXPECT_EQ(Checksum().value(), 0x2d06800538d394c2ull);
  Checksum abc;
  abc.update("abc", 3);
  EXPECT_EQ(abc.value(), 0x78af5f94892f3950ull);
  EXPECT_EQ(checksumText(abc.value()), "0x78af5f94892f3950");
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += static_cast<char>('a' + i % 23);
  Checksum whole, pieces;
  whole.update(text.data(), text.size());
  for (size_t at = 0; at < text.size(); at += 977)
    pieces.update(text.data() + at, std::min<size_t>(977, text.size() - at));
  EXPECT_EQ(whole.value(), pieces.value());
  EXPECT_EQ(pieces.bytes(), 5000);
  TempDir dir;
  writeFile(dir / "f", text);
  int64_t bytes = 0;
  EXPECT_EQ(checksumOfFile(dir / "f", bytes), whole.value());
  EXPECT_EQ(bytes, 5000);
}

TEST(CheckpointDirectory, PublishesAtomicallyAndNeverOverwrites) {
  TempDir dir;
  const std::string root = dir / "ck";
  for (int i = 0; i < 2; ++i) {
    CheckpointDirectory d(root);
    std::string temporary = d.begin(5);
    writeFileDurably(temporary + "/state.json", "{}" + std::to_string(i));
    d.commit();
  }
  EXPECT_EQ(readFile(root + "/latest"), "step-00000005.1\n");
  EXPECT_EQ(readFile(root + "/step-00000005/state.json"), "{}0");
  EXPECT_EQ(resolveCheckpoint(root), root + "/step-00000005.1");
  EXPECT_EQ(resolveCheckpoint(root + "/step-00000005"),
            root + "/step-00000005");
  // A save that never committed leaves a temporary directory, which the
  // next save removes; `latest` is untouched.
  {
    CheckpointDirectory d(root);
    d.begin(6);
  }
  EXPECT_EQ(resolveCheckpoint(root), root + "/step-00000005.1");
  CheckpointDirectory d(root);
  d.begin(7);
  int temporaries = 0;
  for (const auto &e : std::filesystem::directory_iterator(root))
    temporaries += e.path().filename().string().rfind(".tmp-", 0) == 0;
  EXPECT_EQ(temporaries, 1);
}

TEST(CheckpointDirectory, PruneKeepsTheNewestAndTheOneLatestNames) {
  TempDir dir;
  const std::string root = dir / "ck";
  for (const char *name : {"step-00000002", "step-00000004", "step-00000004.1",
                           "step-00000006", "step-00000010"}) {
    std::filesystem::create_directories(root + "/" + name);
    writeFile(root + "/" + name + "/state.json", "{}");
  }
  // Not checkpoints: left alone.
  std::filesystem::create_directories(root + "/notes");
  std::filesystem::create_directories(root + "/step-00000001");
  writeFile(root + "/lock", "");
  // `latest` names an older one (a run resumed from step 4 saved again).
  writeFile(root + "/latest", "step-00000004\n");
  std::vector<std::string> removed = pruneCheckpoints(root, 2);
  EXPECT_EQ(removed,
            (std::vector<std::string>{"step-00000002", "step-00000004.1"}));
  for (const char *kept : {"step-00000004", "step-00000006", "step-00000010",
                           "notes", "step-00000001", "lock"})
    EXPECT_TRUE(std::filesystem::exists(root + "/" + kept)) << kept;
  for (const auto &e : std::filesystem::directory_iterator(root))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u);
  // Keeping one never removes the newest.
  writeFile(root + "/latest", "step-00000010\n");
  EXPECT_EQ(pruneCheckpoints(root, 1),
            (std::vector<std::string>{"step-00000004", "step-00000006"}));
  EXPECT_TRUE(std::filesystem::exists(root + "/step-00000010/state.json"));
}
