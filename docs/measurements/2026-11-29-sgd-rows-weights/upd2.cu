// Experiment: the *_update_rows kernels with their loads issued before the
// noise is drawn (prefetch), against the kernels of Optimizers.cu (now).
#include "DeviceMath.cuh"
#include "GradientNoise.cuh"
#include "WeightedRows.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace dprt::cuda {
namespace {
#include "extracted.inc"

} // namespace
} // namespace dprt::cuda

using namespace dprt;
using namespace dprt::cuda;

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e = (x);                                                       \
    if (e != cudaSuccess) {                                                    \
      printf("%s: %s\n", #x, cudaGetErrorString(e));                           \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

template <auto kernel> unsigned wave(int64_t blocks) {
  int count = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, kThreads, 0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  return unsigned(std::min<int64_t>(blocks, int64_t(sms) * std::max(count, 1)));
}

struct Buffers {
  int64_t n, batch;
  uint8_t *rows;
  float *c, *master, *master0, *m, *v;
  bf16 *copy;
  StepState *state;
  int32_t *flag;
};

MxRowsView view(const Buffers &b) { return MxRowsView(b.rows, b.n); }

void runSgdNowUnused(const Buffers &b, bool noise) {
  using G = RowsGradient<MxRowsView>;
  G g{view(b), b.c, b.batch};
  constexpr int V = 8;
  const int64_t blocks = (b.n / V + kThreads - 1) / kThreads;
  updateKernel<V><<<wave<updateKernel<V, Sgd, G>>(blocks), kThreads>>>(
      Sgd{b.master}, g, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
void runAdamNow(const Buffers &b, bool noise) {
  AdamW opt{0.9, 0.999, 1e-8, b.master, b.m, b.v};
  const int64_t tiles = (b.n + kMxTile - 1) / kMxTile;
  mxTileUpdateKernel<<<wave<mxTileUpdateKernel<AdamW>>(tiles), kThreads>>>(
      opt, view(b), b.c, b.batch, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
template <class Opt> void runAhead(const Buffers &b, const Opt &opt, bool noise) {
  using G = RowsGradient<MxRowsView>;
  G g{view(b), b.c, b.batch};
  const int64_t blocks = (b.n / 8 + kThreads - 1) / kThreads;
  mxAheadUpdateKernel<8><<<wave<mxAheadUpdateKernel<8, Opt>>(blocks), kThreads>>>(
      opt, g, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
template <class Opt> void runNow(const Buffers &b, const Opt &opt, bool noise) {
  using G = RowsGradient<MxRowsView>;
  G g{view(b), b.c, b.batch};
  const int64_t blocks = (b.n / 8 + kThreads - 1) / kThreads;
  updateKernel<8><<<wave<updateKernel<8, Opt, G>>(blocks), kThreads>>>(
      opt, g, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
template <class F>
void measure(const char *name, const Buffers &b, double bytes, F run,
             std::vector<float> *result, std::vector<uint16_t> *copyOut) {
  const size_t n = size_t(b.n);
  CK(cudaMemcpy(b.master, b.master0, n * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemset(b.m, 0, n * 4));
  CK(cudaMemset(b.v, 0, n * 4));
  run();
  CK(cudaDeviceSynchronize());
  result->resize(n);
  copyOut->resize(n);
  CK(cudaMemcpy(result->data(), b.master, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(copyOut->data(), b.copy, n * 2, cudaMemcpyDeviceToHost));
  {
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](const void *p, size_t bytes) {
      const uint8_t *q = static_cast<const uint8_t *>(p);
      for (size_t i = 0; i < bytes; ++i) h = (h ^ q[i]) * 1099511628211ull;
    };
    mix(result->data(), n * 4);
    mix(copyOut->data(), n * 2);
    printf("  hash %016llx\n", (unsigned long long)h);
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 5; ++i) run();
  const int reps = 200;
  std::vector<float> times;
  for (int r = 0; r < 3; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i) run();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    times.push_back(ms * 1000 / reps);
  }
  std::sort(times.begin(), times.end());
  printf("%-24s n %9lld  %7.1f us  %6.0f GB/s  (runs %.1f %.1f %.1f)\n", name,
         (long long)b.n, times[1], bytes / times[1] / 1e3, times[0], times[1], times[2]);
  CK(cudaGetLastError());
}

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 11534336;
  const int64_t batch = argc > 2 ? atoll(argv[2]) : 8;
  Buffers b{};
  b.n = n;
  b.batch = batch;
  const int64_t stride = storageBytes(DType::MXFP8, n);
  std::mt19937_64 rng(7);
  std::vector<uint8_t> rows(size_t(stride * batch));
  for (int64_t s = 0; s < batch; ++s) {
    uint8_t *r = rows.data() + s * stride;
    for (int64_t i = 0; i < n; ++i) {
      uint8_t q = uint8_t(rng());
      if ((q & 0x7F) == 0x7F) q ^= 1;
      r[i] = q;
    }
    for (int64_t k = 0; k < n / 32; ++k) r[n + k] = uint8_t(110 + rng() % 25);
  }
  std::vector<float> c(batch);
  for (int64_t i = 0; i < batch; ++i) c[i] = i % 4 == 3 ? 0.0f : 1.0f / float(1 + i);
  std::vector<float> master(static_cast<size_t>(n));
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (auto &x : master) x = nd(rng);
  CK(cudaMalloc(&b.rows, rows.size()));
  CK(cudaMemcpy(b.rows, rows.data(), rows.size(), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.c, batch * 4));
  CK(cudaMemcpy(b.c, c.data(), batch * 4, cudaMemcpyHostToDevice));
  for (float **p : {&b.master, &b.master0, &b.m, &b.v}) CK(cudaMalloc(p, n * 4));
  CK(cudaMemcpy(b.master0, master.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.copy, n * 2));
  CK(cudaMalloc(&b.flag, 4));
  StepState st{};
  st.step = 3;
  st.noiseStd = 0.5;
  st.gradScale = 1.0 / 8;
  st.lrScale = 1.0;
  st.lr = 1e-3;
  st.weightDecay = 0.01;
  st.clipNorm = 1.0;
  st.noiseKey[0] = 11;
  st.noiseKey[1] = 12;
  st.noiseKey[2] = 13;
  st.noiseKey[3] = 14;
  st.noiseGenerator = 0;
  CK(cudaMalloc(&b.state, sizeof st));
  CK(cudaMemcpy(b.state, &st, sizeof st, cudaMemcpyHostToDevice));
  const double rowBytes = double(stride) * batch;
  const double sgdBytes = rowBytes + 10.0 * n, adamBytes = rowBytes + 26.0 * n;
  std::vector<float> ref, out;
  std::vector<uint16_t> refCopy, outCopy;
  auto same = [&](const char *what) {
    size_t diff = 0;
    for (size_t i = 0; i < ref.size(); ++i)
      diff += std::memcmp(&ref[i], &out[i], 4) != 0 || refCopy[i] != outCopy[i];
    printf("    %s: %zu elements differ from now\n", what, diff);
  };
  for (int round = 0; round < 1; ++round)
  for (int noise = 1; noise >= 0; --noise) {
    printf("== noise %d (round %d, batch %lld)\n", noise, round, (long long)batch);
    measure("sgd now", b, sgdBytes, [&] { runNow(b, Sgd{b.master}, noise); }, &ref, &refCopy);
    measure("sgd ahead", b, sgdBytes, [&] { runAhead(b, Sgd{b.master}, noise); }, &out, &outCopy);
    same("sgd ahead");
    measure("momentum now", b, sgdBytes + 8.0 * n, [&] { runNow(b, Momentum{b.master, b.m, 0.9, false}, noise); }, &ref, &refCopy);
    measure("momentum ahead", b, sgdBytes + 8.0 * n, [&] { runAhead(b, Momentum{b.master, b.m, 0.9, false}, noise); }, &out, &outCopy);
    same("momentum ahead");
    measure("adamw tiles", b, adamBytes, [&] { runAdamNow(b, noise); }, &ref, &refCopy);
  }
  return 0;
}
