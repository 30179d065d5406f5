// Microbenchmark: the MXFP8 per-sample product (variant.cu, EPI 0 = dpc's,
// 1 = epilogue computed but nothing stored, 2 = epilogue empty) against
// cuBLAS's bf16 weight gradient (K = b T, f32 out: DP off's product) and
// cuBLAS's batched bf16 product (L = b, K = T, bf16 out).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include <cstring>
#include <cmath>

#define DECL(V)                                                                \
  extern "C" int run_##V(const void *, const void *, int64_t, int64_t,        \
                         int64_t, int64_t, void *, float *, void *, int, int,  \
                         int, cudaStream_t);                                   \
  extern "C" size_t ws_##V(int64_t, int64_t, int64_t, int64_t, int);           \
  extern "C" int64_t partials_##V(int64_t, int64_t, int64_t, int64_t);
DECL(e0) DECL(e10) DECL(e11) DECL(e12)
struct Variant {
  const char *name;
  int (*run)(const void *, const void *, int64_t, int64_t, int64_t, int64_t,
             void *, float *, void *, int, int, int, cudaStream_t);
  size_t (*ws)(int64_t, int64_t, int64_t, int64_t, int);
  int64_t (*partials)(int64_t, int64_t, int64_t, int64_t);
};
#define ENTRY(V) {#V, run_##V, ws_##V, partials_##V},
static Variant variants[] = {ENTRY(e0) ENTRY(e10) ENTRY(e11) ENTRY(e12)};

#define CK(x)                                                                  \
  do {                                                                         \
    auto e = (x);                                                              \
    if (e != 0) {                                                              \
      printf("%s: %d\n", #x, int(e));                                          \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

template <class F> float timeIt(F f, int reps) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 5; ++i) f();
  std::vector<float> t;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i) f();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1000 / reps);
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cublasHandle_t h;
  CK(cublasCreate(&h));
  struct Shape { const char *name; int64_t b, t, in, out; };
  Shape shapes[] = {{"q/o 2048x2048", 8, 1024, 2048, 2048},
                    {"qkv 6144x2048", 8, 1024, 2048, 6144},
                    {"gate/up 8192x2048", 8, 1024, 2048, 8192},
                    {"down 2048x8192", 8, 1024, 8192, 2048}};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const char *only = getenv("SHAPE");
  for (const Shape &s : shapes) {
    if (only && !strstr(s.name, only)) continue;
    const size_t dyN = s.b * s.t * s.out, xN = s.b * s.t * s.in;
    std::vector<__nv_bfloat16> dy(dyN), x(xN);
    for (auto &v : dy) v = __float2bfloat16(nd(rng) * 0.01f);
    for (auto &v : x) v = __float2bfloat16(nd(rng));
    void *ddy, *dx, *g, *ws, *c;
    float *part;
    const size_t rowBytes = size_t(s.b) * (s.out * s.in + s.out * s.in / 32);
    CK(cudaMalloc(&ddy, dyN * 2));
    CK(cudaMalloc(&dx, xN * 2));
    CK(cudaMemcpy(ddy, dy.data(), dyN * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, x.data(), xN * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&g, rowBytes));
    CK(cudaMalloc(&c, size_t(s.b) * s.in * s.out * 2 + 16));
    size_t wsMax = 16;
    int64_t pMax = 0;
    for (auto &v : variants) {
      wsMax = std::max(wsMax, v.ws(s.b, s.t, s.in, s.out, sms));
      pMax = std::max(pMax, v.partials(s.b, s.t, s.in, s.out) * s.b);
    }
    CK(cudaMalloc(&ws, wsMax));
    CK(cudaMalloc(&part, pMax * 4));
    const double flops = 2.0 * s.b * s.t * s.in * s.out;
    std::vector<uint8_t> refRows; std::vector<double> refNorms;
    for (auto &v : variants) {
      int st = v.run(ddy, dx, s.b, s.t, s.in, s.out, g, part, ws, sms, 1, 0, 0);
      CK(cudaDeviceSynchronize());
      if (st != 0) { printf("%s %s: status %d\n", s.name, v.name, st); continue; }
      {
        std::vector<uint8_t> rb(rowBytes);
        const int64_t np = v.partials(s.b, s.t, s.in, s.out);
        std::vector<float> pb(np * s.b);
        CK(cudaMemcpy(rb.data(), g, rowBytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(pb.data(), part, np * s.b * 4, cudaMemcpyDeviceToHost));
        std::vector<double> norms(s.b, 0.0);
        for (int64_t l = 0; l < s.b; ++l)
          for (int64_t i = 0; i < np; ++i) norms[l] += pb[l * np + i];
        if (v.name[1] == '0') { refRows = rb; refNorms = norms; }
        else {
          size_t d = 0; double worst = 0;
          for (size_t i = 0; i < rowBytes; ++i) d += rb[i] != refRows[i];
          for (int64_t l = 0; l < s.b; ++l)
            worst = std::max(worst, std::abs(norms[l] / refNorms[l] - 1.0));
          printf("%-18s %s: %zu of %zu row bytes differ from e0; squared norms' largest relative difference %.3g (norm^2 of sample 0: %.6g)\n",
                 s.name, v.name, d, rowBytes, worst, norms[0]);
        }
      }
      float us = timeIt([&] { v.run(ddy, dx, s.b, s.t, s.in, s.out, g, part, ws, sms, 1, 0, 0); }, reps);
      printf("%-18s %-22s %8.1f us  %5.0f TFLOP/s\n", s.name, v.name, us, flops / us / 1e6);
    }
    const float one = 1.0f, zero = 0.0f;
    // DP off's weight gradient: C[in, out] (column-major) = X^T-ish, f32 out.
    float us = timeIt([&] {
      CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.b * s.t, &one,
                      dx, CUDA_R_16BF, s.in, ddy, CUDA_R_16BF, s.out, &zero, c,
                      CUDA_R_32F, s.in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }, reps);
    printf("%-18s %-22s %8.1f us  %5.0f TFLOP/s\n", s.name, "cublas K=bT f32", us, flops / us / 1e6);
    us = timeIt([&] {
      CK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, s.in, s.out, s.t, &one,
                      dx, CUDA_R_16BF, s.in, s.in * s.t, ddy, CUDA_R_16BF, s.out, s.out * s.t,
                      &zero, c, CUDA_R_16BF, s.in, s.in * s.out, s.b,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }, reps);
    printf("%-18s %-22s %8.1f us  %5.0f TFLOP/s\n", s.name, "cublas L=b K=T bf16", us, flops / us / 1e6);
    cudaFree(ddy); cudaFree(dx); cudaFree(g); cudaFree(c); cudaFree(ws); cudaFree(part);
  }
}
