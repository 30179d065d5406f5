//===- dpc-privacy.cpp - Epsilon and noise calibration from the shell -----===//
//
// dpc-privacy epsilon --q Q --sigma S --steps N --delta D
// dpc-privacy sigma   --q Q --epsilon E --steps N --delta D
// dpc-privacy delta   --q Q --sigma S --steps N --epsilon E
//
// The accountants of the runtime (privacy/Accountant.h, PldAccountant.h),
// the same numbers the trained program reports; --accountant pld (the
// default) or rdp. Every numeric flag is checked against its domain before
// it is converted. Exit status: 0 on success, 1 when the request is valid
// but impossible (no noise multiplier in range reaches the target), 2 for
// usage errors.
//
//===----------------------------------------------------------------------===//

#include "privacy/Accountant.h"
#include "privacy/PldAccountant.h"
#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cctype>
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

/// Counts (steps, records) up to 2^53: every whole number up to there is a
/// double (q = batch / size is then exact), and it is far inside int64_t.
constexpr int64_t kMaxCount = int64_t(1) << 53;

const char *const kUsage =
    R"(usage: dpc-privacy <command> [options]

Privacy accounting for DP-SGD with Poisson sampling and Gaussian noise, one
record as the privacy unit (add-or-remove-one neighbours). Two accountants:
  pld  privacy loss distributions (default): tight, an upper bound up to a
       loss grid of 1e-4; matches Google's dp-accounting PLDAccountant
  rdp  Renyi DP converted to (epsilon, delta); matches dp-accounting's
       RdpAccountant; looser

commands:
  epsilon   epsilon reached after --steps steps with noise multiplier --sigma
  sigma     smallest noise multiplier whose epsilon is <= --epsilon
  delta     smallest delta for which the steps are (--epsilon, delta)-DP

options:
  --accountant pld|rdp   the accountant (default pld)
  --q Q                  sampling rate in (0, 1]
  --expected-batch B     with --dataset-size N: q = B / N (instead of --q);
  --dataset-size N       whole numbers, 1 <= B <= N <= 2^53
  --sigma S              noise multiplier (noise std / clipping bound), > 0
  --epsilon E            target epsilon (> 0), for `sigma` and `delta`
  --steps N              number of training steps, a whole number in
                         [1, 2^53], at most 1e9 with pld (1e4 is accepted)
  --delta D              delta in (0, 1)
  --json                 print one JSON object instead of text
  -h, --help             this help

exit status: 0 success, 1 impossible request, 2 usage error

examples:
  dpc-privacy epsilon --q 0.01 --sigma 1.1 --steps 10000 --delta 1e-5
  dpc-privacy sigma --expected-batch 256 --dataset-size 60000 \
      --epsilon 3 --steps 2000 --delta 1e-5 --json
  dpc-privacy epsilon --accountant rdp --q 0.01 --sigma 1.1 --steps 1e4 \
      --delta 1e-5
)";

int usageError(const std::string &message) {
  std::fprintf(stderr, "dpc-privacy: error: %s\n", message.c_str());
  std::fprintf(stderr, "run 'dpc-privacy --help' for usage\n");
  return kExitUsage;
}

/// What values a numeric flag takes.
enum class Domain {
  /// A whole number in [1, kMaxCount].
  Count,
  /// (0, 1].
  Rate,
  /// (0, 1).
  OpenUnit,
  /// (0, inf).
  Positive,
};

struct FlagSpec {
  const char *name;
  Domain domain;
};

const FlagSpec kNumericFlags[] = {
    {"q", Domain::Rate},
    {"expected-batch", Domain::Count},
    {"dataset-size", Domain::Count},
    {"sigma", Domain::Positive},
    {"epsilon", Domain::Positive},
    {"steps", Domain::Count},
    {"delta", Domain::OpenUnit},
};

/// The number `text` spells completely (strtod syntax), if finite. An
/// underflow to 0 or a denormal is kept: the domain check decides.
std::optional<double> parseFinite(const std::string &text) {
  if (text.empty())
    return std::nullopt;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (*end != '\0' || !std::isfinite(value))
    return std::nullopt;
  return value;
}

