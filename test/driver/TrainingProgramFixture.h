//===- TrainingProgramFixture.h - Running the fixture programs --*- C++ -*-===//
//
// The fixture of the training-program tests (TrainingProgramTest.cpp,
// TrainingProgramOutputsTest.cpp): the data of FixtureFiles.h, `train` to
// run a fixture program, and readers of what the programs write.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_DRIVER_TRAININGPROGRAMFIXTURE_H
#define DPC_TEST_DRIVER_TRAININGPROGRAMFIXTURE_H

#include "Checkpoint.h"
#include "CheckpointReader.h"
#include "FixtureData.h"
#include "FixtureFiles.h"
#include "Json.h"
#include "ProcessHelpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace dpctest {

using dprt::driver::JsonValue;
using dprt::driver::resolveCheckpoint;

inline std::vector<JsonValue> readJsonLines(const std::string &path) {
  std::vector<JsonValue> lines;
  std::istringstream in(readFile(path));
  std::string line;
  while (std::getline(in, line))
    lines.push_back(JsonValue::parse(line));
  return lines;
}

/// Every parameter of a checkpoint as doubles, by name, read with the
/// CheckpointReader (gathered from the shard files).
inline std::vector<std::pair<std::string, std::vector<double>>>
readParams(const std::string &checkpointDir) {
  dprt::driver::CheckpointReader reader(checkpointDir);
  std::vector<std::pair<std::string, std::vector<double>>> params;
  for (const auto &p : reader.parameters()) {
    std::vector<double> values(p.numel());
    reader.read(p.name, dprt::DType::F64, values.data());
    params.emplace_back(p.name, values);
  }
  return params;
}

/// Every file of the checkpoint `dir` stands for, by name.
inline std::map<std::string, std::string>
checkpointFiles(const std::string &dir) {
  std::map<std::string, std::string> files;
  for (const auto &e :
       std::filesystem::directory_iterator(resolveCheckpoint(dir)))
    files[e.path().filename().string()] = readFile(e.path().string());
  return files;
}

inline std::string checkpointFile(const std::string &dir,
                                  const std::string &name) {
  return readFile(resolveCheckpoint(dir) + "/" + name);
}

/// The largest |a - b| / max(|a|, |b|, floor) over all parameters.
inline double maxRelativeDifference(const std::string &dirA,
                                    const std::string &dirB,
                                    double floor = 1e-3) {
  auto a = readParams(dirA), b = readParams(dirB);
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t p = 0; p < std::min(a.size(), b.size()); ++p) {
    EXPECT_EQ(a[p].first, b[p].first);
    EXPECT_EQ(a[p].second.size(), b[p].second.size());
    for (size_t i = 0; i < a[p].second.size(); ++i) {
      double x = a[p].second[i], y = b[p].second[i];
      double scale = std::max({std::fabs(x), std::fabs(y), floor});
      worst = std::max(worst, std::fabs(x - y) / scale);
    }
  }
  return worst;
}

class TrainingProgram : public FixtureFiles {
protected:
  RunResult train(const std::string &binary, std::vector<std::string> args,
                  const std::vector<std::string> &env = {}) {
    args.push_back("--quiet");
    if (binary == kBigram1 || binary == kBigram2) {
      args.push_back("--noise-key");
      args.push_back(key_);
    }
    return runProgram(binary, args, env);
  }
};

} // namespace dpctest

#endif // DPC_TEST_DRIVER_TRAININGPROGRAMFIXTURE_H
