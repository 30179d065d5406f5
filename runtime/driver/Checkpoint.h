//===- Checkpoint.h - Training state and atomic checkpoints -----*- C++ -*-===//
//
// A checkpoint is a directory DIR/step-NNNNNNNN holding
//   rank-RRRRR-of-WWWWW.safetensors  one per rank of the grid that saved it:
//                          the rank's part of every FSDP unit's master
//                          weights and optimizer state
//   manifest.json          every shard file with its rank, element ranges,
//                          size and XXH3-64 checksum; the units; every
//                          parameter with its unit, offset and shape
//   state.json             everything else a resumed run needs (below),
//                          with the size and XXH3-64 checksum of
//                          manifest.json
// (ShardedCheckpoint.h describes the tensor files, and format version 1,
// which held params.safetensors and optimizer.safetensors in full) and
// DIR/latest names the newest one. A save writes into a temporary directory
// DIR/.tmp-..., every rank its own shard file, fsynced; after all ranks
// report theirs, rank 0 writes the manifest and state.json, fsyncs the
// directory, renames it into place and only then replaces `latest` (write a
// temporary file, fsync, rename): a crash or a failed rank at any point
// leaves the previous checkpoint and `latest` intact.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKPOINT_H
#define DPRT_DRIVER_CHECKPOINT_H

#include "dprt/program.h"
#include "privacy/Accountant.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dprt::driver {

/// A file of a checkpoint as state.json records it.
struct CheckpointFile {
  std::string name; ///< "manifest.json" (version 1: the tensor files)
  int64_t bytes = 0;
  uint64_t checksum = 0; ///< XXH3-64 of the whole file (Checksum.h)
};

/// state.json: the run's progress and every parameter of its privacy
/// guarantee. Samplers and noise are counter-based, so the step number and
/// the keys are all the random state there is.
struct CheckpointState {
  /// 2: sharded (manifest.json); 1: full tensors, still read.
  static constexpr int kFormatVersion = 2;

  int32_t formatVersion = kFormatVersion; ///< as read; saves write 2

  std::string model;
  std::string backend;
  std::string compute;    ///< "f32", "f64", "bf16"
  int32_t ranks = 1;      ///< ranks of the run that saved it
  int64_t step = 0;       ///< optimizer steps completed
  int64_t totalSteps = 0; ///< the run's --steps
  uint64_t seed = 0;
  uint64_t initKey = 0;
  uint64_t noiseKey[4] = {0, 0, 0, 0};
  std::string generator;       ///< "philox" or "chacha20"
  std::string sampler;         ///< "poisson" or "shuffle"
  int64_t nextSamplerStep = 1; ///< the sampler's next step (= step + 1)
  double q = 0;                ///< sampling rate (shuffle: batch / records)
  int64_t shuffleBatch = 0;
  int64_t datasetRecords = 0;
  uint64_t datasetFingerprint = 0;
  double sigma = 0;
  double maxNorm = 0; ///< the run's clipping bound C
  double delta = 0;
  double targetEpsilon = 0; ///< 0: no target (sigma was given)
  double epsilon = 0;       ///< spent so far
  /// "pld" or "rdp"; checkpoints written before the choice hold "rdp".
  std::string accountant = "rdp";
  std::vector<privacy::SampledGaussianSegment> segments;
  std::string optimizer; ///< "sgd", "momentum", "adamw"
  /// lr and weightDecay are the run's (the flags', else the recipe's); the
  /// others are compiled into the program.
  double lr = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0;
  bool nesterov = false;
  /// The learning-rate schedule (Schedule.h); a checkpoint written before
  /// schedules has none: constant.
  int64_t warmup = 0;
  std::string decay = "constant";
  double minLrRatio = 0;
  int64_t lrHorizon = 0; ///< 0: none recorded
  /// The token file's tokenizer folder (its metadata), for --generate after
  /// a resume; empty for other data.
  std::string tokenizer;
  /// manifest.json (version 1: the tensor files); empty in version-1
  /// checkpoints written before checksums.
  std::vector<CheckpointFile> files;
};

