//===- Pipeline.cpp - The whole compilation -------------------------------===//

#include "passes/Pipeline.h"

#include "passes/Passes.h"

#include "DP/DPOps.h"
#include "DPRT/DPRTDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace dpc;

void dpc::buildCompilePipeline(OpPassManager &pm,
                               const CompileOptions &options) {
  SpecializeOptions specialize;
  // dp-specialize checks the number.
  specialize.ranks = options.ranks;
  specialize.recipe = options.recipe;
  specialize.batch = options.batch;
  pm.addPass(createSpecialize(specialize));
  pm.addPass(createLoRA());
  pm.addPass(createFreeze());
  pm.addPass(createFuseResidual());
  pm.addPass(createBackward());
  pm.addPass(createFuseGLU());
  RecomputeOptions recompute;
  recompute.blocks = options.recompute;
  pm.addPass(createRecompute(recompute));
  if (options.rematerialize)
    pm.addPass(createRematerialize());
  ClipPlanOptions clip;
  clip.shareGram = options.shareGram;
  clip.materializeBytes = options.materializeBytes;
  clip.backend = options.backend;
  clip.normMethods.assign(options.normMethods.begin(),
                          options.normMethods.end());
  clip.perSampleRows = options.perSampleRows;
  pm.addPass(createClipPlan(clip));
  pm.addPass(createFuseNorms());
  ShardOptions shard;
  shard.reshard = options.reshard;
  shard.castUnits = options.castUnits;
  pm.addPass(createShard(shard));
  LowerToRuntimeOptions lower;
  lower.backend = options.backend;
  lower.sumInUpdate = options.sumInUpdate;
  lower.overwriteGradients = options.overwriteGradients;
  pm.addPass(createLowerToRuntime(lower));
  ScheduleOptions schedule;
  schedule.prefetch = options.prefetch;
  pm.addPass(createSchedule(schedule));
  pm.addPass(createPlanMemory());
}

namespace {

/// The arena, peak and recomputed blocks of `module` compiled with
/// `blocks` recomputed, and the recipe's location.
struct Trial {
  int64_t arena = 0, peak = 0, blocks = 0;
  Location recipeLoc;
};

FailureOr<Trial> compileCopy(ModuleOp module, const CompileOptions &options,
                             int64_t blocks) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(module.getContext());
  CompileOptions trial;
  trial.ranks = options.ranks;
  trial.recipe = options.recipe;
  trial.backend = options.backend;
  trial.prefetch = options.prefetch;
  trial.shareGram = options.shareGram;
  trial.rematerialize = options.rematerialize;
  trial.castUnits = options.castUnits;
  trial.perSampleRows = options.perSampleRows;
  trial.recompute = blocks;
  dpc::buildCompilePipeline(pm, trial);
  if (failed(pm.run(*copy)))
    return failure();
  Trial result{0, 0, 0, module.getLoc()};
  for (auto program : copy->getOps<rt::ProgramOp>()) {
    result.arena =
        std::max<int64_t>(result.arena, program.getArenaBytes().value_or(0));
    result.peak =
        std::max<int64_t>(result.peak, program.getPeakBytes().value_or(0));
  }
  for (auto recipe : copy->getOps<dp::RecipeOp>())
    result.recipeLoc = recipe.getLoc();
  copy->walk([&](dp::StepOp step) {
    if (auto done = step->getAttrOfType<ArrayAttr>("dp.recomputed"))
      result.blocks = int64_t(done.size());
  });
  return result;
}

} // namespace

FailureOr<dpc::BudgetPlan> dpc::planWithinBudget(ModuleOp module,
                                                 const CompileOptions &options,
                                                 int64_t budget) {
  FailureOr<Trial> none = compileCopy(module, options, 0);
  if (failed(none))
    return failure();
  BudgetPlan plan{0, none->arena, none->peak};
  if (none->arena <= budget)
    return plan;
  FailureOr<Trial> all = compileCopy(module, options, -1);
  if (failed(all))
    return failure();
  // A model without blocks keeps the plan it has; dpc names its arena.
  if (all->blocks == 0)
    return plan;
  if (all->arena > budget) {
    emitError(all->recipeLoc)
        << "the memory plan needs an arena of " << all->arena
        << " bytes per rank with all " << all->blocks << " blocks recomputed ("
        << none->arena
        << " bytes without recomputation), above the memory budget of "
        << budget << " bytes; give a larger budget, a smaller "
        << "physical_batch or more ranks";
    return failure();
  }
  // The fewest first blocks that fit: `hi` fits, `lo` does not.
  int64_t lo = 0, hi = all->blocks;
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    FailureOr<Trial> trial = compileCopy(module, options, mid);
    if (failed(trial))
      return failure();
    (trial->arena <= budget ? hi : lo) = mid;
  }
  plan.recompute = hi;
  return plan;
}

void dpc::registerPipelines() {
  PassPipelineRegistration<CompileOptions>(
      "dp-compile",
      "Compile a model and recipe to a planned dprt program: dp-specialize, "
      "dp-lora, dp-freeze, dp-backward, dp-fuse-glu, dp-recompute, "
      "dp-rematerialize, "
      "dp-clip-plan, "
      "dp-fuse-norms, dp-shard, "
      "dp-lower-to-runtime, "
      "dprt-schedule, dprt-plan-memory",
      buildCompilePipeline);
  PassPipelineRegistration<CompileOptions>(
      "dp-to-emitc",
      "dp-compile followed by convert-dprt-to-emitc (ready for mlir-to-cpp)",
      [](OpPassManager &pm, const CompileOptions &options) {
        buildCompilePipeline(pm, options);
        pm.addPass(createConvertDPRTToEmitC());
      });
}
