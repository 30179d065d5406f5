//===- CudnnAttention.h - Attention through cuDNN's fused SDPA --*- C++ -*-===//
//
// Internal to runtime/cuda. attention_forward and attention_backward for
// bf16 through cuDNN 9's scaled dot-product attention graphs (the cuDNN
// frontend's sdpa and sdpa_backward), in the layout of kernels.inc: q, o
// [batch*tokens, heads*headDim] and k, v [batch*tokens, kvHeads*headDim]
// given to cuDNN as [batch, heads, tokens, headDim] with strides
// (tokens*heads*headDim, headDim, heads*headDim, 1); lse f32 [batch, heads,
// tokens] is cuDNN's Stats, max + ln(sum exp) of the scaled scores of a row,
// the convention of the other paths (the checks compare it with the CPU
// backend's). For grouped-query attention cuDNN reads key/value head
// h / (heads / kvHeads) for query head h and sums dK and dV over the query
// heads of a group.
//
// libcudnn.so.9 is opened with dlopen on first use (CudnnLibrary.cpp), so a
// program starts without it and runs the fused kernels then. One graph per
// direction and shape is built per device on first use (the un-captured
// warm-up run of runCaptured) and kept until shutdownRank; its workspace
// comes from the compute stream's scratch. Built only where CMake found
// cudnn.h and the frontend's headers (DPRT_WITH_CUDNN); elsewhere every
// shape is declined.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_CUDNNATTENTION_H
#define DPRT_CUDA_CUDNNATTENTION_H

#include "dprt/rank.h"

#include <cstdint>
#include <string>

namespace dprt::cuda {

/// One attention call's shape (bf16, scale 1/sqrt(headDim)).
struct CudnnAttentionShape {
  int64_t batch, tokens, heads, kvHeads, headDim;
  bool causal;
  bool backward;
};

/// Whether this build has the cuDNN path (CMake found cudnn.h and the
/// frontend's headers).
bool cudnnAttentionBuilt();

/// One line for logs: the cuDNN library opened and the frontend version
/// built in ("cuDNN 9.19.0, frontend 1.32.0"), or why the path is off.
/// Opens libcudnn.so.9 if it is not open yet.
std::string cudnnAttentionLibrary();

/// "" when cuDNN runs this shape on this rank's device, building its graph
/// now if it is not built yet; otherwise why not (no cuDNN path in the
/// build, libcudnn.so.9 not found, the graph does not build). A shape that
/// is not built yet fails (throws) while the compute stream is captured.
std::string cudnnAttentionDeclines(Rank *rank, const CudnnAttentionShape &s);

/// The forward through cuDNN on the compute stream: o (bf16) and lse (f32).
/// cudnnAttentionDeclines(rank, s) must have returned "".
void cudnnAttentionForward(Rank *rank, const CudnnAttentionShape &s,
                           const void *q, const void *k, const void *v, void *o,
                           float *lse);

/// The backward through cuDNN: dq, dk, dv (bf16) written. cuDNN's
/// workspace is `workspace` when it is not null and holds the
/// `workspaceBytes` cuDNN asks for, else the rank's scratch.
void cudnnAttentionBackward(Rank *rank, const CudnnAttentionShape &s,
                            const void *q, const void *k, const void *v,
                            const void *o, const float *lse, const void *dout,
                            void *dq, void *dk, void *dv, void *workspace,
                            size_t workspaceBytes);

/// The bytes of workspace the graph of `s` asks for (building it now if it
/// is not built), under the current DPRT_CUDNN_DETERMINISTIC; -1 when cuDNN
/// does not run `s`. dpc-gpu-check holds it against the plan's reserve.
int64_t cudnnAttentionWorkspaceBytes(Rank *rank, const CudnnAttentionShape &s);

/// The per-device graphs and handle (DeviceState::cudnn), released by
/// shutdownRank with the device current.
struct CudnnAttentionState;

} // namespace dprt::cuda

#endif // DPRT_CUDA_CUDNNATTENTION_H
