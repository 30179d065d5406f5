// Experiment: MXFP8 row decoding in the *_update_rows kernels.
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

/// e4m3 byte k of w as an f32 whose value is the e4m3 value times 2^-120
/// (normal e4m3: exponent field eeee as f32's low exponent bits; subnormal:
/// an f32 subnormal), sign in place.
template <int k> __device__ __forceinline__ float e4m3Shifted(uint32_t w) {
  uint32_t sign, mag;
  if constexpr (k == 3) {
    sign = w & 0x80000000u;
    mag = (w >> 4) & 0x07F00000u;
  } else {
    sign = (w << (24 - 8 * k)) & 0x80000000u;
    mag = (w << (20 - 8 * k)) & 0x07F00000u;
  }
  return __uint_as_float(sign | mag);
}

template <int Mode> struct MxView {
  const uint8_t *base;
  int64_t dim, stride;
  template <int W>
  __device__ __forceinline__ void load(int64_t b, int64_t j,
                                       float (&out)[W]) const {
    const uint8_t *row = base + b * stride;
    if constexpr (Mode == 0 || W < 4) {
      loadMx<W>(row, row + dim, j, out);
    } else {
      const uint8_t s = row[dim + j / kMxBlock];
      uint32_t w[W / 4];
      if constexpr (W == 8) {
        const uint2 v = *reinterpret_cast<const uint2 *>(row + j);
        w[0] = v.x, w[1] = v.y;
      } else {
        w[0] = *reinterpret_cast<const uint32_t *>(row + j);
      }
      if constexpr (Mode == 1) {
        const float scale = fromE8m0(s);
#pragma unroll
        for (int q = 0; q < W / 4; ++q) {
          out[4 * q] = (e4m3Shifted<0>(w[q]) * 0x1p120f) * scale;
          out[4 * q + 1] = (e4m3Shifted<1>(w[q]) * 0x1p120f) * scale;
          out[4 * q + 2] = (e4m3Shifted<2>(w[q]) * 0x1p120f) * scale;
          out[4 * q + 3] = (e4m3Shifted<3>(w[q]) * 0x1p120f) * scale;
        }
      } else if constexpr (Mode == 3) {
        // One product: 2^(E + 120) where E <= 7 (timing only).
        const float scale = __uint_as_float(uint32_t(s + 120) << 23);
#pragma unroll
        for (int q = 0; q < W / 4; ++q) {
          out[4 * q] = e4m3Shifted<0>(w[q]) * scale;
          out[4 * q + 1] = e4m3Shifted<1>(w[q]) * scale;
          out[4 * q + 2] = e4m3Shifted<2>(w[q]) * scale;
          out[4 * q + 3] = e4m3Shifted<3>(w[q]) * scale;
        }
      } else {
        // No decoding at all (timing only): the memory floor.
        const float scale = __uint_as_float(uint32_t(s) << 23);
#pragma unroll
        for (int q = 0; q < W / 4; ++q)
#pragma unroll
          for (int k = 0; k < 4; ++k)
            out[4 * q + k] = __uint_as_float((w[q] << (8 * k)) & 0x3FFFFFFFu) * scale;
      }
    }
  }
};

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

template <int Mode> MxView<Mode> view(const Buffers &b) {
  return MxView<Mode>{b.rows, b.n, storageBytes(DType::MXFP8, b.n)};
}

