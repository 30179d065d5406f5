//===- TokenFileTest.cpp - The token-file reader on dpc-prepare's files ---===//
//
// DPC_TOKEN_FILES_DIR holds NAME.tokens, written by dpc-prepare from
// test/prepare/Inputs, and NAME.expected, the same records read through the
// safetensors package (test/prepare/make_token_files.py). Corrupted copies
// go to a temporary folder.
//
//===----------------------------------------------------------------------===//

#include "TokenFile.h"
#include "Json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

using namespace dprt::driver;
namespace fs = std::filesystem;

namespace {

std::string tokenFile(const std::string &stem) {
  return std::string(DPC_TOKEN_FILES_DIR) + "/" + stem + ".tokens";
}

struct ExpectedRecord {
  int64_t user = -1;
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
};

std::vector<ExpectedRecord> readExpected(const std::string &stem) {
  std::ifstream in(std::string(DPC_TOKEN_FILES_DIR) + "/" + stem + ".expected");
  EXPECT_TRUE(in) << "run the prepare-token-files test first";
  std::vector<ExpectedRecord> records;
  std::string head, ids, mask;
  while (std::getline(in, head) && std::getline(in, ids) &&
         std::getline(in, mask)) {
    ExpectedRecord r;
    int64_t length = 0;
    std::istringstream(head) >> r.user >> length;
    std::istringstream idStream(ids), maskStream(mask);
    uint32_t id;
    int bit;
    while (idStream >> id)
      r.ids.push_back(id);
    while (maskStream >> bit)
      r.mask.push_back(static_cast<uint8_t>(bit));
    EXPECT_EQ(static_cast<int64_t>(r.ids.size()), length);
    records.push_back(std::move(r));
  }
  return records;
}

std::vector<unsigned char> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Where each tensor's data starts in the file, from the header.
struct Layout {
  uint64_t dataStart = 0;
  uint64_t begin(const std::string &tensor) const {
    return dataStart +
           static_cast<uint64_t>(
               header.at(tensor).at("data_offsets").array()[0].integer());
  }
  JsonValue header;
};

Layout layoutOf(const std::vector<unsigned char> &bytes) {
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  Layout layout;
  layout.dataStart = 8 + size;
  layout.header = JsonValue::parse(
      std::string(reinterpret_cast<const char *>(bytes.data() + 8), size));
  return layout;
}

template <typename T>
void poke(std::vector<unsigned char> &bytes, uint64_t at, T value) {
  std::memcpy(bytes.data() + at, &value, sizeof(T));
}

template <typename T>
T peek(const std::vector<unsigned char> &bytes, uint64_t at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof(T));
  return value;
}

class TokenFileCorruption : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("dpc-tokenfile-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    bytes_ = readBytes(tokenFile("records"));
    ASSERT_GT(bytes_.size(), 8u);
    layout_ = layoutOf(bytes_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::vector<unsigned char> &bytes) {
    std::string path = (dir_ / "corrupt.tokens").string();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // The message of the TokenFileError `action` throws ("" if none).
  static std::string errorOf(const std::function<void()> &action) {
    try {
      action();
    } catch (const TokenFileError &e) {
      return e.what();
    }
    return "";
  }

  std::string openError(const std::vector<unsigned char> &bytes) {
    std::string path = write(bytes);
    return errorOf([&] { TokenFile file(path); });
  }

  fs::path dir_;
  std::vector<unsigned char> bytes_;
  Layout layout_;
};

} // namespace

TEST(TokenFile, ReadsWhatDpcPrepareWrote) {
  for (const char *stem : {"records", "lines"}) {
    SCOPED_TRACE(stem);
    TokenFile file(tokenFile(stem));
    std::vector<ExpectedRecord> expected = readExpected(stem);
    ASSERT_EQ(file.records(), static_cast<int64_t>(expected.size()));
    EXPECT_EQ(file.vocab(), 512);
    EXPECT_EQ(file.eos(), 0);
    EXPECT_EQ(file.metadata().at("format"), "dpc-tokens");
    int64_t tokens = 0;
    for (int64_t r = 0; r < file.records(); ++r) {
      const ExpectedRecord &e = expected[r];
      TokenRecord record = file.record(r);
      ASSERT_EQ(record.length, static_cast<int64_t>(e.ids.size()));
      EXPECT_EQ(file.length(r), record.length);
      EXPECT_EQ(record.user, e.user);
      EXPECT_EQ(file.user(r), e.user);
      EXPECT_EQ(
          std::vector<uint32_t>(record.tokens, record.tokens + record.length),
          e.ids);
      EXPECT_EQ(std::vector<uint8_t>(record.lossMask,
                                     record.lossMask + record.length),
                e.mask);
      EXPECT_EQ(record.tokens[record.length - 1], file.eos());
      tokens += record.length;
    }
    EXPECT_EQ(file.tokens(), tokens);
    file.verifyTokens();
  }
}

