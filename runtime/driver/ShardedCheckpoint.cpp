//===- ShardedCheckpoint.cpp - The tensor files of a checkpoint -----------===//

#include "ShardedCheckpoint.h"

#include "Checksum.h"
#include "Dataset.h"
#include "Json.h"
#include "Options.h"
#include "Safetensors.h"
#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace dprt::driver {
namespace {

/// Bytes per read when a file is verified; a multiple of every element
/// size, so that no element straddles two reads of the data.
constexpr int64_t kVerifyBytes = int64_t{4} << 20;

const char *const kManifestFile = "manifest.json";

/// Whether every element of `count` elements of `dt` at `data` is finite;
/// the index of the first that is not in `at`.
bool allFiniteElements(DType dt, const char *data, int64_t count, int64_t &at) {
  for (int64_t i = 0; i < count; ++i) {
    double v;
    if (dt == DType::F32) {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      v = f;
    } else if (dt == DType::F64) {
      std::memcpy(&v, data + 8 * i, 8);
    } else {
      v = loadAs(dt, data + i * sizeOf(dt));
    }
    if (!std::isfinite(v)) {
      at = i;
      return false;
    }
  }
  return true;
}

} // namespace


namespace {

/// Where the elements [begin, end) of one state of one unit lie: tensor
/// `tensor` of file `file`, whose element 0 is unit element `begin`.
struct Piece {
  int file = 0;
  int64_t begin = 0;
  int64_t end = 0;
  std::string tensor;
};

/// A tensor the manifest places in a file.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

struct TensorFile {
  std::string name; ///< in the checkpoint directory
  std::string path;
  bool hasChecksum = false;
  int64_t bytes = 0;
  uint64_t checksum = 0;
  std::string recordedBy; ///< "manifest.json" or "state.json"
  std::vector<ExpectedTensor> expected;

  std::mutex mutex;
  std::unique_ptr<SafetensorsReader> reader;
  std::map<std::string, TensorInfo> tensors;
  bool verified = false;
};

} // namespace

struct ShardedCheckpoint::Impl {
  std::string path;
  int version = 2;
  CheckpointManifest manifest;
  std::vector<std::unique_ptr<TensorFile>> files;
  /// pieces[unit][state], ordered by begin.
  std::vector<std::vector<std::vector<Piece>>> pieces;

  std::string filePath(const std::string &name) const {
    return (fs::path(path) / name).string();
  }

  TensorFile &addFile(const std::string &name) {
    files.push_back(std::make_unique<TensorFile>());
    files.back()->name = name;
    files.back()->path = filePath(name);
    return *files.back();
  }

  /// Opens the header of `file` (its mutex held); throws UsageError.
  void open(TensorFile &file) {
    if (file.reader)
      return;
    std::error_code ec;
    if (!fs::exists(file.path, ec))
      throw UsageError("the checkpoint file '" + file.path + "' is missing");
    try {
      file.reader = std::make_unique<SafetensorsReader>(file.path);
    } catch (const std::runtime_error &e) {
      throw UsageError(std::string("the checkpoint '") + path +
                       "' is not usable: " + e.what());
    }
    for (const TensorInfo &t : file.reader->tensors())
      file.tensors[t.name] = t;
  }

  void openV2(const CheckpointState &state);
  void openV1(const CheckpointState &state, const ProgramSpec *model,
              std::vector<std::string> &notes);
  void checkModel(const ProgramSpec &model) const;
  void verify(TensorFile &file);
};

