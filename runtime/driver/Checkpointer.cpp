//===- Checkpointer.cpp - Saving and loading the ranks' state -------------===//

#include "Checkpointer.h"

#include "Checksum.h"
#include "Dataset.h"
#include "HfWeights.h"
#include "Options.h"
#include "Safetensors.h"
#include "ShardedCheckpoint.h"

#include "common/ThreadCommunicator.h"
#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <map>
#include <utility>

namespace dprt::driver {
namespace {

/// Host staging per rank and copy: the most of a shard in memory at once.
constexpr int64_t kStagingBytes = int64_t{8} << 20;

/// Test hook: DPRT_TEST_CHECKPOINT_FAULT=fail-shard-R makes rank R fail
/// while it writes its shard file, as a full disk would.
bool shardFault(int32_t rank) {
  const char *fault = std::getenv("DPRT_TEST_CHECKPOINT_FAULT");
  return fault && std::string(fault) == "fail-shard-" + std::to_string(rank);
}

/// The size and checksum of a written file.
struct WrittenFile {
  int64_t bytes = 0;
  uint64_t checksum = 0;
};

/// Elements [begin, begin + count) of state `state` of checkpoint unit
/// `unit`, to be written at `arenaOffset` of the rank's arena.
struct ShardCopy {
  int32_t unit = 0;
  int state = 0;
  int64_t begin = 0;
  int64_t count = 0;
  int64_t arenaOffset = 0;
  /// The arena holds these elements in the compute type (a frozen unit's
  /// values), not in the acc type the checkpoint stores.
  bool toCompute = false;
};

} // namespace

int64_t Checkpointer::stateShard(const UnitSpec &unit, int state) const {
  return state == 0   ? unit.masterShard
         : state == 1 ? unit.optState1
                      : unit.optState2;
}

std::string Checkpointer::save(const std::string &dir,
                               const CheckpointState &state) {
  DPRT_TRACE(ranks_.launch().firstRank, trace::Track::Compute, "checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  const std::vector<std::string> states =
      checkpointStates(spec_.recipe.optimizer);
  const int32_t world = ranks_.launch().world;
  // Under hybrid sharding (R x S) every replica holds the same S shards:
  // the ranks of the first replica (ranks 0 .. S-1) write them, and a
  // checkpoint records S ranks, as an FSDP run of S ranks would.
  const int32_t shards = world / ranks_.launch().replicas;
  const std::string stepText = std::to_string(state.step);
  auto rangeOf = [&](const UnitSpec &unit, int32_t rank) {
    const int64_t lo = std::min(rank * unit.shardElems, unit.numel);
    return std::make_pair(lo, std::min(lo + unit.shardElems, unit.numel));
  };

  // A frozen unit (LoRA's base) has its values and no optimizer state.
  auto statesOf = [&](const UnitSpec &unit) -> size_t {
    return unit.frozen() ? 1 : states.size();
  };
  // Bytes per element of a unit's state in the arena: a frozen unit keeps
  // its values only in the compute type (no master), and is saved in the
  // acc type like every other state (exact: f32 and f64 hold every bf16).
  const int64_t computeBytes = sizeOf(spec_.compute);
  auto arenaBytesOf = [&](const UnitSpec &unit) {
    return unit.frozen() ? computeBytes : accBytes;
  };

  // One rank's shard file: per unit with elements on this rank, each state
  // as "<unit>.<state>", streamed from the arena through a staging buffer.
  auto writeShard = [&](Rank &rank, const std::string &path) {
    std::vector<TensorInfo> tensors;
    std::map<std::string, std::string> metadata = {
        {"format", "dpc-shard"},
        {"format_version", std::to_string(CheckpointManifest::kFormatVersion)},
        {"model", spec_.model},
        {"step", stepText},
        {"rank", std::to_string(rank.rank)},
        {"ranks", std::to_string(shards)}};
    for (const UnitSpec &unit : spec_.units) {
      const auto [lo, hi] = rangeOf(unit, rank.rank);
      if (lo == hi)
        continue;
      metadata["range:" + unit.name] =
          std::to_string(lo) + ":" + std::to_string(hi);
      for (size_t s = 0; s < statesOf(unit); ++s)
        tensors.push_back(
            {shardTensorName(unit.name, states[s]), acc, {hi - lo}});
    }
    SafetensorsWriter writer(path, tensors, metadata);
    if (shardFault(rank.rank))
      throw std::runtime_error("cannot write '" + path + "': test fault");
    std::vector<char> staging, raw;
    for (const UnitSpec &unit : spec_.units) {
      const auto [lo, hi] = rangeOf(unit, rank.rank);
      const int64_t elemBytes = arenaBytesOf(unit);
      for (size_t s = 0; s < statesOf(unit); ++s)
        for (int64_t done = 0; done < hi - lo;) {
          const int64_t n = std::min(hi - lo - done, kStagingBytes / accBytes);
          staging.resize(static_cast<size_t>(n * accBytes));
          const int64_t from =
              stateShard(unit, static_cast<int>(s)) + done * elemBytes;
          if (elemBytes == accBytes) {
            copyFromArena(&rank, staging.data(), from, n * accBytes);
          } else {
            raw.resize(static_cast<size_t>(n * elemBytes));
            copyFromArena(&rank, raw.data(), from, n * elemBytes);
            for (int64_t i = 0; i < n; ++i)
              storeAs(acc, loadAs(spec_.compute, raw.data() + i * elemBytes),
                      staging.data() + i * accBytes);
          }
          // A checkpoint of NaN weights would only spread the damage.
          for (int64_t i = 0; i < n; ++i)
            if (!std::isfinite(loadAs(acc, staging.data() + i * accBytes)))
              throw std::runtime_error(
                  "not saving the checkpoint of step " + stepText +
                  ": element " + std::to_string(lo + done + i) + " of " +
                  (s == 0 ? std::string("the parameters")
                          : "the optimizer state '" + states[s] + "'") +
                  " of unit '" + unit.name + "' is not finite");
          writer.writeBytes(staging.data(), n * accBytes);
          done += n;
        }
    }
    writer.close();
    return WrittenFile{writer.checksum().bytes(), writer.checksum().value()};
  };

  // Written by rank 0 once every rank reported its file.
  auto manifestOf = [&](const std::vector<double> &report) {
    CheckpointManifest m;
    m.model = spec_.model;
    m.step = state.step;
    m.dtype = acc;
    m.ranks = shards;
    m.states = states;
    m.hfSources = hfSourcesJson(spec_.params);
    m.lora = loraJson(spec_.lora);
    for (const UnitSpec &unit : spec_.units)
      m.units.push_back(
          {unit.name, unit.numel, unit.shardElems, unit.frozen()});
    for (const ParamSpec &p : spec_.params)
      m.params.push_back(
          {p.name, p.shape, p.unit, p.offsetInUnit, p.trainable});
    for (int32_t r = 0; r < shards; ++r) {
      ManifestShard shard;
      shard.file = shardFileName(r, shards);
      shard.rank = r;
      shard.bytes = static_cast<int64_t>(report[4 * r + 1]);
      shard.checksum = static_cast<uint64_t>(report[4 * r + 2]) << 32 |
                       static_cast<uint64_t>(report[4 * r + 3]);
      for (size_t u = 0; u < spec_.units.size(); ++u) {
        const auto [lo, hi] = rangeOf(spec_.units[u], r);
        if (lo < hi)
          shard.ranges.push_back({static_cast<int32_t>(u), lo, hi});
      }
      m.shards.push_back(std::move(shard));
    }
    return m;
  };

  CheckpointDirectory directory(dir);
  std::string published;
  // Each rank decides alone whether it failed; the all-reduces tell every
  // rank about the others, so that all of them leave together and only
  // the failed one reports its own error (the others throw
  // CommunicatorAborted, which ProcessRanks::run ranks below a root cause).
  ranks_.run([&](int i) {
    Rank &rank = ranks_.slot(i).rank;
    const bool lead = rank.rank == 0;
    std::exception_ptr error;

    // 1. Rank 0 makes the temporary directory; every rank learns its name.
    double begun[2] = {0, 0}; // rank 0 failed, its token
    if (lead) {
      try {
        directory.begin(state.step);
        begun[1] = static_cast<double>(directory.token());
      } catch (...) {
        error = std::current_exception();
        begun[0] = 1;
      }
    }
    rank.comm->allReduceHost(begun, 2);
    if (begun[0] != 0) {
      if (error)
        std::rethrow_exception(error);
      throw CommunicatorAborted("rank 0 could not begin the checkpoint of "
                                "step " +
                                stepText + " in '" + dir + "'");
    }
    const std::string temporary = CheckpointDirectory::temporaryPath(
        dir, state.step, static_cast<int64_t>(begun[1]));

    // 2. Every rank writes and fsyncs its shard file and reports whether it
    // failed, its size and its checksum (two 32-bit halves: exact in
    // doubles, and the sum over ranks adds only zeros to each rank's slot).
    std::vector<double> report(static_cast<size_t>(4 * world), 0.0);
    double *mine = &report[4 * static_cast<size_t>(rank.rank)];
    try {
      if (rank.rank < shards) {
        const WrittenFile file = writeShard(
            rank, temporary + "/" + shardFileName(rank.rank, shards));
        mine[1] = static_cast<double>(file.bytes);
        mine[2] = static_cast<double>(file.checksum >> 32);
        mine[3] = static_cast<double>(file.checksum & 0xffffffffu);
      }
    } catch (...) {
      error = std::current_exception();
      mine[0] = 1;
    }
    rank.comm->allReduceHost(report.data(), 4 * world);
    for (int32_t r = 0; r < world; ++r)
      if (report[4 * r] != 0) {
        if (lead)
          directory.abandon();
        if (error)
          std::rethrow_exception(error);
        throw CommunicatorAborted(
            "rank " + std::to_string(r) +
            " could not write its shard of the checkpoint of step " + stepText +
            "; nothing was published");
      }

    // 3. Rank 0 writes the manifest and the state and publishes.
    double failed = 0;
    if (lead) {
      try {
        const std::string manifest = toJson(manifestOf(report));
        writeFileDurably(temporary + "/manifest.json", manifest);
        Checksum checksum;
        checksum.update(manifest.data(), manifest.size());
        CheckpointState withFiles = state;
        withFiles.files = {
            {"manifest.json", checksum.bytes(), checksum.value()}};
        writeFileDurably(temporary + "/state.json", toJson(withFiles));
        published = directory.commit();
      } catch (...) {
        error = std::current_exception();
        failed = 1;
        directory.abandon();
      }
    }
    rank.comm->allReduceHost(&failed, 1);
    if (failed != 0) {
      if (error)
        std::rethrow_exception(error);
      throw CommunicatorAborted("rank 0 could not publish the checkpoint of "
                                "step " +
                                stepText);
    }
  });
  return published;
}

std::vector<std::string> Checkpointer::load(const std::string &path,
                                            const CheckpointState &state) {
  DPRT_TRACE(ranks_.launch().firstRank, trace::Track::Compute,
             "load_checkpoint");
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  std::vector<std::string> notes;
  // Opening checks the manifest and the model's names and shapes.
  ShardedCheckpoint checkpoint(path, state, &spec_, notes);
  const CheckpointManifest &m = checkpoint.manifest();
  std::vector<int> fromState;
  for (const std::string &s : checkpointStates(spec_.recipe.optimizer))
    fromState.push_back(checkpoint.stateIndex(s));

  // The checkpoint unit laid out like model unit `unit` (same name, size
  // and parameter offsets), or -1: its elements are copied as a whole,
  // gaps between parameters included, so that a resume with the layout
  // that saved restores the shards bit for bit.
  auto sameLayout = [&](size_t unit) -> int32_t {
    const UnitSpec &u = spec_.units[unit];
    auto it =
        std::find_if(m.units.begin(), m.units.end(),
                     [&](const ManifestUnit &c) { return c.name == u.name; });
    if (it == m.units.end() || it->numel != u.numel)
      return -1;
    const int32_t index = static_cast<int32_t>(it - m.units.begin());
    for (const ParamSpec &p : spec_.params) {
      if (p.unit != static_cast<int32_t>(unit))
        continue;
      const ManifestParam &c = m.params[checkpoint.paramIndex(p.name)];
      if (c.unit != index || c.offset != p.offsetInUnit)
        return -1;
    }
    return index;
  };

  // What each local rank copies, and which files it verifies (each file
  // needed here by exactly one local rank).
  const int local = ranks_.count();
  std::vector<std::vector<ShardCopy>> copies(local);
  std::vector<std::vector<int>> verifies(local);
  std::vector<bool> assigned(checkpoint.fileCount(), false);
  auto add = [&](int i, const ShardCopy &copy) {
    copies[i].push_back(copy);
    for (int f : checkpoint.filesHolding(copy.unit, copy.begin,
                                         copy.begin + copy.count))
      if (!assigned[f]) {
        assigned[f] = true;
        verifies[i].push_back(f);
      }
  };
  for (int i = 0; i < local; ++i) {
    // Every replica loads the same shards (hybrid sharding).
    const int64_t rank = shardIndexOf(&ranks_.slot(i).rank);
    for (size_t u = 0; u < spec_.units.size(); ++u) {
      const UnitSpec &unit = spec_.units[u];
      const int64_t lo = std::min(rank * unit.shardElems, unit.numel);
      const int64_t hi = std::min(lo + unit.shardElems, unit.numel);
      if (lo == hi)
        continue;
      const int32_t same = sameLayout(u);
      // A frozen unit has its values only, in the compute type.
      const bool frozen = unit.frozen();
      const int64_t elemBytes = frozen ? sizeOf(spec_.compute) : accBytes;
      const size_t unitStates = frozen ? 1 : fromState.size();
      for (size_t s = 0; s < unitStates; ++s) {
        const int64_t shard = stateShard(unit, static_cast<int>(s));
        if (same >= 0 && checkpoint.holds(same, fromState[s], lo, hi)) {
          add(i, {same, fromState[s], lo, hi - lo, shard, frozen});
          continue;
        }
        // Another layout: parameter by parameter, wherever the checkpoint
        // keeps each.
        for (const ParamSpec &p : spec_.params) {
          if (p.unit != static_cast<int32_t>(u))
            continue;
          const ManifestParam &c = m.params[checkpoint.paramIndex(p.name)];
          const int64_t a = std::max(lo, p.offsetInUnit);
          const int64_t b = std::min(hi, p.offsetInUnit + c.numel());
          if (a < b)
            add(i, {c.unit, fromState[s], c.offset + (a - p.offsetInUnit),
                    b - a, shard + (a - lo) * elemBytes, frozen});
        }
      }
    }
  }

  ranks_.run([&](int i) {
    Rank &rank = ranks_.slot(i).rank;
    std::exception_ptr error;
    try {
      for (int f : verifies[i])
        checkpoint.verifyFile(f);
    } catch (...) {
      error = std::current_exception();
    }
    // Every rank's files are checked before any rank writes an element.
    double failed = error ? 1 : 0;
    rank.comm->allReduceHost(&failed, 1);
    if (error)
      std::rethrow_exception(error);
    if (failed != 0)
      throw CommunicatorAborted("another rank found the checkpoint '" + path +
                                "' not usable");

    std::vector<char> staging;
    for (const ShardCopy &c : copies[i])
      for (int64_t done = 0; done < c.count;) {
        const int64_t n = std::min(c.count - done, kStagingBytes / accBytes);
        staging.resize(static_cast<size_t>(n * accBytes));
        const DType to = c.toCompute ? spec_.compute : acc;
        checkpoint.read(c.unit, c.state, c.begin + done, c.begin + done + n, to,
                        staging.data());
        copyToArena(&rank, c.arenaOffset + done * sizeOf(to), staging.data(),
                    n * sizeOf(to));
        done += n;
      }
    // Compute-type copies of the master weights (bf16 models) follow them.
    for (const UnitSpec &unit : spec_.units)
      if (unit.paramShard != -1 && unit.paramShard != unit.masterShard)
        cast(&rank, acc, rank.arena + unit.masterShard, spec_.compute,
             rank.arena + unit.paramShard, unit.shardElems);
    synchronize(&rank);
  });
  return notes;
}

} // namespace dprt::driver
