//===- GluProductGemm.h - The GLU's backward in its product's epilogue -*- C++
//-*-//
//
// Internal to runtime/cuda. A gated MLP's backward computes dy = dz W_down
// (the down projection's input gradient, [rows, width]) and then, in a pass
// of its own, reads dy with the GLU's inputs gate and up to write dgate,
// dup and (rematerialized) the GLU's output: dy is written once and read
// once, 4 bytes an element of traffic that the second pass needs only
// because cuBLASLt cannot compute the GLU's derivative in its epilogue. On
// sm_90a this is one CUTLASS product whose epilogue rounds each dy element
// to bf16 (the value the two passes hand over) and computes the GLU's
// gradients from it with GluBackwardOp's expressions (Activations.cuh).
//
// Only GluProductGemm.cu includes CUTLASS; it is built for sm_90a alone and
// only where scripts/fetch-cutlass.sh put the headers
// (DPRT_WITH_SM90_GEMM).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_GLUPRODUCTGEMM_H
#define DPRT_CUDA_GLUPRODUCTGEMM_H

#include "NormGemms.h"

namespace dprt::cuda::sm90 {

/// dy = dz w with dz [rows, depth] and w [depth, width], then dgate = dy *
/// up * act'(gate), dup = dy * act(gate), y = act(gate) * up over [rows,
/// width]; bf16, row-major, packed. Any of dgate, dup and y may be null.
struct GluProductProblem {
  Activation act = Activation::Silu;
  const void *dz = nullptr, *w = nullptr, *gate = nullptr, *up = nullptr;
  void *dgate = nullptr, *dup = nullptr, *y = nullptr;
  int64_t rows = 0, width = 0, depth = 0;
};

/// Whether the kernel takes the problem: SiLU, sizes positive and within
/// int, width and depth multiples of 8 (TMA's 16-byte strides, and pairs of
/// columns in the epilogue). The caller checks the pointers' 16-byte
/// alignment.
bool takesGluProduct(Activation act, int64_t rows, int64_t width,
                     int64_t depth);
size_t gluProductWorkspace(const GluProductProblem &p, int smCount);
RunStatus runGluProduct(const GluProductProblem &p, void *workspace,
                        int smCount, cudaStream_t stream);

} // namespace dprt::cuda::sm90

namespace dprt::cuda {

/// glu_backward_product's fused path (FusedNorms.cu): true where it ran, or
/// false, having done nothing, where the build has no sm_90a products, the
/// GPU is not an sm_90 one, the type is not bf16, a pointer is not 16-byte
/// aligned, the kernel does not take the shape, or DPRT_GLU_PRODUCT is
/// "two-pass" ("fused", the default, or unset: the fused path where it can
/// run); a failed launch throws.
bool fusedGluProduct(Rank *rank, DType dt, const sm90::GluProductProblem &p);

} // namespace dprt::cuda

#endif // DPRT_CUDA_GLUPRODUCTGEMM_H
