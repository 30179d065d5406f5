//===- TextGenerator.h - Sampling lines from a language model ---*- C++ -*-===//
//
// --generate N: after training, N lines sampled from a language model with
// dp_forward, P lines at a time (the physical batch); the next token is
// drawn from softmax(logits at the last position / 0.8) restricted to the
// 40 most likely tokens, with uniforms from the counter-based generator
// keyed by the seed (same seed, same lines).
//  - Byte-level models: a line starts with '\n' then the prompt's bytes
//    (--prompt), as the text records were framed, and ends at '\n' or at
//    T tokens.
//  - Models with a tokenizer (Tokenizer.h): a line starts with the prompt
//    encoded as dpc-prepare encodes a text record (the end-of-text token
//    when that is empty) and ends at the end-of-text token or at T tokens;
//    it is decoded by the tokenizer.
// Either way the line printed is the prompt and its continuation, control
// characters written as \xNN.
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TEXTGENERATOR_H
#define DPRT_DRIVER_TEXTGENERATOR_H

#include "ProcessRanks.h"
#include "Tokenizer.h"

#include "dprt/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dprt::driver {

/// How every line starts (the start token and the prompt's ids) and the
/// token that ends one.
struct GenerationStart {
  std::vector<int32_t> ids;
  int32_t stop = '\n';
};

class TextGenerator {
public:
  /// Throws UsageError unless the program is a language model over bytes
  /// (token inputs, logits, a vocabulary of at least 256).
  static void requireByteLanguageModel(const ProgramSpec &spec);
  /// Throws UsageError unless the program is a language model (token
  /// inputs and logits).
  static void requireLanguageModel(const ProgramSpec &spec);

  TextGenerator(const ProgramSpec &spec, ProcessRanks &ranks)
      : spec_(spec), ranks_(ranks) {}

  /// The start of the lines continuing `prompt`, encoded by `tokenizer` (or
  /// as bytes without one); throws UsageError for a prompt that leaves no
  /// position to generate or has an id outside the model's vocabulary. The
  /// Trainer calls it before training, so that a bad prompt or tokenizer
  /// stops the run at its start.
  static GenerationStart start(const ProgramSpec &spec,
                               const std::string &prompt,
                               const Tokenizer *tokenizer);

  /// `lines` lines from `start`, decoded by `tokenizer` (or, without one,
  /// bytes, ids >= 256 written as <id>), control characters as \xNN.
  std::vector<std::string> generate(int64_t lines, uint64_t seed,
                                    const GenerationStart &start,
                                    const Tokenizer *tokenizer);

private:
  const ProgramSpec &spec_;
  ProcessRanks &ranks_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_TEXTGENERATOR_H
