//===- FixtureData.cpp - Data files for the fixture programs --------------===//

#include "FixtureData.h"

#include "Checksum.h"
#include "ProcessHelpers.h"

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace dpctest {

const char *const kClassifier1 = DPC_FIXTURE_CLASSIFIER_1;
const char *const kClassifier2 = DPC_FIXTURE_CLASSIFIER_2;
const char *const kClassifier3 = DPC_FIXTURE_CLASSIFIER_3;
const char *const kClassifierF64 = DPC_FIXTURE_CLASSIFIER_F64;
const char *const kClassifierOneUnit = DPC_FIXTURE_CLASSIFIER_ONE_UNIT;
const char *const kBigram1 = DPC_FIXTURE_BIGRAM_1;
const char *const kBigram2 = DPC_FIXTURE_BIGRAM_2;

std::string classifierCsv(int records) {
  // A small linear congruential generator keeps the file the same on every
  // platform.
  uint64_t state = 12345;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1;
  };
  std::ostringstream os;
  os << "f0,f1,f2,f3,label\n";
  char line[128];
  for (int i = 0; i < records; ++i) {
    int label = i % 3;
    double f[4];
    for (int j = 0; j < 4; ++j)
      f[j] = (j == label ? 2.0 : 0.0) + 0.8 * uniform();
    std::snprintf(line, sizeof(line), "%.5f,%.5f,%.5f,%.5f,%d\n", f[0], f[1],
                  f[2], f[3], label);
    os << line;
  }
  return os.str();
}

std::string bigramText(int lines) {
  const char *words[] = {"the cat sat", "a dog ran", "the sun set", "a cat ran",
                         "the dog sat"};
  std::ostringstream os;
  for (int i = 0; i < lines; ++i)
    os << words[i % 5] << "\n";
  return os.str();
}

namespace {

/// `"bytes": N, "xxh3_64": "0x..."` of `content`.
std::string record(const std::string &content) {
  dprt::driver::Checksum checksum;
  checksum.update(content.data(), content.size());
  return "\"bytes\": " + std::to_string(content.size()) + ", \"xxh3_64\": \"" +
         dprt::driver::checksumText(checksum.value()) + "\"";
}

/// Replaces the record of `before` in file `path` by that of `after`.
void replaceRecord(const std::string &path, const std::string &before,
                   const std::string &after) {
  std::string text = readFile(path);
  const size_t at = text.find(record(before));
  if (at == std::string::npos)
    throw std::runtime_error(path + " does not record the file replaced");
  text.replace(at, record(before).size(), record(after));
  writeFile(path, text);
}

} // namespace

void rewriteCheckpointFile(const std::string &checkpoint,
                           const std::string &name,
                           const std::string &content) {
  const std::string path = checkpoint + "/" + name;
  const std::string before = readFile(path);
  writeFile(path, content);
  if (name == "manifest.json") {
    replaceRecord(checkpoint + "/state.json", before, content);
    return;
  }
  const std::string manifest = readFile(checkpoint + "/manifest.json");
  replaceRecord(checkpoint + "/manifest.json", before, content);
  replaceRecord(checkpoint + "/state.json", manifest,
                readFile(checkpoint + "/manifest.json"));
}

} // namespace dpctest
