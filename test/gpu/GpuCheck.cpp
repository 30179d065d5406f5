//===- GpuCheck.cpp - dpc-gpu-check: the CUDA backend on a GPU ------------===//
//
//   dpc-gpu-check [--seed N] [--filter NAME] [--no-timing] [--only-timing]
//                 [--device D] [--timeout S]
//       every CUDA kernel against the CPU backend's on random inputs, the
//       captured-step check, then kernel timings at the 1.1B Llama sizes;
//   dpc-gpu-check --nccl [--nccl-ranks N] [--no-timing]
//       the NCCL checks on N GPUs (default 2) of this process, one thread
//       each;
//   dpc-gpu-check --nccl-env [--no-timing]
//       the NCCL checks as one rank of a job whose processes were started
//       with RANK/WORLD_SIZE/LOCAL_RANK (or mpirun, srun) and NCCL_COMM_ID.
// Rows are printed as they complete, and the whole table at the end. The
// exit status is 0 when every check passes, 1 when one fails, 2 on a setup
// error, 3 when the run exceeds --timeout seconds (default 540, under the
// GPU machine's 600 a command), which a hang in a collective would
// otherwise turn into a lost lease.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "CudnnAttention.h"
#include "NcclCommunicator.h"
#include "dprt/backend.h"
#include "dprt/comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using namespace dpc::gpucheck;

namespace {

struct Options {
  uint64_t seed = 0;
  bool seedGiven = false;
  std::string filter;
  bool correctness = true;
  bool timing = true;
  bool nccl = false;
  bool ncclEnv = false;
  int ncclRanks = 2;
  int device = 0;
  double timeout = 540;
};

[[noreturn]] void usage(const char *message) {
  std::fprintf(stderr,
               "dpc-gpu-check: %s\n"
               "usage: dpc-gpu-check [--seed N] [--filter NAME] [--no-timing] "
               "[--only-timing] [--device D] [--timeout S] [--nccl "
               "[--nccl-ranks N] | --nccl-env]\n",
               message);
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc)
        usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--seed") {
      o.seed = std::strtoull(next(), nullptr, 10);
      o.seedGiven = true;
    } else if (a == "--filter") {
      o.filter = next();
    } else if (a == "--no-timing") {
      o.timing = false;
    } else if (a == "--only-timing") {
      o.correctness = false;
    } else if (a == "--device") {
      o.device = std::atoi(next());
    } else if (a == "--timeout") {
      o.timeout = std::atof(next());
    } else if (a == "--nccl") {
      o.nccl = true;
    } else if (a == "--nccl-ranks") {
      o.ncclRanks = std::atoi(next());
      if (o.ncclRanks < 2)
        usage("--nccl-ranks needs at least 2");
    } else if (a == "--nccl-env") {
      o.ncclEnv = true;
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (!o.seedGiven)
    o.seed =
        uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  return o;
}

void printDevice(int device) {
  cudaDeviceProp props{};
  if (cudaGetDeviceProperties(&props, device) == cudaSuccess)
    std::printf("device %d: %s, %d SMs, %.1f GiB\n", device, props.name,
                props.multiProcessorCount,
                double(props.totalGlobalMem) / double(1ull << 30));
}

/// Prepares a rank on `device` with an arena holding the StepState at 0.
void openRank(dprt::Rank &rank, int device, int64_t arenaBytes) {
  gpu::initRank(&rank, device);
  gpu::allocateArena(&rank, arenaBytes);
  rank.stateOffset = 0;
  rank.hostState = dprt::StepState{};
  rank.hostState.step = 1;
  rank.hostState.gradScale = 1.0;
  rank.hostState.lrScale = 1.0;
  rank.hostState.lr = 0.1;
  rank.hostState.clipNorm = 1.0;
  gpu::uploadStepState(&rank);
}

void closeRank(dprt::Rank &rank) {
  gpu::freeArena(&rank);
  gpu::shutdownRank(&rank);
}

int singleGpu(const Options &o, Report &report) {
  printDevice(o.device);
  std::printf("cuDNN attention: %s\n", gpu::cudnnAttentionLibrary().c_str());
  dprt::Rank gpuRank;
  openRank(gpuRank, o.device, kNcclArenaBytes);
  // The CPU kernels read the StepState from a host arena.
  std::vector<double> cpuArena(512);
  dprt::Rank cpuRank;
  cpuRank.arena = reinterpret_cast<char *>(cpuArena.data());
  cpuRank.arenaBytes = int64_t(cpuArena.size() * sizeof(double));
  cpuRank.stateOffset = 0;

  Context ctx;
  ctx.gpu = &gpuRank;
  ctx.cpu = &cpuRank;
  ctx.report = &report;
  ctx.baseSeed = o.seed;
  ctx.filter = o.filter;
  if (o.correctness) {
    kernelChecks(ctx);
    capturedStepCheck(ctx);
    allFiniteCheck(ctx);
    queuedCopiesCheck(ctx);
    capturedAttentionCheck(ctx);
  }
  if (o.timing)
    timings(ctx);
  std::printf("peakMemoryBytes: %.1f MiB\n",
              double(gpu::peakMemoryBytes(&gpuRank)) / double(1 << 20));
  closeRank(gpuRank);
  return report.print() ? 1 : 0;
}

int ncclThreads(const Options &o, Report &report) {
  const int world = o.ncclRanks;
  int count = gpu::availableDevices();
  if (count < world) {
    std::fprintf(stderr, "dpc-gpu-check --nccl: needs %d GPUs, %d visible\n",
                 world, count);
    return 2;
  }
  for (int d = 0; d < world; ++d)
    printDevice(d);
  auto comms = gpu::makeNcclCommunicators(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        dprt::Rank rank;
        rank.rank = r;
        rank.world = world;
        rank.comm = comms[size_t(r)].get();
        openRank(rank, r, kNcclArenaBytes);
        ncclChecks(&rank, report, o.timing);
        closeRank(rank);
      } catch (const std::exception &e) {
        Row row;
        row.kernel = "nccl";
        row.dtype = "-";
        row.shape = "rank " + std::to_string(r);
        row.note = std::string("exception: ") + e.what();
        report.add(row);
      }
    });
  for (std::thread &t : threads)
    t.join();
  comms.clear();
  return report.print() ? 1 : 0;
}

int ncclEnvironment(const Options &o, Report &report) {
  auto comm = gpu::makeNcclCommunicatorFromEnvironment();
  printDevice(comm->device());
  dprt::Rank rank;
  rank.rank = comm->rank();
  rank.world = comm->world();
  rank.comm = comm.get();
  openRank(rank, comm->device(), kNcclArenaBytes);
  ncclChecks(&rank, report, o.timing);
  closeRank(rank);
  comm.reset();
  return report.print() ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  std::printf("dpc-gpu-check: seed %llu\n", (unsigned long long)o.seed);
  std::fflush(stdout);
  // A hang (a collective whose peer failed) must not eat the lease.
  std::thread([timeout = o.timeout] {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout));
    std::fprintf(stderr, "dpc-gpu-check: timed out after %.0f s\n", timeout);
    std::fflush(stdout);
    std::_Exit(3);
  }).detach();
  Report report;
  try {
    if (o.nccl)
      return ncclThreads(o, report);
    if (o.ncclEnv)
      return ncclEnvironment(o, report);
    return singleGpu(o, report);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dpc-gpu-check: %s\n", e.what());
    report.print();
    return 2;
  }
}
