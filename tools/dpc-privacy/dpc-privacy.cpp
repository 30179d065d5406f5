//===- dpc-privacy.cpp - Epsilon and noise calibration from the shell -----===//
//
// dpc-privacy epsilon --q Q --sigma S --steps N --delta D
// dpc-privacy sigma   --q Q --epsilon E --steps N --delta D
//
// The RDP accountant of the runtime (privacy/Accountant.h), the same numbers
// the trained program reports. Exit status: 0 on success, 1 when the request
// is valid but impossible (no noise multiplier in range reaches the target),
// 2 for usage errors.
//
//===----------------------------------------------------------------------===//

#include "privacy/Accountant.h"
#include "privacy/PrivacyReport.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

using namespace dprt::privacy;

namespace {

constexpr int kExitImpossible = 1;
constexpr int kExitUsage = 2;

const char *const kUsage =
    R"(usage: dpc-privacy <command> [options]

Privacy accounting for DP-SGD with Poisson sampling and Gaussian noise
(Renyi DP of the sampled Gaussian mechanism, converted to (epsilon, delta)
as Google's dp-accounting does).

commands:
  epsilon   epsilon reached after --steps steps with noise multiplier --sigma
  sigma     smallest noise multiplier whose epsilon is <= --epsilon

options:
  --q Q                  sampling rate in (0, 1]
  --expected-batch B     with --dataset-size N: q = B / N (instead of --q)
  --dataset-size N
  --sigma S              noise multiplier (noise std / clipping bound), >= 0
  --epsilon E            target epsilon (> 0), for `sigma`
  --steps N              number of training steps (a whole number)
  --delta D              delta in (0, 1)
  --json                 print one JSON object instead of text
  -h, --help             this help

exit status: 0 success, 1 impossible request, 2 usage error

examples:
  dpc-privacy epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5
  dpc-privacy sigma --expected-batch 256 --dataset-size 60000 \
      --epsilon 3 --steps 2000 --delta 1e-5 --json
)";

int usageError(const std::string &message) {
  std::fprintf(stderr, "dpc-privacy: error: %s\n", message.c_str());
  std::fprintf(stderr, "run 'dpc-privacy --help' for usage\n");
  return kExitUsage;
}

/// A finite number spelled completely by `text` (strtod syntax).
std::optional<double> parseNumber(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || *end != '\0' || !std::isfinite(value))
    return std::nullopt;
  return value;
}

struct Request {
  std::string command;
  std::map<std::string, double> values;
  bool json = false;

  bool has(const std::string &flag) const { return values.count(flag); }
  double get(const std::string &flag) const { return values.at(flag); }
};

const char *const kValueFlags[] = {"q",     "expected-batch", "dataset-size",
                                   "sigma", "epsilon",        "steps",
                                   "delta"};

/// Parses argv into `request`; returns an error message or "".
std::string parseArguments(int argc, char **argv, Request &request) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      if (!request.command.empty())
        return "unexpected argument '" + arg + "'";
      request.command = arg;
      continue;
    }
    std::string name = arg.substr(2), value;
    bool inlineValue = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inlineValue = true;
    }
    if (name == "json") {
      if (inlineValue)
        return "--json takes no value";
      request.json = true;
      continue;
    }
    bool known = false;
    for (const char *flag : kValueFlags)
      known |= name == flag;
    if (!known)
      return "unknown option '--" + name + "'";
    if (!inlineValue) {
      if (i + 1 >= argc)
        return "--" + name + " needs a value";
      value = argv[++i];
    }
    std::optional<double> number = parseNumber(value);
    if (!number)
      return "--" + name + " needs a number, got '" + value + "'";
    if (request.has(name))
      return "--" + name + " given twice";
    request.values[name] = *number;
  }
  return "";
}

