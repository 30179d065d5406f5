//===- dpc.cpp - Model IR to a standalone DP training program -------------===//
//
//   dpc MODEL.mlir -o BINARY [--backend cpu|cuda] [--ranks N] [--report]
//   dpc privacy epsilon|sigma|delta ...  (the privacy accountant, dpc-privacy)
//   dpc import-hf DIR -o MODEL.mlir    (a Hugging Face model, dpc-import-hf)
//   dpc prepare --tokenizer DIR ...    (token files, dpc-prepare)
//
// Runs the compilation pipeline, emits C++ through EmitC and compiles and
// links it with the runtime of the chosen backend.
//
//===----------------------------------------------------------------------===//

#include "DP/DPDialect.h"
#include "DP/DPOps.h"
#include "CompileProgram.h"
#include "DPRT/DPRTDialect.h"
#include "MemorySizes.h"
#include "PlanQueries.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory dpcCategory("dpc options");
static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                                      cl::Required, cl::cat(dpcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"),
                                       cl::value_desc("path"),
                                       cl::cat(dpcCategory));
static cl::opt<dpc::Backend>
    backendOpt("backend", cl::desc("Runtime backend (default: cpu)"),
               cl::init(dpc::Backend::CPU), dpc::backendValues(),
               cl::cat(dpcCategory));
static cl::opt<int64_t>
    ranksOpt("ranks",
             cl::desc("Ranks to compile for, 1 to 2^31 - 1 (default: the "
                      "grid's size, or 1)"),
             cl::init(-1), cl::cat(dpcCategory));
static cl::opt<std::string> recipeOpt("recipe",
                                      cl::desc("The recipe to compile"),
                                      cl::init(""), cl::cat(dpcCategory));
static cl::opt<int64_t>
    prefetchOpt("prefetch",
                cl::desc("All-gather prefetch depth (default: the recipe's)"),
                cl::init(-1), cl::cat(dpcCategory));
static cl::opt<bool> reportOpt("report",
                               cl::desc("Print the plan: per-parameter norm "
                                        "methods, FLOPs, traffic, memory"),
                               cl::cat(dpcCategory));
static cl::opt<dpc::ReportFormat>
    reportFormat("report-format", cl::desc("How --report prints the plan"),
                 cl::init(dpc::ReportFormat::Table), dpc::reportFormatValues(),
                 cl::cat(dpcCategory));
enum class Emit { MLIR, Cpp, Binary };
static cl::opt<Emit> emitOpt(
    "emit", cl::desc("What to write"), cl::init(Emit::Binary),
    cl::values(clEnumValN(Emit::MLIR, "mlir", "the planned dprt program"),
               clEnumValN(Emit::Cpp, "cpp", "the C++ source"),
               clEnumValN(Emit::Binary, "binary",
                          "the training program (default)")),
    cl::cat(dpcCategory));
static cl::opt<bool> keepCpp("keep-cpp",
                             cl::desc("Keep BINARY.cpp next to the binary"),
                             cl::cat(dpcCategory));
static cl::opt<bool> verbose("v", cl::desc("Print the compiler command"),
                             cl::cat(dpcCategory));
static cl::opt<std::string> memoryBudgetOpt(
    "memory-budget",
    cl::desc("Memory per rank the planned arena may take, e.g. 60GiB "
             "(B, KiB, MiB, GiB, TiB, kB, MB, GB, TB); default for cuda: "
             "the --target-gpu's memory less 4 GiB, for cpu: none"),
    cl::value_desc("size"), cl::init(""), cl::cat(dpcCategory));
