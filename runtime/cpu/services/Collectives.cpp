//===- Collectives.cpp - Collectives and events of the CPU backend --------===//
//
// The collectives forward to the rank's communicator (threads of one process
// sharing host memory, common/ThreadCommunicator.h) inside a span of the
// communication track. Events are no-ops: the CPU backend runs every kernel
// and collective in issue order on the rank's thread, which already orders
// everything the emitted program's events order.
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
} // namespace

void all_gather(Rank *rank, DType dt, const void *shard, void *full,
                int64_t shardElems, int32_t stream) {
  DPRT_TRACE(rank->rank, trace::Track::Communication, "all_gather");
  communicator(rank, "all_gather")
      .allGather(rank, dt, shard, full, shardElems, stream);
}

void reduce_scatter(Rank *rank, DType acc, const void *full, void *shard,
                    int64_t shardElems, bool accumulate, int32_t stream) {
  DPRT_TRACE(rank->rank, trace::Track::Communication, "reduce_scatter");
  communicator(rank, "reduce_scatter")
      .reduceScatter(rank, acc, full, shard, shardElems, accumulate, stream);
}

void record_event(Rank *, int32_t, int32_t) {}
void wait_event(Rank *, int32_t, int32_t) {}

} // namespace dprt::cpu
