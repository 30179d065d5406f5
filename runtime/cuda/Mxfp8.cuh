//===- Mxfp8.cuh - MXFP8 per-sample gradient rows on the GPU ---*- CUDA -*-===//
//
// The MXFP8 rows of types.h (e4m3 elements, one e8m0 power-of-two scale per
// 32 consecutive elements): the block exponent, the conversions, and the
// readers the clipped sums and the norms use. The quantization rule is the
// one of runtime/cpu/Mxfp8.h, so that dpc-gpu-check can hold the two
// against each other; the conversions are the hardware's cvt with
// round-to-nearest-even and saturation (nothing saturates: the block's
// scale leaves its largest magnitude at most 448).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_MXFP8_CUH
#define DPRT_CUDA_MXFP8_CUH

#include "DeviceMath.cuh"

#include "dprt/types.h"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace dprt::cuda {

/// Whether v is an infinity or NaN (every exponent bit set).
__device__ __forceinline__ bool notFinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

/// The e8m0 scale byte E + 127 of a block whose largest magnitude is the
/// finite amax >= 0, without branches. E is the rule's (types.h,
/// runtime/cpu/Mxfp8.h): the smallest integer with amax <= 448 2^E, clamped
/// to [-126, 127]; with amax = f 2^k (f in [0.5, 1)), k - 9 where f <= 0.875
/// (448 = 0.875 2^9), else k - 8, and -126 for a subnormal or zero amax.
/// Adding 0x1FFFFF to amax's bits carries into its exponent field exactly
/// where the fraction is above 0x600000 (f > 0.875), so the sum's exponent
/// field is k + 126 or k + 127 as the rule asks; the clamp at 1 is the one
/// at -126. The largest finite amax gives 247, so no clamp above is needed.
/// dpc-gpu-check's mx_scale_byte holds it against the rule written out for
/// all 2^31 - 2^23 finite amax.
__device__ __forceinline__ uint32_t mxScaleByte(float amax) {
  const int biased = int((__float_as_uint(amax) + 0x1FFFFFu) >> 23) - 8;
  return uint32_t(biased < 1 ? 1 : biased);
}

/// 2^-E of a scale byte E + 127 in [1, 253], exactly (a normal f32): what
/// a block's values are multiplied by before they are rounded to e4m3.
__device__ __forceinline__ float mxInverseScale(uint32_t byte) {
  return __uint_as_float((254u - byte) << 23);
}

/// v rounded to e4m3 (nearest even, saturating): cvt.rn.satfinite.
__device__ __forceinline__ uint8_t toE4m3(float v) {
  return __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

/// The value of an e4m3 byte (through f16, which holds every e4m3 exactly).
__device__ __forceinline__ float fromE4m3(uint8_t q) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(q, __NV_E4M3)));
}

/// The two values of the e4m3 bytes in the low 16 bits of w.
__device__ __forceinline__ float2 fromE4m3x2(uint32_t w) {
  return __half22float2(
      __half2(__nv_cvt_fp8x2_to_halfraw2(uint16_t(w & 0xFFFFu), __NV_E4M3)));
}

/// 2^(s - 127) of an e8m0 scale byte s (1 to 254 as written); 0xFF (a
/// block that held an infinity or NaN) is NaN, so that every value of the
/// block reads as NaN whatever its elements hold.
__device__ __forceinline__ float fromE8m0(uint8_t s) {
  return s == 0xFF ? __uint_as_float(0x7FFFFFFFu)
                   : __uint_as_float(uint32_t(s) << 23);
}

/// The bytes of W consecutive values of one MXFP8 row as loaded, before
/// decoding (W of 4, 8 or 16): their e4m3 elements and their block's scale.
template <int W> struct MxRaw {
  static_assert(W == 4 || W == 8 || W == 16, "MXFP8 vectors of 4, 8 or 16");
  uint32_t w[W / 4];
  uint8_t scale;
};

/// fetchMx's loads, from the addresses of the first element and of its
/// scale.
template <int W>
__device__ __forceinline__ void fetchMxAt(const uint8_t *elem,
                                          const uint8_t *scale, MxRaw<W> &raw) {
  raw.scale = *scale;
  if constexpr (W == 16) {
    const uint4 v = *reinterpret_cast<const uint4 *>(elem);
    raw.w[0] = v.x, raw.w[1] = v.y, raw.w[2] = v.z, raw.w[3] = v.w;
  } else if constexpr (W == 8) {
    const uint2 v = *reinterpret_cast<const uint2 *>(elem);
    raw.w[0] = v.x, raw.w[1] = v.y;
  } else {
    raw.w[0] = *reinterpret_cast<const uint32_t *>(elem);
  }
}

/// Loads the bytes of W consecutive values of one MXFP8 row (elements, then
/// scales: types.h) from element i on (i a multiple of W, W dividing 32 so
/// that the W share one scale; the elements aligned to W bytes).
template <int W>
__device__ __forceinline__ void fetchMx(const uint8_t *elems,
                                        const uint8_t *scales, int64_t i,
                                        MxRaw<W> &raw) {
  fetchMxAt<W>(elems + i, scales + i / kMxBlock, raw);
}

