//===- Collectives.cpp - Collectives and events of the CUDA backend -------===//
//
// all_gather and reduce_scatter forward to the rank's Communicator (NCCL,
// NcclCommunicator.h). A single rank without a communicator copies (or adds)
// on the given stream, so that one GPU needs no NCCL at all.
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

} // namespace

void all_gather(Rank *rank, DType dt, const void *shard, void *full,
                int64_t shardElems, int32_t stream) {
  if (rank->comm) {
    rank->comm->allGather(rank, dt, shard, full, shardElems, stream);
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
  if (rank->comm) {
    rank->comm->reduceScatter(rank, acc, full, shard, shardElems, accumulate,
                              stream);
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

void record_event(Rank *rank, int32_t stream, int32_t event) {
  checkCuda(cudaEventRecord(eventOf(rank, event), streamOf(rank, stream)),
            "cudaEventRecord");
}

void wait_event(Rank *rank, int32_t stream, int32_t event) {
  streamOf(rank, stream); // checks the index
  streamWait(rank, deviceState(rank), stream, eventOf(rank, event));
}

} // namespace dprt::cuda
