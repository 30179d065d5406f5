//===- comm.h - Collective communication between ranks ----------*- C++ -*-===//
//
// The kernels all_gather and reduce_scatter forward to the rank's
// Communicator. On the CPU backend the ranks are threads of one process and
// the communicator copies through shared memory; on CUDA it is NCCL (one
// process with --gpus N threads, or one process per GPU started by Slurm,
// mpirun or torchrun and joined through NCCL's own bootstrap).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMM_H
#define DPRT_COMM_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace dprt {

class Communicator {
public:
  virtual ~Communicator() = default;

  /// full[r * shardElems + i] = shard of rank r (see kernels.h).
  virtual void allGather(Rank *rank, DType dt, const void *shard, void *full,
                         int64_t shardElems, int32_t stream) = 0;

  /// shard (+)= sum over ranks, in rank order, of this rank's slice of
  /// every rank's `full`.
  virtual void reduceScatter(Rank *rank, DType acc, const void *full,
                             void *shard, int64_t shardElems, bool accumulate,
                             int32_t stream) = 0;

  /// Sums `values` (host memory) over the ranks, in place, on every rank.
  virtual void allReduceHost(double *values, int count) = 0;

  /// Returns when every rank has called it.
  virtual void barrier() = 0;
};

/// Communicators for `world` ranks that are threads of this process; element
/// r belongs to rank r. Host memory only (the CPU backend).
std::vector<std::unique_ptr<Communicator>> makeThreadCommunicators(int world);

} // namespace dprt

#endif // DPRT_COMM_H
