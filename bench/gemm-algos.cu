// gemm-algos: how much faster than cuBLASLt's first heuristic choice the
// other candidates it offers are, for the matrix products of the benchmark
// programs (bench/dp-vs-fsdp2-build.py's 1.1B model: 8192 tokens a physical
// batch, width 2048, kv 512, MLP 8192; vocabularies 32000 and 128256).
//
// Products are written row-major as runtime/cuda/Gemm.h writes them and
// mapped to cuBLASLt's column-major API the same way (A and B swap places).
// Each candidate runs `reps` times between events; the rounds over all
// candidates repeat, and the best round's mean counts, so that a candidate
// timed while the GPU's power cap lowered the clock is not favoured.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90a bench/gemm-algos.cu -lcublasLt -o
// gemm-algos Run:   ./gemm-algos [candidates=16] [rounds=3] [reps=20] [heatMs=0
// [name]] With heatMs, each product (or those whose name contains `name`) runs
// its first candidate for heatMs, then all candidates interleaved for `rounds`
// rounds, printing each one's median over the last half of the rounds.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                          \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));             \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define CHECK_LT(x)                                                            \
  do {                                                                         \
    cublasStatus_t s = (x);                                                    \
    if (s != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s: %s\n", #x, cublasLtGetStatusString(s));        \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

struct Product {
  const char *name;
  bool transA, transB;
  long m, n, k, batch;
  bool f32Out;
  float beta;
};

static cublasLtMatrixLayout_t layout(cudaDataType_t t, long rows, long cols,
                                     long ld, long batch, long stride) {
  cublasLtMatrixLayout_t l;
  CHECK_LT(cublasLtMatrixLayoutCreate(&l, t, rows, cols, ld));
  if (batch > 1) {
    int32_t c = int32_t(batch);
    CHECK_LT(cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c, sizeof(c)));
    CHECK_LT(cublasLtMatrixLayoutSetAttribute(
        l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride)));
  }
  return l;
}

