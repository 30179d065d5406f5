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

/// Steps of 1 micro-step are taken; of 0 and `several`, refused with an
/// error naming the parameter (`what` of it) and the dpc option.
void expectOneOnly(const ProgramSpec &spec, int64_t several,
                   const std::string &what, const std::string &option) {
  EXPECT_EQ(errorOf(spec, 1), "");
  for (int64_t n : {int64_t(0), several}) {
    const std::string error = errorOf(spec, n);
    EXPECT_NE(error.find("a step of " + std::to_string(n) + " micro-steps"),
              std::string::npos)
        << error;
    EXPECT_NE(error.find(what), std::string::npos) << error;
    EXPECT_NE(error.find(option), std::string::npos) << error;
  }
}

TEST(MicroStepCount, OneWhereTheUpdateSumsRows) {
  expectOneOnly(programWith(true, false), 2, "'w''s clipped sum",
                "--sum-in-update=off");
}

TEST(MicroStepCount, OneWhereTheMicroStepWritesGradients) {
  expectOneOnly(programWith(false, true), 3, "writes 'w''s gradient",
                "--overwrite-gradients=off");
}

} // namespace
