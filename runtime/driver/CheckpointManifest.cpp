//===- CheckpointManifest.cpp - The manifest of a sharded checkpoint ------===//
//
// manifest.json as text and back (toJson, manifestFromJson) and the names
// of a checkpoint's files and tensors; ShardedCheckpoint.cpp reads the
// tensor files the manifest names.
//
//===----------------------------------------------------------------------===//

#include "ShardedCheckpoint.h"

#include "Checksum.h"
#include "Json.h"
#include "Options.h"
#include "Safetensors.h"
#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace dprt::driver {
namespace {

using privacy::jsonString;

/// JSON numbers are doubles: whole numbers are exact up to 2^53.
constexpr int64_t kMaxJsonInteger = int64_t{1} << 53;

/// A file name inside the checkpoint directory: no path, nothing hidden.
bool isPlainFileName(const std::string &name) {
  return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos;
}

} // namespace

std::string rangeText(int64_t begin, int64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

int64_t ManifestParam::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<std::string> checkpointStates(OptimizerKind optimizer) {
  switch (optimizer) {
  case OptimizerKind::SGD:
    return {"master"};
  case OptimizerKind::Momentum:
    return {"master", "momentum"};
  case OptimizerKind::AdamW:
    return {"master", "adam_m", "adam_v"};
  }
  return {"master"};
}

std::string shardFileName(int32_t rank, int32_t ranks) {
  char name[64];
  std::snprintf(name, sizeof(name), "rank-%05d-of-%05d.safetensors", rank,
                ranks);
  return name;
}

std::string shardTensorName(const std::string &unit, const std::string &state) {
  return unit + "." + state;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

//===----------------------------------------------------------------------===//
// manifest.json
//===----------------------------------------------------------------------===//

std::string toJson(const CheckpointManifest &m) {
  std::ostringstream os;
  os << "{\n"
     << "  \"format\": \"dpc-checkpoint-manifest\",\n"
     << "  \"format_version\": " << CheckpointManifest::kFormatVersion << ",\n"
     << "  \"model\": " << jsonString(m.model) << ",\n"
     << "  \"step\": " << m.step << ",\n"
     << "  \"dtype\": \"" << safetensorsDType(m.dtype) << "\",\n"
     << "  \"grid\": {\"ranks\": " << m.ranks << "},\n"
     << "  \"states\": [";
  for (size_t i = 0; i < m.states.size(); ++i)
    os << (i ? ", " : "") << jsonString(m.states[i]);
  os << "],\n  \"units\": [";
  for (size_t i = 0; i < m.units.size(); ++i)
    os << (i ? "," : "") << "\n    {\"name\": " << jsonString(m.units[i].name)
       << ", \"numel\": " << m.units[i].numel
       << ", \"shard_elems\": " << m.units[i].shardElems
       << (m.units[i].frozen ? ", \"frozen\": true" : "") << "}";
  os << "\n  ],\n  \"params\": [";
  for (size_t i = 0; i < m.params.size(); ++i) {
    const ManifestParam &p = m.params[i];
    os << (i ? "," : "") << "\n    {\"name\": " << jsonString(p.name)
       << ", \"unit\": " << jsonString(m.units[p.unit].name)
       << ", \"offset\": " << p.offset << ", \"shape\": " << shapeText(p.shape)
       << ", \"trainable\": " << (p.trainable ? "true" : "false") << "}";
  }
  os << "\n  ],\n  \"shards\": [";
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ManifestShard &s = m.shards[i];
    os << (i ? "," : "") << "\n    {\"file\": " << jsonString(s.file)
       << ", \"rank\": " << s.rank << ", \"bytes\": " << s.bytes
       << ", \"xxh3_64\": " << jsonString(checksumText(s.checksum))
       << ", \"ranges\": {";
    for (size_t r = 0; r < s.ranges.size(); ++r)
      os << (r ? ", " : "") << jsonString(m.units[s.ranges[r].unit].name)
         << ": [" << s.ranges[r].begin << ", " << s.ranges[r].end << "]";
    os << "}}";
  }
  os << "\n  ]";
  if (!m.hfSources.empty())
    os << ",\n  \"hf_sources\": " << jsonString(m.hfSources);
  if (!m.lora.empty())
    os << ",\n  \"lora\": " << jsonString(m.lora);
  os << "\n}\n";
  return os.str();
}

CheckpointManifest manifestFromJson(const std::string &text,
                                    const std::string &path) {
  CheckpointManifest m;
  try {
    const JsonValue root = JsonValue::parse(text);
    if (root.at("format").string() != "dpc-checkpoint-manifest")
      throw JsonError("not a dpc checkpoint manifest");
    const int64_t version = root.at("format_version").integer();
    if (version != CheckpointManifest::kFormatVersion)
      throw JsonError("format version " + std::to_string(version) +
                      ", this program reads version " +
                      std::to_string(CheckpointManifest::kFormatVersion));
    m.model = root.at("model").string();
    if (const JsonValue *hf = root.find("hf_sources"))
      m.hfSources = hf->string();
    if (const JsonValue *lora = root.find("lora"))
      m.lora = lora->string();
    m.step = integerIn(root, "step", 0, kMaxSteps);
    const std::string &dtype = root.at("dtype").string();
    if (dtype == "F32")
      m.dtype = DType::F32;
    else if (dtype == "F64")
      m.dtype = DType::F64;
    else
      throw JsonError("\"dtype\" must be F32 or F64, got " + dtype);
    m.ranks = static_cast<int32_t>(integerIn(
        root.at("grid"), "ranks", 1, std::numeric_limits<int32_t>::max()));

    const std::vector<std::string> known = {"master", "momentum", "adam_m",
                                            "adam_v"};
    for (const JsonValue &state : root.at("states").array()) {
      const std::string &name = state.string();
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw JsonError("unknown state '" + name + "'");
      if (std::find(m.states.begin(), m.states.end(), name) != m.states.end())
        throw JsonError("state '" + name + "' is listed twice");
      m.states.push_back(name);
    }
    if (m.states.empty() || m.states[0] != "master")
      throw JsonError("\"states\" must begin with \"master\"");

    std::map<std::string, int32_t> unitIndex;
    for (const JsonValue &unit : root.at("units").array()) {
      ManifestUnit u;
      u.name = unit.at("name").string();
      if (u.name.empty() || unitIndex.count(u.name))
        throw JsonError("unit '" + u.name + "' is listed twice or unnamed");
      u.numel = integerIn(unit, "numel", 0, kMaxJsonInteger);
      u.shardElems = integerIn(unit, "shard_elems", 0, kMaxJsonInteger);
      if (const JsonValue *frozen = unit.find("frozen"))
        u.frozen = frozen->boolean();
      unitIndex[u.name] = static_cast<int32_t>(m.units.size());
      m.units.push_back(u);
    }
    auto unitNamed = [&](const std::string &name, const std::string &user) {
      auto it = unitIndex.find(name);
      if (it == unitIndex.end())
        throw JsonError(user + " names unit '" + name +
                        "', which \"units\" does not list");
      return it->second;
    };

    std::set<std::string> paramNames;
    for (const JsonValue &param : root.at("params").array()) {
      ManifestParam p;
      p.name = param.at("name").string();
      if (p.name.empty() || !paramNames.insert(p.name).second)
        throw JsonError("parameter '" + p.name +
                        "' is listed twice or unnamed");
      const std::string what = "parameter '" + p.name + "'";
      p.unit = unitNamed(param.at("unit").string(), what);
      p.offset = integerIn(param, "offset", 0, kMaxJsonInteger);
      int64_t numel = 1;
      for (const JsonValue &d : param.at("shape").array()) {
        const int64_t dim = d.integer();
        if (dim < 0 || (dim > 0 && numel > kMaxJsonInteger / dim))
          throw JsonError(what + " has a dimension out of range");
        numel *= dim;
        p.shape.push_back(dim);
      }
      if (p.shape.empty())
        throw JsonError(what + " has no dimensions");
      const ManifestUnit &u = m.units[p.unit];
      if (p.offset > u.numel - numel)
        throw JsonError(what + " at elements " +
                        rangeText(p.offset, p.offset + numel) +
                        " lies outside unit '" + u.name + "' of " +
                        std::to_string(u.numel) + " elements");
      if (const JsonValue *trainable = param.find("trainable"))
        p.trainable = trainable->boolean();
      m.params.push_back(std::move(p));
    }

    std::set<std::string> files;
    std::vector<int> shardsOfRank(static_cast<size_t>(m.ranks), 0);
    for (const JsonValue &shard : root.at("shards").array()) {
      ManifestShard s;
      s.file = shard.at("file").string();
      if (!isPlainFileName(s.file))
        throw JsonError("shard file '" + s.file +
                        "' is not a file name of the checkpoint directory");
      if (!files.insert(s.file).second)
        throw JsonError("shard file '" + s.file + "' is listed twice");
      s.rank = static_cast<int32_t>(integerIn(shard, "rank", 0, m.ranks - 1));
      ++shardsOfRank[s.rank];
      s.bytes = integerIn(shard, "bytes", 0, kMaxJsonInteger);
      s.checksum = parseHex64(shard.at("xxh3_64"));
      for (const auto &[unit, range] : shard.at("ranges").object()) {
        ManifestRange r;
        r.unit = unitNamed(unit, "shard file '" + s.file + "'");
        const auto &bounds = range.array();
        if (bounds.size() != 2)
          throw JsonError("the range of unit '" + unit + "' in '" + s.file +
                          "' needs [begin, end]");
        r.begin = bounds[0].integer();
        r.end = bounds[1].integer();
        if (r.begin < 0 || r.end < r.begin || r.end > m.units[r.unit].numel)
          throw JsonError("the range " + rangeText(r.begin, r.end) +
                          " of unit '" + unit + "' in '" + s.file +
                          "' lies outside the unit's " +
                          std::to_string(m.units[r.unit].numel) + " elements");
        s.ranges.push_back(r);
      }
      m.shards.push_back(std::move(s));
    }
    for (int32_t r = 0; r < m.ranks; ++r)
      if (shardsOfRank[r] != 1)
        throw JsonError(
            shardsOfRank[r] == 0
                ? "it lists no shard file of rank " + std::to_string(r) +
                      " (of " + std::to_string(m.ranks) + " ranks)"
                : "it lists two shard files of rank " + std::to_string(r));

    // Every element of every unit in exactly one shard.
    for (size_t u = 0; u < m.units.size(); ++u) {
      std::vector<std::pair<ManifestRange, const std::string *>> ranges;
      for (const ManifestShard &s : m.shards)
        for (const ManifestRange &r : s.ranges)
          if (r.unit == static_cast<int32_t>(u) && r.begin < r.end)
            ranges.push_back({r, &s.file});
      std::sort(ranges.begin(), ranges.end(), [](const auto &a, const auto &b) {
        return a.first.begin < b.first.begin;
      });
      int64_t covered = 0;
      const std::string *last = nullptr;
      for (const auto &[r, file] : ranges) {
        if (r.begin > covered)
          break;
        if (r.begin < covered)
          throw JsonError("elements " + rangeText(r.begin, covered) +
                          " of unit '" + m.units[u].name +
                          "' are in two shard files, '" + *last + "' and '" +
                          *file + "'");
        covered = r.end;
        last = file;
      }
      if (covered < m.units[u].numel) {
        int64_t next = m.units[u].numel;
        for (const auto &[r, file] : ranges)
          if (r.begin > covered) {
            next = r.begin;
            break;
          }
        throw JsonError("no shard file holds elements " +
                        rangeText(covered, next) + " of unit '" +
                        m.units[u].name + "'");
      }
    }
  } catch (const JsonError &e) {
    throw UsageError("the checkpoint manifest '" + path +
                     "' is not valid: " + e.what());
  }
  return m;
}

//===----------------------------------------------------------------------===//
// ShardedCheckpoint
//===----------------------------------------------------------------------===//

} // namespace dprt::driver