/// "sgd", "momentum", "adamw".
const char *optimizerName(OptimizerKind kind);

/// The program's part of a checkpoint's state: model, backend, compute type,
/// ranks and the recipe's optimizer (whose learning rate and weight decay
/// the run's replace: saveHyperparameters in Schedule.h).
void describeProgram(const ProgramSpec &spec, CheckpointState &state);

/// Throws UsageError naming `path` unless the checkpoint was written by a
/// program with this model, compute type and optimizer (kind and compiled
/// constants: momentum, Nesterov, betas, eps). The learning rate, weight
/// decay and clipping bound are the run's, not the program's.
void checkResumable(const ProgramSpec &spec, const CheckpointState &state,
                    const std::string &path);

std::string toJson(const CheckpointState &state);
/// Throws UsageError naming `path` when the text is not a valid state.json.
CheckpointState checkpointStateFromJson(const std::string &text,
                                        const std::string &path);

/// Saves into DIR: begin() gives a fresh temporary directory to write the
/// files into, commit() publishes it. Only rank 0 calls them; the other
/// ranks write into temporaryPath(DIR, step, token()) once rank 0 has told
/// them its token.
class CheckpointDirectory {
public:
  explicit CheckpointDirectory(std::string dir) : dir_(std::move(dir)) {}

  /// Creates DIR if needed, removes temporary directories that an
  /// interrupted save left behind, and creates a new one.
  std::string begin(int64_t step);
  /// What makes the temporary directory's name unique (the pid of rank 0's
  /// process), below 2^31.
  int64_t token() const;
  /// fsyncs, renames the temporary directory to DIR/step-NNNNNNNN (with a
  /// suffix if that exists) and points DIR/latest at it. Returns its path.
  std::string commit();
  /// Removes the temporary directory of a save that failed (best effort).
  void abandon();

  /// DIR/.tmp-step-NNNNNNNN-TOKEN
  static std::string temporaryPath(const std::string &dir, int64_t step,
                                   int64_t token);

private:
  std::string dir_;
  std::string temporary_;
  int64_t step_ = 0;
};

/// DIR/lock: one run saves into a checkpoint directory at a time (two would
/// remove each other's temporary directories and race on `latest`). The
/// lock is an flock on DIR/lock, which holds the owner's pid, host and
/// process start time as one line of JSON; the kernel drops the flock when
/// the owner dies. A lock whose process is gone from this host (a crashed
/// run) is stale and taken over with a warning; a lock held by a live
/// process, or naming another host (its pid cannot be checked from here),
/// stops the run at its start with a message naming the owner.
class CheckpointLock {
public:
  /// Creates DIR if needed and takes its lock. Throws UsageError when DIR
  /// cannot be created or written, or another run holds the lock; sets
  /// `warning` when a stale lock was taken over.
  CheckpointLock(const std::string &dir, std::string &warning);
  /// Removes DIR/lock and releases it.
  ~CheckpointLock();
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

  /// "lock"
  static const char *fileName();

private:
  std::string path_;
  int fd_ = -1;
};

/// --keep-last: removes all but the `keep` newest checkpoints of `dir` (by
/// step, then suffix), never the one DIR/latest names. Each is first
/// renamed to a temporary name (which the next save cleans up, should the
/// removal be interrupted), so that no half-removed directory ever looks
/// like a checkpoint. Returns the names removed.
std::vector<std::string> pruneCheckpoints(const std::string &dir, int64_t keep);

/// Writes `content` to `path` and fsyncs it; throws std::runtime_error.
void writeFileDurably(const std::string &path, const std::string &content);

/// The checkpoint directory `dir` stands for: dir itself if it holds a
/// state.json, else the one DIR/latest names. Throws UsageError.
std::string resolveCheckpoint(const std::string &dir);

std::string readTextFile(const std::string &path);

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKPOINT_H
