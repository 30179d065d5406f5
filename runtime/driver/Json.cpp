//===- Json.cpp - A small JSON reader for checkpoints ---------------------===//

#include "Json.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace dprt::driver {

class JsonParser {
public:
  explicit JsonParser(const std::string &text) : text_(text) {}

  JsonValue document() {
    JsonValue value = parseValue(0);
    skipSpace();
    if (pos_ != text_.size())
      fail("unexpected text after the JSON value");
    return value;
  }

private:
  [[noreturn]] void fail(const std::string &what) const {
    throw JsonError("invalid JSON at byte " + std::to_string(pos_) + ": " +
                    what);
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) &&
           text_[pos_] != '\0')
      ++pos_;
  }

  bool consume(const char *word) {
    size_t n = std::strlen(word);
    if (text_.compare(pos_, n, word) != 0)
      return false;
    pos_ += n;
    return true;
  }

  JsonValue parseValue(int depth) {
    // Deep nesting only comes from corrupt or hostile files.
    if (depth > 64)
      fail("nested too deeply");
    skipSpace();
    if (pos_ >= text_.size())
      fail("unexpected end");
    JsonValue v;
    char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      v.kind_ = JsonValue::Kind::Object;
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return v;
      }
      while (true) {
        skipSpace();
        if (pos_ >= text_.size() || text_[pos_] != '"')
          fail("expected a string key");
        std::string key = parseString();
        skipSpace();
        if (pos_ >= text_.size() || text_[pos_] != ':')
          fail("expected ':'");
        ++pos_;
        v.object_.emplace_back(std::move(key), parseValue(depth + 1));
        skipSpace();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == '}') {
          ++pos_;
          return v;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++pos_;
      v.kind_ = JsonValue::Kind::Array;
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return v;
      }
      while (true) {
        v.array_.push_back(parseValue(depth + 1));
        skipSpace();
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          continue;
        }
        if (pos_ < text_.size() && text_[pos_] == ']') {
          ++pos_;
          return v;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind_ = JsonValue::Kind::String;
      v.string_ = parseString();
      return v;
    }
    if (consume("true")) {
      v.kind_ = JsonValue::Kind::Bool;
      v.bool_ = true;
      return v;
    }
    if (consume("false")) {
      v.kind_ = JsonValue::Kind::Bool;
      return v;
    }
    if (consume("null"))
      return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      const char *begin = text_.c_str() + pos_;
      char *end = nullptr;
      double number = std::strtod(begin, &end);
      if (end == begin)
        fail("bad number");
      pos_ += static_cast<size_t>(end - begin);
      v.kind_ = JsonValue::Kind::Number;
      v.number_ = number;
      return v;
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t parseHex4() {
    if (pos_ + 4 > text_.size())
      fail("short \\u escape");
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) {
      char h = text_[pos_++];
      value <<= 4;
      if (h >= '0' && h <= '9')
        value |= h - '0';
      else if (h >= 'a' && h <= 'f')
        value |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F')
        value |= h - 'A' + 10;
      else
        fail("bad \\u escape");
    }
    return value;
  }

  std::string parseString() {
    ++pos_; // the opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size())
        fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"')
        return out;
      if (static_cast<unsigned char>(c) < 0x20)
        fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size())
        fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp = parseHex4();
        if (cp >= 0xD800 && cp < 0xDC00 && consume("\\u")) {
          uint32_t low = parseHex4();
          if (low < 0xDC00 || low >= 0xE000)
            fail("bad surrogate pair");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  const std::string &text_;
  size_t pos_ = 0;
};

JsonValue JsonValue::parse(const std::string &text) {
  return JsonParser(text).document();
}

namespace {
[[noreturn]] void wrongKind(const char *expected) {
  throw JsonError(std::string("expected a JSON ") + expected);
}
} // namespace

bool JsonValue::boolean() const {
  if (kind_ != Kind::Bool)
    wrongKind("boolean");
  return bool_;
}

double JsonValue::number() const {
  if (kind_ != Kind::Number)
    wrongKind("number");
  return number_;
}

int64_t JsonValue::integer() const {
  double n = number();
  if (n != std::floor(n) || std::fabs(n) > 9.007199254740992e15)
    throw JsonError("expected a whole number, got " + std::to_string(n));
  return static_cast<int64_t>(n);
}

const std::string &JsonValue::string() const {
  if (kind_ != Kind::String)
    wrongKind("string");
  return string_;
}

const std::vector<JsonValue> &JsonValue::array() const {
  if (kind_ != Kind::Array)
    wrongKind("array");
  return array_;
}

const std::vector<std::pair<std::string, JsonValue>> &
JsonValue::object() const {
  if (kind_ != Kind::Object)
    wrongKind("object");
  return object_;
}

const JsonValue *JsonValue::find(const std::string &key) const {
  for (const auto &[name, value] : object())
    if (name == key)
      return &value;
  return nullptr;
}

const JsonValue &JsonValue::at(const std::string &key) const {
  const JsonValue *value = find(key);
  if (!value)
    throw JsonError("missing key \"" + key + "\"");
  return *value;
}

int64_t integerIn(const JsonValue &object, const char *key, int64_t min,
                  int64_t max) {
  const int64_t value = object.at(key).integer();
  if (value < min || value > max)
    throw JsonError(std::string("\"") + key + "\" must be in [" +
                    std::to_string(min) + ", " + std::to_string(max) +
                    "], got " + std::to_string(value));
  return value;
}

uint64_t parseHex64(const JsonValue &value) {
  const std::string &text = value.string();
  errno = 0;
  char *end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 16);
  if (text.rfind("0x", 0) != 0 || text.size() > 18 || *end != '\0' ||
      errno == ERANGE)
    throw JsonError("expected a hex string like 0x0123456789abcdef, got '" +
                    text + "'");
  return v;
}

} // namespace dprt::driver
