//===- NcclCommunicator.cpp - NCCL collectives for the CUDA backend -------===//
//
// Every communicator is created non-blocking (ncclConfig_t::blocking = 0):
// NCCL calls may then return ncclInProgress, after which the state is polled
// with ncclCommGetAsyncError until it settles, which is what lets creation
// and teardown give up after a timeout instead of hanging on a missing peer.
//
//===----------------------------------------------------------------------===//

#include "NcclCommunicator.h"

#include "DeviceState.h"

#include "common/FaultReport.h"
#include "dprt/backend.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <thread>
#include <utility>

namespace dprt::cuda {

struct NcclGroup {
  std::mutex mutex;
  int alive = 0;
  /// Finalizing communicators and their devices, destroyed with the last.
  std::vector<std::pair<ncclComm_t, int>> finalizing;
  /// The groups of the communicators the k-th split of this group's
  /// communicators made (in this process), by k.
  std::map<int, std::shared_ptr<NcclGroup>> splits;
};

namespace {

using Clock = std::chrono::steady_clock;

std::string ncclMessage(ncclComm_t comm, ncclResult_t result);

/// The process's watchdog (NcclCommunicator.h). NCCL calls of the ranks'
/// threads hold `use` shared; the abort holds it exclusively, so that no
/// thread is inside a call on a communicator being aborted, and every later
/// call sees `aborted` first.
class Watchdog {
public:
  static Watchdog &get() {
    // Never destroyed: its thread polls until the process ends.
    static Watchdog *instance = new Watchdog;
    return *instance;
  }

  void watch(ncclComm_t comm, int device, double timeoutSeconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.emplace_back(comm, device);
    timeoutSeconds_ = timeoutSeconds;
    if (!started_) {
      started_ = true;
      std::thread([this] { loop(); }).detach();
    }
  }

  void unwatch(ncclComm_t comm) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = comms_.begin(); it != comms_.end(); ++it)
      if (it->first == comm) {
        comms_.erase(it);
        return;
      }
  }

  int beginWait(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int id = nextWait_++;
    waits_[id] = {rank, Clock::now()};
    return id;
  }

  void endWait(int id) {
    std::lock_guard<std::mutex> lock(mutex_);
    waits_.erase(id);
  }

  bool aborted() const { return aborted_.load(); }

  /// Throws the reason of the abort, if there was one.
  void check() const {
    if (!aborted_.load())
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (timedOut_)
      throw CollectiveTimeout(reason_);
    throw std::runtime_error(reason_);
  }

  /// Shared by every NCCL call of the ranks' threads.
  std::shared_mutex use;

private:
  void loop() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string reason;
      bool timedOut = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (aborted_.load())
          continue;
        for (auto &[comm, device] : comms_) {
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
              state != ncclSuccess && state != ncclInProgress) {
            reason = "NCCL failed in " + faults::describeActivity() + ": " +
                     ncclMessage(comm, state);
            break;
          }
        }
        const Clock::time_point now = Clock::now();
        for (auto &[id, wait] : waits_) {
          if (!reason.empty())
            break;
          if (std::chrono::duration<double>(now - wait.since).count() >
              timeoutSeconds_) {
            std::ostringstream os;
            const int64_t step = faults::currentStep();
            os << "rank " << wait.rank << ": the GPU work "
               << (step == 0 ? std::string("before the first step")
                             : "of step " + std::to_string(step))
               << " did not finish within " << timeoutSeconds_
               << " s (--collective-timeout): a collective waits for a rank "
                  "that stopped or runs other code (NCCL does not say which; "
                  "the other ranks' messages and the \"ranks\" heartbeats "
                  "of the metrics do)";
            reason = os.str();
            timedOut = true;
          }
        }
        if (reason.empty())
          continue;
        reason_ = reason + "; aborted the NCCL communicators";
        timedOut_ = timedOut;
        aborted_.store(true);
        reason = reason_;
      }
      endAfterGrace(reason);
      // Every thread leaves its NCCL call (they see `aborted`), then the
      // communicators go; the kernels blocked on them end. mutex_ is not
      // held meanwhile: the ranks' waits check() it to throw the reason.
      std::vector<std::pair<ncclComm_t, int>> comms;
      {
        std::unique_lock<std::shared_mutex> exclusive(use);
        std::lock_guard<std::mutex> lock(mutex_);
        comms.swap(comms_);
      }
      for (auto &[comm, device] : comms) {
        cudaSetDevice(device);
        ncclCommAbort(comm);
      }
    }
  }

  /// The last resort, seen on two H200s with CUDA graphs: ncclCommAbort
  /// itself can wait for graph-launched work that never ends, and so can
  /// the ranks' unwinding (stream synchronizations in the teardown). A
  /// process still alive kGraceSeconds after the abort began says why and
  /// ends, so a stopped peer never leaves it hanging.
  static void endAfterGrace(const std::string &reason) {
    std::thread([reason] {
      std::this_thread::sleep_for(std::chrono::duration<double>(kGraceSeconds));
      faults::endProcess(reason + "; the process did not end within " +
                             std::to_string(int(kGraceSeconds)) +
                             " s of the abort (the GPU work waiting for the "
                             "other ranks could not be ended): ended it",
                         1);
    }).detach();
  }

  static constexpr double kGraceSeconds = 10;

  struct Wait {
    int rank;
    Clock::time_point since;
  };

  mutable std::mutex mutex_;
  bool started_ = false;
  std::vector<std::pair<ncclComm_t, int>> comms_;
  std::map<int, Wait> waits_;
  int nextWait_ = 0;
  double timeoutSeconds_ = kDefaultCollectiveTimeoutSeconds;
  std::atomic<bool> aborted_{false};
  bool timedOut_ = false;
  std::string reason_;
};

