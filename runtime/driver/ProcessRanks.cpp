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
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace dprt::driver {

/// One persistent thread per local rank; run() executes a job on all of them
/// and waits. When a job throws, `abort` wakes the ranks blocked in a
/// collective, and run() rethrows the root cause (not the "aborted" errors
/// it caused in the other ranks).
class RankThreads {
public:
  RankThreads(int count, std::function<void(const std::string &)> abort)
      : abort_(std::move(abort)), errors_(count) {
    for (int i = 0; i < count; ++i)
      threads_.emplace_back([this, i] { loop(i); });
  }

  ~RankThreads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread &t : threads_)
      t.join();
  }

  int size() const { return static_cast<int>(threads_.size()); }

  void run(const std::function<void(int)> &job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      pending_ = size();
      for (auto &e : errors_)
        e = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    std::exception_ptr first, root;
    for (auto &e : errors_) {
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
      try {
        (*job)(index);
      } catch (const std::exception &e) {
        errors_[index] = std::current_exception();
        abort_(std::string("another rank failed: ") + e.what());
      } catch (...) {
        errors_[index] = std::current_exception();
        abort_("another rank failed");
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (--pending_ == 0)
          done_.notify_all();
      }
    }
  }

  std::function<void(const std::string &)> abort_;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)> *job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

Launch planLaunch(const Options &options, const ProgramSpec &spec) {
  Launch launch;
  launch.world = spec.ranks;
  launch.localRanks = spec.ranks;
  if (std::string(backendName()) == "cpu") {
    launch.sharedDevice = true; // every rank is a thread of this process
    return launch;
  }

  if (options.gpus) {
    if (*options.gpus > availableDevices())
      throw UsageError("--gpus " + std::to_string(*options.gpus) +
                       " but this machine has " +
                       std::to_string(availableDevices()) + " GPUs");
    return launch;
  }
  // One process per GPU, started by torchrun, Slurm or mpirun.
  LaunchEnvironment environment;
  bool launched = false;
  try {
    launched = readLaunchEnvironment(environment);
  } catch (const std::invalid_argument &e) {
    throw UsageError(std::string("the launcher's environment: ") + e.what());
  }
  if (launched && environment.world > 1) {
    if (environment.world != spec.ranks)
      throw UsageError(environment.launcher + " started " +
                       std::to_string(environment.world) +
                       " processes but the program was compiled for " +
                       std::to_string(spec.ranks) + " ranks");
    launch.multiProcess = true;
    launch.localRanks = 1;
    launch.firstRank = environment.rank;
    launch.firstDevice = environment.localRank;
    return launch;
  }
  if (spec.ranks > 1)
    throw UsageError("this program was compiled for " +
                     std::to_string(spec.ranks) + " ranks: pass --gpus " +
                     std::to_string(spec.ranks) + ", or launch " +
                     std::to_string(spec.ranks) +
                     " processes with torchrun, Slurm or mpirun");
  return launch;
}

ProcessRanks::ProcessRanks(const Launch &launch, const ProgramSpec &spec)
    : spec_(spec), launch_(launch), comms_(makeCommunicators(launch_)) {
  if (static_cast<int>(comms_.size()) != launch_.localRanks)
    throw std::runtime_error(
        "the backend made " + std::to_string(comms_.size()) +
        " communicators for " + std::to_string(launch_.localRanks) + " ranks");
  for (int i = 0; i < launch_.localRanks; ++i) {
    auto slot = std::make_unique<RankSlot>();
    slot->rank.rank = launch_.firstRank + i;
    slot->rank.world = launch_.world;
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
  std::vector<Communicator *> comms;
  for (auto &comm : comms_)
    comms.push_back(comm.get());
  threads_ = std::make_unique<RankThreads>(launch_.localRanks,
                                           [comms](const std::string &reason) {
                                             for (Communicator *comm : comms)
                                               comm->abort(reason);
                                           });
}

ProcessRanks::~ProcessRanks() {
  threads_.reset();
  if (!shutDown_)
    for (auto &comm : comms_)
      comm.release();
}

void ProcessRanks::run(const std::function<void(int)> &job) {
  threads_->run(job);
}

void ProcessRanks::forEachLocalShard(
    const UnitSpec &unit,
    const std::function<void(Rank &, int64_t, int64_t)> &body) {
  run([&](int i) {
    Rank &rank = slots_[i]->rank;
    const int64_t lo = rank.rank * unit.shardElems;
    const int64_t hi = std::min(lo + unit.shardElems, unit.numel);
    if (lo < hi)
      body(rank, lo, hi);
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
