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

} // namespace dpc::dp

#endif // DPC_DIALECTS_DP_DPMODEL_H
