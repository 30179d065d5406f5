//===- PerSampleGradMxGemm.cu - Per-sample gradients in MXFP8 -------------===//
//
// The materialized method's product with MXFP8 rows (types.h): the
// mainloop of PerSampleGradGemm.cu (M = out, N = in, K = tokens, L = batch)
// with no D for CUTLASS to store. The epilogue is one node, MxQuantizeRows,
// over 64 x 64 subtiles, whose 32 values a thread arrive in one visit call:
//
// - a quad of lanes holds two rows (8 apart) of the warp's 16 and, between
//   its four lanes, every column of the subtile: two shuffles give each
//   block of 32 columns its largest magnitude (NaN-propagating), hence its
//   power-of-two scale;
// - each pair of neighbouring values is rounded to e4m3 under its block's
//   scale in one cvt.rn.satfinite, and read back (the value the rows hold)
//   for the sum of squares;
// - a quad transpose gives lane q the 8 bytes of its block's column group
//   q, stored at once: a warp's store covers 8 rows of 32 contiguous bytes
//   (sample l's row of the MXFP8 buffer, types.h, is its M N elements then
//   its M N / 32 scales, at l (M N + M N / 32): M a multiple of 8 and N of
//   32 keep every 8-byte store aligned). Each lane packs a group's pairs of
//   both its rows into one 32-bit word, and two butterfly stages (four
//   32-bit shuffles a block) transpose the quad's 4 x 4 words. The first
//   transpose moved each pair in a 16-bit shuffle of its own, with 64-bit
//   shifts by lane-dependent amounts: on one H200 at B8 T1024 a layer's
//   five products took 1858 us with it and 1810 with the butterfly, the
//   same bytes and partials (docs/PERFORMANCE.md);
// - at the end of a tile each row's 8 scale bytes are one store, and each
//   warp's sum of squares goes to a partial of its own (4 f32 a 64 x 256
//   tile), added up per sample in a fixed order by the caller (the norms
//   are deterministic).
//
// The first form stored D through the collective (e4m3 D, values written
// back in `reduce`) and kept its quantization state in arrays of the
// callbacks object: a 128-byte local-memory frame, and on one H100 at
// B8 T1024 the 2048 x 2048 product took 166.9 us against 136.6 for bf16
// rows' fused kernel (8192 x 2048: 706.2 against 462.8).
//
//===----------------------------------------------------------------------===//

#include "Mxfp8.cuh"
#include "Sm90NormGemm.cuh"

