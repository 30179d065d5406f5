//===- ThreadCommunicatorTest.cpp - Collectives between threads -----------===//

#include "common/ThreadCommunicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <functional>
#include <future>
#include <thread>
#include <vector>

using namespace dprt;

namespace {

/// Runs body(r, comm) on `world` threads and rethrows the first exception.
void runRanks(std::vector<std::unique_ptr<Communicator>> &comms,
              const std::function<void(int, Communicator &)> &body) {
  const int world = static_cast<int>(comms.size());
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r, *comms[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (std::exception_ptr &e : errors)
    if (e)
      std::rethrow_exception(e);
}

Rank rankOf(int r, int world, Communicator *comm) {
  Rank rank;
  rank.rank = r;
  rank.world = world;
  rank.comm = comm;
  return rank;
}

/// A value whose sum over ranks depends on the order of the additions in
/// f32: 1e8 + 1 - 1e8 is 0 in one order and 1 in another.
template <class T> T orderSensitive(int r, int64_t i) {
  static const double pattern[] = {1e8, 1.0, -1e8, 3.25, -7.5e-3};
  return static_cast<T>(pattern[(r + i) % 5] * (1 + 0.001 * i));
}

template <class T> void checkReduceScatter(int world, bool accumulate) {
  const int64_t shardElems = 37;
  auto comms = makeThreadCommunicators(world);
  std::vector<std::vector<T>> fulls(world), shards(world);
  for (int r = 0; r < world; ++r) {
    fulls[r].resize(shardElems * world);
    for (int64_t i = 0; i < shardElems * world; ++i)
      fulls[r][i] = orderSensitive<T>(r, i);
    shards[r].assign(shardElems, static_cast<T>(0.5 * r + 1));
  }
  auto initial = shards;
  const DType dt = sizeof(T) == 8 ? DType::F64 : DType::F32;
  runRanks(comms, [&](int r, Communicator &comm) {
    Rank rank = rankOf(r, world, &comm);
    comm.reduceScatter(&rank, dt, fulls[r].data(), shards[r].data(), shardElems,
                       accumulate, 1);
  });
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < shardElems; ++i) {
      T sum = fulls[0][r * shardElems + i];
      for (int q = 1; q < world; ++q)
        sum += fulls[q][r * shardElems + i];
      T expected = accumulate ? initial[r][i] + sum : sum;
      // Bitwise: the sum must be taken in rank order.
      ASSERT_EQ(0, std::memcmp(&expected, &shards[r][i], sizeof(T)))
          << "world " << world << " rank " << r << " element " << i;
    }
}

} // namespace

TEST(ThreadCommunicator, AllGatherConcatenatesShardsInRankOrder) {
  for (int world = 1; world <= 4; ++world) {
    const int64_t shardElems = 13;
    auto comms = makeThreadCommunicators(world);
    std::vector<std::vector<float>> shards(world), fulls(world);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < shardElems; ++i)
        shards[r].push_back(static_cast<float>(100 * r + i));
      fulls[r].assign(shardElems * world, -1.0f);
    }
    runRanks(comms, [&](int r, Communicator &comm) {
      Rank rank = rankOf(r, world, &comm);
      comm.allGather(&rank, DType::F32, shards[r].data(), fulls[r].data(),
                     shardElems, 1);
    });
    for (int r = 0; r < world; ++r)
      for (int q = 0; q < world; ++q)
        for (int64_t i = 0; i < shardElems; ++i)
          ASSERT_EQ(fulls[r][q * shardElems + i], 100.0f * q + i)
              << "world " << world << " rank " << r;
  }
}

