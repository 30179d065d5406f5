//===- Rope.cu - Rotary position embedding on the GPU ---------------------===//
//
// rope_forward and rope_backward (the rotation by -angle), with the angles
// theta^(-2i/headDim) or a table of frequencies such as Llama 3's scaled
// ones (rope_llama3_frequencies): the angles in f64, as on the CPU, the
// rotation in f32 (the CPU's is f64, rounded once; they agree to an f32 ulp
// or two).
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"

#include "dprt/kernels.h"

#include <cmath>

namespace dprt::cuda {

namespace {

/// Rows (tokens) a block takes at a time.
constexpr int kRopeRows = 16;

/// kRopeRows rows of every head a block iteration: the rows' half angles
/// t * f_i in f64 (t reaches the thousands, where f32 would lose the angle's
/// low bits), with f_i = invFreq[i] or, without a table, theta^(-2i/headDim)
/// (once per block, before the rows), their cosines and `sign` * sines
/// rounded once to f32 into shared memory, shared out over all the block's
/// threads; then every pair (i, i + half) of every head of those rows rotated
/// in f32 fmas, V consecutive i a thread (16-byte accesses for V = kVec<T>).
/// The rotation was f64, like the CPU's: its conversions (16 a
/// multiprocessor a clock on Hopper) held q's to 2 TB/s and k's to 0.7
/// (gpu-check, full clocks), the more so in a training step under the power
/// cap. A block of one row at a time (a quarter of its threads computing the
/// angles, two barriers a row) took 19.8 us a call on average in the T =
/// 1024 SGD DP-off step on one H100, this 17.5 (bench/kernel-times.cpp,
/// steady state). A thread reads and writes only its own elements, so y may
/// be x.
template <class T, int V>
__global__ void ropeKernel(const T *x, T *y, const double *invFreq,
                           int64_t rows, int64_t tokens, int64_t heads,
                           int64_t headDim, double theta, double sign,
                           bool accumulate) {
  // [0, half): f_i; then, as f32, for each of the kRopeRows rows r:
  // [2 r half, 2 r half + half): cos, [2 r half + half, 2 (r + 1) half): sin.
  extern __shared__ double freq[];
  const int half = int(headDim / 2), perHead = half / V;
  const int perRow = int(heads) * perHead; // vectors of V a row's half
  float *trig = reinterpret_cast<float *>(freq + half);
  for (int i = threadIdx.x; i < half; i += blockDim.x)
    freq[i] =
        invFreq ? invFreq[i] : pow(theta, -2.0 * double(i) / double(headDim));
  const int64_t tiles = (rows + kRopeRows - 1) / kRopeRows;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile * kRopeRows;
    const int n = int(rows - r0 < kRopeRows ? rows - r0 : kRopeRows);
    __syncthreads(); // f_i written; the last tile's readers done with trig
    for (int e = threadIdx.x; e < n * half; e += blockDim.x) {
      const int r = e / half, i = e - r * half;
      const int64_t t = (r0 + r) % tokens;
      double sn, cs;
      sincos(double(t) * freq[i], &sn, &cs);
      trig[2 * r * half + i] = float(cs);
      trig[2 * r * half + half + i] = float(sn * sign);
    }
    __syncthreads();
#pragma unroll 4
    for (int e = threadIdx.x; e < n * perRow; e += blockDim.x) {
      const int r = e / perRow, v = e - r * perRow;
      const int h = v / perHead, i = (v - h * perHead) * V;
      const int64_t at = ((r0 + r) * heads + h) * headDim + i;
      const float *cosines = trig + 2 * r * half, *sines = cosines + half;
      float x1[V], x2[V], a1[V], a2[V];
      loadVec<V>(x + at, x1);
      loadVec<V>(x + at + half, x2);
      if (accumulate) {
        loadVec<V>(y + at, a1);
        loadVec<V>(y + at + half, a2);
      }
      float o1[V], o2[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float cs = cosines[i + k], sn = sines[i + k];
        o1[k] = __fmaf_rn(x1[k], cs, -__fmul_rn(x2[k], sn));
        o2[k] = __fmaf_rn(x2[k], cs, __fmul_rn(x1[k], sn));
        if (accumulate) {
          o1[k] = __fadd_rn(o1[k], a1[k]);
          o2[k] = __fadd_rn(o2[k], a2[k]);
        }
      }
      storeVec<V>(y + at, o1);
      storeVec<V>(y + at + half, o2);
    }
  }
}

template <class T>
void rope(Rank *rank, const void *x, void *y, const void *invFreq,
          int64_t batch, int64_t tokens, int64_t heads, int64_t headDim,
          double theta, double sign, bool accumulate, const char *name) {
  int64_t rows = batch * tokens;
  const int64_t half = headDim / 2;
  if (rows <= 0 || half <= 0 || heads <= 0)
    return;
  constexpr int kThreads = 256;
  const int64_t tiles = (rows + kRopeRows - 1) / kRopeRows;
  const unsigned blocks = gridFor(rank, tiles * kThreads, kThreads);
  const size_t shared =
      size_t(half) * (sizeof(double) + 2 * kRopeRows * sizeof(float));
  cudaStream_t s = computeStream(rank);
  const auto *xt = static_cast<const T *>(x);
  auto *yt = static_cast<T *>(y);
  const auto *freq = static_cast<const double *>(invFreq);
  // A vector of kVec<T> i never crosses into the second half or the next
  // head when it divides half; rows, heads and halves then start 16-byte
  // aligned when x and y do.
  if (half % kVec<T> == 0 && aligned16(x) && aligned16(y))
    ropeKernel<T, kVec<T>><<<blocks, kThreads, shared, s>>>(
        xt, yt, freq, rows, tokens, heads, headDim, theta, sign, accumulate);
  else
    ropeKernel<T, 1><<<blocks, kThreads, shared, s>>>(
        xt, yt, freq, rows, tokens, heads, headDim, theta, sign, accumulate);
  checkLaunch(name);
}

/// Thread i: Llama 3's scaled frequency i (kernels.inc), in f64.
__global__ void llama3FrequenciesKernel(double *invFreq, int64_t headDim,
                                        double theta, double factor,
                                        double lowFreqFactor,
                                        double highFreqFactor, double context) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= headDim / 2)
    return;
  const double longWave = context / lowFreqFactor;
  const double shortWave = context / highFreqFactor;
  double freq = pow(theta, -2.0 * double(i) / double(headDim));
  const double wave = 2.0 * 3.14159265358979323846 / freq;
  if (wave > longWave) {
    freq /= factor;
  } else if (wave >= shortWave) {
    const double s =
        (context / wave - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
    freq = (1.0 - s) * freq / factor + s * freq;
  }
  invFreq[i] = freq;
}

} // namespace

