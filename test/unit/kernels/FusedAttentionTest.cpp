//===- FusedAttentionTest.cpp - The CUDA fused attention, on the host -----===//
//
// The block programs of runtime/cuda/FlashAttention.h are the source the
// CUDA backend's fused attention kernels run. Here the same source runs on
// the host under SimtEmulator (fibers for threads, ldmatrix, mma.sync,
// shuffles and cp.async as the PTX ISA defines them) and is compared with
// the CPU backend's attention in bf16, at shapes with partial blocks, both
// head sizes, grouped-query heads, with and without the causal mask; outputs
// start as NaN, so an element no thread writes fails. The tile geometry is
// checked against brute force, and the block programs must give the same
// bits under every thread schedule and copy timing the emulator offers (a
// missing barrier or wait changes them).
//
// The tolerance, 1e-2 relative (‖emulated - cpu‖ / ‖cpu‖), is tighter than
// dpc-gpu-check's (2e-2 forward, 3e-2 backward): the emulation differs from
// the GPU only in the rounding of exp2/log2 and of the mma sums. Both round
// P and dS to bf16 as mma operands and form D from the bf16 O, which the CPU
// backend does not; that costs a few 1e-3.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"
#include "SimtEmulator.h"
#include "cuda/FlashAttention.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace dpc::test {
namespace {

namespace flash = dprt::cuda::flash;
namespace cpu = dprt::cpu;
using dprt::DType;

//===----------------------------------------------------------------------===//
// Tile geometry
//===----------------------------------------------------------------------===//

TEST(FusedAttentionTiles, LoopBoundsVisitExactlyTheTilesThatAttend) {
  for (bool causal : {false, true})
    for (int bm : {16, 32, 64})
      for (int bn : {16, 32, 64})
        for (int tokens = 1; tokens <= 130; ++tokens) {
          const int nq = flash::ceilDiv(tokens, bm),
                    nk = flash::ceilDiv(tokens, bn);
          for (int i = 0; i < nq; ++i)
            for (int j = 0; j < nk; ++j) {
              bool any = false, all = true;
              for (int t = i * bm; t < (i + 1) * bm; ++t)
                for (int s = j * bn; s < (j + 1) * bn; ++s) {
                  bool a = flash::attends(t, s, tokens, causal);
                  any |= a;
                  all &= a;
                }
              SCOPED_TRACE(::testing::Message()
                           << "causal " << causal << " bm " << bm << " bn "
                           << bn << " tokens " << tokens << " tile " << i << ","
                           << j);
              ASSERT_EQ(j < flash::keyBlockEnd(i, bm, bn, tokens, causal), any);
              ASSERT_EQ(i >= flash::queryBlockBegin(j, bm, bn, causal), any);
              ASSERT_EQ(flash::tileNeedsMask(i, j, bm, bn, tokens, causal),
                        !all);
            }
        }
}

TEST(FusedAttentionTiles, FragmentHelpersFollowThePtxLayouts) {
  // Accumulator element e of lane l: row l/4 (+8 for e >= 2), column
  // 2 (l%4) + e%2; every (row, col) of the 16 x 8 tile exactly once.
  int seen[16][8] = {};
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e)
      ++seen[flash::accRow(lane, e)][flash::accCol(lane, e)];
  for (auto &row : seen)
    for (int count : row)
      EXPECT_EQ(count, 1);
  // ldmatrix.x4: lanes 8m..8m+7 address rows 0..7 of matrix m, and the
  // matrices sit at (0,0), (8,0), (0,8), (8,8) for A and at (0,0), (0,8),
  // (8,0), (8,8) for B.
  const int originA[4][2] = {{0, 0}, {8, 0}, {0, 8}, {8, 8}};
  const int originB[4][2] = {{0, 0}, {0, 8}, {8, 0}, {8, 8}};
  for (int lane = 0; lane < 32; ++lane) {
    const int m = lane / 8, r = lane % 8;
    EXPECT_EQ(flash::ldsmRowA(lane), originA[m][0] + r);
    EXPECT_EQ(flash::ldsmColA(lane), originA[m][1]);
    EXPECT_EQ(flash::ldsmRowB(lane), originB[m][0] + r);
    EXPECT_EQ(flash::ldsmColB(lane), originB[m][1]);
  }
}

