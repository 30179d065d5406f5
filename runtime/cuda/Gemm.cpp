//===- Gemm.cpp - Row-major matrix products through cuBLASLt --------------===//

#include "Gemm.h"

#include <sstream>

namespace dprt::cuda {

namespace {

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F64:
    break;
  }
  fail("gemm: f64 is not supported on the CUDA backend");
}

/// The largest power of two (at most 256) that divides the address and every
/// byte offset at which the library will address a row or a batch: what
/// cuBLASLt may assume about the operand's alignment.
int64_t alignmentOf(const void *p, int64_t rowBytes, int64_t batchBytes) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u |
                  uint64_t(rowBytes) | uint64_t(batchBytes);
  return int64_t(bits & (~bits + 1));
}

/// A column-major layout of `rows` x `cols` with leading dimension `ld`,
/// `batch` copies `stride` elements apart.
cublasLtMatrixLayout_t makeLayout(DType t, int64_t rows, int64_t cols,
                                  int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  checkCublas(cublasLtMatrixLayoutCreate(&layout, cudaTypeOf(t), uint64_t(rows),
                                         uint64_t(cols), ld),
              "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = int32_t(batch);
    checkCublas(
        cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
        "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    checkCublas(cublasLtMatrixLayoutSetAttribute(
                    layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride, sizeof(stride)),
                "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return layout;
}

std::string describe(const Gemm &g) {
  std::ostringstream os;
  os << "gemm " << nameOf(g.ab) << "->" << nameOf(g.cd) << " m=" << g.m
     << " n=" << g.n << " k=" << g.k << " transA=" << g.transA
     << " transB=" << g.transB << " lda=" << g.lda << " ldb=" << g.ldb
     << " ldc=" << g.ldc << " batch=" << g.batch << " bias=" << (g.bias != 0);
  return os.str();
}

void setPreference(cublasLtMatmulPreference_t pref,
                   cublasLtMatmulPreferenceAttributes_t attr, uint32_t value) {
  checkCublas(
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
      "cublasLtMatmulPreferenceSetAttribute");
}

/// Descriptors and algorithm for `g` in column-major terms: A' = B, B' = A,
/// m' = n, n' = m (see Gemm.h).
GemmPlan makePlan(DeviceState &st, const Gemm &g, int64_t alignA,
                  int64_t alignB, int64_t alignC) {
  GemmPlan plan;
  cublasComputeType_t compute = (g.ab == DType::F32 && st.tf32)
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  checkCublas(cublasLtMatmulDescCreate(&plan.op, compute, CUDA_R_32F),
              "cublasLtMatmulDescCreate");
  int32_t opA = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t opB = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkCublas(cublasLtMatmulDescSetAttribute(
                  plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)),
              "cublasLtMatmulDescSetAttribute(TRANSA)");
  checkCublas(cublasLtMatmulDescSetAttribute(
                  plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)),
              "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (g.bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    checkCublas(cublasLtMatmulDescSetAttribute(plan.op,
                                               CUBLASLT_MATMUL_DESC_EPILOGUE,
                                               &epilogue, sizeof(epilogue)),
                "cublasLtMatmulDescSetAttribute(EPILOGUE)");
    int32_t biasType = cudaTypeOf(g.cd);
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
                    sizeof(biasType)),
                "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
    // The heuristic reads the pointer's alignment from it.
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                    sizeof(g.bias)),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  // A' = B: stored [n, k] col-major (row-major [k, n]) unless transposed.
  plan.a = g.transB ? makeLayout(g.ab, g.k, g.n, g.ldb, g.batch, g.strideB)
                    : makeLayout(g.ab, g.n, g.k, g.ldb, g.batch, g.strideB);
  // B' = A: stored [k, m] col-major (row-major [m, k]) unless transposed.
  plan.b = g.transA ? makeLayout(g.ab, g.m, g.k, g.lda, g.batch, g.strideA)
                    : makeLayout(g.ab, g.k, g.m, g.lda, g.batch, g.strideA);
  plan.c = makeLayout(g.cd, g.n, g.m, g.ldc, g.batch, g.strideC);

  cublasLtMatmulPreference_t pref = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&pref),
              "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = st.ltWorkspaceBytes;
  checkCublas(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                  sizeof(workspace)),
              "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                uint32_t(alignA));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                uint32_t(alignB));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                uint32_t(alignC));
  setPreference(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                uint32_t(alignC));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      st.lt, plan.op, plan.a, plan.b, plan.c, plan.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0 ||
      result.state != CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulDescDestroy(plan.op);
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.c);
    fail("cublasLtMatmulAlgoGetHeuristic found no algorithm for " +
         describe(g) + " with operands aligned to " + std::to_string(alignB) +
         ", " + std::to_string(alignA) + " and " + std::to_string(alignC) +
         " bytes (" + cublasLtGetStatusString(status) + ")");
  }
  plan.algo = result.algo;
  return plan;
}

} // namespace

