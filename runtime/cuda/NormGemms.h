//===- NormGemms.h - Per-sample norms in the epilogue of a product -*- C++ -*-//
//
// Internal to runtime/cuda. Three per-sample-norm methods end in a product
// whose result is only there to be squared and summed:
//
//   materialized  g_b = dy_b^T x_b, kept (rows_weighted_sum adds it later),
//                 and ||g_b||^2;
//   direct        ||dy_b^T x_b||^2, the product thrown away;
//   Gram          <Ka_b, Dy_b Dy_b^T>, with Ka_b = X_b X_b^T made before.
//
// With cuBLASLt each is a product written to memory and a second pass that
// reads it back (at the memory's speed: 4.3 ms a step of the 1.1B model at
// T = 1024 on an H100 for the materialized slices alone). On sm_90a each is
// a CUTLASS kernel instead whose epilogue does the squares (or the products
// with Ka) and sums them over each tile's 64 rows: what is left to add up is
// one f32 per column and row tile, in a fixed order, so the norms are
// deterministic. The direct and Gram kernels store nothing else.
//
// Only the .cu files that include Sm90NormGemm.cuh include CUTLASS; they
// are built for sm_90a alone and only where scripts/fetch-cutlass.sh put the
// headers (DPRT_WITH_SM90_GEMM).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_NORMGEMMS_H
#define DPRT_CUDA_NORMGEMMS_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dprt::cuda::sm90 {

enum class RunStatus {
  Ran,     ///< launched
  Refused, ///< CUTLASS does not take the problem (can_implement): nothing ran
  Failed,  ///< the setup or the launch failed (cudaGetLastError says why)
};

/// A linear layer's per-sample product: for b < batch, dy_b^T x_b [out, in]
/// with dy [batch, tokens, out] and x [batch, tokens, in], bf16, row-major,
/// packed.
struct LinearProblem {
  const void *dy = nullptr, *x = nullptr;
  int64_t batch = 0, tokens = 0, in = 0, out = 0;
};

/// Whether the linear kernels take a problem of this shape: all sizes
/// positive and within int, in and out multiples of 8 (TMA's 16-byte
/// strides). TMA also needs the pointers 16-byte aligned, which the caller
/// checks.
bool takesLinear(int64_t batch, int64_t tokens, int64_t in, int64_t out);

/// f32 partial sums a sample leaves in the linear kernels: sample b's result
/// is the sum of partials[b * n, (b + 1) * n), n = linearPartials(p).
int64_t linearPartials(const LinearProblem &p);

/// Materialized: g[b] = dy_b^T x_b in bf16 ([batch, out, in], row-major) and
/// the partial sums of squares of the stored (rounded) values.
size_t perSampleGradWorkspace(const LinearProblem &p, int smCount);
RunStatus runPerSampleGrad(const LinearProblem &p, void *g, float *partials,
                           void *workspace, int smCount, cudaStream_t stream);

/// Materialized into MXFP8 rows (types.h): g[b] = dy_b^T x_b quantized
/// per block of 32 columns ([batch, out, in] e4m3 bytes, then the scales
/// [batch, out, in / 32]) and the partial sums of squares of the values
/// stored (mxLinearPartials a sample). takesMxLinear: takesLinear and in a
/// multiple of 32.
bool takesMxLinear(int64_t batch, int64_t tokens, int64_t in, int64_t out);
int64_t mxLinearPartials(const LinearProblem &p);
size_t mxPerSampleGradWorkspace(const LinearProblem &p, int smCount);
RunStatus runMxPerSampleGrad(const LinearProblem &p, void *g, float *partials,
                             void *workspace, int smCount,
                             cudaStream_t stream);
/// Direct: the partial sums of squares of dy_b^T x_b in f32 (never rounded),
/// the product itself not stored.
size_t directNormWorkspace(const LinearProblem &p, int smCount);
RunStatus runDirectNorm(const LinearProblem &p, float *partials,
                        void *workspace, int smCount, cudaStream_t stream);

