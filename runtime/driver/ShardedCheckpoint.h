//===- ShardedCheckpoint.h - The tensor files of a checkpoint ---*- C++ -*-===//
//
// What a checkpoint's tensor files hold and where (Checkpoint.h describes the
// directory, docs/training-program.md the format):
//
// Format version 2 (sharded). Every rank r of W writes
// rank-RRRRR-of-WWWWW.safetensors with, per FSDP unit, its elements
// [lo, hi) of the unit's flat buffer for each state: "<unit>.master" (the
// master weights) and the optimizer's "<unit>.momentum" or "<unit>.adam_m"
// and "<unit>.adam_v", each a 1-D tensor of hi - lo elements in the
// accumulation type. manifest.json (written by rank 0) lists every shard
// file with its rank, ranges, size and XXH3-64, every unit, and every
// parameter with its unit, offset and shape.
//
// Format version 1 (full, written before sharding): params.safetensors holds
// every parameter full and optimizer.safetensors every unit's state full.
// It is read as a checkpoint of one shard whose units are those of the model
// it is resumed into (the only model it could be resumed into).
//
// A ShardedCheckpoint answers "elements [a, b) of state s of unit u" from
// whichever files hold them, with ranged reads (never a whole file), and
// verifies each file before the first read from it: its size and checksum,
// its header against the manifest, and that every element is finite.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_SHARDEDCHECKPOINT_H
#define DPRT_DRIVER_SHARDEDCHECKPOINT_H

#include "Checkpoint.h"

#include "dprt/program.h"
#include "dprt/types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprt::driver {

struct ManifestUnit {
  std::string name;
  int64_t numel = 0;      ///< real elements of the unit's flat buffer
  int64_t shardElems = 0; ///< elements per rank in the grid that saved it
  /// Frozen parameters only (LoRA's base model): the shards hold its
  /// "master" state (the values, in the manifest's dtype) and no other.
  bool frozen = false;
};

struct ManifestParam {
  std::string name;
  std::vector<int64_t> shape;
  int32_t unit = 0;   ///< index into CheckpointManifest::units
  int64_t offset = 0; ///< first element in the unit's flat buffer
  bool trainable = true;

  int64_t numel() const;
};

/// Elements [begin, end) of a unit.
struct ManifestRange {
  int32_t unit = 0;
  int64_t begin = 0;
  int64_t end = 0;
};

struct ManifestShard {
  std::string file; ///< a file name in the checkpoint directory
  int32_t rank = 0;
  int64_t bytes = 0;
  uint64_t checksum = 0; ///< XXH3-64 of the whole file
  std::vector<ManifestRange> ranges;
};

/// manifest.json.
struct CheckpointManifest {
  static constexpr int kFormatVersion = 2;

  std::string model;
  int64_t step = 0;
  DType dtype = DType::F32; ///< of every tensor: the accumulation type
  int32_t ranks = 1;        ///< the grid that saved it
  /// "master", then the optimizer's states (checkpointStates).
  std::vector<std::string> states;
  std::vector<ManifestUnit> units;
  std::vector<ManifestParam> params;
  std::vector<ManifestShard> shards;
  /// Where each parameter goes in a Hugging Face folder (hfSourcesJson,
  /// HfWeights.h), for dpc export; empty for a model not imported from one.
  std::string hfSources;
  /// The program's LoRA (loraJson, HfWeights.h), or "".
  std::string lora;
};

/// The states a checkpoint holds per unit for `optimizer`: "master", then
/// "momentum" or "adam_m" and "adam_v".
std::vector<std::string> checkpointStates(OptimizerKind optimizer);
/// "rank-00001-of-00002.safetensors"
std::string shardFileName(int32_t rank, int32_t ranks);
/// "<unit>.<state>": a tensor of a shard file (and of optimizer.safetensors
/// in format version 1).
std::string shardTensorName(const std::string &unit, const std::string &state);
/// "[3, 4]"
std::string shapeText(const std::vector<int64_t> &shape);
/// "[2, 7)": elements begin .. end - 1.
std::string rangeText(int64_t begin, int64_t end);

std::string toJson(const CheckpointManifest &manifest);
/// Throws UsageError naming `path` when the text is not a valid manifest:
/// a field missing or out of range, a parameter outside its unit, a rank
/// without a shard file, elements of a unit that no shard (or two) holds.
CheckpointManifest manifestFromJson(const std::string &text,
                                    const std::string &path);

class ShardedCheckpoint {
public:
  /// Opens the checkpoint directory `path`, whose state.json is `state`.
  /// Version 2 reads manifest.json, whose size and checksum state.json
  /// records; version 1 derives a manifest from the headers of its files.
  /// With `model`, also checks that the checkpoint fits it: the same
  /// parameter names with the same shapes and the optimizer states it needs
  /// (the units may differ: a model's parameter is read by name, wherever
  /// the checkpoint's units put it). Without, a version-1 checkpoint makes
  /// each parameter a unit of its own. Reads no tensor data. Throws
  /// UsageError naming the file and the difference; appends what the user
  /// should know (an old format, missing checksums) to `notes`.
  ShardedCheckpoint(const std::string &path, const CheckpointState &state,
                    const ProgramSpec *model, std::vector<std::string> &notes);
  ~ShardedCheckpoint();
  ShardedCheckpoint(const ShardedCheckpoint &) = delete;
  ShardedCheckpoint &operator=(const ShardedCheckpoint &) = delete;

  const std::string &path() const;
  int formatVersion() const;
  const CheckpointManifest &manifest() const;
  /// The index of `state` in manifest().states, or -1.
  int stateIndex(const std::string &state) const;
  /// The index of parameter `name` in manifest().params, or -1.
  int paramIndex(const std::string &name) const;

  int fileCount() const;
  /// The files (indices < fileCount()) holding any state of elements
  /// [begin, end) of `unit`.
  std::vector<int> filesHolding(int32_t unit, int64_t begin, int64_t end) const;

  /// Whether the files hold every element of [begin, end) of state `state`
  /// of `unit` (a version-1 checkpoint holds only the parameters' elements
  /// of the master weights, not the gaps between them).
  bool holds(int32_t unit, int state, int64_t begin, int64_t end) const;

  /// Checks file `file` once: it exists with the recorded size and XXH3-64
  /// checksum (when recorded), its header holds the tensors the manifest
  /// places there, and every element of them is finite. Reads the file from
  /// start to end once. Safe to call from several threads. Throws
  /// UsageError naming the file and what is wrong.
  void verifyFile(int file);

  /// Reads elements [begin, end) of state `state` (an index into
  /// manifest().states) of `unit` into `out`, converted to `to`, from the
  /// files that hold them (each verified first, if it was not yet). Safe to
  /// call from several threads.
  void read(int32_t unit, int state, int64_t begin, int64_t end, DType to,
            void *out);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_SHARDEDCHECKPOINT_H
