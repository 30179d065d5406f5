//===- rng.h - Counter-based random numbers for DP noise --------*- C++ -*-===//
//
// Counter-based generators: every random value is a pure function of
// (generator, key, step, index, stream), with no state carried from one draw
// to the next. A rank that owns elements [begin, end) of the flat parameter
// buffer draws the noise of element j from its global index j, so the noise
// added to the model does not depend on how many ranks share it
// (DP-MATH.md, "Noise on shards").
//
// Two block functions:
//  - Philox-4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
//    easy as 1, 2, 3", SC 2011), with the Random123 constants. Fast and
//    statistically strong, but not a cryptographic generator: anyone who knows
//    the 64-bit seed can recompute the noise.
//  - the ChaCha20 block function (RFC 8439, 20 rounds), keyed by a 256-bit key.
//    With a secret key the noise cannot be predicted or recomputed by anyone
//    who sees the model, the code and the seed. NoiseKey::fromSeed derives the
//    ChaCha20 key from the 64-bit seed so that a run is reproducible; a secure
//    run must instead use NoiseKey::withSecretKey with 256 bits from a
//    cryptographic source (for example /dev/urandom), kept out of logs and
//    checkpoints that leave the trusted machine.
//
// Counter layout. One block of 128 bits (four 32-bit words) is drawn per
// (step, index, stream):
//   word 0 = index bits  0..31
//   word 1 = index bits 32..63
//   word 2 = step  bits  0..31
//   word 3 = (step bits 32..55) << 8 | (stream & 0xff)
// The map is injective for step < 2^56 and stream < 256.
//  - Philox: the four words are the counter; the key is (seed bits 0..31,
//    seed bits 32..63).
//  - ChaCha20: the four words fill state words 12..15 (the RFC's block counter
//    and 96-bit nonce); state words 4..11 are the 256-bit key; the first four
//    of the sixteen output words are used.
//
// Gaussians by Box-Muller, u in (0, 1], v in [0, 1):
//   z = sqrt(-2 ln u) cos(2 pi v)  (and z' = sqrt(-2 ln u) sin(2 pi v)).
// gaussianF64 computes in double from u = words 0,1 and v = words 2,3 (53 bits
// each), keeping the cosine branch: one Gaussian per index. The f32 gradient
// noise (gradientNoiseF32) takes four Gaussians from each block of its own
// stream, both branches of (u = word 0, v = word 1) and of (word 2, word 3),
// 24 bits each, for elements 4q .. 4q + 3 from the block of index q. Because
// u is never 0 the logarithm is finite: |z| <= sqrt(2 * 24 ln 2) = 5.77 in
// float and sqrt(2 * 53 ln 2) = 8.57 in double.
//
// The header compiles as host C++17 and as CUDA (every entry point is
// __host__ __device__ under nvcc) and uses only <cstdint> and the C math
// functions that exist on both sides. Values are bitwise identical on every
// rank of one backend; host and device libm may differ in the last bit of
// logf, cosf and sinf.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_RNG_H
#define DPRT_RNG_H

#include <cstdint>
#include <math.h>

#if defined(__CUDACC__)
#define DPRT_HOST_DEVICE __host__ __device__
#else
#define DPRT_HOST_DEVICE
#endif

namespace dprt {

enum class NoiseGenerator : uint32_t { Philox = 0, ChaCha20 = 1 };

/// Separates the uses of one key, so that for example the initial parameters
/// and the gradient noise of step 0 are independent. Must be < 256.
enum NoiseStream : uint32_t {
  kGradientNoiseStream = 0,
  kParameterInitStream = 1,
  kSamplingStream = 2,
  kShuffleStream = 3,
  kUserRecordsStream = 4, ///< which records of a sampled user a step uses
  /// The gradient noise of f32 gradients, four elements a block
  /// (gradientNoiseF32); apart from kGradientNoiseStream, whose blocks f64
  /// gradients draw one an element, so that no block serves two elements.
  kGradientNoiseF32Stream = 5,
};

/// SplitMix64 (Steele, Lea, Flood 2014): a bijective 64-bit mixer, used only
/// to expand a 64-bit seed into a 256-bit ChaCha20 key.
DPRT_HOST_DEVICE inline uint64_t splitMix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Key material of both generators. Philox reads `seed`; ChaCha20 reads
/// `chachaKey` (eight little-endian 32-bit words, as RFC 8439 state words
/// 4..11).
struct NoiseKey {
  uint64_t seed;
  uint32_t chachaKey[8];

