//===- Trace.cpp - Spans of compute and communication per rank ------------===//

#include "common/Trace.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace dprt::trace {
namespace {

struct Event {
  const char *name;
  double begin;
  double end;
  int32_t rank;
  Track track;
};

// Every thread's buffer, owned here so that the spans of a finished thread
// are still written.
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<std::vector<Event>>> buffers;
};

Registry &registry() {
  static Registry instance;
  return instance;
}

std::atomic<bool> recording{false};

std::vector<Event> &threadBuffer() {
  thread_local std::vector<Event> *buffer = nullptr;
  if (!buffer) {
    Registry &reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.buffers.push_back(std::make_unique<std::vector<Event>>());
    buffer = reg.buffers.back().get();
  }
  return *buffer;
}

const char *trackName(Track track) {
  switch (track) {
  case Track::Compute:
    return "compute";
  case Track::Communication:
    return "communication";
  case Track::ExposedCommunication:
    return "compute waits for communication";
  }
  return "unknown";
}

void writeEscaped(std::FILE *out, const char *text) {
  std::fputc('"', out);
  for (const char *c = text; *c; ++c) {
    unsigned char ch = static_cast<unsigned char>(*c);
    if (ch == '"' || ch == '\\')
      std::fprintf(out, "\\%c", ch);
    else if (ch < 0x20)
      std::fprintf(out, "\\u%04x", ch);
    else
      std::fputc(ch, out);
  }
  std::fputc('"', out);
}

} // namespace

void enable() {
  nowMicros(); // Starts the clock, so that timestamps are small.
  recording.store(true, std::memory_order_relaxed);
}

bool enabled() { return recording.load(std::memory_order_relaxed); }

double nowMicros() {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point epoch = Clock::now();
  return std::chrono::duration<double, std::micro>(Clock::now() - epoch)
      .count();
}

void record(int32_t rank, Track track, const char *name, double beginMicros,
            double endMicros) {
  if (!enabled())
    return;
  threadBuffer().push_back(Event{name, beginMicros, endMicros, rank, track});
}

int64_t spanCount() {
  Registry &reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  int64_t count = 0;
  for (const auto &buffer : reg.buffers)
    count += static_cast<int64_t>(buffer->size());
  return count;
}

void writeChromeTrace(const std::string &path) {
  Registry &reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<Event> events;
  for (const auto &buffer : reg.buffers)
    events.insert(events.end(), buffer->begin(), buffer->end());
  // Sorted by time, so that the file reads in order and viewers that expect
  // monotonic timestamps per thread are satisfied.
  std::stable_sort(
      events.begin(), events.end(),
      [](const Event &a, const Event &b) { return a.begin < b.begin; });
  std::set<std::pair<int32_t, int32_t>> tracks;
  for (const Event &e : events)
    tracks.insert({e.rank, static_cast<int32_t>(e.track)});

  std::FILE *out = std::fopen(path.c_str(), "w");
  if (!out)
    throw std::runtime_error("cannot write the trace '" + path +
                             "': " + std::strerror(errno));
  std::fprintf(out, "{\"traceEvents\":[");
  bool first = true;
  auto separator = [&] {
    std::fprintf(out, first ? "\n" : ",\n");
    first = false;
  };
  int32_t lastRank = -1;
  for (const auto &[rank, track] : tracks) {
    if (rank != lastRank) {
      separator();
      std::fprintf(out,
                   "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
                   "\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
                   rank, rank);
      lastRank = rank;
    }
    separator();
    std::fprintf(out,
                 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"name\":\"%s\"}}",
                 rank, track, trackName(static_cast<Track>(track)));
  }
  for (const Event &e : events) {
    separator();
    std::fprintf(out, "{\"name\":");
    writeEscaped(out, e.name);
    std::fprintf(out,
                 ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                 "\"pid\":%d,\"tid\":%d}",
                 trackName(e.track), e.begin, std::max(0.0, e.end - e.begin),
                 e.rank, static_cast<int32_t>(e.track));
  }
  std::fprintf(out, "\n]}\n");
  bool failed = std::ferror(out) != 0;
  if (std::fclose(out) != 0 || failed)
    throw std::runtime_error("cannot write the trace '" + path +
                             "': " + std::strerror(errno));
}

void clear() {
  Registry &reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  for (const auto &buffer : reg.buffers)
    buffer->clear();
}

} // namespace dprt::trace
