//===- CheckpointManifestTest.cpp - The checkpoint manifest's parser -----===//
//
// manifest.json of a sharded checkpoint (docs/training-program.md) round
// trips through toJson and manifestFromJson, and every invalid manifest is a
// UsageError naming the file and what is wrong. The checkpoints the programs
// write and read are tested in CheckpointTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "Options.h"
#include "ShardedCheckpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using dprt::driver::CheckpointManifest;
using dprt::driver::manifestFromJson;
using dprt::driver::UsageError;

namespace {

CheckpointManifest smallManifest() {
  CheckpointManifest m;
  m.model = "m";
  m.step = 4;
  m.ranks = 2;
  m.states = {"master", "momentum"};
  m.units = {{"unit.a", 10, 5}, {"unit.b", 3, 2}};
  m.params = {{"a", {2, 5}, 0, 0, true}, {"b", {3}, 1, 0, false}};
  m.shards = {{"rank-00000-of-00002.safetensors",
               0,
               100,
               0x0123456789abcdefull,
               {{0, 0, 5}, {1, 0, 2}}},
              {"rank-00001-of-00002.safetensors",
               1,
               90,
               0xfedcba9876543210ull,
               {{0, 5, 10}, {1, 2, 3}}}};
  return m;
}

} // namespace

TEST(CheckpointManifest, RoundTripsThroughJson) {
  const CheckpointManifest m = smallManifest();
  const std::string text = dprt::driver::toJson(m);
  const CheckpointManifest back = manifestFromJson(text, "manifest.json");
  EXPECT_EQ(dprt::driver::toJson(back), text);
  EXPECT_EQ(back.shards[1].checksum, 0xfedcba9876543210ull);
  EXPECT_FALSE(back.params[1].trainable);
  EXPECT_EQ(back.params[0].shape, (std::vector<int64_t>{2, 5}));
}

TEST(CheckpointManifest, InvalidManifestsNameTheProblem) {
  const std::string good = dprt::driver::toJson(smallManifest());
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {
      {"\"format_version\": 2", "\"format_version\": 3",
       "format version 3, this program reads version 2"},
      {"\"dtype\": \"F32\"", "\"dtype\": \"BF16\"",
       "\"dtype\" must be F32 or F64, got BF16"},
      {"\"ranks\": 2}", "\"ranks\": 0}", "\"ranks\" must be in [1, "},
      {"[\"master\", \"momentum\"]", "[\"momentum\"]",
       "\"states\" must begin with \"master\""},
      {"\"momentum\"]", "\"velocity\"]", "unknown state 'velocity'"},
      {"\"name\": \"b\"", "\"name\": \"a\"", "parameter 'a' is listed twice"},
      {"\"shape\": [2, 5]", "\"shape\": [2, 6]",
       "parameter 'a' at elements [0, 12) lies outside unit 'unit.a' of 10 "
       "elements"},
      {"\"shape\": [2, 5]", "\"shape\": [2, -5]",
       "parameter 'a' has a dimension out of range"},
      {"\"file\": \"rank-00001-of-00002.safetensors\"",
       "\"file\": \"../elsewhere\"",
       "shard file '../elsewhere' is not a file name of the checkpoint "
       "directory"},
      {"\"rank\": 1", "\"rank\": 0", "it lists two shard files of rank 0"},
      {"\"rank\": 1", "\"rank\": 2", "\"rank\" must be in [0, 1], got 2"},
      {"\"unit.b\": [2, 3]", "\"unit.b\": [2, 4]",
       "the range [2, 4) of unit 'unit.b' in "
       "'rank-00001-of-00002.safetensors' lies outside the unit's 3 "
       "elements"},
      {"\"unit.b\": [2, 3]", "\"unit.c\": [2, 3]",
       "shard file 'rank-00001-of-00002.safetensors' names unit 'unit.c'"},
      {", \"unit.b\": [2, 3]", "",
       "no shard file holds elements [2, 3) of unit 'unit.b'"},
      {"\"xxh3_64\": \"0xfedcba9876543210\"", "\"xxh3_64\": \"fedcba98\"",
       "expected a hex string"},
  };
  for (const Case &c : cases) {
    std::string text = good;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    try {
      manifestFromJson(text, "ck/manifest.json");
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const UsageError &e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the checkpoint manifest 'ck/manifest.json' is not "
                          "valid: "),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(c.message), std::string::npos)
          << "expected '" << c.message << "' in: " << what;
    }
  }
}
