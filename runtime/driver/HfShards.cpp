//===- HfShards.cpp - Hugging Face weights into and out of the shards -----===//

#include "HfShards.h"

#include "Dataset.h"
#include "Options.h"

#include "common/Trace.h"
#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <mutex>

namespace dprt::driver {

void loadHfWeights(const HfInit &folder, const ProgramSpec &spec,
                   ProcessRanks &ranks) {
  const DType acc = accOf(spec.compute);
  const int64_t accBytes = sizeOf(acc);
  std::mutex mutex;
  std::string firstProblem;
  bool anyProblem = false;
  ranks.run([&](int i) {
    Rank &rank = ranks.slot(i).rank;
    DPRT_TRACE(rank.rank, trace::Track::Compute, "load_hf_weights");
    std::string problem;
    std::vector<char> buffer;
    try {
      for (const ParamSpec &p : spec.params) {
        if (!folder.loads(p))
          continue;
        const UnitSpec &unit = spec.units[p.unit];
        // This rank's elements of the unit, and the parameter's.
        const int64_t lo = rank.rank * unit.shardElems;
        const int64_t hi = std::min(lo + unit.shardElems, unit.numel);
        int64_t numel = 1;
        for (int64_t d : p.shape)
          numel *= d;
        const int64_t begin = std::max(lo, p.offsetInUnit);
        const int64_t end = std::min(hi, p.offsetInUnit + numel);
        if (begin >= end)
          continue;
        // A frozen unit keeps only its compute-type copy (docs/lora.md).
        const DType to = unit.frozen() ? spec.compute : acc;
        const int64_t toBytes = sizeOf(to);
        buffer.resize(static_cast<size_t>((end - begin) * toBytes));
        folder.read(p, begin - p.offsetInUnit, end - begin, to, buffer.data());
        copyToArena(&rank, unit.masterShard + (begin - lo) * toBytes,
                    buffer.data(), (end - begin) * toBytes);
      }
    } catch (const UsageError &e) {
      problem = e.what();
    }
    // Every rank takes the same decision, also across processes: a rank
    // that stopped alone would leave the others waiting in a collective.
    double verdict = problem.empty() ? 0 : 1;
    rank.comm->allReduceHost(&verdict, 1);
    if (verdict == 0) {
      // Compute-type copies (bf16 models) follow the masters.
      for (const UnitSpec &unit : spec.units)
        if (unit.paramShard != -1 && unit.paramShard != unit.masterShard)
          cast(&rank, acc, rank.arena + unit.masterShard, spec.compute,
               rank.arena + unit.paramShard, unit.shardElems);
    }
    synchronize(&rank);
    std::lock_guard<std::mutex> lock(mutex);
    anyProblem = anyProblem || verdict > 0;
    if (firstProblem.empty())
      firstProblem = problem;
  });
  if (!firstProblem.empty())
    throw UsageError(firstProblem);
  if (anyProblem)
    throw UsageError("--init: another process found a value that is not "
                     "finite in the weights");
}

void exportHfWeights(const HfExportOptions &options, const ProgramSpec &spec,
                     ProcessRanks &ranks) {
  const DType acc = accOf(spec.compute);
  writeHfExport(options, spec.params, spec.lora, acc,
                masterValues(spec, ranks));
}

ParamValues masterValues(const ProgramSpec &spec, ProcessRanks &ranks) {
  const DType acc = accOf(spec.compute);
  const int64_t accBytes = sizeOf(acc);
  return [&spec, &ranks, acc, accBytes](const ParamSpec &p, int64_t first,
                                        int64_t count, void *out) {
    const UnitSpec &unit = spec.units[p.unit];
    // A frozen unit's shard is in the compute type: widened to acc here.
    const DType from = unit.frozen() ? spec.compute : acc;
    const int64_t fromBytes = sizeOf(from);
    std::vector<char> narrow;
    if (from != acc)
      narrow.resize(static_cast<size_t>(count * fromBytes));
    char *into = from != acc ? narrow.data() : static_cast<char *>(out);
    const int64_t begin = p.offsetInUnit + first, end = begin + count;
    ranks.forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
      const int64_t a = std::max(lo, begin), b = std::min(hi, end);
      if (a < b)
        copyFromArena(&rank, into + (a - begin) * fromBytes,
                      unit.masterShard + (a - lo) * fromBytes,
                      (b - a) * fromBytes);
    });
    if (from != acc)
      for (int64_t i = 0; i < count; ++i)
        storeAs(acc, loadAs(from, narrow.data() + i * fromBytes),
                static_cast<char *>(out) + i * accBytes);
  };
}

} // namespace dprt::driver
