//===- ProcessRanks.cpp - The ranks this process drives -------------------===//
//
// Compiled once per backend (dprt_driver_cpu, dprt_driver_cuda): the launch
// and communicators come from dprt::<service> of backend.h, which resolves to
// the backend this file is built for.
//
//===----------------------------------------------------------------------===//

#include "ProcessRanks.h"

#include "common/ThreadCommunicator.h"
#include "common/Trace.h"
#include "dprt/backend.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

namespace dprt::driver {

/// One persistent thread per local rank; run() executes a job on all of them
/// and waits. When a job throws, `abort` wakes the ranks blocked in a
/// collective, and run() rethrows the root cause (not the "aborted" errors
/// it caused in the other ranks). A rank stuck outside the collectives (a
/// hung kernel, a rank that never comes back) cannot be woken: run() waits
/// for it kGraceSeconds after the first failure, then rethrows without it
/// and the destructor leaves its thread behind (the process is ending).
class RankThreads {
public:
  static constexpr double kGraceSeconds = 5;

  RankThreads(int count, std::function<void(const std::string &)> abort)
      : abort_(std::move(abort)), errors_(count), running_(count, 0) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this, i] { loop(i); });
  }

  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (size_t i = 0; i < threads_.size(); ++i) {
      if (running_[i])
        threads_[i].detach();
      else
        threads_[i].join();
    }
  }

  int size() const { return static_cast<int>(threads_.size()); }

  void run(const std::function<void(int)> &job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (std::find(running_.begin(), running_.end(), 1) != running_.end())
        throw std::runtime_error("a rank of this process is still stuck in "
                                 "an earlier job");
      job_ = &job;
      pending_ = size();
      failures_ = 0;
      for (auto &e : errors_)
        e = nullptr;
      std::fill(running_.begin(), running_.end(), 1);
      ++generation_;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0 || failures_ > 0; });
    const auto grace =
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(kGraceSeconds));
    done_.wait_for(lock, grace, [&] { return pending_ == 0; });
    std::exception_ptr first, root;
    for (size_t i = 0; i < errors_.size(); ++i) {
      std::exception_ptr e = running_[i] ? nullptr : errors_[i];
      if (!e)
        continue;
      if (!first)
        first = e;
      try {
        std::rethrow_exception(e);
      } catch (const CommunicatorAborted &) {
      } catch (...) {
        if (!root)
          root = e;
      }
    }
    if (pending_ == 0)
      job_ = nullptr;
    if (root || first)
      std::rethrow_exception(root ? root : first);
  }

private:
  void loop(int index) {
    uint64_t seen = 0;
    while (true) {
      const std::function<void(int)> *job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_)
          return;
        seen = generation_;
        job = job_;
      }
      std::exception_ptr error;
      try {
        (*job)(index);
      } catch (const std::exception &e) {
        error = std::current_exception();
        abort_(std::string("another rank failed: ") + e.what());
      } catch (...) {
        error = std::current_exception();
        abort_("another rank failed");
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        errors_[index] = error;
        running_[index] = 0;
        if (error)
          ++failures_;
        --pending_;
        done_.notify_all();
      }
    }
  }

  std::function<void(const std::string &)> abort_;
  std::vector<std::exception_ptr> errors_;
  /// Whether each thread is inside the current job.
  std::vector<char> running_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)> *job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0, failures_ = 0;
  bool stop_ = false;
};

std::string describeGrid(const ProgramSpec &spec) {
  const std::string ranks =
      std::to_string(spec.ranks) + (spec.ranks == 1 ? " rank" : " ranks");
  if (spec.replicas == 1)
    return ranks;
  return "a " + std::to_string(spec.replicas) + "x" +
         std::to_string(spec.ranks / spec.replicas) + " grid (" + ranks + ")";
}

