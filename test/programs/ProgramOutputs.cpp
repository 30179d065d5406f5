//===- ProgramOutputs.cpp - What the training programs write -------------===//
//
// Checkpoints (safetensors files and manifest.json) and metrics lines, read
// from their description in docs/training-program.md with a JSON reader of
// its own, not with the driver's code: a misreading would otherwise agree
// with itself.
//
//===----------------------------------------------------------------------===//

#include "ProgramHarness.h"

#include "ProcessHelpers.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

namespace dpc::programs {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const std::string &what) {
  throw std::runtime_error("program harness: " + what);
}

//===----------------------------------------------------------------------===//
// A small JSON reader (safetensors headers, metrics lines)
//===----------------------------------------------------------------------===//

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;

  const Json &at(const std::string &key) const {
    for (const auto &[k, v] : fields)
      if (k == key)
        return v;
    fail("JSON object has no key '" + key + "'");
  }
};

class JsonParser {
public:
  explicit JsonParser(const std::string &s) : s_(s) {}

  Json parseDocument() {
    Json j = parse();
    skipSpace();
    if (pos_ != s_.size())
      fail("trailing characters after JSON value");
    return j;
  }

private:
  void skipSpace() {
    while (pos_ < s_.size() &&
           std::isspace(static_cast<unsigned char>(s_[pos_])))
      ++pos_;
  }
  char peek() {
    skipSpace();
    if (pos_ >= s_.size())
      fail("unexpected end of JSON");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c)
      fail(std::string("expected '") + c + "' in JSON at " +
           std::to_string(pos_));
    ++pos_;
  }
  bool literal(const char *word) {
    size_t n = std::strlen(word);
    if (s_.compare(pos_, n, word) != 0)
      return false;
    pos_ += n;
    return true;
  }
  std::string parseString() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size())
          fail("bad escape in JSON string");
        char e = s_[pos_++];
        switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          fail("\\u escapes are not expected in checkpoint or metrics JSON");
        default:
          out += e;
        }
      } else {
        out += c;
      }
    }
    expect('"');
    return out;
  }
  Json parse() {
    Json j;
    char c = peek();
    if (c == '{') {
      ++pos_;
      j.kind = Json::Object;
      if (peek() == '}') {
        ++pos_;
        return j;
      }
      while (true) {
        std::string key = parseString();
        expect(':');
        j.fields.emplace_back(key, parse());
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        return j;
      }
    }
    if (c == '[') {
      ++pos_;
      j.kind = Json::Array;
      if (peek() == ']') {
        ++pos_;
        return j;
      }
      while (true) {
        j.items.push_back(parse());
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        return j;
      }
    }
    if (c == '"') {
      j.kind = Json::String;
      j.text = parseString();
      return j;
    }
    if (literal("null"))
      return j;
    if (literal("true")) {
      j.kind = Json::Bool;
      j.boolean = true;
      return j;
    }
    if (literal("false")) {
      j.kind = Json::Bool;
      return j;
    }
    const char *begin = s_.c_str() + pos_;
    char *end = nullptr;
    j.number = std::strtod(begin, &end);
    if (end == begin)
      fail("bad JSON value at " + std::to_string(pos_));
    j.kind = Json::Number;
    pos_ += end - begin;
    return j;
  }

  const std::string &s_;
  size_t pos_ = 0;
};

Json parseJson(const std::string &text) {
  return JsonParser(text).parseDocument();
}

} // namespace

//===----------------------------------------------------------------------===//
// Checkpoints and metrics
//===----------------------------------------------------------------------===//

Tensors readSafetensors(const std::string &path) {
  const std::string bytes = dpctest::readFile(path);
  if (bytes.size() < 8)
    fail(path + " is too short for a safetensors file");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | static_cast<unsigned char>(bytes[i]);
  if (8 + headerBytes > bytes.size())
    fail(path + ": header runs past the end");
  const Json header = parseJson(bytes.substr(8, headerBytes));
  const size_t data = 8 + headerBytes;
  Tensors tensors;
  for (const auto &[name, info] : header.fields) {
    if (name == "__metadata__")
      continue;
    const std::string dtype = info.at("dtype").text;
    const Json &offsets = info.at("data_offsets");
    const size_t begin = size_t(offsets.items.at(0).number);
    const size_t end = size_t(offsets.items.at(1).number);
    int64_t numel = 1;
    for (const Json &d : info.at("shape").items)
      numel *= int64_t(d.number);
    const size_t width = dtype == "F64" ? 8 : dtype == "F32" ? 4 : 0;
    if (width == 0)
      fail(path + ": tensor '" + name + "' has dtype " + dtype);
    if (end - begin != numel * width || data + end > bytes.size())
      fail(path + ": tensor '" + name + "' has bad data offsets");
    Vec values(numel);
    for (int64_t i = 0; i < numel; ++i) {
      const char *p = bytes.data() + data + begin + i * width;
      if (width == 8) {
        std::memcpy(&values[i], p, 8);
      } else {
        float f;
        std::memcpy(&f, p, 4);
        values[i] = f;
      }
    }
    tensors[name] = std::move(values);
  }
  return tensors;
}

