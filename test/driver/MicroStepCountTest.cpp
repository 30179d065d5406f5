//===- MicroStepCountTest.cpp - Steps of one micro-step where needed ------===//
//
// requireMicroStepCount (MicroStepCount.cpp): a program whose update forms a
// parameter's clipped sum from the per-sample gradients of the step's one
// micro-step, or whose micro-step writes a gradient instead of adding to it,
// runs no step of more or fewer micro-steps, and says which dpc option
// compiles it for them; any other program runs any number.
//
//===----------------------------------------------------------------------===//

#include "MicroStepCount.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

using namespace dprt;
using namespace dprt::driver;

namespace {

ProgramSpec programWith(bool fromRows, bool overwritten) {
  ProgramSpec spec;
  ParamSpec plain{"plain", {4}, 0, 0, 0, true, {}, {}};
  ParamSpec marked{"w", {4, 4}, 0, 4, 4, true, {}, {}};
  marked.sumFromRows = fromRows;
  marked.gradOverwritten = overwritten;
  spec.params = {plain, marked};
  return spec;
}

std::string errorOf(const ProgramSpec &spec, int64_t microSteps) {
  try {
    requireMicroStepCount(spec, microSteps);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

TEST(MicroStepCount, AnyForAProgramThatAddsItsGradients) {
  const ProgramSpec spec = programWith(false, false);
  for (int64_t n : {0, 1, 2, 7})
    EXPECT_EQ(errorOf(spec, n), "") << n;
}

TEST(MicroStepCount, OneWhereTheUpdateSumsRows) {
  const ProgramSpec spec = programWith(true, false);
  EXPECT_EQ(errorOf(spec, 1), "");
  for (int64_t n : {0, 2}) {
    const std::string error = errorOf(spec, n);
    EXPECT_NE(error.find("a step of " + std::to_string(n) + " micro-steps"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("'w''s clipped sum"), std::string::npos) << error;
    EXPECT_NE(error.find("--sum-in-update=off"), std::string::npos) << error;
  }
}

TEST(MicroStepCount, OneWhereTheMicroStepWritesGradients) {
  const ProgramSpec spec = programWith(false, true);
  EXPECT_EQ(errorOf(spec, 1), "");
  for (int64_t n : {0, 3}) {
    const std::string error = errorOf(spec, n);
    EXPECT_NE(error.find("a step of " + std::to_string(n) + " micro-steps"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find("writes 'w''s gradient"), std::string::npos) << error;
    EXPECT_NE(error.find("--overwrite-gradients=off"), std::string::npos)
        << error;
  }
}

} // namespace