int main(int argc, char **argv) {
  int candidates = argc > 1 ? std::atoi(argv[1]) : 16;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  int reps = argc > 3 ? std::atoi(argv[3]) : 20;
  // heatMs > 0: before each product, its first candidate runs for heatMs
  // (the GPU reaches its power cap as in a training step), then the
  // candidates run interleaved, `rounds` rounds, median of the last half.
  double heatMs = argc > 4 ? std::atof(argv[4]) : 0;
  const char *only = argc > 5 ? argv[5] : nullptr;
  const long T = 8192, D = 2048, KV = 512, F = 8192;
  std::vector<Product> products = {
      // forward: y[T, out] = x[T, in] W^T
      {"fwd q/o 2048->2048", false, true, T, D, D, 1, false, 0},
      {"fwd k/v 2048->512", false, true, T, KV, D, 1, false, 0},
      {"fwd gate/up 2048->8192", false, true, T, F, D, 1, false, 0},
      {"fwd gate+up 2048->16384", false, true, T, 2 * F, D, 1, false, 0},
      {"fwd down 8192->2048", false, true, T, D, F, 1, false, 0},
      {"fwd head 2048->32000", false, true, T, 32000, D, 1, false, 0},
      {"fwd head 2048->128256", false, true, T, 128256, D, 1, false, 0},
      // input gradients: dx[T, in] (+)= dy[T, out] W
      {"dx q/o", false, false, T, D, D, 1, false, 0},
      {"dx k/v (add)", false, false, T, D, KV, 1, false, 1},
      {"dx gate", false, false, T, D, F, 1, false, 0},
      {"dx up (add)", false, false, T, D, F, 1, false, 1},
      {"dx gate+up", false, false, T, D, 2 * F, 1, false, 0},
      {"dx down", false, false, T, F, D, 1, false, 0},
      {"dx head 32000", false, false, T, D, 32000, 1, false, 0},
      // weight gradients: dW[out, in] = dy^T x, f32
      {"dW q/o", true, false, D, D, T, 1, true, 0},
      {"dW k/v", true, false, KV, D, T, 1, true, 0},
      {"dW gate/up", true, false, F, D, T, 1, true, 0},
      {"dW gate+up", true, false, 2 * F, D, T, 1, true, 0},
      {"dW down", true, false, D, F, T, 1, true, 0},
      {"dW head 32000", true, false, 32000, D, T, 1, true, 0},
      // per-sample weight gradients, b = 8, T = 1024, bf16
      {"ps dW q/o b8", true, false, D, D, 1024, 8, false, 0},
      {"ps dW gate/up b8", true, false, F, D, 1024, 8, false, 0},
      {"ps dW down b8", true, false, D, F, 1024, 8, false, 0},
  };

  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  size_t wsBytes = size_t(32) << 20;
  void *ws;
  CHECK_CUDA(cudaMalloc(&ws, wsBytes));
  size_t maxA = 0, maxB = 0, maxC = 0;
  for (auto &p : products) {
    maxA = std::max(maxA, size_t(p.m * p.k * p.batch));
    maxB = std::max(maxB, size_t(p.k * p.n * p.batch));
    maxC = std::max(maxC, size_t(p.m * p.n * p.batch));
  }
  void *a, *b, *c;
  CHECK_CUDA(cudaMalloc(&a, maxA * 2));
  CHECK_CUDA(cudaMalloc(&b, maxB * 2));
  CHECK_CUDA(cudaMalloc(&c, maxC * 4));
  // Small values so that no product overflows; contents do not change time.
  CHECK_CUDA(cudaMemset(a, 0x3c, maxA * 2));
  CHECK_CUDA(cudaMemset(b, 0x3c, maxB * 2));
  CHECK_CUDA(cudaMemset(c, 0, maxC * 4));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));

  if (heatMs <= 0)
    std::printf("| product | m | n | k | batch | first us | best us | best # "
                "| gain | first TFLOP/s | best TFLOP/s |\n|---|---|---|---|---|"
                "---|---|---|---|---|---|\n");
  double totalFirst = 0, totalBest = 0;
  for (auto &p : products) {
    if (only && !std::strstr(p.name, only))
      continue;
    cudaDataType_t ab = CUDA_R_16BF, cd = p.f32Out ? CUDA_R_32F : CUDA_R_16BF;
    cublasLtMatmulDesc_t op;
    CHECK_LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    int32_t opA = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t opB = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                            &opA, sizeof(opA)));
    CHECK_LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB,
                                            &opB, sizeof(opB)));
    long lda = p.transA ? p.m : p.k, ldb = p.transB ? p.k : p.n, ldc = p.n;
    long sA = p.m * p.k, sB = p.k * p.n, sC = p.m * p.n;
    cublasLtMatrixLayout_t la = p.transB
                                    ? layout(ab, p.k, p.n, ldb, p.batch, sB)
                                    : layout(ab, p.n, p.k, ldb, p.batch, sB);
    cublasLtMatrixLayout_t lb = p.transA
                                    ? layout(ab, p.m, p.k, lda, p.batch, sA)
                                    : layout(ab, p.k, p.m, lda, p.batch, sA);
    cublasLtMatrixLayout_t lc = layout(cd, p.n, p.m, ldc, p.batch, sC);
    cublasLtMatmulPreference_t pref;
    CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t w = wsBytes;
    CHECK_LT(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof(w)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(candidates);
    int found = 0;
    CHECK_LT(cublasLtMatmulAlgoGetHeuristic(
        lt, op, la, lb, lc, lc, pref, candidates, results.data(), &found));
    float alpha = 1.0f, beta = p.beta;
    if (heatMs > 0) {
      auto runI = [&](int i) {
        return cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, c, lc, c, lc,
                              &results[i].algo, ws, wsBytes, 0);
      };
      std::vector<int> live;
      for (int i = 0; i < found; ++i)
        if (results[i].state == CUBLAS_STATUS_SUCCESS &&
            runI(i) == CUBLAS_STATUS_SUCCESS)
          live.push_back(i);
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaEventRecord(e0));
      runI(live[0]);
      CHECK_CUDA(cudaEventRecord(e1));
      CHECK_CUDA(cudaEventSynchronize(e1));
      float one;
      CHECK_CUDA(cudaEventElapsedTime(&one, e0, e1));
      for (int j = 0; j < int(heatMs / one); ++j)
        runI(live[0]);
      size_t n = live.size();
      std::vector<cudaEvent_t> ev(size_t(rounds) * n + 1);
      for (auto &event : ev)
        CHECK_CUDA(cudaEventCreate(&event));
      CHECK_CUDA(cudaEventRecord(ev[0]));
      for (int r = 0; r < rounds; ++r)
        for (size_t j = 0; j < n; ++j) {
          runI(live[j]);
          CHECK_CUDA(cudaEventRecord(ev[size_t(r) * n + j + 1]));
        }
      CHECK_CUDA(cudaEventSynchronize(ev.back()));
      std::printf("%s heat %.0f ms:", p.name, heatMs);
      for (size_t j = 0; j < n; ++j) {
        std::vector<double> t;
        for (int r = rounds / 2; r < rounds; ++r) {
          float ms;
          size_t end = size_t(r) * n + j + 1;
          CHECK_CUDA(cudaEventElapsedTime(&ms, ev[end - 1], ev[end]));
          t.push_back(1000.0 * ms);
        }
        std::sort(t.begin(), t.end());
        std::printf(" %d:%.0f", live[j], t[t.size() / 2]);
      }
      std::printf("\n");
      std::fflush(stdout);
      for (auto &event : ev)
        cudaEventDestroy(event);
    } else {
      std::vector<double> best(found, 1e30);
      for (int r = 0; r < rounds; ++r)
        for (int i = 0; i < found; ++i) {
          if (results[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
          auto run = [&] {
            return cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, c, lc, c,
                                  lc, &results[i].algo, ws, wsBytes, 0);
          };
          if (run() != CUBLAS_STATUS_SUCCESS)
            continue;
          for (int j = 0; j < 2; ++j)
            run();
          CHECK_CUDA(cudaEventRecord(e0));
          for (int j = 0; j < reps; ++j)
            run();
          CHECK_CUDA(cudaEventRecord(e1));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float ms;
          CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          best[i] = std::min(best[i], 1000.0 * ms / reps);
        }
      int arg = int(std::min_element(best.begin(), best.end()) - best.begin());
      double flop = 2.0 * p.m * p.n * p.k * p.batch;
      std::printf(
          "| %s | %ld | %ld | %ld | %ld | %.1f | %.1f | %d of %d | %.1f "
          "%% | %.0f | %.0f |\n",
          p.name, p.m, p.n, p.k, p.batch, best[0], best[arg], arg, found,
          100.0 * (best[0] - best[arg]) / best[0], flop / best[0] / 1e6,
          flop / best[arg] / 1e6);
      std::fflush(stdout);
      totalFirst += best[0];
      totalBest += best[arg];
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
  }
  if (heatMs <= 0)
    std::printf("\nall products once: first %.1f us, best %.1f us\n",
                totalFirst, totalBest);
  return 0;
}