/// The whole number that `text` spells in decimal, with an optional
/// fraction and exponent (10000, 1e4, 2.5e3), if it is one in [1, max].
/// Read digit by digit, never through a double: "9007199254740993" or
/// "4503599627370495.9" would round to a whole double.
std::optional<int64_t> parseCount(const std::string &text, int64_t max) {
  if (text.empty())
    return std::nullopt;
  size_t i = text[0] == '+' ? 1 : 0;
  std::string digits;
  int64_t pointShift = 0; // digits after the decimal point
  bool point = false;
  for (;
       i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) ||
                           (text[i] == '.' && !point));
       ++i) {
    if (text[i] == '.') {
      point = true;
      continue;
    }
    digits += text[i];
    pointShift += point;
  }
  if (digits.empty())
    return std::nullopt;
  int64_t exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+'))
      ++i;
    if (i == text.size())
      return std::nullopt;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
         ++i)
      exponent = std::min<int64_t>(exponent * 10 + (text[i] - '0'), 100000);
    if (negative)
      exponent = -exponent;
  }
  if (i != text.size())
    return std::nullopt;
  // value = digits * 10^(exponent - pointShift); whole only if the digits
  // shifted out are zeros.
  int64_t shift = exponent - pointShift;
  if (shift < 0) {
    size_t keep =
        digits.size() - static_cast<size_t>(std::min<int64_t>(
                            -shift, static_cast<int64_t>(digits.size())));
    if (digits.find_first_not_of('0', keep) != std::string::npos)
      return std::nullopt;
    digits.resize(keep);
  } else {
    // More than 30 zeros exceed any max anyway.
    digits.append(static_cast<size_t>(std::min<int64_t>(shift, 30)), '0');
  }
  int64_t value = 0;
  for (char c : digits) {
    if (value > (max - (c - '0')) / 10)
      return std::nullopt; // above max
    value = value * 10 + (c - '0');
  }
  if (value < 1)
    return std::nullopt;
  return value;
}

/// The value of --name given as `text`, checked against the flag's domain
/// before any conversion; an error message names the flag and the text.
std::string checkNumber(const FlagSpec &flag, const std::string &text,
                        double &value) {
  const std::string quoted = "'" + text + "'";
  if (flag.domain == Domain::Count) {
    std::optional<int64_t> count = parseCount(text, kMaxCount);
    if (!count)
      return std::string("--") + flag.name +
             " must be a whole number from 1 to 2^53, got " + quoted;
    value = static_cast<double>(*count);
    return "";
  }
  std::optional<double> number = parseFinite(text);
  if (!number)
    return std::string("--") + flag.name + " needs a finite number, got " +
           quoted;
  double v = *number;
  switch (flag.domain) {
  case Domain::Count:
    break;
  case Domain::Rate:
    if (!(v > 0 && v <= 1))
      return std::string("--") + flag.name + " must be in (0, 1], got " +
             quoted;
    break;
  case Domain::OpenUnit:
    if (!(v > 0 && v < 1))
      return std::string("--") + flag.name + " must be in (0, 1), got " +
             quoted;
    break;
  case Domain::Positive:
    if (!(v > 0))
      return std::string("--") + flag.name + " must be > 0, got " + quoted;
    break;
  }
  value = v;
  return "";
}

struct Request {
  std::string command;
  std::map<std::string, double> values;
  /// The text each numeric flag was given as, for messages.
  std::map<std::string, std::string> texts;
  AccountantKind accountant = kDefaultAccountant;
  bool json = false;

  bool has(const std::string &flag) const { return values.count(flag); }
  double get(const std::string &flag) const { return values.at(flag); }
  /// A Count flag; exact, since checkNumber bounded it by 2^53.
  int64_t count(const std::string &flag) const {
    return static_cast<int64_t>(values.at(flag));
  }
};

