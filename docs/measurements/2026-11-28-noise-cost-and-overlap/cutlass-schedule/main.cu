#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#define DECL(V)                                                                \
  extern "C" int run_##V(const void *, const void *, int64_t, int64_t,        \
                         int64_t, int64_t, void *, float *, void *, int, int,  \
                         int, cudaStream_t);                                   \
  extern "C" size_t ws_##V(int64_t, int64_t, int64_t, int64_t, int);           \
  extern "C" int64_t partials_##V(int64_t, int64_t, int64_t, int64_t);
VARIANTS_DECL

struct Variant {
  const char *name;
  int (*run)(const void *, const void *, int64_t, int64_t, int64_t, int64_t,
             void *, float *, void *, int, int, int, cudaStream_t);
  size_t (*ws)(int64_t, int64_t, int64_t, int64_t, int);
  int64_t (*partials)(int64_t, int64_t, int64_t, int64_t);
};
#define ENTRY(V) {#V, run_##V, ws_##V, partials_##V},
static Variant variants[] = {VARIANTS_LIST};

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                           \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  struct Shape { const char *name; int64_t b, t, in, out; };
  Shape shapes[] = {{"q/o 2048x2048", 8, 1024, 2048, 2048},
                    {"gate/up 8192x2048", 8, 1024, 2048, 8192},
                    {"down 2048x8192", 8, 1024, 8192, 2048},
                    {"head 32000x2048", 8, 1024, 2048, 32000}};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Shape &s : shapes) {
    const size_t dyN = s.b * s.t * s.out, xN = s.b * s.t * s.in;
    std::vector<__nv_bfloat16> dy(dyN), x(xN);
    for (auto &v : dy) v = __float2bfloat16(nd(rng) * 0.01f);
    for (auto &v : x) v = __float2bfloat16(nd(rng));
    void *ddy, *dx, *g, *gref, *ws;
    float *part, *partRef;
    const size_t rowBytes = size_t(s.b) * (s.out * s.in + s.out * s.in / 32);
    CK(cudaMalloc(&ddy, dyN * 2));
    CK(cudaMalloc(&dx, xN * 2));
    CK(cudaMemcpy(ddy, dy.data(), dyN * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, x.data(), xN * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&g, rowBytes));
    CK(cudaMalloc(&gref, rowBytes));
    size_t wsMax = 0;
    int64_t pMax = 0;
    for (auto &v : variants) {
      wsMax = std::max(wsMax, v.ws(s.b, s.t, s.in, s.out, sms));
      pMax = std::max(pMax, v.partials(s.b, s.t, s.in, s.out) * s.b);
    }
    CK(cudaMalloc(&ws, std::max<size_t>(wsMax, 16)));
    CK(cudaMalloc(&part, pMax * 4));
    CK(cudaMalloc(&partRef, pMax * 4));
    const double flops = 2.0 * s.b * s.t * s.in * s.out;
    bool first = true;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (auto &v : variants)
      for (int raster = 0; raster < 3; ++raster)
        for (int swz : {1, 2, 4, 8}) {
          CK(cudaMemset(g, 0, rowBytes));
          int st = v.run(ddy, dx, s.b, s.t, s.in, s.out, g, part, ws, sms, swz, raster, 0);
          CK(cudaDeviceSynchronize());
          if (st != 0) { printf("%s %s: status %d\n", s.name, v.name, st); continue; }
          size_t diffs = 0;
          if (first) {
            CK(cudaMemcpy(gref, g, rowBytes, cudaMemcpyDeviceToDevice));
            first = false;
          } else {
            std::vector<uint8_t> a(rowBytes), b(rowBytes);
            CK(cudaMemcpy(a.data(), g, rowBytes, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(b.data(), gref, rowBytes, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < rowBytes; ++i) diffs += a[i] != b[i];
          }
          for (int i = 0; i < 3; ++i)
            v.run(ddy, dx, s.b, s.t, s.in, s.out, g, part, ws, sms, swz, raster, 0);
          const int reps = 20;
          std::vector<float> t;
          for (int r = 0; r < 3; ++r) {
            cudaEventRecord(e0);
            for (int i = 0; i < reps; ++i)
              v.run(ddy, dx, s.b, s.t, s.in, s.out, g, part, ws, sms, swz, raster, 0);
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            t.push_back(ms * 1000 / reps);
          }
          std::sort(t.begin(), t.end());
          printf("%-18s %-6s raster %d swz %d  %8.1f us  %5.0f TFLOP/s  (%.1f..%.1f)  bytes differing %zu\n",
                 s.name, v.name, raster, swz, t[1], flops / t[1] / 1e6, t[0], t[2], diffs);
        }
    cudaFree(ddy); cudaFree(dx); cudaFree(g); cudaFree(gref); cudaFree(ws); cudaFree(part); cudaFree(partRef);
  }
}
