//===- Trace.h - Spans of compute and communication per rank ----*- C++ -*-===//
//
// A small tracer for the training program's `--trace FILE`: each rank records
// named spans (begin, duration) on a compute or a communication track, and
// the driver writes them as a Chrome trace (chrome://tracing, Perfetto): one
// process per rank, one thread per track. That is enough to see whether the
// communication of a step hides behind its compute.
//
// Recording is off until `enable()`. A disabled span costs one relaxed atomic
// load, so the collectives and the driver trace unconditionally. Each thread
// appends to its own buffer (no lock per span); `writeChromeTrace` must run
// after the recording threads have stopped (the driver calls it after joining
// the ranks).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMMON_TRACE_H
#define DPRT_COMMON_TRACE_H

#include <cstdint>
#include <string>

namespace dprt::trace {

/// The track of a span: the Chrome trace's thread id within the rank.
/// `ExposedCommunication` holds the GPU intervals in which the compute
/// stream waited for the communication stream (Rank::measureExposedComm),
/// placed on the host clock.
enum class Track : int32_t {
  Compute = 0,
  Communication = 1,
  ExposedCommunication = 2
};

/// Turns recording on for the rest of the process.
void enable();
bool enabled();

/// Microseconds since the first call in this process (steady clock).
double nowMicros();

/// Records a finished span. `name` must outlive the tracer (a string
/// literal): spans are stored by pointer so that recording never allocates a
/// string. Does nothing while recording is off.
void record(int32_t rank, Track track, const char *name, double beginMicros,
            double endMicros);

/// Records the span from construction to destruction.
class Span {
public:
  Span(int32_t rank, Track track, const char *name)
      : rank_(rank), track_(track), name_(name),
        begin_(enabled() ? nowMicros() : -1) {}
  ~Span() {
    if (begin_ >= 0)
      record(rank_, track_, name_, begin_, nowMicros());
  }
  Span(const Span &) = delete;
  Span &operator=(const Span &) = delete;

private:
  int32_t rank_;
  Track track_;
  const char *name_;
  double begin_;
};

/// Number of spans recorded so far (all threads).
int64_t spanCount();

/// Writes every recorded span as Chrome trace JSON:
///   {"traceEvents":[{"name","ph":"X","ts","dur","pid","tid"}, ...]}
/// with pid = rank and tid = track, plus metadata events naming them.
/// Throws std::runtime_error with the path and the reason when the file
/// cannot be written.
void writeChromeTrace(const std::string &path);

/// Forgets every recorded span (tests).
void clear();

} // namespace dprt::trace

#define DPRT_TRACE_CONCAT_(a, b) a##b
#define DPRT_TRACE_CONCAT(a, b) DPRT_TRACE_CONCAT_(a, b)
/// DPRT_TRACE(rank, track, "name"): traces the rest of the enclosing scope.
#define DPRT_TRACE(rank, track, name)                                          \
  ::dprt::trace::Span DPRT_TRACE_CONCAT(dprtTraceSpan_, __LINE__)(rank, track, \
                                                                  name)

#endif // DPRT_COMMON_TRACE_H