/// Parses argv into `request`; returns an error message or "".
std::string parseArguments(int argc, char **argv, Request &request) {
  bool accountantGiven = false;
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
    const FlagSpec *spec = nullptr;
    for (const FlagSpec &flag : kNumericFlags)
      if (name == flag.name)
        spec = &flag;
    if (!spec && name != "accountant")
      return "unknown option '--" + name + "'";
    if (!inlineValue) {
      if (i + 1 >= argc)
        return "--" + name + " needs a value";
      value = argv[++i];
    }
    if (!spec) {
      if (accountantGiven)
        return "--accountant given twice";
      std::optional<AccountantKind> kind = parseAccountantKind(value);
      if (!kind)
        return "--accountant must be pld or rdp, got '" + value + "'";
      request.accountant = *kind;
      accountantGiven = true;
      continue;
    }
    if (request.has(name))
      return "--" + name + " given twice";
    double number = 0;
    if (std::string error = checkNumber(*spec, value, number); !error.empty())
      return error;
    request.values[name] = number;
    request.texts[name] = value;
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
    return "";
  }
  if (!fromBatch)
    return "missing --q (or --expected-batch with --dataset-size)";
  if (!request.has("expected-batch") || !request.has("dataset-size"))
    return "--expected-batch and --dataset-size go together";
  int64_t batch = request.count("expected-batch");
  int64_t size = request.count("dataset-size");
  if (batch > size)
    return "--expected-batch cannot exceed --dataset-size (q would be > 1)";
  q = static_cast<double>(batch) / static_cast<double>(size);
  return "";
}

/// Checks that `flags` are given and `unused` are not.
std::string checkFlags(const Request &request,
                       std::initializer_list<const char *> flags,
                       const char *unused, const char *unusedReason) {
  if (request.has(unused))
    return std::string("--") + unused + " is " + unusedReason;
  for (const char *flag : flags)
    if (!request.has(flag))
      return std::string("missing --") + flag;
  return "";
}

/// How the accountant got its answer: the grid of a PLD, the order of RDP.
std::string accountantText(AccountantKind kind, double order, double interval) {
  std::string text = std::string(accountantName(kind)) + " accountant";
  if (kind == AccountantKind::Pld)
    return text + ", loss grid " + format(interval);
  return text + ", best RDP order " + format(order);
}

std::string accountantJson(AccountantKind kind, double order, double interval) {
  if (kind == AccountantKind::Pld)
    return ", \"interval\": " + jsonNumber(interval);
  return ", \"order\": " + jsonNumber(order);
}

/// The PLD accountant composes at most kMaxPldSteps steps.
std::string checkStepsForAccountant(const Request &request) {
  if (request.accountant == AccountantKind::Pld && request.has("steps") &&
      request.count("steps") > kMaxPldSteps)
    return "--steps must be at most 10^9 with the pld accountant (its "
           "rounding grows with the steps; --accountant rdp has no limit), "
           "got '" +
           request.texts.at("steps") + "'";
  return "";
}

int runEpsilon(const Request &request) {
  if (std::string error = checkFlags(request, {"sigma", "steps", "delta"},
                                     "epsilon", "for `sigma` and `delta`");
      !error.empty())
    return usageError(error);
  double q = 0;
  if (std::string error = resolveSamplingRate(request, q); !error.empty())
    return usageError(error);
  const double sigma = request.get("sigma"), delta = request.get("delta");
  const int64_t steps = request.count("steps");
  const AccountantKind kind = request.accountant;
  EpsilonAndOrder result = epsilon(kind, q, sigma, steps, delta);
  if (request.json) {
    std::printf("{\"command\": \"epsilon\", \"accountant\": \"%s\", \"q\": %s, "
                "\"sigma\": %s, \"steps\": %lld, \"delta\": %s, "
                "\"epsilon\": %s%s}\n",
                accountantName(kind), jsonNumber(q).c_str(),
                jsonNumber(sigma).c_str(), static_cast<long long>(steps),
                jsonNumber(delta).c_str(), jsonNumber(result.epsilon).c_str(),
                accountantJson(kind, result.order, result.interval).c_str());
  } else {
    std::printf("epsilon = %s  (delta = %s, %s)\n",
                format(result.epsilon).c_str(), format(delta).c_str(),
                accountantText(kind, result.order, result.interval).c_str());
    std::printf("  q = %s, sigma = %s, steps = %lld\n", format(q).c_str(),
                format(sigma).c_str(), static_cast<long long>(steps));
  }
  return 0;
}

