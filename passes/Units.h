//===- Units.h - FSDP unit layout -------------------------------*- C++ -*-===//
//
// Which parameters form one FSDP unit and where each lies in the unit's flat
// buffer. The sharding pass materializes it as dp.unit ops; the report and
// the memory plan read those.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_UNITS_H
#define DPC_PASSES_UNITS_H

#include "DP/DPOps.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace dpc {

/// Parameters start at multiples of this many elements in a unit's buffer,
/// and shards are multiples of it, so that every parameter and every shard
/// is aligned for vector loads and GEMMs.
constexpr int64_t kUnitAlignment = 64;

/// The frozen parameters of a unit form the unit of this name plus suffix.
constexpr llvm::StringLiteral kFrozenUnitSuffix = ".frozen";

struct UnitLayout {
  std::string name;
  llvm::SmallVector<dp::ParamOp> params;
  llvm::SmallVector<int64_t> offsets; ///< element offset of each parameter
  int64_t numel = 0;                  ///< end of the last parameter
  int64_t shard = 0;                  ///< elements per rank
  bool frozen = false; ///< every parameter frozen (the unit's are alike)
};

/// Groups the parameters of `model` into units following `policy`
/// (block: the name prefix before the first '.', parameters without a dot
/// form the unit "root"; layer: the parameters one layer reads; a
/// parameter's `unit` attribute wins; the frozen parameters of unit U form
/// the unit U.frozen), in the order the forward pass first reads them, and
/// lays each unit out for `ranks` ranks.
llvm::SmallVector<UnitLayout> planUnits(dp::ModelOp model, dp::FSDPAttr policy,
                                        int64_t ranks);

} // namespace dpc

#endif // DPC_PASSES_UNITS_H
