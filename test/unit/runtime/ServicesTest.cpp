//===- ServicesTest.cpp - The CPU backend's finiteness check --------------===//
//
// allFinite (backend.inc) is the driver's check of the gradient shards
// before each update: every NaN and infinity is found, at any position, in
// f32 and f64 buffers, and nothing outside the range is read.
//
//===----------------------------------------------------------------------===//

#include "dprt/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

using namespace dprt;

namespace {

struct ArenaRank {
  Rank rank;
  ArenaRank() { cpu::allocateArena(&rank, 4096); }
  ~ArenaRank() { cpu::freeArena(&rank); }
  template <class T> T *at(int64_t offset) {
    return reinterpret_cast<T *>(rank.arena + offset);
  }
};

template <class T> void expectFindsEveryNonFinite(DType acc) {
  ArenaRank r;
  const int64_t n = 100, offset = 256;
  T *values = r.at<T>(offset);
  for (int64_t i = 0; i < n; ++i)
    values[i] = std::numeric_limits<T>::max() / n * static_cast<T>(i);
  EXPECT_TRUE(cpu::allFinite(&r.rank, acc, offset, n));
  for (T bad :
       {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
        -std::numeric_limits<T>::infinity()})
    for (int64_t i : {int64_t{0}, int64_t{37}, n - 1}) {
      const T saved = values[i];
      values[i] = bad;
      EXPECT_FALSE(cpu::allFinite(&r.rank, acc, offset, n)) << i;
      // Outside the range checked: not seen.
      EXPECT_EQ(cpu::allFinite(&r.rank, acc, offset, i), true);
      values[i] = saved;
    }
}

} // namespace

TEST(CpuServices, AllFiniteFindsEveryNaNAndInfinityInF32) {
  expectFindsEveryNonFinite<float>(DType::F32);
}

TEST(CpuServices, AllFiniteFindsEveryNaNAndInfinityInF64) {
  expectFindsEveryNonFinite<double>(DType::F64);
}

TEST(CpuServices, AllFiniteRangesIsEveryRangeAllFinite) {
  // The driver's one request for all trainable units: false when any range
  // holds a NaN or an infinity, whichever it is; ranges outside the arena
  // are errors even after a bad range.
  ArenaRank r;
  float *values = r.at<float>(0);
  for (int64_t i = 0; i < 600; ++i)
    values[i] = 0.5f * float(i);
  const int64_t offsets[3] = {0, 1024, 2000};
  const int64_t counts[3] = {100, 200, 0};
  EXPECT_TRUE(cpu::allFiniteRanges(&r.rank, DType::F32, offsets, counts, 3));
  EXPECT_TRUE(cpu::allFiniteRanges(&r.rank, DType::F32, offsets, counts, 0));
  for (int64_t at : {int64_t{99}, int64_t{256 + 150}}) {
    const float saved = values[at];
    values[at] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(cpu::allFiniteRanges(&r.rank, DType::F32, offsets, counts, 3))
        << at;
    values[at] = saved;
  }
  // Element 100 lies outside the first range.
  values[100] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(cpu::allFiniteRanges(&r.rank, DType::F32, offsets, counts, 3));
  const int64_t outside[2] = {0, 4000};
  EXPECT_THROW(cpu::allFiniteRanges(&r.rank, DType::F32, outside, counts, 2),
               std::runtime_error);
}

TEST(CpuServices, AllFiniteRejectsRangesOutsideTheArenaAndBf16) {
  ArenaRank r;
  EXPECT_THROW(cpu::allFinite(&r.rank, DType::F32, 4000, 100),
               std::runtime_error);
  EXPECT_THROW(cpu::allFinite(&r.rank, DType::BF16, 0, 4),
               std::invalid_argument);
  EXPECT_TRUE(cpu::allFinite(&r.rank, DType::F32, 0, 0));
}
