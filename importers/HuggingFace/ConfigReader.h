//===- ConfigReader.h - Typed, checked access to config.json ----*- C++ -*-===//
//
// Every field of config.json is either read (and then honoured or refused),
// declared harmless (it does not change what the model computes), or reported
// as unknown: no field is ignored without a decision. Problems are collected,
// not thrown, so that one run names all of them.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_IMPORTERS_HUGGINGFACE_CONFIGREADER_H
#define DPC_IMPORTERS_HUGGINGFACE_CONFIGREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace dpc::hf {

class ConfigReader {
public:
  explicit ConfigReader(const llvm::json::Object &config) : config(config) {}

  /// A positive integer that must be present.
  int64_t requirePositive(llvm::StringRef key);
  /// A positive integer; `fallback` when absent or null.
  int64_t positive(llvm::StringRef key, int64_t fallback);
  /// An integer >= 0; `fallback` when absent or null.
  int64_t count(llvm::StringRef key, int64_t fallback);
  /// A positive integer, or nullopt when absent or null.
  std::optional<int64_t> optionalPositive(llvm::StringRef key);
  /// A number > 0; `fallback` when absent or null.
  double positiveReal(llvm::StringRef key, double fallback);
  /// A number >= 0; `fallback` when absent or null.
  double nonNegativeReal(llvm::StringRef key, double fallback);
  bool flag(llvm::StringRef key, bool fallback);
  /// A string; `fallback` when absent or null.
  std::string string(llvm::StringRef key, llvm::StringRef fallback);
  /// The raw value (null when absent), marked as read.
  const llvm::json::Value *value(llvm::StringRef key);
  bool has(llvm::StringRef key) const { return config.get(key) != nullptr; }

  /// Marks fields that do not change what the model computes.
  void harmless(llvm::ArrayRef<llvm::StringRef> keys);
  /// Records that `key` asks for what the importer cannot do.
  void refuse(llvm::StringRef key, const llvm::Twine &why);
  /// Records a problem that is not about one field's value.
  void error(const llvm::Twine &message);
  /// Reports every field that was neither read nor declared harmless.
  void reportUnknownFields();

  bool failed() const { return !errors.empty(); }
  std::vector<std::string> takeErrors() { return std::move(errors); }

  /// `field 'key' = value`, the prefix of every message about one field.
  std::string describe(llvm::StringRef key) const;

private:
  const llvm::json::Value *read(llvm::StringRef key);
  void wrongType(llvm::StringRef key, llvm::StringRef expected);

  const llvm::json::Object &config;
  llvm::StringSet<> seen;
  std::vector<std::string> errors;
};

/// Compact JSON text of a value, for messages.
std::string jsonText(const llvm::json::Value &value);

} // namespace dpc::hf

#endif // DPC_IMPORTERS_HUGGINGFACE_CONFIGREADER_H
