//===- MpiCommunicator.cpp - Collectives between processes over MPI -------===//

#include "MpiCommunicator.h"

#include "common/CollectiveChecks.h"
#include "common/FaultReport.h"

// MPI's C interface only: its deprecated C++ bindings would need a library
// of their own at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

namespace dprt::cpu {

class MpiSession {
public:
  /// The session of this process, initializing MPI on first use.
  static std::shared_ptr<MpiSession> get();
  ~MpiSession();
};

namespace {

std::mutex sessionMutex;
std::weak_ptr<MpiSession> currentSession;

std::string mpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void checkMpi(int code, const char *call) {
  if (code != MPI_SUCCESS)
    throw std::runtime_error(std::string(call) + ": " + mpiError(code));
}

/// The kinds of message a collective exchanges; with the collective's
/// number they make the tag.
enum Kind : int {
  AllGather = 0,
  ReduceScatter = 1,
  AllReduceSum = 2,
  AllReduceShare = 3,
  AllReduceHost = 4,
  Barrier = 5,
  Split = 6,
};
constexpr int kKinds = 8;
/// Tags are at most 32767, the least MPI_TAG_UB an implementation may
/// have: the collective's number modulo 4096 times kKinds plus the kind.
/// Ranks of one communicator are never 4096 collectives apart.
constexpr int64_t kTagNumbers = 4096;
/// MPI counts are int: longer messages go in pieces of at most this many
/// bytes (MPI keeps messages of one tag and peer in order).
constexpr int64_t kPieceBytes = int64_t(1) << 30;

const char *collectiveName(Kind kind) {
  switch (kind) {
  case AllGather:
    return "all_gather";
  case ReduceScatter:
    return "reduce_scatter";
  case AllReduceSum:
  case AllReduceShare:
    return "all_reduce";
  case AllReduceHost:
    return "all_reduce_host";
  case Barrier:
    return "barrier";
  case Split:
    return "split";
  }
  return "collective";
}


/// out[i] (+)= sum over r in rank order of sources[r][i] (as
/// ThreadCommunicator sums).
template <class T>
void sumInRankOrder(const std::vector<const char *> &sources, int64_t n, T *out,
                    bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    T sum = reinterpret_cast<const T *>(sources[0])[i];
    for (size_t r = 1; r < sources.size(); ++r)
      sum += reinterpret_cast<const T *>(sources[r])[i];
    out[i] = accumulate ? out[i] + sum : sum;
  }
}

void sumInRankOrder(DType acc, const std::vector<const char *> &sources,
                    int64_t n, void *out, bool accumulate) {
  if (acc == DType::F64)
    sumInRankOrder(sources, n, static_cast<double *>(out), accumulate);
  else
    sumInRankOrder(sources, n, static_cast<float *>(out), accumulate);
}

/// Keeps faults::describeActivity on the collective while it runs.
class InCollective {
public:
  InCollective(Kind kind, int64_t sequence) {
    faults::enterCollective(collectiveName(kind), sequence);
  }
  ~InCollective() { faults::leaveCollective(); }
};

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(std::shared_ptr<MpiSession> session, MPI_Comm comm,
                  double timeoutSeconds);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allGather(Rank *rank, DType dt, const void *shard, void *full,
                 int64_t shardElems, int32_t stream) override;
  void reduceScatter(Rank *rank, DType acc, const void *full, void *shard,
                     int64_t shardElems, bool accumulate,
                     int32_t stream) override;
  void allReduce(Rank *rank, DType acc, void *data, int64_t count,
                 int32_t stream) override;
  void allReduceHost(double *values, int count) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

private:
  /// The messages of one collective in flight.
  struct Exchange {
    std::vector<MPI_Request> requests;
    std::vector<int> peers;
    std::vector<int64_t> receiveBytes; ///< expected; -1 for a send
  };

  int tagOf(Kind kind, int64_t sequence) const {
    return static_cast<int>((sequence % kTagNumbers) * kKinds + kind);
  }
  /// The peers other than this rank, starting after it, so that the ranks
  /// do not all send to rank 0 first.
  std::vector<int> peers() const {
    std::vector<int> out;
    for (int k = 1; k < size_; ++k)
      out.push_back((rank_ + k) % size_);
    return out;
  }
  void receive(Exchange &x, void *buffer, int64_t bytes, int peer, int tag);
  void send(Exchange &x, const void *buffer, int64_t bytes, int peer, int tag);
  /// Polls the exchange until every message is through; throws
  /// CollectiveTimeout when the deadline passes first.
  void complete(Exchange &x, Kind kind, int64_t sequence);
  /// Every peer's `bytes` bytes at `from(peer)` into `into(peer)`.
  template <class From, class Into>
  void exchange(Kind kind, int64_t sequence, int64_t bytes, From from,
                Into into);

