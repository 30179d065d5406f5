//===- ThreadCommunicator.cpp - Collectives between threads ---------------===//

#include "common/ThreadCommunicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

namespace dprt {

namespace {
enum class Collective : int32_t { AllGather, ReduceScatter, AllReduceHost };

const char *collectiveName(Collective op) {
  switch (op) {
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllReduceHost:
    return "all_reduce_host";
  }
  return "collective";
}
} // namespace

/// State shared by the communicators of one group.
struct ThreadGroup {
  explicit ThreadGroup(int world)
      : world(world), pointers(world), counts(world), ops(world),
        dtypes(world) {}

  const int world;
  std::mutex mutex;
  std::condition_variable wake;
  int arrived = 0;
  /// Completed barriers: a waiter leaves when it changes, so that a rank
  /// already in the next barrier cannot be mistaken for a late arrival.
  uint64_t generation = 0;
  bool aborted = false;
  std::string reason;

  // What each rank passes to the collective in progress. Written by the
  // owning rank before the first barrier, read by all after it.
  std::vector<const void *> pointers;
  std::vector<int64_t> counts;
  std::vector<Collective> ops;
  std::vector<DType> dtypes;

  void barrier() {
    std::unique_lock<std::mutex> lock(mutex);
    if (aborted)
      throw CommunicatorAborted(reason);
    uint64_t mine = generation;
    if (++arrived == world) {
      arrived = 0;
      ++generation;
      wake.notify_all();
      return;
    }
    wake.wait(lock, [&] { return generation != mine || aborted; });
    if (generation == mine)
      throw CommunicatorAborted(reason);
  }

  void abort(const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!aborted) {
      aborted = true;
      reason = why;
    }
    wake.notify_all();
  }

  /// Publishes this rank's arguments and waits for the others; throws on
  /// every rank alike when the ranks disagree on the collective or its size
  /// (calling code that diverged between ranks would otherwise read out of
  /// bounds).
  void publish(int index, Collective op, const void *pointer, int64_t count,
               DType dt) {
    pointers[index] = pointer;
    counts[index] = count;
    ops[index] = op;
    dtypes[index] = dt;
    barrier();
    for (int r = 1; r < world; ++r) {
      if (ops[r] != ops[0] || counts[r] != counts[0] ||
          dtypes[r] != dtypes[0]) {
        std::ostringstream os;
        os << "thread communicator: rank 0 called " << collectiveName(ops[0])
           << " with " << counts[0] << " " << nameOf(dtypes[0])
           << " elements but rank " << r << " called " << collectiveName(ops[r])
           << " with " << counts[r] << " " << nameOf(dtypes[r])
           << "; every rank must issue the same collectives in the same order";
        throw std::runtime_error(os.str());
      }
    }
  }
};

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<ThreadGroup> group,
                                       int index)
    : group_(std::move(group)), index_(index) {}

int ThreadCommunicator::world() const { return group_->world; }

void ThreadCommunicator::allGather(Rank *, DType dt, const void *shard,
                                   void *full, int64_t shardElems, int32_t) {
  ThreadGroup &g = *group_;
  g.publish(index_, Collective::AllGather, shard, shardElems, dt);
  const int64_t bytes = shardElems * sizeOf(dt);
  char *out = static_cast<char *>(full);
  for (int r = 0; r < g.world; ++r) {
    char *dst = out + r * bytes;
    // In place (shard == full + rank * shardElems) the own part is there.
    if (dst != g.pointers[r])
      std::memcpy(dst, g.pointers[r], static_cast<size_t>(bytes));
  }
  g.barrier();
}

namespace {
template <class T>
void sumSlices(const std::vector<const void *> &fulls, int64_t first, int64_t n,
               T *shard, bool accumulate) {
  const int world = static_cast<int>(fulls.size());
  for (int64_t i = 0; i < n; ++i) {
    T sum = static_cast<const T *>(fulls[0])[first + i];
    for (int r = 1; r < world; ++r)
      sum += static_cast<const T *>(fulls[r])[first + i];
    shard[i] = accumulate ? shard[i] + sum : sum;
  }
}
} // namespace

void ThreadCommunicator::reduceScatter(Rank *, DType acc, const void *full,
                                       void *shard, int64_t shardElems,
                                       bool accumulate, int32_t) {
  if (acc != DType::F32 && acc != DType::F64)
    throw std::invalid_argument(
        std::string("reduce_scatter sums accumulation buffers (f32 or f64), "
                    "got ") +
        nameOf(acc));
  ThreadGroup &g = *group_;
  g.publish(index_, Collective::ReduceScatter, full, shardElems, acc);
  const int64_t first = static_cast<int64_t>(index_) * shardElems;
  if (acc == DType::F64)
    sumSlices(g.pointers, first, shardElems, static_cast<double *>(shard),
              accumulate);
  else
    sumSlices(g.pointers, first, shardElems, static_cast<float *>(shard),
              accumulate);
  g.barrier();
}

void ThreadCommunicator::allReduceHost(double *values, int count) {
  ThreadGroup &g = *group_;
  g.publish(index_, Collective::AllReduceHost, values, count, DType::F64);
  std::vector<double> sum(static_cast<const double *>(g.pointers[0]),
                          static_cast<const double *>(g.pointers[0]) + count);
  for (int r = 1; r < g.world; ++r)
    for (int i = 0; i < count; ++i)
      sum[i] += static_cast<const double *>(g.pointers[r])[i];
  // Every rank must have read `values` before anyone overwrites it.
  g.barrier();
  std::memcpy(values, sum.data(), sizeof(double) * count);
}

void ThreadCommunicator::barrier() { group_->barrier(); }

void ThreadCommunicator::abort(const std::string &reason) {
  group_->abort(reason);
}

std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(int world) {
  if (world < 1)
    throw std::invalid_argument("makeThreadCommunicators: world must be >= 1, "
                                "got " +
                                std::to_string(world));
  auto group = std::make_shared<ThreadGroup>(world);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world; ++r)
    comms.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return comms;
}

} // namespace dprt
