//===- ThreadCommunicator.cpp - Collectives between threads ---------------===//

#include "common/ThreadCommunicator.h"

#include "common/CollectiveChecks.h"
#include "common/FaultReport.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

namespace dprt {

namespace {
enum class Collective : int32_t {
  AllGather,
  ReduceScatter,
  AllReduce,
  AllReduceHost,
  Barrier,
  Split
};

const char *collectiveName(Collective op) {
  switch (op) {
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllReduceHost:
    return "all_reduce_host";
  case Collective::Barrier:
    return "barrier";
  case Collective::Split:
    return "split";
  }
  return "collective";
}

} // namespace

/// State shared by the communicators of one group.
struct ThreadGroup {
  ThreadGroup(std::vector<int> globalRanks, double timeoutSeconds)
      : world(static_cast<int>(globalRanks.size())),
        globalRanks(std::move(globalRanks)), timeoutSeconds(timeoutSeconds),
        here(world, 0), calls(world) {}

  /// What a rank passes to the collective in progress. Written by the
  /// owning rank before the first barrier, read by all after it.
  struct Call {
    Collective op = Collective::Barrier;
    int64_t sequence = 0;
    int64_t count = 0;
    DType dt = DType::F64;
    const void *pointer = nullptr;
    int color = 0, key = 0;
  };

  const int world;
  /// The rank of the grid of each member, for messages.
  const std::vector<int> globalRanks;
  const double timeoutSeconds;
  std::mutex mutex;
  std::condition_variable wake;
  int arrived = 0;
  /// Which members are in the barrier in progress.
  std::vector<char> here;
  /// Completed barriers: a waiter leaves when it changes, so that a rank
  /// already in the next barrier cannot be mistaken for a late arrival.
  uint64_t generation = 0;
  bool aborted = false;
  std::string reason;
  std::vector<Call> calls;
  /// The groups a split made, by (sequence, color), until every member
  /// has taken its own.
  std::map<std::pair<int64_t, int>, std::shared_ptr<ThreadGroup>> children;

