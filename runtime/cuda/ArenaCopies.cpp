//===- ArenaCopies.cpp - Copies between host memory and the arena ---------===//
//
// The CUDA backend's copyToArena and copyFromArena, which wait for the
// rank's streams; queueCopyToArena, queueCopyFromArena and uploadStepState,
// which queue on the compute stream and return at once (backend.inc). The
// queued reads land in page-locked staging (DeviceState::readStaging), from
// where synchronize() copies them to their destinations (landReads).
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "dprt/backend.h"

#include <algorithm>
#include <cstring>

namespace dprt::cuda {

// The copies run on the compute stream and wait for it: a plain cudaMemcpy
// from pageable memory may return before its DMA lands, and the legacy
// stream it uses is not ordered with the rank's non-blocking streams.
void copyToArena(Rank *rank, int64_t offset, const void *src, int64_t bytes) {
  DeviceState &st = enter(rank);
  checkArenaRange(rank, offset, bytes, "copyToArena");
  // Queued work on either stream may still read the destination.
  synchronize(rank);
  checkCuda(cudaMemcpyAsync(rank->arena + offset, src, size_t(bytes),
                            cudaMemcpyHostToDevice, st.streams[kComputeStream]),
            "cudaMemcpyAsync(host to arena)");
  checkCuda(cudaStreamSynchronize(st.streams[kComputeStream]),
            "cudaStreamSynchronize");
}

void copyFromArena(Rank *rank, void *dst, int64_t offset, int64_t bytes) {
  DeviceState &st = enter(rank);
  checkArenaRange(rank, offset, bytes, "copyFromArena");
  synchronize(rank);
  checkCuda(cudaMemcpyAsync(dst, rank->arena + offset, size_t(bytes),
                            cudaMemcpyDeviceToHost, st.streams[kComputeStream]),
            "cudaMemcpyAsync(arena to host)");
  checkCuda(cudaStreamSynchronize(st.streams[kComputeStream]),
            "cudaStreamSynchronize");
}

void queueCopyToArena(Rank *rank, int64_t offset, const void *src,
                      int64_t bytes) {
  DeviceState &st = enter(rank);
  checkArenaRange(rank, offset, bytes, "queueCopyToArena");
  if (bytes == 0)
    return;
  // Ordered after the steps queued so far: a captured step is one launch on
  // the compute stream, an uncaptured one joins the communication stream
  // into it (runForked). From pageable memory the runtime stages the bytes
  // before returning, as for uploadStepState.
  checkCuda(cudaMemcpyAsync(rank->arena + offset, src, size_t(bytes),
                            cudaMemcpyHostToDevice, st.streams[kComputeStream]),
            "cudaMemcpyAsync(queued host to arena)");
}

void queueCopyFromArena(Rank *rank, void *dst, int64_t offset, int64_t bytes) {
  DeviceState &st = enter(rank);
  checkArenaRange(rank, offset, bytes, "queueCopyFromArena");
  if (bytes == 0)
    return;
  const size_t at = (st.readStagingUsed + 15) / 16 * 16;
  if (at + size_t(bytes) > st.readStagingBytes) {
    // Full: land what is queued, then grow to twice what was asked for
    // between two waits (a page-locked allocation waits for the device
    // anyway), so that the driver's next step of the same shape, whose
    // micro-steps' losses are read between two waits too, queues all of
    // them without this wait.
    const size_t wanted = std::max<size_t>(2 * (at + size_t(bytes)), 4096);
    synchronize(rank);
    if (st.readStaging)
      checkCuda(cudaFreeHost(st.readStaging), "cudaFreeHost");
    st.readStaging = nullptr;
    st.readStagingBytes = 0;
    checkCuda(cudaHostAlloc(reinterpret_cast<void **>(&st.readStaging),
                            wanted, cudaHostAllocDefault),
              "cudaHostAlloc(queueCopyFromArena)");
    st.readStagingBytes = wanted;
    return queueCopyFromArena(rank, dst, offset, bytes);
  }
  checkCuda(cudaMemcpyAsync(st.readStaging + at, rank->arena + offset,
                            size_t(bytes), cudaMemcpyDeviceToHost,
                            st.streams[kComputeStream]),
            "cudaMemcpyAsync(queued arena to host)");
  st.pendingReads.push_back({dst, at, size_t(bytes)});
  st.readStagingUsed = at + size_t(bytes);
}

void uploadStepState(Rank *rank) {
  DeviceState &st = enter(rank);
  checkArenaRange(rank, rank->stateOffset, int64_t(sizeof(StepState)),
                  "uploadStepState");
  // Ordered on the compute stream after the work queued so far, which may
  // still read the previous state. From pageable memory the runtime stages
  // the bytes (or waits) before returning, so the driver may edit hostState
  // again at once.
  checkCuda(cudaMemcpyAsync(rank->arena + rank->stateOffset, &rank->hostState,
                            sizeof(StepState), cudaMemcpyHostToDevice,
                            st.streams[kComputeStream]),
            "cudaMemcpyAsync(StepState)");
}

void landReads(DeviceState &st,
               const std::vector<DeviceState::PendingRead> &reads) {
  for (const DeviceState::PendingRead &read : reads)
    std::memcpy(read.dst, st.readStaging + read.at, read.bytes);
}

} // namespace dprt::cuda
