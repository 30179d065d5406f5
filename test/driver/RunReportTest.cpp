//===- RunReportTest.cpp - The final report's lines
//------------------------===//
//
// The kernel-tuning line: a CUDA run whose backend timed cuBLASLt's
// candidates says how many product shapes and how long (it is part of the
// first steps' time, and DPRT_GEMM_TUNING=0 skips it); a run that timed
// none (the CPU backend) prints no such line.
//
//===----------------------------------------------------------------------===//

#include "RunReport.h"

#include <gtest/gtest.h>

#include <string>

using namespace dprt;
using namespace dprt::driver;

namespace {

std::string reportText(const RunReport &report) {
  ProgramSpec spec;
  spec.model = "m";
  spec.backend = "cuda";
  spec.recipe.maxNorm = 1.0;
  spec.recipe.sigma = 1.0;
  spec.recipe.delta = 1e-5;
  spec.recipe.sampling = SamplingKind::Poisson;
  spec.recipe.rate = 0.05;
  spec.recipe.steps = 4;
  Options options;
  options.seed = 3;
  PrivacySession privacy =
      PrivacySession::start(options, spec.recipe, 100, 4, true);
  RunEnding ending;
  ending.step = 4;
  ending.totalSteps = 4;
  return report.text(spec, 1, "", ending, privacy, Hyperparameters{}, false);
}

} // namespace

TEST(RunReport, KernelTuningLineOnlyWhereShapesWereTimed) {
  RunReport report;
  EXPECT_EQ(reportText(report).find("kernel tuning"), std::string::npos);
  report.setKernelTuning(105, 11.437);
  const std::string text = reportText(report);
  EXPECT_NE(text.find("\n  kernel tuning     105 product shapes timed in "
                      "11.44 s (in the first steps; DPRT_GEMM_TUNING=0 "
                      "skips it)\n"),
            std::string::npos)
      << text;
  // After the memory line, before the privacy report.
  EXPECT_LT(text.find("memory per rank"), text.find("kernel tuning"));
  EXPECT_LT(text.find("kernel tuning"), text.find("privacy report"));
}