int runDelta(const Request &request) {
  if (std::string error = checkFlags(request, {"sigma", "steps", "epsilon"},
                                     "delta", "for `epsilon` and `sigma`");
      !error.empty())
    return usageError(error);
  double q = 0;
  if (std::string error = resolveSamplingRate(request, q); !error.empty())
    return usageError(error);
  const double sigma = request.get("sigma"), eps = request.get("epsilon");
  const int64_t steps = request.count("steps");
  const AccountantKind kind = request.accountant;
  double delta = 0, order = 0, interval = 0;
  if (kind == AccountantKind::Pld) {
    PldAccountant accountant;
    accountant.compose(q, sigma, steps);
    delta = accountant.delta(eps);
    interval = accountant.distribution().remove.interval;
  } else {
    RdpAccountant accountant;
    accountant.compose(q, sigma, steps);
    delta = accountant.delta(eps);
  }
  if (request.json) {
    std::printf("{\"command\": \"delta\", \"accountant\": \"%s\", \"q\": %s, "
                "\"sigma\": %s, \"steps\": %lld, \"epsilon\": %s, "
                "\"delta\": %s%s}\n",
                accountantName(kind), jsonNumber(q).c_str(),
                jsonNumber(sigma).c_str(), static_cast<long long>(steps),
                jsonNumber(eps).c_str(), jsonNumber(delta).c_str(),
                kind == AccountantKind::Pld
                    ? accountantJson(kind, order, interval).c_str()
                    : "");
  } else {
    std::printf("delta = %s  (epsilon = %s, %s)\n", format(delta).c_str(),
                format(eps).c_str(),
                kind == AccountantKind::Pld
                    ? accountantText(kind, order, interval).c_str()
                    : "rdp accountant");
    std::printf("  q = %s, sigma = %s, steps = %lld\n", format(q).c_str(),
                format(sigma).c_str(), static_cast<long long>(steps));
  }
  return 0;
}

int runSigma(const Request &request) {
  if (std::string error = checkFlags(request, {"epsilon", "steps", "delta"},
                                     "sigma", "for `epsilon` and `delta`");
      !error.empty())
    return usageError(error);
  double q = 0;
  if (std::string error = resolveSamplingRate(request, q); !error.empty())
    return usageError(error);
  const double target = request.get("epsilon"), delta = request.get("delta");
  const int64_t steps = request.count("steps");
  const AccountantKind kind = request.accountant;
  SigmaCalibration result = calibrateSigma(kind, target, delta, q, steps);
  if (!result.ok()) {
    std::fprintf(stderr, "dpc-privacy: error: %s\n", result.error.c_str());
    return kExitImpossible;
  }
  if (request.json) {
    std::printf("{\"command\": \"sigma\", \"accountant\": \"%s\", \"q\": %s, "
                "\"target_epsilon\": %s, \"steps\": %lld, \"delta\": %s, "
                "\"sigma\": %s, \"epsilon\": %s%s}\n",
                accountantName(kind), jsonNumber(q).c_str(),
                jsonNumber(target).c_str(), static_cast<long long>(steps),
                jsonNumber(delta).c_str(), jsonNumber(result.sigma).c_str(),
                jsonNumber(result.epsilon).c_str(),
                accountantJson(kind, result.order, result.interval).c_str());
  } else {
    std::printf("sigma = %.7g  (epsilon = %s <= %s at delta = %s, %s)\n",
                result.sigma, format(result.epsilon).c_str(),
                format(target).c_str(), format(delta).c_str(),
                accountantText(kind, result.order, result.interval).c_str());
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
    return usageError("missing command (epsilon, sigma or delta)");
  if (std::string error = checkStepsForAccountant(request); !error.empty())
    return usageError(error);
  if (request.command == "epsilon")
    return runEpsilon(request);
  if (request.command == "sigma")
    return runSigma(request);
  if (request.command == "delta")
    return runDelta(request);
  return usageError("unknown command '" + request.command +
                    "' (expected epsilon, sigma or delta)");
}
