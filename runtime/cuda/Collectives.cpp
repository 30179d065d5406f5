//===- Collectives.cpp - Collectives and events of the CUDA backend -------===//
//
// all_gather and reduce_scatter forward to the communicator of the rank's
// replica (Rank::shardComm, or Rank::comm on a 1-D grid), all_reduce to the
// communicator of its shard across replicas (NCCL, NcclCommunicator.h;
// NCCL's ring order, not rank order). A single rank without a communicator
// copies (or adds) on the given stream, so that one GPU needs no NCCL at all.
//
// Events are created on first use (disable-timing events, the cheap kind);
// runCaptured's warm-up run creates them before any capture.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "dprt/comm.h"
#include "dprt/kernels.h"

namespace dprt::cuda {

namespace {

cudaEvent_t eventOf(Rank *rank, int32_t event) {
  DeviceState &st = deviceState(rank);
  if (event < 0 || event > (1 << 20))
    fail("event index " + std::to_string(event) + " is out of range");
  if (size_t(event) >= st.events.size())
    st.events.resize(size_t(event) + 1, nullptr);
  cudaEvent_t &e = st.events[size_t(event)];
  if (!e)
    checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
  return e;
}

/// The communicator a unit is split over: the rank's replica's.
Communicator *shardGroup(Rank *rank) {
  return rank->shardComm ? rank->shardComm : rank->comm;
}

} // namespace

void all_gather(Rank *rank, DType dt, const void *shard, void *full,
                int64_t shardElems, int32_t stream) {
  if (Communicator *comm = shardGroup(rank)) {
    comm->allGather(rank, dt, shard, full, shardElems, stream);
    return;
  }
  if (rank->world != 1)
    fail("all_gather: rank " + std::to_string(rank->rank) + " of " +
         std::to_string(rank->world) + " has no communicator");
  if (shardElems > 0 && shard != full)
    checkCuda(cudaMemcpyAsync(full, shard, size_t(shardElems * sizeOf(dt)),
                              cudaMemcpyDeviceToDevice, streamOf(rank, stream)),
              "cudaMemcpyAsync(all_gather)");
}

void reduce_scatter(Rank *rank, DType acc, const void *full, void *shard,
                    int64_t shardElems, bool accumulate, int32_t stream) {
  if (Communicator *comm = shardGroup(rank)) {
    comm->reduceScatter(rank, acc, full, shard, shardElems, accumulate, stream);
    return;
  }
  if (rank->world != 1)
    fail("reduce_scatter: rank " + std::to_string(rank->rank) + " of " +
         std::to_string(rank->world) + " has no communicator");
  if (shardElems <= 0)
    return;
  if (accumulate)
    accumulateOnStream(rank, stream, acc, full, shard, shardElems);
  else if (full != shard)
    checkCuda(cudaMemcpyAsync(shard, full, size_t(shardElems * sizeOf(acc)),
                              cudaMemcpyDeviceToDevice, streamOf(rank, stream)),
              "cudaMemcpyAsync(reduce_scatter)");
}

void all_reduce(Rank *rank, DType acc, void *data, int64_t count,
                int32_t stream) {
  requireAcc(acc, "all_reduce");
  if (rank->replicaComm) {
    rank->replicaComm->allReduce(rank, acc, data, count, stream);
    return;
  }
  if (rank->replicas != 1)
    fail("all_reduce: rank " + std::to_string(rank->rank) + " of " +
         std::to_string(rank->replicas) +
         " replicas has no communicator between them");
}

void record_event(Rank *rank, int32_t stream, int32_t event) {
  checkCuda(cudaEventRecord(eventOf(rank, event), streamOf(rank, stream)),
            "cudaEventRecord");
}

void wait_event(Rank *rank, int32_t stream, int32_t event) {
  streamOf(rank, stream); // checks the index
  streamWait(rank, deviceState(rank), stream, eventOf(rank, event));
}

} // namespace dprt::cuda