std::string latestCheckpoint(const std::string &dir) {
  std::string name = dpctest::readFile(dir + "/latest");
  while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back())))
    name.pop_back();
  return dir + "/" + name;
}

Tensors readUnitStates(const std::string &checkpoint) {
  const Json manifest =
      parseJson(dpctest::readFile(checkpoint + "/manifest.json"));
  if (manifest.at("format_version").number != 2)
    fail(checkpoint + ": not a sharded checkpoint (format version 2)");
  Tensors states;
  // A unit with "frozen": true holds its values ("master") and no other
  // state.
  std::map<std::string, size_t> statesOf;
  for (const Json &unit : manifest.at("units").items) {
    bool frozen = false;
    for (const auto &[k, v] : unit.fields)
      frozen |= k == "frozen" && v.kind == Json::Bool && v.boolean;
    statesOf[unit.at("name").text] =
        frozen ? 1 : manifest.at("states").items.size();
    for (size_t s = 0; s < statesOf[unit.at("name").text]; ++s)
      states[unit.at("name").text + "." + manifest.at("states").items[s].text] =
          Vec(size_t(unit.at("numel").number), std::nan(""));
  }
  for (const Json &shard : manifest.at("shards").items) {
    const Tensors file =
        readSafetensors(checkpoint + "/" + shard.at("file").text);
    for (const auto &[unit, range] : shard.at("ranges").fields)
      for (size_t s = 0; s < statesOf.at(unit); ++s) {
        const Json &state = manifest.at("states").items[s];
        const std::string name = unit + "." + state.text;
        auto part = file.find(name);
        const size_t begin = size_t(range.items.at(0).number);
        if (part == file.end() ||
            begin + part->second.size() != size_t(range.items.at(1).number))
          fail(checkpoint + ": " + shard.at("file").text + " has no " + name +
               " of its range");
        std::copy(part->second.begin(), part->second.end(),
                  states.at(name).begin() + begin);
      }
  }
  return states;
}

void expectSameBits(const Tensors &a, const Tensors &b,
                    const std::string &what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  size_t differing = 0, total = 0;
  for (const auto &[name, values] : a) {
    auto other = b.find(name);
    ASSERT_NE(other, b.end()) << what << ": " << name;
    ASSERT_EQ(other->second.size(), values.size()) << what << ": " << name;
    for (size_t i = 0; i < values.size(); ++i, ++total)
      differing += other->second[i] != values[i];
  }
  std::printf("[bits] %s: %zu of %zu values differ\n", what.c_str(), differing,
              total);
  EXPECT_EQ(differing, 0u) << what;
}

Tensors readCheckpointParams(const std::string &checkpoint) {
  const Json manifest =
      parseJson(dpctest::readFile(checkpoint + "/manifest.json"));
  const Tensors states = readUnitStates(checkpoint);
  Tensors params;
  for (const Json &param : manifest.at("params").items) {
    int64_t numel = 1;
    for (const Json &d : param.at("shape").items)
      numel *= int64_t(d.number);
    const Vec &unit = states.at(param.at("unit").text + ".master");
    const size_t offset = size_t(param.at("offset").number);
    if (offset + numel > unit.size())
      fail(checkpoint + ": parameter " + param.at("name").text +
           " lies outside its unit");
    params[param.at("name").text] =
        Vec(unit.begin() + offset, unit.begin() + offset + numel);
  }
  return params;
}

std::vector<double> metricValues(const std::string &path,
                                 const std::string &key) {
  std::istringstream lines(dpctest::readFile(path));
  std::vector<double> values;
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty())
      continue;
    const Json &value = parseJson(line).at(key);
    values.push_back(value.kind == Json::Number ? value.number : std::nan(""));
  }
  return values;
}

std::vector<double> metricLosses(const std::string &path) {
  return metricValues(path, "loss");
}

} // namespace dpc::programs
