//===- TokenFile.h - Memory-mapped token files of dpc-prepare ---*- C++ -*-===//
//
// A token file (docs/data.md) is a safetensors file written by dpc-prepare:
//   offsets      I64 [R+1] record r is tokens[offsets[r] .. offsets[r+1])
//   users        I64 [R]   dense user index of each record (optional)
//   source_lines I64 [R]   the line of its input file each record came from
//                          (optional; the metadata's `sources` names the
//                          files)
//   tokens       U32 [N]   token ids, below the metadata's vocab_size
//   loss_mask    U8  [N]   1 where the token is a loss target, else 0
// with string metadata: format = "dpc-tokens", format_version = "1",
// vocab_size, eos_id, records, users, ...
//
// The file is memory-mapped, never read into memory: opening it validates
// the header, every tensor's size and position against the file's length and
// every offset (and user index), which touches only the R+1 offsets; a
// record's token ids and mask bytes are checked when the record is filled
// (or all at once by verifyTokens()). Resident private memory therefore does
// not grow with the file; the pages of the file that were read count as
// file-backed memory the kernel can drop.
//
// Every error is a TokenFileError "FILE: byte OFFSET: what", OFFSET being
// the position in the file of the first wrong byte.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TOKENFILE_H
#define DPRT_DRIVER_TOKENFILE_H

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dprt::driver {

class TokenFileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A record as it lies in the mapped file (valid while the file is open).
/// Its ids and mask are not checked: fillSample() checks what it copies.
struct TokenRecord {
  const uint32_t *tokens = nullptr;
  const uint8_t *lossMask = nullptr;
  int64_t length = 0;
  int64_t user = -1; ///< -1 in a file without users
};

/// What fillSample does with a record of more than T + 1 tokens.
enum class Overflow {
  Error,    ///< throw TokenFileError naming the record and its length
  Truncate, ///< use its first T + 1 tokens
};

class TokenFile {
public:
  /// Maps `path` and validates it; throws TokenFileError.
  explicit TokenFile(const std::string &path);
  ~TokenFile();
  TokenFile(TokenFile &&other) noexcept;
  TokenFile &operator=(TokenFile &&other) noexcept;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;

  const std::string &path() const { return path_; }
  int64_t records() const { return records_; }
  int64_t tokens() const { return tokens_; }
  /// Token ids are below this (the metadata's vocab_size).
  int64_t vocab() const { return vocab_; }
  /// The end-of-text token that ends every record (metadata eos_id).
  int64_t eos() const { return eos_; }
  bool hasUsers() const { return userIndex_ != nullptr; }
  /// Distinct users (metadata users); 0 in a file without users.
  int64_t users() const { return users_; }
  /// The header's __metadata__ (format, tokenizer, counts, ...).
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

  /// The longest record's tokens: a sample of T positions holds records of
  /// up to T + 1 tokens.
  int64_t maxLength() const { return maxLength_; }
  /// FNV-1a of the header, whose metadata holds dpc-prepare's SHA-256 of the
  /// data (content_sha256, not verified here): a resumed run checks that it
  /// trains on the same data without reading the file.
  uint64_t fingerprint() const { return fingerprint_; }

  /// Tokens of `record`: O(1).
  int64_t length(int64_t record) const {
    return offsets_[record + 1] - offsets_[record];
  }
  /// Where `record` came from, "FILE:LINE" (FILE as given to dpc-prepare),
  /// or "" in a file that does not record it.
  std::string source(int64_t record) const;
  /// The user index of `record` in [0, users()), or -1 without users.
  int64_t user(int64_t record) const {
    return userIndex_ ? userIndex_[record] : -1;
  }
  /// Pointers into the mapping: O(1), no copy.
  TokenRecord record(int64_t record) const;

  /// Writes one training sample of `T` positions, token t predicting token
  /// t + 1 (n = the record's length):
  ///   inputs[t]  = tokens[t] for t < min(n, T + 1) - 1, else 0 (padding);
  ///   targets[t] = tokens[t + 1] where loss_mask[t + 1] = 1, else -1 (not
  ///                in the loss, or past the record's end).
  /// Checks the record's ids against vocab() and its mask bytes (0 or 1);
  /// returns the number of targets that are not -1.
  int64_t fillSample(int64_t record, int64_t T, int32_t *inputs,
                     int32_t *targets,
                     Overflow overflow = Overflow::Error) const;

  /// Targets of `record` that count in the loss when it fills T positions
  /// (what fillSample returns), without writing anything.
  int64_t lossTargets(int64_t record, int64_t T,
                      Overflow overflow = Overflow::Error) const;

  /// Reads every token id and mask byte (O(N)); throws on the first id at or
  /// above vocab() or mask byte above 1.
  void verifyTokens() const;

private:
  [[noreturn]] void fail(uint64_t offset, const std::string &what) const;
  int64_t usedLength(int64_t record, int64_t T, Overflow overflow) const;
  void checkRange(int64_t begin, int64_t end) const;
  uint64_t byteOf(const void *p) const;
  void unmap();

  std::string path_;
  const unsigned char *base_ = nullptr;
  uint64_t size_ = 0;
  std::map<std::string, std::string> metadata_;
  int64_t records_ = 0;
  int64_t tokens_ = 0;
  int64_t vocab_ = 0;
  int64_t eos_ = 0;
  int64_t users_ = 0;
  int64_t maxLength_ = 0;
  uint64_t fingerprint_ = 0;
  const int64_t *offsets_ = nullptr;
  const int64_t *userIndex_ = nullptr;
  const int64_t *sourceLines_ = nullptr;
  /// The input files in order, each with its first record.
  std::vector<std::pair<int64_t, std::string>> sources_;
  const uint32_t *ids_ = nullptr;
  const uint8_t *mask_ = nullptr;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_TOKENFILE_H