void ShardedCheckpoint::Impl::openV2(const CheckpointState &state) {
  const std::string file = filePath(kManifestFile);
  auto recorded = std::find_if(
      state.files.begin(), state.files.end(),
      [](const CheckpointFile &f) { return f.name == kManifestFile; });
  if (recorded == state.files.end())
    throw UsageError("the checkpoint '" + path + "' records no checksum of " +
                     kManifestFile + " in its state.json");
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw UsageError("the checkpoint file '" + file + "' is missing");
  const std::string text = readTextFile(file);
  Checksum checksum;
  checksum.update(text.data(), text.size());
  const int64_t bytes = static_cast<int64_t>(text.size());
  if (bytes != recorded->bytes || checksum.value() != recorded->checksum)
    throw UsageError(
        "the checkpoint file '" + file + "' is corrupt: " +
        (bytes != recorded->bytes
             ? "it has " + std::to_string(bytes) +
                   " bytes, state.json records " +
                   std::to_string(recorded->bytes)
             : "its XXH3-64 checksum is " + checksumText(checksum.value()) +
                   ", state.json records " + checksumText(recorded->checksum)));
  manifest = manifestFromJson(text, file);
  if (manifest.model != state.model || manifest.step != state.step)
    throw UsageError("the checkpoint manifest '" + file + "' describes step " +
                     std::to_string(manifest.step) + " of model '" +
                     manifest.model + "', its state.json step " +
                     std::to_string(state.step) + " of model '" + state.model +
                     "'");

  pieces.assign(manifest.units.size(),
                std::vector<std::vector<Piece>>(manifest.states.size()));
  for (const ManifestShard &shard : manifest.shards) {
    TensorFile &f = addFile(shard.file);
    f.hasChecksum = true;
    f.bytes = shard.bytes;
    f.checksum = shard.checksum;
    f.recordedBy = kManifestFile;
    const int index = static_cast<int>(files.size()) - 1;
    for (const ManifestRange &r : shard.ranges) {
      if (r.begin == r.end)
        continue;
      const size_t states =
          manifest.units[r.unit].frozen ? 1 : manifest.states.size();
      for (size_t s = 0; s < states; ++s) {
        const std::string tensor =
            shardTensorName(manifest.units[r.unit].name, manifest.states[s]);
        f.expected.push_back({tensor, {r.end - r.begin}});
        pieces[r.unit][s].push_back({index, r.begin, r.end, tensor});
      }
    }
  }
  for (auto &unit : pieces)
    for (auto &list : unit)
      std::sort(list.begin(), list.end(), [](const Piece &a, const Piece &b) {
        return a.begin < b.begin;
      });
}

