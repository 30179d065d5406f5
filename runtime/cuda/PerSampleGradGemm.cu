//===- PerSampleGradGemm.cu - Per-sample gradients with their norms -------===//
//
// The materialized method's product (NormGemms.h). CUTLASS 3 terms: M = out,
// N = in, K = tokens, L = batch. A = dy_b^T is M-major (column-major), B =
// x_b is N-major (row-major B), D = g[b] is row-major; all packed. The
// epilogue is a visitor tree over the accumulators:
//
//   acc -> round to bf16 and back -> row reduction (sum of squares over the
//   tile's M rows) -> D (bf16, unchanged by the reduction)
//
// so the squares are those of the values rows_weighted_sum later adds.
// H200, B 8, T 1024: 98.2 against 97.1 us at 2048 x 2048, 360.0 against
// 359.9 us at 2048 x 8192, with and without the squares; the cooperative
// kernel with 128 x 256 tiles lost 6 to 8 % to them and was 2 to 5 % slower
// than the ping-pong one (Sm90NormGemm.cuh).
//
//===----------------------------------------------------------------------===//

#include "Sm90NormGemm.cuh"

#include "cutlass/numeric_conversion.h"

namespace dprt::cuda::sm90 {

namespace {

using namespace detail;

/// v rounded to bf16 (nearest even) and back: the value D will hold.
template <class T> struct RoundThroughBf16 {
  CUTLASS_HOST_DEVICE T operator()(T const &v) const {
    return T(cutlass::bfloat16_t(v));
  }
};
template <int N> struct RoundThroughBf16<cutlass::Array<float, N>> {
  CUTLASS_HOST_DEVICE cutlass::Array<float, N>
  operator()(cutlass::Array<float, N> const &v) const {
    cutlass::NumericArrayConverter<cutlass::bfloat16_t, float, N> down;
    cutlass::NumericArrayConverter<float, cutlass::bfloat16_t, N> up;
    return up(down(v));
  }
};

using Rounded =
    fusion::Sm90EVT<fusion::Sm90Compute<RoundThroughBf16, float, float, kRound>,
                    fusion::Sm90AccFetch>;
using SquareSums = fusion::Sm90EVT<PartialColumnSums<AddSquare>, Rounded>;
using Store =
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::Identity,
                                        Element, float, kRound>,
                    SquareSums>;
using Product =
    NormGemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, void,
             cutlass::layout::RowMajor, Element, cutlass::layout::RowMajor,
             Store>;
using Gemm = Product::Gemm;

typename Gemm::Arguments arguments(const LinearProblem &p, void *g,
                                   float *partials, int smCount) {
  const int M = int(p.out), N = int(p.in), K = int(p.tokens), L = int(p.batch);
  typename Product::Kernel::StrideA strideA{};
  typename Product::Kernel::StrideB strideB{};
  linearStrides(p, strideA, strideB);
  // D (m, n, l) at m N + n + l M N.
  typename Product::Kernel::StrideD strideD{};
  get<0>(strideD) = N;
  get<2>(strideD) = int64_t(M) * N;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kBatched,
      {M, N, K, L},
      {static_cast<const Element *>(p.dy), strideA,
       static_cast<const Element *>(p.x), strideB},
      {{}, nullptr, strideD, static_cast<Element *>(g), strideD},
      hardware(smCount)};
  // Store(SquareSums(Rounded(acc))): each node's arguments are its
  // children's, then its own.
  args.epilogue.thread = {{     // SquareSums
                           {    // Rounded
                            {}, // acc
                            {}},
                           {partials, 0.0f, {}}},
                          {}};
  return args;
}

} // namespace

bool takesLinear(int64_t batch, int64_t tokens, int64_t in, int64_t out) {
  return positiveInts({batch, tokens, in, out}) &&
         in % kAlignment<Element> == 0 && out % kAlignment<Element> == 0;
}

int64_t linearPartials(const LinearProblem &p) {
  return partialColumns(p.out, p.in);
}

size_t perSampleGradWorkspace(const LinearProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, nullptr, nullptr, smCount));
}

RunStatus runPerSampleGrad(const LinearProblem &p, void *g, float *partials,
                           void *workspace, int smCount, cudaStream_t stream) {
  return launch<Gemm>(arguments(p, g, partials, smCount), workspace, stream);
}

} // namespace dprt::cuda::sm90
