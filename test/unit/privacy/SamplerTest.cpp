//===- SamplerTest.cpp - Poisson and shuffle batches, physical layout -----===//

#include "privacy/Sampler.h"

#include "dprt/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

using namespace dprt;
using namespace dprt::privacy;

namespace {

void expectSortedUniqueInRange(const std::vector<int64_t> &batch, int64_t n) {
  EXPECT_TRUE(std::is_sorted(batch.begin(), batch.end()));
  EXPECT_EQ(std::adjacent_find(batch.begin(), batch.end()), batch.end());
  if (!batch.empty()) {
    EXPECT_GE(batch.front(), 0);
    EXPECT_LT(batch.back(), n);
  }
}

// Each record's inclusion count over T steps is Binomial(T, q). With 500
// records, a 5.5-standard-deviation bound fails by chance with probability
// about 500 * 3.8e-8 (Bonferroni), so a failure means a biased sampler.
TEST(PoissonSampler, EveryRecordIsIncludedWithProbabilityQ) {
  const int64_t records = 500, steps = 4000;
  const double q = 0.05;
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    PoissonSampler sampler(/*seed=*/11, records, q, gen);
    std::vector<int64_t> counts(records, 0);
    double sizeSum = 0, sizeSquares = 0;
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<int64_t> batch = sampler.sample(s);
      expectSortedUniqueInRange(batch, records);
      for (int64_t i : batch)
        ++counts[i];
      sizeSum += batch.size();
      sizeSquares += double(batch.size()) * batch.size();
    }
    double mean = steps * q, sd = std::sqrt(steps * q * (1 - q));
    for (int64_t i = 0; i < records; ++i)
      EXPECT_LT(std::fabs(counts[i] - mean), 5.5 * sd) << "record " << i;
    // Independent inclusions: batch size ~ Binomial(N, q), so its variance
    // is Nq(1-q); correlated inclusions would change it. The sample
    // variance of T draws has sd ~ var sqrt(2 / T) (plus a small excess
    // kurtosis term).
    double sizeMean = sizeSum / steps;
    double sizeVariance = sizeSquares / steps - sizeMean * sizeMean;
    double expectedVariance = records * q * (1 - q);
    EXPECT_LT(std::fabs(sizeMean - records * q),
              5 * std::sqrt(expectedVariance / steps));
    EXPECT_LT(std::fabs(sizeVariance - expectedVariance),
              5 * expectedVariance * std::sqrt(2.0 / steps));
  }
}

// Small q over a large dataset: the geometric skips must not favour any
// region. Records are binned by index; each bin's count is Binomial.
TEST(PoissonSampler, SmallRateIsUniformOverALargeDataset) {
  const int64_t records = 200000, steps = 2000, bins = 20;
  const double q = 1e-4;
  PoissonSampler sampler(/*seed=*/3, records, q);
  std::vector<int64_t> counts(bins, 0);
  int64_t total = 0;
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i : sampler.sample(s)) {
      ++counts[i * bins / records];
      ++total;
    }
  double expectedTotal = double(records) * steps * q;
  EXPECT_LT(std::fabs(total - expectedTotal), 5 * std::sqrt(expectedTotal));
  double perBin = expectedTotal / bins;
  for (int64_t b = 0; b < bins; ++b)
    EXPECT_LT(std::fabs(counts[b] - perBin), 5 * std::sqrt(perBin))
        << "bin " << b;
}

TEST(PoissonSampler, ResumedSamplerDrawsTheSameBatches) {
  PoissonSampler original(/*seed=*/77, 1000, 0.03);
  std::vector<std::vector<int64_t>> history;
  for (int64_t s = 0; s < 100; ++s)
    history.push_back(original.sample(s));
  // A new process that knows only the seed and the step to resume from,
  // asking in any order.
  PoissonSampler resumed(/*seed=*/77, 1000, 0.03);
  for (int64_t s = 99; s >= 50; --s)
    EXPECT_EQ(resumed.sample(s), history[s]) << "step " << s;
  PoissonSampler otherSeed(/*seed=*/78, 1000, 0.03);
  int differing = 0;
  for (int64_t s = 0; s < 100; ++s)
    differing += otherSeed.sample(s) != history[s];
  EXPECT_GT(differing, 90);
}