void ShardedCheckpoint::Impl::openV1(const CheckpointState &state,
                                     const ProgramSpec *model,
                                     std::vector<std::string> &notes) {
  notes.push_back("the checkpoint '" + path +
                  "' has format version 1 (every parameter full in "
                  "params.safetensors): it is read as a checkpoint of one "
                  "shard; checkpoints saved from now on are sharded (version "
                  "2)");
  if (state.files.empty())
    notes.push_back("the checkpoint '" + path +
                    "' records no checksums (written by an older program): "
                    "its tensor files are not verified");
  auto describe = [&](TensorFile &f) {
    auto recorded =
        std::find_if(state.files.begin(), state.files.end(),
                     [&](const CheckpointFile &r) { return r.name == f.name; });
    if (recorded != state.files.end()) {
      f.hasChecksum = true;
      f.bytes = recorded->bytes;
      f.checksum = recorded->checksum;
    } else if (!state.files.empty()) {
      throw UsageError("the checkpoint '" + path + "' records no checksum of " +
                       f.name + " in its state.json");
    }
    f.recordedBy = "state.json";
  };
  TensorFile &params = addFile("params.safetensors");
  describe(params);
  open(params);

  manifest.model = state.model;
  manifest.step = state.step;
  manifest.ranks = 1;
  manifest.dtype = params.reader->tensors().empty()
                       ? DType::F32
                       : params.reader->tensors().front().dtype;

  if (!model) {
    manifest.states = {"master"};
    for (const TensorInfo &t : params.reader->tensors()) {
      const int32_t unit = static_cast<int32_t>(manifest.units.size());
      manifest.units.push_back({t.name, t.numel(), t.numel()});
      manifest.params.push_back({t.name, t.shape, unit, 0, true});
      params.expected.push_back({t.name, t.shape});
      pieces.emplace_back(1,
                          std::vector<Piece>{Piece{0, 0, t.numel(), t.name}});
    }
    return;
  }

  // The model's units: a version-1 checkpoint could only be resumed into
  // the program that wrote it.
  manifest.states = checkpointStates(model->recipe.optimizer);
  for (const UnitSpec &u : model->units)
    manifest.units.push_back({u.name, u.numel, u.shardElems});
  pieces.assign(manifest.units.size(),
                std::vector<std::vector<Piece>>(manifest.states.size()));
  for (const TensorInfo &t : params.reader->tensors()) {
    auto p = std::find_if(model->params.begin(), model->params.end(),
                          [&](const ParamSpec &q) { return q.name == t.name; });
    if (p == model->params.end())
      throw UsageError("the checkpoint's parameter '" + t.name +
                       "' is not a parameter of model '" + model->model +
                       "' (checkpoint '" + path + "')");
    if (t.shape != p->shape)
      throw UsageError("the checkpoint's parameter '" + t.name +
                       "' has shape " + shapeText(t.shape) +
                       ", the model's has shape " + shapeText(p->shape) +
                       " (checkpoint '" + path + "')");
    manifest.params.push_back(
        {t.name, t.shape, p->unit, p->offsetInUnit, p->trainable});
    params.expected.push_back({t.name, t.shape});
    pieces[p->unit][0].push_back(
        {0, p->offsetInUnit, p->offsetInUnit + t.numel(), t.name});
  }
  if (manifest.states.size() > 1) {
    TensorFile &optimizer = addFile("optimizer.safetensors");
    describe(optimizer);
    open(optimizer);
    for (size_t u = 0; u < manifest.units.size(); ++u)
      for (size_t s = 1; s < manifest.states.size(); ++s) {
        const ManifestUnit &unit = manifest.units[u];
        const std::string name = shardTensorName(unit.name, manifest.states[s]);
        auto t = optimizer.tensors.find(name);
        if (t == optimizer.tensors.end() ||
            t->second.shape != std::vector<int64_t>{unit.numel})
          throw UsageError("the checkpoint '" + path +
                           "' has no optimizer state '" + name + "' of " +
                           std::to_string(unit.numel) + " elements");
        optimizer.expected.push_back({name, {unit.numel}});
        pieces[u][s].push_back({1, 0, unit.numel, name});
      }
  }
  for (auto &unit : pieces)
    for (auto &list : unit)
      std::sort(list.begin(), list.end(), [](const Piece &a, const Piece &b) {
        return a.begin < b.begin;
      });
}

void ShardedCheckpoint::Impl::checkModel(const ProgramSpec &model) const {
  const std::string where = " (checkpoint '" + path + "')";
  for (const ManifestParam &c : manifest.params) {
    auto p = std::find_if(model.params.begin(), model.params.end(),
                          [&](const ParamSpec &q) { return q.name == c.name; });
    if (p == model.params.end())
      throw UsageError("the checkpoint's parameter '" + c.name +
                       "' is not a parameter of model '" + model.model + "'" +
                       where);
    if (p->shape != c.shape)
      throw UsageError("the checkpoint's parameter '" + c.name +
                       "' has shape " + shapeText(c.shape) +
                       ", the model's has shape " + shapeText(p->shape) +
                       where);
  }
  for (const ParamSpec &p : model.params)
    if (std::none_of(manifest.params.begin(), manifest.params.end(),
                     [&](const ManifestParam &c) { return c.name == p.name; }))
      throw UsageError("the checkpoint has no parameter '" + p.name +
                       "' of model '" + model.model + "'" + where);
  for (const std::string &state : checkpointStates(model.recipe.optimizer))
    if (std::find(manifest.states.begin(), manifest.states.end(), state) ==
        manifest.states.end())
      throw UsageError("the checkpoint holds no optimizer state '" + state +
                       "', which the model's optimizer needs" + where);
}

