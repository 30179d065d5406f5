//===- DeviceMath.cuh - Element access and reductions ----------*- CUDA -*-===//
//
// Internal to runtime/cuda. Elements are stored as f32 or bf16 and always
// computed in f32 (bf16 -> f32 is exact; f32 -> bf16 rounds to nearest
// even). Vector accesses move W consecutive elements with one load or store
// (16 bytes for W = 16 / sizeof(T)); the caller guarantees the alignment.
// Block reductions combine in a fixed order, so every run gives the same
// bits, and hand the result to every thread of the block.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_DEVICEMATH_CUH
#define DPRT_CUDA_DEVICEMATH_CUH

#include "DeviceState.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

namespace dprt::cuda {

using bf16 = __nv_bfloat16;

/// Elements per 16-byte access.
template <class T> constexpr int kVec = int(16 / sizeof(T));
/// Elements per two 16-byte accesses: maps over a few streams that are
/// memory-bound keep twice the bytes in flight a thread with these.
template <class T> constexpr int kVec2 = 2 * kVec<T>;

inline bool aligned16(const void *p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(bf16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Rounds once, straight from f64 (no double rounding through f32).
template <class T> __device__ __forceinline__ T fromDouble(double v);
template <> __device__ __forceinline__ float fromDouble<float>(double v) {
  return __double2float_rn(v);
}
template <> __device__ __forceinline__ bf16 fromDouble<bf16>(double v) {
  return __double2bfloat16(v);
}

/// The two bf16 halves of a 32-bit word as f32 (exact: a bf16 is the upper
/// half of an f32).
__device__ __forceinline__ float lowBf16(uint32_t w) {
  return __uint_as_float(w << 16);
}
__device__ __forceinline__ float highBf16(uint32_t w) {
  return __uint_as_float(w & 0xffff0000u);
}
__device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

/// A 16-byte vector as loaded (uint4), and its kVec<T> values as f32:
/// loadVec's conversion, for kernels that hold a row's bytes in registers
/// before they convert them (Normalization.cu's backward).
template <class T> __device__ __forceinline__ uint4 loadRaw16(const T *p) {
  return *reinterpret_cast<const uint4 *>(p);
}
template <class T, int V>
__device__ __forceinline__ void unpack16(const uint4 &raw, float (&out)[V]) {
  static_assert(V * sizeof(T) == 16, "one 16-byte vector");
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same_v<T, bf16>) {
      out[2 * i] = lowBf16(w[i]);
      out[2 * i + 1] = highBf16(w[i]);
    } else {
      out[i] = __uint_as_float(w[i]);
    }
  }
}

/// Half h (0 or 1) of a vector of 2N floats, as a vector of N: the
/// vectors of two 16-byte accesses (f32 x 8, bf16 x 16) are two of one.
template <int N>
__device__ __forceinline__ float (&halfOf(float (&v)[2 * N], int h))[N] {
  return *reinterpret_cast<float(*)[N]>(v + h * N);
}
template <int N>
__device__ __forceinline__ const float (&halfOf(const float (&v)[2 * N],
                                                int h))[N] {
  return *reinterpret_cast<const float(*)[N]>(v + h * N);
}

/// out[i] = p[i] for i < W. p must be aligned to W * sizeof(T) bytes.
template <int W>
__device__ __forceinline__ void loadVec(const float *p, float (&out)[W]) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8,
                "f32 vectors of 1, 2, 4 or 8");
  if constexpr (W == 8) {
    loadVec<4>(p, halfOf<4>(out, 0));
    loadVec<4>(p + 4, halfOf<4>(out, 1));
  } else if constexpr (W == 4) {
    float4 v = *reinterpret_cast<const float4 *>(p);
    out[0] = v.x;
    out[1] = v.y;
    out[2] = v.z;
    out[3] = v.w;
  } else if constexpr (W == 2) {
    float2 v = *reinterpret_cast<const float2 *>(p);
    out[0] = v.x;
    out[1] = v.y;
  } else {
    out[0] = *p;
  }
}

template <int W>
__device__ __forceinline__ void loadVec(const bf16 *p, float (&out)[W]) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8 || W == 16,
                "bf16 vectors of 1, 2, 4, 8 or 16");
  if constexpr (W == 16) {
    // Two independent 16-byte loads: twice the bytes in flight a thread,
    // for the memory-bound maps with a few streams.
    loadVec<8>(p, halfOf<8>(out, 0));
    loadVec<8>(p + 8, halfOf<8>(out, 1));
  } else if constexpr (W == 8) {
    unpack16<bf16, 8>(loadRaw16(p), out);
  } else if constexpr (W == 4) {
    uint2 v = *reinterpret_cast<const uint2 *>(p);
    out[0] = lowBf16(v.x);
    out[1] = highBf16(v.x);
    out[2] = lowBf16(v.y);
    out[3] = highBf16(v.y);
  } else if constexpr (W == 2) {
    uint32_t v = *reinterpret_cast<const uint32_t *>(p);
    out[0] = lowBf16(v);
    out[1] = highBf16(v);
  } else {
    out[0] = __bfloat162float(*p);
  }
}