//===----------------------------------------------------------------------===//
// One warp: the products the block programs are made of
//===----------------------------------------------------------------------===//

/// bf16 as the GPU rounds to it (the emulator's cvt).
uint16_t bf16Bits(float f) { return simt::roundBf16(f); }

TEST(FusedAttentionFragments, WarpProductsMatchNaiveProducts) {
  // S = A B^T (16 x 32 from 16 x 32 and 32 x 32 in shared memory), then
  // O = bf16(S) V (16 x 16, V 32 x 16): productABt, accumulatorAsA and
  // productAB as the block programs use them.
  constexpr int K = 32, N = 32, HD = 16, LD = K + flash::kPad;
  forEachCase(2, [](Rng &rng) {
    Vec a = normal(rng, 16 * K), b = normal(rng, N * K),
        v = normal(rng, N * HD);
    std::vector<float> s(16 * N), o(16 * HD);
    simt::Launch launch;
    launch.threads = 32;
    launch.smemBytes = size_t(16 + 2 * N) * LD * 2;
    launch.writable = {{s.data(), s.size() * 4}, {o.data(), o.size() * 4}};
    simt::run(launch, [&](simt::Ops &ops, int, int, int, int lane,
                          unsigned char *smem) {
      auto *sa = reinterpret_cast<uint16_t *>(smem);
      uint16_t *sb = sa + 16 * LD, *sv = sb + N * LD;
      if (lane == 0) {
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < K; ++c)
            sa[r * LD + c] = bf16Bits(float(a[size_t(r * K + c)]));
        for (int r = 0; r < N; ++r)
          for (int c = 0; c < K; ++c)
            sb[r * LD + c] = bf16Bits(float(b[size_t(r * K + c)]));
        for (int r = 0; r < N; ++r)
          for (int c = 0; c < HD; ++c)
            sv[r * LD + c] = bf16Bits(float(v[size_t(r * HD + c)]));
      }
      ops.syncThreads();
      float acc[N / 8][4] = {}, out[HD / 8][4] = {};
      flash::productABt<K, N / 8, LD>(ops, acc, sa, sb, lane);
      for (int kk = 0; kk < N / 16; ++kk) {
        uint32_t pa[4];
        flash::accumulatorAsA(ops, pa, acc, kk);
        flash::productAB<HD, LD>(ops, out, pa, sv, kk, lane);
      }
      for (int n = 0; n < N / 8; ++n)
        for (int e = 0; e < 4; ++e)
          ops.storeF32(&s[size_t(flash::accRow(lane, e) * N + n * 8 +
                                 flash::accCol(lane, e))],
                       acc[n][e]);
      for (int n = 0; n < HD / 8; ++n)
        for (int e = 0; e < 4; ++e)
          ops.storeF32(&o[size_t(flash::accRow(lane, e) * HD + n * 8 +
                                 flash::accCol(lane, e))],
                       out[n][e]);
    });
    auto r = [](double x) { return bf16Value(bf16Bits(float(x))); };
    for (int i = 0; i < 16; ++i)
      for (int n = 0; n < N; ++n) {
        double want = 0;
        for (int k = 0; k < K; ++k)
          want += r(a[size_t(i * K + k)]) * r(b[size_t(n * K + k)]);
        EXPECT_NEAR(s[size_t(i * N + n)], want, 1e-4) << i << "," << n;
      }
    for (int i = 0; i < 16; ++i)
      for (int c = 0; c < HD; ++c) {
        double want = 0;
        for (int n = 0; n < N; ++n)
          want += r(s[size_t(i * N + n)]) * r(v[size_t(n * HD + c)]);
        EXPECT_NEAR(o[size_t(i * HD + c)], want, 1e-4) << i << "," << c;
      }
  });
}

