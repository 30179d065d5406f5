//===- Checkpointer.h - Saving and loading the ranks' state -----*- C++ -*-===//
//
// Moves a run's parameters and optimizer state between the ranks' shards
// and a checkpoint directory (Checkpoint.h describes the files): a save
// gathers each FSDP unit's shards into full tensors and writes them; a load
// reads full tensors and scatters them back, so that a checkpoint can be
// resumed with another number of ranks.
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKPOINTER_H
#define DPRT_DRIVER_CHECKPOINTER_H

#include "Checkpoint.h"
#include "ProcessRanks.h"

#include "dprt/program.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dprt::driver {

class Checkpointer {
public:
  Checkpointer(const ProgramSpec &spec, ProcessRanks &ranks)
      : spec_(spec), ranks_(ranks) {}

  /// Writes the parameters, the optimizer state and `state` as checkpoint
  /// `state.step` into `dir` (atomically, Checkpoint.h). Returns its path.
  std::string save(const std::string &dir, const CheckpointState &state);

  /// Reads the checkpoint directory `path` into the ranks' shards; throws
  /// UsageError naming the file when it does not fit the model.
  void load(const std::string &path);

private:
  /// Per unit, its parameters in the order of the unit's flat buffer.
  std::vector<std::vector<const ParamSpec *>> paramsByUnit() const;
  /// The optimizer-state tensors of `unit`: name and arena offset.
  std::vector<std::pair<std::string, int64_t>>
  optimizerTensors(const UnitSpec &unit) const;
  /// The type a unit's parameters are kept (and saved) in: the master's
  /// acc type, or the compute type of a frozen unit, which has no master.
  DType storedType(const UnitSpec &unit) const;
  /// The full contents of the unit buffers at the shard offsets `offsets`,
  /// gathered from every rank of this process.
  std::vector<std::vector<char>>
  gatherUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets);
  void scatterUnit(const UnitSpec &unit, const std::vector<int64_t> &offsets,
                   const std::vector<std::vector<char>> &fulls);

  const ProgramSpec &spec_;
  ProcessRanks &ranks_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKPOINTER_H
