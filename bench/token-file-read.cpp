//===- token-file-read.cpp - Micro-batches from a token file, timed -------===//
//
//   token-file-read FILE T BATCH SECONDS
//
// Opens FILE with dprt::driver::TokenFile, then for SECONDS fills [BATCH, T]
// token and target rows from records drawn uniformly at random (the access
// pattern of Poisson sampling), truncating records longer than T + 1.
// Prints one JSON object: the open time, micro-batches, tokens per second
// (filled positions) and the process's resident memory (RssAnon: private
// memory, RssFile: pages of mapped files) before opening, after opening and
// at the end. bench/prepare-speed.py builds and runs it.
//
//===----------------------------------------------------------------------===//

#include "TokenFile.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

using dprt::driver::Overflow;
using dprt::driver::TokenFile;

namespace {

// "RssAnon" or "RssFile" of /proc/self/status, in kB.
long residentKb(const std::string &field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.compare(0, field.size() + 1, field + ":") == 0)
      return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  return -1;
}

std::string memoryJson() {
  return "{\"rss_anon_kb\": " + std::to_string(residentKb("RssAnon")) +
         ", \"rss_file_kb\": " + std::to_string(residentKb("RssFile")) + "}";
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s FILE T BATCH SECONDS\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int64_t T = std::atoll(argv[2]);
  const int64_t batch = std::atoll(argv[3]);
  const double seconds = std::atof(argv[4]);
  using Clock = std::chrono::steady_clock;

  std::vector<int32_t> inputs(batch * T), targets(batch * T);
  const std::string before = memoryJson();
  try {
    const auto openStart = Clock::now();
    TokenFile file(path);
    const double openSeconds =
        std::chrono::duration<double>(Clock::now() - openStart).count();
    const std::string opened = memoryJson();

    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<int64_t> pick(0, file.records() - 1);
    int64_t batches = 0, positions = 0, counted = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      for (int64_t row = 0; row < batch; ++row) {
        const int64_t r = pick(rng);
        counted +=
            file.fillSample(r, T, inputs.data() + row * T,
                            targets.data() + row * T, Overflow::Truncate);
        positions += std::min(file.length(r), T + 1) - 1;
      }
      ++batches;
      if (batches % 64 == 0)
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    std::printf("{\"file_bytes\": %lld, \"records\": %lld, \"tokens\": %lld, "
                "\"open_s\": %.6f, \"seconds\": %.3f, \"batches\": %lld, "
                "\"positions\": %lld, \"loss_targets\": %lld, "
                "\"tokens_per_s\": %.0f, \"memory_before\": %s, "
                "\"memory_opened\": %s, \"memory_end\": %s}\n",
                static_cast<long long>(std::filesystem::file_size(path)),
                static_cast<long long>(file.records()),
                static_cast<long long>(file.tokens()), openSeconds, elapsed,
                static_cast<long long>(batches),
                static_cast<long long>(positions),
                static_cast<long long>(counted), positions / elapsed,
                before.c_str(), opened.c_str(), memoryJson().c_str());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "token-file-read: %s\n", e.what());
    return 1;
  }
  return 0;
}
