//===- Checkpointer.cpp - Saving and loading the ranks' state -------------===//

#include "Checkpointer.h"

#include "Dataset.h"
#include "Options.h"
#include "Safetensors.h"

#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

namespace dprt::driver {
namespace {

/// Reads a tensor into `out` (count elements of `to`), converting if the
/// file stores another type.
void readTensor(SafetensorsReader &reader, const TensorInfo &tensor, DType to,
                char *out) {
  if (tensor.dtype == to) {
    reader.read(tensor, out);
    return;
  }
  std::vector<char> raw(tensor.end - tensor.begin);
  reader.read(tensor, raw.data());
  const int64_t n = tensor.numel();
  for (int64_t i = 0; i < n; ++i)
    storeAs(to, loadAs(tensor.dtype, raw.data() + i * sizeOf(tensor.dtype)),
            out + i * sizeOf(to));
}

/// The index of the first non-finite element of `count` acc elements, or
/// -1.
int64_t firstNonFinite(DType acc, const char *data, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    if (!std::isfinite(loadAs(acc, data + i * sizeOf(acc))))
      return i;
  return -1;
}

} // namespace

std::vector<std::vector<const ParamSpec *>> Checkpointer::paramsByUnit() const {
  std::vector<std::vector<const ParamSpec *>> byUnit(spec_.units.size());
  for (const ParamSpec &p : spec_.params)
    byUnit[p.unit].push_back(&p);
  for (auto &params : byUnit)
    std::sort(params.begin(), params.end(),
              [](const ParamSpec *a, const ParamSpec *b) {
                return a->offsetInUnit < b->offsetInUnit;
              });
  return byUnit;
}

DType Checkpointer::storedType(const UnitSpec &unit) const {
  return unit.frozen() ? spec_.compute : accOf(spec_.compute);
}

std::vector<std::pair<std::string, int64_t>>
Checkpointer::optimizerTensors(const UnitSpec &unit) const {
  if (unit.frozen())
    return {};
  switch (spec_.recipe.optimizer) {
  case OptimizerKind::SGD:
    return {};
  case OptimizerKind::Momentum:
    return {{unit.name + ".momentum", unit.optState1}};
  case OptimizerKind::AdamW:
    return {{unit.name + ".adam_m", unit.optState1},
            {unit.name + ".adam_v", unit.optState2}};
  }
  return {};
}

std::vector<std::vector<char>>
Checkpointer::gatherUnit(const UnitSpec &unit,
                         const std::vector<int64_t> &offsets) {
  const int64_t accBytes = sizeOf(storedType(unit));
  std::vector<std::vector<char>> fulls(
      offsets.size(), std::vector<char>(unit.numel * accBytes));
  ranks_.forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
    for (size_t k = 0; k < offsets.size(); ++k)
      copyFromArena(&rank, fulls[k].data() + lo * accBytes, offsets[k],
                    (hi - lo) * accBytes);
  });
  return fulls;
}

void Checkpointer::scatterUnit(const UnitSpec &unit,
                               const std::vector<int64_t> &offsets,
                               const std::vector<std::vector<char>> &fulls) {
  const int64_t accBytes = sizeOf(storedType(unit));
  ranks_.forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
    for (size_t k = 0; k < offsets.size(); ++k)
      copyToArena(&rank, offsets[k], fulls[k].data() + lo * accBytes,
                  (hi - lo) * accBytes);
  });
}

std::string Checkpointer::save(const std::string &dir,
                               const CheckpointState &state) {
  DPRT_TRACE(ranks_.launch().firstRank, trace::Track::Compute, "checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  CheckpointDirectory directory(dir);
  const std::string temporary = directory.begin(state.step);
  const auto byUnit = paramsByUnit();

  std::vector<TensorInfo> paramTensors, optimizerInfos;
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    for (const ParamSpec *p : byUnit[u])
      paramTensors.push_back({p->name, storedType(spec_.units[u]), p->shape});
    for (const auto &[name, offset] : optimizerTensors(spec_.units[u]))
      optimizerInfos.push_back({name, acc, {spec_.units[u].numel}});
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "dpc"},
      {"model", spec_.model},
      {"step", std::to_string(state.step)}};
  SafetensorsWriter params(temporary + "/params.safetensors", paramTensors,
                           metadata);
  SafetensorsWriter optimizer(temporary + "/optimizer.safetensors",
                              optimizerInfos, metadata);
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    const UnitSpec &unit = spec_.units[u];
    std::vector<int64_t> offsets = {unit.masterShard};
    for (const auto &[name, offset] : optimizerTensors(unit))
      offsets.push_back(offset);
    std::vector<std::vector<char>> fulls = gatherUnit(unit, offsets);
    const DType stored = storedType(unit);
    // A checkpoint of NaN weights would only spread the damage.
    for (size_t k = 0; k < fulls.size(); ++k)
      if (int64_t at = firstNonFinite(stored, fulls[k].data(), unit.numel);
          at >= 0)
        throw std::runtime_error(
            "not saving the checkpoint of step " + std::to_string(state.step) +
            ": element " + std::to_string(at) + " of " +
            (k == 0 ? "the parameters" : "the optimizer state") + " of unit '" +
            unit.name + "' is not finite");
    for (const ParamSpec *p : byUnit[u])
      params.write(fulls[0].data() + p->offsetInUnit * sizeOf(stored));
    for (size_t k = 1; k < fulls.size(); ++k)
      optimizer.write(fulls[k].data());
  }
  params.close();
  optimizer.close();
  CheckpointState withFiles = state;
  withFiles.files = {{"params.safetensors", params.checksum().bytes(),
                      params.checksum().value()},
                     {"optimizer.safetensors", optimizer.checksum().bytes(),
                      optimizer.checksum().value()}};
  writeFileDurably(temporary + "/state.json", toJson(withFiles));
  return directory.commit();
}