namespace dprt::cuda::sm90 {

namespace {

using namespace detail;

constexpr int kWarpsPerTile = 4;
/// Columns of an epilogue subtile: two blocks of 32 a row.
constexpr int kEpilogueN = 64;

/// The epilogue node (a visitor with one child, the accumulators).
struct MxQuantizeRows {
  struct SharedStorage {};
  struct Arguments {
    /// L rows of M N elements (types.h): each its e4m3 bytes [M, N], then
    /// its e8m0 scales [M, N / 32].
    uint8_t *rows = nullptr;
    float *partials = nullptr; ///< [L, tiles M, tiles N, 4]
  };
  /// With a void D (this node stores the rows itself), CUTLASS names the
  /// types of D's unused shared memory after the root's ElementAux.
  using ElementAux = float;
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const &,
                                                  Arguments const &args,
                                                  void *) {
    return args;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const &shape, Arguments const &) {
    return get<1>(shape) % int(kMxBlock) == 0;
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

  CUTLASS_HOST_DEVICE MxQuantizeRows() {}
  CUTLASS_HOST_DEVICE MxQuantizeRows(Params const &params,
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
                                          int tileM, int tileN, int l,
                                          int threadIdx)
        : params(params), m(m), n(n), tileM(tileM), tileN(tileN), l(l),
          thread(threadIdx) {
      // The thread's two rows (wgmma layout, see reduce).
      row0 = tileM * int(kTileM) + 16 * ((threadIdx / 32) % 4) +
             (threadIdx & 31) / 4;
    }

    Params const &params;
    int m, n, tileM, tileN, l, thread;
    float squares = 0.0f; ///< this thread's share of the tile's norm
    /// Each slot's row and its scale bytes over the tile's 8 blocks of 32
    /// columns (byte k: block k), stored at the end of the tile.
    int row0 = 0;                            ///< slot 0's row; slot 1's is 8 below
    uint64_t scaleBytes0 = 0, scaleBytes1 = 0; ///< slots 0 and 1

    /// max that keeps a NaN (PTX max.NaN): a block's amax is NaN if any of
    /// its values is, infinite if one is infinite.
    static CUTLASS_DEVICE float maxNaN(float a, float b) {
      float r;
      asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
      return r;
    }

    /// Rounds (x0, y0) and (x1, y1) to e4m3 (cvt.rn.satfinite): `word`
    /// holds x0, y0, x1, y1 from its low byte up, h0 and h1 the two pairs'
    /// values as f16x2 (x in the low half), which hold every e4m3 exactly.
    /// In PTX so that the pairs, 16-bit registers, are packed into `word` by
    /// the conversion's merge, with none of the masks of upper bits that the
    /// intrinsics' 16-bit results cost (the compiler cannot see those bits
    /// are zero).
    static CUTLASS_DEVICE void quantizeSlots(float x0, float y0, float x1,
                                             float y1, uint32_t &word,
                                             uint32_t &h0, uint32_t &h1) {
      asm("{\n"
          "  .reg .b16 lo, hi;\n"
          "  cvt.rn.satfinite.e4m3x2.f32 lo, %4, %3;\n"
          "  cvt.rn.satfinite.e4m3x2.f32 hi, %6, %5;\n"
          "  mov.b32 %0, {lo, hi};\n"
          "  cvt.rn.f16x2.e4m3x2 %1, lo;\n"
          "  cvt.rn.f16x2.e4m3x2 %2, hi;\n"
          "}"
          : "=r"(word), "=r"(h0), "=r"(h1)
          : "f"(x0), "f"(y0), "f"(x1), "f"(y1));
    }

    /// The whole subtile's values of this thread arrive in one call (the
    /// epilogue's fragment is the subtile's 32), so that the quantization
    /// works on registers.
    template <class ElementAccumulator, class ElementInput, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementInput, FragmentSize>
    visit(cutlass::Array<ElementAccumulator, FragmentSize> const &, int, int,
          int epiN, cutlass::Array<ElementInput, FragmentSize> const &input) {
      constexpr int kCount = FragmentSize;
      // Blocks a row of the subtile: 64 / 32 = 2.
      constexpr int kBlocks = kEpilogueN / int(kMxBlock);
      // The wgmma accumulator layout: lane t of warp w holds rows 16 w +
      // t / 4 (slot 0) and 8 below (slot 1), columns 2 (t % 4) + {0, 1} of
      // each group of 8; element e is column bit e % 2, slot (e / 2) % 2,
      // group e / 4, so block (e / 16) % 2 of the subtile. Compile-time
      // indices keep every array here in registers. gpu-check compares
      // every element, scale and norm with the CPU's quantization.
      static_assert(kCount == 2 * kEpilogueN / 4,
                    "a thread holds 2 rows of 2 columns in each group of 8");
      auto at = [&](int e) -> float { return float(input[e]); };
      const int lane = thread & 31, quad = lane & 3;
      float amax[2][kBlocks] = {};
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kCount; ++e) {
        float &a = amax[(e / 2) & 1][(e / 16) % kBlocks];
        a = maxNaN(a, fabsf(at(e)));
      }
      // The quad's four lanes hold the block's 32 columns between them. A
      // block with an infinity or NaN holds NaN elements (types.h): its
      // inverse scale is NaN, so that each product is NaN, which cvt
      // stores as e4m3's NaN (0x7F), and its sum of squares is NaN too,
      // with no select for each value. The scale byte comes without
      // branches (mxScaleByte). Without the per-value selects, the slots'
      // shifts and masks and the exponent's branches the kernel's SASS went
      // from 2584 to 2288 instructions; on one H200 three of the four
      // products of the 1.1B model at B8 T1024 took 1.6 to 1.8 % less time
      // (the fourth, qkv, 335 us against the old kernel's 317 in that run
      // and 335 to 339 in earlier ones; docs/PERFORMANCE.md).
      float scale[2][kBlocks], inverse[2][kBlocks];
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s)
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBlocks; ++k) {
          float &a = amax[s][k];
          a = maxNaN(a, __shfl_xor_sync(0xFFFFFFFFu, a, 1));
          a = maxNaN(a, __shfl_xor_sync(0xFFFFFFFFu, a, 2));
          const bool finite = a <= 3.4e38f; // false for NaN and infinity
          // 2^E and 2^-E from the scale byte E + 127 (1 to 247); a
          // non-finite block's scale is whatever its byte gives.
          const uint32_t byte = mxScaleByte(a);
          scale[s][k] = __uint_as_float(byte << 23);
          inverse[s][k] =
              finite ? mxInverseScale(byte) : __uint_as_float(0x7FFFFFFFu);
          (s == 0 ? scaleBytes0 : scaleBytes1) |=
              uint64_t(finite ? byte : 0xFFu) << (8 * (epiN * kBlocks + k));
        }
      // Pairs of neighbouring columns: one conversion each way for two
      // values; words[k][g] holds group g's pair of block k, slot 0's in
      // its low 16 bits and slot 1's in its high 16.
      float held2[2][kBlocks] = {};
      uint32_t words[kBlocks][4];
      CUTLASS_PRAGMA_UNROLL
      for (int e = 0; e < kCount; e += 4) {
        const int k = (e / 16) % kBlocks, g = (e / 4) % 4;
        uint32_t h[2];
        quantizeSlots(at(e) * inverse[0][k], at(e + 1) * inverse[0][k],
                      at(e + 2) * inverse[1][k], at(e + 3) * inverse[1][k],
                      words[k][g], h[0], h[1]);
        CUTLASS_PRAGMA_UNROLL
        for (int s = 0; s < 2; ++s) {
          const float2 v = __half22float2(*reinterpret_cast<__half2 *>(&h[s]));
          held2[s][k] = fmaf(v.x, v.x, fmaf(v.y, v.y, held2[s][k]));
        }
      }
      // ||e4m3 * 2^E||^2 = 2^E (2^E sum e4m3^2), in two steps so that a
      // small scale's square does not leave f32's normal range.
      CUTLASS_PRAGMA_UNROLL
      for (int s = 0; s < 2; ++s)
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < kBlocks; ++k)
          squares += held2[s][k] * scale[s][k] * scale[s][k];
      // The quad's transpose: lane q gathers group q of each block (8
      // bytes a slot, 2 from each lane) and stores it, so that a warp's
      // store covers 8 rows of 32 contiguous bytes. Lane j holds the 4 x 4
      // matrix's row j (words[k][0..3]) and wants its column j: two
      // butterfly stages of two 32-bit shuffles each, both slots at once.
      // Sample l's row (types.h): its M N elements, then its scales.
      uint8_t *sample = params.rows + int64_t(l) * storageBytes(DType::MXFP8,
                                                                int64_t(m) * n);
      const bool b1 = quad & 2, b0 = quad & 1;
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < kBlocks; ++k) {
        const uint32_t w0 = words[k][0], w1 = words[k][1], w2 = words[k][2],
                       w3 = words[k][3];
        // Stage A (lanes 2 apart): the off-diagonal 2 x 2 blocks.
        uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, b1 ? w0 : w2, 2);
        uint32_t r1 = __shfl_xor_sync(0xFFFFFFFFu, b1 ? w1 : w3, 2);
        const uint32_t n0 = b1 ? r0 : w0, n1 = b1 ? r1 : w1,
                       n2 = b1 ? w2 : r0, n3 = b1 ? w3 : r1;
        // Stage B (neighbouring lanes): within each 2 x 2 block.
        r0 = __shfl_xor_sync(0xFFFFFFFFu, b0 ? n0 : n1, 1);
        r1 = __shfl_xor_sync(0xFFFFFFFFu, b0 ? n2 : n3, 1);
        const uint32_t f0 = b0 ? r0 : n0, f1 = b0 ? n1 : r0,
                       f2 = b0 ? r1 : n2, f3 = b0 ? n3 : r1;
        // f_j: lane j's pairs of group quad (slot 0 low, slot 1 high).
        const int col = tileN * int(kTileN) + epiN * kEpilogueN +
                        int(kMxBlock) * k + 8 * quad;
        CUTLASS_PRAGMA_UNROLL
        for (int s = 0; s < 2; ++s) {
          const uint32_t sel = s == 0 ? 0x5410u : 0x7632u;
          const uint64_t gathered =
              uint64_t(__byte_perm(f0, f1, sel)) |
              uint64_t(__byte_perm(f2, f3, sel)) << 32;
          if (row0 + 8 * s < m && col < n)
            *reinterpret_cast<uint64_t *>(
                sample + int64_t(row0 + 8 * s) * n + col) = gathered;
        }
      }
      return input;
    }

    CUTLASS_DEVICE void end() {
      const int tilesM = (m + int(kTileM) - 1) / int(kTileM);
      const int tilesN = (n + int(kTileN) - 1) / int(kTileN);
      // A tile wholly past M (the cluster of 2 along M rounds the grid up)
      // stores nothing: its partials' slot would be the next sample's.
      if (tileM >= tilesM || tileN >= tilesN)
        return;
      float sum = squares;
      CUTLASS_PRAGMA_UNROLL
      for (int lane = 16; lane > 0; lane /= 2)
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, lane);
      if ((thread & 31) == 0)
        params.partials[((int64_t(l) * tilesM + tileM) * tilesN + tileN) *
                            kWarpsPerTile +
                        (thread / 32) % kWarpsPerTile] = sum;
      // Lane s of each quad stores slot s's row of scales: 8 bytes at once
      // where the tile's 8 blocks are all in N (N a multiple of 256 keeps
      // them 8-byte aligned), else a byte a block.
      const int s = thread & 3;
      const int rowS = row0 + 8 * s;
      if (s >= 2 || rowS >= m)
        return;
      const uint64_t bytes = s == 0 ? scaleBytes0 : scaleBytes1;
      const int rowBlocks = n / int(kMxBlock);
      uint8_t *at = params.rows +
                    int64_t(l) * storageBytes(DType::MXFP8, int64_t(m) * n) +
                    int64_t(m) * n + int64_t(rowS) * rowBlocks + tileN * 8;
      if (n % int(kTileN) == 0) {
        *reinterpret_cast<uint64_t *>(at) = bytes;
        return;
      }
      for (int k = 0; k < 8 && tileN * 8 + k < rowBlocks; ++k)
        at[k] = uint8_t(bytes >> (8 * k));
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto
  get_consumer_store_callbacks(fusion::ConsumerStoreArgs<Args...> const &args) {
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [tm, tn, tk, tl] = args.tile_coord_mnkl;
    return ConsumerStoreCallbacks(params, int(M), int(N), int(tm), int(tn),
                                  int(tl), args.thread_idx);
  }
};

