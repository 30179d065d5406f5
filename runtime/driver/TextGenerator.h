//===- TextGenerator.h - Sampling lines from a language model ---*- C++ -*-===//
//
// --generate N: after training, N lines sampled from a byte-level language
// model with dp_forward, P lines at a time (the physical batch): each starts
// with '\n'; the next byte is drawn from softmax(logits at the last position
// / 0.8) restricted to the 40 most likely tokens, with uniforms from the
// counter-based generator keyed by the seed (same seed, same lines). A line
// ends at '\n' or after T - 1 bytes.
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TEXTGENERATOR_H
#define DPRT_DRIVER_TEXTGENERATOR_H

#include "ProcessRanks.h"

#include "dprt/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dprt::driver {

class TextGenerator {
public:
  /// Throws UsageError unless the program is a language model over bytes
  /// (token inputs, logits, a vocabulary of at least 256).
  static void requireByteLanguageModel(const ProgramSpec &spec);

  TextGenerator(const ProgramSpec &spec, ProcessRanks &ranks)
      : spec_(spec), ranks_(ranks) {}

  /// `lines` lines, control bytes written as \xNN and ids >= 256 as <id>.
  std::vector<std::string> generate(int64_t lines, uint64_t seed);

private:
  const ProgramSpec &spec_;
  ProcessRanks &ranks_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_TEXTGENERATOR_H