/// Holds Watchdog::use shared around NCCL calls; throws when the
/// communicators were aborted.
class NcclUse {
public:
  NcclUse() : lock_(Watchdog::get().use) { Watchdog::get().check(); }

private:
  std::shared_lock<std::shared_mutex> lock_;
};

/// NCCL_NVLS_ENABLE=0 unless set: NVLink multicast is not to be used on the
/// machines this runs on. Before the first NCCL call, which reads it.
void disableNvls() { setenv("NCCL_NVLS_ENABLE", "0", 0); }

std::string ncclMessage(ncclComm_t comm, ncclResult_t result) {
  std::string message = ncclGetErrorString(result);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    message += std::string(" (") + last + ")";
  return message;
}

/// The communicator's state once it is no longer ncclInProgress, or
/// ncclInProgress if `timeout` seconds (< 0: no limit) pass first or the
/// watchdog is aborting the communicators.
ncclResult_t settle(ncclComm_t comm, ncclResult_t result, double timeout) {
  Clock::time_point begin = Clock::now();
  int polls = 0;
  while (result == ncclInProgress) {
    if ((timeout >= 0 &&
         std::chrono::duration<double>(Clock::now() - begin).count() >
             timeout) ||
        Watchdog::get().aborted())
      return ncclInProgress;
    // Spin briefly (an enqueue settles in microseconds), then sleep.
    if (++polls > 1000)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ncclResult_t state = ncclSuccess;
    ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess)
      return query;
    result = state;
  }
  return result;
}

void checkNccl(ncclComm_t comm, ncclResult_t result, const char *call) {
  result = settle(comm, result, -1.0);
  if (result == ncclInProgress)
    Watchdog::get().check();
  if (result != ncclSuccess)
    fail(std::string(call) + ": " + ncclMessage(comm, result));
}

ncclDataType_t ncclTypeOf(DType t) {
  switch (t) {
  case DType::F64:
    return ncclFloat64;
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  }
  fail("unknown DType in a collective");
}

ncclConfig_t nonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

/// Waits until every communicator's creation has settled (within the
/// timeout); on failure aborts them all and throws.
void awaitCreation(std::vector<ncclComm_t> &comms,
                   const std::vector<int> &devices, ncclResult_t started,
                   const std::string &who, double timeout) {
  std::string error;
  if (started != ncclSuccess && started != ncclInProgress)
    error = ncclMessage(comms.empty() ? nullptr : comms[0], started);
  Clock::time_point begin = Clock::now();
  for (size_t i = 0; i < comms.size() && error.empty(); ++i) {
    double left =
        timeout - std::chrono::duration<double>(Clock::now() - begin).count();
    ncclResult_t state = settle(comms[i], ncclInProgress, left > 0 ? left : 0);
    if (state == ncclInProgress)
      error = "timed out after " + std::to_string(int(timeout)) +
              " s waiting for the other ranks (--collective-timeout): a rank "
              "did not start or stopped before it joined";
    else if (state != ncclSuccess)
      error = ncclMessage(comms[i], state);
  }
  if (error.empty())
    return;
  for (size_t i = 0; i < comms.size(); ++i)
    if (comms[i]) {
      cudaSetDevice(devices[i]);
      ncclCommAbort(comms[i]);
    }
  fail("creating the NCCL communicator of " + who + ": " + error);
}