// A sampler built from a seed draws with the key a run with that seed adds
// noise with (keys.h): the gaps of step s are the uniforms of that key at
// (s, j, kSamplingStream).
TEST(PoissonSampler, SeedKeysTheSamplerAsTheRunKeysItsNoise) {
  const uint64_t seed = 2025;
  const int64_t records = 1000;
  const double q = 0.02;
  StepState state{};
  noiseKeyWordsFromSeed(seed, state.noiseKey);
  const NoiseKey noiseKey = noiseKeyOf(state);
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    PoissonSampler fromSeed(seed, records, q, gen);
    PoissonSampler fromNoiseKey(noiseKey, records, q, gen);
    for (int64_t step = 1; step <= 5; ++step) {
      std::vector<int64_t> batch = fromSeed.sample(step);
      EXPECT_EQ(batch, fromNoiseKey.sample(step));
      // The first record is the first gap, from uniform 0 of the step.
      const double u = uniformF64(gen, noiseKey, static_cast<uint64_t>(step), 0,
                                  kSamplingStream);
      const double gap = std::floor(std::log(u) / std::log1p(-q));
      if (gap < records) {
        ASSERT_FALSE(batch.empty());
        EXPECT_EQ(batch.front(), static_cast<int64_t>(gap));
      }
    }
    ShuffleSampler shuffleFromSeed(seed, records, 100, gen);
    ShuffleSampler shuffleFromKey(noiseKey, records, 100, gen);
    EXPECT_EQ(shuffleFromSeed.sample(3), shuffleFromKey.sample(3));
  }
}

TEST(PoissonSampler, RateOneTakesEverythingAndRateZeroNothing) {
  std::vector<int64_t> all(37);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(PoissonSampler(1, 37, 1.0).sample(5), all);
  EXPECT_TRUE(PoissonSampler(1, 37, 0.0).sample(5).empty());
  EXPECT_TRUE(PoissonSampler(1, 0, 0.5).sample(5).empty());
  EXPECT_DOUBLE_EQ(PoissonSampler(1, 1000, 0.25).expectedBatchSize(), 250.0);
}

std::vector<int64_t> epochRecords(const ShuffleSampler &sampler,
                                  int64_t epoch) {
  std::vector<int64_t> seen;
  for (int64_t k = 0; k < sampler.stepsPerEpoch(); ++k) {
    std::vector<int64_t> batch =
        sampler.sample(epoch * sampler.stepsPerEpoch() + k);
    expectSortedUniqueInRange(batch, sampler.datasetSize());
    EXPECT_LE(int64_t(batch.size()), sampler.batchSize());
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  return seen;
}

TEST(ShuffleSampler, EachEpochCoversEveryRecordExactlyOnce) {
  for (int64_t records : {1, 2, 3, 5, 64, 1003}) {
    ShuffleSampler sampler(/*seed=*/9, records, /*batchSize=*/100);
    EXPECT_EQ(sampler.stepsPerEpoch(), (records + 99) / 100);
    std::vector<int64_t> all(records);
    std::iota(all.begin(), all.end(), 0);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> seen = epochRecords(sampler, epoch);
      std::sort(seen.begin(), seen.end());
      EXPECT_EQ(seen, all) << records << " records, epoch " << epoch;
    }
  }
}

TEST(ShuffleSampler, EpochsArePermutedDifferentlyAndResumeExactly) {
  ShuffleSampler sampler(/*seed=*/21, 1003, 100);
  EXPECT_NE(sampler.sample(0), sampler.sample(sampler.stepsPerEpoch()));
  ShuffleSampler resumed(/*seed=*/21, 1003, 100);
  for (int64_t s = 40; s >= 15; --s)
    EXPECT_EQ(resumed.sample(s), sampler.sample(s));
  EXPECT_NE(ShuffleSampler(22, 1003, 100).sample(0), sampler.sample(0));
}

// Where record 0 lands across many epochs must be uniform over positions:
// each of the 10 positions is hit Binomial(E, 1/10) times.
TEST(ShuffleSampler, PositionsAreUniformOverEpochs) {
  const int64_t records = 10, epochs = 20000;
  ShuffleSampler sampler(/*seed=*/4, records, records);
  std::vector<int64_t> counts(records, 0);
  for (int64_t e = 0; e < epochs; ++e)
    ++counts[sampler.permute(e, 0)];
  double mean = double(epochs) / records;
  double sd = std::sqrt(epochs * (1.0 / records) * (1 - 1.0 / records));
  for (int64_t r = 0; r < records; ++r)
    EXPECT_LT(std::fabs(counts[r] - mean), 5 * sd) << "record " << r;
}

//===----------------------------------------------------------------------===//
// User-level sampling
//===----------------------------------------------------------------------===//

/// Users 0..U-1 with `counts[u]` records each, interleaved: record r belongs
/// to user r % U while that user still needs records.
std::vector<std::vector<int64_t>>
usersWith(const std::vector<int64_t> &counts) {
  std::vector<std::vector<int64_t>> users(counts.size());
  int64_t record = 0;
  for (bool more = true; more;) {
    more = false;
    for (size_t u = 0; u < counts.size(); ++u)
      if (int64_t(users[u].size()) < counts[u]) {
        users[u].push_back(record++);
        more = true;
      }
  }
  return users;
}

