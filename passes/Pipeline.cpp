//===- Pipeline.cpp - The whole compilation -------------------------------===//

#include "passes/Pipeline.h"

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void dpc::buildCompilePipeline(OpPassManager &pm,
                               const CompileOptions &options) {
  SpecializeOptions specialize;
  // dp-specialize checks the number.
  specialize.ranks = options.ranks;
  specialize.recipe = options.recipe;
  pm.addPass(createSpecialize(specialize));
  pm.addPass(createLoRA());
  pm.addPass(createFreeze());
  pm.addPass(createBackward());
  ClipPlanOptions clip;
  clip.shareGram = options.shareGram;
  clip.materializeBytes = options.materializeBytes;
  clip.backend = options.backend;
  clip.normMethods.assign(options.normMethods.begin(),
                          options.normMethods.end());
  pm.addPass(createClipPlan(clip));
  pm.addPass(createFuseNorms());
  pm.addPass(createShard());
  LowerToRuntimeOptions lower;
  lower.backend = options.backend;
  pm.addPass(createLowerToRuntime(lower));
  ScheduleOptions schedule;
  schedule.prefetch = options.prefetch;
  pm.addPass(createSchedule(schedule));
  pm.addPass(createPlanMemory());
}

void dpc::registerPipelines() {
  PassPipelineRegistration<CompileOptions>(
      "dp-compile",
      "Compile a model and recipe to a planned dprt program: dp-specialize, "
      "dp-lora, dp-freeze, dp-backward, dp-clip-plan, dp-fuse-norms, dp-shard, "
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
