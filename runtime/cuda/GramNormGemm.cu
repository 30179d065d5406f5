//===- GramNormGemm.cu - Gram per-sample norms in the epilogue ------------===//
//
// The Gram method's second product (NormGemms.h): for each sample, the Gram
// matrix of the output gradients Dy_b Dy_b^T [T, T], multiplied element by
// element with the input's Ka_b = X_b X_b^T (made before, f32) and summed
// over each tile's 64 rows, so that <Ka_b, Dy_b Dy_b^T> needs neither a
// second T x T buffer nor a pass over two of them. CUTLASS 3 terms: M = N =
// T, K = dim, L = batch; A = Dy_b is K-major (row-major A) and so is B
// (column-major B): the TN product. Ka is the source C (f32, row-major; it is
// symmetric, so its layout does not matter); D is not stored.
//
//===----------------------------------------------------------------------===//

#include "Sm90NormGemm.cuh"

namespace dprt::cuda::sm90 {

namespace {

using namespace detail;

using TimesKa = fusion::Sm90EVT<
    fusion::Sm90Compute<cutlass::multiplies, float, float, kRound>,
    fusion::Sm90AccFetch, fusion::Sm90SrcFetch<float>>;
using DotSums = fusion::Sm90EVT<PartialColumnSums<cutlass::plus>, TimesKa>;
using Product =
    NormGemm<cutlass::layout::RowMajor, cutlass::layout::ColumnMajor, float,
             cutlass::layout::RowMajor, void, cutlass::layout::RowMajor,
             DotSums>;
using Gemm = Product::Gemm;

typename Gemm::Arguments arguments(const GramProblem &p, float *partials,
                                   int smCount) {
  const int T = int(p.tokens), K = int(p.dim), L = int(p.batch);
  // Packed strides: A (m, k, l) and B (n, k, l) at m K + k + l T K, C
  // (m, n, l) at m T + n + l T T; the unit ones are static.
  typename Product::Kernel::StrideA strideA{};
  get<0>(strideA) = K;
  get<2>(strideA) = int64_t(T) * K;
  typename Product::Kernel::StrideB strideB{};
  get<0>(strideB) = K;
  get<2>(strideB) = int64_t(T) * K;
  typename Product::Kernel::StrideC strideC{};
  get<0>(strideC) = T;
  get<2>(strideC) = int64_t(T) * T;
  typename Product::Kernel::StrideD strideD{};
  const auto *dy = static_cast<const Element *>(p.dy);
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kBatched,
                                {T, T, K, L},
                                {dy, strideA, dy, strideB},
                                {{}, p.ka, strideC, nullptr, strideD},
                                hardware(smCount)};
  // DotSums(TimesKa(acc, C)).
  args.epilogue.thread = {{     // TimesKa
                           {},  // acc
                           {},  // C
                           {}}, // multiplies
                          {partials, 0.0f, {}}};
  return args;
}

} // namespace

bool takesGram(int64_t batch, int64_t tokens, int64_t dim) {
  return positiveInts({batch, tokens, dim}) &&
         tokens % kAlignment<float> == 0 && dim % kAlignment<Element> == 0;
}

int64_t gramPartials(const GramProblem &p) {
  return partialColumns(p.tokens, p.tokens);
}

size_t gramNormWorkspace(const GramProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, nullptr, smCount));
}

RunStatus runGramNorm(const GramProblem &p, float *partials, void *workspace,
                      int smCount, cudaStream_t stream) {
  return launch<Gemm>(arguments(p, partials, smCount), workspace, stream);
}

} // namespace dprt::cuda::sm90