// Every slot group is one sampled user: at most k of its own records,
// sorted and distinct, the rest -1; a user with n <= k records brings all
// of them; the draw is a pure function of (key, step).
TEST(UserSampler, EachSampledUserBringsAtMostKOfItsRecords) {
  const std::vector<int64_t> counts = {1, 2, 3, 4, 5, 6, 7, 1, 9, 2};
  const auto users = usersWith(counts);
  std::vector<int64_t> owner(64, -1);
  for (size_t u = 0; u < users.size(); ++u)
    for (int64_t r : users[u])
      owner[r] = int64_t(u);
  const int64_t k = 3;
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    UserSampler sampler(/*seed=*/5, users, k, 0.4, gen);
    UserSampler again(/*seed=*/5, users, k, 0.4, gen);
    int64_t groups = 0;
    for (int64_t step = 0; step < 200; ++step) {
      const std::vector<int64_t> slots = sampler.sample(step);
      EXPECT_EQ(slots, again.sample(step)) << "step " << step;
      ASSERT_EQ(slots.size() % k, 0u);
      int64_t lastUser = -1;
      for (size_t g = 0; g < slots.size(); g += k, ++groups) {
        ASSERT_GE(slots[g], 0) << "a sampled user has at least one record";
        const int64_t u = owner[slots[g]];
        EXPECT_GT(u, lastUser) << "users in increasing order";
        lastUser = u;
        int64_t real = 0;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t r = slots[g + j];
          if (r < 0) {
            for (int64_t rest = j; rest < k; ++rest)
              EXPECT_EQ(slots[g + rest], -1) << "padding only at the end";
            break;
          }
          ++real;
          EXPECT_EQ(owner[r], u) << "a record of another user";
          if (j > 0)
            EXPECT_LT(slots[g + j - 1], r) << "sorted, distinct";
        }
        EXPECT_EQ(real, std::min<int64_t>(k, counts[u]));
        EXPECT_EQ(
            std::vector<int64_t>(slots.begin() + g, slots.begin() + g + real),
            sampler.recordsOf(step, u));
      }
    }
    EXPECT_GT(groups, 0);
  }
}

// Which k of a user's n records a step uses is uniform over the C(n, k)
// subsets: for n = 5, k = 2 each of the 10 pairs has probability 1/10 at
// every step. Over 20000 steps the chi-square statistic of the pair counts
// (9 degrees of freedom) exceeds 33.7 with probability 1e-4; the users are
// also each sampled with probability q (a 5.5-sigma bound on each user's
// count).
TEST(UserSampler, RecordsOfAUserAreAUniformSubset) {
  const auto users = usersWith({5, 5, 1});
  const double q = 0.5;
  const int64_t steps = 20000;
  UserSampler sampler(/*seed=*/23, users, 2, q);
  std::map<std::pair<int64_t, int64_t>, int64_t> pairs;
  int64_t draws = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const std::vector<int64_t> r = sampler.recordsOf(step, 0);
    ASSERT_EQ(r.size(), 2u);
    ++pairs[{r[0], r[1]}];
    ++draws;
  }
  EXPECT_EQ(pairs.size(), 10u);
  double chi2 = 0;
  for (const auto &[pair, count] : pairs) {
    const double expected = draws / 10.0;
    chi2 += (count - expected) * (count - expected) / expected;
  }
  EXPECT_LT(chi2, 33.7) << "the pairs of user 0 are not uniform";

  std::vector<int64_t> sampled(users.size(), 0);
  for (int64_t step = 0; step < steps / 10; ++step) {
    const std::vector<int64_t> slots = sampler.sample(step);
    for (size_t g = 0; g < slots.size(); g += 2)
      for (size_t u = 0; u < users.size(); ++u)
        if (std::find(users[u].begin(), users[u].end(), slots[g]) !=
            users[u].end())
          ++sampled[u];
  }
  const double n = steps / 10, sd = std::sqrt(n * q * (1 - q));
  for (size_t u = 0; u < users.size(); ++u)
    EXPECT_LT(std::fabs(sampled[u] - n * q), 5.5 * sd) << "user " << u;
}

// A user's selection does not depend on the other users: the same
// (key, step, user) draws the same records whatever the dataset around it.
TEST(UserSampler, SelectionDependsOnlyOnKeyStepAndUser) {
  UserSampler small(/*seed=*/3, usersWith({6, 2}), 2, 1.0);
  UserSampler large(/*seed=*/3, usersWith({6, 2, 9, 9, 9}), 2, 1.0);
  for (int64_t step = 0; step < 50; ++step) {
    // User 0 has records 0, 2, 4, 6, ... in both (interleaved with user 1
    // at first), but not at the same indices: compare positions.
    auto positions = [](const UserSampler &s, int64_t step,
                        const std::vector<int64_t> &records) {
      std::vector<int64_t> p;
      for (int64_t r : s.recordsOf(step, 0))
        p.push_back(std::find(records.begin(), records.end(), r) -
                    records.begin());
      return p;
    };
    EXPECT_EQ(positions(small, step, usersWith({6, 2})[0]),
              positions(large, step, usersWith({6, 2, 9, 9, 9})[0]));
  }
}

