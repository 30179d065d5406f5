//===- Pipeline.h - The whole compilation ------------------------*- C++
//-*-===//

#ifndef DPC_PASSES_PIPELINE_H
#define DPC_PASSES_PIPELINE_H

#include "passes/OptionValues.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace dpc {

struct CompileOptions : public mlir::PassPipelineOptions<CompileOptions> {
  Option<int64_t> ranks{
      *this, "ranks",
      llvm::cl::desc("Ranks of the grid, 1 to 2^31 - 1 (-1: the grid's)"),
      llvm::cl::init(-1)};
  Option<std::string> recipe{
      *this, "recipe", llvm::cl::desc("Recipe to compile"), llvm::cl::init("")};
  Option<int64_t> batch{
      *this, "batch",
      llvm::cl::desc("Rows per rank to compile for, 1 to the recipe's "
                     "physical batch (-1: the physical batch; dp-specialize)"),
      llvm::cl::init(-1)};
  Option<Backend> backend{*this, "backend",
                          llvm::cl::desc("The runtime backend"),
                          llvm::cl::init(Backend::CPU), backendValues()};
  Option<int64_t> prefetch{*this, "prefetch",
                           llvm::cl::desc("All-gather prefetch depth (-1: "
                                          "the recipe's)"),
                           llvm::cl::init(-1)};
  Option<int64_t> recompute{
      *this, "recompute",
      llvm::cl::desc("Blocks whose forward is recomputed before their "
                     "backward, first ones first (-1: all; dp-recompute)"),
      llvm::cl::init(0)};
  Option<bool> rematerialize{
      *this, "rematerialize",
      llvm::cl::desc("Recompute cheap forward layers (normalizations, "
                     "activations, elementwise products) before their "
                     "backward readers when their inputs stay live "
                     "(dp-rematerialize)"),
      llvm::cl::init(true)};
  Option<int64_t> reshard{
      *this, "reshard",
      llvm::cl::desc("Gather units again before their backward: -1 the "
                     "recipe's reshard_after_forward, 0 no, 1 yes (dp-shard)"),
      llvm::cl::init(-1)};
  Option<bool> castUnits{
      *this, "cast-units",
      llvm::cl::desc("On one rank, cast each unsplit 16-bit trainable unit "
                     "from its f32 master where layers read it; false keeps "
                     "a compute-type copy of the weights for the whole run, "
                     "written by the optimizer update (dp-shard)"),
      llvm::cl::init(true)};
  Option<bool> shareGram{*this, "share-gram",
                         llvm::cl::desc("Share A A^T between Gram norms"),
                         llvm::cl::init(true)};
  Option<int64_t> materializeBytes{
      *this, "materialize-bytes",
      llvm::cl::desc("Bytes per-sample weight gradients may take (0: none, "
                     "-1: no limit; dpc sets it from --memory-budget)"),
      llvm::cl::init(0)};
  Option<bool> sumInUpdate{
      *this, "sum-in-update",
      llvm::cl::desc("Let dp_apply's update form the clipped sums of "
                     "materialized per-sample gradients when every step is "
                     "one micro-step on one rank (dp-lower-to-runtime)"),
      llvm::cl::init(true)};
  Option<bool> overwriteGradients{
      *this, "overwrite-gradients",
      llvm::cl::desc("Let a weight's one linear_weight_grad write its "
                     "gradient instead of adding to it when every step is "
                     "one micro-step on one rank (dp-lower-to-runtime)"),
      llvm::cl::init(true)};
  ListOption<std::string> normMethods{
      *this, "norm-methods",
      llvm::cl::desc("PARAM=METHOD or *=METHOD: force gram, direct or "
                     "materialized for linear weights")};
  Option<PerSampleRows> perSampleRows{
      *this, "per-sample-rows",
      llvm::cl::desc("How materialized per-sample weight gradients are "
                     "stored: auto, compute or mxfp8 (dp-clip-plan)"),
      llvm::cl::init(PerSampleRows::Auto), perSampleRowsValues()};
};

/// dp-specialize ... dprt-plan-memory: a model and recipe to a planned dprt
/// program (the dp ops stay beside it for dp-report).
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// What compileWithinBudget chose, and the plan it would have without
/// recomputation (the report's "bytes saved").
struct BudgetPlan {
  int64_t recompute = 0;
  int64_t arenaWithout = 0, peakWithout = 0;
};

/// Chooses `options.recompute` for `module` (left as it is): the pipeline
/// runs on copies, first without recomputation; while the arena exceeds
/// `budget` bytes, the fewest first blocks whose recomputation makes it fit
/// (a binary search: fewer recomputed blocks never need less memory). If
/// even every block recomputed does not fit, a located error at the recipe
/// gives the bytes needed. Other pipeline errors are reported as when the
/// pipeline runs.
mlir::FailureOr<BudgetPlan> planWithinBudget(mlir::ModuleOp module,
                                             const CompileOptions &options,
                                             int64_t budget);

/// The linear weights whose norms `planned` takes by the materialized
/// method: compiling for fewer rows must force them (the cost model's
/// memory arbitration depends on the batch; its other choices do not).
llvm::SmallVector<std::string> materializedWeights(mlir::ModuleOp planned);

/// The parameters whose clipped sums the update of `planned` forms from the
/// per-sample gradients of the step's one micro-step (dp-lower-to-runtime's
/// sum-in-update), as its dp_describe names them.
llvm::StringSet<> paramsSummedInUpdate(mlir::ModuleOp planned);

/// The parameters whose gradients the micro-step of `planned` writes instead
/// of adding to them (dp-lower-to-runtime's overwrite-gradients), as its
/// dp_describe names them.
llvm::StringSet<> paramsWithGradientsWritten(mlir::ModuleOp planned);

/// Whether there are any: the program's steps need no smaller micro-step,
/// and cannot take one.
bool sumsInUpdate(mlir::ModuleOp planned);

/// Adds the dp_microstep of `sized` (the model and recipe of `planned`,
/// compiled with the same decisions for `rows` rows) to the program of
/// `planned` as dp_microstep_<rows>, on the memory plan of `planned`, and
/// names it to the driver with describe_microstep. Fails with an error at
/// the program when the two micro-steps are not the same operations on the
/// same buffers, only smaller (passes/MicrostepSizes.cpp says why that is
/// enough). Calls must come smallest size first.
mlir::LogicalResult addSizedMicrostep(mlir::ModuleOp planned,
                                      mlir::ModuleOp sized, int64_t rows);

/// Registers `dp-compile` (the pipeline above) and `dp-to-emitc` (it, then
/// convert-dprt-to-emitc).
void registerPipelines();

} // namespace dpc

#endif // DPC_PASSES_PIPELINE_H
