//===- TextGenerator.cpp - Sampling lines from a language model -----------===//

#include "TextGenerator.h"

#include "Dataset.h"
#include "Options.h"

#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/rng.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace dprt::driver {
namespace {

constexpr int kForwardSlot = 2;

/// rng.h stream of the sampling in --generate; rng.h's own streams are
/// 0..3, this one is the driver's.
constexpr uint32_t kGenerationStream = 200;
constexpr double kGenerationTemperature = 0.8;
constexpr int64_t kGenerationTopK = 40;

/// Samples from softmax(logits / temperature) restricted to the top k, with
/// the uniform u in (0, 1].
int32_t sampleToken(const std::vector<double> &logits, double u) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min<int64_t>(kGenerationTopK, logits.size());
  std::partial_sort(
      order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  std::vector<double> weights(k);
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[order[i]] - logits[order[0]]) /
                          kGenerationTemperature);
    total += weights[i];
  }
  double threshold = u * total, cumulative = 0;
  for (int64_t i = 0; i < k; ++i) {
    cumulative += weights[i];
    if (cumulative >= threshold)
      return order[i];
  }
  return order[k - 1];
}

/// Control characters (but tab) as \xNN, so that a sample is one line.
std::string escapeControls(const std::string &text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 && c != '\t') {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", c);
      out += escape;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string printable(const std::vector<int32_t> &ids) {
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) { // ids[0] is the start token
    int32_t id = ids[i];
    if (id >= 256) {
      out += "<" + std::to_string(id) + ">";
    } else if (id < 0x20 && id != '\t') {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", id);
      out += escape;
    } else {
      out += static_cast<char>(id);
    }
  }
  return out;
}

} // namespace

void TextGenerator::requireLanguageModel(const ProgramSpec &spec) {
  if (!DataLayout::of(spec).languageModel || spec.logitsOffset < 0)
    throw UsageError("--generate samples text from a language model; this "
                     "program's model is not one (no token inputs and "
                     "logits)");
}

void TextGenerator::requireByteLanguageModel(const ProgramSpec &spec) {
  requireLanguageModel(spec);
  if (spec.classes < 256)
    throw UsageError("--generate samples bytes, but the model's vocabulary "
                     "has only " +
                     std::to_string(spec.classes) + " tokens");
}

GenerationStart TextGenerator::start(const ProgramSpec &spec,
                                     const std::string &prompt,
                                     const Tokenizer *tokenizer) {
  GenerationStart g;
  if (tokenizer) {
    Tokenizer::Encoded e = tokenizer->encode(prompt);
    g.ids = e.ids.empty() ? std::vector<int32_t>{e.eos} : e.ids;
    g.stop = e.eos;
  } else {
    g.ids.push_back('\n');
    for (unsigned char byte : prompt)
      g.ids.push_back(byte);
    g.stop = '\n';
  }
  if (static_cast<int64_t>(g.ids.size()) >= spec.tokens)
    throw UsageError("--prompt is " + std::to_string(g.ids.size()) +
                     " tokens with its start token, and the model reads " +
                     std::to_string(spec.tokens) +
                     ": that leaves no position to generate; give at most " +
                     std::to_string(spec.tokens - 1));
  for (int32_t id : g.ids)
    if (id < 0 || id >= spec.classes)
      throw UsageError("--prompt has the token id " + std::to_string(id) +
                       ", outside the model's vocabulary [0, " +
                       std::to_string(spec.classes) + ")");
  return g;
}

std::vector<std::string> TextGenerator::generate(int64_t lines, uint64_t seed,
                                                 const GenerationStart &begin,
                                                 const Tokenizer *tokenizer) {
  const int64_t batchRows = spec_.physicalBatch, tokens = spec_.tokens;
  const int64_t classes = spec_.classes;
  const std::vector<int32_t> &start = begin.ids;
  const int32_t stop = begin.stop;
  const int64_t logitBytes = sizeOf(spec_.compute);
  // The public seed, Philox: the samples are not private, only reproducible.
  const NoiseKey key = NoiseKey::fromSeed(seed);
  std::vector<double> logits(classes);
  std::vector<char> row(classes * logitBytes * batchRows);
  std::vector<std::string> out;
  for (int64_t produced = 0; produced < lines;) {
    const int64_t count = std::min(batchRows, lines - produced);
    std::vector<std::vector<int32_t>> seqs(count, start);
    std::vector<bool> done(count, false);
    // Every unfinished line has pos + 1 tokens: the logits at pos draw the
    // next one.
    for (int64_t pos = static_cast<int64_t>(start.size()) - 1; pos < tokens;
         ++pos) {
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
        break;
      ranks_.run([&](int i) {
        RankSlot &slot = ranks_.slot(i);
        Rank &rank = slot.rank;
        const DType acc = accOf(spec_.compute);
        for (size_t k = 0; k < spec_.inputs.size(); ++k) {
          const InputSpec &input = spec_.inputs[k];
          auto *ids = reinterpret_cast<int32_t *>(slot.inputs[k].data());
          for (int64_t p = 0; p < batchRows; ++p)
            for (int64_t t = 0; t < tokens; ++t) {
              int32_t value = input.role == InputRole::NextTokens ? -1 : 0;
              if (input.role == InputRole::Tokens && p < count &&
                  t < static_cast<int64_t>(seqs[p].size()))
                value = seqs[p][t];
              ids[p * tokens + t] = value;
            }
          copyToArena(&rank, input.offset, slot.inputs[k].data(),
                      static_cast<int64_t>(slot.inputs[k].size()));
        }
        for (int64_t p = 0; p < batchRows; ++p)
          storeAs(acc, p < count ? 1.0 : 0.0,
                  slot.mask.data() + p * sizeOf(acc));
        copyToArena(&rank, spec_.maskOffset, slot.mask.data(),
                    static_cast<int64_t>(slot.mask.size()));
        {
          DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_forward");
          runCaptured(&rank, kForwardSlot, dp_forward);
        }
        if (i == 0)
          for (int64_t p = 0; p < count; ++p)
            copyFromArena(&rank, row.data() + p * classes * logitBytes,
                          spec_.logitsOffset +
                              (p * tokens + pos) * classes * logitBytes,
                          classes * logitBytes);
        synchronize(&rank);
      });
      for (int64_t p = 0; p < count; ++p) {
        if (done[p])
          continue;
        for (int64_t c = 0; c < classes; ++c)
          logits[c] = loadAs(spec_.compute,
                             row.data() + (p * classes + c) * logitBytes);
        const double u = uniformF64(
            NoiseGenerator::Philox, key, static_cast<uint64_t>(produced + p),
            static_cast<uint64_t>(pos), kGenerationStream);
        const int32_t next = sampleToken(logits, u);
        if (next == stop) {
          done[p] = true;
          continue;
        }
        seqs[p].push_back(next);
        if (static_cast<int64_t>(seqs[p].size()) >= tokens)
          done[p] = true;
      }
    }
    if (tokenizer) {
      for (const std::string &text : tokenizer->decode(seqs))
        out.push_back(escapeControls(text));
    } else {
      for (const auto &seq : seqs)
        out.push_back(printable(seq));
    }
    produced += count;
  }
  return out;
}

} // namespace dprt::driver
