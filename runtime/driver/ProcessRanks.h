//===- ProcessRanks.h - The ranks this process drives -----------*- C++ -*-===//
//
// Which ranks of the grid this process drives (all of them as threads on the
// CPU and with --gpus N; one when a launcher started one process per rank:
// mpirun or srun --mpi=pmix on the CPU, torchrun, Slurm or mpirun on CUDA),
// their communicators (backend.inc's makeCommunicators, split into the
// groups of a replicas x shards grid) and one persistent thread per local
// rank. Every arena access happens on the rank's own
// thread: the other parts of the driver hand jobs to run() or
// forEachLocalShard().
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_PROCESSRANKS_H
#define DPRT_DRIVER_PROCESSRANKS_H

#include "Options.h"

#include "dprt/comm.h"
#include "dprt/program.h"
#include "dprt/rank.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dprt::driver {

class RankThreads;

/// A local rank and its host staging buffers (one physical batch).
struct RankSlot {
  Rank rank;
  std::vector<std::vector<char>> inputs; ///< per input, physicalBatch rows
  std::vector<char> mask;                ///< acc [physicalBatch]
  std::vector<char> losses;              ///< acc [physicalBatch]
  /// acc [micro-steps][physicalBatch]: each micro-step's losses, copied
  /// back while the next one runs (runMicroSteps).
  std::vector<char> stepLosses;
  /// StepState::nonFiniteGradient after the step's dp_apply (queueUpdate).
  int32_t nonFiniteGradient = 0;
};

/// The launch for `options` and the program: which ranks this process
/// drives, on which devices. Throws UsageError when the machine or the
/// launcher's environment cannot run the program (naming what differs:
/// processes started against the program's grid, contradicting launcher
/// variables).
Launch planLaunch(const Options &options, const ProgramSpec &spec);

/// "2 ranks", "a 2x2 grid (4 ranks)": the program's grid in messages.
std::string describeGrid(const ProgramSpec &spec);

/// Which local ranks forEachLocalShard visits on a hybrid grid, where every
/// replica holds the same shards.
enum class ShardHolders {
  Every,        ///< every rank: writing into the shards
  FirstReplica, ///< one copy of each shard: reading them out
};

class ProcessRanks {
public:
  /// Makes the communicators of `launch` (planLaunch) and starts one thread
  /// per local rank (devices and arenas come with initialize()).
  ProcessRanks(const Launch &launch, const ProgramSpec &spec);
  /// Without shutdown() (a failed run) the communicators are left alone:
  /// tearing NCCL down is collective and would wait for ranks that may
  /// never get there.
  ~ProcessRanks();
  ProcessRanks(const ProcessRanks &) = delete;
  ProcessRanks &operator=(const ProcessRanks &) = delete;

  const Launch &launch() const { return launch_; }
  /// Whether this process drives global rank 0, which prints and writes.
  bool leader() const { return launch_.firstRank == 0; }
  int count() const { return static_cast<int>(slots_.size()); }
  RankSlot &slot(int localRank) { return *slots_[localRank]; }

  /// Runs job(localRank) on every local rank's thread and waits. When a job
  /// throws, the communicators are aborted (waking ranks blocked in a
  /// collective) and the root cause is rethrown, not the errors it caused
  /// in the other ranks.
  void run(const std::function<void(int)> &job);

  /// Calls body(rank, lo, hi) on each local rank's thread for the elements
  /// [lo, hi) of `unit` that rank's shard holds (none: not called).
  void
  forEachLocalShard(const UnitSpec &unit,
                    const std::function<void(Rank &, int64_t, int64_t)> &body,
                    ShardHolders holders = ShardHolders::Every);

  /// fulls[k] (unit.numel elements of `elementBytes`) = the unit's buffer at
  /// arena offset offsets[k], gathered from every shard: on every process
  /// when it drives all ranks, on the leader in a job of several processes
  /// (a collective over the grid: every process calls it; the others' fulls
  /// are left incomplete). Several processes: CPU backend only (the
  /// collective runs on host memory).
  void gatherUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets,
                  int64_t elementBytes, std::vector<std::vector<char>> &fulls);

  /// Prepares each rank's device and arena, uploads `initial` (dp_init
  /// reads the initializer key from it) and runs dp_init.
  void initialize(const StepState &initial, bool measureExposedComm);

  /// Frees the arenas and shuts the ranks down; the communicators are then
  /// destroyed normally.
  void shutdown();

private:
  /// Aborts every communicator of this process (comm.h's abort).
  void abortCommunicators(const std::string &reason);

  const ProgramSpec &spec_;
  Launch launch_;
  // Destroyed in reverse: the threads are joined before the communicators
  // they use go, the groups of a hybrid grid before the grid's.
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<std::unique_ptr<Communicator>> shardComms_, replicaComms_;
  std::mutex commsMutex_;
  std::vector<std::unique_ptr<RankSlot>> slots_;
  std::unique_ptr<RankThreads> threads_;
  bool shutDown_ = false;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_PROCESSRANKS_H
