//===- CheckpointTest.cpp - Sharded checkpoints and resharding ------------===//
//
// The fixture programs save sharded checkpoints (one file per rank and a
// manifest) and resume them at another number of ranks and with another
// unit layout; a version-1 checkpoint written by the program before
// sharding still resumes; every bad checkpoint is an error naming the file
// and the difference, with exit status 2. The CheckpointReader is also
// tested directly; the manifest's parser in CheckpointManifestTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "CheckpointReader.h"
#include "FixtureData.h"
#include "FixtureFiles.h"
#include "Json.h"
#include "Options.h"
#include "ProcessHelpers.h"
#include "Safetensors.h"
#include "ShardedCheckpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace dpctest;
using dprt::DType;
using dprt::driver::CheckpointReader;
using dprt::driver::JsonValue;
using dprt::driver::resolveCheckpoint;
using dprt::driver::SafetensorsReader;
using dprt::driver::UsageError;

namespace fs = std::filesystem;

namespace {

const std::string kCheckpointV1 = DPC_CHECKPOINT_V1;

/// Named tensors as doubles.
using Tensors = std::map<std::string, std::vector<double>>;

std::vector<double> readAsDoubles(SafetensorsReader &reader,
                                  const dprt::driver::TensorInfo &t) {
  std::vector<char> raw(t.end - t.begin);
  reader.read(t, raw.data());
  std::vector<double> values(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype == DType::F64) {
      std::memcpy(&values[i], raw.data() + 8 * i, 8);
    } else {
      float f;
      std::memcpy(&f, raw.data() + 4 * i, 4);
      values[i] = f;
    }
  }
  return values;
}

/// Every state of every unit of a sharded checkpoint, full: "<unit>.<state>"
/// assembled from the shard files by the manifest's ranges. Written from the
/// format's description, independently of ShardedCheckpoint.
Tensors readUnitStates(const std::string &dir) {
  const std::string path = resolveCheckpoint(dir);
  const JsonValue manifest =
      JsonValue::parse(readFile(path + "/manifest.json"));
  Tensors states;
  for (const JsonValue &unit : manifest.at("units").array())
    for (const JsonValue &state : manifest.at("states").array())
      states[unit.at("name").string() + "." + state.string()] =
          std::vector<double>(unit.at("numel").integer(), std::nan(""));
  for (const JsonValue &shard : manifest.at("shards").array()) {
    SafetensorsReader reader(path + "/" + shard.at("file").string());
    for (const auto &[unit, range] : shard.at("ranges").object())
      for (const JsonValue &state : manifest.at("states").array()) {
        const std::string name = unit + "." + state.string();
        const auto *t = reader.find(name);
        if (!t) {
          ADD_FAILURE() << shard.at("file").string() << " has no " << name;
          continue;
        }
        const std::vector<double> part = readAsDoubles(reader, *t);
        const int64_t begin = range.array()[0].integer();
        EXPECT_EQ(static_cast<int64_t>(part.size()),
                  range.array()[1].integer() - begin);
        std::copy(part.begin(), part.end(), states[name].begin() + begin);
      }
  }
  return states;
}

/// The same of a version-1 checkpoint of the classifier, whose units hold
/// one parameter each ("unit.w" = w, "unit.b" = b).
Tensors readClassifierV1(const std::string &dir) {
  const std::string path = resolveCheckpoint(dir);
  Tensors states;
  SafetensorsReader params(path + "/params.safetensors");
  for (const auto &t : params.tensors())
    states["unit." + t.name + ".master"] = readAsDoubles(params, t);
  SafetensorsReader optimizer(path + "/optimizer.safetensors");
  for (const auto &t : optimizer.tensors())
    states[t.name] = readAsDoubles(optimizer, t);
  return states;
}

/// Every parameter by name, through the CheckpointReader.
Tensors readParams(const std::string &dir) {
  CheckpointReader reader(dir);
  Tensors params;
  for (const auto &p : reader.parameters()) {
    std::vector<double> values(p.numel());
    reader.read(p.name, DType::F64, values.data());
    params[p.name] = values;
  }
  return params;
}

/// Every file of a checkpoint by name.
std::map<std::string, std::string> checkpointFiles(const std::string &dir) {
  std::map<std::string, std::string> files;
  for (const auto &e : fs::directory_iterator(resolveCheckpoint(dir)))
    files[e.path().filename().string()] = readFile(e.path().string());
  return files;
}

