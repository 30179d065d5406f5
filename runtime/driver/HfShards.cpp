//===- HfShards.cpp - Hugging Face weights into and out of the shards -----===//

#include "HfShards.h"

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
        buffer.resize(static_cast<size_t>((end - begin) * accBytes));
        folder.read(p, begin - p.offsetInUnit, end - begin, acc, buffer.data());
        copyToArena(&rank, unit.masterShard + (begin - lo) * accBytes,
                    buffer.data(), (end - begin) * accBytes);
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
        if (unit.paramShard != unit.masterShard)
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
  const int64_t accBytes = sizeOf(acc);
  writeHfFolder(
      options, spec.params, acc,
      [&](const ParamSpec &p, int64_t first, int64_t count, void *out) {
        const UnitSpec &unit = spec.units[p.unit];
        const int64_t begin = p.offsetInUnit + first, end = begin + count;
        ranks.forEachLocalShard(unit, [&](Rank &rank, int64_t lo, int64_t hi) {
          const int64_t a = std::max(lo, begin), b = std::min(hi, end);
          if (a < b)
            copyFromArena(
                &rank, static_cast<char *>(out) + (a - begin) * accBytes,
                unit.masterShard + (a - lo) * accBytes, (b - a) * accBytes);
        });
      });
}

} // namespace dprt::driver
