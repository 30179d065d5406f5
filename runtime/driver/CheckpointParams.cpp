//===- CheckpointParams.cpp - A checkpoint's parameters for export --------===//

#include "CheckpointParams.h"

#include "Checkpoint.h"
#include "CheckpointReader.h"
#include "Options.h"

#include <cstring>
#include <memory>
#include <mutex>

namespace dprt::driver {

CheckpointParams openCheckpointParams(const std::string &dir) {
  // Any format and any number of ranks: CheckpointReader gathers each
  // parameter from the shard files that hold it, one parameter at a time.
  auto reader = std::make_shared<CheckpointReader>(dir);
  CheckpointParams out;
  out.path = reader->path();
  out.step = reader->step();
  const std::string statePath = out.path + "/state.json";
  const CheckpointState state =
      checkpointStateFromJson(readTextFile(statePath), statePath);
  out.compute = state.compute == "bf16"  ? DType::BF16
                : state.compute == "f64" ? DType::F64
                                         : DType::F32;
  out.notes = reader->notes();
  out.valueType = reader->dtype();
  for (const CheckpointParameter &c : reader->parameters()) {
    ParamSpec p{c.name, c.shape, 0, 0, 0, c.trainable, {}};
    out.params.push_back(std::move(p));
  }
  if (reader->hfSources().empty())
    throw UsageError("the checkpoint '" + out.path +
                     "' records no Hugging Face names: its model was not "
                     "imported with dpc import-hf (or it was saved before "
                     "checkpoints recorded them)");
  applyHfSources(reader->hfSources(), out.params,
                 "'" + out.path + "/manifest.json'");
  if (!reader->lora().empty())
    out.lora = loraFromJson(reader->lora(), "'" + out.path + "/manifest.json'");
  // The exporter asks for a parameter's rows in order: the last parameter
  // read is kept, so each is gathered from its shards once.
  struct Cache {
    std::mutex mutex;
    std::string name;
    std::vector<char> data;
  };
  auto cache = std::make_shared<Cache>();
  const int64_t bytes = sizeOf(out.valueType);
  out.values = [reader, cache, bytes](const ParamSpec &p, int64_t first,
                                      int64_t count, void *values) {
    std::lock_guard<std::mutex> lock(cache->mutex);
    if (cache->name != p.name) {
      for (const CheckpointParameter &c : reader->parameters())
        if (c.name == p.name)
          reader->read(c, cache->data);
      cache->name = p.name;
    }
    std::memcpy(values, cache->data.data() + first * bytes,
                static_cast<size_t>(count * bytes));
  };
  return out;
}

} // namespace dprt::driver
