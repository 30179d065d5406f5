//===- Backend.cpp - Backend services of the CPU backend ------------------===//
//
// Every rank is a thread of this process, exchanging data through thread
// communicators. The arena is one aligned host allocation, copies are
// memcpy, and a step is a plain call. The CPU backend keeps no per-rank state
// (Rank::backend stays null): kernels run on the rank's thread, in issue
// order.
//
//===----------------------------------------------------------------------===//

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

bool readLaunchEnvironment(LaunchEnvironment &) { return false; }

std::vector<std::unique_ptr<Communicator>>
makeCommunicators(const Launch &launch) {
  if (launch.multiProcess || launch.localRanks != launch.world)
    throw std::runtime_error("the CPU backend runs all " +
                             std::to_string(launch.world) +
                             " ranks as threads of one process");
  return makeThreadCommunicators(launch.world);
}

void initRank(Rank *rank, int device) {
  if (device != 0)
    throw std::runtime_error("the CPU backend has one device (0), asked for " +
                             std::to_string(device));
  if (rank->world < 1 || rank->rank < 0 || rank->rank >= rank->world)
    throw std::runtime_error("initRank: rank " + std::to_string(rank->rank) +
                             " of " + std::to_string(rank->world));
  // The ranks are threads of this process: share the cores between them
  // rather than let every rank's GEMMs start one BLAS thread per core. The
  // setting is process-wide; the lock keeps concurrent initRank calls from
  // racing inside OpenBLAS.
  static std::mutex blasMutex;
  std::lock_guard<std::mutex> lock(blasMutex);
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  openblas_set_num_threads(std::max(1, static_cast<int>(cores) / rank->world));
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

int64_t peakMemoryBytes(Rank *rank) { return rank->arenaBytes; }

} // namespace dprt::cpu
