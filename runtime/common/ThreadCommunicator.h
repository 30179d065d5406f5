//===- ThreadCommunicator.h - Collectives between threads -------*- C++ -*-===//
//
// The communicator of the CPU backend when its ranks are threads of one
// process: they exchange data through each other's host memory. Each
// collective is
//   publish my pointer -> barrier -> read the others' buffers -> barrier,
// so that no rank overwrites a buffer another rank is still reading and the
// same communicators can be used for any number of collectives in a row.
// Sums run in rank order 0, 1, ..., so a run gives the same bits every time,
// and the same bits as the MPI communicator (cpu/services/MpiCommunicator.h),
// which sums in the same order.
//
// Every rank counts its collectives; the ranks of one collective must agree
// on its number, kind, size and type, else each of them throws naming what
// differs (code that diverged between ranks would otherwise pair unrelated
// collectives and read out of bounds). A barrier that the other ranks do not
// reach within the timeout throws CollectiveTimeout naming the ranks that
// never came, and aborts the group.
//
// When one rank fails (an exception), the driver calls `abort` (comm.h) so
// that the ranks blocked in a collective throw CommunicatorAborted instead
// of waiting forever.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMMON_THREADCOMMUNICATOR_H
#define DPRT_COMMON_THREADCOMMUNICATOR_H

#include "dprt/comm.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace dprt {

/// Thrown by a collective of a group that another rank aborted.
class CommunicatorAborted : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct ThreadGroup;

class ThreadCommunicator final : public Communicator {
public:
  ThreadCommunicator(std::shared_ptr<ThreadGroup> group, int index);

  int rank() const override { return index_; }
  int size() const override;

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

  /// Wakes every rank of the group waiting in a collective, and makes every
  /// later collective of the group, throw CommunicatorAborted with `reason`.
  /// Safe to call from any thread, more than once (the first reason stays).
  void abort(const std::string &reason) override;

private:
  std::shared_ptr<ThreadGroup> group_;
  int index_;
  /// Collectives this rank has started on the group.
  int64_t sequence_ = 0;
};

} // namespace dprt

#endif // DPRT_COMMON_THREADCOMMUNICATOR_H
