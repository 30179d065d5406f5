//===- FixtureData.h - Data files for the fixture programs ------*- C++ -*-===//

#ifndef DPC_TEST_DRIVER_FIXTUREDATA_H
#define DPC_TEST_DRIVER_FIXTUREDATA_H

#include <string>

namespace dpctest {

/// The fixture programs (test/driver/CMakeLists.txt), built for these tests.
extern const char *const kClassifier1;
extern const char *const kClassifier2;
extern const char *const kClassifier3;
extern const char *const kClassifierF64;
extern const char *const kClassifierOneUnit;
extern const char *const kBigram1;
extern const char *const kBigram2;

/// CSV for the classifier: three well separated classes in 4 features;
/// record i has class i % 3. The same file on every platform.
std::string classifierCsv(int records);

/// Short lines of a repetitive text, for the bigram model (16 tokens).
std::string bigramText(int lines);

/// Replaces file `name` of the checkpoint directory `checkpoint` (a step
/// directory) by `content` and updates the checksums that record it: a
/// shard file's size and XXH3-64 in manifest.json, then manifest.json's in
/// state.json. A corrupt file that passes the checksums, to reach the checks
/// behind them.
void rewriteCheckpointFile(const std::string &checkpoint,
                           const std::string &name, const std::string &content);

} // namespace dpctest

#endif // DPC_TEST_DRIVER_FIXTUREDATA_H