void ShardedCheckpoint::Impl::verify(TensorFile &file) {
  if (file.verified)
    return;
  std::error_code ec;
  if (!fs::exists(file.path, ec))
    throw UsageError("the checkpoint file '" + file.path + "' is missing");
  const int64_t size = static_cast<int64_t>(fs::file_size(file.path, ec));
  if (file.hasChecksum && !ec && size != file.bytes)
    throw UsageError("the checkpoint file '" + file.path +
                     "' is corrupt: it has " + std::to_string(size) +
                     " bytes, " + file.recordedBy + " records " +
                     std::to_string(file.bytes));
  open(file);
  const std::string where = "the checkpoint file '" + file.path + "'";
  for (const ExpectedTensor &e : file.expected) {
    auto t = file.tensors.find(e.name);
    if (t == file.tensors.end() || t->second.shape != e.shape)
      throw UsageError(
          where + " has no tensor '" + e.name + "' of shape " +
          shapeText(e.shape) + ", which " +
          (file.recordedBy == kManifestFile ? "the manifest" : "the model") +
          " places there");
    if (version == 2 && t->second.dtype != manifest.dtype)
      throw UsageError(where + " holds '" + e.name + "' as " +
                       safetensorsDType(t->second.dtype) +
                       ", the manifest says " +
                       safetensorsDType(manifest.dtype));
    if (t->second.begin % sizeOf(t->second.dtype) != 0)
      throw UsageError(where + " holds '" + e.name +
                       "' at an offset that is not a multiple of its "
                       "element size: not a file dpc wrote");
  }

  // One pass over the file: the checksum of every byte, and every element
  // of the tensors checked for finiteness (chunks of the data section are
  // multiples of every element size, and tensors start at multiples of
  // theirs, so no element straddles two chunks).
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> in(
      std::fopen(file.path.c_str(), "rb"), &std::fclose);
  if (!in)
    throw UsageError("cannot read '" + file.path +
                     "': " + std::strerror(errno));
  Checksum checksum;
  std::vector<char> buffer(static_cast<size_t>(kVerifyBytes));
  const int64_t dataStart = file.reader->dataStart();
  std::vector<const TensorInfo *> tensors;
  for (const auto &[name, t] : file.tensors)
    tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo *a, const TensorInfo *b) {
              return a->begin < b->begin;
            });
  std::string nonFinite;
  int64_t position = 0; // file offset of buffer[0]
  for (;;) {
    // The header, then the data in chunks that start at its first byte.
    const int64_t want = position < dataStart
                             ? std::min(kVerifyBytes, dataStart - position)
                             : kVerifyBytes;
    const size_t n =
        std::fread(buffer.data(), 1, static_cast<size_t>(want), in.get());
    checksum.update(buffer.data(), n);
    if (position >= dataStart && nonFinite.empty()) {
      const int64_t lo = position - dataStart;
      const int64_t hi = lo + static_cast<int64_t>(n);
      for (const TensorInfo *t : tensors) {
        const int64_t a = std::max(lo, t->begin), b = std::min(hi, t->end);
        if (a >= b)
          continue;
        const int64_t es = sizeOf(t->dtype);
        int64_t at = 0;
        if (!allFiniteElements(t->dtype, buffer.data() + (a - lo), (b - a) / es,
                               at)) {
          nonFinite = "element " + std::to_string((a - t->begin) / es + at) +
                      " of '" + t->name + "' in " + file.name;
          break;
        }
      }
    }
    position += static_cast<int64_t>(n);
    if (n < static_cast<size_t>(want))
      break;
  }
  if (std::ferror(in.get()))
    throw UsageError("cannot read '" + file.path +
                     "': " + std::strerror(errno));
  if (file.hasChecksum &&
      (checksum.bytes() != file.bytes || checksum.value() != file.checksum))
    throw UsageError(
        where + " is corrupt: " +
        (checksum.bytes() != file.bytes
             ? "it has " + std::to_string(checksum.bytes()) + " bytes, " +
                   file.recordedBy + " records " + std::to_string(file.bytes)
             : "its XXH3-64 checksum is " + checksumText(checksum.value()) +
                   ", " + file.recordedBy + " records " +
                   checksumText(file.checksum)));
  if (!nonFinite.empty())
    throw UsageError("the checkpoint '" + path +
                     "' is not usable: " + nonFinite + " is not finite");
  file.verified = true;
}