  void barrier(int index, Collective op, int64_t sequence) {
    std::unique_lock<std::mutex> lock(mutex);
    if (aborted)
      throw CommunicatorAborted(reason);
    uint64_t mine = generation;
    here[index] = 1;
    if (++arrived == world) {
      arrived = 0;
      std::fill(here.begin(), here.end(), 0);
      ++generation;
      wake.notify_all();
      return;
    }
    const auto deadline =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(timeoutSeconds));
    wake.wait_until(lock, deadline,
                    [&] { return generation != mine || aborted; });
    if (generation != mine)
      return;
    if (aborted)
      throw CommunicatorAborted(reason);
    std::vector<int> missing;
    for (int r = 0; r < world; ++r)
      if (!here[r])
        missing.push_back(globalRanks[r]);
    std::ostringstream os;
    os << "rank " << globalRanks[index] << ": "
       << faults::describeCollective(collectiveName(op), sequence)
       << " did not finish within " << timeoutSeconds
       << " s (--collective-timeout): rank"
       << (missing.size() == 1 ? " " : "s ") << listOf(missing)
       << (missing.size() == 1 ? " has" : " have")
       << " not reached it (stopped, or running other code)";
    aborted = true;
    reason = os.str();
    wake.notify_all();
    throw CollectiveTimeout(reason);
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
  /// every rank alike when the ranks disagree on the collective, its number
  /// or its size. Every collective barriers again before it returns, so that
  /// no rank overwrites its call while another still reads it.
  void publish(int index, const Call &call) {
    calls[index] = call;
    barrier(index, call.op, call.sequence);
    const Call &first = calls[0];
    for (int r = 1; r < world; ++r) {
      const Call &other = calls[r];
      if (other.op != first.op || other.sequence != first.sequence ||
          other.count != first.count || other.dt != first.dt) {
        std::ostringstream os;
        os << "thread communicator: rank " << globalRanks[0] << " called "
           << collectiveName(first.op) << " #" << first.sequence << " with "
           << first.count << " " << nameOf(first.dt) << " elements but rank "
           << globalRanks[r] << " called " << collectiveName(other.op) << " #"
           << other.sequence << " with " << other.count << " "
           << nameOf(other.dt)
           << " elements; every rank must issue the same collectives in the "
              "same order";
        throw std::runtime_error(os.str());
      }
    }
  }
};

ThreadCommunicator::ThreadCommunicator(std::shared_ptr<ThreadGroup> group,
                                       int index)
    : group_(std::move(group)), index_(index) {}

int ThreadCommunicator::size() const { return group_->world; }

void ThreadCommunicator::allGather(Rank *, DType dt, const void *shard,
                                   void *full, int64_t shardElems, int32_t) {
  ThreadGroup &g = *group_;
  const int64_t sequence = ++sequence_;
  g.publish(index_,
            {Collective::AllGather, sequence, shardElems, dt, shard, 0, 0});
  const int64_t bytes = shardElems * sizeOf(dt);
  char *out = static_cast<char *>(full);
  for (int r = 0; r < g.world; ++r) {
    char *dst = out + r * bytes;
    // In place (shard == full + rank * shardElems) the own part is there.
    if (dst != g.calls[r].pointer)
      std::memcpy(dst, g.calls[r].pointer, static_cast<size_t>(bytes));
  }
  g.barrier(index_, Collective::AllGather, sequence);
}

namespace {
/// out[i] (+)= sum over r in rank order of sources[r][first + i].
template <class T>
void sumInRankOrder(const std::vector<ThreadGroup::Call> &sources,
                    int64_t first, int64_t n, T *out, bool accumulate) {
  const int world = static_cast<int>(sources.size());
  for (int64_t i = 0; i < n; ++i) {
    T sum = static_cast<const T *>(sources[0].pointer)[first + i];
    for (int r = 1; r < world; ++r)
      sum += static_cast<const T *>(sources[r].pointer)[first + i];
    out[i] = accumulate ? out[i] + sum : sum;
  }
}

template <class T>
void allReduceChunks(ThreadGroup &g, int index, int64_t sequence,
                     int64_t count) {
  // Each rank sums one chunk of every rank's buffer, then writes it into
  // every rank's buffer once all have read.
  const int64_t chunk = (count + g.world - 1) / g.world;
  const int64_t lo = std::min(count, index * chunk);
  const int64_t hi = std::min(count, lo + chunk);
  std::vector<T> sum(static_cast<size_t>(hi - lo));
  sumInRankOrder(g.calls, lo, hi - lo, sum.data(), false);
  g.barrier(index, Collective::AllReduce, sequence);
  for (int r = 0; r < g.world; ++r)
    std::memcpy(static_cast<T *>(const_cast<void *>(g.calls[r].pointer)) + lo,
                sum.data(), sum.size() * sizeof(T));
  g.barrier(index, Collective::AllReduce, sequence);
}
} // namespace

void ThreadCommunicator::reduceScatter(Rank *, DType acc, const void *full,
                                       void *shard, int64_t shardElems,
                                       bool accumulate, int32_t) {
  requireAcc(acc, "reduce_scatter");
  ThreadGroup &g = *group_;
  const int64_t sequence = ++sequence_;
  g.publish(index_,
            {Collective::ReduceScatter, sequence, shardElems, acc, full, 0, 0});
  const int64_t first = static_cast<int64_t>(index_) * shardElems;
  if (acc == DType::F64)
    sumInRankOrder(g.calls, first, shardElems, static_cast<double *>(shard),
                   accumulate);
  else
    sumInRankOrder(g.calls, first, shardElems, static_cast<float *>(shard),
                   accumulate);
  g.barrier(index_, Collective::ReduceScatter, sequence);
}

void ThreadCommunicator::allReduce(Rank *, DType acc, void *data, int64_t count,
                                   int32_t) {
  requireAcc(acc, "all_reduce");
  ThreadGroup &g = *group_;
  const int64_t sequence = ++sequence_;
  g.publish(index_, {Collective::AllReduce, sequence, count, acc, data, 0, 0});
  if (acc == DType::F64)
    allReduceChunks<double>(g, index_, sequence, count);
  else
    allReduceChunks<float>(g, index_, sequence, count);
}

void ThreadCommunicator::allReduceHost(double *values, int count) {
  ThreadGroup &g = *group_;
  const int64_t sequence = ++sequence_;
  g.publish(index_, {Collective::AllReduceHost, sequence, count, DType::F64,
                     values, 0, 0});
  std::vector<double> sum(static_cast<size_t>(count));
  sumInRankOrder(g.calls, 0, count, sum.data(), false);
  // Every rank must have read `values` before anyone overwrites it.
  g.barrier(index_, Collective::AllReduceHost, sequence);
  std::memcpy(values, sum.data(), sizeof(double) * count);
}

void ThreadCommunicator::barrier() {
  const int64_t sequence = ++sequence_;
  group_->publish(
      index_, {Collective::Barrier, sequence, 0, DType::F64, nullptr, 0, 0});
  // publish compares every rank's call after its barrier: nobody may write
  // the next call before all have compared.
  group_->barrier(index_, Collective::Barrier, sequence);
}

std::unique_ptr<Communicator> ThreadCommunicator::split(int color, int key) {
  ThreadGroup &g = *group_;
  const int64_t sequence = ++sequence_;
  g.publish(index_,
            {Collective::Split, sequence, 0, DType::F64, nullptr, color, key});
  std::vector<int> members;
  for (int r = 0; r < g.world; ++r)
    if (g.calls[r].color == color)
      members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return g.calls[a].key < g.calls[b].key;
  });
  const int index = static_cast<int>(
      std::find(members.begin(), members.end(), index_) - members.begin());
  std::shared_ptr<ThreadGroup> child;
  {
    std::lock_guard<std::mutex> lock(g.mutex);
    std::shared_ptr<ThreadGroup> &slot = g.children[{sequence, color}];
    if (!slot) {
      std::vector<int> globals;
      for (int r : members)
        globals.push_back(g.globalRanks[r]);
      slot =
          std::make_shared<ThreadGroup>(std::move(globals), g.timeoutSeconds);
    }
    child = slot;
  }
  // Every member holds its group: the table's entries of this split go.
  g.barrier(index_, Collective::Split, sequence);
  if (index_ == 0) {
    std::lock_guard<std::mutex> lock(g.mutex);
    for (auto it = g.children.begin(); it != g.children.end();)
      it = it->first.first == sequence ? g.children.erase(it) : std::next(it);
  }
  return std::make_unique<ThreadCommunicator>(std::move(child), index);
}

void ThreadCommunicator::abort(const std::string &reason) {
  group_->abort(reason);
}

std::vector<std::unique_ptr<Communicator>>
makeThreadCommunicators(int world, double timeoutSeconds) {
  if (world < 1)
    throw std::invalid_argument("makeThreadCommunicators: world must be >= 1, "
                                "got " +
                                std::to_string(world));
  if (!(timeoutSeconds > 0))
    throw std::invalid_argument("makeThreadCommunicators: the timeout must be "
                                "> 0 seconds");
  std::vector<int> ranks(world);
  for (int r = 0; r < world; ++r)
    ranks[r] = r;
  auto group = std::make_shared<ThreadGroup>(std::move(ranks), timeoutSeconds);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world; ++r)
    comms.push_back(std::make_unique<ThreadCommunicator>(group, r));
  return comms;
}

} // namespace dprt
