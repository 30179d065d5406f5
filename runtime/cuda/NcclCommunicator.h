//===- NcclCommunicator.h - Collectives of the CUDA backend -----*- C++ -*-===//
//
// The Communicator (comm.h) of the CUDA backend: NCCL on device memory, on
// the rank's streams. Two ways to make one:
// - makeNcclCommunicators(N): N GPUs of this process, one thread per GPU
//   (`--gpus N`); communicator r drives device r.
// - makeNcclCommunicatorFromEnvironment(): one process per GPU started by
//   torchrun, mpirun or srun. Rank, world size and local rank come from the
//   launcher's variables (readLauncherVariables, dprt/comm.h); the processes
//   find each other through NCCL's own
//   bootstrap: every process must see NCCL_COMM_ID=<host>:<port>, an address
//   where rank 0 can listen (with it set, ncclGetUniqueId returns the same
//   id in every process); without it, torchrun's MASTER_ADDR and
//   MASTER_PORT give MASTER_ADDR:(MASTER_PORT + 1) (ncclRendezvous,
//   dprt/comm.h).
// The backend services readLaunchEnvironment and makeCommunicators
// (backend.inc) are defined with them: the driver reaches NCCL only through
// those.
// (Under mpirun too: the NCCL id is not broadcast through MPI, so that CUDA
// programs do not link MPI.) split() makes the groups of a hybrid grid with
// ncclCommSplit.
// Both turn NVLink SHARP (NVLS, multicast) off with NCCL_NVLS_ENABLE=0 unless
// the environment already sets it. Communicators are non-blocking: creation
// and teardown wait at most the collective timeout (--collective-timeout)
// for the other ranks, so a missing peer ends the run with a message instead
// of a hang.
// Every NCCL failure throws std::runtime_error with NCCL's error string and
// its last error message.
//
// Collectives run on the GPU after the host has moved on, so their timeout
// is kept by a watchdog: one thread per process that, every 100 ms, polls
// ncclCommGetAsyncError of every communicator and the time each rank has
// been waiting for its GPU work (synchronize, allReduceHost: waitForGpu
// below). On an NCCL error, or a wait longer than the communicators'
// timeout (--collective-timeout), it aborts every communicator of the
// process (ncclCommAbort), which ends the NCCL kernels the waits are
// blocked on; the waits then throw CollectiveTimeout (or
// std::runtime_error) with the watchdog's reason. NCCL does not say which
// peer is missing: the message names the rank and the step. The abort can
// itself wait for graph-launched work that never ends (seen on two H200s,
// 2026-11-23), so a process still alive 10 s after the abort began prints
// the reason and ends with status 1.
//
// Order of teardown: shutdownRank (which destroys the captured CUDA graphs
// that hold NCCL work) before the communicators are destroyed. Destroying a
// communicator finalizes it; finalizing is collective, so the communicators
// made together are finalized together when the last of them is destroyed,
// from whichever thread.
//
// reduceScatter sums in NCCL's ring order, which is the same on every run
// with the same world size and topology, but is not rank order 0, 1, ...
// as kernels.h describes; results can differ from the CPU backend's in the
// last bits. With accumulate it reduces into scratch and then adds.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_NCCLCOMMUNICATOR_H
#define DPRT_CUDA_NCCLCOMMUNICATOR_H

#include "dprt/comm.h"

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

struct ncclComm;

namespace dprt::cuda {

/// Communicators created together; their teardown is collective.
struct NcclGroup;

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(ncclComm *comm, int rank, int world, int device,
                   std::shared_ptr<NcclGroup> group, double timeoutSeconds);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  void allGather(Rank *rank, DType dt, const void *shard, void *full,
                 int64_t shardElems, int32_t stream) override;
  void reduceScatter(Rank *rank, DType acc, const void *full, void *shard,
                     int64_t shardElems, bool accumulate,
                     int32_t stream) override;
  /// Through a small device buffer on the communicator's own stream; waits
  /// for the result, failing (not hanging) if NCCL reports an error.
  void allReduceHost(double *values, int count) override;
  void allReduce(Rank *rank, DType acc, void *data, int64_t count,
                 int32_t stream) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  int world() const { return world_; }
  /// The CUDA device this communicator drives (initRank's `device`).
  int device() const { return device_; }

private:
  void waitForStream();

  ncclComm *comm_;
  int rank_, world_, device_;
  std::shared_ptr<NcclGroup> group_;
  double timeoutSeconds_;
  /// Splits this communicator has taken part in: the k-th split of every
  /// communicator of a group shares one group.
  int splits_ = 0;
  cudaStream_t hostStream_ = nullptr;
  double *hostBuffer_ = nullptr;
  int hostBufferCount_ = 0;
};

/// Communicators for `world` GPUs of this process: element r drives device
/// r and belongs to the thread that runs rank r.
std::vector<std::unique_ptr<Communicator>>
makeNcclCommunicators(int world,
                      double timeoutSeconds = kDefaultCollectiveTimeoutSeconds);

/// This process's communicator in a launcher's job (see above). Makes
/// `device()` the calling thread's current device.
std::unique_ptr<NcclCommunicator> makeNcclCommunicatorFromEnvironment(
    double timeoutSeconds = kDefaultCollectiveTimeoutSeconds);

/// Brackets a host wait for GPU work that may hold NCCL collectives (the
/// backend's synchronize): the watchdog times it from construction, and the
/// destructor's check() throws the watchdog's reason if it aborted the
/// communicators meanwhile. `who` names the waiting rank in the message.
class WatchedWait {
public:
  explicit WatchedWait(int rank);
  ~WatchedWait();
  WatchedWait(const WatchedWait &) = delete;
  WatchedWait &operator=(const WatchedWait &) = delete;
  /// Throws if the watchdog aborted the communicators (also when the wait
  /// itself failed because of it: call before reporting another error).
  void check() const;

private:
  int id_;
};

} // namespace dprt::cuda

#endif // DPRT_CUDA_NCCLCOMMUNICATOR_H
