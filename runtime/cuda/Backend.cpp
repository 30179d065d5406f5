//===- Backend.cpp - Backend services of the CUDA backend -----------------===//
//
// Devices, streams, memory and step capture into CUDA graphs
// (backend.inc), and the DeviceState helpers the kernels share; the copies
// between host and arena are in ArenaCopies.cpp.
//
// Capture. runCaptured runs a slot's step function once un-captured (a
// warm-up: it creates events, plans GEMMs and sizes scratch, none of which
// may happen while capturing), captures it on the second call and replays the
// graph from then on. During a run the communication stream is forked from
// the compute stream at the start and joined back at the end, so that work
// the step puts on it (collectives) belongs to the capture and the graph
// ends only when it is done. Capture uses cudaStreamCaptureModeThreadLocal:
// with one thread per GPU, a global-mode capture on one rank would make the
// un-captured work of another rank's thread (its warm-up allocations, a
// synchronous copy) fail; thread-local mode still rejects such calls from
// the capturing thread itself.
//
// Exposed communication. With Rank::measureExposedComm set, every wait of
// the compute stream for an event (the program's wait_event, the join at the
// end of a step) is bracketed by two timing events (a WaitProbe): the time
// between them is how long compute stood still for communication. Inside a
// capture the events are recorded as external event-record nodes, so that
// each launch of the graph records them again. The probes are counted in
// `synchronize`, when they are complete, into Rank::exposedCommSeconds and,
// with tracing on, into spans of the trace's third track. Probe events are
// created outside captures only: a step's warm-up run creates as many as its
// capture will use.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"
#include "Gemm.h"
#include "NcclCommunicator.h"

#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace dprt::cuda {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

void fail(const std::string &message) {
  throw std::runtime_error("dprt::cuda: " + message);
}

void checkCuda(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    fail(std::string(call) + ": " + cudaGetErrorName(status) + ": " +
         cudaGetErrorString(status));
}

void checkCublas(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(std::string(call) + ": " + cublasLtGetStatusString(status));
}

void requireCompute(DType dt, const char *kernel) {
  if (dt == DType::F64)
    fail(std::string(kernel) + ": f64 is not supported on the CUDA backend");
  if (dt != DType::F32 && dt != DType::BF16)
    fail(std::string(kernel) + ": unknown DType");
}

void requireAcc(DType acc, const char *kernel) {
  if (acc == DType::F64)
    fail(std::string(kernel) + ": f64 is not supported on the CUDA backend");
  if (acc != DType::F32)
    fail(std::string(kernel) + ": an acc buffer is f32 on the CUDA backend");
}

//===----------------------------------------------------------------------===//
// DeviceState
//===----------------------------------------------------------------------===//

DeviceState::DeviceState() = default;
DeviceState::~DeviceState() = default;

DeviceState &deviceState(Rank *rank) {
  if (!rank || !rank->backend)
    fail("the rank has no CUDA state (call dprt::cuda::initRank first)");
  return *reinterpret_cast<DeviceState *>(rank->backend);
}

cudaStream_t streamOf(Rank *rank, int32_t index) {
  if (index < 0 || index >= kStreams)
    fail("stream " + std::to_string(index) +
         " does not exist (0 compute, 1 communication)");
  return deviceState(rank).streams[index];
}

namespace {

/// A DPRT_* switch: unset or empty is `fallback`; 0, false and off are off.
bool envFlag(const char *name, bool fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 ||
           std::strcmp(v, "off") == 0);
}

} // namespace

bool allocLogEnabled() {
  static const bool enabled = envFlag("DPRT_CUDA_ALLOC_LOG", false);
  return enabled;
}

void *deviceAlloc(DeviceState &st, size_t bytes, const char *what) {
  void *p = nullptr;
  cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess)
    fail(std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " +
         what + ": " + cudaGetErrorString(status));
  st.liveBytes += int64_t(bytes);
  st.peakBytes = std::max(st.peakBytes, st.liveBytes);
  if (allocLogEnabled())
    std::fprintf(stderr,
                 "dprt: cudaMalloc %zu bytes (%.2f MiB) for %s; live %.2f MiB, "
                 "peak %.2f MiB\n",
                 bytes, double(bytes) / (1 << 20), what,
                 double(st.liveBytes) / (1 << 20),
                 double(st.peakBytes) / (1 << 20));
  return p;
}

