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

/// z[k] = the standard normal of element index + k (what addAll adds).
template <int kLane, int W>
__device__ __forceinline__ void drawFrom(const GradientNoise &n, int64_t index, float (&out)[W]) {
  constexpr int kQuads = (kLane + W + 3) / 4;
  float z[4 * kQuads];
  const uint64_t first = uint64_t(index) >> 2;
#pragma unroll
  for (int q = 0; q < kQuads; ++q)
    gradientNoiseQuadF32(n.generator, n.key, n.step, first + q, z + 4 * q);
#pragma unroll
  for (int k = 0; k < W; ++k)
    out[k] = z[kLane + k];
}
template <int W>
__device__ __forceinline__ void draw(const GradientNoise &n, int64_t index, float (&z)[W]) {
  switch (int(uint64_t(index) & 3u)) {
  case 0: drawFrom<0>(n, index, z); break;
  case 1: drawFrom<1>(n, index, z); break;
  case 2: drawFrom<2>(n, index, z); break;
  default: drawFrom<3>(n, index, z); break;
  }
}

template <int W> struct MxFetched {
  uint32_t w[8][W / 4];
  uint8_t s[8];
};

template <int W>
__device__ __forceinline__ void decodeMx(const uint32_t (&w)[W / 4], uint8_t sb, float (&out)[W]) {
  const float scale = fromE8m0(sb);
#pragma unroll
  for (int k = 0; k < W / 4; ++k) {
    const float2 lo = fromE4m3x2(w[k]), hi = fromE4m3x2(w[k] >> 16);
    out[4 * k] = lo.x * scale;
    out[4 * k + 1] = lo.y * scale;
    out[4 * k + 2] = hi.x * scale;
    out[4 * k + 3] = hi.y * scale;
  }
}

template <int W>
__device__ __forceinline__ void fetchMx(const MxRowsView &g, int64_t batch, int64_t j, MxFetched<W> &f) {
#pragma unroll
  for (int q = 0; q < 8; ++q)
    if (q < batch) {
      const uint8_t *row = g.base + q * g.stride;
      if constexpr (W == 8) {
        const uint2 v = *reinterpret_cast<const uint2 *>(row + j);
        f.w[q][0] = v.x, f.w[q][1] = v.y;
      } else {
        f.w[q][0] = *reinterpret_cast<const uint32_t *>(row + j);
      }
      f.s[q] = row[g.dim + j / kMxBlock];
    }
}

template <int W>
__device__ __forceinline__ void sumFetched(const MxRowsView &g, const float *c, int64_t batch, int64_t j,
                                           const MxFetched<W> &f, float (&sum)[W]) {
#pragma unroll
  for (int k = 0; k < W; ++k) sum[k] = 0.0f;
#pragma unroll
  for (int q = 0; q < 8; ++q)
    if (q < batch) {
      float row[W];
      decodeMx<W>(f.w[q], f.s[q], row);
      const float cb = c[q];
      if (cb != 0.0f)
#pragma unroll
        for (int k = 0; k < W; ++k) sum[k] = __fmaf_rn(cb, row[k], sum[k]);
    }
  for (int64_t b = 8; b < batch; ++b) {
    float row[W];
    g.template load<W>(b, j, row);
    const float cb = c[b];
    if (cb != 0.0f)
#pragma unroll
      for (int k = 0; k < W; ++k) sum[k] = __fmaf_rn(cb, row[k], sum[k]);
  }
}

template <int W>
__global__ void __launch_bounds__(kThreads, 4)
    sgdPrefetchKernel(Sgd opt, MxRowsView g, const float *c, int64_t batch, int64_t n,
                      int64_t noiseIndex, const StepState *state, bf16 *copy, int32_t *nonFinite) {
  const StepScalars s = loadScalars(state, opt.beta1, opt.beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  bool finite = true;
  const int64_t vectors = n / W;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    const int64_t i = v * W;
    MxFetched<W> f;
    fetchMx<W>(g, batch, i, f);
    float w[W];
    loadVec<W>(opt.master + i, w);
    float z[W];
    if (noise.on) draw<W>(noise, noiseIndex + i, z);
    float raw[W];
    sumFetched<W>(g, c, batch, i, f, raw);
#pragma unroll
    for (int k = 0; k < W; ++k) {
      raw[k] = 0.0f + raw[k];
      finite &= (__float_as_uint(raw[k]) & 0x7f800000u) != 0x7f800000u;
      if (noise.on) raw[k] = __fmaf_rn(noise.std, z[k], raw[k]);
      w[k] = descend(s, w[k], __fmul_rn(raw[k], s.gradScale));
    }
    storeVec<W>(opt.master + i, w);
    if (copy) storeVec<W>(copy + i, w);
  }
  if (!finite) atomicOr(nonFinite, 1);
}

