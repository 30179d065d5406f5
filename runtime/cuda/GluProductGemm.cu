//===- GluProductGemm.cu - The GLU's backward in its product's epilogue ---===//
//
// GluProductGemm.h's product: M = rows, N = width, K = depth, L = 1, with A
// = dz row-major (K-major) and B = w row-major (N-major), on the mainloop of
// the norm products (Sm90NormGemm.cuh: ping-pong TMA + wgmma, 64 x 256
// tiles, clusters of 2 along M), so that one consumer warp group's epilogue
// runs while the other's mainloop does. No D: the epilogue node reads gate
// and up and stores dgate, dup and y itself, 16 bytes a lane (visit), with
// the tiles in strips of 8 along M. SiLU only: with the activation a
// run-time choice the epilogue held all four activations' code, 36,192
// instructions against the MXFP8 rows' 2,288, and the product took 1740 us
// at 8192 x 8192 x 2048 with no load or store in the epilogue at all
// (cuBLASLt's product and the GLU's pass: 600). Now 593 us against 605 to
// 619 (dpc-gpu-check's timings, one H200).
//
//===----------------------------------------------------------------------===//

#include "GluProductGemm.h"

#include "Activations.cuh"
#include "Sm90NormGemm.cuh"

#include <cuda_bf16.h>

namespace dprt::cuda::sm90 {

namespace {

using namespace detail;

/// Columns of an epilogue subtile.
constexpr int kEpilogueN = 64;

/// The epilogue node (a visitor with one child, the accumulators).
struct GluBackwardRows {
  struct SharedStorage {};
  struct Arguments {
    const __nv_bfloat16 *gate = nullptr, *up = nullptr;
    __nv_bfloat16 *dgate = nullptr, *dup = nullptr, *y = nullptr;
  };
  /// With a void D (this node stores its results itself), CUTLASS names the
  /// types of D's unused shared memory after the root's ElementAux.
  using ElementAux = float;
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params
  to_underlying_arguments(ProblemShape const &, Arguments const &args, void *) {
    return args;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const &shape, Arguments const &) {
    return get<1>(shape) % 8 == 0;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const &, Arguments const &) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status
  initialize_workspace(ProblemShape const &, Arguments const &, void *,
                       cudaStream_t, cutlass::CudaHostAdapter * = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE GluBackwardRows() {}
  CUTLASS_HOST_DEVICE GluBackwardRows(Params const &params,
                                      SharedStorage const &)
      : params(params) {}

  Params params;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }

  template <class... Args>
  CUTLASS_DEVICE auto
  get_producer_load_callbacks(fusion::ProducerLoadArgs<Args...> const &) {
    return fusion::EmptyProducerLoadCallbacks{};
  }

  struct ConsumerStoreCallbacks : fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(Params const &params, int m, int n,
                                          int tileM, int tileN, int threadIdx)
        : params(params), m(m), n(n), tileN(tileN), thread(threadIdx) {
      row0 = tileM * int(kTileM) + 16 * ((threadIdx / 32) % 4) +
             (threadIdx & 31) / 4;
    }

    Params const &params;
    int m, n, tileN, thread;
    int row0 = 0; ///< slot 0's row; slot 1's is 8 below

    /// Eight bf16 (16 bytes) of gate or up from `at`, or zeros past the
    /// matrix; read-only here (ld.global.nc).
    static CUTLASS_DEVICE uint4 load8(const __nv_bfloat16 *base, int64_t at,
                                      bool inside) {
      return inside ? __ldg(reinterpret_cast<const uint4 *>(base + at))
                    : make_uint4(0, 0, 0, 0);
    }

    /// The quad's 4 x 4 transpose of 32-bit words (lane j holds row j, w[0]
    /// to w[3]; afterwards column j): two butterfly stages of two shuffles,
    /// PerSampleGradMxGemm.cu's.
    static CUTLASS_DEVICE void transposeQuad(uint32_t (&w)[4], int quad) {
      const bool b1 = quad & 2, b0 = quad & 1;
      uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, b1 ? w[0] : w[2], 2);
      uint32_t r1 = __shfl_xor_sync(0xFFFFFFFFu, b1 ? w[1] : w[3], 2);
      const uint32_t n0 = b1 ? r0 : w[0], n1 = b1 ? r1 : w[1],
                     n2 = b1 ? w[2] : r0, n3 = b1 ? w[3] : r1;
      r0 = __shfl_xor_sync(0xFFFFFFFFu, b0 ? n0 : n1, 1);
      r1 = __shfl_xor_sync(0xFFFFFFFFu, b0 ? n2 : n3, 1);
      w[0] = b0 ? r0 : n0;
      w[1] = b0 ? n1 : r0;
      w[2] = b0 ? r1 : n2;
      w[3] = b0 ? n3 : r1;
    }

