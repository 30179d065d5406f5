//===- Collectives.cpp - Collectives and events of the CPU backend --------===//
//
// The collectives forward to the rank's communicator (threads of one process
// sharing host memory, common/ThreadCommunicator.h) inside a span of the
// communication track. Events are no-ops: the CPU backend runs every kernel
// and collective in issue order on the rank's thread, which already orders
// everything the emitted program's events order. For the same reason all of
// a collective's time is exposed: with Rank::measureExposedComm set, its
// duration is added to Rank::exposedCommSeconds.
//
//===----------------------------------------------------------------------===//

#include "common/Trace.h"
#include "dprt/comm.h"
#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cpu {
namespace {
Communicator &communicator(Rank *rank, const char *collective) {
  if (!rank->comm)
    throw std::runtime_error(std::string(collective) + ": rank " +
                             std::to_string(rank->rank) +
                             " has no communicator");
  return *rank->comm;
}

/// Adds the lifetime of the guard to rank->exposedCommSeconds when measured,
/// and to the trace's exposed-communication track (as the CUDA backend
/// records the waits of its compute stream).
class ExposedTimer {
public:
  explicit ExposedTimer(Rank *rank)
      : rank_(rank->measureExposedComm ? rank : nullptr),
        begin_(rank_ ? trace::nowMicros() : 0) {}
  ~ExposedTimer() {
    if (!rank_)
      return;
    const double end = trace::nowMicros();
    rank_->exposedCommSeconds += (end - begin_) * 1e-6;
    trace::record(rank_->rank, trace::Track::ExposedCommunication,
                  "wait_for_communication", begin_, end);
  }
  ExposedTimer(const ExposedTimer &) = delete;
  ExposedTimer &operator=(const ExposedTimer &) = delete;

private:
  Rank *rank_;
  double begin_;
};
} // namespace

void all_gather(Rank *rank, DType dt, const void *shard, void *full,
                int64_t shardElems, int32_t stream) {
  DPRT_TRACE(rank->rank, trace::Track::Communication, "all_gather");
  ExposedTimer exposed(rank);
  communicator(rank, "all_gather")
      .allGather(rank, dt, shard, full, shardElems, stream);
}

void reduce_scatter(Rank *rank, DType acc, const void *full, void *shard,
                    int64_t shardElems, bool accumulate, int32_t stream) {
  DPRT_TRACE(rank->rank, trace::Track::Communication, "reduce_scatter");
  ExposedTimer exposed(rank);
  communicator(rank, "reduce_scatter")
      .reduceScatter(rank, acc, full, shard, shardElems, accumulate, stream);
}

void record_event(Rank *, int32_t, int32_t) {}
void wait_event(Rank *, int32_t, int32_t) {}

} // namespace dprt::cpu