Launch planLaunch(const Options &options, const ProgramSpec &spec) {
  Launch launch;
  launch.world = spec.ranks;
  launch.localRanks = spec.ranks;
  launch.replicas = spec.replicas;
  launch.collectiveTimeoutSeconds = options.collectiveTimeout;
  const bool cpu = std::string(backendName()) == "cpu";
  launch.sharedDevice = cpu; // the CPU's ranks share its one device
  if (!cpu && options.gpus) {
    if (*options.gpus > availableDevices())
      throw UsageError("--gpus " + std::to_string(*options.gpus) +
                       " but this machine has " +
                       std::to_string(availableDevices()) + " GPUs");
    return launch;
  }
  // One process per rank, started by a launcher: mpirun or srun --mpi=pmix
  // on the CPU; torchrun, Slurm or mpirun on CUDA.
  LaunchEnvironment environment;
  bool launched = false;
  try {
    launched = readLaunchEnvironment(environment);
  } catch (const std::invalid_argument &e) {
    throw UsageError(std::string("the launcher's environment: ") + e.what());
  }
  if (launched && environment.world > 1) {
    if (environment.world != spec.ranks)
      throw UsageError(
          environment.launcher + " started " +
          std::to_string(environment.world) + " processes (" +
          environment.variables + ") but the program was compiled for " +
          describeGrid(spec) + ": start " + std::to_string(spec.ranks) +
          " processes, or recompile with dpc --ranks " +
          std::to_string(environment.world));
    launch.multiProcess = true;
    launch.localRanks = 1;
    launch.firstRank = environment.rank;
    launch.firstDevice = cpu ? 0 : environment.localRank;
    return launch;
  }
  // Every rank is a thread of this process.
  if (cpu)
    return launch;
  if (spec.ranks > 1)
    throw UsageError("this program was compiled for " + describeGrid(spec) +
                     ": pass --gpus " + std::to_string(spec.ranks) +
                     ", or launch " + std::to_string(spec.ranks) +
                     " processes with torchrun, Slurm or mpirun");
  return launch;
}

ProcessRanks::ProcessRanks(const Launch &launch, const ProgramSpec &spec)
    : spec_(spec), launch_(launch), comms_(makeCommunicators(launch_)) {
  if (static_cast<int>(comms_.size()) != launch_.localRanks)
    throw std::runtime_error(
        "the backend made " + std::to_string(comms_.size()) +
        " communicators for " + std::to_string(launch_.localRanks) + " ranks");
  if (launch_.replicas < 1 || launch_.world % launch_.replicas != 0)
    throw std::runtime_error(
        "a grid of " + std::to_string(launch_.world) + " ranks has no " +
        std::to_string(launch_.replicas) + " replicas of equal size");
  for (int i = 0; i < launch_.localRanks; ++i) {
    auto slot = std::make_unique<RankSlot>();
    slot->rank.rank = launch_.firstRank + i;
    slot->rank.world = launch_.world;
    slot->rank.replicas = launch_.replicas;
    slot->rank.stateOffset = spec_.stateOffset;
    slot->rank.comm = comms_[i].get();
    for (const InputSpec &input : spec_.inputs) {
      int64_t rowBytes = 4;
      if (input.role == InputRole::Features || input.role == InputRole::Target)
        rowBytes = sizeOf(spec_.compute);
      for (int64_t d : input.dims)
        rowBytes *= d;
      slot->inputs.emplace_back(spec_.physicalBatch * rowBytes);
    }
    slot->mask.resize(spec_.physicalBatch * sizeOf(accOf(spec_.compute)));
    slot->losses.resize(slot->mask.size());
    slots_.push_back(std::move(slot));
  }
  threads_ = std::make_unique<RankThreads>(
      launch_.localRanks,
      [this](const std::string &reason) { abortCommunicators(reason); });
  if (launch_.replicas == 1)
    return;
  // Hybrid sharding: the ranks of one replica (consecutive ranks) split the
  // units; the ranks holding one shard in every replica sum its gradient.
  shardComms_.resize(comms_.size());
  replicaComms_.resize(comms_.size());
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    const int shards = launch_.world / launch_.replicas;
    const int replica = rank.rank / shards, shard = rank.rank % shards;
    std::unique_ptr<Communicator> shardGroup = comms_[i]->split(replica, shard);
    std::unique_ptr<Communicator> replicaGroup =
        comms_[i]->split(shard, replica);
    std::lock_guard<std::mutex> lock(commsMutex_);
    rank.shardComm = shardGroup.get();
    rank.replicaComm = replicaGroup.get();
    shardComms_[i] = std::move(shardGroup);
    replicaComms_[i] = std::move(replicaGroup);
  });
}

