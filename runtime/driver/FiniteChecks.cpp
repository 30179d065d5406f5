//===- FiniteChecks.cpp - What the driver checks before dp_apply ----------===//

#include "FiniteChecks.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace dprt::driver {

void finiteCheckRanges(const ProgramSpec &spec, std::vector<int64_t> &offsets,
                       std::vector<int64_t> &counts) {
  const int64_t accBytes = sizeOf(accOf(spec.compute));
  for (size_t u = 0; u < spec.units.size(); ++u) {
    const UnitSpec &unit = spec.units[u];
    if (unit.frozen())
      continue;
    auto inUnit = [&](const ParamSpec &p) { return p.unit == int32_t(u); };
    const bool fromRows = std::any_of(
        spec.params.begin(), spec.params.end(),
        [&](const ParamSpec &p) { return inUnit(p) && p.sumFromRows; });
    if (!fromRows) {
      offsets.push_back(unit.gradShard);
      counts.push_back(unit.shardElems);
      continue;
    }
    // One rank (describe_update_from_rows): the shard is the whole unit.
    for (const ParamSpec &p : spec.params)
      if (inUnit(p) && p.trainable && !p.sumFromRows) {
        offsets.push_back(unit.gradShard + p.offsetInUnit * accBytes);
        counts.push_back(std::accumulate(p.shape.begin(), p.shape.end(),
                                         int64_t(1), std::multiplies<>()));
      }
  }
}

} // namespace dprt::driver