TEST(TokenFile, LongestRecordAndFingerprint) {
  TokenFile records(tokenFile("records"));
  size_t longest = 0;
  for (const ExpectedRecord &e : readExpected("records"))
    longest = std::max(longest, e.ids.size());
  EXPECT_EQ(records.maxLength(), static_cast<int64_t>(longest));
  // The fingerprint is the header's, which holds the data's digest: the
  // same for the same file, another for other data; moves keep it.
  TokenFile again(tokenFile("records"));
  EXPECT_EQ(again.fingerprint(), records.fingerprint());
  TokenFile lines(tokenFile("lines"));
  EXPECT_NE(lines.fingerprint(), records.fingerprint());
  const uint64_t fingerprint = records.fingerprint();
  TokenFile moved(std::move(records));
  EXPECT_EQ(moved.fingerprint(), fingerprint);
  EXPECT_EQ(moved.maxLength(), static_cast<int64_t>(longest));
  EXPECT_EQ(moved.length(0), again.length(0));
}

TEST(TokenFile, UsersAreDenseIndices) {
  TokenFile records(tokenFile("records"));
  ASSERT_TRUE(records.hasUsers());
  // alice, bob, 7 and "7" (one user), alice, carol.
  EXPECT_EQ(records.users(), 4);
  std::vector<int64_t> users;
  for (int64_t r = 0; r < records.records(); ++r)
    users.push_back(records.user(r));
  EXPECT_EQ(users, (std::vector<int64_t>{0, 1, 2, 2, 0, 3}));
  TokenFile lines(tokenFile("lines"));
  EXPECT_FALSE(lines.hasUsers());
  EXPECT_EQ(lines.users(), 0);
  EXPECT_EQ(lines.user(0), -1);
}

TEST(TokenFile, FillSampleShiftsTokensAndMasksTargets) {
  TokenFile file(tokenFile("records"));
  std::vector<ExpectedRecord> expected = readExpected("records");
  const int64_t T = 256;
  for (int64_t r = 0; r < file.records(); ++r) {
    const ExpectedRecord &e = expected[r];
    const int64_t n = static_cast<int64_t>(e.ids.size());
    ASSERT_LE(n, T + 1);
    std::vector<int32_t> inputs(T, 77), targets(T, 77);
    const int64_t counted =
        file.fillSample(r, T, inputs.data(), targets.data());
    int64_t expectCounted = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (t + 1 < n) {
        EXPECT_EQ(inputs[t], static_cast<int32_t>(e.ids[t]));
        const int32_t target =
            e.mask[t + 1] ? static_cast<int32_t>(e.ids[t + 1]) : -1;
        EXPECT_EQ(targets[t], target) << "record " << r << " position " << t;
        expectCounted += e.mask[t + 1];
      } else {
        EXPECT_EQ(inputs[t], 0);
        EXPECT_EQ(targets[t], -1);
      }
    }
    EXPECT_EQ(counted, expectCounted);
    EXPECT_EQ(file.lossTargets(r, T), expectCounted);
  }
  // The first record is a prompt and a completion: the targets that count
  // are the completion and the end-of-text token, the last target.
  std::vector<int32_t> inputs(T), targets(T);
  const int64_t n = file.length(0);
  file.fillSample(0, T, inputs.data(), targets.data());
  EXPECT_EQ(targets[n - 2], file.eos());
  EXPECT_EQ(targets[0], -1);
}

TEST(TokenFile, LongRecordIsAnErrorOrTruncated) {
  TokenFile file(tokenFile("records"));
  std::vector<ExpectedRecord> expected = readExpected("records");
  const int64_t last = file.records() - 1;
  const int64_t T = 16;
  ASSERT_GT(file.length(last), T + 1);
  std::vector<int32_t> inputs(T), targets(T);
  try {
    file.fillSample(last, T, inputs.data(), targets.data());
    FAIL() << "a record of " << file.length(last) << " tokens fit " << T;
  } catch (const TokenFileError &e) {
    EXPECT_NE(std::string(e.what()).find("record 5 has " +
                                         std::to_string(file.length(last)) +
                                         " tokens, more than the 17"),
              std::string::npos)
        << e.what();
  }
  file.fillSample(last, T, inputs.data(), targets.data(), Overflow::Truncate);
  const ExpectedRecord &e = expected[last];
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(inputs[t], static_cast<int32_t>(e.ids[t]));
    EXPECT_EQ(targets[t],
              e.mask[t + 1] ? static_cast<int32_t>(e.ids[t + 1]) : -1);
  }
}

TEST_F(TokenFileCorruption, UntouchedCopyOpens) {
  EXPECT_EQ(openError(bytes_), "");
}

TEST_F(TokenFileCorruption, TruncatedFileNamesTheTensorAndOffset) {
  std::vector<unsigned char> bytes(bytes_.begin(), bytes_.end() - 3);
  const std::string error = openError(bytes);
  const uint64_t maskBegin = layout_.begin("loss_mask");
  EXPECT_NE(error.find(": byte " + std::to_string(maskBegin) +
                       ": tensor 'loss_mask' ends at byte " +
                       std::to_string(bytes_.size()) + ", past the end"),
            std::string::npos)
      << error;
  // Shorter than the header.
  bytes.resize(20);
  EXPECT_NE(openError(bytes).find(": byte 0: header length"),
            std::string::npos);
  bytes.resize(5);
  EXPECT_NE(openError(bytes).find(": byte 0: the file has 5 bytes"),
            std::string::npos);
}

