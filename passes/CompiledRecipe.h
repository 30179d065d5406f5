//===- CompiledRecipe.h - The recipe a pass compiles ------------*- C++ -*-===//
//
// Every pass after parsing works on one recipe, the model it trains and, from
// dp-backward on, that model's training step. Finding them, and saying what
// is missing when they are not there, is the same preamble in each pass.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_COMPILEDRECIPE_H
#define DPC_PASSES_COMPILEDRECIPE_H

#include "DP/DPOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace dpc {

/// The recipe a compilation trains, the model it trains and the model's
/// training step.
struct CompiledRecipe {
  dp::RecipeOp recipe;
  dp::ModelOp model;
  dp::StepOp step; ///< null before dp-backward
};

/// The recipe of `module` named `name` (the only one when `name` is empty),
/// with its model and step. Fails with an error at `module` when there is no
/// such recipe, or several and no name.
mlir::FailureOr<CompiledRecipe> findCompiledRecipe(mlir::ModuleOp module,
                                                   llvm::StringRef name = "");

/// findCompiledRecipe for a pass that transforms the training step: also
/// fails, with an error at the model telling to run dp-backward before
/// `pass`, when there is no step yet.
mlir::FailureOr<CompiledRecipe> findTrainingStep(mlir::ModuleOp module,
                                                 llvm::StringRef pass);

} // namespace dpc

#endif // DPC_PASSES_COMPILEDRECIPE_H