  std::shared_ptr<MpiSession> session_;
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  double timeoutSeconds_;
  /// The rank of MPI's world of each member, for messages.
  std::vector<int> worldRanks_;
  int64_t sequence_ = 0;
  std::vector<char> staging_;
};

MpiCommunicator::MpiCommunicator(std::shared_ptr<MpiSession> session,
                                 MPI_Comm comm, double timeoutSeconds)
    : session_(std::move(session)), comm_(comm),
      timeoutSeconds_(timeoutSeconds) {
  checkMpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler");
  checkMpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  MPI_Group mine, world;
  checkMpi(MPI_Comm_group(comm_, &mine), "MPI_Comm_group");
  checkMpi(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
  std::vector<int> members(size_);
  for (int r = 0; r < size_; ++r)
    members[r] = r;
  worldRanks_.resize(size_);
  checkMpi(MPI_Group_translate_ranks(mine, size_, members.data(), world,
                                     worldRanks_.data()),
           "MPI_Group_translate_ranks");
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD)
    MPI_Comm_free(&comm_);
}

void MpiCommunicator::receive(Exchange &x, void *buffer, int64_t bytes,
                              int peer, int tag) {
  char *at = static_cast<char *>(buffer);
  int64_t left = bytes;
  do {
    const int64_t piece = std::min(left, kPieceBytes);
    MPI_Request request;
    checkMpi(MPI_Irecv(at, static_cast<int>(piece), MPI_BYTE, peer, tag, comm_,
                       &request),
             "MPI_Irecv");
    x.requests.push_back(request);
    x.peers.push_back(peer);
    x.receiveBytes.push_back(piece);
    at += piece;
    left -= piece;
  } while (left > 0);
}

void MpiCommunicator::send(Exchange &x, const void *buffer, int64_t bytes,
                           int peer, int tag) {
  const char *at = static_cast<const char *>(buffer);
  int64_t left = bytes;
  do {
    const int64_t piece = std::min(left, kPieceBytes);
    MPI_Request request;
    checkMpi(MPI_Isend(at, static_cast<int>(piece), MPI_BYTE, peer, tag, comm_,
                       &request),
             "MPI_Isend");
    x.requests.push_back(request);
    x.peers.push_back(peer);
    x.receiveBytes.push_back(-1);
    at += piece;
    left -= piece;
  } while (left > 0);
}

void MpiCommunicator::complete(Exchange &x, Kind kind, int64_t sequence) {
  const int n = static_cast<int>(x.requests.size());
  if (n == 0)
    return;
  InCollective activity(kind, sequence);
  const auto begin = std::chrono::steady_clock::now();
  std::vector<int> indices(n);
  std::vector<MPI_Status> statuses(n);
  std::vector<char> done(n, 0);
  int remaining = n;
  auto who = [&]() {
    return "rank " + std::to_string(worldRanks_[rank_]) + ": " +
           faults::describeCollective(collectiveName(kind), sequence);
  };
  for (int polls = 0; remaining > 0; ++polls) {
    int count = 0;
    const int rc = MPI_Testsome(n, x.requests.data(), &count, indices.data(),
                                statuses.data());
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
      throw std::runtime_error(who() + ": MPI_Testsome: " + mpiError(rc));
    if (count == MPI_UNDEFINED)
      break;
    for (int k = 0; k < count; ++k) {
      const int i = indices[k];
      done[i] = 1;
      --remaining;
      const int peer = worldRanks_[x.peers[i]];
      if (rc == MPI_ERR_IN_STATUS && statuses[k].MPI_ERROR != MPI_SUCCESS)
        throw std::runtime_error(who() + ": the message " +
                                 (x.receiveBytes[i] < 0 ? "to" : "from") +
                                 " rank " + std::to_string(peer) +
                                 " failed: " + mpiError(statuses[k].MPI_ERROR));
      if (x.receiveBytes[i] >= 0) {
        int got = 0;
        MPI_Get_count(&statuses[k], MPI_BYTE, &got);
        if (got != x.receiveBytes[i])
          throw std::runtime_error(
              who() + ": rank " + std::to_string(peer) + " sent " +
              std::to_string(got) + " bytes where " +
              std::to_string(x.receiveBytes[i]) +
              " were expected; every rank must issue the same collectives "
              "with the same sizes");
      }
    }
    if (remaining == 0)
      break;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    if (waited > timeoutSeconds_) {
      std::vector<int> silent, unread;
      for (int i = 0; i < n; ++i) {
        if (done[i])
          continue;
        std::vector<int> &list = x.receiveBytes[i] >= 0 ? silent : unread;
        const int peer = worldRanks_[x.peers[i]];
        if (std::find(list.begin(), list.end(), peer) == list.end())
          list.push_back(peer);
      }
      // Nothing may land in (or be read from) buffers the caller frees.
      for (int i = 0; i < n; ++i)
        if (!done[i] && x.requests[i] != MPI_REQUEST_NULL) {
          if (x.receiveBytes[i] >= 0)
            MPI_Cancel(&x.requests[i]);
          MPI_Request_free(&x.requests[i]);
        }
      std::sort(silent.begin(), silent.end());
      std::sort(unread.begin(), unread.end());
      std::ostringstream os;
      os << who() << " did not finish within " << timeoutSeconds_
         << " s (--collective-timeout): ";
      if (!silent.empty())
        os << "no message from rank" << (silent.size() == 1 ? " " : "s ")
           << listOf(silent)
           << " (stopped, or running other code; its own messages say which)";
      else
        os << "rank" << (unread.size() == 1 ? " " : "s ") << listOf(unread)
           << " did not take this rank's message";
      throw CollectiveTimeout(os.str());
    }
    // Ranks may share cores (mpirun --oversubscribe): after a short spin,
    // give the core away between polls.
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(
          std::chrono::microseconds(polls < 1024 ? 20 : 200));
  }
}