TEST_F(TokenFileCorruption, BadHeaderLength) {
  std::vector<unsigned char> bytes = bytes_;
  poke<uint64_t>(bytes, 0, bytes.size());
  std::string error = openError(bytes);
  EXPECT_NE(error.find(write(bytes) + ": byte 0: header length " +
                       std::to_string(bytes.size()) + " exceeds"),
            std::string::npos)
      << error;
  poke<uint64_t>(bytes, 0, layout_.dataStart - 8 - 20);
  error = openError(bytes);
  EXPECT_NE(error.find(": byte 8: the header is not JSON"), std::string::npos)
      << error;
}

TEST_F(TokenFileCorruption, OffsetsOutOfOrder) {
  std::vector<unsigned char> bytes = bytes_;
  const uint64_t offsets = layout_.begin("offsets");
  const int64_t first = peek<int64_t>(bytes, offsets + 8);
  const int64_t second = peek<int64_t>(bytes, offsets + 16);
  poke<int64_t>(bytes, offsets + 8, second);
  poke<int64_t>(bytes, offsets + 16, first);
  const std::string error = openError(bytes);
  EXPECT_NE(error.find(": byte " + std::to_string(offsets + 16) +
                       ": offsets[2] = " + std::to_string(first) +
                       " is below offsets[1]"),
            std::string::npos)
      << error;
}

TEST_F(TokenFileCorruption, LastOffsetMustBeTheTokenCount) {
  std::vector<unsigned char> bytes = bytes_;
  const uint64_t offsets = layout_.begin("offsets");
  const int64_t records =
      layout_.header.at("offsets").at("shape").array()[0].integer() - 1;
  const uint64_t at = offsets + 8 * static_cast<uint64_t>(records);
  poke<int64_t>(bytes, at, peek<int64_t>(bytes, at) - 1);
  const std::string error = openError(bytes);
  EXPECT_NE(error.find(": byte " + std::to_string(at) + ": offsets[" +
                       std::to_string(records) + "]"),
            std::string::npos)
      << error;
}

TEST_F(TokenFileCorruption, TokenIdAtTheVocabularySize) {
  std::vector<unsigned char> bytes = bytes_;
  TokenFile good(tokenFile("records"));
  // The third token of record 1.
  const uint64_t index =
      static_cast<uint64_t>(good.record(1).tokens - good.record(0).tokens) + 2;
  const uint64_t at = layout_.begin("tokens") + 4 * index;
  poke<uint32_t>(bytes, at, 512);
  const std::string path = write(bytes);
  // Opening reads no token; filling the record and verifying do.
  TokenFile file(path);
  const std::string expected = path + ": byte " + std::to_string(at) +
                               ": token id 512 is not below vocab_size 512";
  std::vector<int32_t> inputs(128), targets(128);
  EXPECT_EQ(TokenFileCorruption::errorOf([&] {
              file.fillSample(1, 128, inputs.data(), targets.data());
            }),
            expected);
  EXPECT_EQ(TokenFileCorruption::errorOf([&] { file.verifyTokens(); }),
            expected);
  // Other records are still fine.
  EXPECT_EQ(TokenFileCorruption::errorOf([&] {
              file.fillSample(0, 128, inputs.data(), targets.data());
            }),
            "");
}

TEST_F(TokenFileCorruption, MaskByteOtherThanZeroOrOne) {
  std::vector<unsigned char> bytes = bytes_;
  const uint64_t at = layout_.begin("loss_mask") + 1;
  bytes[at] = 2;
  const std::string path = write(bytes);
  TokenFile file(path);
  EXPECT_EQ(TokenFileCorruption::errorOf([&] { file.verifyTokens(); }),
            path + ": byte " + std::to_string(at) +
                ": loss_mask byte 2 is neither 0 nor 1");
}

TEST_F(TokenFileCorruption, UserIndexOutOfRange) {
  std::vector<unsigned char> bytes = bytes_;
  const uint64_t at = layout_.begin("users") + 8 * 3;
  poke<int64_t>(bytes, at, 4);
  const std::string error = openError(bytes);
  EXPECT_NE(error.find(": byte " + std::to_string(at) +
                       ": users[3] = 4 is not below the 4 users"),
            std::string::npos)
      << error;
}

TEST_F(TokenFileCorruption, NotADpcTokenFile) {
  // Same length, another format name.
  std::string header(bytes_.begin() + 8, bytes_.begin() + layout_.dataStart);
  const size_t at = header.find("dpc-tokens");
  ASSERT_NE(at, std::string::npos);
  std::vector<unsigned char> bytes = bytes_;
  bytes[8 + at + 4] = 'T';
  const std::string error = openError(bytes);
  EXPECT_NE(error.find(": byte 8: metadata format is 'dpc-Tokens'"),
            std::string::npos)
      << error;
}