static cl::opt<std::string> recomputeOpt(
    "recompute",
    cl::desc("Blocks whose forward is recomputed before their backward: "
             "auto (default: the fewest first blocks that fit the memory "
             "budget, none without one), all, or a number"),
    cl::value_desc("auto|all|N"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> rematerializeOpt(
    "rematerialize",
    cl::desc("Recompute normalizations, activations and elementwise "
             "products just before the backward reads them, when their "
             "inputs stay live anyway: auto (default: where that lowers the "
             "arena by at least 1 %), on or off"),
    cl::value_desc("auto|on|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> reshardOpt(
    "reshard-after-forward",
    cl::desc("Gather each unit again before its backward instead of keeping "
             "the forward's gather: auto (default: the recipe's "
             "reshard_after_forward, except that the forward's gathers are "
             "kept where that does not grow the arena), on or off"),
    cl::value_desc("auto|on|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> computeCopyOpt(
    "compute-copy",
    cl::desc("Keep a compute-type (bf16) copy of the weights of one rank for "
             "the whole run, written by the optimizer update as it writes "
             "the f32 master, instead of casting each unit from its master "
             "before layers read it (2 bytes a parameter; saves one or two "
             "casts a unit and step): auto (default: where the plan fits the "
             "memory budget, off without one), on or off"),
    cl::value_desc("auto|on|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> lastBatchSizesOpt(
    "last-batch-sizes",
    cl::desc("Physical batches smaller than the recipe's that the program "
             "can run a step's last, partly filled micro-step on instead of "
             "padding it: auto (default: every size up to 8, then every "
             "eighth of the physical batch; in users' slots under "
             "user-level DP), none, or sizes N,N,..."),
    cl::value_desc("auto|none|N,..."), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<double> reportTflops(
    "report-tflops",
    cl::desc("Sustained TFLOP/s per rank for --report's predicted times"),
    cl::init(400.0), cl::cat(dpcCategory));
static cl::opt<double> reportNvlink(
    "report-nvlink-gbps",
    cl::desc("GB/s per rank within a node for --report (default 450)"),
    cl::init(450.0), cl::cat(dpcCategory));
static cl::opt<double> reportNetwork(
    "report-network-gbps",
    cl::desc("GB/s per rank between nodes for --report (default 50: "
             "400 Gb/s)"),
    cl::init(50.0), cl::cat(dpcCategory));
static cl::opt<int64_t>
    reportGpusPerNode("report-gpus-per-node",
                      cl::desc("Ranks per node for --report (default 8)"),
                      cl::init(8), cl::cat(dpcCategory));

static cl::list<std::string> normMethodOpt(
    "norm-method",
    cl::desc("Force the per-sample norm method of linear weights: "
             "PARAM=METHOD or *=METHOD, METHOD gram, direct or materialized "
             "(default: chosen by the cost model under --memory-budget)"),
    cl::value_desc("param=method"), cl::CommaSeparated, cl::cat(dpcCategory));

static cl::opt<std::string> materializedNormsOpt(
    "materialized-norms",
    cl::desc("Whether the cost model may choose the materialized per-sample "
             "norm method under --memory-budget: auto (default) or off; "
             "--norm-method forces it anyway"),
    cl::value_desc("auto|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<dpc::PerSampleRows> perSampleRowsOpt(
    "per-sample-rows",
    cl::desc("How the materialized norm method stores each sample's weight "
             "gradient: auto (default), compute or mxfp8. auto: mxfp8 for "
             "the weights whose bf16 rows the cuda backend makes in the "
             "fused product on a Hopper --target-gpu (dprt/fused_norms.h: "
             "at T <= 1024 those of 2048 outputs or more, at longer T the "
             "heads of 16K to 64K rows), where the mxfp8 product costs "
             "about the same, and compute elsewhere. mxfp8 rows take about "
             "0.52x the "
             "bytes of bf16 rows, so more weights fit --memory-budget "
             "materialized (weights whose input width is a multiple of 32, "
             "in bf16 and f32 models; others keep compute-type rows); each "
             "element is rounded to 3 mantissa bits (relative error at most "
             "2^-4, but for elements 2^13 below the largest of their 32) "
             "before the clipped sum. The norms, and so the clip bound, are "
             "those of the stored values: the privacy guarantee is "
             "unchanged"),
    cl::init(dpc::PerSampleRows::Auto), dpc::perSampleRowsValues(),
    cl::cat(dpcCategory));
static cl::opt<std::string> sumInUpdateOpt(
    "sum-in-update",
    cl::desc("auto (default): when every step is one micro-step on one rank "
             "(shuffled batches no larger than the physical batch), the "
             "optimizer update sums the clipped materialized per-sample "
             "gradients as it reads them, instead of a pass that adds them "
             "into the gradient; off: always that pass"),
    cl::value_desc("auto|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> overwriteGradientsOpt(
    "overwrite-gradients",
    cl::desc("auto (default): when every step is one micro-step on one rank, "
             "a weight whose gradient one linear_weight_grad makes has it "
             "written instead of added into a zeroed gradient; off: always "
             "added"),
    cl::value_desc("auto|off"), cl::init("auto"), cl::cat(dpcCategory));
static cl::opt<std::string> targetGpuOpt(
    "target-gpu",
    cl::desc("The GPU the cuda program will run on, for the default "
             "--memory-budget (its memory less 4 GiB) and "
             "--per-sample-rows=auto (MXFP8 rows only on Hopper): h100 "
             "(default), "
             "h100-nvl, h200, a100-40gb, a100-80gb, a10, l4, l40s, rtx3090, "
             "rtx4090"),
    cl::value_desc("name"), cl::init("h100"), cl::cat(dpcCategory));

namespace {

int fail(const llvm::Twine &message) {
  llvm::errs() << "dpc: error: " << message << "\n";
  return 1;
}

/// The subcommands `dpc NAME ...` that are tools of their own, installed
/// beside dpc as `dpc-NAME`.
constexpr const char *kSubcommands[] = {"privacy", "import-hf", "prepare",
                                        "export"};

/// Runs `dpc-<name>` from this executable's directory with the arguments
/// after the subcommand.
int runSubcommand(StringRef name, int argc, char **argv) {
  std::string self = llvm::sys::fs::getMainExecutable(argv[0], (void *)&fail);
  llvm::SmallString<256> tool(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(tool, "dpc-" + name);
  SmallVector<StringRef> args{tool};
  for (int i = 2; i < argc; ++i)
    args.push_back(argv[i]);
  std::string error;
  int rc =
      llvm::sys::ExecuteAndWait(tool, args, std::nullopt, {}, 0, 0, &error);
  if (rc < 0)
    return fail("cannot run " + tool + ": " + error);
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1 && llvm::is_contained(kSubcommands, StringRef(argv[1])))
    return runSubcommand(argv[1], argc, argv);
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(dpcCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "dpc: compile a dp model and DP-SGD recipe into a training program\n\n"
      "  dpc MODEL.mlir -o BINARY [--backend cpu|cuda] [--ranks N] "
      "[--report]\n"
      "  dpc privacy epsilon|sigma|delta ...  (see dpc privacy --help)\n"
      "  dpc import-hf DIR -o MODEL.mlir      (see dpc import-hf --help)\n"
      "  dpc prepare --tokenizer DIR INPUT... -o OUT  (see dpc prepare "
      "--help)\n"
      "  dpc export CKPT_DIR --like HF_DIR -o OUT     (see dpc export "
      "--help)\n");

  // Not given, the grid decides; given, it is a number of ranks the runtime
  // can run (it used to turn 0 and negatives into 1 and wrap at 2^32).
  if (ranksOpt.getNumOccurrences() &&
      (ranksOpt < 1 || ranksOpt > dpc::kMaxRanks))
    return fail("--ranks " + llvm::Twine(int64_t(ranksOpt)) +
                " is not a number of ranks; give 1 to " +
                llvm::Twine(dpc::kMaxRanks));

  for (auto [flag, value] :
       {std::pair<StringRef, double>{"--report-tflops", reportTflops},
        {"--report-nvlink-gbps", reportNvlink},
        {"--report-network-gbps", reportNetwork},
        {"--report-gpus-per-node", double(reportGpusPerNode)}})
    // !(x > 0) also refuses NaN.
    if (!(value > 0)) {
      std::ostringstream text;
      text << value;
      return fail(flag + " " + text.str() + " must be positive");
    }

  std::optional<int64_t> budget;
  if (memoryBudgetOpt.getNumOccurrences()) {
    budget = dpc::parseBytes(memoryBudgetOpt);
    if (!budget)
      return fail("--memory-budget '" + memoryBudgetOpt +
                  "' is not a size of at least 1 byte; give a number and a "
                  "unit, e.g. 60GiB (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)");
  }
  const std::optional<int64_t> targetGpuBytes =
      dpc::targetGpuMemory(targetGpuOpt);
  if (!targetGpuBytes)
    return fail("--target-gpu '" + targetGpuOpt + "' is not one of " +
                dpc::targetGpuNames() +
                "; for another GPU give --memory-budget");
  if (targetGpuOpt.getNumOccurrences() && backendOpt != dpc::Backend::CUDA)
    return fail("--target-gpu is for the cuda backend; give --memory-budget "
                "for the cpu backend");
  if (!budget && backendOpt == dpc::Backend::CUDA)
    budget = *targetGpuBytes - dpc::kCudaMemoryMargin;

  DialectRegistry registry;
  registry.insert<dpc::dp::DPDialect, dpc::rt::DPRTDialect, shard::ShardDialect,
                  emitc::EmitCDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  auto file = openInputFile(inputFile, &error);
  if (!file)
    return fail(error);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  dpc::CompileOptions options;
  options.ranks = ranksOpt;
  options.recipe = recipeOpt;
  options.backend = backendOpt;
  options.prefetch = prefetchOpt;
  options.perSampleRows = perSampleRowsOpt;
  // The fused products are sm_90a kernels: elsewhere MXFP8 rows take two
  // passes and a scratch product per sample, so auto keeps compute rows.
  if (options.perSampleRows == dpc::PerSampleRows::Auto &&
      dpc::targetGpuCapability(targetGpuOpt) != 90)
    options.perSampleRows = dpc::PerSampleRows::Compute;
  if (sumInUpdateOpt != "auto" && sumInUpdateOpt != "off")
    return fail("--sum-in-update '" + sumInUpdateOpt + "' is not auto or off");
  options.sumInUpdate = sumInUpdateOpt == "auto";
  if (overwriteGradientsOpt != "auto" && overwriteGradientsOpt != "off")
    return fail("--overwrite-gradients '" + overwriteGradientsOpt +
                "' is not auto or off");
  options.overwriteGradients = overwriteGradientsOpt == "auto";
  // Recomputation and the budget are planned with rematerialized layers
  // (the least memory); auto drops them at the end where they do not pay.
  StringRef rematerialize = rematerializeOpt;
  if (rematerialize == "true")
    rematerialize = "on";
  if (rematerialize == "false")
    rematerialize = "off";
  if (rematerialize != "auto" && rematerialize != "on" &&
      rematerialize != "off")
    return fail("--rematerialize '" + rematerializeOpt +
                "' is not auto, on or off");
  options.rematerialize = rematerialize != "off";
  StringRef reshard = reshardOpt;
  if (reshard == "true")
    reshard = "on";
  if (reshard == "false")
    reshard = "off";
  if (reshard != "auto" && reshard != "on" && reshard != "off")
    return fail("--reshard-after-forward '" + reshardOpt +
                "' is not auto, on or off");
  options.reshard = reshard == "auto" ? -1 : reshard == "on" ? 1 : 0;
  StringRef computeCopy = computeCopyOpt;
  if (computeCopy != "auto" && computeCopy != "on" && computeCopy != "off")
    return fail("--compute-copy '" + computeCopyOpt +
                "' is not auto, on or off");
  // Planned with the casts (the least memory); auto keeps the copy at the
  // end where the budget has room for it.
  options.castUnits = computeCopy != "on";
  std::vector<std::string> forcedMethods(normMethodOpt.begin(),
                                         normMethodOpt.end());
  options.normMethods = ArrayRef<std::string>(forcedMethods);
  // Recomputation: as the budget needs, or as asked, decided on plans that
  // materialize no per-sample gradient (the least memory a plan needs);
  // the headroom left then goes to the materialized norm method below.
  std::optional<dpc::BudgetPlan> budgetPlan;
  StringRef recompute = recomputeOpt;
  if (recompute == "auto") {
    if (budget) {
      FailureOr<dpc::BudgetPlan> plan =
          dpc::planWithinBudget(*module, options, *budget);
      if (failed(plan))
        return 1;
      budgetPlan = *plan;
      options.recompute = plan->recompute;
    }
  } else if (recompute == "all") {
    options.recompute = -1;
  } else {
    int64_t blocks;
    if (recompute.getAsInteger(10, blocks) || blocks < 0)
      return fail("--recompute '" + recomputeOpt +
                  "' is not auto, all or a number of blocks");
    options.recompute = blocks;
  }
  // The report says what recomputation saves: the plan without it.
  if (reportOpt && options.recompute != 0 && !budgetPlan) {
    FailureOr<dpc::BudgetPlan> plan = dpc::planWithinBudget(
        *module, options, std::numeric_limits<int64_t>::max());
    if (failed(plan))
      return 1;
    budgetPlan = *plan;
  }
  // The pipeline on a copy of the input, with `materialize` bytes for
  // per-sample weight gradients; the planned module or null.
  auto compile = [&](int64_t materialize) -> OwningOpRef<ModuleOp> {
    OwningOpRef<ModuleOp> copy = module->clone();
    PassManager pm(&context);
    options.materializeBytes = materialize;
    dpc::buildCompilePipeline(pm, options);
    if (failed(pm.run(*copy)))
      return nullptr;
    return copy;
  };
  // The budget arbitrates the materialized norm method: first the plan
  // without it (the least memory any plan needs), then with the headroom
  // it leaves; a plan whose arena still exceeds the budget (per-sample
  // gradients live at once, alignment, fragmentation) is redone with the
  // excess taken off, and after a few tries without.
  std::string materialized = materializedNormsOpt;
  if (materialized != "auto" && materialized != "off")
    return fail("--materialized-norms '" + materializedNormsOpt +
                "' is not auto or off");
  const bool materializedAuto = materialized == "auto";
  OwningOpRef<ModuleOp> planned;
  int64_t chosenMaterialize = 0; // the allowance `planned` was compiled with
  if (!budget && !materializedAuto) {
    planned = compile(0);
    if (!planned)
      return 1;
  } else if (!budget) {
    planned = compile(-1);
    chosenMaterialize = -1;
    if (!planned)
      return 1;
  } else {
    OwningOpRef<ModuleOp> least = compile(0);
    if (!least)
      return 1;
    int64_t arena = dpc::arenaOf(*least);
    // The arena is what a rank allocates: it holds the plan's peak.
    if (arena > *budget)
      for (auto program : least->getOps<dpc::rt::ProgramOp>())
        return fail(
            "@" + program.getSymName() + " needs an arena of " +
            dpc::formatGiB(arena) + " per rank (peak in use " +
            dpc::formatGiB(program.getPeakBytes().value_or(0)) +
            ") with no per-sample gradient materialized beyond those "
            "forced, above the memory budget of " +
            dpc::formatGiB(*budget) +
            (memoryBudgetOpt.getNumOccurrences()
                 ? std::string(" (--memory-budget)")
                 : " (the memory of --target-gpu " + targetGpuOpt +
                       " less 4 GiB)") +
            "; give a larger --memory-budget or --target-gpu, a smaller "
            "physical_batch or more ranks");
    int64_t allowance = materializedAuto ? *budget - arena : 0;
    for (int attempt = 0; attempt < 4 && allowance > 0; ++attempt) {
      OwningOpRef<ModuleOp> candidate = compile(allowance);
      if (!candidate)
        return 1;
      int64_t used = dpc::materializedOf(*candidate);
      int64_t excess = dpc::arenaOf(*candidate) - *budget;
      if (used == dpc::materializedOf(*least))
        break;
      if (excess <= 0) {
        planned = std::move(candidate);
        chosenMaterialize = allowance;
        break;
      }
      allowance = std::min(allowance, used) - excess;
    }
    if (!planned)
      planned = std::move(least);
  }
  // Rematerialized layers cost an elementwise pass each; where the peak is
  // not the end of the forward (book-keeping keeps every clipped weight
  // gradient's inputs to the end of the backward) they save next to nothing.
  if (rematerialize == "auto") {
    options.rematerialize = false;
    OwningOpRef<ModuleOp> kept = compile(chosenMaterialize);
    if (!kept)
      return 1;
    int64_t with = dpc::arenaOf(*planned), without = dpc::arenaOf(*kept);
    if (without - with < with / 100 && (!budget || without <= *budget))
      planned = std::move(kept);
    else
      options.rematerialize = true;
  }
  // A unit gathered for the forward is gathered again before its backward
  // so that it does not live through the step. Where the arena is no larger
  // with the forward's gathers kept (its peak lies elsewhere: with DP at
  // short sequences, the end of the backward, where the units are freed
  // already), auto keeps them: one gather a unit and step less (on one
  // rank, one cast of the unit from its f32 master).
  if (reshard == "auto" && dpc::gathersAgain(*planned)) {
    options.reshard = 0;
    OwningOpRef<ModuleOp> kept = compile(chosenMaterialize);
    if (!kept)
      return 1;
    if (dpc::arenaOf(*kept) <= dpc::arenaOf(*planned))
      planned = std::move(kept);
    else
      options.reshard = -1;
  }
  // A compute-type copy of the weights costs 2 bytes a parameter and saves
  // every cast of a unit from its master (on the 1.1B model, 1.6 ms a cast
  // of all units on an H200; DP off casts twice a step): where the budget
  // has room, auto keeps it.
  if (computeCopy == "auto" && budget && dpc::hasCastUnits(*planned)) {
    options.castUnits = false;
    OwningOpRef<ModuleOp> kept = compile(chosenMaterialize);
    if (!kept)
      return 1;
    if (dpc::arenaOf(*kept) <= *budget)
      planned = std::move(kept);
    else
      options.castUnits = true;
  }
  // The last micro-step of a step is as large as its real rows need: the
  // same plan compiled for fewer rows, run on the full plan's arena.
  {
    int64_t physicalBatch = 0, unit = 1;
    for (auto recipe : planned->getOps<dpc::dp::RecipeOp>()) {
      physicalBatch = recipe.getPhysicalBatch();
      unit = recipe.getRecordsPerUnit();
    }
    std::vector<int64_t> sizes;
    StringRef asked = lastBatchSizesOpt;
    // Every step of such a recipe is one full micro-step.
    if (asked == "auto" && dpc::sumsInUpdate(*planned))
      asked = "none";
    if (asked == "auto") {
      // In units (users' slots): every count up to 8, then multiples of an
      // eighth of the batch, so a last micro-step pads at most ~1/8.
      const int64_t units = physicalBatch / unit;
      const int64_t stride = std::max<int64_t>(1, (units + 7) / 8);
      for (int64_t u = 1; u < units; ++u)
        if (u <= 8 || u % stride == 0)
          sizes.push_back(u * unit);
    } else if (asked != "none") {
      SmallVector<StringRef> parts;
      asked.split(parts, ',');
      for (StringRef part : parts) {
        int64_t rows;
        if (part.trim().getAsInteger(10, rows) || rows < 1 ||
            rows >= physicalBatch || rows % unit != 0)
          return fail(
              "--last-batch-sizes '" + lastBatchSizesOpt + "': '" + part.str() +
              "' is not a number of rows from " + "1 to the physical batch " +
              std::to_string(physicalBatch) + " less 1" +
              (unit > 1
                   ? ", a multiple of max_records = " + std::to_string(unit)
                   : std::string()) +
              "; or give auto or none");
        sizes.push_back(rows);
      }
      llvm::sort(sizes);
      sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    }
    // The same decisions at every size: the materialized weights forced,
    // the cost model's other choices do not depend on the batch.
    std::vector<std::string> sizedMethods = forcedMethods;
    for (const std::string &weight : dpc::materializedWeights(*planned))
      sizedMethods.push_back(weight + "=materialized");
    options.normMethods = ArrayRef<std::string>(sizedMethods);
    for (int64_t rows : sizes) {
      options.batch = rows;
      OwningOpRef<ModuleOp> sized = compile(0);
      if (!sized)
        return 1;
      if (asked != "auto") {
        if (failed(dpc::addSizedMicrostep(*planned, *sized, rows)))
          return 1;
        continue;
      }
      // Asked for nothing in particular: a size the plan does not carry
      // over to (a choice of the compiler that depends on the batch) leaves
      // the last micro-step padded, which costs time, not correctness.
      std::string why;
      {
        ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &d) {
          why = d.str();
          return success();
        });
        if (succeeded(dpc::addSizedMicrostep(*planned, *sized, rows)))
          continue;
      }
      llvm::errs() << "dpc: warning: " << why << "; a step's last micro-step "
                   << "of " << rows << " rows or more is padded to "
                   << physicalBatch << " (--last-batch-sizes auto)\n";
      break;
    }
    options.batch = -1;
  }
  module = std::move(planned);
  if (reportOpt) {
    PassManager pm(&context);
    dpc::ReportOptions report;
    report.format = reportFormat;
    report.backend = backendOpt;
    if (budgetPlan && options.recompute != 0) {
      report.arenaWithoutRecompute = budgetPlan->arenaWithout;
      report.peakWithoutRecompute = budgetPlan->peakWithout;
    }
    report.tflops = reportTflops;
    report.nvlinkGBps = reportNvlink;
    report.networkGBps = reportNetwork;
    report.gpusPerNode = reportGpusPerNode;
    pm.addPass(dpc::createReport(report));
    if (failed(pm.run(*module)))
      return 1;
  }

  if (emitOpt == Emit::MLIR) {
    auto out = openOutputFile(
        outputFile.empty() ? std::string("-") : outputFile.getValue(), &error);
    if (!out)
      return fail(error);
    module->print(out->os());
    out->keep();
    return 0;
  }

  PassManager lower(&context);
  lower.addPass(dpc::createConvertDPRTToEmitC());
  if (failed(lower.run(*module)))
    return 1;
  std::string cpp;
  llvm::raw_string_ostream cppStream(cpp);
  cppStream << "// Generated by dpc from " << inputFile << " (backend "
            << dpc::nameOf(backendOpt) << "). Do not edit.\n";
  if (failed(emitc::translateToCpp(*module, cppStream)))
    return fail("translating the program to C++ failed");

  if (emitOpt == Emit::Cpp) {
    auto out = openOutputFile(
        outputFile.empty() ? std::string("-") : outputFile.getValue(), &error);
    if (!out)
      return fail(error);
    out->os() << cpp;
    out->keep();
    return 0;
  }

  std::string binary = outputFile;
  if (binary.empty())
    binary = llvm::sys::path::stem(inputFile).str();
  std::string cppPath = binary + ".cpp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(cppPath, ec);
    if (ec)
      return fail("cannot write " + cppPath + ": " + ec.message());
    out << cpp;
  }
  if (std::optional<std::string> error = dpc::compileProgram(
          cppPath, binary, backendOpt == dpc::Backend::CUDA, verbose))
    return fail(*error);
  if (!keepCpp)
    llvm::sys::fs::remove(cppPath);
  llvm::errs() << "dpc: wrote " << binary << " (" << dpc::nameOf(backendOpt)
               << " backend";
  if (ranksOpt > 1)
    llvm::errs() << ", " << ranksOpt << " ranks";
  llvm::errs() << ")\n";
  return 0;
}