template <class From, class Into>
void MpiCommunicator::exchange(Kind kind, int64_t sequence, int64_t bytes,
                               From from, Into into) {
  Exchange x;
  const int tag = tagOf(kind, sequence);
  for (int peer : peers())
    receive(x, into(peer), bytes, peer, tag);
  for (int peer : peers())
    send(x, from(peer), bytes, peer, tag);
  complete(x, kind, sequence);
}

void MpiCommunicator::allGather(Rank *, DType dt, const void *shard, void *full,
                                int64_t shardElems, int32_t) {
  const int64_t sequence = ++sequence_;
  const int64_t bytes = shardElems * sizeOf(dt);
  char *out = static_cast<char *>(full);
  // In place (shard == full + rank * shardElems) the own part is there.
  if (out + rank_ * bytes != shard)
    std::memcpy(out + rank_ * bytes, shard, static_cast<size_t>(bytes));
  exchange(
      AllGather, sequence, bytes, [&](int) { return shard; },
      [&](int peer) { return out + peer * bytes; });
}

void MpiCommunicator::reduceScatter(Rank *, DType acc, const void *full,
                                    void *shard, int64_t shardElems,
                                    bool accumulate, int32_t) {
  requireAcc(acc, "reduce_scatter");
  const int64_t sequence = ++sequence_;
  const int64_t bytes = shardElems * sizeOf(acc);
  const char *in = static_cast<const char *>(full);
  staging_.resize(static_cast<size_t>(size_) * bytes);
  exchange(
      ReduceScatter, sequence, bytes,
      [&](int peer) { return in + peer * bytes; },
      [&](int peer) { return staging_.data() + peer * bytes; });
  std::vector<const char *> sources(size_);
  for (int r = 0; r < size_; ++r)
    sources[r] = r == rank_ ? in + rank_ * bytes : staging_.data() + r * bytes;
  sumInRankOrder(acc, sources, shardElems, shard, accumulate);
}