template <int W>
__device__ __forceinline__ void storeVec(float *p, const float (&in)[W]) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8,
                "f32 vectors of 1, 2, 4 or 8");
  if constexpr (W == 8) {
    storeVec<4>(p, halfOf<4>(in, 0));
    storeVec<4>(p + 4, halfOf<4>(in, 1));
  } else if constexpr (W == 4) {
    *reinterpret_cast<float4 *>(p) = make_float4(in[0], in[1], in[2], in[3]);
  } else if constexpr (W == 2) {
    *reinterpret_cast<float2 *>(p) = make_float2(in[0], in[1]);
  } else {
    *p = in[0];
  }
}

template <int W>
__device__ __forceinline__ void storeVec(bf16 *p, const float (&in)[W]) {
  static_assert(W == 1 || W == 2 || W == 4 || W == 8 || W == 16,
                "bf16 vectors of 1, 2, 4, 8 or 16");
  if constexpr (W == 16) {
    storeVec<8>(p, halfOf<8>(in, 0));
    storeVec<8>(p + 8, halfOf<8>(in, 1));
  } else if constexpr (W == 8) {
    *reinterpret_cast<uint4 *>(p) =
        make_uint4(packBf16(in[0], in[1]), packBf16(in[2], in[3]),
                   packBf16(in[4], in[5]), packBf16(in[6], in[7]));
  } else if constexpr (W == 4) {
    *reinterpret_cast<uint2 *>(p) =
        make_uint2(packBf16(in[0], in[1]), packBf16(in[2], in[3]));
  } else if constexpr (W == 2) {
    *reinterpret_cast<uint32_t *>(p) = packBf16(in[0], in[1]);
  } else {
    *p = __float2bfloat16_rn(in[0]);
  }
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32), the same bits in every
/// thread: the butterfly gives every lane the same value (a + b == b + a),
/// and every warp then reduces the same per-warp sums in the same order.
/// `buffer` is a __shared__ float[32]; the leading barrier lets a block call
/// this several times with one buffer.
__device__ __forceinline__ float blockSum(float v, float *buffer) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warpSum(v);
  __syncthreads();
  if (lane == 0)
    buffer[warp] = v;
  __syncthreads();
  return warpSum(lane < warps ? buffer[lane] : 0.0f);
}

__device__ __forceinline__ float blockMax(float v, float *buffer) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    buffer[warp] = v;
  __syncthreads();
  return warpMax(lane < warps ? buffer[lane] : -INFINITY);
}

/// Threads for a block that walks one row of `items` vectors: a multiple of
/// 32 between 64 and 1024.
inline int rowThreads(int64_t items) {
  int64_t t = (items + 31) / 32 * 32;
  return int(t < 64 ? 64 : t > 1024 ? 1024 : t);
}

/// Calls fn(T{}) with T = float for F32 and bf16 for BF16; throws for F64.
template <class Fn>
void dispatchCompute(DType dt, const char *kernel, Fn &&fn) {
  requireCompute(dt, kernel);
  if (dt == DType::F32)
    fn(float{});
  else
    fn(bf16{});
}

//===----------------------------------------------------------------------===//
// Elementwise maps
//===----------------------------------------------------------------------===//

/// Calls op.apply<V>(i) for every i = 0, V, 2V, ... below n - n % V, and
/// op.apply<1>(i) for the remaining tail (in block 0).
template <int V, class Op> __global__ void mapKernel(int64_t n, Op op) {
  const int64_t vectors = n / V;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += stride)
    op.template apply<V>(i * V);
  if (V > 1 && blockIdx.x == 0)
    for (int64_t i = vectors * V + threadIdx.x; i < n; i += blockDim.x)
      op.template apply<1>(i);
}

/// Launches mapKernel on `stream` with vectors of V elements when
/// `vectorize` (every pointer the op touches 16-byte aligned), else one
/// element at a time.
template <int V, class Op>
void launchMap(Rank *rank, int32_t stream, int64_t n, bool vectorize,
               const Op &op, const char *name) {
  if (n <= 0)
    return;
  constexpr int kThreads = 256;
  // Up to 8 waves of blocks (one vector a thread for the 1.1B model's
  // activations): the maps ran 6 to 16 % faster than with one wave and
  // grid-stride loops (one H200: glu_backward of 8192 x 8192 184.5 to
  // 165.0 us, activation_forward 98.8 to 82.8 us); the optimizer updates,
  // which keep one wave, ran slower with more.
  constexpr int kWaves = 8;
  cudaStream_t s = streamOf(rank, stream);
  if (vectorize && V > 1) {
    mapKernel<V>
        <<<gridFor(rank, n / V, kThreads, kWaves), kThreads, 0, s>>>(n, op);
  } else {
    mapKernel<1><<<gridFor(rank, n, kThreads, kWaves), kThreads, 0, s>>>(n, op);
  }
  checkLaunch(name);
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_DEVICEMATH_CUH
