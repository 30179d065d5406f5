//===- DPModel.h - Queries on dp.model --------------------------*- C++ -*-===//
//
// Facts about a verified model that several passes need.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_DIALECTS_DP_DPMODEL_H
#define DPC_DIALECTS_DP_DPMODEL_H

#include "DP/DPOps.h"

namespace dpc::dp {

/// The parameters of `model` in the order they are declared.
llvm::SmallVector<ParamOp> getParams(ModelOp model);

/// The layer of the forward pass that reads `param` (one per verified model).
ParamUserOpInterface getReader(ParamOp param);

/// The initializer of `param`: its `init` attribute, or the default for its
/// role: ones for a normalization scale, zeros for a bias, N(0, 0.02^2) for
/// every other parameter.
mlir::Attribute getEffectiveInit(ParamOp param);

/// The float type the model computes in (that of its parameters).
mlir::Type getComputeType(ModelOp model);

/// The type of per-sample norms, clip factors, masks and losses: f64 for f64
/// models, f32 otherwise.
mlir::FloatType getAccumulationType(ModelOp model);

/// The training step dp-backward created in `model`, or null.
StepOp getStep(ModelOp model);

/// The model a recipe trains.
ModelOp getModel(RecipeOp recipe);

/// The only dp.recipe of `module`, or null (with an error at `module`) when
/// there is none or several.
RecipeOp getOnlyRecipe(mlir::ModuleOp module);

/// Number of ranks of the recipe's grid: 1 without a grid; 0 (unknown) for a
/// dynamic grid that dp-specialize has not fixed yet.
int64_t getNumRanks(RecipeOp recipe);

/// The recipe's grid as replicas x shards: a 1-D grid of N ranks is 1 x N,
/// a 2-D grid R x S (hybrid sharding: units split over the S ranks of a
/// replica, kept by R replicas) is R x S, no grid 1 x 1. A dynamic size is
/// 0.
struct GridShape {
  int64_t replicas = 1, shards = 1;
};
GridShape getGridShape(RecipeOp recipe);

} // namespace dpc::dp

#endif // DPC_DIALECTS_DP_DPMODEL_H
