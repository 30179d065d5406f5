//===- MaterializedAttention.h - Attention on scores in memory -*- C++ -*-===//
//
// Internal to runtime/cuda: the materialized path of attention_forward and
// attention_backward (MaterializedAttention.cu), for T = float and bf16.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_MATERIALIZEDATTENTION_H
#define DPRT_CUDA_MATERIALIZEDATTENTION_H

#include "AttentionPath.h"
#include "DeviceMath.cuh"

namespace dprt::cuda {

/// o and the natural-log lse [B, H, T] of q, k, v (the layout of
/// kernels.inc's attention_forward).
template <class T>
void materializedForward(Rank *rank, DType dt, const AttentionShape &a,
                         const T *q, const T *k, const T *v, T *o, float *lse);

/// dq, dk, dv from the forward's lse (o is not read: D = sum_s P dP).
template <class T>
void materializedBackward(Rank *rank, DType dt, const AttentionShape &a,
                          const T *q, const T *k, const T *v, const float *lse,
                          const T *dout, T *dq, T *dk, T *dv);

} // namespace dprt::cuda

#endif // DPRT_CUDA_MATERIALIZEDATTENTION_H
