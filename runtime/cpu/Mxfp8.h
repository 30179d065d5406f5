//===- Mxfp8.h - MXFP8 per-sample gradient rows on the CPU ------*- C++ -*-===//
//
// Internal to runtime/cpu. The MXFP8 rows of types.h (OCP Microscaling FP8:
// e4m3 elements, one e8m0 power-of-two scale per 32 consecutive elements)
// written by linear_per_sample_grad and read by norm_rows, rows_weighted_sum
// and the *_update_rows optimizers. The CUDA product's epilogue quantizes
// with the same rule (runtime/cuda/Mxfp8.cuh); gpu-check compares the two.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CPU_MXFP8_H
#define DPRT_CPU_MXFP8_H

#include "dprt/types.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dprt::cpu {

/// The f32 value of an e4m3 byte (bias 7, no infinities, 0x7F and 0xFF NaN).
inline float e4m3ToFloat(uint8_t q) {
  const int exponent = (q >> 3) & 0xF, mantissa = q & 7;
  if (exponent == 0xF && mantissa == 7)
    return std::nanf("");
  const float magnitude =
      exponent == 0 ? std::ldexp(float(mantissa), -9)
                    : std::ldexp(float(8 + mantissa), exponent - 10);
  return q & 0x80 ? -magnitude : magnitude;
}

/// v rounded to e4m3, nearest even, saturating at +-448 (what the GPU's
/// cvt.rn.satfinite.e4m3x2.f32 does); NaN gives 0x7F.
inline uint8_t floatToE4m3(float v) {
  if (std::isnan(v))
    return 0x7F;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const float a = std::fabs(v);
  if (a > 448.0f)
    return sign | 0x7E;
  if (a < 0x1p-6f) // subnormal: multiples of 2^-9 (8 * 2^-9 is 2^-6, code 8)
    return sign | uint8_t(std::nearbyint(a * 0x1p9f));
  int k;
  std::frexp(a, &k); // a in [2^(k-1), 2^k)
  int e = k - 1;
  int r = int(std::nearbyint(std::ldexp(a, 3 - e))); // in [8, 16]
  if (r == 16) {
    r = 8;
    ++e;
  }
  return sign | uint8_t(((e + 7) << 3) | (r - 8));
}

/// The block exponent E of types.h: the smallest integer with amax <= 448 *
/// 2^E, clamped to [-126, 127]. amax finite and >= 0.
inline int mxBlockExponent(float amax) {
  if (amax == 0.0f)
    return -126;
  int k;
  const float f = std::frexp(amax, &k); // amax = f 2^k, f in [0.5, 1)
  // 448 = 0.875 * 2^9: f 2^k <= 0.875 2^(9 + E) holds from E = k - 9 on when
  // f <= 0.875, else from E = k - 8.
  const int e = f <= 0.875f ? k - 9 : k - 8;
  return e < -126 ? -126 : e > 127 ? 127 : e;
}

/// Read-only view of MXFP8 rows of `dim` elements (types.h): row b at
/// b * (dim + dim / 32) bytes, its elements, then its scales.
struct MxRows {
  const uint8_t *base;
  int64_t dim, stride;
  MxRows(const void *g, int64_t dim)
      : base(static_cast<const uint8_t *>(g)), dim(dim),
        stride(storageBytes(DType::MXFP8, dim)) {}
};

/// 2^(s - 127) of an e8m0 scale byte; NaN for 0xFF.
inline float e8m0ToFloat(uint8_t s) {
  return s == 0xFF ? std::nanf("") : std::ldexp(1.0f, int(s) - 127);
}

/// The value element i (row i / dim) holds: e4m3 * 2^E.
inline float load(const MxRows &g, int64_t i) {
  const int64_t b = i / g.dim, j = i - b * g.dim;
  const uint8_t *row = g.base + b * g.stride;
  return e4m3ToFloat(row[j]) * e8m0ToFloat(row[g.dim + j / kMxBlock]);
}

/// Quantizes the f32 values v[0, n) (n a multiple of 32) into elements
/// elems[0, n) and scales[0, n / 32) (one row: scales = elems + n); returns
/// the sum of squares (f64) of the values they hold.
inline double quantizeMx(const float *v, int64_t n, uint8_t *elems,
                         uint8_t *scales) {
  double squares = 0;
  for (int64_t k = 0; k < n / kMxBlock; ++k) {
    const float *block = v + k * kMxBlock;
    float amax = 0;
    bool finite = true;
    for (int64_t i = 0; i < kMxBlock; ++i) {
      finite &= std::isfinite(block[i]);
      amax = std::fmax(amax, std::fabs(block[i]));
    }
    uint8_t *out = elems + k * kMxBlock;
    if (!finite) {
      scales[k] = 0xFF;
      std::memset(out, 0x7F, kMxBlock);
      squares = std::nan("");
      continue;
    }
    const int e = mxBlockExponent(amax);
    scales[k] = uint8_t(e + 127);
    for (int64_t i = 0; i < kMxBlock; ++i) {
      out[i] = floatToE4m3(std::ldexp(block[i], -e));
      const double held = std::ldexp(double(e4m3ToFloat(out[i])), e);
      squares += held * held;
    }
  }
  return squares;
}

} // namespace dprt::cpu

#endif // DPRT_CPU_MXFP8_H
