//===- Sm90NormGemm.cuh - CUTLASS pieces of the fused norm products -*- C++
//-*-//
//
// Internal to the three sm_90a norm products (NormGemms.h): the per-sample
// gradient with its norm (PerSampleGradGemm.cu), the direct norm
// (DirectNormGemm.cu) and the Gram norm (GramNormGemm.cu). Each is one bf16
// product with f32 accumulation whose epilogue is a visitor tree ending in a
// row reduction: every CTA stores the sums over its tile's 64 rows, one f32
// per column, into a compact (M tiles, N rounded up to the tile, L) buffer,
// which the caller adds up per sample in a fixed order (no atomics, no tile
// counters: the norms are deterministic). They share the mainloop: the
// warp-specialized ping-pong TMA + wgmma kernel with 64 x 256 tiles and
// clusters of 2 along M, in which one consumer warp group runs its tile's
// epilogue while the other runs its mainloop, so that the epilogue's work
// costs nothing measurable (PerSampleGradGemm.cu has the timings).
//
// Included only by those files, which are built for sm_90a alone.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_SM90NORMGEMM_CUH
#define DPRT_CUDA_SM90NORMGEMM_CUH

#include "NormGemms.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include <climits>
#include <initializer_list>

namespace dprt::cuda::sm90::detail {

using namespace cute;
namespace fusion = cutlass::epilogue::fusion;

using Element = cutlass::bfloat16_t;
using TileShape = Shape<_64, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;
constexpr int64_t kTileM = 64, kTileN = 256;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;
/// Elements of 16 bytes: TMA's alignment of every operand (any for an
/// operand that is void, i.e. absent).
template <class T> constexpr int alignmentOf() {
  if constexpr (cute::is_void_v<T>)
    return 8;
  else
    return 16 / sizeof(T);
}
template <class T> constexpr int kAlignment = alignmentOf<T>();

/// The row reduction's per-thread step for sums of squares: sum + v^2 (its
/// shuffle and shared-memory steps add sums with cutlass::plus).
template <class T> struct AddSquare {
  CUTLASS_HOST_DEVICE T operator()(T const &sum, T const &v) const {
    return sum + v * v;
  }
};

/// Sums over the tile's M rows, per column, with `Step` as the per-thread
/// step, stored unreduced across tiles (FinalReduction = false) into the
/// compact partial buffer.
template <template <class> class Step>
struct PartialColumnSums
    : fusion::Sm90RowReduction<Step, cutlass::plus, cutlass::plus,
                               /*Stages=*/0, TileShape, float, float, kRound,
                               Stride<_0, _1, _0>, /*Alignment=*/4,
                               /*EnableNullptr=*/false,
                               /*FinalReduction=*/false> {
  using fusion::Sm90RowReduction<
      Step, cutlass::plus, cutlass::plus, 0, TileShape, float, float, kRound,
      Stride<_0, _1, _0>, 4, false, false>::Sm90RowReduction;
  /// With a void D (nothing stored), CUTLASS names the types of D's unused
  /// shared memory after the root node's ElementAux (get_element_aux_t),
  /// which must not be void; none is allocated.
  using ElementAux = float;
};

/// The kernel: bf16 A and B in the given layouts, f32 accumulators, the
/// epilogue tree `Tree` with source C (void: none) and destination D (void:
/// nothing stored), over epilogue subtiles of `EpilogueTile`.
template <class LayoutA, class LayoutB, class ElementC, class LayoutC,
          class ElementD, class LayoutD, class Tree,
          class EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto>
struct NormGemm {
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape,
      ClusterShape, EpilogueTile, float,
      float, ElementC, LayoutC, kAlignment<ElementC>, ElementD, LayoutD,
      kAlignment<ElementD>, cutlass::epilogue::TmaWarpSpecialized,
      Tree>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA,
      kAlignment<Element>, Element, LayoutB, kAlignment<Element>, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedPingpong>::CollectiveOp;
  using Kernel =
      cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop,
                                           Epilogue,
                                           cutlass::gemm::PersistentScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

/// Hardware information for the persistent scheduler: `smCount` SMs.
inline cutlass::KernelHardwareInfo hardware(int smCount) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0; // only read when sm_count is 0
  hw.sm_count = smCount;
  return hw;
}

/// Compact partials one sample of an M x N product leaves.
inline int64_t partialColumns(int64_t m, int64_t n) {
  return (m + kTileM - 1) / kTileM * ((n + kTileN - 1) / kTileN) * kTileN;
}

/// Whether every size is positive and within int.
inline bool positiveInts(std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes)
    if (s <= 0 || s > INT_MAX)
      return false;
  return true;
}

/// The linear problems' packed operand strides (M = out, N = in, K =
/// tokens, L = batch): A = dy_b^T (m, k, l) at m + k M + l M K, B = x_b
/// (n, k, l) at n + k N + l N K; the unit ones are static.
template <class StrideA, class StrideB>
void linearStrides(const LinearProblem &p, StrideA &a, StrideB &b) {
  get<1>(a) = p.out;
  get<2>(a) = p.out * p.tokens;
  get<1>(b) = p.in;
  get<2>(b) = p.in * p.tokens;
}

/// can_implement, initialize and run, as a RunStatus.
template <class Gemm>
RunStatus launch(typename Gemm::Arguments const &args, void *workspace,
                 cudaStream_t stream) {
  Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess)
    return RunStatus::Refused;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess ||
      gemm.run(stream) != cutlass::Status::kSuccess)
    return RunStatus::Failed;
  return RunStatus::Ran;
}

} // namespace dprt::cuda::sm90::detail

#endif // DPRT_CUDA_SM90NORMGEMM_CUH
