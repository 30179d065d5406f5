//===- DeviceState.h - Per-rank state of the CUDA backend -------*- C++ -*-===//
//
// Internal to runtime/cuda. Everything a rank owns on its GPU: the compute
// and communication streams, the events the emitted program records and
// waits for, the cuBLASLt handle with its workspace and plan cache, scratch
// memory that kernels grow on first use, and the CUDA graphs of captured
// steps. Also the error checks every source of the backend uses.
//
// Rank::backend (a `dprt::BackendState *`, opaque in rank.h) points to a
// `DeviceState`. The type is deliberately not named dprt::BackendState: the
// GPU check program links the CPU and the CUDA backend into one binary, and
// two different definitions of one class there would break the one-
// definition rule. The pointer is converted with reinterpret_cast only in
// `deviceState` below.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_DEVICESTATE_H
#define DPRT_CUDA_DEVICESTATE_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dprt::cuda {

struct GemmCache;
struct CudnnAttentionState;
struct UpdateGroup;

/// Throws std::runtime_error("dprt::cuda: " + message).
[[noreturn]] void fail(const std::string &message);

/// Throws with the call's name and CUDA's error string unless `status` is
/// cudaSuccess.
void checkCuda(cudaError_t status, const char *call);
void checkCublas(cublasStatus_t status, const char *call);

/// cudaSuccess when this build of the backend has code for the current
/// device (every .cu file is built for the same -gencode list),
/// cudaErrorNoKernelImageForDevice (or similar) when it has not.
cudaError_t probeKernelImage();

/// After a kernel launch: configuration errors surface here.
inline void checkLaunch(const char *kernel) {
  checkCuda(cudaGetLastError(), kernel);
}

/// The CUDA backend computes in f32 and bf16 only; f64 models run on the CPU
/// backend. Throws "<kernel>: f64 is not supported on the CUDA backend".
void requireCompute(DType dt, const char *kernel);
/// Acc buffers of f32 and bf16 models are f32.
void requireAcc(DType acc, const char *kernel);

/// Stream indices of the emitted program.
constexpr int32_t kComputeStream = 0;
constexpr int32_t kCommStream = 1;
constexpr int kStreams = 2;

/// A step function captured into a CUDA graph (runCaptured).
struct CapturedStep {
  int calls = 0;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  /// The exposed-communication probes the graph records (indices into
  /// DeviceState::probes), and whether its last launch is still uncounted.
  std::vector<int> probes;
  bool probesPending = false;
  /// Waits of the compute stream for an event in the last un-captured run
  /// (probed or not): the probes its capture may need, created beforehand.
  int uncapturedWaits = 0;
};

/// Two timing events around one wait of the compute stream for the
/// communication stream (Rank::measureExposedComm): their distance is the
/// time compute stood still for communication.
struct WaitProbe {
  cudaEvent_t before = nullptr;
  cudaEvent_t after = nullptr;
  /// Recorded by a captured graph: owned by it, reused at each launch.
  bool captured = false;
};

struct DeviceState {
  int device = -1;
  int smCount = 0;
  /// 10 major + minor: 90 on Hopper, where the sm_90a kernels run.
  int computeCapability = 0;
  /// Dynamic shared memory a block may opt in to: 227 KB on sm_90, 163 KB
  /// on sm_80, 99 KB on sm_86/sm_89. The fused attention kernels run only
  /// for head sizes whose tiles fit (Attention.cu).
  size_t smemOptin = 0;
  cudaStream_t streams[kStreams] = {};
  /// Fork/join of the communication stream around a step (runCaptured).
  cudaEvent_t forkEvent = nullptr;
  cudaEvent_t joinEvent = nullptr;
  /// record_event / wait_event, created on first use.
  std::vector<cudaEvent_t> events;

  cublasLtHandle_t lt = nullptr;
  void *ltWorkspace = nullptr;
  size_t ltWorkspaceBytes = 0;
  std::unique_ptr<GemmCache> gemms;
  /// f32 GEMMs with TF32 tensor cores (DPRT_CUDA_TF32=1); off by default so
  /// that f32 results match the CPU backend to ~1e-5.
  bool tf32 = false;
  /// runCaptured builds CUDA graphs (DPRT_CUDA_GRAPHS=0 turns them off).
  bool graphs = true;
  /// Each product shape's first call times cuBLASLt's first candidates and
  /// keeps the fastest (Gemm.cpp; DPRT_GEMM_TUNING=0 keeps the heuristic's
  /// first, as every run then picks the same); DPRT_GEMM_TUNING_LOG=1
  /// prints each choice.
  bool gemmTuning = true;
  bool gemmTuningLog = false;
  /// The fused attention kernels' dynamic shared-memory limits are raised
  /// (once per device, on first use: outside graph capture).
  bool fusedAttentionReady = false;
  /// cuDNN's handle and attention graphs (CudnnAttention.cpp), made on the
  /// first attention call; a shared_ptr because the type is complete only
  /// there.
  std::shared_ptr<CudnnAttentionState> cudnn;
  /// The *_update_rows calls an open update_group defers (UpdateGroups.cu),
  /// made on the first update_group call.
  std::shared_ptr<UpdateGroup> updates;

