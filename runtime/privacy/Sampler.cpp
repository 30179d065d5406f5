//===- Sampler.cpp - Logical batches of DP-SGD ----------------------------===//

#include "privacy/Sampler.h"

#include "dprt/keys.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace dprt::privacy {
namespace {

/// The sampling key of a run with `seed`, derived as the training program
/// derives it (keys.h), so that a sampler built from a seed draws the
/// batches that run draws.
NoiseKey seedKey(uint64_t seed) {
  uint64_t words[4];
  noiseKeyWordsFromSeed(seed, words);
  return samplingKeyFromWords(words);
}

} // namespace

PoissonSampler::PoissonSampler(uint64_t seed, int64_t datasetSize, double q,
                               NoiseGenerator generator)
    : PoissonSampler(seedKey(seed), datasetSize, q, generator) {}

PoissonSampler::PoissonSampler(const NoiseKey &key, int64_t datasetSize,
                               double q, NoiseGenerator generator)
    : key_(key), generator_(generator), datasetSize_(datasetSize), q_(q),
      log1mQ_(std::log1p(-q)) {
  assert(datasetSize >= 0 && "negative dataset size");
  assert(q >= 0 && q <= 1 && "sampling rate outside [0, 1]");
}

std::vector<int64_t> PoissonSampler::sample(int64_t step) const {
  std::vector<int64_t> batch;
  if (q_ == 0 || datasetSize_ == 0)
    return batch;
  if (q_ == 1) {
    batch.resize(datasetSize_);
    for (int64_t i = 0; i < datasetSize_; ++i)
      batch[i] = i;
    return batch;
  }
  // Expected size plus a few standard deviations avoids most regrowth.
  double expected = q_ * datasetSize_;
  batch.reserve(static_cast<size_t>(expected + 6 * std::sqrt(expected) + 8));
  int64_t next = 0; // first record not yet decided
  for (uint64_t draw = 0;; ++draw) {
    double u = uniformF64(generator_, key_, static_cast<uint64_t>(step), draw,
                          kSamplingStream);
    // Records skipped before the next included one; compared in double so a
    // huge gap never overflows the integer conversion.
    double gap = std::floor(std::log(u) / log1mQ_);
    if (gap >= static_cast<double>(datasetSize_ - next))
      break;
    next += static_cast<int64_t>(gap);
    batch.push_back(next);
    ++next;
  }
  return batch;
}

UserSampler::UserSampler(uint64_t seed,
                         std::vector<std::vector<int64_t>> userRecords,
                         int64_t maxRecords, double q, NoiseGenerator generator)
    : UserSampler(seedKey(seed), std::move(userRecords), maxRecords, q,
                  generator) {}

UserSampler::UserSampler(const NoiseKey &key,
                         std::vector<std::vector<int64_t>> userRecords,
                         int64_t maxRecords, double q, NoiseGenerator generator)
    : users_(key, static_cast<int64_t>(userRecords.size()), q, generator),
      key_(key), generator_(generator), userRecords_(std::move(userRecords)),
      maxRecords_(maxRecords) {
  assert(maxRecords >= 1 && "a user contributes at least one record");
}

