//===- Sampler.h - Logical batches of DP-SGD --------------------*- C++ -*-===//
//
// Which records form the logical batch of a training step. Every sampler is a
// pure function of (key, step): a run resumed at step s draws exactly the
// batches it would have drawn without the interruption, from nothing saved
// but the key and s.
//
//  - PoissonSampler: every record independently with probability q, the
//    sampling that the RDP accountant assumes. The batch size varies.
//  - ShuffleSampler: epochs of a keyed random permutation cut into
//    consecutive batches. Not what the accountant assumes: a run using it
//    must say so in its privacy report.
//
// The randomness of the batch is part of the privacy guarantee
// (amplification by subsampling assumes the adversary does not know who was
// sampled): a secure run keys the sampler with a secret ChaCha20 key, like
// the noise.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PRIVACY_SAMPLER_H
#define DPRT_PRIVACY_SAMPLER_H

#include "dprt/rng.h"

#include <cstdint>
#include <vector>

namespace dprt::privacy {

/// Poisson sampling with rate q over records 0 .. datasetSize-1.
///
/// The gaps between included records are geometric: with u uniform in
/// (0, 1], G = floor(log u / log(1 - q)) has P(G >= k) = (1 - q)^k, which is
/// the law of the number of records skipped before the next Bernoulli(q)
/// success. Drawing the gaps instead of one coin per record costs O(qN) per
/// step. The j-th gap of step s uses uniform number j of
/// (key, step = s, stream = kSamplingStream).
class PoissonSampler {
public:
  /// Keyed as a run with `seed` keys its sampler and noise (dprt/keys.h).
  PoissonSampler(uint64_t seed, int64_t datasetSize, double q,
                 NoiseGenerator generator = NoiseGenerator::Philox);
  PoissonSampler(const NoiseKey &key, int64_t datasetSize, double q,
                 NoiseGenerator generator);

  /// The sorted indices of the records in the logical batch of `step`.
  std::vector<int64_t> sample(int64_t step) const;

  double samplingRate() const { return q_; }
  int64_t datasetSize() const { return datasetSize_; }
  /// q N, the divisor of the noised gradient sum (DP-MATH.md step 4).
  double expectedBatchSize() const { return q_ * datasetSize_; }

private:
  NoiseKey key_;
  NoiseGenerator generator_;
  int64_t datasetSize_;
  double q_;
  double log1mQ_;
};

/// User-level Poisson sampling: every user independently with probability q
/// (a PoissonSampler over the U users, same key and stream), then, for each
/// sampled user with n records, min(n, k) of them chosen uniformly at random
/// without replacement (Floyd's algorithm: for j = n - m .. n - 1, draw
/// t uniform in [0, j] and take t, or j if t is taken already; every m-subset
/// is equally likely). The draws of user u at step s are uniforms
/// u * k + i, i < m, of (key, step = s, stream = kUserRecordsStream): a pure
/// function of (key, step, u), the same on every rank and after a resume.
/// An integer in [0, j] is floor(64 random bits * (j + 1) / 2^64), whose
/// deviation from uniform is below (j + 1) / 2^64.
class UserSampler {
public:
  /// `userRecords[u]`: the records of user u in increasing order; k =
  /// maxRecords >= 1. Keyed as a run with `seed` keys its sampler.
  UserSampler(uint64_t seed, std::vector<std::vector<int64_t>> userRecords,
              int64_t maxRecords, double q,
              NoiseGenerator generator = NoiseGenerator::Philox);
  UserSampler(const NoiseKey &key,
              std::vector<std::vector<int64_t>> userRecords, int64_t maxRecords,
              double q, NoiseGenerator generator);

  /// The slots of `step`'s logical batch: for each sampled user in
  /// increasing order, k entries, its chosen records in increasing order
  /// followed by -1 (padding) up to k. The size is k times the users.
  std::vector<int64_t> sample(int64_t step) const;
  /// The records the step uses of user `user` (sorted, at most k).
  std::vector<int64_t> recordsOf(int64_t step, int64_t user) const;

