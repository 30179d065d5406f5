//===- ShardRanges.cpp - Kernels on a range of unit positions -------------===//
//
// The "Unit ranges" kernels of kernels.inc. A rank holding shard s
// (shardIndexOf in rank.h: its rank on a 1-D grid) owns unit positions
// [s * shardElems, (s + 1) * shardElems); a range kernel acts on the part of
// [begin, begin + count) that the calling rank owns by calling the backend's
// pointer kernel on it, with the local pointer shard + (lo - s * shardElems)
// and, for random kernels, the global index globalIndex + (lo - begin). So
// every rank runs the same emitted code and the values depend only on the
// global index, not on the number of ranks.
//
// This file is compiled once per backend with DPRT_SHARD_RANGES_BACKEND set
// to its namespace (cpu or cuda): dprt::cpu::fill_range calls
// dprt::cpu::fill, dprt::cuda::fill_range calls dprt::cuda::fill. Pointers
// are only offset, never dereferenced, so device pointers are fine.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>
#include <type_traits>

#ifndef DPRT_SHARD_RANGES_BACKEND
#error "compile with -DDPRT_SHARD_RANGES_BACKEND=cpu or =cuda"
#endif

namespace dprt::DPRT_SHARD_RANGES_BACKEND {
namespace {

/// The part of a unit range that the calling rank owns.
struct OwnedPart {
  int64_t local;  ///< first element in the rank's shard
  int64_t offset; ///< its distance from `begin` (added to the global index)
  int64_t count;  ///< elements, > 0
};

/// False when the rank owns none of [begin, begin + count).
bool ownedPart(const Rank *rank, const char *kernel, int64_t shardElems,
               int64_t begin, int64_t count, OwnedPart &part) {
  if (shardElems < 0 || begin < 0 || count < 0)
    throw std::invalid_argument(std::string(kernel) +
                                ": negative shard size, begin or count");
  const int64_t shardBegin =
      static_cast<int64_t>(shardIndexOf(rank)) * shardElems;
  const int64_t shardEnd = shardBegin + shardElems;
  const int64_t lo = begin > shardBegin ? begin : shardBegin;
  const int64_t end = begin + count;
  const int64_t hi = end < shardEnd ? end : shardEnd;
  if (lo >= hi)
    return false;
  part = OwnedPart{lo - shardBegin, lo - begin, hi - lo};
  return true;
}

template <class T> T *at(T *base, int64_t elems, DType dt) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T *>(reinterpret_cast<Byte *>(base) +
                               elems * sizeOf(dt));
}

/// The noise index of a part's first element: -1 (no noise) stays -1.
int64_t noiseAt(int64_t noiseIndex, const OwnedPart &part) {
  return noiseIndex < 0 ? -1 : noiseIndex + part.offset;
}

/// The compute-type copy at the owned part, or nullptr with none.
void *copyAt(void *params, const OwnedPart &p, DType dt) {
  return params ? at(params, p.local, dt) : nullptr;
}

} // namespace

void init_normal_range(Rank *rank, DType acc, void *shard, int64_t shardElems,
                       int64_t begin, int64_t count, int64_t globalIndex,
                       double std) {
  OwnedPart p;
  if (ownedPart(rank, "init_normal_range", shardElems, begin, count, p))
    init_normal(rank, acc, at(shard, p.local, acc), p.count,
                globalIndex + p.offset, std);
}

void init_uniform_range(Rank *rank, DType acc, void *shard, int64_t shardElems,
                        int64_t begin, int64_t count, int64_t globalIndex,
                        double bound) {
  OwnedPart p;
  if (ownedPart(rank, "init_uniform_range", shardElems, begin, count, p))
    init_uniform(rank, acc, at(shard, p.local, acc), p.count,
                 globalIndex + p.offset, bound);
}

void fill_range(Rank *rank, DType acc, void *shard, int64_t shardElems,
                int64_t begin, int64_t count, double value) {
  OwnedPart p;
  if (ownedPart(rank, "fill_range", shardElems, begin, count, p))
    fill(rank, acc, at(shard, p.local, acc), p.count, value);
}

void add_noise_range(Rank *rank, DType acc, void *gradShard, int64_t shardElems,
                     int64_t begin, int64_t count, int64_t globalIndex) {
  OwnedPart p;
  if (ownedPart(rank, "add_noise_range", shardElems, begin, count, p))
    add_noise(rank, acc, at(gradShard, p.local, acc), p.count,
              globalIndex + p.offset);
}

void sgd_update_range(Rank *rank, DType acc, void *master, const void *grad,
                      int64_t shardElems, int64_t begin, int64_t count,
                      int64_t noiseIndex, DType dt, void *params) {
  OwnedPart p;
  if (ownedPart(rank, "sgd_update_range", shardElems, begin, count, p))
    sgd_update(rank, acc, at(master, p.local, acc), at(grad, p.local, acc),
               p.count, noiseAt(noiseIndex, p), dt, copyAt(params, p, dt));
}

void momentum_update_range(Rank *rank, DType acc, void *master, void *velocity,
                           const void *grad, int64_t shardElems, int64_t begin,
                           int64_t count, double momentum, bool nesterov,
                           int64_t noiseIndex, DType dt, void *params) {
  OwnedPart p;
  if (ownedPart(rank, "momentum_update_range", shardElems, begin, count, p))
    momentum_update(rank, acc, at(master, p.local, acc),
                    at(velocity, p.local, acc), at(grad, p.local, acc), p.count,
                    momentum, nesterov, noiseAt(noiseIndex, p), dt,
                    copyAt(params, p, dt));
}

void adamw_update_range(Rank *rank, DType acc, void *master, void *m, void *v,
                        const void *grad, int64_t shardElems, int64_t begin,
                        int64_t count, double beta1, double beta2, double eps,
                        int64_t noiseIndex, DType dt, void *params) {
  OwnedPart p;
  if (ownedPart(rank, "adamw_update_range", shardElems, begin, count, p))
    adamw_update(rank, acc, at(master, p.local, acc), at(m, p.local, acc),
                 at(v, p.local, acc), at(grad, p.local, acc), p.count, beta1,
                 beta2, eps, noiseAt(noiseIndex, p), dt, copyAt(params, p, dt));
}

} // namespace dprt::DPRT_SHARD_RANGES_BACKEND