void Checkpointer::load(const std::string &path) {
  DPRT_TRACE(ranks_.launch().firstRank, trace::Track::Compute,
             "load_checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  const auto byUnit = paramsByUnit();
  auto reader = [](const std::string &file) {
    try {
      return std::make_unique<SafetensorsReader>(file);
    } catch (const std::runtime_error &e) {
      throw UsageError(e.what());
    }
  };
  auto params = reader(path + "/params.safetensors");
  std::unique_ptr<SafetensorsReader> optimizer;
  if (spec_.recipe.optimizer != OptimizerKind::SGD)
    optimizer = reader(path + "/optimizer.safetensors");

  for (const TensorInfo &t : params->tensors())
    if (std::none_of(spec_.params.begin(), spec_.params.end(),
                     [&](const ParamSpec &p) { return p.name == t.name; }))
      throw UsageError("the checkpoint's parameter '" + t.name +
                       "' is not a parameter of model '" + spec_.model + "'");
  for (size_t u = 0; u < spec_.units.size(); ++u) {
    const UnitSpec &unit = spec_.units[u];
    const DType stored = storedType(unit);
    const int64_t storedBytes = sizeOf(stored);
    std::vector<int64_t> offsets = {unit.masterShard};
    std::vector<std::vector<char>> fulls(
        1, std::vector<char>(unit.numel * storedBytes));
    for (const ParamSpec *p : byUnit[u]) {
      const TensorInfo *t = params->find(p->name);
      if (!t)
        throw UsageError("the checkpoint '" + path + "' has no parameter '" +
                         p->name + "'");
      if (t->shape != p->shape)
        throw UsageError("the checkpoint's parameter '" + p->name +
                         "' has another shape than the model's");
      readTensor(*params, *t, stored,
                 fulls[0].data() + p->offsetInUnit * storedBytes);
      if (int64_t at = firstNonFinite(
              stored, fulls[0].data() + p->offsetInUnit * storedBytes,
              t->numel());
          at >= 0)
        throw UsageError("the checkpoint '" + path +
                         "' is not usable: "
                         "element " +
                         std::to_string(at) + " of parameter '" + p->name +
                         "' in params.safetensors is not finite");
    }
    for (const auto &[name, offset] : optimizerTensors(unit)) {
      const TensorInfo *t = optimizer->find(name);
      if (!t || t->shape != std::vector<int64_t>{unit.numel})
        throw UsageError("the checkpoint '" + path +
                         "' has no optimizer state '" + name + "' of " +
                         std::to_string(unit.numel) + " elements");
      fulls.emplace_back(unit.numel * accBytes);
      readTensor(*optimizer, *t, acc, fulls.back().data());
      if (int64_t at = firstNonFinite(acc, fulls.back().data(), unit.numel);
          at >= 0)
        throw UsageError("the checkpoint '" + path +
                         "' is not usable: "
                         "element " +
                         std::to_string(at) + " of '" + name +
                         "' in optimizer.safetensors is not finite");
      offsets.push_back(offset);
    }
    scatterUnit(unit, offsets, fulls);
  }
  // Compute-type copies of the master weights (bf16 models) follow them.
  ranks_.run([&](int i) {
    Rank &rank = ranks_.slot(i).rank;
    for (const UnitSpec &unit : spec_.units)
      if (unit.paramShard != unit.masterShard)
        cast(&rank, acc, rank.arena + unit.masterShard, spec_.compute,
             rank.arena + unit.paramShard, unit.shardElems);
    synchronize(&rank);
  });
}

} // namespace dprt::driver