std::vector<int64_t> UserSampler::recordsOf(int64_t step, int64_t user) const {
  const std::vector<int64_t> &records = userRecords_[user];
  const uint64_t n = records.size();
  const uint64_t m = std::min<uint64_t>(n, maxRecords_);
  std::vector<uint64_t> chosen; // positions in `records`
  chosen.reserve(m);
  for (uint64_t j = n - m, i = 0; j < n; ++j, ++i) {
    const uint64_t bits = randomBits64(
        generator_, key_, static_cast<uint64_t>(step),
        static_cast<uint64_t>(user) * maxRecords_ + i, kUserRecordsStream);
    const uint64_t t = static_cast<uint64_t>(
        (static_cast<unsigned __int128>(bits) * (j + 1)) >> 64);
    chosen.push_back(
        std::find(chosen.begin(), chosen.end(), t) == chosen.end() ? t : j);
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<int64_t> result;
  result.reserve(m);
  for (uint64_t position : chosen)
    result.push_back(records[position]);
  return result;
}

std::vector<int64_t> UserSampler::sample(int64_t step) const {
  std::vector<int64_t> slots;
  for (int64_t user : users_.sample(step)) {
    std::vector<int64_t> records = recordsOf(step, user);
    slots.insert(slots.end(), records.begin(), records.end());
    slots.resize(slots.size() + (maxRecords_ - records.size()), -1);
  }
  return slots;
}

ShuffleSampler::ShuffleSampler(uint64_t seed, int64_t datasetSize,
                               int64_t batchSize, NoiseGenerator generator)
    : ShuffleSampler(seedKey(seed), datasetSize, batchSize, generator) {}

ShuffleSampler::ShuffleSampler(const NoiseKey &key, int64_t datasetSize,
                               int64_t batchSize, NoiseGenerator generator)
    : key_(key), generator_(generator), datasetSize_(datasetSize),
      batchSize_(batchSize) {
  assert(datasetSize >= 1 && "empty dataset");
  assert(batchSize >= 1 && "empty batch");
  // Smallest h with 2^(2h) >= N, at least 1: the walk then needs fewer than
  // 4 network applications per value on average (2^(2h) < 4N).
  int bits = 0;
  while (bits < 64 &&
         (uint64_t{1} << bits) < static_cast<uint64_t>(datasetSize))
    ++bits;
  halfBits_ = std::max(1, (bits + 1) / 2);
}

uint64_t ShuffleSampler::feistel(uint64_t epoch, uint64_t value) const {
  const int kRounds = 8;
  uint64_t mask = (uint64_t{1} << halfBits_) - 1;
  uint64_t left = value >> halfBits_, right = value & mask;
  for (uint64_t round = 0; round < kRounds; ++round) {
    uint64_t f = randomBits64(generator_, key_, epoch, (round << 32) | right,
                              kShuffleStream) &
                 mask;
    uint64_t newRight = left ^ f;
    left = right;
    right = newRight;
  }
  return (left << halfBits_) | right;
}

int64_t ShuffleSampler::permute(int64_t epoch, int64_t position) const {
  assert(position >= 0 && position < datasetSize_);
  uint64_t value = static_cast<uint64_t>(position);
  do
    value = feistel(static_cast<uint64_t>(epoch), value);
  while (value >= static_cast<uint64_t>(datasetSize_));
  return static_cast<int64_t>(value);
}

std::vector<int64_t> ShuffleSampler::sample(int64_t step) const {
  assert(step >= 0 && "negative step");
  int64_t epoch = step / stepsPerEpoch();
  int64_t first = (step % stepsPerEpoch()) * batchSize_;
  int64_t last = std::min(first + batchSize_, datasetSize_);
  std::vector<int64_t> batch;
  batch.reserve(last - first);
  for (int64_t position = first; position < last; ++position)
    batch.push_back(permute(epoch, position));
  std::sort(batch.begin(), batch.end());
  return batch;
}

PhysicalBatchPlan::Slice PhysicalBatchPlan::slice(int64_t microStep,
                                                  int64_t rank) const {
  assert(microStep >= 0 && microStep < microSteps);
  assert(rank >= 0 && rank < ranks);
  const int64_t full = microStep * ranks * physicalBatch;
  if (microStep + 1 < microSteps)
    return {full + rank * physicalBatch, physicalBatch};
  const int64_t granules = (logicalBatch - full) / granule;
  const int64_t each = granules / ranks, extra = granules % ranks;
  return {full + granule * (rank * each + std::min(rank, extra)),
          granule * (each + (rank < extra ? 1 : 0))};
}

int64_t PhysicalBatchPlan::logicalPosition(int64_t microStep, int64_t rank,
                                           int64_t row) const {
  assert(row >= 0 && row < physicalBatch);
  Slice s = slice(microStep, rank);
  return row < s.count ? s.first + row : -1;
}

PhysicalBatchPlan planPhysicalBatches(int64_t logicalBatch, int64_t ranks,
                                      int64_t physicalBatch, int64_t granule) {
  assert(logicalBatch >= 0 && ranks >= 1 && physicalBatch >= 1);
  assert(granule >= 1 && physicalBatch % granule == 0 &&
         logicalBatch % granule == 0);
  int64_t perMicroStep = ranks * physicalBatch;
  int64_t microSteps =
      std::max<int64_t>(1, (logicalBatch + perMicroStep - 1) / perMicroStep);
  return {logicalBatch, ranks, physicalBatch, microSteps, granule};
}

} // namespace dprt::privacy
