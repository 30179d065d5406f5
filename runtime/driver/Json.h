//===- Json.h - A small JSON reader for checkpoints -------------*- C++ -*-===//
//
// Reads the JSON the training program writes itself (state.json, safetensors
// headers): objects, arrays, strings with escapes, numbers, true, false,
// null. Numbers are doubles, so 64-bit keys are stored as hex strings.
// Writing goes through privacy::jsonNumber / jsonString (PrivacyReport.h),
// which round-trip doubles exactly.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_JSON_H
#define DPRT_DRIVER_JSON_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dprt::driver {

class JsonError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class JsonValue {
public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  /// Parses one JSON document; throws JsonError with the byte offset of the
  /// problem.
  static JsonValue parse(const std::string &text);

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::Null; }
  bool isNumber() const { return kind_ == Kind::Number; }
  bool isString() const { return kind_ == Kind::String; }
  bool isArray() const { return kind_ == Kind::Array; }
  bool isObject() const { return kind_ == Kind::Object; }

  // Accessors throw JsonError when the value has another kind.
  bool boolean() const;
  double number() const;
  /// The number, which must be a whole number in int64 range.
  int64_t integer() const;
  const std::string &string() const;
  const std::vector<JsonValue> &array() const;
  const std::vector<std::pair<std::string, JsonValue>> &object() const;

  /// The member `key` of an object, or null if absent.
  const JsonValue *find(const std::string &key) const;
  /// The member `key`; throws JsonError naming it when absent.
  const JsonValue &at(const std::string &key) const;

private:
  friend class JsonParser;
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

/// The member `key` of `object` as a whole number in [min, max], checked
/// before it is narrowed to the field it fills; throws JsonError naming the
/// key and the range.
int64_t integerIn(const JsonValue &object, const char *key, int64_t min,
                  int64_t max);
/// A string "0x" followed by at most 16 hex digits (checksums, keys).
uint64_t parseHex64(const JsonValue &value);

} // namespace dprt::driver

#endif // DPRT_DRIVER_JSON_H