  /// Reproducible key: the ChaCha20 key is four SplitMix64 outputs of the
  /// seed. It has only 64 bits of entropy and is known to whoever knows the
  /// seed: not for secure runs.
  DPRT_HOST_DEVICE static NoiseKey fromSeed(uint64_t seed) {
    NoiseKey key;
    key.seed = seed;
    uint64_t state = seed;
    for (int i = 0; i < 4; ++i) {
      uint64_t word = splitMix64(state);
      key.chachaKey[2 * i] = static_cast<uint32_t>(word);
      key.chachaKey[2 * i + 1] = static_cast<uint32_t>(word >> 32);
    }
    return key;
  }

  /// Secure key: `secret` must be 256 bits from a cryptographic source.
  DPRT_HOST_DEVICE static NoiseKey withSecretKey(uint64_t seed,
                                                 const uint32_t secret[8]) {
    NoiseKey key;
    key.seed = seed;
    for (int i = 0; i < 8; ++i)
      key.chachaKey[i] = secret[i];
    return key;
  }
};

/// The high and low words of the 64-bit product m c. On the GPU as __umulhi
/// and a 32-bit product, which ptxas fuses into one IMAD.WIDE; from the
/// 64-bit product's shift it emitted the IMAD.WIDE and then a move of the
/// high word: six instructions a Philox round instead of four (sm_90a, CUDA
/// 13.0; Optimizers.cu's SASS 66,840 -> 64,432 instructions). With
/// weightedRowSumsAhead's 32-bit row count, SGD's update on MXFP8 rows took
/// 67.5 -> 65.4 us a call in the T = 1024 DP step on one H200
/// (docs/PERFORMANCE.md). The same bits: the same two products.
DPRT_HOST_DEVICE inline void mulHiLo32(uint32_t m, uint32_t c, uint32_t &hi,
                                       uint32_t &lo) {
#ifdef __CUDA_ARCH__
  hi = __umulhi(m, c);
  lo = m * c;
#else
  const uint64_t p = static_cast<uint64_t>(m) * c;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
#endif
}

/// Philox-4x32-10 block function: 10 rounds of
///   (c0, c1, c2, c3) -> (hi(M1 c2) ^ c1 ^ k0, lo(M1 c2),
///                        hi(M0 c0) ^ c3 ^ k1, lo(M0 c0)),
/// with the key (k0, k1) bumped by the Weyl constants (W0, W1) before every
/// round but the first (Random123's philox4x32_R with R = 10).
DPRT_HOST_DEVICE inline void philox4x32Block(const uint32_t counter[4],
                                             const uint32_t key[2],
                                             uint32_t out[4]) {
  const uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  const uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulHiLo32(kM0, c0, hi0, lo0);
    mulHiLo32(kM1, c2, hi1, lo1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

DPRT_HOST_DEVICE inline uint32_t rotateLeft32(uint32_t x, int bits) {
  return (x << bits) | (x >> (32 - bits));
}

/// ChaCha quarter round (RFC 8439 section 2.1).
DPRT_HOST_DEVICE inline void chachaQuarterRound(uint32_t &a, uint32_t &b,
                                                uint32_t &c, uint32_t &d) {
  a += b;
  d = rotateLeft32(d ^ a, 16);
  c += d;
  b = rotateLeft32(b ^ c, 12);
  a += b;
  d = rotateLeft32(d ^ a, 8);
  c += d;
  b = rotateLeft32(b ^ c, 7);
}

/// ChaCha20 block function (RFC 8439 section 2.3): the state is
/// "expand 32-byte k" | key[0..7] | counterNonce[0..3] (word 12 is the RFC's
/// block counter, words 13..15 its nonce); 10 double rounds (column then
/// diagonal), then the input state is added word by word.
DPRT_HOST_DEVICE inline void chacha20Block(const uint32_t key[8],
                                           const uint32_t counterNonce[4],
                                           uint32_t out[16]) {
  uint32_t input[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
  for (int i = 0; i < 8; ++i)
    input[4 + i] = key[i];
  for (int i = 0; i < 4; ++i)
    input[12 + i] = counterNonce[i];
  uint32_t x[16];
  for (int i = 0; i < 16; ++i)
    x[i] = input[i];
  for (int doubleRound = 0; doubleRound < 10; ++doubleRound) {
    chachaQuarterRound(x[0], x[4], x[8], x[12]);
    chachaQuarterRound(x[1], x[5], x[9], x[13]);
    chachaQuarterRound(x[2], x[6], x[10], x[14]);
    chachaQuarterRound(x[3], x[7], x[11], x[15]);
    chachaQuarterRound(x[0], x[5], x[10], x[15]);
    chachaQuarterRound(x[1], x[6], x[11], x[12]);
    chachaQuarterRound(x[2], x[7], x[8], x[13]);
    chachaQuarterRound(x[3], x[4], x[9], x[14]);
  }
  for (int i = 0; i < 16; ++i)
    out[i] = x[i] + input[i];
}

/// The four counter words of (step, index, stream); see the file comment.
DPRT_HOST_DEVICE inline void makeCounter(uint64_t step, uint64_t index,
                                         uint32_t stream, uint32_t counter[4]) {
  counter[0] = static_cast<uint32_t>(index);
  counter[1] = static_cast<uint32_t>(index >> 32);
  counter[2] = static_cast<uint32_t>(step);
  counter[3] = (static_cast<uint32_t>(step >> 32) << 8) | (stream & 0xffu);
}

/// 128 random bits for (step, index, stream): the only source of randomness
/// of everything below.
DPRT_HOST_DEVICE inline void randomBlock(NoiseGenerator generator,
                                         const NoiseKey &key, uint64_t step,
                                         uint64_t index, uint32_t stream,
                                         uint32_t out[4]) {
  uint32_t counter[4];
  makeCounter(step, index, stream, counter);
  if (generator == NoiseGenerator::ChaCha20) {
    uint32_t block[16];
    chacha20Block(key.chachaKey, counter, block);
    for (int i = 0; i < 4; ++i)
      out[i] = block[i];
    return;
  }
  const uint32_t philoxKey[2] = {static_cast<uint32_t>(key.seed),
                                 static_cast<uint32_t>(key.seed >> 32)};
  philox4x32Block(counter, philoxKey, out);
}

/// Uniform in (0, 1]: (floor(bits / 2^8) + 1) 2^-24, exact in float, never 0.
DPRT_HOST_DEVICE inline float uniformOpenClosedF32(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1u) * 5.9604644775390625e-8f;
}

/// Uniform in [0, 1): floor(bits / 2^8) 2^-24.
DPRT_HOST_DEVICE inline float uniformClosedOpenF32(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-8f;
}

/// Uniform in (0, 1] from 53 of the 64 bits (hi, lo), exact in double.
DPRT_HOST_DEVICE inline double uniformOpenClosedF64(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>((bits >> 11) + 1u) * 1.1102230246251565e-16;
}

/// Uniform in [0, 1) from 53 of the 64 bits (hi, lo).
DPRT_HOST_DEVICE inline double uniformClosedOpenF64(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(bits >> 11) * 1.1102230246251565e-16;
}

/// Box-Muller in float, both branches: c = r cos(2 pi v), s = r sin(2 pi v)
/// with r = sqrt(-2 ln u), u in (0, 1], v in [0, 1): two independent
/// standard normal values from one pair of uniforms. On the GPU the sine and
/// cosine are sincospif(2 v) (2 v is exact): no rounding of the argument
/// 2 pi v and no range reduction, which the DP updates, drawing a value per
/// element under the power cap, felt: in one call's A/B on an H200, the
/// T = 1024 AdamW program's updates 11.97 -> 11.58 ms a step, the
/// 128K-vocabulary SGD program's 7.04 -> 6.25. The host's cosf and sinf of the
/// rounded 2 pi v agree with it to about 1e-7 times r (gpu-check's add_noise
/// against the CPU's).
DPRT_HOST_DEVICE inline void boxMullerPairF32(float u, float v, float &c,
                                              float &s) {
  const float r = sqrtf(-2.0f * logf(u));
#ifdef __CUDA_ARCH__
  float sn, cs;
  sincospif(2.0f * v, &sn, &cs);
  c = r * cs;
  s = r * sn;
#else
  const float kTwoPi = 6.28318530717958647692f;
  const float t = kTwoPi * v;
  c = r * cosf(t);
  s = r * sinf(t);
#endif
}

#ifdef __CUDACC__
/// -2 ln u for u = k 2^-24, k in [1, 2^24] (uniformOpenClosedF32): the steps
/// of CUDA's logf (libdevice's __nv_logf, its coefficients and order of
/// operations) without its branches for subnormal, zero, infinite and NaN
/// arguments, which u never is; bit-identical to -2.0f * logf(u)
/// (dpc-gpu-check's box_muller compares them for every k). u = 1 gives -0.
__device__ __forceinline__ float minusTwoLogUniformF32(float u) {
  const int32_t bits = __float_as_int(u);
  // u = 2^e m with m in [2/3, 4/3).
  const int32_t e = (bits - 0x3f2aaaab) & int32_t(0xff800000u);
  const float f = __fsub_rn(__int_as_float(bits - e), 1.0f);
  float p = __fmaf_rn(-0x1.0aa04ep-3f, f, 0x1.2073ecp-3f);
  p = __fmaf_rn(p, f, -0x1.f19b98p-4f);
  p = __fmaf_rn(p, f, 0x1.1e52aap-3f);
  p = __fmaf_rn(p, f, -0x1.55b172p-3f);
  p = __fmaf_rn(p, f, 0x1.99da16p-3f);
  p = __fmaf_rn(p, f, -0x1.fffe44p-3f);
  p = __fmaf_rn(p, f, 0x1.5554f0p-2f);
  p = __fmaf_rn(p, f, -0.5f);
  p = __fmaf_rn(__fmul_rn(p, f), f, f); // ln m
  const float exponent = __fmaf_rn(float(e), 0x1p-23f, 0.0f);
  return __fmul_rn(-2.0f, __fmaf_rn(exponent, 0x1.62e430p-1f, p));
}

/// sqrtf(x) for x = -0 or finite x >= 2^-101: the steps of CUDA's IEEE
/// square root without its branch to the slow path, which it takes only for
/// x below 2^-101 (zero included), infinite or NaN. -0 gives -0, as sqrtf
/// does (the bound in fmaxf keeps rsqrt finite there).
__device__ __forceinline__ float sqrtNormalF32(float x) {
  float r;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(fmaxf(x, 0x1p-100f)));
  const float s = __fmul_rn(x, r), h = __fmul_rn(r, 0.5f);
  return __fmaf_rn(__fmaf_rn(-s, s, x), h, s);
}

/// sincospif(2 v) for v = j 2^-24, j = bits >> 8 (uniformClosedOpenF32):
/// CUDA's sincospif (libdevice's __nv_sincospif) with its argument reduction
/// done on the integer j, and without its branches for integer and huge
/// arguments; bit-identical (the sine of 2 v = 1 is +0 there, here from
/// 0 - s). dpc-gpu-check's box_muller compares them for every j.
__device__ __forceinline__ void sinCosTwoPiUniformF32(uint32_t bits, float &sn,
                                                      float &cs) {
  const uint32_t j = bits >> 8;
  // n = rint(4 v), ties to even; r = 2 v - n / 2 = (j - n 2^22) 2^-23 exactly.
  const uint32_t n = (j + 0x1fffffu + ((j >> 22) & 1u)) >> 22;
  const float r = float(int32_t(j - (n << 22))) * 0x1p-23f;
  const float r2 = __fmul_rn(r, r);
  float ps = __fmaf_rn(-0x1.2f5992p-1f, r2, 0x1.466b20p+1f);
  float pc = __fmaf_rn(0x1.d09c24p-3f, r2, -0x1.55a5c0p+0f);
  ps = __fmaf_rn(ps, r2, -0x1.4abbecp+2f);
  pc = __fmaf_rn(pc, r2, 0x1.03c19ep+2f);
  const float r3 = __fmaf_rn(r2, r, 0.0f);
  pc = __fmaf_rn(pc, r2, -0x1.3bd3ccp+2f);
  ps = __fmaf_rn(ps, r3, 0.0f);
  pc = __fmaf_rn(pc, r2, 1.0f);
  ps = __fmaf_rn(0x1.921fb6p+1f, r, ps);
  float s = (n & 1u) ? pc : ps, c = (n & 1u) ? ps : pc;
  if (n & 2u)
    s = __fsub_rn(0.0f, s);
  if ((n + 1u) & 2u)
    c = __fmaf_rn(c, -1.0f, 0.0f);
  sn = s;
  cs = c;
}
#endif

/// boxMullerPairF32 of u = uniformOpenClosedF32(uBits) and v =
/// uniformClosedOpenF32(vBits). On the GPU from the steps of logf, sqrtf and
/// sincospif without their branches for arguments these uniforms never are
/// (above): the same bits as boxMullerPairF32, in fewer instructions for the
/// noise the DP updates draw for every element.
DPRT_HOST_DEVICE inline void
boxMullerPairBitsF32(uint32_t uBits, uint32_t vBits, float &c, float &s) {
#ifdef __CUDA_ARCH__
  const float r =
      sqrtNormalF32(minusTwoLogUniformF32(uniformOpenClosedF32(uBits)));
  float sn, cs;
  sinCosTwoPiUniformF32(vBits, sn, cs);
  c = r * cs;
  s = r * sn;
#else
  boxMullerPairF32(uniformOpenClosedF32(uBits), uniformClosedOpenF32(vBits), c,
                   s);
#endif
}

/// Box-Muller, cosine branch, in double: u in (0, 1], v in [0, 1).
DPRT_HOST_DEVICE inline double boxMullerF64(double u, double v) {
  const double kTwoPi = 6.28318530717958647692;
  return sqrt(-2.0 * log(u)) * cos(kTwoPi * v);
}

/// Four standard normal values in float from the block of (step, quad,
/// kGradientNoiseF32Stream): z[0], z[1] from u = word 0, v = word 1 and
/// z[2], z[3] from u = word 2, v = word 3 (boxMullerPairF32, 24 bits each).
DPRT_HOST_DEVICE inline void gradientNoiseQuadF32(NoiseGenerator generator,
                                                  const NoiseKey &key,
                                                  uint64_t step, uint64_t quad,
                                                  float z[4]) {
  uint32_t bits[4];
  randomBlock(generator, key, step, quad, kGradientNoiseF32Stream, bits);
  boxMullerPairBitsF32(bits[0], bits[1], z[0], z[1]);
  boxMullerPairBitsF32(bits[2], bits[3], z[2], z[3]);
}

/// The standard normal value of f32 gradient element `index` (global) at
/// training step `step`, which the noise sigma * C * z scales: lane
/// index % 4 of gradientNoiseQuadF32 at quad index / 4. One block serves
/// four consecutive elements, so that a GPU thread adding noise to four
/// elements runs the block function once instead of four times.
DPRT_HOST_DEVICE inline float gradientNoiseF32(NoiseGenerator generator,
                                               const NoiseKey &key,
                                               uint64_t step, uint64_t index) {
  float z[4];
  gradientNoiseQuadF32(generator, key, step, index >> 2, z);
  return z[index & 3u];
}

/// A standard normal value in double for (step, index, stream).
DPRT_HOST_DEVICE inline double gaussianF64(NoiseGenerator generator,
                                           const NoiseKey &key, uint64_t step,
                                           uint64_t index, uint32_t stream) {
  uint32_t bits[4];
  randomBlock(generator, key, step, index, stream, bits);
  return boxMullerF64(uniformOpenClosedF64(bits[0], bits[1]),
                      uniformClosedOpenF64(bits[2], bits[3]));
}

/// A uniform value in (0, 1] in double for (step, index, stream).
DPRT_HOST_DEVICE inline double uniformF64(NoiseGenerator generator,
                                          const NoiseKey &key, uint64_t step,
                                          uint64_t index, uint32_t stream) {
  uint32_t bits[4];
  randomBlock(generator, key, step, index, stream, bits);
  return uniformOpenClosedF64(bits[0], bits[1]);
}

/// 64 random bits for (step, index, stream).
DPRT_HOST_DEVICE inline uint64_t randomBits64(NoiseGenerator generator,
                                              const NoiseKey &key,
                                              uint64_t step, uint64_t index,
                                              uint32_t stream) {
  uint32_t bits[4];
  randomBlock(generator, key, step, index, stream, bits);
  return (static_cast<uint64_t>(bits[1]) << 32) | bits[0];
}

} // namespace dprt

#endif // DPRT_RNG_H
