//===- Backend.cpp - Backend services of the CPU backend ------------------===//
//
// The ranks are threads of this process, exchanging data through thread
// communicators, or each rank is a process of an MPI job started by mpirun
// or srun --mpi=pmix (MpiCommunicator.h). The arena is one aligned host
// allocation, copies are memcpy, and a step is a plain call. The CPU backend
// keeps no per-rank state (Rank::backend stays null): kernels run on the rank's
// thread, in issue order.
//
//===----------------------------------------------------------------------===//

#include "MpiCommunicator.h"

#include "dprt/backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

// OpenBLAS's thread-count setter; not in every cblas.h.
extern "C" void openblas_set_num_threads(int numThreads);

namespace dprt::cpu {
namespace {

/// Ranks of this launch that run on this machine, and so share its cores.
int ranksOnThisMachine = 1;

void requireRange(const Rank *rank, const char *service, int64_t offset,
                  int64_t bytes) {
  if (!rank->arena)
    throw std::runtime_error(std::string(service) + ": rank " +
                             std::to_string(rank->rank) + " has no arena");
  if (offset < 0 || bytes < 0 || offset > rank->arenaBytes ||
      bytes > rank->arenaBytes - offset)
    throw std::runtime_error(
        std::string(service) + ": bytes [" + std::to_string(offset) + ", " +
        std::to_string(offset + bytes) + ") lie outside the arena of " +
        std::to_string(rank->arenaBytes) + " bytes");
}
} // namespace

const char *backendName() { return "cpu"; }

int availableDevices() { return 1; }

bool readLaunchEnvironment(LaunchEnvironment &env) {
  if (startedByMpiLauncher()) {
    // mpirun's own variables (or srun's under srun --mpi=pmix) describe the
    // MPI job, whatever else the environment holds; torchrun's must agree.
    checkLauncherAgreement();
    if (readLauncherVariables("mpirun", env) ||
        readLauncherVariables("srun", env))
      return true;
    throw std::invalid_argument(
        "MPI's launcher variables (PMIX_RANK or PMI_RANK) are set, but "
        "neither mpirun's (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) nor "
        "srun's (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID): start the "
        "processes with Open MPI's mpirun or with srun --mpi=pmix");
  }
  if (!readLauncherVariables(env))
    return false;
  if (env.world > 1)
    throw std::invalid_argument(
        "started by " + env.launcher + " as one of " +
        std::to_string(env.world) + " processes (" + env.variables +
        "), but the CPU backend's processes join through MPI, which " +
        env.launcher +
        " does not set up: start them with mpirun -np N (Open MPI) or "
        "srun --mpi=pmix, or run one process, whose ranks are threads");
  return true;
}

std::vector<std::unique_ptr<Communicator>>
makeCommunicators(const Launch &launch) {
  if (!launch.multiProcess) {
    if (launch.localRanks != launch.world)
      throw std::runtime_error("the CPU backend runs all " +
                               std::to_string(launch.world) +
                               " ranks of one process as its threads");
    ranksOnThisMachine = launch.world;
    return makeThreadCommunicators(launch.world,
                                   launch.collectiveTimeoutSeconds);
  }
  if (launch.localRanks != 1)
    throw std::runtime_error("each process of an MPI job runs one rank of "
                             "the CPU backend, not " +
                             std::to_string(launch.localRanks));
  LaunchEnvironment env;
  if (!readLaunchEnvironment(env) || env.world != launch.world ||
      env.rank != launch.firstRank)
    throw std::runtime_error("the launch of rank " +
                             std::to_string(launch.firstRank) + " of " +
                             std::to_string(launch.world) +
                             " does not match the launcher's variables");
  // Processes of this machine share its cores: mpirun says how many there
  // are; without it assume every rank is here.
  ranksOnThisMachine = launch.world;
  if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    ranksOnThisMachine = std::max(1, std::atoi(local));
  std::vector<std::unique_ptr<Communicator>> comms;
  comms.push_back(
      makeMpiWorldCommunicator(env, launch.collectiveTimeoutSeconds));
  return comms;
}

void initRank(Rank *rank, int device) {
  if (device != 0)
    throw std::runtime_error("the CPU backend has one device (0), asked for " +
                             std::to_string(device));
  if (rank->world < 1 || rank->rank < 0 || rank->rank >= rank->world)
    throw std::runtime_error("initRank: rank " + std::to_string(rank->rank) +
                             " of " + std::to_string(rank->world));
  // The ranks of this machine (threads of this process, or processes of an
  // MPI job) share its cores rather than let every rank's GEMMs start one
  // BLAS thread per core. The setting is process-wide; the lock keeps
  // concurrent initRank calls from racing inside OpenBLAS.
  static std::mutex blasMutex;
  std::lock_guard<std::mutex> lock(blasMutex);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  openblas_set_num_threads(
      std::max(1, static_cast<int>(cores) / ranksOnThisMachine));
  rank->backend = nullptr;
}

void shutdownRank(Rank *) {}

void allocateArena(Rank *rank, int64_t bytes) {
  if (bytes <= 0)
    throw std::runtime_error("allocateArena: the arena size must be > 0, got " +
                             std::to_string(bytes));
  // aligned_alloc wants a multiple of the alignment.
  const int64_t rounded =
      (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  void *memory = std::aligned_alloc(static_cast<size_t>(kArenaAlignment),
                                    static_cast<size_t>(rounded));
  if (!memory)
    throw std::runtime_error("cannot allocate the arena of " +
                             std::to_string(bytes) + " bytes for rank " +
                             std::to_string(rank->rank));
  // Zeroed, so that nothing depends on what the allocator left there.
  std::memset(memory, 0, static_cast<size_t>(rounded));
  rank->arena = static_cast<char *>(memory);
  rank->arenaBytes = bytes;
}

void freeArena(Rank *rank) {
  std::free(rank->arena);
  rank->arena = nullptr;
  rank->arenaBytes = 0;
}

void copyToArena(Rank *rank, int64_t offset, const void *src, int64_t bytes) {
  requireRange(rank, "copyToArena", offset, bytes);
  if (bytes > 0)
    std::memcpy(rank->arena + offset, src, static_cast<size_t>(bytes));
}

void copyFromArena(Rank *rank, void *dst, int64_t offset, int64_t bytes) {
  requireRange(rank, "copyFromArena", offset, bytes);
  if (bytes > 0)
    std::memcpy(dst, rank->arena + offset, static_cast<size_t>(bytes));
}

void queueCopyToArena(Rank *rank, int64_t offset, const void *src,
                      int64_t bytes) {
  copyToArena(rank, offset, src, bytes);
}

void queueCopyFromArena(Rank *rank, void *dst, int64_t offset, int64_t bytes) {
  copyFromArena(rank, dst, offset, bytes);
}

void uploadStepState(Rank *rank) {
  requireRange(rank, "uploadStepState", rank->stateOffset,
               static_cast<int64_t>(sizeof(StepState)));
  std::memcpy(rank->arena + rank->stateOffset, &rank->hostState,
              sizeof(StepState));
}

void synchronize(Rank *) {}

void runCaptured(Rank *rank, int, void (*step)(Rank *)) { step(rank); }

bool allFinite(Rank *rank, DType acc, int64_t offset, int64_t count) {
  if (acc != DType::F32 && acc != DType::F64)
    throw std::invalid_argument(std::string("allFinite: acc buffers are f32 "
                                            "or f64, got ") +
                                nameOf(acc));
  requireRange(rank, "allFinite", offset, count * sizeOf(acc));
  const char *data = rank->arena + offset;
  if (acc == DType::F64) {
    const auto *p = reinterpret_cast<const double *>(data);
    return std::all_of(p, p + count, [](double x) { return std::isfinite(x); });
  }
  const auto *p = reinterpret_cast<const float *>(data);
  return std::all_of(p, p + count, [](float x) { return std::isfinite(x); });
}

bool allFiniteRanges(Rank *rank, DType acc, const int64_t *offsets,
                     const int64_t *counts, int64_t ranges) {
  bool finite = true;
  // Every range is checked (and its bounds too), not just up to the first
  // bad one: the same errors whatever the data.
  for (int64_t i = 0; i < ranges; ++i)
    finite &= allFinite(rank, acc, offsets[i], counts[i]);
  return finite;
}

int64_t peakMemoryBytes(Rank *rank) { return rank->arenaBytes; }

KernelTuning kernelTuning(Rank *) { return {}; }

} // namespace dprt::cpu
