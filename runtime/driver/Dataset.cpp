//===- Dataset.cpp - Training records and how they fill the inputs --------===//

#include "Dataset.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace dprt::driver {
namespace {

const InputSpec *findRole(const ProgramSpec &spec, InputRole role) {
  for (const InputSpec &input : spec.inputs)
    if (input.role == role)
      return &input;
  return nullptr;
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Token ids and labels are int32 in the inputs: without a vocabulary or a
/// class count to check against, this bounds them before the conversion.
constexpr int64_t kInt32Limit = int64_t{1} << 31;

/// FNV-1a, 64 bits.
struct Fingerprint {
  uint64_t hash = 0xcbf29ce484222325ull;
  void add(const void *data, size_t bytes) {
    const auto *p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < bytes; ++i) {
      hash ^= p[i];
      hash *= 0x100000001b3ull;
    }
  }
  template <class T> void add(const T &value) { add(&value, sizeof(T)); }
};

/// Lines of a file, numbered from 1, without the '\n' and a trailing '\r'.
class LineReader {
public:
  explicit LineReader(const std::string &text) : text_(text) {}
  bool next(std::string &line, int64_t &number) {
    if (pos_ >= text_.size())
      return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string::npos)
      end = text_.size();
    line.assign(text_, pos_, end - pos_);
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    pos_ = end + 1;
    number = ++line_;
    return true;
  }

private:
  const std::string &text_;
  size_t pos_ = 0;
  int64_t line_ = 0;
};

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UsageError("cannot read the data file '" + path +
                     "': " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad())
    throw UsageError("cannot read the data file '" + path + "'");
  return contents.str();
}

bool isBlank(const std::string &line) {
  return line.find_first_not_of(" \t") == std::string::npos;
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool parseDouble(const std::string &text, double &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return *end == '\0' && errno != ERANGE && std::isfinite(value);
}

/// Whether the whole field reads as a number, finite or not ("nan" and
/// "inf" count): a first line with such a field is data, not a header.
bool isNumberText(const std::string &text) {
  if (text.empty())
    return false;
  char *end = nullptr;
  std::strtod(text.c_str(), &end);
  return *end == '\0';
}

bool parseInt64(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  value = std::strtoll(text.c_str(), &end, 10);
  return *end == '\0' && errno != ERANGE;
}

std::vector<std::string> splitCsv(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string::npos)
      return fields;
    start = comma + 1;
  }
}

/// Whether `path` starts like a safetensors file: an 8-byte little-endian
/// header length below the file's size, then the header's '{'. A text or
/// .tok file cannot: its first 8 bytes, read as a length, far exceed any
/// file.
bool looksLikeSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char head[9];
  if (!in.read(reinterpret_cast<char *>(head), sizeof(head)))
    return false;
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | head[i];
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  return head[8] == '{' && length <= size - 8;
}

/// "record R" and, when the file records it, where it came from.
std::string recordName(const TokenFile &file, int64_t record) {
  std::string name = "record " + std::to_string(record);
  const std::string source = file.source(record);
  if (!source.empty())
    name += " (" + source + ")";
  return name;
}

[[noreturn]] void lineError(const std::string &path, int64_t line,
                            const std::string &what) {
  throw UsageError(path + ":" + std::to_string(line) + ": " + what);
}

} // namespace

DataLayout DataLayout::of(const ProgramSpec &spec) {
  DataLayout layout;
  layout.compute = spec.compute;
  const InputSpec *tokens = findRole(spec, InputRole::Tokens);
  const InputSpec *next = findRole(spec, InputRole::NextTokens);
  const InputSpec *features = findRole(spec, InputRole::Features);
  const InputSpec *label = findRole(spec, InputRole::Label);
  const InputSpec *target = findRole(spec, InputRole::Target);
  if (tokens && next && !features && !label && !target) {
    layout.languageModel = true;
    layout.tokens = spec.tokens;
    layout.vocab = spec.classes;
    if (layout.vocab > 0 && layout.vocab <= '\n')
      throw UsageError("the model's vocabulary of " +
                       std::to_string(layout.vocab) +
                       " tokens cannot hold byte-level text");
    return layout;
  }
  if (features && !tokens && !next &&
      (label != nullptr) != (target != nullptr)) {
    layout.features = features->dims[0];
    layout.label = label != nullptr;
    layout.classes = label ? spec.classes : 0;
    layout.targets = target ? target->dims[0] : 0;
    return layout;
  }
  std::string roles;
  for (const InputSpec &input : spec.inputs)
    roles += std::string(roles.empty() ? "" : ", ") + nameOf(input.role);
  throw UsageError("the program's inputs (" + roles +
                   ") are not a combination the training program can fill: "
                   "it reads tokens + next_tokens (text), features + label or "
                   "features + target (CSV)");
}