/// The largest |a - b| / max(|a|, |b|, 1e-3) over the parameters.
double maxRelativeDifference(const Tensors &a, const Tensors &b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (const auto &[name, x] : a) {
    auto it = b.find(name);
    if (it == b.end() || it->second.size() != x.size()) {
      ADD_FAILURE() << "parameter " << name << " differs in shape";
      return INFINITY;
    }
    for (size_t i = 0; i < x.size(); ++i) {
      const double scale =
          std::max({std::fabs(x[i]), std::fabs(it->second[i]), 1e-3});
      worst = std::max(worst, std::fabs(x[i] - it->second[i]) / scale);
    }
  }
  return worst;
}

const char *classifierOf(int ranks) {
  return ranks == 1 ? kClassifier1 : ranks == 2 ? kClassifier2 : kClassifier3;
}

class Checkpoints : public FixtureFiles {
protected:
  /// Runs a fixture on the classifier data with sigma 1 (or the bigram
  /// model on its text with the shared noise key); expects success.
  void train(const std::string &binary, std::vector<std::string> args) {
    const bool bigram = binary == kBigram1 || binary == kBigram2;
    std::vector<std::string> all = {"--data", bigram ? text_ : csv_};
    if (bigram)
      all.insert(all.end(), {"--noise-key", key_});
    else if (std::find(args.begin(), args.end(), "--resume") == args.end())
      all.insert(all.end(), {"--sigma", "1"});
    all.insert(all.end(), args.begin(), args.end());
    all.push_back("--quiet");
    RunResult r = runProgram(binary, all);
    ASSERT_EQ(r.status, 0) << binary << ": " << r.err;
    last_ = r;
  }

  /// Expects exit status 2 and `message` on stderr.
  void expectRefused(const std::string &binary,
                     const std::vector<std::string> &args,
                     const std::string &message) {
    std::vector<std::string> all = {"--data", csv_};
    all.insert(all.end(), args.begin(), args.end());
    RunResult r = runProgram(binary, all);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos)
        << "expected '" << message << "' in: " << r.err;
  }

  RunResult last_;
};

} // namespace

//===----------------------------------------------------------------------===//
// The format
//===----------------------------------------------------------------------===//

TEST_F(Checkpoints, EveryRankWritesItsOwnShardAndRankZeroTheManifest) {
  train(kClassifier3, {"--steps", "2", "--save", dir_ / "ck"});
  const std::string path = resolveCheckpoint(dir_ / "ck");
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(path))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "manifest.json", "rank-00000-of-00003.safetensors",
                       "rank-00001-of-00003.safetensors",
                       "rank-00002-of-00003.safetensors", "state.json"}));

  const JsonValue m = JsonValue::parse(readFile(path + "/manifest.json"));
  EXPECT_EQ(m.at("format_version").integer(), 2);
  EXPECT_EQ(m.at("grid").at("ranks").integer(), 3);
  EXPECT_EQ(m.at("dtype").string(), "F32");
  ASSERT_EQ(m.at("params").array().size(), 2u);
  EXPECT_EQ(m.at("params").array()[1].at("name").string(), "b");
  EXPECT_EQ(m.at("params").array()[1].at("unit").string(), "unit.b");
  const auto &shards = m.at("shards").array();
  ASSERT_EQ(shards.size(), 3u);
  // 12 weights in shards of 4, 3 biases in shards of 1.
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shards[r].at("rank").integer(), r);
    const auto &w = shards[r].at("ranges").at("unit.w").array();
    EXPECT_EQ(w[0].integer(), 4 * r);
    EXPECT_EQ(w[1].integer(), 4 * r + 4);
    SafetensorsReader file(path + "/" + shards[r].at("file").string());
    EXPECT_EQ(file.metadata().at("rank"), std::to_string(r));
    EXPECT_EQ(file.metadata().at("ranks"), "3");
    EXPECT_EQ(file.metadata().at("range:unit.b"),
              std::to_string(r) + ":" + std::to_string(r + 1));
    for (const char *name : {"unit.w.master", "unit.w.adam_m", "unit.w.adam_v"})
      ASSERT_NE(file.find(name), nullptr) << name;
    EXPECT_EQ(file.find("unit.w.adam_v")->shape, std::vector<int64_t>{4});
    EXPECT_EQ(file.find("unit.b.master")->shape, std::vector<int64_t>{1});
  }
  // The shards together are the parameters the reader gathers.
  const Tensors states = readUnitStates(dir_ / "ck");
  const Tensors params = readParams(dir_ / "ck");
  EXPECT_EQ(params.at("w"), states.at("unit.w.master"));
  EXPECT_EQ(params.at("b"), states.at("unit.b.master"));
}

