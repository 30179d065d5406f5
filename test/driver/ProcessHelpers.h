//===- ProcessHelpers.h - Running fixture programs from tests ---*- C++ -*-===//

#ifndef DPC_TEST_DRIVER_PROCESSHELPERS_H
#define DPC_TEST_DRIVER_PROCESSHELPERS_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dpctest {

/// A directory under /tmp, removed with everything in it at destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

struct RunResult {
  int status = -1; ///< exit status, or 128 + signal
  std::string out;
  std::string err;
};

/// Runs `binary args...` with the extra environment `env` ("NAME=value")
/// and captures its output.
RunResult runProgram(const std::string &binary,
                     const std::vector<std::string> &args,
                     const std::vector<std::string> &env = {});

void writeFile(const std::string &path, const std::string &content);
std::string readFile(const std::string &path);

/// One record of a token file: its ids and loss mask (equal lengths).
struct TokenRecordData {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
};

/// Writes a token file as docs/data.md lays it out (offsets, tokens,
/// loss_mask, little-endian, the header padded to a multiple of 8), the
/// way dpc-prepare writes one, without a tokenizer: for tests that need
/// exact ids and masks. `metadata` adds or replaces header metadata.
void writeTokenFile(
    const std::string &path, const std::vector<TokenRecordData> &records,
    int64_t vocab, int64_t eos,
    const std::vector<std::pair<std::string, std::string>> &metadata = {});

} // namespace dpctest

#endif // DPC_TEST_DRIVER_PROCESSHELPERS_H