ShardedCheckpoint::ShardedCheckpoint(const std::string &path,
                                     const CheckpointState &state,
                                     const ProgramSpec *model,
                                     std::vector<std::string> &notes)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->version = state.formatVersion;
  if (state.formatVersion == 1)
    impl_->openV1(state, model, notes);
  else
    impl_->openV2(state);
  if (model)
    impl_->checkModel(*model);
}

ShardedCheckpoint::~ShardedCheckpoint() = default;

const std::string &ShardedCheckpoint::path() const { return impl_->path; }
int ShardedCheckpoint::formatVersion() const { return impl_->version; }
const CheckpointManifest &ShardedCheckpoint::manifest() const {
  return impl_->manifest;
}

int ShardedCheckpoint::stateIndex(const std::string &state) const {
  const auto &states = impl_->manifest.states;
  auto it = std::find(states.begin(), states.end(), state);
  return it == states.end() ? -1 : static_cast<int>(it - states.begin());
}

int ShardedCheckpoint::paramIndex(const std::string &name) const {
  const auto &params = impl_->manifest.params;
  auto it =
      std::find_if(params.begin(), params.end(),
                   [&](const ManifestParam &p) { return p.name == name; });
  return it == params.end() ? -1 : static_cast<int>(it - params.begin());
}

int ShardedCheckpoint::fileCount() const {
  return static_cast<int>(impl_->files.size());
}

std::vector<int> ShardedCheckpoint::filesHolding(int32_t unit, int64_t begin,
                                                 int64_t end) const {
  std::set<int> files;
  for (const auto &list : impl_->pieces.at(unit))
    for (const Piece &p : list)
      if (p.begin < end && begin < p.end)
        files.insert(p.file);
  return {files.begin(), files.end()};
}

bool ShardedCheckpoint::holds(int32_t unit, int state, int64_t begin,
                              int64_t end) const {
  int64_t cursor = begin;
  for (const Piece &p : impl_->pieces.at(unit).at(state))
    if (p.begin <= cursor && cursor < p.end)
      cursor = p.end;
  return cursor >= end;
}

void ShardedCheckpoint::verifyFile(int file) {
  TensorFile &f = *impl_->files.at(file);
  std::lock_guard<std::mutex> lock(f.mutex);
  impl_->verify(f);
}

void ShardedCheckpoint::read(int32_t unit, int state, int64_t begin,
                             int64_t end, DType to, void *out) {
  const std::vector<Piece> &list = impl_->pieces.at(unit).at(state);
  const int64_t toBytes = sizeOf(to);
  std::vector<char> converted;
  int64_t cursor = begin;
  for (const Piece &p : list) {
    if (p.end <= cursor)
      continue;
    if (p.begin > cursor || cursor >= end)
      break;
    const int64_t stop = std::min(end, p.end);
    TensorFile &f = *impl_->files[p.file];
    {
      std::lock_guard<std::mutex> lock(f.mutex);
      impl_->verify(f);
    }
    const TensorInfo &t = f.tensors.at(p.tensor);
    const int64_t es = sizeOf(t.dtype);
    char *target = static_cast<char *>(out) + (cursor - begin) * toBytes;
    const int64_t count = stop - cursor;
    if (t.dtype == to) {
      f.reader->readRange(t, (cursor - p.begin) * es, count * es, target);
    } else {
      converted.resize(static_cast<size_t>(count * es));
      f.reader->readRange(t, (cursor - p.begin) * es, count * es,
                          converted.data());
      for (int64_t i = 0; i < count; ++i)
        storeAs(to, loadAs(t.dtype, converted.data() + i * es),
                target + i * toBytes);
    }
    cursor = stop;
  }
  if (cursor < end)
    throw std::runtime_error("the checkpoint '" + impl_->path +
                             "' holds no elements " + rangeText(cursor, end) +
                             " of state '" + impl_->manifest.states.at(state) +
                             "' of unit '" +
                             impl_->manifest.units.at(unit).name + "'");
}

} // namespace dprt::driver