TEST(ThreadCommunicator, AllGatherCopiesTwoByteElements) {
  const int world = 3;
  auto comms = makeThreadCommunicators(world);
  std::vector<std::vector<uint16_t>> shards(world), fulls(world);
  for (int r = 0; r < world; ++r) {
    shards[r] = {static_cast<uint16_t>(r), static_cast<uint16_t>(0xabc0 + r)};
    fulls[r].assign(2 * world, 0);
  }
  runRanks(comms, [&](int r, Communicator &comm) {
    Rank rank = rankOf(r, world, &comm);
    comm.allGather(&rank, DType::BF16, shards[r].data(), fulls[r].data(), 2, 1);
  });
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < world; ++q) {
      EXPECT_EQ(fulls[r][2 * q], q);
      EXPECT_EQ(fulls[r][2 * q + 1], 0xabc0 + q);
    }
}

TEST(ThreadCommunicator, AllGatherInPlace) {
  const int world = 2, shardElems = 4;
  auto comms = makeThreadCommunicators(world);
  std::vector<std::vector<double>> fulls(world,
                                         std::vector<double>(world * 4, 0));
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < shardElems; ++i)
      fulls[r][r * shardElems + i] = 10 * r + i;
  runRanks(comms, [&](int r, Communicator &comm) {
    Rank rank = rankOf(r, world, &comm);
    comm.allGather(&rank, DType::F64, fulls[r].data() + r * shardElems,
                   fulls[r].data(), shardElems, 1);
  });
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < world; ++q)
      for (int i = 0; i < shardElems; ++i)
        EXPECT_EQ(fulls[r][q * shardElems + i], 10 * q + i);
}

TEST(ThreadCommunicator, ReduceScatterSumsInRankOrderF32) {
  for (int world = 1; world <= 4; ++world) {
    checkReduceScatter<float>(world, false);
    checkReduceScatter<float>(world, true);
  }
}

TEST(ThreadCommunicator, ReduceScatterSumsInRankOrderF64) {
  for (int world = 1; world <= 4; ++world) {
    checkReduceScatter<double>(world, false);
    checkReduceScatter<double>(world, true);
  }
}

TEST(ThreadCommunicator, ReduceScatterIsDeterministic) {
  const int world = 4;
  const int64_t shardElems = 1000;
  std::vector<std::vector<float>> reference;
  for (int run = 0; run < 5; ++run) {
    auto comms = makeThreadCommunicators(world);
    std::vector<std::vector<float>> fulls(world), shards(world);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < shardElems * world; ++i)
        fulls[r].push_back(orderSensitive<float>(r, i));
      shards[r].assign(shardElems, 0.1f);
    }
    runRanks(comms, [&](int r, Communicator &comm) {
      Rank rank = rankOf(r, world, &comm);
      comm.reduceScatter(&rank, DType::F32, fulls[r].data(), shards[r].data(),
                         shardElems, true, 1);
    });
    if (run == 0)
      reference = shards;
    for (int r = 0; r < world; ++r)
      ASSERT_EQ(0, std::memcmp(reference[r].data(), shards[r].data(),
                               shardElems * sizeof(float)));
  }
}

TEST(ThreadCommunicator, AllReduceHostSumsOnEveryRank) {
  for (int world = 1; world <= 4; ++world) {
    auto comms = makeThreadCommunicators(world);
    std::vector<std::vector<double>> values(world);
    for (int r = 0; r < world; ++r)
      values[r] = {1.0 * r, 2.0, -0.5 * r};
    runRanks(comms, [&](int r, Communicator &comm) {
      comm.allReduceHost(values[r].data(), 3);
    });
    double s = world * (world - 1) / 2.0;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(values[r][0], s);
      EXPECT_EQ(values[r][1], 2.0 * world);
      EXPECT_EQ(values[r][2], -0.5 * s);
    }
  }
}