//===----------------------------------------------------------------------===//
// Resharding
//===----------------------------------------------------------------------===//

namespace {

struct ReshardCase {
  int from, to;
};

class Resharding : public Checkpoints,
                   public ::testing::WithParamInterface<ReshardCase> {};

} // namespace

// Saved by `from` ranks after 6 steps: loading it at `to` ranks and saving
// again gives back every state of every unit bit for bit; training on to
// step 14 at `to` ranks gives the uninterrupted run at `from` ranks bit for
// bit when the count is the same, and up to the rounding of another
// reduction order when not.
TEST_P(Resharding, IsExactAndContinuesLikeTheUninterruptedRun) {
  const auto [from, to] = GetParam();
  train(classifierOf(from), {"--steps", "14", "--save", dir_ / "straight"});
  train(classifierOf(from), {"--steps", "6", "--save", dir_ / "split"});
  train(classifierOf(to),
        {"--resume", dir_ / "split", "--steps", "6", "--save", dir_ / "again"});
  EXPECT_EQ(readUnitStates(dir_ / "again"), readUnitStates(dir_ / "split"));
  EXPECT_EQ(CheckpointReader(dir_ / "again").ranks(), to);

  train(classifierOf(to), {"--resume", dir_ / "split", "--steps", "14",
                           "--save", dir_ / "resumed"});
  if (from == to) {
    EXPECT_TRUE(checkpointFiles(dir_ / "resumed") ==
                checkpointFiles(dir_ / "straight"));
    return;
  }
  const double difference = maxRelativeDifference(
      readParams(dir_ / "resumed"), readParams(dir_ / "straight"));
  std::printf("    saved at %d ranks, resumed at %d: max relative difference "
              "%.3g to the uninterrupted run\n",
              from, to, difference);
  // f32 (epsilon 1.2e-7) after 14 steps whose sums over records and ranks
  // run in another order and blocking (the last micro-step's rows are dealt
  // out over the ranks, each running its own size): up to ~16 epsilon. A
  // lost or doubled record moves the parameters by ~1e-3.
  EXPECT_LE(difference, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, Resharding,
                         ::testing::Values(ReshardCase{2, 1}, ReshardCase{2, 3},
                                           ReshardCase{2, 2}, ReshardCase{1, 2},
                                           ReshardCase{3, 2}),
                         [](const ::testing::TestParamInfo<ReshardCase> &info) {
                           return "From" + std::to_string(info.param.from) +
                                  "To" + std::to_string(info.param.to) +
                                  "Ranks";
                         });

TEST_F(Checkpoints, TheLanguageModelReshardsFromTwoRanksToOne) {
  train(kBigram2, {"--steps", "10", "--save", dir_ / "straight"});
  train(kBigram2, {"--steps", "4", "--save", dir_ / "split"});
  train(kBigram1,
        {"--resume", dir_ / "split", "--steps", "4", "--save", dir_ / "again"});
  EXPECT_EQ(readUnitStates(dir_ / "again"), readUnitStates(dir_ / "split"));
  train(kBigram1, {"--resume", dir_ / "split", "--steps", "10", "--save",
                   dir_ / "resumed"});
  const double difference = maxRelativeDifference(
      readParams(dir_ / "resumed"), readParams(dir_ / "straight"));
  std::printf("    language model saved at 2 ranks, resumed at 1: max "
              "relative difference %.3g\n",
              difference);
  EXPECT_LE(difference, 1e-6);
}

// The one-unit classifier computes exactly what the two-unit one does on
// one rank: a checkpoint of either resumes in the other, parameters found
// by name, and the run goes on bit for bit.
TEST_F(Checkpoints, AnotherUnitLayoutResumesByParameterName) {
  train(kClassifier1, {"--steps", "14", "--save", dir_ / "straight"});
  train(kClassifier1, {"--steps", "6", "--save", dir_ / "split"});
  train(kClassifierOneUnit, {"--resume", dir_ / "split", "--steps", "14",
                             "--save", dir_ / "one-unit"});
  EXPECT_EQ(readParams(dir_ / "one-unit"), readParams(dir_ / "straight"));
  const Tensors units = readUnitStates(dir_ / "one-unit");
  ASSERT_TRUE(units.count("unit.wb.adam_v"));
  EXPECT_EQ(units.at("unit.wb.adam_v").size(), 15u);

  // And back, onto two ranks: up to the reduction order.
  train(kClassifierOneUnit, {"--steps", "6", "--save", dir_ / "one-split"});
  train(kClassifier2, {"--resume", dir_ / "one-split", "--steps", "14",
                       "--save", dir_ / "two"});
  EXPECT_LE(maxRelativeDifference(readParams(dir_ / "two"),
                                  readParams(dir_ / "straight")),
            1e-6);
}

//===----------------------------------------------------------------------===//
// A failed rank
//===----------------------------------------------------------------------===//

TEST_F(Checkpoints, ARankThatFailsToWriteItsShardPublishesNothing) {
  const std::string ck = dir_ / "ck";
  train(kClassifier2, {"--steps", "5", "--save", ck});
  const auto before = checkpointFiles(ck);
  RunResult r =
      runProgram(kClassifier2,
                 {"--data", csv_, "--resume", ck, "--steps", "8", "--save", ck},
                 {"DPRT_TEST_CHECKPOINT_FAULT=fail-shard-1"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("rank-00001-of-00002.safetensors': test fault"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(readFile(ck + "/latest"), "step-00000005\n");
  EXPECT_TRUE(checkpointFiles(ck) == before);
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(ck))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  // Rank 0 removed the unpublished directory.
  EXPECT_EQ(names, (std::vector<std::string>{"latest", "step-00000005"}));
}

//===----------------------------------------------------------------------===//
// Bad checkpoints
//===----------------------------------------------------------------------===//

namespace {

/// Replaces the first `from` in manifest.json by `to` (checksums updated).
void editManifest(const std::string &checkpoint, const std::string &from,
                  const std::string &to) {
  std::string text = readFile(checkpoint + "/manifest.json");
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " in " << text;
  text.replace(at, from.size(), to);
  rewriteCheckpointFile(checkpoint, "manifest.json", text);
}

} // namespace

TEST_F(Checkpoints, BadCheckpointsAreRefusedBeforeAnythingIsRead) {
  train(kClassifier2, {"--steps", "3", "--save", dir_ / "good"});
  const std::string good = resolveCheckpoint(dir_ / "good");
  int copies = 0;
  // A copy of the good checkpoint, changed by `edit`.
  auto bad = [&](const std::function<void(const std::string &)> &edit) {
    const std::string copy = dir_ / ("bad" + std::to_string(copies++));
    fs::copy(good, copy, fs::copy_options::recursive);
    edit(copy);
    return copy;
  };
  const std::string shard1 = "rank-00001-of-00002.safetensors";
  const std::string shard1Entry =
      ",\n    {\"file\": \"" + shard1 + "\", \"rank\": 1";

  // The manifest misses rank 1's shard.
  const std::string missing = bad([&](const std::string &ck) {
    std::string text = readFile(ck + "/manifest.json");
    const size_t from = text.find(shard1Entry);
    ASSERT_NE(from, std::string::npos);
    text.erase(from, text.find('}', text.find('}', from) + 1) + 1 - from);
    rewriteCheckpointFile(ck, "manifest.json", text);
  });
  expectRefused(kClassifier2, {"--resume", missing},
                "manifest.json' is not valid: it lists no shard file of rank "
                "1 (of 2 ranks)");
  // Its ranges leave elements of a unit in no shard.
  const std::string hole = bad([&](const std::string &ck) {
    editManifest(ck, "\"unit.w\": [6, 12]", "\"unit.w\": [7, 12]");
  });
  expectRefused(kClassifier1, {"--resume", hole},
                "no shard file holds elements [6, 7) of unit 'unit.w'");
  // Or in two.
  const std::string overlap = bad([&](const std::string &ck) {
    editManifest(ck, "\"unit.w\": [6, 12]", "\"unit.w\": [5, 12]");
  });
  expectRefused(kClassifier1, {"--resume", overlap},
                "elements [5, 6) of unit 'unit.w' are in two shard files, "
                "'rank-00000-of-00002.safetensors' and '" +
                    shard1 + "'");
  // A shard file that holds another rank's tensors (checksums updated).
  const std::string swapped = bad([&](const std::string &ck) {
    rewriteCheckpointFile(ck, shard1,
                          readFile(ck + "/rank-00000-of-00002.safetensors"));
  });
  expectRefused(kClassifier2, {"--resume", swapped},
                shard1 + "' has no tensor 'unit.b.master' of shape [1], "
                         "which the manifest places there");
  // A model whose parameter has another shape.
  const std::string shape = bad([&](const std::string &ck) {
    editManifest(ck, "\"shape\": [3, 4]", "\"shape\": [4, 3]");
  });
  expectRefused(kClassifier1, {"--resume", shape},
                "the checkpoint's parameter 'w' has shape [4, 3], the model's "
                "has shape [3, 4]");
  // Or other names.
  const std::string name = bad([&](const std::string &ck) {
    editManifest(ck, "{\"name\": \"w\",", "{\"name\": \"weight\",");
  });
  expectRefused(kClassifier3, {"--resume", name},
                "the checkpoint's parameter 'weight' is not a parameter of "
                "model 'classifier'");
  // Units that do not hold the parameters the manifest places in them.
  const std::string outside = bad([&](const std::string &ck) {
    editManifest(ck, "\"unit\": \"unit.b\", \"offset\": 0",
                 "\"unit\": \"unit.b\", \"offset\": 1");
  });
  expectRefused(kClassifier2, {"--resume", outside},
                "parameter 'b' at elements [1, 4) lies outside unit 'unit.b' "
                "of 3 elements");
  const std::string unit = bad([&](const std::string &ck) {
    editManifest(ck, "\"unit\": \"unit.b\"", "\"unit\": \"unit.bias\"");
  });
  expectRefused(kClassifier2, {"--resume", unit},
                "parameter 'b' names unit 'unit.bias', which \"units\" does "
                "not list");
  // A manifest of another checkpoint.
  const std::string step = bad([&](const std::string &ck) {
    editManifest(ck, "\"step\": 3", "\"step\": 2");
  });
  expectRefused(kClassifier2, {"--resume", step},
                "describes step 2 of model 'classifier', its state.json step "
                "3");
  // A manifest of another model.
  const std::string model = bad([&](const std::string &ck) {
    editManifest(ck, "\"model\": \"classifier\"", "\"model\": \"bigram\"");
  });
  expectRefused(kClassifier2, {"--resume", model},
                "describes step 3 of model 'bigram', its state.json step 3 of "
                "model 'classifier'");
  // A truncated shard whose size and checksum records were updated to
  // match: its header promises more data than the file holds.
  const std::string truncated = bad([&](const std::string &ck) {
    const std::string content = readFile(ck + "/" + shard1);
    rewriteCheckpointFile(ck, shard1, content.substr(0, content.size() - 4));
  });
  expectRefused(kClassifier2, {"--resume", truncated},
                shard1 + "' is not a valid safetensors file: tensor ");
  // The good one resumes.
  train(kClassifier2, {"--resume", good, "--steps", "4"});
}

//===----------------------------------------------------------------------===//
// Format version 1
//===----------------------------------------------------------------------===//

// The committed checkpoint was written by the program before sharding
// (fixtures/checkpoint-v1/README.md) from these data, 6 steps at sigma 1.
TEST_F(Checkpoints, AVersionOneCheckpointResumesAsOneShard) {
  fs::copy(kCheckpointV1, dir_ / "v1", fs::copy_options::recursive);
  // A checkpoint written before the accountant choice resumes with RDP,
  // the accountant of its run: the uninterrupted run uses it too.
  train(kClassifier1,
        {"--steps", "14", "--accountant", "rdp", "--save", dir_ / "straight"});
  train(kClassifier1, {"--steps", "6", "--save", dir_ / "six"});
  // The old writer's parameters and optimizer state are the new run's.
  EXPECT_EQ(readClassifierV1(dir_ / "v1"), readUnitStates(dir_ / "six"));

  train(kClassifier1,
        {"--resume", dir_ / "v1", "--steps", "14", "--save", dir_ / "resumed"});
  EXPECT_NE(last_.err.find("has format version 1 (every parameter full in "
                           "params.safetensors): it is read as a checkpoint "
                           "of one shard"),
            std::string::npos)
      << last_.err;
  EXPECT_TRUE(checkpointFiles(dir_ / "resumed") ==
              checkpointFiles(dir_ / "straight"));
  // At 3 ranks: every state loaded exactly.
  train(kClassifier3,
        {"--resume", dir_ / "v1", "--steps", "6", "--save", dir_ / "three"});
  EXPECT_EQ(readUnitStates(dir_ / "three"), readClassifierV1(dir_ / "v1"));

  // Its checksums are verified ...
  const std::string path = resolveCheckpoint(dir_ / "v1");
  const std::string params = path + "/params.safetensors";
  const std::string original = readFile(params);
  std::string flipped = original;
  flipped[flipped.size() - 3] ^= 0x01;
  writeFile(params, flipped);
  expectRefused(kClassifier2, {"--resume", path},
                "the checkpoint file '" + params +
                    "' is corrupt: its XXH3-64 checksum is ");
  writeFile(params, original);
  // ... and one written before checksums resumes with a warning.
  std::string state = readFile(path + "/state.json");
  state = state.substr(0, state.find(",\n  \"files\"")) + "\n}\n";
  writeFile(path + "/state.json", state);
  train(kClassifier2, {"--resume", path, "--steps", "7"});
  EXPECT_NE(last_.err.find("records no checksums (written by an older "
                           "program): its tensor files are not verified"),
            std::string::npos)
      << last_.err;
}

//===----------------------------------------------------------------------===//
// The reader for export
//===----------------------------------------------------------------------===//

TEST_F(Checkpoints, TheReaderGathersEachParameterFromAnyNumberOfShards) {
  for (int ranks : {1, 2, 3})
    train(classifierOf(ranks),
          {"--steps", "6", "--save", dir_ / ("r" + std::to_string(ranks))});
  fs::copy(kCheckpointV1, dir_ / "v1", fs::copy_options::recursive);
  const Tensors one = readParams(dir_ / "r1");
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one.at("w").size(), 12u);
  // Training at 1 and 3 ranks differs by rounding; the version-1 checkpoint
  // of the same 1-rank run is the same bits.
  EXPECT_EQ(readParams(dir_ / "v1"), one);
  EXPECT_LE(maxRelativeDifference(readParams(dir_ / "r3"), one), 1e-6);

  CheckpointReader reader(dir_ / "r2");
  EXPECT_EQ(reader.model(), "classifier");
  EXPECT_EQ(reader.step(), 6);
  EXPECT_EQ(reader.ranks(), 2);
  EXPECT_EQ(reader.formatVersion(), 2);
  EXPECT_EQ(reader.dtype(), DType::F32);
  EXPECT_TRUE(reader.notes().empty());
  ASSERT_EQ(reader.parameters().size(), 2u);
  const auto &w = reader.parameters()[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 4}));
  std::vector<char> bytes;
  reader.read(w, bytes);
  ASSERT_EQ(bytes.size(), 48u);
  // Elements 0-5 come from rank 0's file, 6-11 from rank 1's.
  const Tensors states = readUnitStates(dir_ / "r2");
  for (int i = 0; i < 12; ++i) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    EXPECT_EQ(f, states.at("unit.w.master")[i]) << i;
  }
  std::vector<double> asF64(12);
  reader.read("w", DType::F64, asF64.data());
  EXPECT_EQ(asF64, states.at("unit.w.master"));
  EXPECT_NO_THROW(reader.verify());
  EXPECT_THROW(reader.read("bias", DType::F32, asF64.data()), UsageError);

  CheckpointReader old(dir_ / "v1");
  EXPECT_EQ(old.formatVersion(), 1);
  EXPECT_EQ(old.ranks(), 1);
  ASSERT_EQ(old.notes().size(), 1u);
  EXPECT_NE(old.notes()[0].find("format version 1"), std::string::npos);

  // A corrupt shard: the reader names it when it reads from it.
  const std::string path = resolveCheckpoint(dir_ / "r2");
  const std::string shard = path + "/rank-00001-of-00002.safetensors";
  std::string content = readFile(shard);
  content[content.size() - 1] ^= 0x40;
  writeFile(shard, content);
  CheckpointReader corrupt(dir_ / "r2");
  try {
    corrupt.read(corrupt.parameters()[0], bytes);
    ADD_FAILURE() << "a corrupt shard was read";
  } catch (const UsageError &e) {
    EXPECT_NE(std::string(e.what()).find(shard + "' is corrupt"),
              std::string::npos)
        << e.what();
  }
}