void deviceFree(DeviceState &st, void *p, size_t bytes) {
  if (!p)
    return;
  checkCuda(cudaFree(p), "cudaFree");
  st.liveBytes -= int64_t(bytes);
}

void *scratch(Rank *rank, int32_t stream, size_t bytes) {
  DeviceState &st = deviceState(rank);
  if (stream < 0 || stream >= kStreams)
    fail("scratch: no stream " + std::to_string(stream));
  DeviceState::Scratch &s = st.scratch[stream];
  if (bytes <= s.bytes)
    return s.ptr;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(st.streams[stream], &capture),
            "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone)
    fail("a kernel needs " + std::to_string(bytes) +
         " bytes of scratch while its stream is captured into a CUDA graph; "
         "runCaptured sizes scratch in its un-captured first run, so the "
         "step launched different work in its second run");
  // Grow by at least half so that a sequence of growing requests allocates
  // few buffers; the old one may be in use by queued work or a graph.
  size_t grown = std::max(bytes, s.bytes + s.bytes / 2);
  void *p = deviceAlloc(st, alignUp(grown), "kernel scratch");
  if (s.ptr)
    st.retired.push_back(s.ptr);
  s.ptr = p;
  s.bytes = alignUp(grown);
  return p;
}

const StepState *deviceStepState(Rank *rank) {
  if (!rank->arena || rank->stateOffset < 0 ||
      rank->stateOffset + int64_t(sizeof(StepState)) > rank->arenaBytes)
    fail("the StepState (offset " + std::to_string(rank->stateOffset) +
         ") is not inside the arena");
  return reinterpret_cast<const StepState *>(rank->arena + rank->stateOffset);
}

int32_t *deviceNonFiniteFlag(Rank *rank) {
  return &const_cast<StepState *>(deviceStepState(rank))->nonFiniteGradient;
}

unsigned gridFor(Rank *rank, int64_t items, int threads, int waves) {
  int64_t blocks = (items + threads - 1) / threads;
  // 2048 resident threads per multiprocessor: `waves` full waves, then the
  // grid-stride loops take over.
  int64_t cap =
      int64_t(deviceState(rank).smCount) * (2048 / threads) * int64_t(waves);
  return unsigned(std::max<int64_t>(1, std::min(blocks, cap)));
}

//===----------------------------------------------------------------------===//
// Exposed-communication probes
//===----------------------------------------------------------------------===//

