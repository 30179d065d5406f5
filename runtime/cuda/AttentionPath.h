//===- AttentionPath.h - Which attention implementation runs ----*- C++ -*-===//
//
// Internal to runtime/cuda (and dpc-gpu-check, which labels its rows with
// it). attention_forward and attention_backward have three implementations:
// cuDNN's fused SDPA (CudnnAttention.h), the fused kernels
// (FlashAttention.h), both for bf16 with head size 64 or 128, and the
// materialized implementation for everything. DPRT_ATTENTION (read on every
// call) says which is tried first: unset, empty or "cudnn" cuDNN, "fused"
// the fused kernels, "materialized" the materialized path; anything else is
// an error. A call falls back, with no error, from cuDNN to the fused
// kernels where the build has no cuDNN path, libcudnn.so.9 is not found,
// cuDNN's graph does not build for the shape or a pointer is not 16-byte
// aligned; and from the fused kernels to the materialized path for
// misaligned pointers, more than 65535 heads or samples, or tiles that do
// not fit the GPU's shared memory (the dQ kernel at head size 128 on
// sm_86/sm_89).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_ATTENTIONPATH_H
#define DPRT_CUDA_ATTENTIONPATH_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>
#include <string>

namespace dprt::cuda {

enum class AttentionPath { Cudnn, Fused, Materialized };

/// One call's shape: [B, T, H, hd] queries and [B, T, KV, hd] keys and
/// values, rows of H hd (KV hd) elements.
struct AttentionShape {
  int64_t batch, tokens, heads, kvHeads, headDim;
  bool causal;
  int64_t group() const { return heads / kvHeads; }
  int64_t ldq() const { return heads * headDim; }
  int64_t ldk() const { return kvHeads * headDim; }
  /// Element offset of query head (j0 * group + r) of sample b.
  int64_t qOffset(int64_t b, int64_t j0, int64_t r) const {
    return b * tokens * ldq() + (j0 * group() + r) * headDim;
  }
  /// Element offset of key/value head j0 of sample b.
  int64_t kOffset(int64_t b, int64_t j0) const {
    return b * tokens * ldk() + j0 * headDim;
  }
};

/// The implementation tried first for compute type `dt` and head size
/// `headDim` under the current DPRT_ATTENTION: Cudnn only in a build with
/// the cuDNN path, Cudnn and Fused only for bf16 with head size 64 or 128.
AttentionPath attentionPath(DType dt, int64_t headDim);

/// The implementation a call of attention_forward (or, with `backward`,
/// attention_backward) of this shape with 16-byte-aligned pointers runs on
/// this rank: attentionPath less the fallbacks above. Builds the cuDNN graph
/// of the shape when it is not built yet. `why`, when not null, receives why
/// cuDNN declined ("" when it did not).
AttentionPath attentionPathFor(Rank *rank, DType dt, int64_t batch,
                               int64_t tokens, int64_t heads, int64_t kvHeads,
                               int64_t headDim, bool causal, bool backward,
                               std::string *why = nullptr);

} // namespace dprt::cuda

#endif // DPRT_CUDA_ATTENTIONPATH_H
