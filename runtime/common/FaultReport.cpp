//===- FaultReport.cpp - What a process was doing when a rank failed ------===//

#include "common/FaultReport.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace dprt::faults {
namespace {

std::atomic<int64_t> step{0};
std::atomic<const char *> collective{nullptr};
std::atomic<int64_t> sequence{0};

// What the signal handler prints, prepared before it can run.
char programName[128] = "train";
int reportedRank = 0;

/// Appends `text` to buf[at..size), returns the new end (signal-safe).
size_t append(char *buf, size_t size, size_t at, const char *text) {
  while (*text && at + 1 < size)
    buf[at++] = *text++;
  return at;
}

size_t appendNumber(char *buf, size_t size, size_t at, int64_t value) {
  char digits[24];
  int n = 0;
  uint64_t v = value < 0 ? uint64_t(-(value + 1)) + 1 : uint64_t(value);
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v && n < 23);
  if (value < 0)
    at = append(buf, size, at, "-");
  while (n > 0 && at + 1 < size)
    buf[at++] = digits[--n];
  return at;
}

/// describeActivity, into a fixed buffer (signal-safe).
size_t appendActivity(char *buf, size_t size, size_t at) {
  const int64_t s = step.load();
  const char *name = collective.load();
  if (name) {
    at = append(buf, size, at, "in ");
    at = append(buf, size, at, name);
    at = append(buf, size, at, " #");
    at = appendNumber(buf, size, at, sequence.load());
    at = append(buf, size, at, " of step ");
    return appendNumber(buf, size, at, s);
  }
  if (s == 0)
    return append(buf, size, at, "before the first step");
  at = append(buf, size, at, "in step ");
  at = appendNumber(buf, size, at, s);
  return append(buf, size, at, ", outside collectives");
}

extern "C" void reportTermination(int signal) {
  char buf[512];
  size_t at = append(buf, sizeof buf, 0, programName);
  at = append(buf, sizeof buf, at, ": rank ");
  at = appendNumber(buf, sizeof buf, at, reportedRank);
  at = append(buf, sizeof buf, at,
              signal == SIGINT ? ": stopped by SIGINT "
                               : ": stopped by SIGTERM ");
  at = appendActivity(buf, sizeof buf, at);
  at = append(buf, sizeof buf, at,
              "; the launcher ends the job when another rank fails or the "
              "job is cancelled\n");
  ssize_t ignored = write(STDERR_FILENO, buf, at);
  (void)ignored;
  _exit(128 + signal);
}

} // namespace

void setStep(int64_t s) { step.store(s); }
int64_t currentStep() { return step.load(); }

void enterCollective(const char *name, int64_t number) {
  sequence.store(number);
  collective.store(name);
}

void leaveCollective() { collective.store(nullptr); }

std::string describeActivity() {
  char buf[256];
  size_t at = appendActivity(buf, sizeof buf, 0);
  return std::string(buf, at);
}

std::string describeCollective(const char *name, int64_t number) {
  const int64_t s = step.load();
  return std::string(name) + " #" + std::to_string(number) +
         (s == 0 ? std::string(" before the first step")
                 : " of step " + std::to_string(s));
}

void installTerminationReport(const std::string &program, int rank) {
  std::strncpy(programName, program.c_str(), sizeof programName - 1);
  reportedRank = rank;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = reportTermination;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

void endProcess(const std::string &message, int status) {
  std::fflush(stdout);
  const std::string line =
      std::string(programName) + ": error: " + message + "\n";
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
  _exit(status);
}

void injectTestFault(int rank, int64_t atStep) {
  const char *value = std::getenv("DPRT_TEST_FAULT");
  if (!value || !*value)
    return;
  const std::string text = value;
  const size_t first = text.find(':'), second = text.rfind(':');
  auto malformed = [&]() -> std::invalid_argument {
    return std::invalid_argument("DPRT_TEST_FAULT=" + text +
                                 " is not RANK:exit:STEP or RANK:hang:STEP");
  };
  if (first == std::string::npos || second == first)
    throw malformed();
  const std::string action = text.substr(first + 1, second - first - 1);
  char *end = nullptr;
  const long long faultRank = std::strtoll(text.c_str(), &end, 10);
  if (end != text.c_str() + first)
    throw malformed();
  const long long faultStep = std::strtoll(text.c_str() + second + 1, &end, 10);
  if (*end || (action != "exit" && action != "hang"))
    throw malformed();
  if (faultRank != rank || faultStep != atStep)
    return;
  if (action == "exit")
    std::_Exit(3);
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(1));
}

} // namespace dprt::faults
