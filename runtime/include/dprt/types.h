//===- types.h - Element types and enums shared by compiler and runtime ---===//
//
// This header is included by the runtime, by the code `dpc` emits and by the
// compiler itself (for workspace sizes), so it holds no logic that could
// disagree between them.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_TYPES_H
#define DPRT_TYPES_H

#include <cstdint>

namespace dprt {

/// Element type of a buffer. Activations and gathered parameters use the
/// model's compute type; per-sample norms, clip factors, losses, statistics,
/// gradient accumulators, master weights and optimizer state use the
/// accumulation type `accOf(compute)`: f64 for f64 models, f32 otherwise.
///
/// MXFP8 holds only materialized per-sample gradient rows (dpc
/// --per-sample-rows: mxfp8, or auto where the bf16 product is the fused
/// one): OCP Microscaling FP8, e4m3 elements
/// with one e8m0 scale per 32 consecutive elements of a row. A row of `dim`
/// elements (dim a multiple of kMxBlock) is its dim element bytes followed
/// by its dim / 32 scale bytes, scale k covering elements 32 k to 32 k + 31,
/// and row b of a buffer starts at b * storageBytes(MXFP8, dim): where a
/// row lies does not depend on how many rows a call covers (a smaller
/// micro-step writes the first rows of the buffer the update reads). Element
/// v of a block whose f32 values have the largest magnitude amax is stored
/// as e4m3(v / 2^E), rounded to nearest even, with E the smallest integer
/// for which amax / 2^E <= 448 (so nothing saturates), clamped to
/// [-126, 127]; the scale byte is E + 127. A block with a value that is not
/// finite gets the scale byte 0xFF (NaN) and NaN elements (0x7F), so that
/// the update's finiteness check still sees it. The value a row holds, the
/// one its norm and the clipped sum read, is e4m3 * 2^E.
enum class DType : int32_t { F64 = 0, F32 = 1, BF16 = 2, MXFP8 = 3 };

/// Elements one MXFP8 scale covers.
inline constexpr int64_t kMxBlock = 32;

/// Bytes of one element (for MXFP8 the e4m3 byte alone; storageBytes adds
/// the scales).
inline constexpr int64_t sizeOf(DType t) {
  return t == DType::F64 ? 8 : t == DType::F32 ? 4 : t == DType::MXFP8 ? 1 : 2;
}
/// Bytes of a buffer of `count` elements of t, scales included.
inline constexpr int64_t storageBytes(DType t, int64_t count) {
  return count * sizeOf(t) + (t == DType::MXFP8 ? count / kMxBlock : 0);
}
inline constexpr DType accOf(DType compute) {
  return compute == DType::F64 ? DType::F64 : DType::F32;
}
inline constexpr const char *nameOf(DType t) {
  return t == DType::F64   ? "f64"
         : t == DType::F32 ? "f32"
         : t == DType::BF16 ? "bf16"
                            : "mxfp8";
}

enum class Activation : int32_t {
  Relu = 0,
  Silu = 1,
  GeluErf = 2,
  GeluTanh = 3
};

/// How a sample's token losses combine: mean over counted tokens, or sum.
enum class Reduction : int32_t { Mean = 0, Sum = 1 };

/// None: no clipping (DP off); clip_factors never sees it.
enum class ClipMode : int32_t {
  Flat = 0,
  PerLayer = 1,
  Automatic = 2,
  None = 3
};

/// None: the program adds no noise (noise = #dp.none); its batches are
/// still drawn with Philox.
enum class NoiseGeneratorKind : int32_t { Philox = 0, ChaCha20 = 1, None = 2 };

enum class OptimizerKind : int32_t { SGD = 0, Momentum = 1, AdamW = 2 };

enum class SamplingKind : int32_t { Poisson = 0, Shuffle = 1 };

/// Bytes of scratch `norm_direct` needs: one sample's out x in gradient in
/// the accumulation type. The compiler reserves it in the arena.
inline constexpr int64_t normDirectWorkspaceBytes(DType compute, int64_t in,
                                                  int64_t out) {
  return in * out * sizeOf(accOf(compute));
}

/// `linear_weight_grad` scales the output gradient of this many bytes of
/// samples at a time (at least one sample) and adds their product before
/// the next: a 32000-wide head's scaled gradient of 8 x 1024 tokens would
/// take 500 MiB, 2 samples' take 125 MiB, for one more pass over dW per
/// extra chunk.
inline constexpr int64_t kWeightGradChunkBytes = int64_t(128) << 20;

/// Samples per chunk of `linear_weight_grad` (1 to batch).
inline constexpr int64_t weightGradChunkSamples(DType compute, int64_t batch,
                                                int64_t tokens, int64_t out) {
  const int64_t perSample = tokens * out * sizeOf(compute);
  int64_t samples = perSample > 0 ? kWeightGradChunkBytes / perSample : batch;
  samples = samples < 1 ? 1 : samples;
  return samples < batch ? samples : batch;
}

/// Bytes of scratch `linear_weight_grad` needs: one chunk of the output
/// gradient scaled row by row by its sample's clip factor, in the compute
/// type.
inline constexpr int64_t weightGradWorkspaceBytes(DType compute, int64_t batch,
                                                  int64_t tokens, int64_t out) {
  return weightGradChunkSamples(compute, batch, tokens, out) * tokens * out *
         sizeOf(compute);
}

/// Every buffer of the arena starts at a multiple of this many bytes.
inline constexpr int64_t kArenaAlignment = 256;

/// The CUDA backend's cuBLASLt workspace, allocated beside the arena when a
/// rank starts: what cuBLASLt's Hopper kernels may ask for. A CUDA
/// program's predicted peak is its arena and this (describe_program).
inline constexpr int64_t kCudaGemmWorkspaceBytes = int64_t(32) << 20;

/// Bytes of the workspace the compiler reserves for `attention_backward` on
/// the CUDA backend in bf16 (the cuDNN and fused paths; the materialized
/// path keeps its own scratch). cuDNN 9's SDPA backward (frontend 1.32,
/// sm_90, its default algorithm) asks for dQ's f32 accumulator [B, H, T,
/// hd]; with fewer key/value heads than query heads, dK and dV for every
/// query head [B, H, T, hd] in bf16, which it then sums over the group; and
/// one f32 a row and head; and 256 to 280 bytes more (the sizes it gave for
/// 12 shapes on one H200, each within 280 bytes of this formula:
/// docs/cuda-backend.md). The fused kernels need two f32 a row and head,
/// which this holds. A cuDNN that asks for more runs on the rank's scratch,
/// outside the plan.
inline constexpr int64_t attentionBackwardWorkspaceBytes(
    DType compute, int64_t batch, int64_t tokens, int64_t heads,
    int64_t kvHeads, int64_t headDim) {
  const int64_t rows = batch * heads * tokens;
  return rows * headDim * 4 +
         (kvHeads < heads ? 2 * rows * headDim * sizeOf(compute) : 0) +
         rows * 4 + 4096;
}

} // namespace dprt

#endif // DPRT_TYPES_H