TEST(PhysicalBatchPlan, MicroStepCount) {
  EXPECT_EQ(planPhysicalBatches(0, 2, 8).microSteps, 1);
  EXPECT_EQ(planPhysicalBatches(1, 2, 8).microSteps, 1);
  EXPECT_EQ(planPhysicalBatches(16, 2, 8).microSteps, 1);
  EXPECT_EQ(planPhysicalBatches(17, 2, 8).microSteps, 2);
  EXPECT_EQ(planPhysicalBatches(300, 4, 32).microSteps, 3);
  EXPECT_EQ(planPhysicalBatches(300, 1, 1).microSteps, 300);
}

TEST(PhysicalBatchPlan, EveryLogicalPositionHasExactlyOneRow) {
  for (int64_t logical : {0, 1, 7, 16, 17, 63, 64, 65, 250}) {
    for (int64_t ranks : {1, 2, 3, 4}) {
      PhysicalBatchPlan plan = planPhysicalBatches(logical, ranks, 8);
      std::vector<int> hits(logical, 0);
      int64_t padding = 0;
      for (int64_t m = 0; m < plan.microSteps; ++m) {
        for (int64_t r = 0; r < ranks; ++r) {
          PhysicalBatchPlan::Slice slice = plan.slice(m, r);
          EXPECT_GE(slice.count, 0);
          EXPECT_LE(slice.count, 8);
          for (int64_t row = 0; row < 8; ++row) {
            int64_t p = plan.logicalPosition(m, r, row);
            if (p < 0) {
              ++padding;
              EXPECT_GE(row, slice.count); // padding only after real rows
              continue;
            }
            EXPECT_EQ(p, slice.first + row);
            ASSERT_LT(p, logical);
            ++hits[p];
          }
        }
      }
      for (int64_t p = 0; p < logical; ++p)
        EXPECT_EQ(hits[p], 1) << "position " << p;
      EXPECT_EQ(padding, plan.microSteps * ranks * 8 - logical);
    }
  }
}

// The last micro-step is dealt out evenly, in whole granules (a user's
// slots under user-level DP), so that every rank can run it on few rows:
// counts differ by at most one granule and sum to what is left; every
// earlier micro-step is full, and the positions stay consecutive in rank
// order.
TEST(PhysicalBatchPlan, LastMicroStepIsDealtEvenlyInGranules) {
  for (int64_t granule : {1, 2, 4}) {
    for (int64_t ranks : {1, 2, 3, 4}) {
      for (int64_t units = 0; units <= 40; ++units) {
        const int64_t logical = units * granule;
        PhysicalBatchPlan plan =
            planPhysicalBatches(logical, ranks, 8, granule);
        const int64_t last = plan.microSteps - 1;
        int64_t next = 0;
        for (int64_t m = 0; m < last; ++m)
          for (int64_t r = 0; r < ranks; ++r) {
            PhysicalBatchPlan::Slice slice = plan.slice(m, r);
            EXPECT_EQ(slice.first, next);
            EXPECT_EQ(slice.count, 8);
            next += slice.count;
          }
        int64_t least = 8, most = 0;
        for (int64_t r = 0; r < ranks; ++r) {
          PhysicalBatchPlan::Slice slice = plan.slice(last, r);
          EXPECT_EQ(slice.first, next) << "rank " << r;
          EXPECT_EQ(slice.count % granule, 0) << "rank " << r;
          next += slice.count;
          least = std::min(least, slice.count);
          most = std::max(most, slice.count);
        }
        EXPECT_EQ(next, logical) << granule << " " << ranks << " " << units;
        EXPECT_LE(most, 8);
        EXPECT_LE(most - least, granule)
            << "logical " << logical << " over " << ranks << " ranks";
      }
    }
  }
  // 10 records on 4 ranks of 8: 3, 3, 2, 2 rows, not 8, 2, 0, 0.
  PhysicalBatchPlan plan = planPhysicalBatches(10, 4, 8);
  EXPECT_EQ(plan.slice(0, 0).count, 3);
  EXPECT_EQ(plan.slice(0, 1).first, 3);
  EXPECT_EQ(plan.slice(0, 3).first, 8);
  EXPECT_EQ(plan.slice(0, 3).count, 2);
}

} // namespace