/// Waits for the finalized communicators of a group and frees them; aborts
/// those that do not settle in time. Runs in a destructor: reports, never
/// throws.
void destroyGroup(NcclGroup &group, double timeout) {
  Clock::time_point begin = Clock::now();
  for (auto &[comm, device] : group.finalizing) {
    cudaSetDevice(device);
    double left =
        timeout - std::chrono::duration<double>(Clock::now() - begin).count();
    ncclResult_t state = settle(comm, ncclInProgress, left > 0 ? left : 0);
    if (state == ncclSuccess) {
      ncclCommDestroy(comm);
    } else {
      std::fprintf(stderr,
                   "dprt::cuda: finalizing an NCCL communicator failed (%s); "
                   "aborting it\n",
                   state == ncclInProgress ? "timed out"
                                           : ncclMessage(comm, state).c_str());
      ncclCommAbort(comm);
    }
  }
  group.finalizing.clear();
}

} // namespace

NcclCommunicator::NcclCommunicator(ncclComm *comm, int rank, int world,
                                   int device, std::shared_ptr<NcclGroup> group,
                                   double timeoutSeconds)
    : comm_(comm), rank_(rank), world_(world), device_(device),
      group_(std::move(group)), timeoutSeconds_(timeoutSeconds) {
  std::lock_guard<std::mutex> lock(group_->mutex);
  ++group_->alive;
  Watchdog::get().watch(comm_, device_, timeoutSeconds_);
}

NcclCommunicator::~NcclCommunicator() {
  cudaSetDevice(device_);
  if (hostBuffer_)
    cudaFree(hostBuffer_);
  if (hostStream_)
    cudaStreamDestroy(hostStream_);
  Watchdog::get().unwatch(comm_);
  // The watchdog aborted (and freed) every communicator: nothing to end.
  if (Watchdog::get().aborted())
    return;
  // Finalizing is collective: start it here (non-blocking) and let the last
  // communicator of the group wait for all of them.
  ncclResult_t started = ncclCommFinalize(comm_);
  std::lock_guard<std::mutex> lock(group_->mutex);
  if (started == ncclSuccess || started == ncclInProgress) {
    group_->finalizing.emplace_back(comm_, device_);
  } else {
    std::fprintf(stderr,
                 "dprt::cuda: ncclCommFinalize failed (%s); aborting the "
                 "communicator\n",
                 ncclMessage(comm_, started).c_str());
    ncclCommAbort(comm_);
  }
  if (--group_->alive == 0)
    destroyGroup(*group_, timeoutSeconds_);
}

void NcclCommunicator::allGather(Rank *rank, DType dt, const void *shard,
                                 void *full, int64_t shardElems,
                                 int32_t stream) {
  if (shardElems <= 0)
    return;
  NcclUse use;
  checkNccl(comm_,
            ncclAllGather(shard, full, size_t(shardElems), ncclTypeOf(dt),
                          comm_, streamOf(rank, stream)),
            "ncclAllGather");
}

void NcclCommunicator::reduceScatter(Rank *rank, DType acc, const void *full,
                                     void *shard, int64_t shardElems,
                                     bool accumulate, int32_t stream) {
  requireAcc(acc, "reduce_scatter");
  if (shardElems <= 0)
    return;
  NcclUse use;
  cudaStream_t s = streamOf(rank, stream);
  // With accumulate: reduce into the stream's scratch, then add.
  void *target = accumulate
                     ? scratch(rank, stream, size_t(shardElems) * sizeof(float))
                     : shard;
  checkNccl(comm_,
            ncclReduceScatter(full, target, size_t(shardElems), ncclFloat32,
                              ncclSum, comm_, s),
            "ncclReduceScatter");
  if (accumulate)
    accumulateOnStream(rank, stream, acc, target, shard, shardElems);
}

