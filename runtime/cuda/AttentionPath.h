//===- AttentionPath.h - Which attention implementation runs ----*- C++ -*-===//
//
// Internal to runtime/cuda (and dpc-gpu-check, which labels its rows with
// it). attention_forward and attention_backward run the fused kernels
// (FlashAttention.h) for bf16 with head size 64 or 128, and the materialized
// implementation otherwise or when the environment says
// DPRT_ATTENTION=materialized ("fused", the default, picks the fused kernels
// where they apply; anything else is an error). The fused path also needs
// 16-byte-aligned bf16 pointers, at most 65535 heads and samples and tiles
// that fit the GPU's shared memory (not the dQ kernel at head size 128 on
// sm_86/sm_89, which then runs the materialized path throughout); a call
// that misses those falls back to the materialized path.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_ATTENTIONPATH_H
#define DPRT_CUDA_ATTENTIONPATH_H

#include "dprt/types.h"

#include <cstdint>

namespace dprt::cuda {

enum class AttentionPath { Fused, Materialized };

/// The implementation for compute type `dt` and head size `headDim` under the
/// current DPRT_ATTENTION (read on every call).
AttentionPath attentionPath(DType dt, int64_t headDim);

} // namespace dprt::cuda

#endif // DPRT_CUDA_ATTENTIONPATH_H
