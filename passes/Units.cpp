//===- Units.cpp - FSDP unit layout ---------------------------------------===//

#include "passes/Units.h"

#include "DP/DPModel.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

static int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

SmallVector<UnitLayout> dpc::planUnits(ModelOp model, FSDPAttr policy,
                                       int64_t ranks) {
  ShardUnit granularity = policy ? policy.getUnit() : ShardUnit::block;
  // Parameters in the order the forward pass reads them, each with the name
  // of its unit.
  SmallVector<std::pair<std::string, SmallVector<ParamOp>>> members;
  llvm::StringMap<size_t> indexOf;
  // A table tied to a linear head is read twice; it is placed once, where
  // it is read first.
  llvm::DenseSet<Operation *> placed;
  model.getForward().walk([&](ParamUserOpInterface layer) {
    SmallVector<FlatSymbolRefAttr, 2> refs = layer.getParamRefs();
    for (FlatSymbolRefAttr ref : refs) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ParamOp>(model, ref);
      if (!placed.insert(param).second)
        continue;
      std::string unit;
      if (std::optional<StringRef> explicitUnit = param.getUnit()) {
        unit = explicitUnit->str();
      } else if (granularity == ShardUnit::layer) {
        unit = refs.front().getValue().str();
      } else {
        StringRef name = param.getSymName();
        size_t dot = name.find('.');
        unit = dot == StringRef::npos ? "root" : name.substr(0, dot).str();
      }
      // Frozen parameters form units of their own, which hold no gradient,
      // master copy or optimizer state.
      std::string key = "unit." + unit;
      if (!param.getTrainable())
        key += kFrozenUnitSuffix.str();
      auto [it, inserted] = indexOf.try_emplace(key, members.size());
      if (inserted)
        members.push_back({key, {}});
      members[it->second].second.push_back(param);
    }
  });

  SmallVector<UnitLayout> units;
  for (auto &[name, params] : members) {
    UnitLayout unit;
    unit.name = name;
    unit.frozen = !params.front().getTrainable();
    int64_t offset = 0;
    for (ParamOp param : params) {
      offset = alignUp(offset, kUnitAlignment);
      unit.params.push_back(param);
      unit.offsets.push_back(offset);
      offset += param.getNumElements();
    }
    unit.numel = offset;
    unit.shard = alignUp((offset + ranks - 1) / ranks, kUnitAlignment);
    units.push_back(std::move(unit));
  }
  return units;
}