std::string format(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

/// The sampling rate from --q or --expected-batch / --dataset-size.
std::string resolveSamplingRate(const Request &request, double &q) {
  bool fromBatch = request.has("expected-batch") || request.has("dataset-size");
  if (request.has("q") && fromBatch)
    return "give either --q or --expected-batch with --dataset-size, not both";
  if (request.has("q")) {
    q = request.get("q");
    if (q <= 0 || q > 1)
      return "--q must be in (0, 1], got " + format(q);
    return "";
  }
  if (!fromBatch)
    return "missing --q (or --expected-batch with --dataset-size)";
  if (!request.has("expected-batch") || !request.has("dataset-size"))
    return "--expected-batch and --dataset-size go together";
  double batch = request.get("expected-batch");
  double size = request.get("dataset-size");
  if (size < 1 || size != std::floor(size))
    return "--dataset-size must be a whole number >= 1";
  if (batch <= 0)
    return "--expected-batch must be > 0";
  if (batch > size)
    return "--expected-batch cannot exceed --dataset-size (q would be > 1)";
  q = batch / size;
  return "";
}

std::string require(const Request &request,
                    std::initializer_list<const char *> flags) {
  for (const char *flag : flags)
    if (!request.has(flag))
      return std::string("missing --") + flag;
  return "";
}

int runEpsilon(const Request &request) {
  if (request.has("epsilon"))
    return usageError("--epsilon is for the `sigma` command");
  if (std::string error = require(request, {"sigma", "steps", "delta"});
      !error.empty())
    return usageError(error);
  double q = 0;
  if (std::string error = resolveSamplingRate(request, q); !error.empty())
    return usageError(error);
  double sigma = request.get("sigma"), steps = request.get("steps"),
         delta = request.get("delta");
  if (std::string error = checkEpsilonRequest(q, sigma, steps, delta);
      !error.empty())
    return usageError(error);
  EpsilonAndOrder result =
      epsilon(q, sigma, static_cast<int64_t>(steps), delta);
  if (request.json) {
    std::printf("{\"command\": \"epsilon\", \"q\": %s, \"sigma\": %s, "
                "\"steps\": %lld, \"delta\": %s, \"epsilon\": %s, "
                "\"order\": %s}\n",
                jsonNumber(q).c_str(), jsonNumber(sigma).c_str(),
                static_cast<long long>(steps), jsonNumber(delta).c_str(),
                jsonNumber(result.epsilon).c_str(),
                jsonNumber(result.order).c_str());
  } else {
    std::printf("epsilon = %s  (delta = %s, best RDP order %s)\n",
                format(result.epsilon).c_str(), format(delta).c_str(),
                format(result.order).c_str());
    std::printf("  q = %s, sigma = %s, steps = %lld\n", format(q).c_str(),
                format(sigma).c_str(), static_cast<long long>(steps));
  }
  return 0;
}

int runSigma(const Request &request) {
  if (request.has("sigma"))
    return usageError("--sigma is for the `epsilon` command");
  if (std::string error = require(request, {"epsilon", "steps", "delta"});
      !error.empty())
    return usageError(error);
  double q = 0;
  if (std::string error = resolveSamplingRate(request, q); !error.empty())
    return usageError(error);
  double target = request.get("epsilon"), steps = request.get("steps"),
         delta = request.get("delta");
  if (target <= 0)
    return usageError("--epsilon must be > 0, got " + format(target));
  if (steps < 1 || steps != std::floor(steps) || steps > 9.0e15)
    return usageError("--steps must be a whole number >= 1, got " +
                      format(steps));
  if (delta <= 0 || delta >= 1)
    return usageError("--delta must be in (0, 1), got " + format(delta));
  SigmaCalibration result =
      calibrateSigma(target, delta, q, static_cast<int64_t>(steps));
  if (!result.ok()) {
    std::fprintf(stderr, "dpc-privacy: error: %s\n", result.error.c_str());
    return kExitImpossible;
  }
  if (request.json) {
    std::printf("{\"command\": \"sigma\", \"q\": %s, \"target_epsilon\": %s, "
                "\"steps\": %lld, \"delta\": %s, \"sigma\": %s, "
                "\"epsilon\": %s, \"order\": %s}\n",
                jsonNumber(q).c_str(), jsonNumber(target).c_str(),
                static_cast<long long>(steps), jsonNumber(delta).c_str(),
                jsonNumber(result.sigma).c_str(),
                jsonNumber(result.epsilon).c_str(),
                jsonNumber(result.order).c_str());
  } else {
    std::printf("sigma = %.7g  (epsilon = %s <= %s at delta = %s, best RDP "
                "order %s)\n",
                result.sigma, format(result.epsilon).c_str(),
                format(target).c_str(), format(delta).c_str(),
                format(result.order).c_str());
    std::printf("  q = %s, steps = %lld\n", format(q).c_str(),
                static_cast<long long>(steps));
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Request request;
  if (std::string error = parseArguments(argc, argv, request); !error.empty())
    return usageError(error);
  if (request.command.empty())
    return usageError("missing command (epsilon or sigma)");
  if (request.command == "epsilon")
    return runEpsilon(request);
  if (request.command == "sigma")
    return runSigma(request);
  return usageError("unknown command '" + request.command +
                    "' (expected epsilon or sigma)");
}
