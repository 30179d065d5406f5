//===- FixtureFiles.h - The data the fixture programs train on --*- C++ -*-===//
//
// A test fixture holding a temporary folder with the classifier's CSV, the
// bigram model's corpus and a noise key, for the tests that run the fixture
// programs (TrainingProgramFixture.h, CheckpointTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_DRIVER_FIXTUREFILES_H
#define DPC_TEST_DRIVER_FIXTUREFILES_H

#include "FixtureData.h"
#include "ProcessHelpers.h"

#include <gtest/gtest.h>

#include <string>

namespace dpctest {

class FixtureFiles : public ::testing::Test {
protected:
  void SetUp() override {
    csv_ = dir_ / "data.csv";
    writeFile(csv_, classifierCsv(300));
    text_ = dir_ / "corpus.txt";
    writeFile(text_, bigramText(200));
    // The language model fixture uses the secure (ChaCha20) generator, whose
    // key comes from the operating system unless a file gives it: runs that
    // must agree share this one.
    key_ = dir_ / "noise.key";
    writeFile(key_, std::string(64, 'a') + "\n");
  }

  TempDir dir_;
  std::string csv_, text_, key_;
};

} // namespace dpctest

#endif // DPC_TEST_DRIVER_FIXTUREFILES_H
