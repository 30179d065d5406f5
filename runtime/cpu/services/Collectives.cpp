//===- Collectives.cpp - Collectives and events of the CPU backend --------===//
//
// The collectives forward to the rank's communicators (threads of one
// process sharing host memory, common/ThreadCommunicator.h, or processes of
// an MPI job, MpiCommunicator.h) inside a span of the communication track:
// all_gather and reduce_scatter to the group of the rank's replica,
// all_reduce to the group of its shard across replicas. Events are no-ops: the
// CPU backend runs every kernel and collective in issue order on the rank's
// thread, which already orders everything the emitted program's events order.
// For the same reason all of a collective's time is exposed: with
// Rank::measureExposedComm set, its duration is added to
// Rank::exposedCommSeconds.
//
//===----------------------------------------------------------------------===//

#include "common/Trace.h"
#include "dprt/comm.h"
#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cpu {
namespace {
/// The group a unit is split over: the rank's replica.
Communicator &shardGroup(Rank *rank, const char *collective) {
  Communicator *comm = rank->shardComm ? rank->shardComm : rank->comm;
  if (!comm)
    throw std::runtime_error(std::string(collective) + ": rank " +
                             std::to_string(rank->rank) +
                             " has no communicator");
  return *comm;
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
  shardGroup(rank, "all_gather")
      .allGather(rank, dt, shard, full, shardElems, stream);
}

void reduce_scatter(Rank *rank, DType acc, const void *full, void *shard,
                    int64_t shardElems, bool accumulate, int32_t stream) {
  DPRT_TRACE(rank->rank, trace::Track::Communication, "reduce_scatter");
  ExposedTimer exposed(rank);
  shardGroup(rank, "reduce_scatter")
      .reduceScatter(rank, acc, full, shard, shardElems, accumulate, stream);
}

void all_reduce(Rank *rank, DType acc, void *data, int64_t count,
                int32_t stream) {
  if (!rank->replicaComm) {
    if (rank->replicas != 1)
      throw std::runtime_error("all_reduce: rank " +
                               std::to_string(rank->rank) + " of " +
                               std::to_string(rank->replicas) +
                               " replicas has no communicator between them");
    return;
  }
  DPRT_TRACE(rank->rank, trace::Track::Communication, "all_reduce");
  ExposedTimer exposed(rank);
  rank->replicaComm->allReduce(rank, acc, data, count, stream);
}

void record_event(Rank *, int32_t, int32_t) {}
void wait_event(Rank *, int32_t, int32_t) {}

} // namespace dprt::cpu