namespace {

/// A new probe (its events may not be created inside a capture).
int createProbe(DeviceState &st) {
  WaitProbe probe;
  checkCuda(cudaEventCreateWithFlags(&probe.before, cudaEventDefault),
            "cudaEventCreateWithFlags(probe)");
  checkCuda(cudaEventCreateWithFlags(&probe.after, cudaEventDefault),
            "cudaEventCreateWithFlags(probe)");
  st.probes.push_back(probe);
  return int(st.probes.size()) - 1;
}

/// A free probe; creates one outside captures. Inside a capture, capture()
/// must have made enough free (reserveProbes).
int takeProbe(DeviceState &st) {
  if (!st.freeProbes.empty()) {
    int id = st.freeProbes.back();
    st.freeProbes.pop_back();
    return id;
  }
  if (st.capturingProbes)
    fail("a step waits more often while captured (" +
         std::to_string(st.computeWaits) +
         " waits so far) than in its "
         "un-captured warm-up run; no probe events are left to time the "
         "waits");
  return createProbe(st);
}

/// Makes at least `count` probes free (not inside a capture).
void reserveProbes(DeviceState &st, int count) {
  while (int(st.freeProbes.size()) < count)
    st.freeProbes.push_back(createProbe(st));
}

/// Counts the recorded probes (complete: the caller synchronized) into
/// rank->exposedCommSeconds and, with tracing on, the trace. A `clock` event
/// recorded now stands for the host time now, which places the GPU
/// intervals on the host clock of the other spans.
void countProbes(Rank *rank, DeviceState &st) {
  if (st.pendingProbes.empty())
    return;
  const bool tracing = trace::enabled();
  double hostNow = 0;
  if (tracing) {
    if (!st.clock)
      checkCuda(cudaEventCreateWithFlags(&st.clock, cudaEventDefault),
                "cudaEventCreateWithFlags(clock)");
    checkCuda(cudaEventRecord(st.clock, st.streams[kComputeStream]),
              "cudaEventRecord(clock)");
    checkCuda(cudaEventSynchronize(st.clock), "cudaEventSynchronize(clock)");
    hostNow = trace::nowMicros();
  }
  for (int id : st.pendingProbes) {
    WaitProbe &probe = st.probes[size_t(id)];
    float waitMs = 0;
    checkCuda(cudaEventElapsedTime(&waitMs, probe.before, probe.after),
              "cudaEventElapsedTime(probe)");
    rank->exposedCommSeconds += double(waitMs) * 1e-3;
    // Waits under a microsecond are event overhead, not communication.
    if (tracing && waitMs >= 1e-3f) {
      float sinceMs = 0;
      checkCuda(cudaEventElapsedTime(&sinceMs, probe.before, st.clock),
                "cudaEventElapsedTime(clock)");
      const double begin = hostNow - double(sinceMs) * 1e3;
      trace::record(rank->rank, trace::Track::ExposedCommunication,
                    "wait_for_communication", begin,
                    begin + double(waitMs) * 1e3);
    }
    if (!probe.captured)
      st.freeProbes.push_back(id);
  }
  st.pendingProbes.clear();
  for (auto &entry : st.steps)
    entry.second.probesPending = false;
}

} // namespace

void streamWait(Rank *rank, DeviceState &st, int32_t stream,
                cudaEvent_t event) {
  cudaStream_t s = st.streams[stream];
  if (stream == kComputeStream)
    ++st.computeWaits;
  if (!rank->measureExposedComm || stream != kComputeStream) {
    checkCuda(cudaStreamWaitEvent(s, event, 0), "cudaStreamWaitEvent");
    return;
  }
  const int id = takeProbe(st);
  WaitProbe &probe = st.probes[size_t(id)];
  const unsigned flags =
      st.capturingProbes ? cudaEventRecordExternal : cudaEventRecordDefault;
  checkCuda(cudaEventRecordWithFlags(probe.before, s, flags),
            "cudaEventRecordWithFlags(probe)");
  checkCuda(cudaStreamWaitEvent(s, event, 0), "cudaStreamWaitEvent");
  checkCuda(cudaEventRecordWithFlags(probe.after, s, flags),
            "cudaEventRecordWithFlags(probe)");
  if (st.capturingProbes) {
    probe.captured = true;
    st.capturingProbes->push_back(id);
  } else {
    st.pendingProbes.push_back(id);
  }
}

DeviceState &enter(Rank *rank) {
  DeviceState &st = deviceState(rank);
  checkCuda(cudaSetDevice(st.device), "cudaSetDevice");
  return st;
}

void checkArenaRange(Rank *rank, int64_t offset, int64_t bytes,
                     const char *what) {
  if (!rank->arena)
    fail(std::string(what) + ": the rank has no arena");
  if (offset < 0 || bytes < 0 || offset + bytes > rank->arenaBytes)
    fail(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
         std::to_string(offset + bytes) + ") are outside the arena of " +
         std::to_string(rank->arenaBytes) + " bytes");
}

