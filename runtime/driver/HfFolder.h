//===- HfFolder.h - Hugging Face folders: shared pieces ---------*- C++ -*-===//
//
// What the model export (HfWeights.cpp) and the peft adapter export and
// import (HfAdapters.cpp) share: the atomic folder write, the export
// folder's checks, the files that travel with the weights, and the one-line
// list of problems.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_HFFOLDER_H
#define DPRT_DRIVER_HFFOLDER_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dprt::driver {

/// The files that go along with the weights: the tokenizer's (fast and
/// slow, BPE and SentencePiece) and the generation defaults.
inline constexpr const char *kCompanionFiles[] = {"tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json",
                                                  "added_tokens.json",
                                                  "vocab.json",
                                                  "merges.txt",
                                                  "vocab.txt",
                                                  "tokenizer.model",
                                                  "spiece.model",
                                                  "chat_template.json",
                                                  "chat_template.jinja",
                                                  "generation_config.json",
                                                  "sentencepiece.bpe.model"};

inline int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// One line for a list of problems (the first three, then how many more),
/// thrown as a UsageError.
[[noreturn]] void throwProblems(const std::vector<std::string> &problems);

/// Copies `from` to `to` and fsyncs it.
void copyFileDurably(const std::string &from, const std::string &to);

/// Writes the folder `dir` through `fill`, which writes its files into a
/// temporary folder beside it; that folder is synced and renamed into
/// place, or removed when `fill` throws.
void writeAtomically(const std::string &dir,
                     const std::function<void(const std::string &)> &fill);

/// The export folder must not exist, or be empty, and its parent must be a
/// folder this program may write (UsageError otherwise).
void checkExportFolder(const std::string &dir);

} // namespace dprt::driver

#endif // DPRT_DRIVER_HFFOLDER_H
