//===- PerSampleGradGemm.h - Per-sample gradients with their norms -*- C++ -*-//
//
// Internal to runtime/cuda. The materialized per-sample-norm method writes
// every sample's weight gradient g_b = dy_b^T x_b and needs ||g_b||^2. With
// cuBLASLt the squares are a second pass that reads all of g back (at the
// memory's speed: 4.3 ms a step of the 1.1B model at T = 1024 on an H100).
// On sm_90a this product is a CUTLASS kernel instead, whose epilogue squares
// the values it stores, after rounding them to bf16 (the values that
// rows_weighted_sum later adds), and sums them over each tile's 64 rows:
// what is left to add up is one f32 per column and row tile, 1/32 of g's
// bytes, in a fixed order, so the norms are deterministic.
//
// Only PerSampleGradGemm.cu includes CUTLASS; it is built for sm_90a alone
// and only where scripts/fetch-cutlass.sh put the headers
// (DPRT_WITH_SM90_GEMM).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_PERSAMPLEGRADGEMM_H
#define DPRT_CUDA_PERSAMPLEGRADGEMM_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dprt::cuda::sm90 {

/// One bf16 problem: for b < batch, g[b] [out, in] = dy_b^T x_b with
/// dy [batch, tokens, out] and x [batch, tokens, in], row-major, and the
/// partial sums of squares of the rounded g[b] in `partials`.
struct PerSampleGradProblem {
  const void *dy = nullptr, *x = nullptr;
  void *g = nullptr;
  int64_t batch = 0, tokens = 0, in = 0, out = 0;
};

/// Whether the kernel takes a problem of this shape: all sizes positive and
/// within int, in and out multiples of 8 (TMA's 16-byte strides). TMA also
/// needs the three pointers 16-byte aligned, which the caller checks.
bool takesShape(int64_t batch, int64_t tokens, int64_t in, int64_t out);

/// f32 partial sums a sample leaves: sample b's squared norm is the sum of
/// partials[b * partialsPerSample, (b + 1) * partialsPerSample).
int64_t partialsPerSample(const PerSampleGradProblem &p);

/// Bytes of device workspace the kernel needs (its tile scheduler's).
size_t workspaceBytes(const PerSampleGradProblem &p, int smCount);

enum class RunStatus {
  Ran,     ///< launched
  Refused, ///< CUTLASS does not take the problem (can_implement): nothing ran
  Failed,  ///< the setup or the launch failed (cudaGetLastError says why)
};

/// Launches the kernel on `stream`.
RunStatus run(const PerSampleGradProblem &p, float *partials, void *workspace,
              int smCount, cudaStream_t stream);

} // namespace dprt::cuda::sm90

namespace dprt::cuda {

/// Whether linear_per_sample_grad with a norm, this shape and 16-byte-
/// aligned pointers runs the fused product: a build with it
/// (DPRT_WITH_SM90_GEMM), a compute capability 9.0 GPU, bf16, in and out
/// multiples of 8, and DPRT_PER_SAMPLE_GRAD (read on every call) unset or
/// empty where the kernel is the faster (at least 16384 rows out, or at most
/// 1024 tokens and 2048 rows out: PerSampleNorms.cu has the timings), or
/// "fused" at any shape; "two-pass" asks for the cuBLASLt product and a
/// second pass over it, and anything else is an error. dpc-gpu-check labels
/// its rows with it.
bool fusedPerSampleGradRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                            int64_t in, int64_t out);

} // namespace dprt::cuda

#endif // DPRT_CUDA_PERSAMPLEGRADGEMM_H
