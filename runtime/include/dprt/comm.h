//===- comm.h - Collective communication between ranks ----------*- C++ -*-===//
//
// The kernels all_gather, reduce_scatter and all_reduce forward to the
// rank's communicators. On the CPU backend the ranks are threads of one
// process exchanging host memory (common/ThreadCommunicator.h), or one
// process each started by mpirun or srun and joined through MPI
// (cpu/services/MpiCommunicator.h); on CUDA it is NCCL (one process with
// --gpus N threads, or one process per GPU started by Slurm, mpirun or
// torchrun and joined through NCCL's own bootstrap).
//
// Which ranks a process drives, and with which communicators, is the
// backend's choice: backend.inc's readLaunchEnvironment and
// makeCommunicators, for a Launch the driver plans. On a 2-D grid of
// replicas x shards (hybrid sharding) the driver splits each rank's
// communicator of the whole grid into the group of its replica (the ranks
// that split the units between them) and the group of its shard (the ranks
// that hold the same shard in the other replicas); see rank.h.
//
// Every collective gives up after the communicator's timeout
// (--collective-timeout) with a CollectiveTimeout that names the rank, the
// collective and, where the transport knows, the peers that did not take
// part, instead of waiting forever for a rank that died or diverged.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMM_H
#define DPRT_COMM_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dprt {

/// Thrown by a collective that did not finish within the communicator's
/// timeout; the message names the rank, the collective and the missing
/// peers where known.
class CollectiveTimeout : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// The default of --collective-timeout, in seconds: long enough for a slow
/// step or a checkpoint write on the leader, short enough that a dead job
/// ends the same hour.
constexpr double kDefaultCollectiveTimeoutSeconds = 300;

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This rank's index among the communicator's ranks, and their number.
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// full[r * shardElems + i] = shard of rank r (see kernels.h).
  virtual void allGather(Rank *rank, DType dt, const void *shard, void *full,
                         int64_t shardElems, int32_t stream) = 0;

  /// shard (+)= sum over ranks, in rank order, of this rank's slice of
  /// every rank's `full`.
  virtual void reduceScatter(Rank *rank, DType acc, const void *full,
                             void *shard, int64_t shardElems, bool accumulate,
                             int32_t stream) = 0;

  /// data[i] = sum over ranks, in rank order, of every rank's data[i], in
  /// place on every rank (acc buffers, f32 or f64, in the rank's device
  /// memory, on `stream`): the gradient shards summed over the replicas of
  /// a hybrid grid.
  virtual void allReduce(Rank *rank, DType acc, void *data, int64_t count,
                         int32_t stream) = 0;

  /// Sums `values` (host memory) over the ranks, in place, on every rank.
  virtual void allReduceHost(double *values, int count) = 0;

  /// Returns when every rank has called it (host side: a rank may leave
  /// before another rank's device work is done). Checkpoint writers use it
  /// to order their files: nothing after it starts before every rank got
  /// there.
  virtual void barrier() = 0;

  /// Collective over this communicator, called by every rank: the ranks
  /// that pass the same `color` form a new communicator, ordered by `key`
  /// (ties by rank), with this one's timeout (MPI_Comm_split,
  /// ncclCommSplit).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

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
  /// The variables the values come from, for messages:
  /// "RANK=1, WORLD_SIZE=2, LOCAL_RANK=1".
  std::string variables;
};

/// Reads rank, world size and local rank from the first complete set of
/// RANK/WORLD_SIZE/LOCAL_RANK (torchrun and most launchers; first, since it
/// may run inside an srun or mpirun allocation whose variables describe the
/// launcher processes), OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK (Open MPI's
/// mpirun) or SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun). Returns false
/// when none is set; throws std::invalid_argument naming the variable when a
/// set is incomplete or a value is not a number in range, or naming both
/// when two launchers' sets contradict each other (checkLauncherAgreement).
bool readLauncherVariables(LaunchEnvironment &env);

/// Reads the set of one launcher ("torchrun", "mpirun" or "srun") alone;
/// false when it is not set. Throws like readLauncherVariables.
bool readLauncherVariables(const std::string &launcher, LaunchEnvironment &env);

/// Throws std::invalid_argument naming both when two launchers' complete
/// sets describe the same number of processes with another rank for this
/// one (a variable left over from another job, exported by hand), or when
/// a set's local rank is not below its local size (LOCAL_WORLD_SIZE,
/// OMPI_COMM_WORLD_LOCAL_SIZE). Sets of different sizes are launchers
/// nested in each other (torchrun inside an srun allocation) and are not
/// compared.
void checkLauncherAgreement();

/// Where the processes of a multi-process NCCL job meet (NCCL's bootstrap:
/// rank 0 listens there), as "<host>:<port>": NCCL_COMM_ID when set, else
/// MASTER_ADDR:(MASTER_PORT + 1) as torchrun sets them (its own rendezvous
/// store already listens at MASTER_PORT; under Slurm the batch script
/// exports them). Throws std::invalid_argument naming what is missing or
/// malformed (MASTER_ADDR without MASTER_PORT, a port out of range, none
/// of them).
std::string ncclRendezvous(const LaunchEnvironment &env);

/// The ranks one process drives: local rank i is global rank firstRank + i
/// of `world`, on device deviceOf(i).
struct Launch {
  int world = 1;             ///< ranks of the grid
  int firstRank = 0;         ///< global rank of local rank 0
  int localRanks = 1;        ///< ranks driven by this process
  int firstDevice = 0;       ///< device of local rank 0 (others: consecutive)
  bool sharedDevice = false; ///< every rank uses device 0 (the CPU)
  bool multiProcess = false; ///< one of several processes of a launcher
  /// Hybrid sharding: the grid is replicas x (world / replicas) ranks.
  int replicas = 1;
  /// Every collective of the launch's communicators gives up after this
  /// long (CollectiveTimeout).
  double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds;

  int deviceOf(int localRank) const {
    return sharedDevice ? 0 : firstDevice + localRank;
  }
};

/// Communicators for `world` ranks that are threads of this process; element
/// r belongs to rank r. Host memory only (the CPU backend).
std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(
    int world, double timeoutSeconds = kDefaultCollectiveTimeoutSeconds);

} // namespace dprt

#endif // DPRT_COMM_H
