//===- ShardRangesTest.cpp - Unit-range kernels over 1..4 ranks -----------===//
//
// A range kernel acts on the part of [begin, begin + count) that the calling
// rank owns, with the global index of each element fixed by its unit
// position: gathering the shards of W ranks gives the same unit for every W,
// and the random values are rng.h's at the right global indices.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"
#include "dprt/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

using namespace dprt;

namespace {

constexpr int64_t kNumel = 37;
constexpr double kUntouched = 777.0;

/// W ranks over one unit of kNumel doubles; each has a step state and shards.
struct Grid {
  int world;
  int64_t shardElems;
  std::vector<std::vector<char>> arenas;
  std::vector<Rank> ranks;
  /// shards[buffer][rank]: master, grad, state 1, state 2.
  std::vector<std::vector<std::vector<double>>> shards;

  Grid(int world, const StepState &state)
      : world(world), shardElems((kNumel + world - 1) / world),
        arenas(world, std::vector<char>(1024)), ranks(world),
        shards(4, std::vector<std::vector<double>>(
                      world, std::vector<double>(shardElems, kUntouched))) {
    for (int r = 0; r < world; ++r) {
      ranks[r].rank = r;
      ranks[r].world = world;
      ranks[r].arena = arenas[r].data();
      ranks[r].stateOffset = 0;
      std::memcpy(arenas[r].data(), &state, sizeof(state));
    }
  }

  /// Sets buffer `b` to f(unit position) on every rank.
  void set(int b, const std::function<double(int64_t)> &f) {
    for (int r = 0; r < world; ++r)
      for (int64_t i = 0; i < shardElems; ++i)
        shards[b][r][i] = f(r * shardElems + i);
  }

  /// The first kNumel unit positions of buffer `b`, gathered.
  std::vector<double> gather(int b) const {
    std::vector<double> full;
    for (int r = 0; r < world; ++r)
      full.insert(full.end(), shards[b][r].begin(), shards[b][r].end());
    full.resize(kNumel);
    return full;
  }

  void forEachRank(const std::function<void(Rank *, int)> &f) {
    for (int r = 0; r < world; ++r)
      f(&ranks[r], r);
  }
};

StepState makeState() {
  StepState s{};
  s.step = 9;
  s.noiseStd = 0.75;
  s.gradScale = 0.5;
  s.lrScale = 1.0;
  s.lr = 0.1;
  s.weightDecay = 0.01;
  s.clipNorm = 1.0;
  s.noiseKey[0] = 11;
  s.noiseKey[1] = 22;
  s.initKey = 4242;
  s.noiseGenerator = static_cast<int32_t>(NoiseGeneratorKind::Philox);
  return s;
}

// Ranges that start and end inside shards and straddle shard boundaries for
// every world size, plus the whole unit and an empty range.
const std::pair<int64_t, int64_t> kRanges[] = {
    {5, 20}, {0, kNumel}, {13, 1}, {30, 7}, {18, 0}};

} // namespace

TEST(ShardRanges, InitNormalMatchesRngAtGlobalIndicesOnAnyRanks) {
  const StepState state = makeState();
  NoiseKey key{};
  key.seed = state.initKey;
  for (auto [begin, count] : kRanges)
    for (int world = 1; world <= 4; ++world) {
      Grid g(world, state);
      g.forEachRank([&](Rank *rank, int r) {
        cpu::init_normal_range(rank, DType::F64, g.shards[0][r].data(),
                               g.shardElems, begin, count, 1000, 0.1);
      });
      std::vector<double> full = g.gather(0);
      for (int64_t j = 0; j < kNumel; ++j) {
        double expected =
            j >= begin && j < begin + count
                ? 0.1 * gaussianF64(NoiseGenerator::Philox, key, 0,
                                    1000 + j - begin, kParameterInitStream)
                : kUntouched;
        ASSERT_EQ(full[j], expected)
            << "world " << world << " range [" << begin << ", " << begin + count
            << ") position " << j;
      }
    }
}

TEST(ShardRanges, InitUniformMatchesOneRank) {
  const StepState state = makeState();
  Grid one(1, state);
  one.forEachRank([&](Rank *rank, int r) {
    cpu::init_uniform_range(rank, DType::F64, one.shards[0][r].data(),
                            one.shardElems, 3, 30, 50, 2.0);
  });
  for (int world = 2; world <= 4; ++world) {
    Grid g(world, state);
    g.forEachRank([&](Rank *rank, int r) {
      cpu::init_uniform_range(rank, DType::F64, g.shards[0][r].data(),
                              g.shardElems, 3, 30, 50, 2.0);
    });
    EXPECT_EQ(g.gather(0), one.gather(0)) << "world " << world;
  }
}