// Back-to-back collectives on the same buffers: a rank that finishes one
// collective early must not overwrite what a slower rank is still reading.
TEST(ThreadCommunicator, RepeatedCollectivesStayConsistent) {
  const int world = 4;
  const int64_t shardElems = 64;
  auto comms = makeThreadCommunicators(world);
  std::atomic<int> failures{0};
  runRanks(comms, [&](int r, Communicator &comm) {
    Rank rank = rankOf(r, world, &comm);
    std::vector<float> shard(shardElems), full(shardElems * world);
    for (int iteration = 0; iteration < 300; ++iteration) {
      for (int64_t i = 0; i < shardElems; ++i)
        shard[i] = static_cast<float>(iteration * 1000 + r * 100 + i);
      comm.allGather(&rank, DType::F32, shard.data(), full.data(), shardElems,
                     1);
      for (int q = 0; q < world; ++q)
        for (int64_t i = 0; i < shardElems; ++i)
          if (full[q * shardElems + i] != iteration * 1000 + q * 100 + i)
            ++failures;
      // Everyone contributes `full` again: the slice sums to world copies.
      comm.reduceScatter(&rank, DType::F32, full.data(), shard.data(),
                         shardElems, false, 1);
      for (int64_t i = 0; i < shardElems; ++i)
        if (shard[i] !=
            world * static_cast<float>(iteration * 1000 + r * 100 + i))
          ++failures;
      double value = iteration + r;
      comm.allReduceHost(&value, 1);
      if (value != world * iteration + world * (world - 1) / 2.0)
        ++failures;
      if (iteration % 50 == 0)
        comm.barrier();
    }
  });
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadCommunicator, AbortWakesRanksBlockedInACollective) {
  const int world = 3;
  auto comms = makeThreadCommunicators(world);
  auto *thread = static_cast<ThreadCommunicator *>(comms[2].get());
  std::vector<std::future<std::string>> blocked;
  for (int r = 0; r < 2; ++r)
    blocked.push_back(std::async(std::launch::async, [&, r] {
      std::vector<float> shard(4), full(12);
      Rank rank = rankOf(r, world, comms[r].get());
      try {
        comms[r]->allGather(&rank, DType::F32, shard.data(), full.data(), 4, 1);
      } catch (const CommunicatorAborted &e) {
        return std::string(e.what());
      }
      return std::string("returned without rank 2");
    }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  thread->abort("rank 2 failed: out of memory");
  for (auto &f : blocked) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(f.get(), "rank 2 failed: out of memory");
  }
  // Later collectives fail at once instead of waiting.
  EXPECT_THROW(comms[0]->barrier(), CommunicatorAborted);
}

TEST(ThreadCommunicator, MismatchedSizesFailOnEveryRank) {
  const int world = 2;
  auto comms = makeThreadCommunicators(world);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> shard(8), full(16);
      Rank rank = rankOf(r, world, comms[r].get());
      try {
        comms[r]->allGather(&rank, DType::F32, shard.data(), full.data(),
                            r == 0 ? 8 : 7, 1);
      } catch (const std::runtime_error &e) {
        if (std::string(e.what()).find("same collectives") != std::string::npos)
          ++failed;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(failed.load(), world);
}

TEST(ThreadCommunicator, RejectsAnEmptyWorld) {
  EXPECT_THROW(makeThreadCommunicators(0), std::invalid_argument);
}

// all_reduce sums every rank's buffer in rank order, on every rank: the
// same bits as a sum written out (orderSensitive makes another order give
// other bits), for counts that do not divide into the ranks' chunks.
TEST(ThreadCommunicator, AllReduceSumsInRankOrderOnEveryRank) {
  for (int world = 1; world <= 4; ++world)
    for (int64_t count : {int64_t(1), int64_t(7), int64_t(64)}) {
      auto comms = makeThreadCommunicators(world);
      std::vector<std::vector<float>> data(world);
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < count; ++i)
          data[r].push_back(orderSensitive<float>(r, i));
      std::vector<float> expected(count);
      for (int64_t i = 0; i < count; ++i) {
        float sum = data[0][i];
        for (int r = 1; r < world; ++r)
          sum += data[r][i];
        expected[i] = sum;
      }
      runRanks(comms, [&](int r, Communicator &comm) {
        Rank rank = rankOf(r, world, &comm);
        comm.allReduce(&rank, DType::F32, data[r].data(), count, 1);
      });
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < count; ++i)
          ASSERT_EQ(std::memcmp(&data[r][i], &expected[i], sizeof(float)), 0)
              << "world " << world << ", rank " << r << ", element " << i;
    }
}