/// The values of fetched bytes.
template <int W>
__device__ __forceinline__ void decodeMx(const MxRaw<W> &raw,
                                         float (&out)[W]) {
  const float scale = fromE8m0(raw.scale);
#pragma unroll
  for (int k = 0; k < W / 4; ++k) {
    const float2 lo = fromE4m3x2(raw.w[k]), hi = fromE4m3x2(raw.w[k] >> 16);
    out[4 * k] = lo.x * scale;
    out[4 * k + 1] = lo.y * scale;
    out[4 * k + 2] = hi.x * scale;
    out[4 * k + 3] = hi.y * scale;
  }
}

/// The e4m3 values of fetched bytes without their block's scale:
/// weightedRowSumsAhead multiplies the scale into the row's weight instead
/// (WeightedRows.cuh).
template <int W>
__device__ __forceinline__ void decodeMxElements(const MxRaw<W> &raw,
                                                 float (&out)[W]) {
#pragma unroll
  for (int k = 0; k < W / 4; ++k) {
    const float2 lo = fromE4m3x2(raw.w[k]), hi = fromE4m3x2(raw.w[k] >> 16);
    out[4 * k] = lo.x;
    out[4 * k + 1] = lo.y;
    out[4 * k + 2] = hi.x;
    out[4 * k + 3] = hi.y;
  }
}

/// W consecutive values of one MXFP8 row from element i on (fetchMx's
/// conditions; any i for W = 1).
template <int W>
__device__ __forceinline__ void loadMx(const uint8_t *elems,
                                       const uint8_t *scales, int64_t i,
                                       float (&out)[W]) {
  static_assert(W == 1 || W == 4 || W == 8 || W == 16,
                "MXFP8 vectors of 1, 4, 8 or 16");
  if constexpr (W == 1) {
    out[0] = fromE4m3(elems[i]) * fromE8m0(scales[i / kMxBlock]);
  } else {
    MxRaw<W> raw;
    fetchMx<W>(elems, scales, i, raw);
    decodeMx<W>(raw, out);
  }
}

/// MXFP8 rows of `dim` elements (types.h): row b at b * stride bytes, its
/// elements, then its scales.
struct MxRowsView {
  const uint8_t *base;
  int64_t dim, stride;
  MxRowsView(const void *g, int64_t dim)
      : base(static_cast<const uint8_t *>(g)), dim(dim),
        stride(storageBytes(DType::MXFP8, dim)) {}
  /// Whether every row's vectors of `bytes` are aligned (g 16-byte
  /// aligned, the row stride a multiple of `bytes`).
  bool aligned(const void *g, int bytes) const {
    return aligned16(g) && stride % bytes == 0;
  }
  template <int W>
  __device__ __forceinline__ void load(int64_t b, int64_t j,
                                       float (&out)[W]) const {
    const uint8_t *row = base + b * stride;
    loadMx<W>(row, row + dim, j, out);
  }
  /// load's bytes, undecoded (W of 4, 8 or 16).
  template <int W>
  __device__ __forceinline__ void fetch(int64_t b, int64_t j,
                                        MxRaw<W> &raw) const {
    const uint8_t *row = base + b * stride;
    fetchMx<W>(row, row + dim, j, raw);
  }
};

/// Rows [batch, dim] of a storage type T.
template <class T> struct PlainRowsView {
  const T *g;
  int64_t dim;
  template <int W>
  __device__ __forceinline__ void load(int64_t b, int64_t j,
                                       float (&out)[W]) const {
    loadVec<W>(g + b * dim + j, out);
  }
};

/// The sum of the squares of the values MXFP8 block i of row s holds
/// (segmentedSum's Op); V = 16 where the rows are 16-byte aligned, else 1.
template <int V> struct SquareMxOp {
  MxRowsView rows;
  __device__ float operator()(int64_t s, int64_t i) const {
    float v[V];
    float sum = 0.0f;
#pragma unroll
    for (int h = 0; h < kMxBlock / V; ++h) {
      rows.load<V>(s, i * kMxBlock + V * h, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        sum += v[k] * v[k];
    }
    return sum;
  }
};

/// Quantizes the 32 f32 values v into out (32 e4m3 bytes) and *scale by the
/// rule of types.h. Returns nothing; the squares are taken of what is stored.
__device__ __forceinline__ void quantizeMxBlock(const float (&v)[kMxBlock],
                                                uint8_t (&out)[kMxBlock],
                                                uint8_t *scale) {
  float amax = 0.0f;
  bool finite = true;
#pragma unroll
  for (int k = 0; k < kMxBlock; ++k) {
    finite &= !notFinite(v[k]);
    amax = fmaxf(amax, fabsf(v[k]));
  }
  if (!finite) {
    *scale = 0xFF;
#pragma unroll
    for (int k = 0; k < kMxBlock; ++k)
      out[k] = 0x7F;
    return;
  }
  // At most 247 for a finite amax, so the inverse is normal.
  const uint32_t byte = mxScaleByte(amax);
  *scale = uint8_t(byte);
  const float inverse = mxInverseScale(byte);
#pragma unroll
  for (int k = 0; k < kMxBlock; ++k)
    out[k] = toE4m3(v[k] * inverse);
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_MXFP8_CUH
