//===- Tokenizer.h - A model's tokenizer, through dpc-prepare ---*- C++ -*-===//
//
// --generate for a model with a tokenizer (its data a token file): the
// prompt is encoded and the samples decoded by the model's Hugging Face
// tokenizer, run by dpc-prepare (`--encode`, `--decode`; the tokenizers
// library), so that the training program links no tokenizer of its own and
// encodes exactly as dpc-prepare encoded the data.
//
// dpc-prepare is $DPC_PREPARE when set, else the one of the build this
// runtime came from.
//
// Backend-independent (in dprt_driver_objects).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TOKENIZER_H
#define DPRT_DRIVER_TOKENIZER_H

#include <cstdint>
#include <string>
#include <vector>

namespace dprt::driver {

class Tokenizer {
public:
  /// The tokenizer of the model folder `folder` (dpc-prepare --tokenizer).
  explicit Tokenizer(std::string folder);

  const std::string &folder() const { return folder_; }

  struct Encoded {
    std::vector<int32_t> ids; ///< with the tokenizer's special tokens (BOS)
    int32_t eos = 0;          ///< the end-of-text token
  };
  /// `text` encoded as the start of a text record (dpc-prepare's framing:
  /// the post-processor's special tokens, no end-of-text token). Throws
  /// UsageError when dpc-prepare rejects the folder.
  Encoded encode(const std::string &text) const;

  /// Each sequence decoded to text, special tokens skipped.
  std::vector<std::string>
  decode(const std::vector<std::vector<int32_t>> &sequences) const;

private:
  /// Runs dpc-prepare with `args` and returns its standard output.
  std::string run(const std::string &args) const;

  std::string folder_;
  std::string program_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_TOKENIZER_H
