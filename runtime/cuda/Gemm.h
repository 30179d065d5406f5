//===- Gemm.h - Row-major matrix products through cuBLASLt ------*- C++ -*-===//
//
// Internal to runtime/cuda. Kernels describe products in row-major terms,
// exactly like the CPU backend's cblas calls, and `gemm` maps them onto
// cuBLASLt's column-major API: a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so A and B swap places and M and N
// swap roles; the transposes stay as written.
//
// bf16 operands multiply with f32 accumulation (CUBLAS_COMPUTE_32F) into a
// bf16 or f32 result; f32 operands use plain f32 arithmetic unless the rank
// allows TF32 (DeviceState::tf32). Descriptors and the algorithm are cached
// per shape, alignment and type, so a step's second call (and a graph
// capture) does no planning. The algorithm is the fastest of cuBLASLt's
// first candidates, timed on a shape's first call outside capture
// (DPRT_GEMM_TUNING=0: the heuristic's first, the same in every run).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_GEMM_H
#define DPRT_CUDA_GEMM_H

#include "DeviceState.h"

#include <array>
#include <map>

namespace dprt::cuda {

/// Row-major C[m, n] = alpha op(A) op(B) + beta C (+ bias[n] per row), for
/// `batch` problems at element strides strideA/B/C. op(A) is [m, k]: A is
/// [m, k] (lda >= k) or, with transA, [k, m] (lda >= m); likewise B.
struct Gemm {
  DType ab = DType::F32; ///< type of A and B
  DType cd = DType::F32; ///< type of C (the result is written over C)
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const void *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  void *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t batch = 1;
  float alpha = 1.0f, beta = 0.0f;
  /// [n] in the type of C, added to every row (cuBLASLt's bias epilogue);
  /// only with batch == 1.
  const void *bias = nullptr;
  /// Where beta C reads C from when it is not `c` itself (cuBLASLt's C
  /// apart from its D): the same layout as C, equal to `c` or not
  /// overlapping it; c is then written, not read.
  const void *addend = nullptr;
};

/// Runs `g` on the rank's compute stream (the cuBLASLt workspace belongs to
/// that stream).
void gemm(Rank *rank, const Gemm &g);

/// How many product shapes had cuBLASLt's candidates timed so far (for
/// dpc-gpu-check).
int64_t gemmsTuned(Rank *rank);

/// A weight gradient's product: C [out, in] (+)= dy^T x over `rows` rows of
/// dy [rows, out] and x [rows, in] (row-major, `ab` operands, f32 C); the
/// caller sets beta, strides and batch for sums and per-sample products.
inline Gemm weightGradProduct(DType ab, const void *dy, const void *x, void *c,
                              int64_t rows, int64_t in, int64_t out) {
  Gemm g;
  g.ab = ab;
  g.cd = DType::F32;
  g.transA = true;
  g.m = out;
  g.n = in;
  g.k = rows;
  g.a = dy;
  g.lda = out;
  g.b = x;
  g.ldb = in;
  g.c = c;
  g.ldc = in;
  return g;
}

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  /// What `algo` asked for (0: it runs without cuBLASLt's workspace).
  size_t workspaceBytes = 0;
};

struct GemmCache {
  using Key = std::array<int64_t, 20>;
  std::map<Key, GemmPlan> plans;
  /// Plans whose candidates were timed (Gemm.cpp, fastestCandidate), and
  /// the host seconds their timing took.
  int64_t tuned = 0;
  double tunedSeconds = 0;
  ~GemmCache();
};

} // namespace dprt::cuda

#endif // DPRT_CUDA_GEMM_H