namespace {

/// Runs `step` with the communication stream forked from and joined back
/// into the compute stream.
void runForked(Rank *rank, DeviceState &st, void (*step)(Rank *)) {
  checkCuda(cudaEventRecord(st.forkEvent, st.streams[kComputeStream]),
            "cudaEventRecord(fork)");
  checkCuda(cudaStreamWaitEvent(st.streams[kCommStream], st.forkEvent, 0),
            "cudaStreamWaitEvent(fork)");
  step(rank);
  checkCuda(cudaEventRecord(st.joinEvent, st.streams[kCommStream]),
            "cudaEventRecord(join)");
  streamWait(rank, st, kComputeStream, st.joinEvent);
}

/// Captures `step` into a graph on the compute stream.
void capture(Rank *rank, DeviceState &st, CapturedStep &slot,
             void (*step)(Rank *)) {
  cudaStream_t compute = st.streams[kComputeStream];
  if (rank->measureExposedComm) {
    // The warm-up run's probes become free once counted; the capture takes
    // them (it may not create events). Other steps may have taken some
    // since, and the warm-up may have run before probing was on, so as
    // many as the warm-up waited are made free here.
    synchronize(rank);
    for (int id : slot.probes) { // of a failed earlier capture
      st.probes[size_t(id)].captured = false;
      st.freeProbes.push_back(id);
    }
    slot.probes.clear();
    reserveProbes(st, slot.uncapturedWaits);
  }
  st.computeWaits = 0;
  checkCuda(cudaStreamBeginCapture(compute, cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  st.capturingProbes = &slot.probes;
  try {
    runForked(rank, st, step);
    st.capturingProbes = nullptr;
  } catch (...) {
    st.capturingProbes = nullptr;
    // Leave the stream usable; the graph is invalid anyway.
    cudaStreamEndCapture(compute, &graph);
    if (graph)
      cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  checkCuda(cudaStreamEndCapture(compute, &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  if (status != cudaSuccess) {
    cudaGraphDestroy(graph);
    checkCuda(status, "cudaGraphInstantiate");
  }
  slot.graph = graph;
  slot.exec = exec;
}

/// Fails, naming what the backend was built for, unless the current device
/// can run its kernels: a build for sm_90a alone has no code for Ampere.
void requireKernelImage(int device, int major, int minor) {
  cudaError_t status = probeKernelImage();
  if (status == cudaSuccess)
    return;
  cudaGetLastError(); // the probe's error is not sticky; clear it
  fail("initRank: device " + std::to_string(device) +
       " has compute capability " + std::to_string(major) + "." +
       std::to_string(minor) +
       " and this build of the CUDA backend has no code for it (built for " +
       DPRT_CUDA_ARCHS + "; " + cudaGetErrorString(status) +
       "): configure with -DDPC_CUDA_ARCHS=... (docs/cuda-backend.md)");
}

} // namespace

//===----------------------------------------------------------------------===//
// backend.inc
//===----------------------------------------------------------------------===//

const char *backendName() { return "cuda"; }

int availableDevices() {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver) {
    cudaGetLastError();
    return 0;
  }
  checkCuda(status, "cudaGetDeviceCount");
  return count;
}

void initRank(Rank *rank, int device) {
  if (!rank)
    fail("initRank: null rank");
  if (rank->backend)
    fail("initRank: the rank is initialized already");
  int count = availableDevices();
  if (device < 0 || device >= count)
    fail("initRank: device " + std::to_string(device) + " does not exist (" +
         std::to_string(count) + " visible)");
  checkCuda(cudaSetDevice(device), "cudaSetDevice");
  int major = 0, minor = 0;
  checkCuda(
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
      "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
  checkCuda(
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
      "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
  // bf16 tensor-core MMA (mma.sync m16n8k16), ldmatrix and cp.async need
  // Ampere or later; nothing in the kernels is specific to a later GPU.
  if (major < 8)
    fail("initRank: device " + std::to_string(device) +
         " has compute capability " + std::to_string(major) + "." +
         std::to_string(minor) +
         "; the CUDA backend needs 8.0 or later (Ampere, Ada, Hopper)");
  requireKernelImage(device, major, minor);

  auto st = std::make_unique<DeviceState>();
  st->device = device;
  st->computeCapability = 10 * major + minor;
  checkCuda(cudaDeviceGetAttribute(&st->smCount, cudaDevAttrMultiProcessorCount,
                                   device),
            "cudaDeviceGetAttribute(MultiProcessorCount)");
  int smemOptin = 0;
  checkCuda(cudaDeviceGetAttribute(
                &smemOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
            "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  st->smemOptin = size_t(smemOptin);
  for (cudaStream_t &s : st->streams)
    checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
  checkCuda(cudaEventCreateWithFlags(&st->forkEvent, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
  checkCuda(cudaEventCreateWithFlags(&st->joinEvent, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
  checkCublas(cublasLtCreate(&st->lt), "cublasLtCreate");
  // What cuBLASLt's Hopper kernels may ask for (types.h; the predicted peak
  // counts it).
  st->ltWorkspaceBytes = size_t(kCudaGemmWorkspaceBytes);
  st->ltWorkspace =
      deviceAlloc(*st, st->ltWorkspaceBytes, "cuBLASLt workspace");
  st->gemms = std::make_unique<GemmCache>();
  st->tf32 = envFlag("DPRT_CUDA_TF32", false);
  st->graphs = envFlag("DPRT_CUDA_GRAPHS", true);
  st->gemmTuning = envFlag("DPRT_GEMM_TUNING", true);
  st->gemmTuningLog = envFlag("DPRT_GEMM_TUNING_LOG", false);
  rank->backend = reinterpret_cast<BackendState *>(st.release());
}

void shutdownRank(Rank *rank) {
  if (!rank || !rank->backend)
    return;
  DeviceState *st = &enter(rank);
  for (cudaStream_t s : st->streams)
    checkCuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  for (auto &entry : st->steps) {
    if (entry.second.exec)
      cudaGraphExecDestroy(entry.second.exec);
    if (entry.second.graph)
      cudaGraphDestroy(entry.second.graph);
  }
  st->gemms.reset();
  st->cudnn.reset();
  for (DeviceState::Scratch &s : st->scratch)
    deviceFree(*st, s.ptr, s.bytes);
  for (void *p : st->retired)
    checkCuda(cudaFree(p), "cudaFree");
  deviceFree(*st, st->ltWorkspace, st->ltWorkspaceBytes);
  if (st->readStaging)
    cudaFreeHost(st->readStaging);
  cublasLtDestroy(st->lt);
  for (cudaEvent_t e : st->events)
    if (e)
      cudaEventDestroy(e);
  for (const WaitProbe &probe : st->probes) {
    cudaEventDestroy(probe.before);
    cudaEventDestroy(probe.after);
  }
  if (st->clock)
    cudaEventDestroy(st->clock);
  cudaEventDestroy(st->forkEvent);
  cudaEventDestroy(st->joinEvent);
  for (cudaStream_t s : st->streams)
    cudaStreamDestroy(s);
  delete st;
  rank->backend = nullptr;
}

void allocateArena(Rank *rank, int64_t bytes) {
  DeviceState &st = enter(rank);
  if (rank->arena)
    fail("allocateArena: the rank has an arena already");
  if (bytes <= 0)
    fail("allocateArena: " + std::to_string(bytes) + " bytes");
  // A plan made for a larger GPU (dpc's --target-gpu or --memory-budget)
  // fails here; say so rather than leave a bare cudaMalloc error.
  size_t freeBytes = 0, totalBytes = 0;
  if (cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess &&
      size_t(bytes) > freeBytes) {
    auto gib = [](double b) {
      char text[32];
      std::snprintf(text, sizeof text, "%.2f GiB", b / double(1ll << 30));
      return std::string(text);
    };
    fail("the program's arena needs " + gib(double(bytes)) + " but GPU " +
         std::to_string(st.device) + " has " + gib(double(freeBytes)) +
         " free of " + gib(double(totalBytes)) +
         "; compile for this GPU (dpc --target-gpu NAME or --memory-budget "
         "SIZE), with a smaller physical_batch or for more ranks");
  }
  // cudaMalloc aligns to at least 256 bytes (kArenaAlignment).
  rank->arena =
      static_cast<char *>(deviceAlloc(st, size_t(bytes), "the arena"));
  rank->arenaBytes = bytes;
}

void freeArena(Rank *rank) {
  if (!rank->arena)
    return;
  DeviceState &st = enter(rank);
  synchronize(rank);
  deviceFree(st, rank->arena, size_t(rank->arenaBytes));
  rank->arena = nullptr;
  rank->arenaBytes = 0;
}

void synchronize(Rank *rank) {
  DeviceState &st = enter(rank);
  // Taken first: a wait that fails drops them (the rank is done for).
  std::vector<DeviceState::PendingRead> reads;
  reads.swap(st.pendingReads);
  st.readStagingUsed = 0;
  // The work may hold collectives: the NCCL watchdog times this wait and,
  // past the collective timeout, aborts the communicators it is blocked on.
  WatchedWait watched(rank->rank);
  for (cudaStream_t s : st.streams) {
    cudaError_t status = cudaStreamSynchronize(s);
    if (status != cudaSuccess)
      watched.check();
    checkCuda(status, "cudaStreamSynchronize");
  }
  watched.check();
  countProbes(rank, st);
  landReads(st, reads);
}

void runCaptured(Rank *rank, int slot, void (*step)(Rank *)) {
  DeviceState &st = enter(rank);
  CapturedStep &captured = st.steps[slot];
  if (!st.graphs || captured.calls == 0) {
    ++captured.calls;
    st.computeWaits = 0;
    runForked(rank, st, step);
    captured.uncapturedWaits = st.computeWaits;
    return;
  }
  if (!captured.exec)
    capture(rank, st, captured, step);
  // A second launch would record the graph's probes again before the first
  // launch's were counted.
  if (captured.probesPending)
    synchronize(rank);
  ++captured.calls;
  checkCuda(cudaGraphLaunch(captured.exec, st.streams[kComputeStream]),
            "cudaGraphLaunch");
  if (!captured.probes.empty()) {
    st.pendingProbes.insert(st.pendingProbes.end(), captured.probes.begin(),
                            captured.probes.end());
    captured.probesPending = true;
  }
}

bool allFinite(Rank *rank, DType acc, int64_t offset, int64_t count) {
  return allFiniteRanges(rank, acc, &offset, &count, 1);
}

bool allFiniteRanges(Rank *rank, DType acc, const int64_t *offsets,
                     const int64_t *counts, int64_t ranges) {
  DeviceState &st = enter(rank);
  requireAcc(acc, "allFinite");
  if (ranges < 0)
    fail("allFinite: " + std::to_string(ranges) + " ranges");
  for (int64_t i = 0; i < ranges; ++i) {
    if (counts[i] < 0)
      fail("allFinite: " + std::to_string(counts[i]) + " elements");
    checkArenaRange(rank, offsets[i], counts[i] * int64_t(sizeof(float)),
                    "allFinite");
  }
  if (ranges == 0)
    return true;
  synchronize(rank);
  // One sum of squares per range, each into its own float (so one range's
  // overflow threshold does not depend on the others), in the communication
  // stream's scratch, idle between steps.
  auto *sums = static_cast<float *>(
      scratch(rank, kCommStream, size_t(ranges) * sizeof(float)));
  cudaStream_t compute = st.streams[kComputeStream];
  checkCuda(cudaMemsetAsync(sums, 0, size_t(ranges) * sizeof(float), compute),
            "cudaMemsetAsync(allFinite)");
  for (int64_t i = 0; i < ranges; ++i)
    if (counts[i] > 0)
      norm_rows(rank, DType::F32, rank->arena + offsets[i], sums + i, 1,
                counts[i]);
  std::vector<float> host(size_t(ranges), 0.0f);
  checkCuda(cudaMemcpyAsync(host.data(), sums, size_t(ranges) * sizeof(float),
                            cudaMemcpyDeviceToHost, compute),
            "cudaMemcpyAsync(allFinite)");
  checkCuda(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
  return std::all_of(host.begin(), host.end(),
                     [](float s) { return std::isfinite(s); });
}

KernelTuning kernelTuning(Rank *rank) {
  const GemmCache &gemms = *deviceState(rank).gemms;
  return {gemms.tuned, gemms.tunedSeconds};
}

int64_t peakMemoryBytes(Rank *rank) {
  // The peak of what the backend allocated itself: arena, cuBLASLt workspace
  // and kernel scratch. The CUDA context, cuBLASLt's and NCCL's own buffers
  // are not counted (as PyTorch's max_memory_allocated does not count them).
  return deviceState(rank).peakBytes;
}

} // namespace dprt::cuda
