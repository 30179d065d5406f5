//===- TokenTrainingTest.cpp - Token files, hyperparameters, generation ---===//
//
// The bigram fixture (BigramProgram.cpp: 256 tokens, T = 16) trained on
// token files, with the run-time hyperparameter flags, and generating with
// a tokenizer through dpc-prepare (test/fixtures/tokenizer): every bad
// input exits with status 2 and names the flag, the file and the record or
// byte; resume refuses what changes the guarantee.
//
//===----------------------------------------------------------------------===//

#include "Json.h"
#include "ProcessHelpers.h"
#include "TrainingProgramFixture.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

using namespace dpctest;
using dprt::driver::JsonValue;

namespace {

const std::string kBigram = DPC_FIXTURE_BIGRAM_1;
const std::string kTokenizer = DPC_TOKENIZER_DIR;
const std::string kTokenFiles = DPC_TOKEN_FILES_DIR;
const std::string kPrepare = DPC_PREPARE;

/// Records of 2 to 17 ids (what a sample of 16 positions holds), the first
/// two out of the loss (a prompt), ids below `vocab`.
std::vector<TokenRecordData> records(int count, uint32_t vocab = 256) {
  std::vector<TokenRecordData> out(count);
  uint64_t state = 7;
  for (int i = 0; i < count; ++i) {
    const int n = 2 + i % 16;
    for (int t = 0; t < n; ++t) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      out[i].ids.push_back(static_cast<uint32_t>((state >> 33) % vocab));
      out[i].mask.push_back(t < 2 && n > 2 ? 0 : 1);
    }
  }
  return out;
}

class TokenTraining : public ::testing::Test {
protected:
  RunResult train(std::vector<std::string> args) {
    args.push_back("--quiet");
    args.push_back("--noise-key");
    args.push_back(key_);
    return runProgram(kBigram, args, {"DPC_PREPARE=" + kPrepare});
  }
  void SetUp() override {
    key_ = dir_ / "noise.key";
    writeFile(key_, std::string(64, 'b') + "\n");
    data_ = dir_ / "train.tokens";
    writeTokenFile(data_, records(64), 256, 10);
  }
  TempDir dir_;
  std::string key_, data_;
};