//===----------------------------------------------------------------------===//
// The block programs against the CPU backend
//===----------------------------------------------------------------------===//

struct Case {
  int64_t batch, tokens, heads, kvHeads, headDim;
  bool causal;
};

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "B" << c.batch << " T" << c.tokens << " H" << c.heads << " KV"
     << c.kvHeads << " hd" << c.headDim << (c.causal ? " causal" : "");
  return os.str();
}

constexpr uint16_t kNaNBits = 0xffff;

/// The tensors of one call, bf16 as bits, and a Problem pointing at them.
struct Tensors {
  explicit Tensors(const Case &c)
      : shape(c), nq(c.batch * c.tokens * c.heads * c.headDim),
        nk(c.batch * c.tokens * c.kvHeads * c.headDim),
        nl(c.batch * c.heads * c.tokens) {
    for (auto *t : {&q, &o, &dout, &dq})
      t->assign(size_t(nq), kNaNBits);
    for (auto *t : {&k, &v, &dk, &dv})
      t->assign(size_t(nk), kNaNBits);
    for (auto *t : {&lse, &lse2, &delta})
      t->assign(size_t(nl), std::numeric_limits<float>::quiet_NaN());
  }

  void randomInputs(Rng &rng) {
    for (auto *t : {&q, &k, &v, &dout}) {
      Vec x = normal(rng, int64_t(t->size()));
      for (size_t i = 0; i < t->size(); ++i)
        (*t)[i] = bf16Bits(float(x[i]));
    }
  }

  flash::Problem problem() {
    flash::Problem p{};
    p.dims = flash::makeDims(shape.batch, shape.tokens, shape.heads,
                             shape.kvHeads, shape.headDim, shape.causal);
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.o = o.data();
    p.lse = lse.data();
    p.dout = dout.data();
    p.lse2 = lse2.data();
    p.delta = delta.data();
    p.dq = dq.data();
    p.dk = dk.data();
    p.dv = dv.data();
    return p;
  }

  template <class T> static simt::Range range(const std::vector<T> &t) {
    return {t.data(), t.size() * sizeof(T)};
  }

  Case shape;
  int64_t nq, nk, nl;
  std::vector<uint16_t> q, k, v, o, dout, dq, dk, dv;
  std::vector<float> lse, lse2, delta;
};

simt::Launch launchFor(flash::GridShape g, int threads, size_t smem,
                       const simt::Options &options) {
  simt::Launch l;
  l.gridX = g.x;
  l.gridY = g.y;
  l.gridZ = g.z;
  l.threads = threads;
  l.smemBytes = smem;
  l.options = options;
  return l;
}

/// What FusedKernels<HD>::forward in Attention.cu launches.
template <int HD>
void emulateForward(Tensors &t, const simt::Options &options) {
  using Tiles = flash::ForwardTiles<HD>;
  flash::Problem p = t.problem();
  simt::Launch l = launchFor(flash::forwardGrid(p.dims), Tiles::kThreads,
                             Tiles::kSmemBytes, options);
  l.readable = {Tensors::range(t.q), Tensors::range(t.k), Tensors::range(t.v)};
  l.writable = {Tensors::range(t.o), Tensors::range(t.lse)};
  simt::run(l, [&](simt::Ops &ops, int x, int y, int z, int tid,
                   unsigned char *smem) {
    flash::forwardBlock<HD>(ops, p, x, y, z, tid, smem);
  });
}

