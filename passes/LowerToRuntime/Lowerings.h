//===- Lowerings.h - The lowerings of dp-lower-to-runtime -------*- C++ -*-===//
//
// One file per runtime kernel file (runtime/cpu/<Family>.cpp, services/
// Collectives.cpp, common/Program.cpp), each named after it. A family
// registers the lowering of each dp op it handles through
// populate<Family>Lowerings; Optimizers builds dp_init and dp_apply and
// Program builds dp_describe.
//
// Why a registry and not MLIR's conversion patterns: the lowering does not
// replace ops in place. It builds a separate program beside the model (the
// dp ops stay for dp-report), maps tensors to buffers through a side table
// with its own rules (accumulating into a value's last use, statistics saved
// for the backward op, norm buffers shared through dp.norm_sum), and visits
// each function's ops once, in order. A map from op TypeID to a plain
// function is what that needs, and it keeps each op kind's lowering in
// exactly one place: registering a kind twice is a compiler bug that stops
// the registry at once.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_LOWERTORUNTIME_LOWERINGS_H
#define DPC_PASSES_LOWERTORUNTIME_LOWERINGS_H

#include "passes/LowerToRuntime/LoweringContext.h"

#include "mlir/Support/TypeID.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>

namespace dpc::lowering {

/// Lowers one dp op of a step or forward body into runtime calls.
using OpLowering =
    std::function<mlir::LogicalResult(mlir::Operation *, LoweringContext &)>;

/// The lowering of each dp op kind, keyed by the op's TypeID.
class OpLoweringRegistry {
public:
  template <typename OpTy>
  void add(mlir::LogicalResult (*lower)(OpTy, LoweringContext &)) {
    insert(mlir::TypeID::get<OpTy>(), OpTy::getOperationName(),
           [lower](mlir::Operation *op, LoweringContext &context) {
             return lower(llvm::cast<OpTy>(op), context);
           });
  }

  /// The lowering of `op`'s kind, or null.
  const OpLowering *lookup(mlir::Operation *op) const;

private:
  void insert(mlir::TypeID kind, llvm::StringRef name, OpLowering lower);

  llvm::DenseMap<mlir::TypeID, OpLowering> lowerings;
};

// Op lowerings, one family per runtime kernel file.
void populateDenseLowerings(OpLoweringRegistry &registry);
void populateNormalizationLowerings(OpLoweringRegistry &registry);
void populateAttentionLowerings(OpLoweringRegistry &registry);
void populateElementwiseLowerings(OpLoweringRegistry &registry);
void populateLossesLowerings(OpLoweringRegistry &registry);
void populatePerSampleNormsLowerings(OpLoweringRegistry &registry);
void populateClippingLowerings(OpLoweringRegistry &registry);
void populateWeightGradsLowerings(OpLoweringRegistry &registry);
void populateCollectivesLowerings(OpLoweringRegistry &registry);

/// Clipping: the runtime's clip mode (clip_factors, describe_recipe).
rt::ClipModeAttr clipModeAttr(dp::ClipMode mode, mlir::MLIRContext *context);

/// Collectives: the gathered copy of unit `index` in a new temporary.
mlir::Value gatherUnit(LoweringContext &context, int64_t index);
/// Collectives: unit `index`'s gradient shard summed over the replicas of a
/// hybrid grid, in place.
void allReduceGradient(LoweringContext &context, int64_t index);

/// Optimizers: the recipe's optimizer as the runtime sees it; an error at
/// the recipe for one the runtime does not have.
mlir::FailureOr<OptimizerSpec> getOptimizerSpec(dp::RecipeOp recipe);

/// Optimizers: dp_init (initializers keyed by global parameter index, zero
/// gradient and state) and dp_apply (noise and the optimizer step on the
/// trainable ranges of each shard).
void buildInit(LoweringContext &context);
void buildApply(LoweringContext &context);

/// Program: dp_describe.
mlir::LogicalResult buildDescribe(LoweringContext &context);

} // namespace dpc::lowering

#endif // DPC_PASSES_LOWERTORUNTIME_LOWERINGS_H