TEST(ShardRanges, AddNoiseMatchesRngAtGlobalIndicesOnAnyRanks) {
  const StepState state = makeState();
  NoiseKey key{};
  key.seed = state.noiseKey[0];
  for (int i = 0; i < 4; ++i) {
    key.chachaKey[2 * i] = static_cast<uint32_t>(state.noiseKey[i]);
    key.chachaKey[2 * i + 1] = static_cast<uint32_t>(state.noiseKey[i] >> 32);
  }
  for (auto [begin, count] : kRanges)
    for (int world = 1; world <= 4; ++world) {
      Grid g(world, state);
      g.set(1, [](int64_t j) { return 0.01 * j; });
      g.forEachRank([&](Rank *rank, int r) {
        cpu::add_noise_range(rank, DType::F64, g.shards[1][r].data(),
                             g.shardElems, begin, count, 77);
      });
      std::vector<double> full = g.gather(1);
      for (int64_t j = 0; j < kNumel; ++j) {
        double expected = 0.01 * j;
        if (j >= begin && j < begin + count)
          expected += 0.75 * gaussianF64(NoiseGenerator::Philox, key, 9,
                                         77 + j - begin, kGradientNoiseStream);
        ASSERT_EQ(full[j], expected) << "world " << world << " position " << j;
      }
    }
}

TEST(ShardRanges, FillTouchesOnlyTheRange) {
  for (int world = 1; world <= 4; ++world) {
    Grid g(world, makeState());
    g.forEachRank([&](Rank *rank, int r) {
      cpu::fill_range(rank, DType::F64, g.shards[0][r].data(), g.shardElems, 8,
                      21, -1.5);
    });
    std::vector<double> full = g.gather(0);
    for (int64_t j = 0; j < kNumel; ++j)
      EXPECT_EQ(full[j], j >= 8 && j < 29 ? -1.5 : kUntouched)
          << "world " << world;
  }
}

// The optimizer ranges must update exactly the elements the pointer kernel
// would update on the whole range, with the same bits.
TEST(ShardRanges, OptimizerRangesEqualOneCallOnTheWholeRange) {
  const StepState state = makeState();
  const int64_t begin = 6, count = 25;
  auto init = [](Grid &g) {
    g.set(0, [](int64_t j) { return 1.0 + 0.1 * j; });
    g.set(1, [](int64_t j) { return std::sin(double(j)); });
    g.set(2, [](int64_t j) { return 0.01 * j; });
    g.set(3, [](int64_t j) { return 0.001 * j; });
  };
  using RangeCall = std::function<void(Rank *, Grid &, int)>;
  using WholeCall = std::function<void(Rank *, double *, double *, double *,
                                       const double *, int64_t)>;
  const std::vector<std::pair<RangeCall, WholeCall>> optimizers = {
      {[&](Rank *rank, Grid &g, int r) {
         cpu::sgd_update_range(rank, DType::F64, g.shards[0][r].data(),
                               g.shards[1][r].data(), g.shardElems, begin,
                               count);
       },
       [](Rank *rank, double *w, double *, double *, const double *grad,
          int64_t n) { cpu::sgd_update(rank, DType::F64, w, grad, n); }},
      {[&](Rank *rank, Grid &g, int r) {
         cpu::momentum_update_range(
             rank, DType::F64, g.shards[0][r].data(), g.shards[2][r].data(),
             g.shards[1][r].data(), g.shardElems, begin, count, 0.9, true);
       },
       [](Rank *rank, double *w, double *m, double *, const double *grad,
          int64_t n) {
         cpu::momentum_update(rank, DType::F64, w, m, grad, n, 0.9, true);
       }},
      {[&](Rank *rank, Grid &g, int r) {
         cpu::adamw_update_range(rank, DType::F64, g.shards[0][r].data(),
                                 g.shards[2][r].data(), g.shards[3][r].data(),
                                 g.shards[1][r].data(), g.shardElems, begin,
                                 count, 0.9, 0.99, 1e-8);
       },
       [](Rank *rank, double *w, double *m, double *v, const double *grad,
          int64_t n) {
         cpu::adamw_update(rank, DType::F64, w, m, v, grad, n, 0.9, 0.99, 1e-8);
       }}};
  for (size_t o = 0; o < optimizers.size(); ++o) {
    Grid reference(1, state);
    init(reference);
    std::vector<std::vector<double>> whole = {
        reference.gather(0), reference.gather(1), reference.gather(2),
        reference.gather(3)};
    optimizers[o].second(&reference.ranks[0], whole[0].data() + begin,
                         whole[2].data() + begin, whole[3].data() + begin,
                         whole[1].data() + begin, count);
    for (int world = 1; world <= 4; ++world) {
      Grid g(world, state);
      init(g);
      g.forEachRank(
          [&](Rank *rank, int r) { optimizers[o].first(rank, g, r); });
      for (int b : {0, 2, 3})
        EXPECT_EQ(g.gather(b), whole[b])
            << "optimizer " << o << " world " << world << " buffer " << b;
    }
  }
}