// A 2 x 3 grid split as the driver splits it: the ranks of a replica
// (color = replica, key = shard) and the ranks of a shard (color = shard,
// key = replica); collectives on one group do not see the other.
TEST(ThreadCommunicator, SplitMakesTheGroupsOfAHybridGrid) {
  const int replicas = 2, shards = 3, world = replicas * shards;
  auto comms = makeThreadCommunicators(world);
  std::vector<int> replicaRank(world), replicaSize(world), shardRank(world),
      shardSize(world);
  std::vector<double> replicaSum(world), shardSum(world);
  runRanks(comms, [&](int r, Communicator &comm) {
    const int replica = r / shards, shard = r % shards;
    auto ofReplica = comm.split(replica, shard);
    auto ofShard = comm.split(shard, replica);
    replicaRank[r] = ofReplica->rank();
    replicaSize[r] = ofReplica->size();
    shardRank[r] = ofShard->rank();
    shardSize[r] = ofShard->size();
    replicaSum[r] = r;
    ofReplica->allReduceHost(&replicaSum[r], 1);
    shardSum[r] = r;
    ofShard->allReduceHost(&shardSum[r], 1);
  });
  for (int r = 0; r < world; ++r) {
    const int replica = r / shards, shard = r % shards;
    EXPECT_EQ(replicaRank[r], shard);
    EXPECT_EQ(replicaSize[r], shards);
    EXPECT_EQ(shardRank[r], replica);
    EXPECT_EQ(shardSize[r], replicas);
    // Replica q holds ranks 3q, 3q + 1, 3q + 2; shard s ranks s and s + 3.
    EXPECT_EQ(replicaSum[r], 3.0 * shards * replica + 3.0);
    EXPECT_EQ(shardSum[r], 2.0 * shard + shards);
  }
}

// A rank that never reaches the collective: the others give up after the
// timeout with a message naming themselves, the collective and the
// missing rank, instead of waiting forever.
TEST(ThreadCommunicator, ACollectiveTimesOutNamingTheMissingRank) {
  const int world = 3;
  auto comms = makeThreadCommunicators(world, 0.3);
  std::vector<std::future<std::string>> waiting;
  const auto begin = std::chrono::steady_clock::now();
  for (int r = 0; r < 2; ++r)
    waiting.push_back(std::async(std::launch::async, [&, r] {
      std::vector<double> sum(4), data(4, 1.0);
      Rank rank = rankOf(r, world, comms[r].get());
      try {
        comms[r]->allReduce(&rank, DType::F64, data.data(), 4, 1);
      } catch (const CollectiveTimeout &e) {
        return "timeout: " + std::string(e.what());
      } catch (const CommunicatorAborted &e) {
        return "aborted: " + std::string(e.what());
      }
      return std::string("returned without rank 2");
    }));
  std::vector<std::string> messages;
  for (auto &f : waiting) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    messages.push_back(f.get());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
  // The first to time out names the missing rank; the other is woken by
  // its abort with the same reason.
  int timeouts = 0;
  for (const std::string &m : messages) {
    timeouts += m.rfind("timeout: ", 0) == 0;
    EXPECT_NE(m.find("all_reduce #1 before the first step did not finish "
                     "within 0.3 s (--collective-timeout): rank 2 has not "
                     "reached it"),
              std::string::npos)
        << m;
  }
  EXPECT_GE(timeouts, 1);
  EXPECT_THROW(comms[0]->barrier(), CommunicatorAborted);
}

TEST(ThreadCommunicator, RejectsANonPositiveTimeout) {
  EXPECT_THROW(makeThreadCommunicators(2, 0.0), std::invalid_argument);
}