std::string DataLayout::describe() const {
  std::ostringstream os;
  if (languageModel)
    os << "token-file, text or .tok records of up to " << tokens + 1
       << " tokens";
  else if (label)
    os << "CSV rows of " << features << " features, then a class label";
  else
    os << "CSV rows of " << features << " features, then " << targets
       << " target" << (targets == 1 ? "" : "s");
  return os.str();
}

void Dataset::groupByUser(const std::string &path) {
  if (!tokenFile_ || !tokenFile_->hasUsers())
    throw UsageError(
        path + ": the program is compiled for user-level DP (unit = "
               "#dp.unit<user, ...>) but the data names no users; prepare a "
               "token file with dpc-prepare from JSON records with a 'user' "
               "field (docs/data.md)");
  userRecords_.assign(static_cast<size_t>(tokenFile_->users()), {});
  for (int64_t r = 0; r < records_; ++r)
    userRecords_[static_cast<size_t>(tokenFile_->user(r))].push_back(r);
}

Dataset Dataset::loadTokenFile(const std::string &path,
                               const DataLayout &layout, bool truncate) {
  Dataset d;
  d.layout_ = layout;
  d.kind_ = "token-file records";
  try {
    d.tokenFile_ = std::make_shared<const TokenFile>(path);
  } catch (const TokenFileError &e) {
    throw UsageError(e.what());
  }
  const TokenFile &file = *d.tokenFile_;
  if (!layout.languageModel)
    throw UsageError(path +
                     ": a token file is data for a language model, "
                     "but this program reads " +
                     layout.describe());
  // Ids are checked against the file's vocabulary as they are read; that
  // vocabulary must fit the model's embedding.
  if (layout.vocab > 0 && file.vocab() > layout.vocab)
    throw UsageError(path + ": the token file's vocabulary of " +
                     std::to_string(file.vocab()) +
                     " ids (metadata vocab_size) is larger than the model's "
                     "vocabulary of " +
                     std::to_string(layout.vocab) +
                     "; tokenize with this model's tokenizer (dpc-prepare "
                     "--vocab-size " +
                     std::to_string(layout.vocab) + ")");
  if (file.vocab() > kInt32Limit)
    throw UsageError(path + ": the token file's vocabulary of " +
                     std::to_string(file.vocab()) +
                     " ids does not fit the model's int32 token inputs");
  // A record is one privacy unit and one sample: never split, never packed.
  // One longer than the T + 1 tokens a sample holds is an error, or with
  // --truncate trains on its first T + 1 tokens.
  const int64_t capacity = layout.tokens + 1;
  if (file.maxLength() > capacity) {
    for (int64_t r = 0; r < file.records(); ++r) {
      if (file.length(r) <= capacity)
        continue;
      if (!truncate)
        throw UsageError(
            path + ": " + recordName(file, r) + " has " +
            std::to_string(file.length(r)) +
            " tokens but a sample of this model holds at most " +
            std::to_string(capacity) + " (" + std::to_string(layout.tokens) +
            " inputs, each with its next token); a record is never split "
            "(it is the privacy unit): pass --truncate to train on its "
            "first " +
            std::to_string(capacity) + " tokens, or prepare shorter records");
      ++d.truncated_;
    }
  }
  d.overflow_ = truncate ? Overflow::Truncate : Overflow::Error;
  d.records_ = file.records();
  Fingerprint fp;
  fp.add('f');
  fp.add(file.fingerprint());
  fp.add(d.records_);
  d.fingerprint_ = fp.hash;
  return d;
}