    /// The subtile's 32 values of this thread: element e is column bit e %
    /// 2, slot (e / 2) % 2 (row row0 + 8 slot), group e / 4 (8 columns).
    /// Each slot's dy, rounded to bf16 pairs (the value the two-pass path
    /// hands over), is transposed within the quad so that lane q holds
    /// groups q and q + 4 of its row whole: then gate, up, dgate, dup and y
    /// move 16 bytes a lane, a warp's access covering 8 rows of 64
    /// contiguous bytes (a pair a lane at a time covered 8 rows of 16, and
    /// the product took 728 us against the two passes' 609 at 8192 x 8192 x
    /// 2048).
    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementInput, FragmentSize>
    visit(cutlass::Array<ElementAccumulator, FragmentSize> const &, int, int,
          int epiN, cutlass::Array<ElementInput, FragmentSize> const &input) {
      static_assert(FragmentSize == 2 * kEpilogueN / 4,
                    "a thread holds 2 rows of 2 columns in each group of 8");
      const int quad = thread & 3;
      const int base = tileN * int(kTileN) + epiN * kEpilogueN;
      // Lane q's two runs of 8 columns: groups q and q + 4.
      const int cols[2] = {base + 8 * quad, base + 8 * (quad + 4)};
      int64_t at[2][2];
      bool inside[2][2];
      uint4 g[2][2], u[2][2];
      // Every load first, all eight in flight together.
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s)
        CUTLASS_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * s;
        inside[s][h] = row < m && cols[h] < n;
        at[s][h] = int64_t(row) * n + cols[h];
        g[s][h] = load8(params.gate, at[s][h], inside[s][h]);
        u[s][h] = load8(params.up, at[s][h], inside[s][h]);
      }
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s) {
        // words[h][j]: this lane's pair of group j + 4 h, slot s.
        uint32_t words[2][4];
        CUTLASS_PRAGMA_UNROLL
        for (int grp = 0; grp < 8; ++grp) {
          const int e = 4 * grp + 2 * s;
          const __nv_bfloat162 pair =
              __floats2bfloat162_rn(float(input[e]), float(input[e + 1]));
          words[grp / 4][grp % 4] = *reinterpret_cast<const uint32_t *>(&pair);
        }
        CUTLASS_PRAGMA_UNROLL
        for (int h = 0; h < 2; ++h) {
          // Afterwards words[h][j] is lane j's pair of group quad + 4 h:
          // columns 2 j, 2 j + 1 of the run.
          transposeQuad(words[h], quad);
          if (!inside[s][h])
            continue;
          const uint32_t *gw = reinterpret_cast<const uint32_t *>(&g[s][h]);
          const uint32_t *uw = reinterpret_cast<const uint32_t *>(&u[s][h]);
          uint32_t dgw[4], duw[4], yw[4];
          CUTLASS_PRAGMA_UNROLL
          for (int j = 0; j < 4; ++j) {
            const float2 d = __bfloat1622float2(
                *reinterpret_cast<const __nv_bfloat162 *>(&words[h][j]));
            const float2 gv = __bfloat1622float2(
                *reinterpret_cast<const __nv_bfloat162 *>(&gw[j]));
            const float2 uv = __bfloat1622float2(
                *reinterpret_cast<const __nv_bfloat162 *>(&uw[j]));
            const float ds[2] = {d.x, d.y}, gs[2] = {gv.x, gv.y},
                        us[2] = {uv.x, uv.y};
            float dg[2], du[2], out[2];
            CUTLASS_PRAGMA_UNROLL
            for (int k = 0; k < 2; ++k) {
              float a, da;
              gluActivationAndDerivative(Activation::Silu, gs[k], a, da);
              dg[k] = ds[k] * us[k] * da;
              du[k] = ds[k] * a;
              out[k] = a * us[k];
            }
            const __nv_bfloat162 dgp = __floats2bfloat162_rn(dg[0], dg[1]),
                                 dup = __floats2bfloat162_rn(du[0], du[1]),
                                 yp = __floats2bfloat162_rn(out[0], out[1]);
            dgw[j] = *reinterpret_cast<const uint32_t *>(&dgp);
            duw[j] = *reinterpret_cast<const uint32_t *>(&dup);
            yw[j] = *reinterpret_cast<const uint32_t *>(&yp);
          }
          if (params.dgate)
            *reinterpret_cast<uint4 *>(params.dgate + at[s][h]) =
                make_uint4(dgw[0], dgw[1], dgw[2], dgw[3]);
          if (params.dup)
            *reinterpret_cast<uint4 *>(params.dup + at[s][h]) =
                make_uint4(duw[0], duw[1], duw[2], duw[3]);
          if (params.y)
            *reinterpret_cast<uint4 *>(params.y + at[s][h]) =
                make_uint4(yw[0], yw[1], yw[2], yw[3]);
        }
      }
      return input;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto
  get_consumer_store_callbacks(fusion::ConsumerStoreArgs<Args...> const &args) {
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [tm, tn, tk, tl] = args.tile_coord_mnkl;
    return ConsumerStoreCallbacks(params, int(M), int(N), int(tm), int(tn),
                                  args.thread_idx);
  }
};