template <int Mode> void runSgd(const Buffers &b, bool noise) {
  using G = RowsGradient<MxView<Mode>>;
  G g{view<Mode>(b), b.c, b.batch};
  constexpr int V = 8;
  const int64_t blocks = (b.n / V + kThreads - 1) / kThreads;
  updateKernel<V><<<wave<updateKernel<V, Sgd, G>>(blocks), kThreads>>>(
      Sgd{b.master}, g, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}

template <int Mode> void runAdam(const Buffers &b, bool noise) {
  AdamW opt{0.9, 0.999, 1e-8, b.master, b.m, b.v};
  const int64_t tiles = (b.n + kMxTile - 1) / kMxTile;
  mxTileUpdateKernel<<<wave<mxTileUpdateKernel<AdamW, MxView<Mode>>>(tiles),
                       kThreads>>>(opt, view<Mode>(b), b.c, b.batch, b.n,
                                   noise ? 0 : -1, b.state, b.copy, b.flag);
}

template <class F>
void measure(const char *name, const Buffers &b, double bytes, F run,
             std::vector<float> *result, std::vector<uint16_t> *copyOut) {
  const size_t n = size_t(b.n);
  // One run from master0 for the bits.
  CK(cudaMemcpy(b.master, b.master0, n * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemset(b.m, 0, n * 4));
  CK(cudaMemset(b.v, 0, n * 4));
  run();
  CK(cudaDeviceSynchronize());
  result->resize(n);
  copyOut->resize(n);
  CK(cudaMemcpy(result->data(), b.master, n * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(copyOut->data(), b.copy, n * 2, cudaMemcpyDeviceToHost));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 5; ++i)
    run();
  const int reps = 40;
  std::vector<float> times;
  for (int r = 0; r < 3; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < reps; ++i)
      run();
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    times.push_back(ms * 1000 / reps);
  }
  std::sort(times.begin(), times.end());
  printf("%-28s n %9lld  %7.1f us  %6.0f GB/s  (runs %.1f %.1f %.1f)\n", name,
         (long long)b.n, times[1], bytes / times[1] / 1e3, times[0], times[1],
         times[2]);
  CK(cudaGetLastError());
}

int main(int argc, char **argv) {
  const int64_t n = argc > 1 ? atoll(argv[1]) : 11534336;
  const int64_t batch = 8;
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
      if ((q & 0x7F) == 0x7F)
        q ^= 1; // no NaN codes
      r[i] = q;
    }
    for (int64_t k = 0; k < n / 32; ++k)
      r[n + k] = uint8_t(110 + rng() % 25); // E in [-17, 7]
  }
  std::vector<float> c = {1.0f, 0.5f, 0.25f, 0.0f, 0.75f, 1.0f, 0.125f, 0.9f};
  std::vector<float> master(static_cast<size_t>(n));
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (auto &x : master)
    x = nd(rng);
  CK(cudaMalloc(&b.rows, rows.size()));
  CK(cudaMemcpy(b.rows, rows.data(), rows.size(), cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.c, batch * 4));
  CK(cudaMemcpy(b.c, c.data(), batch * 4, cudaMemcpyHostToDevice));
  for (float **p : {&b.master, &b.master0, &b.m, &b.v})
    CK(cudaMalloc(p, n * 4));
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
    printf("    %s: %zu elements differ from mode 0\n", what, diff);
  };
  for (int noise = 1; noise >= 0; --noise) {
    printf("== noise %d\n", noise);
    measure("sgd cvt (now)", b, sgdBytes, [&] { runSgd<0>(b, noise); }, &ref, &refCopy);
    measure("sgd int, 2 mul", b, sgdBytes, [&] { runSgd<1>(b, noise); }, &out, &outCopy);
    same("sgd int, 2 mul");
    measure("sgd int, 1 mul", b, sgdBytes, [&] { runSgd<3>(b, noise); }, &out, &outCopy);
    same("sgd int, 1 mul");
    measure("sgd raw (floor)", b, sgdBytes, [&] { runSgd<2>(b, noise); }, &out, &outCopy);
    measure("adamw tiles cvt (now)", b, adamBytes, [&] { runAdam<0>(b, noise); }, &ref, &refCopy);
    measure("adamw tiles int, 2 mul", b, adamBytes, [&] { runAdam<1>(b, noise); }, &out, &outCopy);
    same("adamw int, 2 mul");
    measure("adamw tiles int, 1 mul", b, adamBytes, [&] { runAdam<3>(b, noise); }, &out, &outCopy);
    same("adamw int, 1 mul");
    measure("adamw tiles raw (floor)", b, adamBytes, [&] { runAdam<2>(b, noise); }, &out, &outCopy);
  }
  return 0;
}