  /// One scratch buffer per stream, so that work on the two streams never
  /// shares one. Grown on demand, never during graph capture; a buffer that
  /// is outgrown is kept (retired) until shutdownRank, since captured graphs
  /// may still use it.
  struct Scratch {
    void *ptr = nullptr;
    size_t bytes = 0;
  } scratch[kStreams];
  std::vector<void *> retired;

  std::map<int, CapturedStep> steps;

  /// Exposed-communication probes: all of them, those free for reuse (not
  /// captured), those recorded and not yet counted, and the list the step
  /// being captured adds its probes to (null outside a capture). `clock` is
  /// recorded when probes are counted, to place them on the host clock.
  std::vector<WaitProbe> probes;
  std::vector<int> freeProbes;
  std::vector<int> pendingProbes;
  std::vector<int> *capturingProbes = nullptr;
  cudaEvent_t clock = nullptr;
  /// Compute-stream waits for events since the counter was last reset.
  int computeWaits = 0;

  /// queueCopyFromArena's copies: into page-locked staging (so that the
  /// copy waits for nothing), from there into their destinations when
  /// synchronize() has seen them land.
  struct PendingRead {
    void *dst;
    size_t at, bytes;
  };
  char *readStaging = nullptr;
  size_t readStagingBytes = 0, readStagingUsed = 0;
  std::vector<PendingRead> pendingReads;

  /// Bytes allocated through `deviceAlloc` (arena, workspace, scratch).
  int64_t liveBytes = 0;
  int64_t peakBytes = 0;

  DeviceState();
  ~DeviceState();
};

/// The rank's DeviceState; throws if initRank has not run.
DeviceState &deviceState(Rank *rank);

/// deviceState(rank), with the rank's device made current for the calling
/// thread (a thread that drives one rank keeps it; the services set it
/// anyway, cheaply).
DeviceState &enter(Rank *rank);

/// Throws naming `what` unless bytes [offset, offset + bytes) lie in the
/// rank's arena.
void checkArenaRange(Rank *rank, int64_t offset, int64_t bytes,
                     const char *what);

/// Copies the queued reads that synchronize() has seen land from the
/// staging into their destinations (ArenaCopies.cpp).
void landReads(DeviceState &st,
               const std::vector<DeviceState::PendingRead> &reads);

/// Stream `index` (0 compute, 1 communication) of the rank.
cudaStream_t streamOf(Rank *rank, int32_t index);
inline cudaStream_t computeStream(Rank *rank) {
  return streamOf(rank, kComputeStream);
}

/// Makes stream `stream` wait for `event`. A wait of the compute stream is
/// timed with a WaitProbe when the rank measures exposed communication.
void streamWait(Rank *rank, DeviceState &st, int32_t stream, cudaEvent_t event);

/// DPRT_CUDA_ALLOC_LOG=1: every device allocation and workspace outside the
/// planned arena is printed to stderr (docs/cuda-backend.md, "Environment").
bool allocLogEnabled();

/// cudaMalloc with bookkeeping for peakMemoryBytes.
void *deviceAlloc(DeviceState &st, size_t bytes, const char *what);
void deviceFree(DeviceState &st, void *p, size_t bytes);

/// At least `bytes` bytes of scratch for work on stream `stream`, valid until
/// the next call for that stream. Throws if the buffer would have to grow
/// while the stream is being captured.
void *scratch(Rank *rank, int32_t stream, size_t bytes);

/// The StepState in the rank's arena (device memory).
const StepState *deviceStepState(Rank *rank);

/// Its StepState::nonFiniteGradient, the one field kernels write (the
/// optimizer updates).
int32_t *deviceNonFiniteFlag(Rank *rank);

/// Blocks for a grid-stride loop over `items` items with `threads` threads a
/// block: enough to fill the GPU `waves` times (once by default), fewer for
/// small problems.
unsigned gridFor(Rank *rank, int64_t items, int threads, int waves = 1);

/// y += x on stream `stream` (acc or compute type); used by reduce_scatter
/// with accumulation.
void accumulateOnStream(Rank *rank, int32_t stream, DType dt, const void *x,
                        void *y, int64_t n);

/// Rounds `bytes` up to the arena alignment, for carving scratch.
inline size_t alignUp(size_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_DEVICESTATE_H