using Store = fusion::Sm90EVT<GluBackwardRows, fusion::Sm90AccFetch>;
using Product =
    NormGemm<cutlass::layout::RowMajor, cutlass::layout::RowMajor, void,
             cutlass::layout::RowMajor, void, cutlass::layout::RowMajor, Store,
             Shape<_64, Int<kEpilogueN>>>;
using Gemm = Product::Gemm;

typename Gemm::Arguments arguments(const GluProductProblem &p, int smCount) {
  const int M = int(p.rows), N = int(p.width), K = int(p.depth);
  // A = dz (m, k) at m K + k; B = w (n, k) at n + k N.
  typename Product::Kernel::StrideA strideA{};
  typename Product::Kernel::StrideB strideB{};
  get<0>(strideA) = K;
  get<2>(strideA) = int64_t(M) * K;
  get<1>(strideB) = N;
  get<2>(strideB) = int64_t(N) * K;
  typename Product::Kernel::StrideD strideD{};
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {M, N, K, 1},
                                {static_cast<const Element *>(p.dz), strideA,
                                 static_cast<const Element *>(p.w), strideB},
                                {{}, nullptr, strideD, nullptr, strideD},
                                hardware(smCount)};
  auto bf16 = [](const void *v) {
    return static_cast<const __nv_bfloat16 *>(v);
  };
  auto bf16Out = [](void *v) { return static_cast<__nv_bfloat16 *>(v); };
  // Tiles in strips of 8 along M: the epilogue's 640 MiB of traffic shares
  // L2 with the operands, and without strips the product took 661 us
  // against 593 with them (4: 597; along N 646 and 596) at 8192 x 8192 x
  // 2048 on one H200, the two passes 605 to 619.
  args.scheduler.max_swizzle_size = 8;
  args.scheduler.raster_order = decltype(args.scheduler.raster_order)::AlongM;
  // Store(acc): the child's arguments, then the node's.
  args.epilogue.thread = {{},
                          {bf16(p.gate), bf16(p.up), bf16Out(p.dgate),
                           bf16Out(p.dup), bf16Out(p.y)}};
  return args;
}

} // namespace

bool takesGluProduct(Activation act, int64_t rows, int64_t width,
                     int64_t depth) {
  return act == Activation::Silu && positiveInts({rows, width, depth}) &&
         width % kAlignment<Element> == 0 && depth % kAlignment<Element> == 0;
}

size_t gluProductWorkspace(const GluProductProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, smCount));
}

RunStatus runGluProduct(const GluProductProblem &p, void *workspace,
                        int smCount, cudaStream_t stream) {
  return launch<Gemm>(arguments(p, smCount), workspace, stream);
}

} // namespace dprt::cuda::sm90