/// What FusedKernels<HD>::backward in Attention.cu launches.
template <int HD>
void emulateBackward(Tensors &t, const simt::Options &options) {
  flash::Problem p = t.problem();
  {
    simt::Launch l;
    l.readable = {Tensors::range(t.o), Tensors::range(t.dout),
                  Tensors::range(t.lse)};
    l.writable = {Tensors::range(t.lse2), Tensors::range(t.delta)};
    simt::runElements(l, t.nl, [&](simt::Ops &ops, int64_t n) {
      flash::rowStatsElement<HD>(ops, p, n);
    });
  }
  const std::vector<simt::Range> inputs = {
      Tensors::range(t.q),    Tensors::range(t.k),    Tensors::range(t.v),
      Tensors::range(t.dout), Tensors::range(t.lse2), Tensors::range(t.delta)};
  {
    using Tiles = flash::QueryGradTiles<HD>;
    simt::Launch l = launchFor(flash::queryGradGrid(p.dims), Tiles::kThreads,
                               Tiles::kSmemBytes, options);
    l.readable = inputs;
    l.writable = {Tensors::range(t.dq)};
    simt::run(l, [&](simt::Ops &ops, int x, int y, int z, int tid,
                     unsigned char *smem) {
      flash::queryGradBlock<HD>(ops, p, x, y, z, tid, smem);
    });
  }
  {
    using Tiles = flash::KeyValueGradTiles<HD>;
    simt::Launch l = launchFor(flash::keyValueGradGrid(p.dims), Tiles::kThreads,
                               Tiles::kSmemBytes, options);
    l.readable = inputs;
    l.writable = {Tensors::range(t.dk), Tensors::range(t.dv)};
    simt::run(l, [&](simt::Ops &ops, int x, int y, int z, int tid,
                     unsigned char *smem) {
      flash::keyValueGradBlock<HD>(ops, p, x, y, z, tid, smem);
    });
  }
}

void emulate(Tensors &t, bool backward, const simt::Options &options) {
  if (t.shape.headDim == 64)
    backward ? emulateBackward<64>(t, options) : emulateForward<64>(t, options);
  else
    backward ? emulateBackward<128>(t, options)
             : emulateForward<128>(t, options);
}

Vec bf16Values(const std::vector<uint16_t> &x) {
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = bf16Value(x[i]);
  return out;
}
Vec floatValues(const std::vector<float> &x) { return Vec(x.begin(), x.end()); }

/// ‖out - ref‖ / ‖ref‖ (‖out - ref‖ where ref is 0: a single token's dq
/// and dk); infinity if out has a NaN or infinity.
double relError(const Vec &out, const Vec &ref) {
  return relativeError(out, ref, ref);
}

/// The CPU backend's forward (o, lse) and backward (dq, dk, dv) of t's
/// inputs, in bf16; the backward from the CPU's o and lse.
struct Reference {
  explicit Reference(const Tensors &t) : ref(t.shape) {
    ref.q = t.q;
    ref.k = t.k;
    ref.v = t.v;
    ref.dout = t.dout;
    const Case &c = t.shape;
    TestRank r;
    cpu::attention_forward(r.get(), DType::BF16, ref.q.data(), ref.k.data(),
                           ref.v.data(), ref.o.data(), ref.lse.data(), c.batch,
                           c.tokens, c.heads, c.kvHeads, c.headDim, c.causal);
    cpu::attention_backward(r.get(), DType::BF16, ref.q.data(), ref.k.data(),
                            ref.v.data(), ref.o.data(), ref.lse.data(),
                            ref.dout.data(), ref.dq.data(), ref.dk.data(),
                            ref.dv.data(), c.batch, c.tokens, c.heads,
                            c.kvHeads, c.headDim, c.causal, nullptr);
  }
  Tensors ref;
};

// Grouped-query heads need 1 < kvHeads < heads to tell head / group from
// other mappings.
const Case kCases[] = {
    {1, 37, 2, 2, 64, true},   // one partial block
    {2, 100, 8, 2, 64, false}, // group 4, a partial second block
    {1, 150, 4, 4, 64, true},  // three blocks, the last partial
    {1, 1, 2, 1, 64, true},    // a single token
    {1, 130, 4, 2, 128, true}, // group 2; three query blocks of 64 (dK, dV:
                               // five of 32), the last partial
    {3, 64, 4, 2, 128, false}, // whole blocks, batch 3
    {1, 70, 4, 1, 128, false}, // group 4, partial blocks, no causal mask
};

