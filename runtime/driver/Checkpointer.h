//===- Checkpointer.h - Saving and loading the ranks' state -----*- C++ -*-===//
//
// Moves a run's master weights and optimizer state between the ranks'
// shards and a checkpoint directory (Checkpoint.h, ShardedCheckpoint.h):
// a save has every rank write its own shard file, then rank 0 the manifest
// and the state, after all ranks reported theirs; nothing is gathered. A
// load has every rank read, with ranged reads, the elements of its shards
// from whichever files hold them: a checkpoint of any number of ranks and
// any unit layout resumes, parameters matched by name.
//
// The ranks meet through their Communicator (allReduceHost), so the same
// code serves ranks that are threads of one process and ranks that are
// processes of their own.
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKPOINTER_H
#define DPRT_DRIVER_CHECKPOINTER_H

#include "Checkpoint.h"
#include "ProcessRanks.h"

#include "dprt/program.h"

#include <string>
#include <vector>

namespace dprt::driver {

class Checkpointer {
public:
  Checkpointer(const ProgramSpec &spec, ProcessRanks &ranks)
      : spec_(spec), ranks_(ranks) {}

  /// Writes the shards, the manifest and `state` as checkpoint `state.step`
  /// into `dir` (atomically, Checkpoint.h). Returns its path in the process
  /// of rank 0, "" in the others. Throws when any rank failed; then nothing
  /// was published.
  std::string save(const std::string &dir, const CheckpointState &state);

  /// Reads the checkpoint directory `path`, whose state.json is `state`,
  /// into the ranks' shards. Every check (the manifest, the model's names
  /// and shapes, each file's size, checksum and finite elements) comes
  /// before the first element is written; a failure throws UsageError
  /// naming the file and the difference. Returns notes for the user (an old
  /// format, missing checksums).
  std::vector<std::string> load(const std::string &path,
                                const CheckpointState &state);

private:
  /// The arena offset of state `state` (checkpointStates order) of `unit`.
  int64_t stateShard(const UnitSpec &unit, int state) const;

  const ProgramSpec &spec_;
  ProcessRanks &ranks_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKPOINTER_H
