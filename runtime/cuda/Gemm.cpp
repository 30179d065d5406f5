//===- Gemm.cpp - Row-major matrix products through cuBLASLt --------------===//

#include "Gemm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace dprt::cuda {

namespace {

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F64:
    break;
  }
  fail("gemm: f64 is not supported on the CUDA backend");
}

/// The largest power of two (at most 256) that divides the address and every
/// byte offset at which the library will address a row or a batch: what
/// cuBLASLt may assume about the operand's alignment.
int64_t alignmentOf(const void *p, int64_t rowBytes, int64_t batchBytes) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u |
                  uint64_t(rowBytes) | uint64_t(batchBytes);
  return int64_t(bits & (~bits + 1));
}

/// A column-major layout of `rows` x `cols` with leading dimension `ld`,
/// `batch` copies `stride` elements apart.
cublasLtMatrixLayout_t makeLayout(DType t, int64_t rows, int64_t cols,
                                  int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  checkCublas(cublasLtMatrixLayoutCreate(&layout, cudaTypeOf(t), uint64_t(rows),
                                         uint64_t(cols), ld),
              "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = int32_t(batch);
    checkCublas(
        cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
        "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    checkCublas(cublasLtMatrixLayoutSetAttribute(
                    layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride, sizeof(stride)),
                "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return layout;
}

std::string describe(const Gemm &g) {
  std::ostringstream os;
  os << "gemm " << nameOf(g.ab) << "->" << nameOf(g.cd) << " m=" << g.m
     << " n=" << g.n << " k=" << g.k << " transA=" << g.transA
     << " transB=" << g.transB << " lda=" << g.lda << " ldb=" << g.ldb
     << " ldc=" << g.ldc << " batch=" << g.batch << " bias=" << (g.bias != 0)
     << " addend=" << (g.addend != 0);
  return os.str();
}

void setPreference(cublasLtMatmulPreference_t pref,
                   cublasLtMatmulPreferenceAttributes_t attr, uint32_t value) {
  checkCublas(
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
      "cublasLtMatmulPreferenceSetAttribute");
}

/// How many of the heuristic's candidates tuning times: its first without
/// a workspace, then at most kWorkspaceCandidates of its first with one.
constexpr int kCandidates = 8;
constexpr int kWorkspaceCandidates = 4;
/// A candidate replaces the heuristic's first choice only when it is this
/// much faster, so that timing noise does not pick between equals.
constexpr double kTuningMargin = 0.02;
/// Products under this many FLOPs (about 12 us on an H100) keep the first:
/// they would gain microseconds, and timing a shape's candidates costs
/// milliseconds (each candidate's kernel is loaded on its first launch).
constexpr double kTuningMinFlop = 1e10;
/// What a candidate that needs cuBLASLt's workspace costs in a step beyond
/// its timed runs, in ms. cuBLASLt zeroes the workspace before every such
/// launch (nvjet's dynamic tile scheduler asks for 4 bytes; split-K for
/// more): one more node in the step's graph and one more gap. Taking only
/// kernels without a workspace removed 243 such memsets a step from the
/// 1.1B model's DP-off program at T = 8192 and 194 from its DP program at
/// T = 1024, which ran 0.4 % and 0.6 % faster (one H200, docs/
/// PERFORMANCE.md): 2 to 3.3 us a memset. So a candidate with a workspace
/// must win by this much more.
constexpr double kWorkspaceCostMs = 3e-3;

bool needsWorkspace(const cublasLtMatmulHeuristicResult_t &r) {
  return r.workspaceSize > 0;
}

/// The C that beta C reads.
const void *readC(const Gemm &g) { return g.addend ? g.addend : g.c; }

/// Runs `g` with `algo`. The workspace goes only to an algorithm that asked
/// for one: given a workspace, cuBLASLt runs even those that need none with
/// nvjet's dynamic tile scheduler, which zeroes 4 bytes of it first
/// (kWorkspaceCostMs).
cublasStatus_t launch(DeviceState &st, const GemmPlan &plan, const Gemm &g,
                      const cublasLtMatmulAlgo_t &algo, size_t workspaceBytes,
                      cudaStream_t stream) {
  const bool workspace = workspaceBytes > 0;
  return cublasLtMatmul(st.lt, plan.op, &g.alpha, g.b, plan.a, g.a, plan.b,
                        &g.beta, readC(g), plan.c, g.c, plan.c, &algo,
                        workspace ? st.ltWorkspace : nullptr,
                        workspace ? st.ltWorkspaceBytes : 0, stream);
}

/// Runs `g` with `candidate`'s algorithm; false where the library declines
/// it.
bool runWith(DeviceState &st, const GemmPlan &plan, const Gemm &g,
             const cublasLtMatmulHeuristicResult_t &candidate,
             cudaStream_t stream) {
  return launch(st, plan, g, candidate.algo, candidate.workspaceSize, stream) ==
         CUBLAS_STATUS_SUCCESS;
}

/// The index of the fastest of `candidates` on `g`'s own operands. Each runs
/// once to load its kernel (one the library declines drops out); then one
/// burst of about kBurstMs runs them in turn, round after round (8 to 80
/// rounds), with an event between any two runs and no wait for the host,
/// so that every candidate meets the same clock and the same neighbours. A
/// candidate's median over the burst's second half counts: by then the GPU
/// runs under its power cap, as in a training step, and the ranking there
/// is the program's (on an H200 the MLP's forward candidates that tie at
/// the full clock differ by 7 % under the cap: docs/cuda-backend.md). The
/// runs overwrite C: where the product adds into C (beta != 0), C is saved
/// to the host first and put back after, so tuning costs no device memory
/// and the product then runs once on the original C.
int fastestCandidate(DeviceState &st, const GemmPlan &plan, const Gemm &g,
                     const std::vector<cublasLtMatmulHeuristicResult_t> &found,
                     cudaStream_t stream) {
  constexpr double kBurstMs = 100.0;
  const int64_t es = sizeOf(g.cd);
  const int64_t cBytes =
      ((g.batch - 1) * g.strideC + (g.m - 1) * g.ldc + g.n) * es;
  std::vector<char> saved;
  if (g.beta != 0.0f && readC(g) == g.c) {
    saved.resize(size_t(cBytes));
    checkCuda(cudaMemcpyAsync(saved.data(), g.c, size_t(cBytes),
                              cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync(tuning: save C)");
  }
  std::vector<int> live;
  for (size_t i = 0; i < found.size(); ++i)
    if (runWith(st, plan, g, found[i], stream))
      live.push_back(int(i));
  // A declined launch may leave an error behind; it did not run.
  (void)cudaGetLastError();
  const size_t n = live.size();
  auto restore = [&] {
    if (saved.empty())
      return;
    checkCuda(cudaMemcpyAsync(g.c, saved.data(), size_t(cBytes),
                              cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync(tuning: restore C)");
    checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  if (n < 2) {
    // Nothing to choose between; with none, the product's own call reports
    // the library's error.
    restore();
    return n == 1 ? live[0] : 0;
  }
  std::vector<cudaEvent_t> events(2);
  auto record = [&](size_t e) {
    checkCuda(cudaEventRecord(events[e], stream), "cudaEventRecord");
  };
  auto elapsedMs = [&](size_t a, size_t b) {
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, events[a], events[b]),
              "cudaEventElapsedTime");
    return double(ms);
  };
  for (cudaEvent_t &e : events)
    checkCuda(cudaEventCreate(&e), "cudaEventCreate");
  record(0);
  runWith(st, plan, g, found[size_t(live[0])], stream);
  record(1);
  checkCuda(cudaEventSynchronize(events[1]), "cudaEventSynchronize");
  const int rounds = std::clamp(
      int(kBurstMs / (double(n) * std::max(elapsedMs(0, 1), 1e-3))), 8, 80);
  events.resize(size_t(rounds) * n + 1);
  for (size_t e = 2; e < events.size(); ++e)
    checkCuda(cudaEventCreate(&events[e]), "cudaEventCreate");
  record(0);
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < n; ++j) {
      runWith(st, plan, g, found[size_t(live[j])], stream);
      record(size_t(r) * n + j + 1);
    }
  checkCuda(cudaEventSynchronize(events.back()), "cudaEventSynchronize");
  std::vector<double> median(n); // ms a run, over the second half
  const int first = rounds / 2, counted = rounds - first;
  for (size_t j = 0; j < n; ++j) {
    std::vector<double> runs;
    for (int r = first; r < rounds; ++r) {
      size_t end = size_t(r) * n + j + 1;
      runs.push_back(elapsedMs(end - 1, end));
    }
    std::nth_element(runs.begin(), runs.begin() + counted / 2, runs.end());
    median[j] = runs[size_t(counted / 2)];
  }
  for (cudaEvent_t e : events)
    cudaEventDestroy(e);
  restore();
  // The heuristic's first stays unless another beats it by the margin; a
  // candidate that needs the workspace pays for its memset too.
  std::vector<double> cost(n);
  for (size_t j = 0; j < n; ++j)
    cost[j] = median[j] +
              (needsWorkspace(found[size_t(live[j])]) ? kWorkspaceCostMs : 0);
  size_t chosen = 0;
  for (size_t j = 1; j < n; ++j)
    if (cost[j] < cost[chosen] && (chosen != 0 || live[0] != 0 ||
                                   cost[j] < (1.0 - kTuningMargin) * cost[0]))
      chosen = j;
  if (st.gemmTuningLog) {
    std::string times;
    for (size_t j = 0; j < n; ++j)
      times += " " + std::to_string(live[j]) + ":" +
               std::to_string(int(std::lround(1000.0 * median[j]))) + "/ws" +
               std::to_string(found[size_t(live[j])].workspaceSize);
    std::fprintf(stderr, "dprt: %s: chose %d of %zu in %d rounds (us:%s)\n",
                 describe(g).c_str(), live[chosen], found.size(), rounds,
                 times.c_str());
  }
  return live[chosen];
}

/// The heuristic's first `count` algorithms for `plan` with at most
/// `maxWorkspace` bytes of workspace, those it could not run dropped.
std::vector<cublasLtMatmulHeuristicResult_t>
heuristic(DeviceState &st, const GemmPlan &plan, uint64_t maxWorkspace,
          int count, int64_t alignA, int64_t alignB, int64_t alignC,
          cublasStatus_t &status) {
  cublasLtMatmulPreference_t pref = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&pref),
              "cublasLtMatmulPreferenceCreate");
  checkCublas(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &maxWorkspace,
                  sizeof(maxWorkspace)),
              "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                uint32_t(alignA));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                uint32_t(alignB));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                uint32_t(alignC));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                uint32_t(alignC));
  std::vector<cublasLtMatmulHeuristicResult_t> results(
      static_cast<size_t>(count));
  int found = 0;
  status = cublasLtMatmulAlgoGetHeuristic(st.lt, plan.op, plan.a, plan.b,
                                          plan.c, plan.c, pref, count,
                                          results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  results.resize(status == CUBLAS_STATUS_SUCCESS ? size_t(std::max(found, 0))
                                                 : 0);
  results.erase(std::remove_if(results.begin(), results.end(),
                               [](const cublasLtMatmulHeuristicResult_t &r) {
                                 return r.state != CUBLAS_STATUS_SUCCESS;
                               }),
                results.end());
  return results;
}

/// Descriptors and algorithm for `g` in column-major terms: A' = B, B' = A,
/// m' = n, n' = m (see Gemm.h). With tuning on and the stream not being
/// captured, the heuristic's candidates (kCandidates) are timed on `g`
/// itself and the fastest kept (fastestCandidate); else its first without a
/// workspace (with one where there is none).
GemmPlan makePlan(DeviceState &st, const Gemm &g, int64_t alignA,
                  int64_t alignB, int64_t alignC, cudaStream_t stream) {
  GemmPlan plan;
  cublasComputeType_t compute = (g.ab == DType::F32 && st.tf32)
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  checkCublas(cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F),
              "cublasLtMatmulDescCreate");
  int32_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkCublas(cublasLtMatmulDescSetAttribute(
                  plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
              "cublasLtMatmulDescSetAttribute(TRANSA)");
  checkCublas(cublasLtMatmulDescSetAttribute(
                  plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
              "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (g.bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    checkCublas(cublasLtMatmulDescSetAttribute(plan.op,
                                               CUBLASLT_MATMUL_DESC_EPILOGUE,
                                               &epilogue, sizeof(epilogue)),
                "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    int32_t biasType = cudaTypeOf(g.cd);
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                    sizeof(biasType)),
                "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
    // The heuristic reads the pointer's alignment from it.
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                    sizeof(g.bias)),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  // A' = B: stored [n, k] col-major (row-major [k, n]) unless transposed.
  plan.a = g.transB ? makeLayout(g.ab, g.k, g.n, g.ldb, g.batch, g.strideB)
                    : makeLayout(g.ab, g.n, g.k, g.ldb, g.batch, g.strideB);
  // B' = A: stored [k, m] col-major (row-major [m, k]) unless transposed.
  plan.b = g.transA ? makeLayout(g.ab, g.m, g.k, g.lda, g.batch, g.strideA)
                    : makeLayout(g.ab, g.k, g.m, g.lda, g.batch, g.strideA);
  plan.c = makeLayout(g.cd, g.n, g.m, g.ldc, g.batch, g.strideC);

  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  const bool tune =
      st.gemmTuning && capture == cudaStreamCaptureStatusNone &&
      2.0 * double(g.m) * double(g.n) * double(g.k) * double(g.batch) >=
          kTuningMinFlop;
  // The heuristic's candidates that need no workspace first (the first of
  // them is the default: no memset before it, kWorkspaceCostMs); those that
  // need one after them, as tuning's alternatives or where none needs none.
  const int count = tune ? kCandidates : 1;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  std::vector<cublasLtMatmulHeuristicResult_t> results =
      heuristic(st, plan, 0, count, alignA, alignB, alignC, status);
  if (tune || results.empty()) {
    cublasStatus_t withWorkspace = CUBLAS_STATUS_SUCCESS;
    int more = tune ? kWorkspaceCandidates : 1;
    for (const auto &r : heuristic(st, plan, st.ltWorkspaceBytes, count, alignA,
                                   alignB, alignC, withWorkspace))
      if (needsWorkspace(r) && more-- > 0)
        results.push_back(r);
    if (status != CUBLAS_STATUS_SUCCESS)
      status = withWorkspace;
  }
  if (results.empty()) {
    cublasLtMatmulDescDestroy(plan.op);
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    fail("cublasLtMatmulAlgoGetHeuristic found no algorithm for " +
         describe(g) + " with operands aligned to " + std::to_string(alignB) +
         ", " + std::to_string(alignA) + " and " + std::to_string(alignC) +
         " bytes (" + cublasLtGetStatusString(status) + ")");
  }
  int chosen = 0;
  if (results.size() > 1) {
    const auto start = std::chrono::steady_clock::now();
    chosen = fastestCandidate(st, plan, g, results, stream);
    ++st.gemms->tuned;
    st.gemms->tunedSeconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  plan.algo = results[size_t(chosen)].algo;
  plan.workspaceBytes = results[size_t(chosen)].workspaceSize;
  return plan;
}

} // namespace

int64_t gemmsTuned(Rank *rank) { return deviceState(rank).gemms->tuned; }

GemmCache::~GemmCache() {
  for (auto &entry : plans) {
    cublasLtMatmulDescDestroy(entry.second.op);
    cublasLtMatrixLayoutDestroy(entry.second.a);
    cublasLtMatrixLayoutDestroy(entry.second.b);
    cublasLtMatrixLayoutDestroy(entry.second.c);
  }
}

void gemm(Rank *rank, const Gemm &g) {
  DeviceState &st = deviceState(rank);
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0)
    fail("negative size in " + describe(g));
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return;
  if (g.batch > 1 && g.bias)
    fail("bias with a batched product: " + describe(g));
  if (g.batch > INT32_MAX)
    fail("batch too large: " + describe(g));
  cudaStream_t stream = computeStream(rank);
  if (g.k == 0) {
    // An empty sum: C = beta C. Only beta = 0 and 1 occur.
    int64_t es = sizeOf(g.cd);
    if (g.beta == 1.0f && !g.bias) {
      if (readC(g) != g.c)
        for (int64_t i = 0; i < g.batch; ++i)
          checkCuda(
              cudaMemcpy2DAsync(static_cast<char *>(g.c) + i * g.strideC * es,
                                size_t(g.ldc * es),
                                static_cast<const char *>(g.addend) +
                                    i * g.strideC * es,
                                size_t(g.ldc * es), size_t(g.n * es),
                                size_t(g.m), cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpy2DAsync");
      return;
    }
    if (g.beta != 0.0f || g.bias)
      fail("k = 0 with beta other than 0 or 1, or a bias: " + describe(g));
    for (int64_t i = 0; i < g.batch; ++i)
      checkCuda(cudaMemset2DAsync(static_cast<char *>(g.c) + i * g.strideC * es,
                                  size_t(g.ldc * es), 0, size_t(g.n * es),
                                  size_t(g.m), stream),
                "cudaMemset2DAsync");
    return;
  }
  int64_t abSize = sizeOf(g.ab), cdSize = sizeOf(g.cd);
  bool batched = g.batch > 1;
  int64_t alignA =
      alignmentOf(g.b, g.ldb * abSize, batched ? g.strideB * abSize : 0);
  int64_t alignB =
      alignmentOf(g.a, g.lda * abSize, batched ? g.strideA * abSize : 0);
  int64_t alignC = std::min(
      alignmentOf(g.c, g.ldc * cdSize, batched ? g.strideC * cdSize : 0),
      alignmentOf(readC(g), g.ldc * cdSize, batched ? g.strideC * cdSize : 0));
  int64_t alignBias = g.bias ? alignmentOf(g.bias, 0, 0) : 0;
  GemmCache::Key key = {int64_t(g.ab),
                        int64_t(g.cd),
                        g.transA,
                        g.transB,
                        g.m,
                        g.n,
                        g.k,
                        g.lda,
                        g.ldb,
                        g.ldc,
                        batched ? g.strideA : 0,
                        batched ? g.strideB : 0,
                        batched ? g.strideC : 0,
                        g.batch,
                        g.bias != nullptr,
                        alignA,
                        alignB,
                        alignC,
                        alignBias,
                        st.tf32};
  auto it = st.gemms->plans.find(key);
  if (it == st.gemms->plans.end())
    it = st.gemms->plans
             .emplace(key, makePlan(st, g, alignA, alignB, alignC, stream))
             .first;
  GemmPlan &plan = it->second;
  if (g.bias)
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                    sizeof(g.bias)),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  cublasStatus_t status =
      launch(st, plan, g, plan.algo, plan.workspaceBytes, stream);
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cublasLtMatmul failed for " + describe(g) + ": " +
         cublasLtGetStatusString(status));
}

} // namespace dprt::cuda