TEST_F(TokenTraining, TrainsOnATokenFileAndCountsTheMaskedTargets) {
  RunResult r = train({"--data", data_, "--steps", "3", "--metrics",
                       dir_ / "m.jsonl", "--lr", "0.25", "--warmup", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<JsonValue> lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  // lr = 0.25 * s / 2 in the warmup, then 0.25.
  EXPECT_EQ(lines[0].at("lr").number(), 0.125);
  EXPECT_EQ(lines[1].at("lr").number(), 0.25);
  EXPECT_EQ(lines[2].at("lr").number(), 0.25);
  // A record of n ids has n - 1 targets, minus the masked ones (1 when
  // n > 2: position 1; position 0 is never a target).
  for (const JsonValue &line : lines)
    EXPECT_LE(line.at("tokens").integer(), line.at("samples").integer() * 16);
}

TEST_F(TokenTraining, BadInputsExitWithStatusTwoAndAMessage) {
  // A record of 18 ids (one more than T + 1 = 17).
  std::vector<TokenRecordData> longRecord = records(4);
  longRecord[2].ids.assign(18, 5);
  longRecord[2].mask.assign(18, 1);
  writeTokenFile(dir_ / "long.tokens", longRecord, 256, 10);
  // A vocabulary larger than the model's.
  writeTokenFile(dir_ / "vocab.tokens", records(8, 300), 300, 10);
  // An id at the vocabulary size in every record: found when sampled.
  std::vector<TokenRecordData> badIds = records(8);
  for (TokenRecordData &r : badIds)
    r.ids[1] = 256;
  writeTokenFile(dir_ / "ids.tokens", badIds, 256, 10);
  // A file cut short: its tensors extend past its end.
  const std::string whole = readFile(data_);
  writeFile(dir_ / "cut.tokens", whole.substr(0, whole.size() - 9));

  struct Case {
    const char *what;
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"long record",
       {"--data", dir_ / "long.tokens"},
       "long.tokens: record 2 has 18 tokens but a sample of this model holds "
       "at most 17"},
      {"vocabulary",
       {"--data", dir_ / "vocab.tokens"},
       "vocab.tokens: the token file's vocabulary of 300 ids (metadata "
       "vocab_size) is larger than the model's vocabulary of 256"},
      {"id outside the vocabulary",
       {"--data", dir_ / "ids.tokens", "--steps", "20"},
       "is not below vocab_size 256"},
      {"cut file", {"--data", dir_ / "cut.tokens"}, "cut.tokens: byte "},
      {"truncate on text",
       {"--data", dir_ / "noise.key", "--truncate"},
       "--truncate is for token files"},
      {"lr zero", {"--data", data_, "--lr", "0"}, "option --lr must be > 0"},
      {"lr not a number", {"--data", data_, "--lr", "fast"}, "option --lr"},
      {"weight decay",
       {"--data", data_, "--weight-decay", "-0.1"},
       "option --weight-decay must be >= 0"},
      {"clip", {"--data", data_, "--clip", "0"}, "option --clip must be > 0"},
      {"sample rate",
       {"--data", data_, "--sample-rate", "1.5"},
       "--sample-rate is a probability in (0, 1]"},
      {"both rates",
       {"--data", data_, "--sample-rate", "0.1", "--expected-batch", "4"},
       "not both"},
      {"expected batch over the records",
       {"--data", data_, "--expected-batch", "100"},
       "--expected-batch 100 exceeds the 64 records"},
      {"decay", {"--data", data_, "--decay", "step"}, "option --decay must be"},
      {"ratio", {"--data", data_, "--min-lr-ratio", "2"}, "in [0, 1]"},
      {"ratio without decay",
       {"--data", data_, "--min-lr-ratio", "0.1"},
       "--min-lr-ratio sets where a decay ends"},
      {"warmup", {"--data", data_, "--warmup", "-1"}, "option --warmup"},
      {"accountant",
       {"--data", data_, "--accountant", "moments"},
       "option --accountant must be pld or rdp, got 'moments'"},
      {"prompt without generate",
       {"--data", data_, "--prompt", "x"},
       "--prompt is for --generate N"},
      {"prompt too long",
       {"--data", data_, "--steps", "1", "--generate", "1", "--prompt",
        std::string(15, 'a')},
       "--prompt is 16 tokens with its start token"},
      {"tokenizer folder",
       {"--data", data_, "--steps", "1", "--generate", "1", "--tokenizer",
        dir_ / "nowhere"},
       "the tokenizer '" + dir_ / "nowhere" + "' could not be used"},
  };
  for (const Case &c : cases) {
    RunResult r = train(c.args);
    EXPECT_EQ(r.status, 2) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.what << ": expected '" << c.message << "' in: " << r.err;
  }
  // --truncate trains the long record on its first 17 ids.
  RunResult r = train({"--data", dir_ / "long.tokens", "--truncate", "--steps",
                       "2", "--expected-batch", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
}

TEST_F(TokenTraining, DpcPreparesFilesOfALargerVocabularyAreRefused) {
  // The fixture tokenizer has 512 ids; the bigram model 256.
  RunResult r = train({"--data", kTokenFiles + "/lines.tokens"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("vocabulary of 512 ids"), std::string::npos) << r.err;
}

TEST_F(TokenTraining, ResumeRefusesAnotherGuaranteeButTakesAnotherRate) {
  const std::string ck = dir_ / "ck";
  ASSERT_EQ(train({"--data", data_, "--steps", "2", "--sigma", "1", "--save",
                   ck, "--accountant", "rdp", "--clip", "0.5"})
                .status,
            0);
  for (const auto &[flag, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"--clip", "0.25"},
           {"--expected-batch", "5"},
           {"--sample-rate", "0.5"},
           {"--accountant", "pld"}}) {
    RunResult r =
        train({"--data", data_, "--steps", "3", "--resume", ck, flag, value});
    EXPECT_EQ(r.status, 2) << flag << ": " << r.err;
    EXPECT_NE(r.err.find(flag + " cannot change when resuming"),
              std::string::npos)
        << r.err;
  }
  // Repeating the values is fine; a new learning rate is taken, with a
  // warning that the run no longer equals an uninterrupted one.
  RunResult r = train({"--data", data_, "--steps", "3", "--resume", ck,
                       "--clip", "0.5", "--accountant", "rdp", "--lr", "0.01",
                       "--metrics", dir_ / "m.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: --lr 0.01 replaces the checkpoint's value"),
            std::string::npos)
      << r.err;
  const std::vector<JsonValue> lines = readJsonLines(dir_ / "m.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("lr").number(), 0.01);
  EXPECT_NE(r.out.find("accountant        rdp"), std::string::npos) << r.out;
}

TEST_F(TokenTraining, GeneratesWithTheTokenFilesTokenizer) {
  // The token file names its tokenizer as dpc-prepare's do. The bigram
  // model's 256 ids are a part of the tokenizer's 512.
  const std::string withTokenizer = dir_ / "tok.tokens";
  writeTokenFile(withTokenizer, records(64), 256, 0,
                 {{"tokenizer", kTokenizer}});
  RunResult r = train({"--data", withTokenizer, "--steps", "5", "--generate",
                       "3", "--prompt", "xyz"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string generated = r.out.substr(0, r.out.find("training report"));
  std::istringstream lines(generated);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    // "xyz" encodes to ids 90 91 92; decoding gives the prompt back first.
    EXPECT_EQ(line.rfind("xyz", 0), 0u) << line;
  }
  EXPECT_EQ(count, 3) << generated;
  // The same seed samples the same lines.
  RunResult again = train({"--data", withTokenizer, "--steps", "5",
                           "--generate", "3", "--prompt", "xyz"});
  EXPECT_EQ(again.out.substr(0, again.out.find("training report")), generated);

  // A byte-level prompt on a file without a tokenizer: '\n' + "ab".
  RunResult bytes = train(
      {"--data", data_, "--steps", "5", "--generate", "2", "--prompt", "ab"});
  ASSERT_EQ(bytes.status, 0) << bytes.err;
  std::istringstream byteLines(
      bytes.out.substr(0, bytes.out.find("training report")));
  while (std::getline(byteLines, line))
    EXPECT_EQ(line.rfind("ab", 0), 0u) << line;
}

} // namespace