GemmCache::~GemmCache() {
  for (auto &entry : plans) {
    cublasLtMatmulDescDestroy(entry.second.op);
    cublasLtMatrixLayoutDestroy(entry.second.a);
    cublasLtMatrixLayoutDestroy(entry.second.b);
    cublasLtMatrixLayoutDestroy(entry.second.c);
  }
}

void gemm(Rank *rank, const Gemm &g) {
  DeviceState &st = deviceState(rank);
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0)
    fail("negative size in " + describe(g));
  if (g.m == 0 || g.n == 0 || g.batch == 0)
    return;
  if (g.batch > 1 && g.bias)
    fail("bias with a batched product: " + describe(g));
  if (g.batch > INT32_MAX)
    fail("batch too large: " + describe(g));
  cudaStream_t stream = computeStream(rank);
  if (g.k == 0) {
    // An empty sum: C = beta C. Only beta = 0 and 1 occur.
    if (g.beta == 1.0f && !g.bias)
      return;
    if (g.beta != 0.0f || g.bias)
      fail("k = 0 with beta other than 0 or 1, or a bias: " + describe(g));
    int64_t es = sizeOf(g.cd);
    for (int64_t i = 0; i < g.batch; ++i)
      checkCuda(cudaMemset2DAsync(static_cast<char *>(g.c) + i * g.strideC * es,
                                  size_t(g.ldc * es), 0, size_t(g.n * es),
                                  size_t(g.m), stream),
                "cudaMemset2DAsync");
    return;
  }
  int64_t abSize = sizeOf(g.ab), cdSize = sizeOf(g.cd);
  bool batched = g.batch > 1;
  int64_t alignA =
      alignmentOf(g.b, g.ldb * abSize, batched ? g.strideB * abSize : 0);
  int64_t alignB =
      alignmentOf(g.a, g.lda * abSize, batched ? g.strideA * abSize : 0);
  int64_t alignC =
      alignmentOf(g.c, g.ldc * cdSize, batched ? g.strideC * cdSize : 0);
  int64_t alignBias = g.bias ? alignmentOf(g.bias, 0, 0) : 0;
  GemmCache::Key key = {int64_t(g.ab),
                        int64_t(g.cd),
                        g.transA,
                        g.transB,
                        g.m,
                        g.n,
                        g.k,
                        g.lda,
                        g.ldb,
                        g.ldc,
                        batched ? g.strideA : 0,
                        batched ? g.strideB : 0,
                        batched ? g.strideC : 0,
                        g.batch,
                        g.bias != nullptr,
                        alignA,
                        alignB,
                        alignC,
                        alignBias,
                        st.tf32};
  auto it = st.gemms->plans.find(key);
  if (it == st.gemms->plans.end())
    it = st.gemms->plans.emplace(key, makePlan(st, g, alignA, alignB, alignC))
             .first;
  GemmPlan &plan = it->second;
  if (g.bias)
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                    sizeof(g.bias)),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  cublasStatus_t status = cublasLtMatmul(
      st.lt, plan.op, &g.alpha, g.b, plan.a, g.a, plan.b, &g.beta, g.c, plan.c,
      g.c, plan.c, &plan.algo, st.ltWorkspace, st.ltWorkspaceBytes, stream);
  if (status != CUBLAS_STATUS_SUCCESS)
    fail("cublasLtMatmul failed for " + describe(g) + ": " +
         cublasLtGetStatusString(status));
}

} // namespace dprt::cuda