Dataset Dataset::load(const std::string &path, const DataLayout &layout,
                      bool truncate) {
  if (looksLikeSafetensors(path))
    return loadTokenFile(path, layout, truncate);
  if (truncate)
    throw UsageError("--truncate is for token files (dpc-prepare), and '" +
                     path + "' is not one");
  Dataset d;
  d.layout_ = layout;
  const std::string text = readFile(path);
  LineReader lines(text);
  std::string line;
  int64_t number = 0;
  Fingerprint fp;

  if (layout.languageModel && !endsWith(path, ".tok")) {
    d.kind_ = "lines of text";
    fp.add('t');
    d.begin_.push_back(0);
    while (lines.next(line, number)) {
      if (line.empty())
        continue;
      if (static_cast<int64_t>(line.size()) > layout.tokens - 1)
        lineError(path, number,
                  "the record has " + std::to_string(line.size()) +
                      " bytes but this model reads at most " +
                      std::to_string(layout.tokens - 1) + " (its " +
                      std::to_string(layout.tokens) +
                      " tokens less the start token); shorten or split the "
                      "line");
      d.ids_.push_back('\n');
      for (unsigned char byte : line) {
        if (layout.vocab > 0 && byte >= layout.vocab)
          lineError(path, number,
                    "byte " + std::to_string(byte) +
                        " is outside the model's vocabulary [0, " +
                        std::to_string(layout.vocab) + ")");
        d.ids_.push_back(byte);
      }
      d.ids_.push_back('\n');
      d.begin_.push_back(static_cast<int64_t>(d.ids_.size()));
    }
  } else if (layout.languageModel) {
    d.kind_ = "token records";
    fp.add('k');
    d.begin_.push_back(0);
    while (lines.next(line, number)) {
      if (isBlank(line))
        continue;
      std::istringstream words(line);
      std::string word;
      int64_t count = 0;
      while (words >> word) {
        int64_t id;
        if (!parseInt64(word, id))
          lineError(path, number, "'" + word + "' is not a token id");
        const int64_t vocab = layout.vocab > 0 ? layout.vocab : kInt32Limit;
        if (id < 0 || id >= vocab)
          lineError(path, number,
                    "token id " + word + " is outside the vocabulary [0, " +
                        std::to_string(vocab) + ")");
        d.ids_.push_back(static_cast<int32_t>(id));
        ++count;
      }
      if (count < 2)
        lineError(path, number,
                  "a record needs at least 2 token ids (inputs and their "
                  "next-token targets), got " +
                      std::to_string(count));
      if (count - 1 > layout.tokens)
        lineError(path, number,
                  "the record has " + std::to_string(count) +
                      " token ids but this model reads at most " +
                      std::to_string(layout.tokens + 1) + " (" +
                      std::to_string(layout.tokens) +
                      " inputs, each with its next token)");
      d.begin_.push_back(static_cast<int64_t>(d.ids_.size()));
    }
  } else {
    d.kind_ = "CSV records";
    fp.add('c');
    const int64_t width = layout.features + (layout.label ? 1 : layout.targets);
    bool first = true;
    while (lines.next(line, number)) {
      if (isBlank(line))
        continue;
      std::vector<std::string> fields = splitCsv(line);
      if (first) {
        first = false;
        bool anyNumber = false;
        for (const std::string &field : fields)
          anyNumber = anyNumber || isNumberText(field);
        if (!anyNumber)
          continue; // a header line
      }
      if (static_cast<int64_t>(fields.size()) != width)
        lineError(path, number,
                  std::to_string(fields.size()) + " fields, expected " +
                      std::to_string(width) + " (" + layout.describe() + ")");
      for (int64_t j = 0; j < width; ++j) {
        if (layout.label && j == layout.features) {
          int64_t label;
          if (!parseInt64(fields[j], label))
            lineError(path, number,
                      "the label '" + fields[j] + "' is not a whole number");
          const int64_t classes =
              layout.classes > 0 ? layout.classes : kInt32Limit;
          if (label < 0 || label >= classes)
            lineError(path, number,
                      "the label " + fields[j] +
                          " is not a class of this model [0, " +
                          std::to_string(classes) + ")");
          d.labels_.push_back(static_cast<int32_t>(label));
          continue;
        }
        double value;
        if (!parseDouble(fields[j], value))
          lineError(path, number,
                    "field " + std::to_string(j + 1) + " '" + fields[j] +
                        "' is not a finite number");
        // Finite in double is not enough: the model sees the value in its
        // compute type, where 1e39 is infinite in f32 and bf16.
        char stored[8];
        storeAs(layout.compute, value, stored);
        if (!std::isfinite(loadAs(layout.compute, stored)))
          lineError(path, number,
                    "field " + std::to_string(j + 1) + " '" + fields[j] +
                        "' overflows the model's compute type " +
                        nameOf(layout.compute) +
                        " (it would be infinite there)");
        d.values_.push_back(value);
      }
      ++d.records_;
    }
    fp.add(d.values_.data(), d.values_.size() * sizeof(double));
    fp.add(d.labels_.data(), d.labels_.size() * sizeof(int32_t));
  }
  if (layout.languageModel) {
    d.records_ = static_cast<int64_t>(d.begin_.size()) - 1;
    fp.add(d.ids_.data(), d.ids_.size() * sizeof(int32_t));
    fp.add(d.begin_.data(), d.begin_.size() * sizeof(int64_t));
  }
  if (d.records_ == 0)
    throw UsageError("the data file '" + path + "' has no records (expected " +
                     layout.describe() + ")");
  fp.add(d.records_);
  d.fingerprint_ = fp.hash;
  return d;
}

