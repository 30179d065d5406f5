//===- comm.h - Collective communication between ranks ----------*- C++ -*-===//
//
// The kernels all_gather and reduce_scatter forward to the rank's
// Communicator. On the CPU backend the ranks are threads of one process and
// the communicator copies through shared memory; on CUDA it is NCCL (one
// process with --gpus N threads, or one process per GPU started by Slurm,
// mpirun or torchrun and joined through NCCL's own bootstrap).
//
// Which ranks a process drives, and with which communicators, is the
// backend's choice: backend.inc's readLaunchEnvironment and
// makeCommunicators, for a Launch the driver plans.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMM_H
#define DPRT_COMM_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprt {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// full[r * shardElems + i] = shard of rank r (see kernels.h).
  virtual void allGather(Rank *rank, DType dt, const void *shard, void *full,
                         int64_t shardElems, int32_t stream) = 0;

  /// shard (+)= sum over ranks, in rank order, of this rank's slice of
  /// every rank's `full`.
  virtual void reduceScatter(Rank *rank, DType acc, const void *full,
                             void *shard, int64_t shardElems, bool accumulate,
                             int32_t stream) = 0;

  /// Sums `values` (host memory) over the ranks, in place, on every rank.
  virtual void allReduceHost(double *values, int count) = 0;

  /// Returns when every rank has called it.
  virtual void barrier() = 0;

  /// Called by the driver when a rank of this process failed: a
  /// communicator whose peers could wait forever for the failed rank (the
  /// CPU's threads) wakes them, and their collectives throw. The default
  /// does nothing: NCCL reports a failed peer itself.
  virtual void abort(const std::string &reason) { (void)reason; }
};

/// Where this process sits in a job of several processes started by a
/// launcher (torchrun, mpirun, srun).
struct LaunchEnvironment {
  int rank = 0;
  int world = 1;
  int localRank = 0;
  std::string launcher; ///< "torchrun", "mpirun" or "srun"
};

/// Reads rank, world size and local rank from the first complete set of
/// RANK/WORLD_SIZE/LOCAL_RANK (torchrun and most launchers; first, since it
/// may run inside an srun or mpirun allocation whose variables describe the
/// launcher processes), OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK (Open MPI's
/// mpirun) or SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun). Returns false
/// when none is set; throws std::invalid_argument naming the variable when a
/// set is incomplete or a value is not a number in range.
bool readLauncherVariables(LaunchEnvironment &env);

/// The ranks one process drives: local rank i is global rank firstRank + i
/// of `world`, on device deviceOf(i).
struct Launch {
  int world = 1;             ///< ranks of the grid
  int firstRank = 0;         ///< global rank of local rank 0
  int localRanks = 1;        ///< ranks driven by this process
  int firstDevice = 0;       ///< device of local rank 0 (others: consecutive)
  bool sharedDevice = false; ///< every rank uses device 0 (the CPU)
  bool multiProcess = false; ///< one of several processes of a launcher

  int deviceOf(int localRank) const {
    return sharedDevice ? 0 : firstDevice + localRank;
  }
};

/// Communicators for `world` ranks that are threads of this process; element
/// r belongs to rank r. Host memory only (the CPU backend).
std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(int world);

} // namespace dprt

#endif // DPRT_COMM_H
