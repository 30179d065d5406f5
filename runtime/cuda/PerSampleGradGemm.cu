//===- PerSampleGradGemm.cu - Per-sample gradients with their norms -------===//
//
// CUTLASS 3 terms: M = out, N = in, K = tokens, L = batch. A = dy_b^T is
// M-major (column-major), B = x_b is N-major (row-major B), D = g[b] is
// row-major; all packed. The mainloop is the warp-specialized ping-pong
// TMA + wgmma kernel the collective builder makes for bf16 with f32
// accumulation, 64 x 256 tiles, clusters of 2 along M: while one consumer
// warp group runs its tile's epilogue the other runs its mainloop, so the
// squares cost nothing measurable (H200, B 8, T 1024: 98.2 against 97.1 us
// at 2048 x 2048, 360.0 against 359.9 us at 2048 x 8192). The cooperative
// kernel with 128 x 256 tiles lost 6 to 8 % to the squares and was 2 to 5 %
// slower than this one. The epilogue is a visitor tree over the
// accumulators:
//
//   acc -> round to bf16 and back -> row reduction (sum of squares over the
//   tile's M rows) -> D (bf16, unchanged by the reduction)
//
// The row reduction is not final: each CTA stores its per-column sums into a
// compact (M tiles, N rounded up to the tile, L) f32 buffer, which the
// caller sums per sample in a fixed order. No atomics, no tile counters.
//
//===----------------------------------------------------------------------===//

#include "PerSampleGradGemm.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/numeric_conversion.h"

#include <climits>

namespace dprt::cuda::sm90 {

namespace {

using namespace cute;

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

/// The row reduction's per-thread step: sum + v^2 (its shuffle and shared-
/// memory steps add sums with cutlass::plus).
template <class T> struct AddSquare {
  CUTLASS_HOST_DEVICE T operator()(T const &sum, T const &v) const {
    return sum + v * v;
  }
};

using Element = cutlass::bfloat16_t;
using TileShape = Shape<_64, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
constexpr int kAlignment = 16 / sizeof(Element);

namespace fusion = cutlass::epilogue::fusion;
using Rounded =
    fusion::Sm90EVT<fusion::Sm90Compute<RoundThroughBf16, float, float, kRound>,
                    fusion::Sm90AccFetch>;
using SquareSums = fusion::Sm90EVT<
    fusion::Sm90RowReduction<AddSquare, cutlass::plus, cutlass::plus,
                             /*Stages=*/0, TileShape, float, float, kRound,
                             Stride<_0, _1, _0>, /*Alignment=*/4,
                             /*EnableNullptr=*/false,
                             /*FinalReduction=*/false>,
    Rounded>;
using Store =
    fusion::Sm90EVT<fusion::Sm90Compute<cutlass::epilogue::thread::Identity,
                                        Element, float, kRound>,
                    SquareSums>;

using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape,
    ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto, float, float,
    void, cutlass::layout::RowMajor, kAlignment, Element,
    cutlass::layout::RowMajor, kAlignment,
    cutlass::epilogue::TmaWarpSpecialized, Store>::CollectiveOp;

using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element,
    cutlass::layout::ColumnMajor, kAlignment, Element,
    cutlass::layout::RowMajor, kAlignment, float, TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;

using Kernel =
    cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop,
                                         Epilogue,
                                         cutlass::gemm::PersistentScheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

constexpr int64_t kTileM = 64, kTileN = 256;

typename Gemm::Arguments arguments(const PerSampleGradProblem &p,
                                   float *partials, int smCount) {
  const int M = int(p.out), N = int(p.in), K = int(p.tokens), L = int(p.batch);
  // Packed strides: A (m, k, l) at m + k M + l M K, B (n, k, l) at
  // n + k N + l N K, D (m, n, l) at m N + n + l M N; the unit ones are static.
  typename Kernel::StrideA strideA{};
  get<1>(strideA) = M;
  get<2>(strideA) = int64_t(M) * K;
  typename Kernel::StrideB strideB{};
  get<1>(strideB) = N;
  get<2>(strideB) = int64_t(N) * K;
  typename Kernel::StrideD strideD{};
  get<0>(strideD) = N;
  get<2>(strideD) = int64_t(M) * N;
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0; // only read when sm_count is 0
  hw.sm_count = smCount;
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kBatched,
      {M, N, K, L},
      {static_cast<const Element *>(p.dy), strideA,
       static_cast<const Element *>(p.x), strideB},
      {{}, nullptr, strideD, static_cast<Element *>(p.g), strideD},
      hw};
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

bool takesShape(int64_t batch, int64_t tokens, int64_t in, int64_t out) {
  return batch > 0 && tokens > 0 && in > 0 && out > 0 && batch <= INT_MAX &&
         tokens <= INT_MAX && in <= INT_MAX && out <= INT_MAX &&
         in % kAlignment == 0 && out % kAlignment == 0;
}

int64_t partialsPerSample(const PerSampleGradProblem &p) {
  return (p.out + kTileM - 1) / kTileM * ((p.in + kTileN - 1) / kTileN) *
         kTileN;
}

size_t workspaceBytes(const PerSampleGradProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, nullptr, smCount));
}

RunStatus run(const PerSampleGradProblem &p, float *partials, void *workspace,
              int smCount, cudaStream_t stream) {
  typename Gemm::Arguments args = arguments(p, partials, smCount);
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return RunStatus::Refused;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess ||
      gemm.run(stream) != cutlass::Status::kSuccess)
    return RunStatus::Failed;
  return RunStatus::Ran;
}

} // namespace dprt::cuda::sm90