void ProcessRanks::abortCommunicators(const std::string &reason) {
  std::lock_guard<std::mutex> lock(commsMutex_);
  for (auto *group : {&comms_, &shardComms_, &replicaComms_})
    for (auto &comm : *group)
      if (comm)
        comm->abort(reason);
}

ProcessRanks::~ProcessRanks() {
  threads_.reset();
  if (!shutDown_)
    for (auto *group : {&comms_, &shardComms_, &replicaComms_})
      for (auto &comm : *group)
        comm.release();
}

void ProcessRanks::run(const std::function<void(int)> &job) {
  threads_->run(job);
}

void ProcessRanks::forEachLocalShard(
    const UnitSpec &unit,
    const std::function<void(Rank &, int64_t, int64_t)> &body,
    ShardHolders holders) {
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    if (holders == ShardHolders::FirstReplica && rank.rank >= shardsOf(&rank))
      return;
    const int64_t lo = shardIndexOf(&rank) * unit.shardElems;
    const int64_t hi = std::min(lo + unit.shardElems, unit.numel);
    if (lo < hi)
      body(rank, lo, hi);
  });
}

void ProcessRanks::gatherUnit(const UnitSpec &unit,
                              const std::vector<int64_t> &offsets,
                              int64_t elementBytes,
                              std::vector<std::vector<char>> &fulls) {
  fulls.assign(offsets.size(), std::vector<char>(unit.numel * elementBytes));
  if (!launch_.multiProcess) {
    forEachLocalShard(
        unit,
        [&](Rank &rank, int64_t lo, int64_t hi) {
          for (size_t k = 0; k < offsets.size(); ++k)
            copyFromArena(&rank, fulls[k].data() + lo * elementBytes,
                          offsets[k], (hi - lo) * elementBytes);
        },
        ShardHolders::FirstReplica);
    return;
  }
  if (std::string(backendName()) != "cpu")
    throw std::runtime_error("gathering a unit from several processes works "
                             "on host memory: the CPU backend's only");
  // Every rank's shard, padded, over the grid; the leader keeps those of
  // the first replica (ranks 0 .. shards - 1).
  const DType element = elementBytes == 8   ? DType::F64
                        : elementBytes == 2 ? DType::BF16
                                            : DType::F32;
  const int64_t shardBytes = unit.shardElems * elementBytes;
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    std::vector<char> shard(shardBytes), all(shardBytes * rank.world);
    for (size_t k = 0; k < offsets.size(); ++k) {
      copyFromArena(&rank, shard.data(), offsets[k], shardBytes);
      rank.comm->allGather(&rank, element, shard.data(), all.data(),
                           unit.shardElems, 0);
      if (!leader())
        continue;
      const int64_t bytes = unit.numel * elementBytes;
      std::copy(all.begin(), all.begin() + bytes, fulls[k].begin());
    }
  });
}

void ProcessRanks::initialize(const StepState &initial,
                              bool measureExposedComm) {
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    DPRT_TRACE(rank.rank, trace::Track::Compute, "init");
    initRank(&rank, launch_.deviceOf(i));
    allocateArena(&rank, spec_.arenaBytes);
    rank.hostState = initial;
    uploadStepState(&rank);
    dp_init(&rank);
    synchronize(&rank);
    rank.measureExposedComm = measureExposedComm;
  });
}

void ProcessRanks::shutdown() {
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    synchronize(&rank);
    freeArena(&rank);
    shutdownRank(&rank);
  });
  shutDown_ = true;
}

} // namespace dprt::driver
