//===- CheckpointReader.h - A checkpoint's parameters by name -*- C++ -*-===//
//
// For tools that turn a checkpoint into something else (dpc export, a
// comparison script's helper): opens a checkpoint written by any number of
// ranks, in either format version, and hands out one full parameter at a
// time in the accumulation type, gathered offline from the shard files with
// ranged reads, so that it holds one parameter in memory, never the model.
// Each tensor file is verified (size, XXH3-64, every element finite) before
// the first read from it. Errors are dprt::driver::UsageError (Options.h)
// naming the file and what is wrong: a tool reports them with exit status 2.
//
//   dprt::driver::CheckpointReader checkpoint(dir);  // --save DIR or a step
//   std::vector<char> data;
//   for (const auto &p : checkpoint.parameters()) {
//     checkpoint.read(p, data); // p.numel() elements of checkpoint.dtype()
//     ...
//   }
//
// It lives in the backend-independent driver library: a tool links
// dprt_driver_objects, dprt_privacy and dprt_common (no backend).
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKPOINTREADER_H
#define DPRT_DRIVER_CHECKPOINTREADER_H

#include "dprt/types.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dprt::driver {

class ShardedCheckpoint;

/// A parameter as the checkpoint records it: its name in the model
/// ("fc1.w", "b0.wq"), its shape, and whether it was trained (false: a
/// frozen base weight under LoRA).
struct CheckpointParameter {
  std::string name;
  std::vector<int64_t> shape;
  bool trainable = true;

  int64_t numel() const;
};

class CheckpointReader {
public:
  /// Opens `path`: a checkpoint directory (it holds state.json) or a --save
  /// directory (its `latest` names the checkpoint). Reads state.json and the
  /// manifest, no tensor data.
  explicit CheckpointReader(const std::string &path);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader &) = delete;
  CheckpointReader &operator=(const CheckpointReader &) = delete;

  /// The checkpoint directory (DIR/step-NNNNNNNN).
  const std::string &path() const;
  const std::string &model() const;
  /// Optimizer steps the checkpoint's run completed.
  int64_t step() const;
  /// The type of every parameter read: F32, or F64 for f64 models.
  DType dtype() const;
  /// 2 (sharded), or 1 (the older full format).
  int formatVersion() const;
  /// Ranks of the run that saved it (1 for format version 1).
  int ranks() const;
  /// Every parameter, in the model's order.
  const std::vector<CheckpointParameter> &parameters() const;
  /// What a user should know about this checkpoint (an old format, no
  /// checksums), one sentence each.
  const std::vector<std::string> &notes() const;
  /// The Hugging Face source of each parameter as the run recorded it
  /// (hfSourcesJson's JSON, HfWeights.h), or "" (not an imported model, or
  /// format version 1).
  const std::string &hfSources() const;
  /// The LoRA of the program that saved it (loraJson, HfWeights.h), or "".
  const std::string &lora() const;

  /// Reads parameter `parameter` (one of parameters()) into `out`, resized
  /// to parameter.numel() * sizeOf(dtype()) bytes, row-major.
  void read(const CheckpointParameter &parameter, std::vector<char> &out);
  /// Reads parameter `name` into `out`: its numel() elements, converted to
  /// `to` (F32, F64 or BF16).
  void read(const std::string &name, DType to, void *out);

  /// Verifies every tensor file of the checkpoint (each read once), as
  /// read() would before reading from it.
  void verify();

private:
  std::string path_;
  std::string model_;
  int64_t step_ = 0;
  std::vector<CheckpointParameter> parameters_;
  std::vector<std::string> notes_;
  std::unique_ptr<ShardedCheckpoint> checkpoint_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKPOINTREADER_H
