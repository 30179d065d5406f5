//===- DirectNormGemm.cu - Direct per-sample norms in the epilogue --------===//
//
// The direct method's product (NormGemms.h): the same problem as the
// materialized one (M = out, N = in, K = tokens, L = batch; A = dy_b^T
// column-major, B = x_b row-major), but the epilogue squares the f32
// accumulators and sums them over each tile's 64 rows, and nothing else is
// stored: no D, no workspace of out x in f32 per sample, one launch for all
// samples. The squares are of the unrounded f32 products, as the cuBLASLt
// path computes them, since the direct method's clipped sum is a weighted
// product of dy and x, not of stored slices.
//
//===----------------------------------------------------------------------===//

#include "Sm90NormGemm.cuh"

namespace dprt::cuda::sm90 {

namespace {

using namespace detail;

using SquareSums =
    fusion::Sm90EVT<PartialColumnSums<AddSquare>, fusion::Sm90AccFetch>;
using Product =
    NormGemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, void,
             cutlass::layout::RowMajor, void, cutlass::layout::RowMajor,
             SquareSums>;
using Gemm = Product::Gemm;

typename Gemm::Arguments arguments(const LinearProblem &p, float *partials,
                                   int smCount) {
  const int M = int(p.out), N = int(p.in), K = int(p.tokens), L = int(p.batch);
  typename Product::Kernel::StrideA strideA{};
  typename Product::Kernel::StrideB strideB{};
  linearStrides(p, strideA, strideB);
  typename Product::Kernel::StrideD strideD{};
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                                {M, N, K, L},
                                {static_cast<const Element *>(p.dy), strideA,
                                 static_cast<const Element *>(p.x), strideB},
                                {{}, nullptr, strideD, nullptr, strideD},
                                hardware(smCount)};
  // SquareSums(acc).
  args.epilogue.thread = {{}, {partials, 0.0f, {}}};
  return args;
}

} // namespace

size_t directNormWorkspace(const LinearProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, nullptr, smCount));
}

RunStatus runDirectNorm(const LinearProblem &p, float *partials,
                        void *workspace, int smCount, cudaStream_t stream) {
  return launch<Gemm>(arguments(p, partials, smCount), workspace, stream);
}

} // namespace dprt::cuda::sm90