void rope_forward(Rank *rank, DType dt, const void *x, void *y,
                  const void *invFreq, int64_t batch, int64_t tokens,
                  int64_t heads, int64_t headDim, double theta) {
  dispatchCompute(dt, "rope_forward", [&](auto tag) {
    rope<decltype(tag)>(rank, x, y, invFreq, batch, tokens, heads, headDim,
                        theta, 1.0, false, "rope_forward");
  });
}

void rope_backward(Rank *rank, DType dt, const void *dy, void *dx,
                   const void *invFreq, int64_t batch, int64_t tokens,
                   int64_t heads, int64_t headDim, double theta,
                   bool accumulate) {
  dispatchCompute(dt, "rope_backward", [&](auto tag) {
    rope<decltype(tag)>(rank, dy, dx, invFreq, batch, tokens, heads, headDim,
                        theta, -1.0, accumulate, "rope_backward");
  });
}

void rope_llama3_frequencies(Rank *rank, void *invFreq, int64_t headDim,
                             double theta, double factor, double lowFreqFactor,
                             double highFreqFactor,
                             int64_t originalMaxPositions) {
  int64_t half = headDim / 2;
  if (half <= 0)
    return;
  llama3FrequenciesKernel<<<unsigned((half + 127) / 128), 128, 0,
                            computeStream(rank)>>>(
      static_cast<double *>(invFreq), headDim, theta, factor, lowFreqFactor,
      highFreqFactor, double(originalMaxPositions));
  checkLaunch("rope_llama3_frequencies");
}

} // namespace dprt::cuda