/// The tile kernel with phase 2's loads of the AdamW state before the noise.
__global__ void __launch_bounds__(kThreads, 4)
    adamPrefetchKernel(AdamW opt, MxRowsView rows, const float *c, int64_t batch, int64_t n,
                       int64_t noiseIndex, const StepState *state, bf16 *copy, int32_t *nonFinite) {
  __shared__ float4 sums[kMxTile / 4];
  const StepScalars s = loadScalars(state, opt.beta1, opt.beta2);
  const GradientNoise noise = GradientNoise::of(*state, noiseIndex >= 0);
  bool finite = true;
  for (int64_t tile = int64_t(blockIdx.x) * kMxTile; tile < n; tile += int64_t(gridDim.x) * kMxTile) {
    const int64_t j = tile + int64_t(threadIdx.x) * kMxRowWidth;
    if (j < n) {
      float sum[kMxRowWidth];
      weightedRowSums<kMxRowWidth>(rows, c, batch, j, sum);
#pragma unroll
      for (int q = 0; q < kMxRowWidth / 4; ++q)
        sums[threadIdx.x * (kMxRowWidth / 4) + q] =
            make_float4(0.0f + sum[4 * q], 0.0f + sum[4 * q + 1], 0.0f + sum[4 * q + 2], 0.0f + sum[4 * q + 3]);
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kMxTile / (4 * kThreads); ++q) {
      const int local = 4 * (int(threadIdx.x) + q * kThreads);
      const int64_t i = tile + local;
      if (i >= n) break;
      float w[4], mv[4], vv[4];
      loadVec<4>(opt.master + i, w);
      loadVec<4>(opt.m + i, mv);
      loadVec<4>(opt.v + i, vv);
      float z[4];
      if (noise.on) draw<4>(noise, noiseIndex + i, z);
      const float4 v4 = sums[local / 4];
      float raw[4] = {v4.x, v4.y, v4.z, v4.w};
      const float b1 = float(opt.beta1), b2 = float(opt.beta2), rest1 = float(1.0 - opt.beta1),
                  rest2 = float(1.0 - opt.beta2), epsilon = float(opt.eps);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        finite &= (__float_as_uint(raw[k]) & 0x7f800000u) != 0x7f800000u;
        if (noise.on) raw[k] = __fmaf_rn(noise.std, z[k], raw[k]);
        const float gk = __fmul_rn(raw[k], s.gradScale);
        mv[k] = __fmaf_rn(b1, mv[k], __fmul_rn(rest1, gk));
        vv[k] = __fmaf_rn(b2, vv[k], __fmul_rn(__fmul_rn(rest2, gk), gk));
        const float dir = __fdiv_rn(__fdiv_rn(mv[k], s.c1), __fadd_rn(__fsqrt_rn(__fdiv_rn(vv[k], s.c2)), epsilon));
        w[k] = descend(s, w[k], dir);
      }
      storeVec<4>(opt.m + i, mv);
      storeVec<4>(opt.v + i, vv);
      storeVec<4>(opt.master + i, w);
      if (copy) storeVec<4>(copy + i, w);
    }
    __syncthreads();
  }
  if (!finite) atomicOr(nonFinite, 1);
}

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

void runSgdNow(const Buffers &b, bool noise) {
  using G = RowsGradient<MxRowsView>;
  G g{view(b), b.c, b.batch};
  constexpr int V = 8;
  const int64_t blocks = (b.n / V + kThreads - 1) / kThreads;
  updateKernel<V><<<wave<updateKernel<V, Sgd, G>>(blocks), kThreads>>>(
      Sgd{b.master}, g, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
template <int W> void runSgdPre(const Buffers &b, bool noise) {
  const int64_t blocks = (b.n / W + kThreads - 1) / kThreads;
  sgdPrefetchKernel<W><<<wave<sgdPrefetchKernel<W>>(blocks), kThreads>>>(
      Sgd{b.master}, view(b), b.c, b.batch, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
void runAdamNow(const Buffers &b, bool noise) {
  AdamW opt{0.9, 0.999, 1e-8, b.master, b.m, b.v};
  const int64_t tiles = (b.n + kMxTile - 1) / kMxTile;
  mxTileUpdateKernel<<<wave<mxTileUpdateKernel<AdamW>>(tiles), kThreads>>>(
      opt, view(b), b.c, b.batch, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
}
void runAdamPre(const Buffers &b, bool noise) {
  AdamW opt{0.9, 0.999, 1e-8, b.master, b.m, b.v};
  const int64_t tiles = (b.n + kMxTile - 1) / kMxTile;
  adamPrefetchKernel<<<wave<adamPrefetchKernel>(tiles), kThreads>>>(
      opt, view(b), b.c, b.batch, b.n, noise ? 0 : -1, b.state, b.copy, b.flag);
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
  for (int round = 0; round < 2; ++round)
  for (int noise = 1; noise >= 0; --noise) {
    printf("== noise %d (round %d, batch %lld)\n", noise, round, (long long)batch);
    measure("sgd now", b, sgdBytes, [&] { runSgdNow(b, noise); }, &ref, &refCopy);
    measure("sgd prefetch W8", b, sgdBytes, [&] { runSgdPre<8>(b, noise); }, &out, &outCopy);
    same("sgd prefetch W8");
    measure("sgd prefetch W4", b, sgdBytes, [&] { runSgdPre<4>(b, noise); }, &out, &outCopy);
    same("sgd prefetch W4");
    measure("adamw tiles now", b, adamBytes, [&] { runAdamNow(b, noise); }, &ref, &refCopy);
    measure("adamw tiles prefetch", b, adamBytes, [&] { runAdamPre(b, noise); }, &out, &outCopy);
    same("adamw prefetch");
  }
  return 0;
}