void MpiCommunicator::allReduce(Rank *, DType acc, void *data, int64_t count,
                                int32_t) {
  requireAcc(acc, "all_reduce");
  const int64_t sequence = ++sequence_;
  const int64_t elem = sizeOf(acc);
  // Reduce-scatter over chunks, then all-gather them: each element is
  // summed once, in rank order, by the chunk's owner.
  const int64_t chunk = (count + size_ - 1) / size_;
  auto lo = [&](int r) { return std::min<int64_t>(count, r * chunk); };
  auto length = [&](int r) {
    return std::min<int64_t>(count, lo(r) + chunk) - lo(r);
  };
  char *bytes = static_cast<char *>(data);
  const int64_t mine = length(rank_) * elem;
  staging_.resize(static_cast<size_t>(size_ + 1) * chunk * elem);
  // Chunks are `chunk` elements but the last ones: each rank receives its
  // own chunk's length from every peer and sends each peer that peer's.
  {
    Exchange x;
    const int tag = tagOf(AllReduceSum, sequence);
    for (int peer : peers())
      receive(x, staging_.data() + peer * chunk * elem, mine, peer, tag);
    for (int peer : peers())
      send(x, bytes + lo(peer) * elem, length(peer) * elem, peer, tag);
    complete(x, AllReduceSum, sequence);
  }
  std::vector<const char *> sources(size_);
  for (int r = 0; r < size_; ++r)
    sources[r] = r == rank_ ? bytes + lo(rank_) * elem
                            : staging_.data() + r * chunk * elem;
  char *sum = staging_.data() + size_ * chunk * elem;
  sumInRankOrder(acc, sources, length(rank_), sum, false);
  std::memcpy(bytes + lo(rank_) * elem, sum, static_cast<size_t>(mine));
  Exchange x;
  const int tag = tagOf(AllReduceShare, sequence);
  for (int peer : peers())
    receive(x, bytes + lo(peer) * elem, length(peer) * elem, peer, tag);
  for (int peer : peers())
    send(x, bytes + lo(rank_) * elem, mine, peer, tag);
  complete(x, AllReduceShare, sequence);
}

void MpiCommunicator::allReduceHost(double *values, int count) {
  const int64_t sequence = ++sequence_;
  const int64_t bytes = int64_t(count) * int64_t(sizeof(double));
  staging_.resize(static_cast<size_t>(size_) * bytes);
  exchange(
      AllReduceHost, sequence, bytes, [&](int) { return values; },
      [&](int peer) { return staging_.data() + peer * bytes; });
  std::vector<const char *> sources(size_);
  for (int r = 0; r < size_; ++r)
    sources[r] = r == rank_ ? reinterpret_cast<const char *>(values)
                            : staging_.data() + r * bytes;
  std::vector<double> sum(static_cast<size_t>(count));
  sumInRankOrder(DType::F64, sources, count, sum.data(), false);
  std::memcpy(values, sum.data(), static_cast<size_t>(bytes));
}

void MpiCommunicator::barrier() {
  const int64_t sequence = ++sequence_;
  char none = 0;
  exchange(
      Barrier, sequence, 0, [&](int) { return &none; },
      [&](int) { return &none; });
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  // Every rank's arrival is checked against the deadline first:
  // MPI_Comm_split itself would wait for a missing rank forever.
  const int64_t sequence = ++sequence_;
  const int mine[2] = {color, key};
  std::vector<int> all(static_cast<size_t>(2 * size_));
  exchange(
      Split, sequence, sizeof mine, [&](int) { return mine; },
      [&](int peer) { return all.data() + 2 * peer; });
  MPI_Comm comm;
  checkMpi(MPI_Comm_split(comm_, color, key, &comm), "MPI_Comm_split");
  return std::make_unique<MpiCommunicator>(session_, comm, timeoutSeconds_);
}

} // namespace

std::shared_ptr<MpiSession> MpiSession::get() {
  std::lock_guard<std::mutex> lock(sessionMutex);
  if (std::shared_ptr<MpiSession> session = currentSession.lock())
    return session;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw std::runtime_error("MPI was finalized already: a process joins one "
                             "MPI job once");
  if (!initialized) {
    int provided = 0;
    checkMpi(
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
        "MPI_Init_thread");
    if (provided < MPI_THREAD_SERIALIZED)
      throw std::runtime_error(
          "this MPI does not allow calls from a thread other than the one "
          "that initialized it (MPI_THREAD_SERIALIZED); the CPU backend "
          "runs its rank on a thread of its own");
  }
  auto session = std::make_shared<MpiSession>();
  currentSession = session;
  return session;
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

bool startedByMpiLauncher() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    const char *v = std::getenv(name);
    if (v && *v)
      return true;
  }
  return false;
}

std::unique_ptr<Communicator>
makeMpiWorldCommunicator(const LaunchEnvironment &env, double timeoutSeconds) {
  std::shared_ptr<MpiSession> session = MpiSession::get();
  int rank = 0, size = 0;
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  if (rank != env.rank || size != env.world)
    throw std::runtime_error(
        "the launcher's variables (" + env.variables + ", from " +
        env.launcher + ") say rank " + std::to_string(env.rank) + " of " +
        std::to_string(env.world) + " but MPI joined this process as rank " +
        std::to_string(rank) + " of " + std::to_string(size) +
        "; unset variables left over from another job");
  return std::make_unique<MpiCommunicator>(std::move(session), MPI_COMM_WORLD,
                                           timeoutSeconds);
}

} // namespace dprt::cpu