  int64_t users() const { return static_cast<int64_t>(userRecords_.size()); }
  int64_t maxRecords() const { return maxRecords_; }
  double samplingRate() const { return users_.samplingRate(); }
  /// q U, the divisor of the noised gradient sum.
  double expectedBatchSize() const { return users_.expectedBatchSize(); }

private:
  PoissonSampler users_;
  NoiseKey key_;
  NoiseGenerator generator_;
  std::vector<std::vector<int64_t>> userRecords_;
  int64_t maxRecords_;
};

/// Epochs of a keyed pseudo-random permutation of the records, each epoch cut
/// into ceil(N / batchSize) consecutive batches (the last one smaller when
/// batchSize does not divide N). Step s belongs to epoch s / stepsPerEpoch().
///
/// The permutation of epoch e is an 8-round balanced Feistel network on
/// 2h-bit integers (2^(2h) >= N, round function = the low h bits of the
/// counter-based generator at (step = e, index = round << 32 | right half,
/// stream = kShuffleStream)), restricted to [0, N) by cycle walking: applying
/// the network again until the value falls in [0, N) keeps it a bijection of
/// [0, N). Position p of epoch e is record permute(e, p), computed in O(1)
/// expected time, so a batch costs O(batchSize) and no permutation is stored.
class ShuffleSampler {
public:
  /// Keyed as a run with `seed` keys its sampler and noise (dprt/keys.h).
  ShuffleSampler(uint64_t seed, int64_t datasetSize, int64_t batchSize,
                 NoiseGenerator generator = NoiseGenerator::Philox);
  ShuffleSampler(const NoiseKey &key, int64_t datasetSize, int64_t batchSize,
                 NoiseGenerator generator);

  /// The sorted indices of the records in the batch of `step`.
  std::vector<int64_t> sample(int64_t step) const;

  /// The record at position `position` of epoch `epoch`'s permutation.
  int64_t permute(int64_t epoch, int64_t position) const;

  int64_t stepsPerEpoch() const {
    return (datasetSize_ + batchSize_ - 1) / batchSize_;
  }
  int64_t datasetSize() const { return datasetSize_; }
  int64_t batchSize() const { return batchSize_; }

private:
  uint64_t feistel(uint64_t epoch, uint64_t value) const;

  NoiseKey key_;
  NoiseGenerator generator_;
  int64_t datasetSize_;
  int64_t batchSize_;
  int halfBits_;
};

/// How a logical batch of L records is spread over `ranks` ranks that each
/// run physical batches of at most `physicalBatch` rows (static shapes):
/// M = max(1, ceil(L / (ranks * physicalBatch))) micro-steps, all ranks
/// running all M of them (the collectives need every rank).
///
/// Layout, micro-step major. Every micro-step but the last is full: row
/// `row` of rank `rank` at micro-step m < M - 1 holds logical position
///   p = m * ranks * physicalBatch + rank * physicalBatch + row.
/// The last micro-step's R = L - (M - 1) * ranks * physicalBatch positions
/// are dealt out evenly in whole granules (a user's `granule` slots under
/// user-level DP, else 1): of its G = R / granule granules, rank r holds
/// G / ranks, and one more if r < G % ranks, consecutive and in rank order.
/// So the last micro-step's ranks hold at most one granule more than each
/// other, and a program with smaller micro-steps (ProgramSpec::
/// smallerMicrosteps) runs it on few rows. Rows past a slice's count are
/// padding (mask 0, clip factor 0). Logical position p is the p-th index of
/// the sorted batch from the sampler.
struct PhysicalBatchPlan {
  int64_t logicalBatch;
  int64_t ranks;
  int64_t physicalBatch;
  int64_t microSteps;
  int64_t granule = 1;

  /// Logical positions [first, first + count) of one (micro-step, rank):
  /// rows 0 .. count-1 are real, rows count .. physicalBatch-1 padding.
  struct Slice {
    int64_t first;
    int64_t count;
  };
  Slice slice(int64_t microStep, int64_t rank) const;

  /// The logical position held by a row, or -1 for padding.
  int64_t logicalPosition(int64_t microStep, int64_t rank, int64_t row) const;
};

/// Requires logicalBatch >= 0, ranks >= 1, physicalBatch >= 1, granule >= 1
/// dividing physicalBatch and logicalBatch.
PhysicalBatchPlan planPhysicalBatches(int64_t logicalBatch, int64_t ranks,
                                      int64_t physicalBatch,
                                      int64_t granule = 1);

} // namespace dprt::privacy

#endif // DPRT_PRIVACY_SAMPLER_H
