//===- PrivacyReportTest.cpp - JSON and text privacy reports --------------===//

#include "privacy/PrivacyReport.h"

#include "privacy/Accountant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

using namespace dprt::privacy;

namespace {

/// The raw text of a top-level JSON value by key, from a flat object.
std::string jsonField(const std::string &json, const std::string &key) {
  std::string needle = "\"" + key + "\": ";
  size_t start = json.find(needle);
  if (start == std::string::npos)
    return "";
  start += needle.size();
  size_t end = json[start] == '"' ? json.find('"', start + 1) + 1
                                  : json.find_first_of(",}", start);
  return json.substr(start, end - start);
}

TEST(PrivacyReport, EpsilonComesFromTheAccountant) {
  PrivacyReport report = makePrivacyReport(1.1, 1.0, 0.01, 10000, 1e-5);
  EpsilonAndOrder expected = epsilon(0.01, 1.1, 10000, 1e-5);
  EXPECT_EQ(report.epsilon, expected.epsilon);
  EXPECT_EQ(report.rdpOrder, expected.order);
  EXPECT_EQ(report.sampler, "poisson");
  EXPECT_EQ(report.accountant, "rdp");
}

TEST(PrivacyReport, JsonHasEveryFieldAndRoundTripsNumbers) {
  PrivacyReport report = makePrivacyReport(0.9, 2.5, 0.004, 1234, 1e-6);
  std::string json = toJson(report);
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_EQ(jsonField(json, "accountant"), "\"rdp\"");
  EXPECT_EQ(jsonField(json, "sampler"), "\"poisson\"");
  EXPECT_EQ(jsonField(json, "noise_generator"), "\"philox\"");
  EXPECT_EQ(std::strtod(jsonField(json, "noise_multiplier").c_str(), nullptr),
            0.9);
  EXPECT_EQ(std::strtod(jsonField(json, "max_grad_norm").c_str(), nullptr),
            2.5);
  EXPECT_EQ(std::strtod(jsonField(json, "sampling_rate").c_str(), nullptr),
            0.004);
  EXPECT_EQ(jsonField(json, "steps"), "1234");
  EXPECT_EQ(std::strtod(jsonField(json, "delta").c_str(), nullptr), 1e-6);
  EXPECT_EQ(std::strtod(jsonField(json, "epsilon").c_str(), nullptr),
            report.epsilon);
  EXPECT_EQ(std::strtod(jsonField(json, "rdp_order").c_str(), nullptr),
            report.rdpOrder);
  EXPECT_EQ(json.find("note"), std::string::npos);
}

TEST(PrivacyReport, InfiniteEpsilonIsJsonNull) {
  PrivacyReport report = makePrivacyReport(0.0, 1.0, 0.01, 10, 1e-5);
  EXPECT_EQ(jsonField(toJson(report), "epsilon"), "null");
  EXPECT_EQ(jsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
}

TEST(PrivacyReport, StringsAreEscaped) {
  EXPECT_EQ(jsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(PrivacyReport, ShuffleRunsCarryTheSamplingNote) {
  PrivacyReport report =
      makePrivacyReport(1.0, 1.0, 0.01, 100, 1e-5, "shuffle", "chacha20");
  EXPECT_TRUE(report.samplerMismatch());
  std::string json = toJson(report);
  EXPECT_EQ(jsonField(json, "note"),
            "\"the RDP bound assumes Poisson sampling; this run used "
            "shuffling\"");
  std::ostringstream text;
  printPrivacyReport(text, report);
  EXPECT_NE(text.str().find("assumes Poisson sampling"), std::string::npos);
  EXPECT_NE(text.str().find("chacha20"), std::string::npos);
}

TEST(PrivacyReport, TextBlockNamesTheGuarantee) {
  PrivacyReport report = makePrivacyReport(1.1, 1.0, 0.01, 10000, 1e-5);
  std::ostringstream text;
  printPrivacyReport(text, report);
  EXPECT_NE(text.str().find("(epsilon = 5.63201, delta = 1e-05)-DP"),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find("C = 1"), std::string::npos);
  EXPECT_EQ(text.str().find("note"), std::string::npos);
}

} // namespace
