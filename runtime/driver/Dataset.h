//===- Dataset.h - Training records and how they fill the inputs -*- C++
//-*-===//
//
// The program's input roles say what the data is:
//  - Tokens + NextTokens (a language model): a token file of dpc-prepare
//    (TokenFile.h, recognized by its safetensors header whatever its name),
//    memory-mapped: input = tokens[0..n-2], targets = tokens[1..n-1] where
//    the loss mask is 1, else -1; a record is the privacy unit whatever its
//    length: one longer than T + 1 tokens is an error naming it, or with
//    --truncate trains on its first T + 1 (never split, never packed with
//    another); or a text file, one record per line, byte-level tokens:
//    input = '\n' then the line's bytes, targets = the bytes then '\n'; or
//    a `.tok` file, one record per line of space-separated token ids: input
//    = ids[0..n-2], targets = ids[1..n-1]. Either way a record is a sequence
//    s, input = s[0..n-2] and target = s[1..n-1], padded with token 0 and
//    target -1 (ignored).
//  - Features + Label: CSV rows of features then an integer class.
//  - Features + Target: CSV rows of features then the regression targets.
// Blank lines are skipped; a CSV file may start with a header line (a line
// with no number in it).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_DATASET_H
#define DPRT_DRIVER_DATASET_H

#include "Options.h"
#include "TokenFile.h"

#include "dprt/program.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprt::driver {

/// What the inputs of a program expect.
struct DataLayout {
  bool languageModel = false;
  int64_t tokens = 0;   ///< LM: tokens per sample
  int64_t vocab = 0;    ///< LM: token ids must be below (0: unchecked)
  int64_t features = 0; ///< CSV: feature columns
  bool label = false;   ///< CSV: a class label follows the features
  int64_t classes = 0;  ///< CSV: labels must be below (0: unchecked)
  int64_t targets = 0;  ///< CSV: regression targets follow the features
  DType compute = DType::F32;

  /// Throws UsageError when the inputs are not a supported combination.
  static DataLayout of(const ProgramSpec &spec);
  /// "text or .tok (128 tokens)" / "CSV: 64 features, then a class label".
  std::string describe() const;
};

class Dataset {
public:
  /// Reads `path` for `layout` (a token file is mapped, not read); throws
  /// UsageError naming the file and line (or record) of the first problem.
  /// `truncate` (--truncate): a token-file record longer than T + 1 tokens
  /// trains on its first T + 1 instead of being an error.
  static Dataset load(const std::string &path, const DataLayout &layout,
                      bool truncate = false);

  /// The token file, when the data is one (else null).
  const TokenFile *tokenFile() const { return tokenFile_.get(); }
  /// Token-file records longer than T + 1 tokens (cut with --truncate).
  int64_t truncatedRecords() const { return truncated_; }

  int64_t size() const { return records_; }

  /// User-level DP: the privacy unit becomes the user of each record (the
  /// token file's `users`). Throws UsageError naming `path` when the data
  /// names no users.
  void groupByUser(const std::string &path);
  bool byUser() const { return !userRecords_.empty(); }
  /// What Poisson sampling draws and the accountant counts: the users
  /// after groupByUser, else the records.
  int64_t privacyUnits() const {
    return byUser() ? static_cast<int64_t>(userRecords_.size()) : records_;
  }
  /// The records of each user, in increasing order (after groupByUser).
  const std::vector<std::vector<int64_t>> &userRecords() const {
    return userRecords_;
  }
  /// FNV-1a of the records' content: a resumed run checks that it trains on
  /// the same data.
  uint64_t fingerprint() const { return fingerprint_; }
  /// "1797 CSV records" / "10000 lines of text".
  std::string describe() const;
  const DataLayout &layout() const { return layout_; }

  /// Tokens a record contributes to throughput: its counted targets for a
  /// language model, 1 otherwise.
  int64_t tokensOf(int64_t record) const;

  /// Writes row `record` (or padding, record = -1) of `input` to `row`, which
  /// holds one sample of the input (int32 or the compute type). For a token
  /// file it reads only that record's tokens and mask bytes (checking them);
  /// a bad one is a UsageError naming the file and byte.
  void writeRow(const InputSpec &input, int64_t record, void *row) const;

private:
  static Dataset loadTokenFile(const std::string &path,
                               const DataLayout &layout, bool truncate);

  DataLayout layout_;
  int64_t records_ = 0;
  uint64_t fingerprint_ = 0;
  std::string kind_;
  // A token file: records are read from the mapping when sampled.
  std::shared_ptr<const TokenFile> tokenFile_;
  Overflow overflow_ = Overflow::Error;
  int64_t truncated_ = 0;
  // Sequences (language models): record i is ids_[begin_[i] .. begin_[i+1]).
  std::vector<int32_t> ids_;
  std::vector<int64_t> begin_;
  // Tables (CSV): record i is values_[i * width ..], width = features +
  // targets, and labels_[i].
  std::vector<double> values_;
  std::vector<int32_t> labels_;
  std::vector<std::vector<int64_t>> userRecords_;
};

/// Stores `value` as one element of type `dt` (bf16: round to nearest even).
void storeAs(DType dt, double value, void *out);
/// Reads one element of type `dt`.
double loadAs(DType dt, const void *in);

} // namespace dprt::driver

#endif // DPRT_DRIVER_DATASET_H