std::string Dataset::describe() const {
  std::string text = std::to_string(records_) + " " + kind_;
  if (truncated_ > 0)
    text += " (" + std::to_string(truncated_) + " truncated to " +
            std::to_string(layout_.tokens + 1) + " tokens by --truncate)";
  return text;
}

int64_t Dataset::tokensOf(int64_t record) const {
  if (!layout_.languageModel)
    return 1;
  if (tokenFile_)
    return tokenFile_->lossTargets(record, layout_.tokens, overflow_);
  return begin_[record + 1] - begin_[record] - 1;
}

void Dataset::writeRow(const InputSpec &input, int64_t record,
                       void *row) const {
  switch (input.role) {
  case InputRole::Tokens:
  case InputRole::NextTokens: {
    auto *out = static_cast<int32_t *>(row);
    if (tokenFile_) {
      // fillSample writes inputs and targets together; the other half goes
      // to scratch.
      std::vector<int32_t> other(layout_.tokens);
      const bool inputs = input.role == InputRole::Tokens;
      if (record < 0) {
        for (int64_t t = 0; t < layout_.tokens; ++t)
          out[t] = inputs ? 0 : -1;
        return;
      }
      try {
        tokenFile_->fillSample(record, layout_.tokens,
                               inputs ? out : other.data(),
                               inputs ? other.data() : out, overflow_);
      } catch (const TokenFileError &e) {
        throw UsageError(std::string(e.what()) + " (in " +
                         recordName(*tokenFile_, record) + ")");
      }
      return;
    }
    const int64_t shift = input.role == InputRole::NextTokens ? 1 : 0;
    const int32_t pad = input.role == InputRole::NextTokens ? -1 : 0;
    int64_t n = 0;
    const int32_t *s = nullptr;
    if (record >= 0) {
      s = ids_.data() + begin_[record];
      n = begin_[record + 1] - begin_[record] - 1;
    }
    for (int64_t t = 0; t < layout_.tokens; ++t)
      out[t] = t < n ? s[t + shift] : pad;
    return;
  }
  case InputRole::Label:
    *static_cast<int32_t *>(row) = record >= 0 ? labels_[record] : 0;
    return;
  case InputRole::Features:
  case InputRole::Target: {
    const int64_t width =
        layout_.features + (layout_.label ? 0 : layout_.targets);
    const int64_t first =
        input.role == InputRole::Features ? 0 : layout_.features;
    const int64_t count = input.dims[0];
    auto *out = static_cast<char *>(row);
    for (int64_t j = 0; j < count; ++j)
      storeAs(layout_.compute,
              record >= 0 ? values_[record * width + first + j] : 0.0,
              out + j * sizeOf(layout_.compute));
    return;
  }
  }
}

void storeAs(DType dt, double value, void *out) {
  if (dt == DType::F64) {
    std::memcpy(out, &value, 8);
    return;
  }
  float f = static_cast<float>(value);
  if (dt == DType::F32) {
    std::memcpy(out, &f, 4);
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) {
    bits |= 0x00400000u;
  } else {
    bits += 0x7fffu + ((bits >> 16) & 1u); // round to nearest even
  }
  uint16_t half = static_cast<uint16_t>(bits >> 16);
  std::memcpy(out, &half, 2);
}

double loadAs(DType dt, const void *in) {
  if (dt == DType::F64) {
    double d;
    std::memcpy(&d, in, 8);
    return d;
  }
  if (dt == DType::F32) {
    float f;
    std::memcpy(&f, in, 4);
    return f;
  }
  uint16_t half;
  std::memcpy(&half, in, 2);
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

} // namespace dprt::driver
