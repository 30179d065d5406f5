//===- ConfigReader.cpp - Typed, checked access to config.json ------------===//

#include "ConfigReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace dpc::hf;
using llvm::StringRef;

std::string dpc::hf::jsonText(const llvm::json::Value &value) {
  // llvm::json writes 17 digits (0.10000000000000001); the shortest text
  // that reads back the same is what the user wrote.
  if (value.kind() == llvm::json::Value::Number && !value.getAsInteger()) {
    double x = *value.getAsNumber();
    for (int digits = 1; digits <= 17; ++digits) {
      std::string text = llvm::formatv("{0}", llvm::format("%.*g", digits, x));
      if (std::stod(text) == x)
        return text;
    }
  }
  return llvm::formatv("{0}", value).str();
}

std::string ConfigReader::describe(StringRef key) const {
  const llvm::json::Value *v = config.get(key);
  return ("field '" + key + "' = " + (v ? jsonText(*v) : "(absent)")).str();
}

const llvm::json::Value *ConfigReader::read(StringRef key) {
  seen.insert(key);
  const llvm::json::Value *v = config.get(key);
  return v && v->kind() != llvm::json::Value::Null ? v : nullptr;
}

const llvm::json::Value *ConfigReader::value(StringRef key) {
  return read(key);
}

void ConfigReader::wrongType(StringRef key, StringRef expected) {
  errors.push_back(describe(key) + ": expected " + expected.str());
}

std::optional<int64_t> ConfigReader::optionalPositive(StringRef key) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return std::nullopt;
  std::optional<int64_t> n = v->getAsInteger();
  if (!n || *n <= 0) {
    wrongType(key, "a positive integer");
    return std::nullopt;
  }
  return n;
}

int64_t ConfigReader::requirePositive(StringRef key) {
  if (!config.get(key)) {
    errors.push_back(("field '" + key + "' is missing").str());
    seen.insert(key);
    return 1;
  }
  // A present null is as good as missing for a size.
  if (!read(key)) {
    wrongType(key, "a positive integer");
    return 1;
  }
  return optionalPositive(key).value_or(1);
}

int64_t ConfigReader::positive(StringRef key, int64_t fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback;
  return optionalPositive(key).value_or(fallback);
}

int64_t ConfigReader::count(StringRef key, int64_t fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback;
  std::optional<int64_t> n = v->getAsInteger();
  if (!n || *n < 0) {
    wrongType(key, "an integer >= 0");
    return fallback;
  }
  return *n;
}

double ConfigReader::positiveReal(StringRef key, double fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback;
  std::optional<double> x = v->getAsNumber();
  if (!x || !(*x > 0)) {
    wrongType(key, "a number > 0");
    return fallback;
  }
  return *x;
}

double ConfigReader::nonNegativeReal(StringRef key, double fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback;
  std::optional<double> x = v->getAsNumber();
  if (!x || !(*x >= 0)) {
    wrongType(key, "a number >= 0");
    return fallback;
  }
  return *x;
}

bool ConfigReader::flag(StringRef key, bool fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback;
  std::optional<bool> b = v->getAsBoolean();
  if (!b) {
    wrongType(key, "true or false");
    return fallback;
  }
  return *b;
}

std::string ConfigReader::string(StringRef key, StringRef fallback) {
  const llvm::json::Value *v = read(key);
  if (!v)
    return fallback.str();
  std::optional<StringRef> s = v->getAsString();
  if (!s) {
    wrongType(key, "a string");
    return fallback.str();
  }
  return s->str();
}

void ConfigReader::harmless(llvm::ArrayRef<StringRef> keys) {
  for (StringRef key : keys)
    seen.insert(key);
}

void ConfigReader::refuse(StringRef key, const llvm::Twine &why) {
  seen.insert(key);
  errors.push_back(describe(key) + ": " + why.str());
}

void ConfigReader::error(const llvm::Twine &message) {
  errors.push_back(message.str());
}

void ConfigReader::reportUnknownFields() {
  // In the file's order would depend on the JSON object's hashing; sorted is
  // stable.
  std::vector<std::string> unknown;
  for (const auto &entry : config)
    if (!seen.contains(entry.first))
      unknown.push_back(entry.first.str());
  llvm::sort(unknown);
  for (const std::string &key : unknown)
    errors.push_back(describe(key) +
                     ": unknown to the importer, which cannot tell whether it "
                     "changes the model (docs/huggingface.md lists the fields "
                     "it reads)");
}