/// Emulated forward and backward of every case against the CPU backend.
TEST(FusedAttention, MatchesCpuBackendInBf16) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    forEachCase(1, [&](Rng &rng) {
      Tensors t(c);
      t.randomInputs(rng);
      Reference cpuRef(t);
      emulate(t, false, {});
      double eo = relError(bf16Values(t.o), bf16Values(cpuRef.ref.o));
      double el = relError(floatValues(t.lse), floatValues(cpuRef.ref.lse));
      // The backward starts from the CPU's forward outputs, as on the GPU.
      t.o = cpuRef.ref.o;
      t.lse = cpuRef.ref.lse;
      emulate(t, true, {});
      double eq = relError(bf16Values(t.dq), bf16Values(cpuRef.ref.dq));
      double ek = relError(bf16Values(t.dk), bf16Values(cpuRef.ref.dk));
      double ev = relError(bf16Values(t.dv), bf16Values(cpuRef.ref.dv));
      std::printf("fused attention (emulated) %-28s rel. error o %.1e lse "
                  "%.1e dq %.1e dk %.1e dv %.1e\n",
                  describe(c).c_str(), eo, el, eq, ek, ev);
      EXPECT_LE(eo, 1e-2);
      EXPECT_LE(el, 1e-5);
      EXPECT_LE(eq, 1e-2);
      EXPECT_LE(ek, 1e-2);
      EXPECT_LE(ev, 1e-2);
    });
  }
}

/// The results must not depend on the order the threads run in or on when
/// the asynchronous copies land. A buffer is overwritten two steps after it
/// was read, so the shapes have at least three steps everywhere: 200 and 140
/// tokens are 4 and 3 blocks of 64 (forward, dQ) and 7 and 5 query blocks
/// of 32 (dK, dV at head size 128).
TEST(FusedAttention, SameBitsUnderEveryScheduleAndCopyTiming) {
  const Case cases[] = {{1, 200, 4, 2, 64, false}, {1, 140, 2, 1, 128, true}};
  for (const Case &c : cases) {
    SCOPED_TRACE(describe(c));
    forEachCase(1, [&](Rng &rng) {
      Tensors base(c);
      base.randomInputs(rng);
      Reference cpuRef(base);
      base.o = cpuRef.ref.o;
      base.lse = cpuRef.ref.lse;
      Tensors first(c);
      bool haveFirst = false;
      for (simt::Schedule schedule :
           {simt::Schedule::RoundRobin, simt::Schedule::WarpsAscending,
            simt::Schedule::WarpsDescending})
        for (simt::CopyTiming copies :
             {simt::CopyTiming::Deferred, simt::CopyTiming::Eager}) {
          SCOPED_TRACE(::testing::Message() << "schedule " << int(schedule)
                                            << " copies " << int(copies));
          Tensors t(c);
          t.q = base.q;
          t.k = base.k;
          t.v = base.v;
          t.dout = base.dout;
          emulate(t, false, {schedule, copies});
          t.o = base.o;
          t.lse = base.lse;
          emulate(t, true, {schedule, copies});
          if (!haveFirst) {
            first = t;
            haveFirst = true;
            continue;
          }
          EXPECT_EQ(t.dq, first.dq);
          EXPECT_EQ(t.dk, first.dk);
          EXPECT_EQ(t.dv, first.dv);
          EXPECT_EQ(0, std::memcmp(t.lse2.data(), first.lse2.data(),
                                   t.lse2.size() * 4));
        }
      // The forward's outputs were replaced above; compare them separately.
      Tensors f1(c), f2(c);
      for (Tensors *f : {&f1, &f2}) {
        f->q = base.q;
        f->k = base.k;
        f->v = base.v;
      }
      emulate(f1, false,
              {simt::Schedule::WarpsAscending, simt::CopyTiming::Eager});
      emulate(f2, false,
              {simt::Schedule::WarpsDescending, simt::CopyTiming::Deferred});
      EXPECT_EQ(f1.o, f2.o);
      EXPECT_EQ(0,
                std::memcmp(f1.lse.data(), f2.lse.data(), f1.lse.size() * 4));
    });
  }
}

} // namespace
} // namespace dpc::test