/// A Gram norm's second half: for b < batch, the partial sums of
/// Ka_b (.) (Dy_b Dy_b^T) (elementwise) with dy [batch, tokens, dim] bf16
/// and ka [batch, tokens, tokens] f32 (symmetric), row-major, packed.
struct GramProblem {
  const void *dy = nullptr;
  const float *ka = nullptr;
  int64_t batch = 0, tokens = 0, dim = 0;
};

/// Whether the Gram kernel takes this shape: sizes positive and within int,
/// tokens a multiple of 4 (Ka's rows 16 bytes) and dim of 8.
bool takesGram(int64_t batch, int64_t tokens, int64_t dim);
/// As linearPartials, for the Gram kernel.
int64_t gramPartials(const GramProblem &p);
size_t gramNormWorkspace(const GramProblem &p, int smCount);
RunStatus runGramNorm(const GramProblem &p, float *partials, void *workspace,
                      int smCount, cudaStream_t stream);

} // namespace dprt::cuda::sm90

namespace dprt::cuda {

/// Whether linear_per_sample_grad with a norm, this shape and 16-byte-
/// aligned pointers runs the fused product: a build with it
/// (DPRT_WITH_SM90_GEMM), a compute capability 9.0 GPU, bf16, in and out
/// multiples of 8, and DPRT_PER_SAMPLE_GRAD (read on every call) unset or
/// empty where the kernel is the faster (at least 16384 rows out, or at most
/// 1024 tokens and 2048 rows out: dprt/fused_norms.h has the timings), or
/// "fused" at any shape; "two-pass" asks for the cuBLASLt product and a
/// second pass over it, and anything else is an error. dpc-gpu-check labels
/// its rows with it.
bool fusedPerSampleGradRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                            int64_t in, int64_t out);

/// The same for norm_direct's fused kernel (by default with at least two
/// samples, or weights of 8M elements or more) under DPRT_DIRECT_NORM, and
/// for gram_norm's (by default for output gradients of at most 4096
/// columns) under DPRT_GRAM_NORM; same values.
bool fusedDirectNormRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                         int64_t in, int64_t out);
bool fusedGramNormRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                       int64_t dim);

/// Whether this build has the fused products (DPRT_WITH_SM90_GEMM): where
/// it has not, the *Runs functions are false without reading their
/// variables.
bool fusedNormProductsBuilt();

/// The fused paths themselves (FusedNorms.cu), for PerSampleNorms.cu: each
/// adds its samples' norms into n2 (f32) and returns true, or, having done
/// nothing, false where its *Runs function says no, a pointer is not
/// 16-byte aligned or CUTLASS refuses the problem; a failed launch throws.
/// linear_per_sample_grad: g[b] = dy_b^T x_b (bf16) and ||g[b]||^2.
bool fusedPerSampleGrad(Rank *rank, DType dt, const void *x, const void *dy,
                        void *g, float *n2, int64_t batch, int64_t tokens,
                        int64_t in, int64_t out);
/// linear_per_sample_grad into MXFP8 rows: g[b] and ||g[b]||^2 (n2 not
/// null) from one product, on an sm_90 GPU with bf16 operands wherever
/// takesMxLinear, whatever DPRT_PER_SAMPLE_GRAD says (the two-pass form
/// would write an f32 product to quantize it). False as fusedPerSampleGrad.
bool fusedMxPerSampleGrad(Rank *rank, DType dt, const void *x, const void *dy,
                          void *g, float *n2, int64_t batch, int64_t tokens,
                          int64_t in, int64_t out);
/// norm_direct: ||dy_b^T x_b||^2.
bool fusedDirectNorm(Rank *rank, DType dt, const void *x, const void *dy,
                     float *n2, int64_t batch, int64_t tokens, int64_t in,
                     int64_t out);
/// gram_norm: <Ka_b, Dy_b Dy_b^T>.
bool fusedGramNorm(Rank *rank, DType dt, const void *dy, const void *ka,
                   float *n2, int64_t batch, int64_t tokens, int64_t dim);

} // namespace dprt::cuda

#endif // DPRT_CUDA_NORMGEMMS_H
