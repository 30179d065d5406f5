//===- CheckpointParams.cpp - A checkpoint's parameters for export --------===//

#include "CheckpointParams.h"

#include "Checkpoint.h"
#include "Options.h"
#include "Safetensors.h"

#include <cstring>
#include <memory>

namespace dprt::driver {

CheckpointParams openCheckpointParams(const std::string &dir) {
  CheckpointParams out;
  out.path = resolveCheckpoint(dir);
  const std::string statePath = out.path + "/state.json";
  const CheckpointState state =
      checkpointStateFromJson(readTextFile(statePath), statePath);
  out.step = state.step;
  out.compute = state.compute == "bf16"  ? DType::BF16
                : state.compute == "f64" ? DType::F64
                                         : DType::F32;
  out.verified = verifyCheckpointFiles(out.path, state);
  const std::string file = out.path + "/params.safetensors";
  std::shared_ptr<SafetensorsReader> reader;
  try {
    reader = std::make_shared<SafetensorsReader>(file);
  } catch (const std::runtime_error &e) {
    throw UsageError(e.what());
  }
  out.valueType = accOf(out.compute);
  for (const TensorInfo &t : reader->tensors()) {
    if (t.dtype != out.valueType || t.shape.empty())
      throw UsageError("'" + file + "': parameter '" + t.name + "' is " +
                       t.storedName + " of " + std::to_string(t.shape.size()) +
                       " dimensions, not a parameter of a " + state.compute +
                       " run");
    ParamSpec p{t.name, t.shape, 0, 0, 0, true, {}};
    out.params.push_back(std::move(p));
  }
  auto sources = reader->metadata().find(kHfSourcesMetadataKey);
  if (sources == reader->metadata().end())
    throw UsageError("the checkpoint '" + out.path +
                     "' records no Hugging Face names: its model was not "
                     "imported with dpc import-hf (or it was saved before "
                     "checkpoints recorded them)");
  applyHfSources(sources->second, out.params, "'" + file + "'");
  const int64_t bytes = sizeOf(out.valueType);
  out.values = [reader, bytes](const ParamSpec &p, int64_t first, int64_t count,
                               void *values) {
    const TensorInfo *t = reader->find(p.name);
    std::memcpy(values, reader->mapped(*t) + first * bytes,
                static_cast<size_t>(count * bytes));
  };
  return out;
}

} // namespace dprt::driver