using Store = fusion::Sm90EVT<MxQuantizeRows, fusion::Sm90AccFetch>;
using Product =
    NormGemm<cutlass::layout::ColumnMajor, cutlass::layout::RowMajor, void,
             cutlass::layout::RowMajor, void, cutlass::layout::RowMajor, Store,
             Shape<_64, Int<kEpilogueN>>>;
using Gemm = Product::Gemm;

typename Gemm::Arguments arguments(const LinearProblem &p, void *g,
                                   float *partials, int smCount) {
  const int M = int(p.out), N = int(p.in), K = int(p.tokens), L = int(p.batch);
  typename Product::Kernel::StrideA strideA{};
  typename Product::Kernel::StrideB strideB{};
  linearStrides(p, strideA, strideB);
  // D is void: the node stores the rows (elements, then the scales).
  typename Product::Kernel::StrideD strideD{};
  auto *elems = static_cast<uint8_t *>(g);
  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kBatched,
      {M, N, K, L},
      {static_cast<const Element *>(p.dy), strideA,
       static_cast<const Element *>(p.x), strideB},
      {{}, nullptr, strideD, nullptr, strideD},
      hardware(smCount)};
  // Store(acc): the child's arguments, then the node's.
  args.epilogue.thread = {{}, {elems, partials}};
  return args;
}

} // namespace

bool takesMxLinear(int64_t batch, int64_t tokens, int64_t in, int64_t out) {
  return takesLinear(batch, tokens, in, out) && in % kMxBlock == 0;
}

int64_t mxLinearPartials(const LinearProblem &p) {
  return (p.out + kTileM - 1) / kTileM * ((p.in + kTileN - 1) / kTileN) *
         kWarpsPerTile;
}

size_t mxPerSampleGradWorkspace(const LinearProblem &p, int smCount) {
  return Gemm::get_workspace_size(arguments(p, nullptr, nullptr, smCount));
}

RunStatus runMxPerSampleGrad(const LinearProblem &p, void *g, float *partials,
                             void *workspace, int smCount,
                             cudaStream_t stream) {
  return launch<Gemm>(arguments(p, g, partials, smCount), workspace, stream);
}

} // namespace dprt::cuda::sm90