void NcclCommunicator::allReduce(Rank *rank, DType acc, void *data,
                                 int64_t count, int32_t stream) {
  requireAcc(acc, "all_reduce");
  if (count <= 0)
    return;
  NcclUse use;
  checkNccl(comm_,
            ncclAllReduce(data, data, size_t(count), ncclTypeOf(acc), ncclSum,
                          comm_, streamOf(rank, stream)),
            "ncclAllReduce");
}

void NcclCommunicator::waitForStream() {
  WatchedWait watched(rank_);
  for (;;) {
    cudaError_t status = cudaStreamQuery(hostStream_);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady) {
      watched.check();
      checkCuda(status, "cudaStreamQuery");
    }
    {
      NcclUse use;
      ncclResult_t state = ncclSuccess;
      checkNccl(comm_, ncclCommGetAsyncError(comm_, &state),
                "ncclCommGetAsyncError");
      if (state != ncclSuccess && state != ncclInProgress)
        fail("NCCL failed while waiting for a host all-reduce: " +
             ncclMessage(comm_, state));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::allReduceHost(double *values, int count) {
  // The sum over one rank is its own values. Without this a single GPU's
  // step paid two host-device round trips a call (about 60 us of idle GPU
  // each, twice a step).
  if (count <= 0 || world_ == 1)
    return;
  checkCuda(cudaSetDevice(device_), "cudaSetDevice");
  if (!hostStream_)
    checkCuda(cudaStreamCreateWithFlags(&hostStream_, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  if (count > hostBufferCount_) {
    if (hostBuffer_)
      checkCuda(cudaFree(hostBuffer_), "cudaFree");
    hostBuffer_ = nullptr;
    hostBufferCount_ = 0;
    checkCuda(cudaMalloc(&hostBuffer_, size_t(count) * sizeof(double)),
              "cudaMalloc(allReduceHost)");
    hostBufferCount_ = count;
  }
  size_t bytes = size_t(count) * sizeof(double);
  checkCuda(cudaMemcpyAsync(hostBuffer_, values, bytes, cudaMemcpyHostToDevice,
                            hostStream_),
            "cudaMemcpyAsync(allReduceHost)");
  {
    NcclUse use;
    checkNccl(comm_,
              ncclAllReduce(hostBuffer_, hostBuffer_, size_t(count),
                            ncclFloat64, ncclSum, comm_, hostStream_),
              "ncclAllReduce");
  }
  // Poll rather than block, so that an NCCL error ends the wait.
  waitForStream();
  checkCuda(cudaMemcpyAsync(values, hostBuffer_, bytes, cudaMemcpyDeviceToHost,
                            hostStream_),
            "cudaMemcpyAsync(allReduceHost)");
  checkCuda(cudaStreamSynchronize(hostStream_), "cudaStreamSynchronize");
}

void NcclCommunicator::barrier() {
  double one = 1.0;
  allReduceHost(&one, 1);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  checkCuda(cudaSetDevice(device_), "cudaSetDevice");
  std::shared_ptr<NcclGroup> group;
  {
    std::lock_guard<std::mutex> lock(group_->mutex);
    std::shared_ptr<NcclGroup> &slot = group_->splits[splits_++];
    if (!slot)
      slot = std::make_shared<NcclGroup>();
    group = slot;
  }
  std::vector<ncclComm_t> comms(1, nullptr);
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t started;
  {
    NcclUse use;
    started = ncclCommSplit(comm_, color, key, &comms[0], &config);
  }
  awaitCreation(comms, {device_}, started,
                "the group of color " + std::to_string(color) + " of rank " +
                    std::to_string(rank_),
                timeoutSeconds_);
  int rank = 0, size = 0;
  checkNccl(comms[0], ncclCommUserRank(comms[0], &rank), "ncclCommUserRank");
  checkNccl(comms[0], ncclCommCount(comms[0], &size), "ncclCommCount");
  return std::make_unique<NcclCommunicator>(comms[0], rank, size, device_,
                                            std::move(group), timeoutSeconds_);
}

std::vector<std::unique_ptr<Communicator>>
makeNcclCommunicators(int world, double timeoutSeconds) {
  if (world < 1)
    fail("makeNcclCommunicators: world " + std::to_string(world));
  int count = 0;
  checkCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < world)
    fail("makeNcclCommunicators: " + std::to_string(world) +
         " ranks need as many GPUs; " + std::to_string(count) + " visible");
  disableNvls();
  int previous = 0;
  checkCuda(cudaGetDevice(&previous), "cudaGetDevice");
  ncclUniqueId id;
  checkNccl(nullptr, ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(size_t(world), nullptr);
  std::vector<int> devices(static_cast<size_t>(world));
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t started = ncclGroupStart();
  for (int r = 0; r < world && started == ncclSuccess; ++r) {
    devices[size_t(r)] = r;
    checkCuda(cudaSetDevice(r), "cudaSetDevice");
    started = ncclCommInitRankConfig(&comms[size_t(r)], world, id, r, &config);
    if (started == ncclInProgress)
      started = ncclSuccess;
  }
  ncclResult_t ended = ncclGroupEnd();
  if (started == ncclSuccess)
    started = ended;
  awaitCreation(comms, devices, started,
                std::to_string(world) + " GPUs of this process",
                timeoutSeconds);
  checkCuda(cudaSetDevice(previous), "cudaSetDevice");
  auto group = std::make_shared<NcclGroup>();
  std::vector<std::unique_ptr<Communicator>> result;
  for (int r = 0; r < world; ++r)
    result.push_back(std::make_unique<NcclCommunicator>(
        comms[size_t(r)], r, world, r, group, timeoutSeconds));
  return result;
}

std::unique_ptr<NcclCommunicator>
makeNcclCommunicatorFromEnvironment(double timeoutSeconds) {
  LaunchEnvironment env;
  if (!readLauncherVariables(env))
    fail("no launcher environment: set RANK, WORLD_SIZE and LOCAL_RANK (or "
         "start the processes with torchrun, mpirun or srun)");
  std::string who = "rank " + std::to_string(env.rank) + " of " +
                    std::to_string(env.world) + " (from " + env.launcher + ")";
  if (env.world > 1) {
    // NCCL's bootstrap reads NCCL_COMM_ID: give it torchrun's address when
    // only MASTER_ADDR/MASTER_PORT are set.
    std::string address;
    try {
      address = ncclRendezvous(env);
    } catch (const std::invalid_argument &e) {
      fail(who + ": " + e.what());
    }
    setenv("NCCL_COMM_ID", address.c_str(), 1);
  }
  int count = 0;
  checkCuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1)
    fail(who + ": no GPU is visible");
  // One visible GPU: the launcher gave each process its own.
  int device = count == 1 ? 0 : env.localRank;
  if (device >= count)
    fail(who + ": local rank " + std::to_string(env.localRank) + " but only " +
         std::to_string(count) + " GPUs are visible");
  disableNvls();
  checkCuda(cudaSetDevice(device), "cudaSetDevice");
  // With NCCL_COMM_ID set every process computes the same id, and rank 0
  // listens at that address.
  ncclUniqueId id;
  checkNccl(nullptr, ncclGetUniqueId(&id), "ncclGetUniqueId");
  std::vector<ncclComm_t> comms(1, nullptr);
  ncclConfig_t config = nonBlockingConfig();
  ncclResult_t started =
      ncclCommInitRankConfig(&comms[0], env.world, id, env.rank, &config);
  awaitCreation(comms, {device}, started, who, timeoutSeconds);
  return std::make_unique<NcclCommunicator>(
      comms[0], env.rank, env.world, device, std::make_shared<NcclGroup>(),
      timeoutSeconds);
}

WatchedWait::WatchedWait(int rank) : id_(Watchdog::get().beginWait(rank)) {}

WatchedWait::~WatchedWait() { Watchdog::get().endWait(id_); }

void WatchedWait::check() const { Watchdog::get().check(); }

//===----------------------------------------------------------------------===//
// backend.inc: the launch
//===----------------------------------------------------------------------===//

bool readLaunchEnvironment(LaunchEnvironment &env) {
  if (!readLauncherVariables(env))
    return false;
  // Missing or malformed rendezvous variables are the user's to fix (exit
  // status 2), before any GPU is touched.
  if (env.world > 1)
    ncclRendezvous(env);
  return true;
}

std::vector<std::unique_ptr<Communicator>>
makeCommunicators(const Launch &launch) {
  if (!launch.multiProcess)
    return makeNcclCommunicators(launch.world, launch.collectiveTimeoutSeconds);
  std::vector<std::unique_ptr<Communicator>> comms;
  comms.push_back(
      makeNcclCommunicatorFromEnvironment(launch.collectiveTimeoutSeconds));
  return comms;
}

} // namespace dprt::cuda
