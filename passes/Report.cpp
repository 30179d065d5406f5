//===- Report.cpp - What one training step costs --------------------------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "DP/DPSizes.h"
#include "passes/CompiledRecipe.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "passes/Shapes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace dpc {
#define GEN_PASS_DEF_REPORT
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

struct ParamRow {
  std::string name, shape, method;
  /// How a materialized weight's per-sample gradients are stored: the
  /// compute type's name or "mxfp8"; empty for the other methods.
  std::string rows;
  double normFlops = 0, gradFlops = 0;
  /// Predicted seconds of its norm and clipped weight gradient
  /// (linearParamSeconds for linear weights, FLOPs at the device's rate
  /// for the rest).
  double seconds = 0;
  bool timed = false;
};

struct Totals {
  double forward = 0, inputGrads = 0, norms = 0, weightGrads = 0;
  /// The forward of blocks recomputed before their backward (dp-recompute).
  double recompute = 0;
  double gatherBytes = 0, scatterBytes = 0;
  int64_t gathers = 0, scatters = 0;
  /// Per optimizer step, on a grid of several replicas.
  double allReduceBytes = 0;
  int64_t allReduces = 0;
};

int64_t bytesOf(Type element) {
  return element.isF64() ? 8 : element.isBF16() || element.isF16() ? 2 : 4;
}

struct ReportPass : dpc::impl::ReportBase<ReportPass> {
  using ReportBase::ReportBase;

  void runOnOperation() override;
};

void ReportPass::runOnOperation() {
  ModuleOp module = getOperation();
  // !(x > 0) also refuses NaN.
  if (!(tflops > 0) || !(nvlinkGBps > 0) || !(networkGBps > 0) ||
      gpusPerNode < 1) {
    std::string got;
    llvm::raw_string_ostream(got)
        << llvm::format("%g, %g, %g, %lld", double(tflops), double(nvlinkGBps),
                        double(networkGBps), (long long)gpusPerNode);
    module.emitError("dp-report: tflops, nvlink-gbps and network-gbps must "
                     "be positive and gpus-per-node at least 1 (got ")
        << got << ")";
    return signalPassFailure();
  }
  FailureOr<CompiledRecipe> compiled = findCompiledRecipe(module);
  if (failed(compiled))
    return signalPassFailure();
  RecipeOp recipe = compiled->recipe;
  ModelOp model = compiled->model;
  StepOp step = compiled->step;
  auto programs = llvm::to_vector(module.getOps<rt::ProgramOp>());
  if (!step || programs.size() != 1 || !programs.front().getArenaBytes() ||
      !programs.front().getPeakBytes()) {
    module.emitError("dp-report runs after the whole pipeline up to "
                     "dprt-plan-memory");
    return signalPassFailure();
  }
  rt::ProgramOp program = programs.front();

  Type compute = getComputeType(model);
  Type accType = getAccumulationType(model);
  int64_t ranks = getNumRanks(recipe);
  // Collectives of the step run among the `shards` ranks a unit is split
  // over; the gradient shards are summed over `replicas` once per step.
  GridShape grid = getGridShape(recipe);
  int64_t shards = grid.shards, replicas = grid.replicas;
  // DP off (clip = #dp.clip<none>, noise = #dp.none): no per-sample norm.
  bool dpOff = recipe.getClip().getMode() == ClipMode::none;
  // The parameters whose clipped sums the optimizer update forms from the
  // per-sample gradients (dpc --sum-in-update), as dp_describe names them:
  // their gradients are never written.
  const llvm::StringSet<> sumsInUpdate = paramsSummedInUpdate(module);
  // Those whose one weight-gradient product writes their gradient instead of
  // adding to it (dpc --overwrite-gradients).
  const llvm::StringSet<> written = paramsWithGradientsWritten(module);
  std::map<std::string, ParamRow> rows;
  SmallVector<std::string> order;
  for (ParamOp param : getParams(model)) {
    if (!param.getTrainable())
      continue;
    ParamRow row;
    row.name = param.getSymName().str();
    if (dpOff)
      row.method = "none";
    llvm::raw_string_ostream shape(row.shape);
    llvm::interleave(param.getTensorType().getShape(), shape, "x");
    rows[row.name] = row;
    order.push_back(row.name);
  }
  auto rowOf = [&](Attribute ref) -> ParamRow & {
    return rows[cast<FlatSymbolRefAttr>(ref).getValue().str()];
  };
  llvm::StringMap<int64_t> unitShard;
  Totals totals;
  for (UnitOp unit : model.getBody().front().getOps<UnitOp>()) {
    unitShard[unit.getSymName()] = unit.getShard();
    bool trainable = llvm::any_of(unit.getParams(), [&](Attribute ref) {
      return rows.count(cast<FlatSymbolRefAttr>(ref).getValue().str()) > 0;
    });
    // A ring all-reduce sends and receives 2 (R - 1) / R of the buffer.
    if (replicas > 1 && trainable) {
      totals.allReduceBytes += 2.0 * double(replicas - 1) / double(replicas) *
                               double(unit.getShard()) *
                               double(bytesOf(accType));
      ++totals.allReduces;
    }
  }

  // A parameter with several norm ops (a table tied to a linear head) lists
  // each one's method.
  auto addMethod = [](ParamRow &row, const std::string &method) {
    row.method = row.method.empty() ? method : row.method + " + " + method;
  };
  // A bias whose norm dp-fuse-norms folded into its weight's norm op.
  auto addFusedBias = [&](ArrayAttr params, Value dy) {
    ParamRow &row = rowOf(params[1]);
    addMethod(row, "bias (fused with " +
                       cast<FlatSymbolRefAttr>(params[0]).getValue().str() +
                       ")");
    row.normFlops += biasNormFlops(batchOf(dy), tokensOf(dy), lastDim(dy));
  };
  DeviceRates rates = deviceRates(backend);
  // A linear weight's norm and clipped weight gradient by its method (a
  // layer sharing another's A A^T pays no A side).
  auto timeLinear = [&](ParamRow &row, const LinearNormShape &s,
                        NormMethod method, Value x, double gramInputShare = 1.0,
                        PerSampleRows perSampleRows = PerSampleRows::Compute) {
    Type element = tensorOf(x).getElementType();
    row.seconds += linearParamSeconds(
        s, method, bytesOf(element), bytesOf(accType), rates, gramInputShare,
        sumsInUpdate.contains(row.name), perSampleRows);
    row.timed = true;
  };
  for (Operation &op : step.getBodyBlock()) {
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](LinearOp l) {
          (l->hasAttr("dp.recompute") ? totals.recompute : totals.forward) +=
              2.0 * double(rowsOf(l.getInput())) *
              double(lastDim(l.getInput())) * double(lastDim(l.getOutput()));
        })
        .Case([&](LinearGradInputOp g) {
          totals.inputGrads += 2.0 * double(rowsOf(g.getDy())) *
                               double(lastDim(g.getDy())) *
                               double(lastDim(g.getDx()));
        })
        .Case([&](AttentionOp a) {
          double t = double(tokensOf(a.getQuery()));
          (a->hasAttr("dp.recompute") ? totals.recompute : totals.forward) +=
              4.0 * double(batchOf(a.getQuery())) * double(a.getNumHeads()) *
              t * t * double(a.getHeadDim());
        })
        .Case([&](AttentionGradOp g) {
          AttentionOp a = g.getForwardOp();
          double t = double(tokensOf(a.getQuery()));
          totals.inputGrads += 8.0 * double(batchOf(a.getQuery())) *
                               double(a.getNumHeads()) * t * t *
                               double(a.getHeadDim());
        })
        .Case([&](NormRank1Op n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          timeLinear(row, linearNormShape(n.getX(), n.getDy()),
                     NormMethod::rank1, n.getX());
          addMethod(row, "rank-1");
          row.normFlops += rank1NormFlops(linearNormShape(n.getX(), n.getDy()));
          if (n.getBias())
            addFusedBias(n.getParams(), n.getDy());
        })
        .Case([&](NormGramOp n) {
          SmallVector<std::string> names;
          for (Attribute ref : n.getParams())
            names.push_back(cast<FlatSymbolRefAttr>(ref).getValue().str());
          for (auto [i, ref] : llvm::enumerate(n.getParams())) {
            ParamRow &row = rowOf(ref);
            LinearNormShape s = linearNormShape(n.getX(), n.getDys()[i]);
            std::string method = "gram";
            if (names.size() > 1) {
              method += " (shared A A^T with";
              for (const std::string &other : names)
                if (other != row.name)
                  method += " " + other;
              method += ")";
            }
            addMethod(row, method);
            timeLinear(row, s, NormMethod::gram, n.getX(), i == 0 ? 1.0 : 0.0);
            if (i == 0)
              row.normFlops += gramInputFlops(s);
            row.normFlops += gramOutputFlops(s);
          }
        })
        .Case([&](NormDirectOp n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          timeLinear(row, linearNormShape(n.getX(), n.getDy()),
                     NormMethod::direct, n.getX());
          addMethod(row, "direct");
          row.normFlops +=
              directNormFlops(linearNormShape(n.getX(), n.getDy()));
          if (n.getBias())
            addFusedBias(n.getParams(), n.getDy());
        })
        .Case([&](NormBiasOp n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          addMethod(row, "bias");
          row.normFlops += biasNormFlops(
              batchOf(n.getDy()), tokensOf(n.getDy()), lastDim(n.getDy()));
        })
        .Case([&](NormEmbeddingOp n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          addMethod(row, "embedding");
          row.normFlops += embeddingNormFlops(
              batchOf(n.getDy()), tokensOf(n.getDy()), lastDim(n.getDy()));
        })
        .Case([&](NormPositionEmbeddingOp n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          addMethod(row, "positions");
          // sum_t ||dy_bt||^2: a multiply-add per element.
          row.normFlops += 2.0 * double(numelOf(n.getDy()));
        })
        .Case<NormTiedCrossOp, NormTiedDirectOp>([&](auto n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          Value x = n.getX(), demb = n.getDembedding();
          TiedNormShape s{batchOf(x), rowsOf(demb) / batchOf(demb),
                          rowsOf(x) / batchOf(x), lastDim(n.getDlogits()),
                          lastDim(x)};
          bool cross = isa<NormTiedCrossOp>(n.getOperation());
          addMethod(row, cross ? "tied cross term" : "tied, formed");
          row.normFlops += cross ? tiedCrossFlops(s) : tiedDirectFlops(s);
        })
        .Case([&](NormRowsOp n) {
          ParamRow &row = rowOf(n.getParams()[0]);
          if (auto grad = n.getGrads().getDefiningOp<LinearPerSampleGradOp>()) {
            LinearNormShape s = linearNormShape(grad.getX(), grad.getDy());
            addMethod(row, "materialized");
            Type stored = tensorOf(grad.getGrads()).getElementType();
            bool mxfp8 = isMXFP8Rows(stored);
            row.rows = mxfp8 ? "mxfp8" : llvm::formatv("{0}", stored).str();
            timeLinear(row, s, NormMethod::materialized, grad.getX(), 1.0,
                       mxfp8 ? PerSampleRows::MXFP8 : PerSampleRows::Compute);
            row.normFlops += materializedNormFlops(s);
            return;
          }
          addMethod(row, n.getFused() ? "per-sample vector (fused)"
                                      : "per-sample vector");
          // The per-sample gradient is formed over the layer's tokens.
          Operation *producer = n.getGrads().getDefiningOp();
          Value x = producer ? producer->getOperand(0) : n.getGrads();
          row.normFlops += rowsNormFlops(batchOf(n.getGrads()), tokensOf(x),
                                         lastDim(n.getGrads()));
        })
        .Case([&](LinearPerSampleGradOp g) {
          // The B products with K = T; vector_grad adds the weighted sum.
          for (Operation *user : g.getGrads().getUsers())
            if (auto sum = dyn_cast<VectorGradOp>(user))
              rowOf(sum.getParamAttr()).gradFlops +=
                  materializedGradFlops(linearNormShape(g.getX(), g.getDy())) -
                  elementGradFlops(batchOf(g.getGrads()),
                                   lastDim(g.getGrads()));
        })
        .Case([&](LinearGradWeightOp g) {
          rowOf(g.getWeightAttr()).gradFlops +=
              linearWeightGradFlops(linearNormShape(g.getX(), g.getDy()));
        })
        .Case([&](BiasGradOp g) {
          rowOf(g.getBiasAttr()).gradFlops +=
              elementGradFlops(rowsOf(g.getDy()), lastDim(g.getDy()));
        })
        .Case([&](EmbeddingGradOp g) {
          rowOf(g.getTableAttr()).gradFlops +=
              elementGradFlops(rowsOf(g.getDy()), lastDim(g.getDy()));
        })
        .Case([&](PositionEmbeddingGradOp g) {
          rowOf(g.getTableAttr()).gradFlops +=
              elementGradFlops(rowsOf(g.getDy()), lastDim(g.getDy()));
        })
        .Case([&](VectorGradOp g) {
          rowOf(g.getParamAttr()).gradFlops +=
              elementGradFlops(batchOf(g.getGrads()), lastDim(g.getGrads()));
        })
        .Case([&](AllGatherOp g) {
          // On one shard a gather is a cast of the master, not traffic.
          if (shards == 1)
            return;
          totals.gatherBytes += double(shards - 1) *
                                double(unitShard.lookup(g.getUnit())) *
                                double(bytesOf(compute));
          ++totals.gathers;
        })
        .Case([&](ReduceScatterOp r) {
          totals.scatterBytes += double(shards - 1) *
                                 double(unitShard.lookup(r.getUnit())) *
                                 double(bytesOf(accType));
          ++totals.scatters;
        });
  }
  double predictedSeconds = 0;
  for (const std::string &name : order) {
    ParamRow &row = rows[name];
    totals.norms += row.normFlops;
    totals.weightGrads += row.gradFlops;
    if (!row.timed)
      row.seconds = (row.normFlops + row.gradFlops) / rates.flopsPerSecond;
    predictedSeconds += row.seconds;
  }
  double total = totals.forward + totals.recompute + totals.inputGrads +
                 totals.norms + totals.weightGrads;
  // Cheap layers recomputed before their backward readers (dp-rematerialize).
  int64_t rematerialized = 0;
  if (auto count = step->getAttrOfType<IntegerAttr>("dp.rematerialized"))
    rematerialized = count.getInt();
  // Units whose forward gather serves their backward too (dp-shard).
  int64_t keptGathers = 0;
  if (auto count = step->getAttrOfType<IntegerAttr>("dp.kept_gathers"))
    keptGathers = count.getInt();
  SmallVector<std::string> recomputed;
  if (auto done = step->getAttrOfType<ArrayAttr>("dp.recomputed"))
    for (Attribute name : done)
      recomputed.push_back(cast<StringAttr>(name).getValue().str());

  // Expected physical batches per logical step: the logical batch is spread
  // over ranks x physical batch slots.
  int64_t physical = recipe.getPhysicalBatch();
  double expectedBatch = 0;
  if (auto poisson = dyn_cast<PoissonAttr>(recipe.getSampling()))
    expectedBatch = double(poisson.getExpectedBatch());
  else if (auto shuffle = dyn_cast<ShuffleAttr>(recipe.getSampling()))
    expectedBatch = double(shuffle.getBatch());
  int64_t microSteps =
      expectedBatch > 0
          ? std::max<int64_t>(
                1, int64_t(std::ceil(expectedBatch / double(ranks * physical))))
          : 0;

  // The physical batches a step's last micro-step may run on (dpc
  // --last-batch-sizes), as dp_describe names them.
  SmallVector<int64_t> lastSizes;
  program.walk([&](rt::CallOp call) {
    if (call.getCallee() == "describe_microstep")
      lastSizes.push_back(cast<IntegerAttr>(call.getArgs()[0]).getInt());
  });

  int64_t arena = *program.getArenaBytes();
  int64_t peak = *program.getPeakBytes();
  // Bytes recomputation saves, when dpc told the plan without it.
  int64_t arenaSaved =
      arenaWithoutRecompute >= 0 ? arenaWithoutRecompute - arena : -1;
  int64_t peakSaved =
      peakWithoutRecompute >= 0 ? peakWithoutRecompute - peak : -1;

  // Predicted times (seconds). Compute at the sustained rate; the
  // all-gathers and reduce-scatters of a replica's S shards cross the
  // network when a replica spans nodes, the all-reduces across replicas
  // when the grid does; communication overlaps compute (two streams).
  double flopsPerSecond = tflops * 1e12;
  auto linkRate = [&](bool acrossNodes) {
    return (acrossNodes ? networkGBps : nvlinkGBps) * 1e9;
  };
  bool shardsAcross = shards > gpusPerNode;
  bool replicasAcross = ranks > gpusPerNode && replicas > 1;
  double computeTime = total / flopsPerSecond;
  double recomputeTime = totals.recompute / flopsPerSecond;
  double commTime =
      (totals.gatherBytes + totals.scatterBytes) / linkRate(shardsAcross);
  double batchTime = std::max(computeTime, commTime);
  double allReduceTime = totals.allReduceBytes / linkRate(replicasAcross);
  double stepTime =
      double(std::max<int64_t>(microSteps, 1)) * batchTime + allReduceTime;
  std::map<std::string, int64_t> globals;
  for (rt::GlobalOp global : program.getBody().getOps<rt::GlobalOp>()) {
    StringRef name = global.getSymName();
    // Frozen units (dp-freeze) hold only their compute-type shard.
    std::string kind = name.ends_with(".frozen.params") ? "frozen parameters"
                       : name.ends_with(".params")      ? "parameters"
                       : name.ends_with(".master")      ? "master"
                       : name.ends_with(".grad")        ? "gradients"
                       : name.contains(".opt")          ? "optimizer"
                                                        : "inputs";
    globals[kind] += global.getBytes();
  }
  // Elements of the trainable parameters (the ones DP releases) and of the
  // frozen ones.
  int64_t trainableElems = 0, frozenElems = 0;
  for (ParamOp param : getParams(model))
    (param.getTrainable() ? trainableElems : frozenElems) +=
        param.getNumElements();
  int64_t tokens = 1;
  for (BlockArgument input : model.getForward().getInputs())
    if (tensorOf(input).getRank() >= 2 &&
        isa<IntegerType>(tensorOf(input).getElementType()))
      tokens = tensorOf(input).getDimSize(1);

  std::string errorMessage;
  auto file = openOutputFile(output, &errorMessage);
  if (!file) {
    module.emitError(errorMessage);
    return signalPassFailure();
  }
  llvm::raw_ostream &os = file->os();

  if (format == ReportFormat::JSON) {
    llvm::json::Array params;
    for (const std::string &name : order) {
      const ParamRow &row = rows[name];
      llvm::json::Object param{
          {"name", row.name},
          {"shape", row.shape},
          {"norm_method", row.method},
          {"norm_flops", row.normFlops},
          {"weight_grad_flops", row.gradFlops},
          {"sum_in_update", sumsInUpdate.contains(row.name)},
          {"gradient_written", written.contains(row.name)},
          {"predicted_seconds", row.seconds}};
      // Materialized weights only: "mxfp8" or the compute type.
      if (!row.rows.empty())
        param["rows"] = row.rows;
      params.push_back(std::move(param));
    }
    llvm::json::Object memory{{"arena_bytes", arena}, {"peak_bytes", peak}};
    for (auto &[kind, bytes] : globals) {
      std::string key = kind + "_bytes";
      std::replace(key.begin(), key.end(), ' ', '_');
      memory[key] = bytes;
    }
    llvm::json::Object report{
        {"model", model.getSymName()},
        {"recipe", recipe.getSymName()},
        {"ranks", ranks},
        {"replicas", replicas},
        {"shards", shards},
        {"physical_batch", physical},
        {"last_batch_sizes", llvm::json::Array(lastSizes)},
        {"tokens", tokens},
        {"compute_type", llvm::formatv("{0}", compute).str()},
        {"time_model", nameOf(backend)},
        {"private", !dpOff},
        {"trainable_elements", trainableElems},
        {"frozen_elements", frozenElems},
        {"params", std::move(params)},
        {"per_physical_batch",
         llvm::json::Object{
             {"forward_flops", totals.forward},
             {"recompute_flops", totals.recompute},
             {"input_grad_flops", totals.inputGrads},
             {"norm_flops", totals.norms},
             {"weight_grad_flops", totals.weightGrads},
             {"total_flops", total},
             {"norm_and_weight_grad_seconds", predictedSeconds},
             {"all_gathers", totals.gathers},
             {"all_gather_bytes_per_rank", totals.gatherBytes},
             {"reduce_scatters", totals.scatters},
             {"reduce_scatter_bytes_per_rank", totals.scatterBytes},
             {"units_kept_from_forward", keptGathers}}},
        {"per_step", llvm::json::Object{{"all_reduces", totals.allReduces},
                                        {"all_reduce_bytes_per_rank",
                                         totals.allReduceBytes}}},
        {"expected_physical_batches_per_step", microSteps},
        {"recompute",
         llvm::json::Object{
             {"blocks", llvm::json::Array(recomputed)},
             {"extra_flops_per_physical_batch", totals.recompute},
             {"extra_seconds_per_physical_batch", recomputeTime},
             {"arena_bytes_saved", arenaSaved},
             {"peak_bytes_saved", peakSaved},
             {"extra_all_gathers", 0},
             {"rematerialized_layers", rematerialized}}},
        {"predicted",
         llvm::json::Object{
             {"tflops", double(tflops)},
             {"nvlink_gbps", double(nvlinkGBps)},
             {"network_gbps", double(networkGBps)},
             {"gpus_per_node", int64_t(gpusPerNode)},
             {"compute_seconds_per_physical_batch", computeTime},
             {"communication_seconds_per_physical_batch", commTime},
             {"exposed_communication_seconds_per_physical_batch",
              std::max(0.0, commTime - computeTime)},
             {"all_reduce_seconds_per_step", allReduceTime},
             {"step_seconds", stepTime}}},
        {"memory_per_rank", std::move(memory)}};
    if (int64_t k = recipe.getRecordsPerUnit(); k > 1)
      report["max_records_per_user"] = k;
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    file->keep();
    return;
  }

  auto giga = [](double flops) { return llvm::format("%.3f", flops / 1e9); };
  auto mib = [](double bytes) {
    return llvm::format("%.2f", bytes / (1024.0 * 1024.0));
  };
  os << "DP training plan: model @" << model.getSymName() << ", recipe @"
     << recipe.getSymName() << ", " << ranks << " rank"
     << (ranks == 1 ? "" : "s");
  if (replicas > 1)
    os << " (" << replicas << " replicas x " << shards << " shards)";
  os << ", " << physical << " samples x " << tokens
     << " tokens per rank and physical batch, " << compute << "\n";
  if (dpOff)
    os << "DP off: no clipping and no noise; the program is NOT "
          "differentially private\n";
  // The norm FLOPs below are per record; a user's norm over its k records
  // costs up to k times more (Gram norms k^2).
  if (int64_t k = recipe.getRecordsPerUnit(); k > 1)
    os << "privacy unit: one user (at most " << k
       << " records in consecutive slots), its records' gradients summed "
          "and clipped together\n";
  os << "parameters: " << trainableElems << " trainable ("
     << mib(double(trainableElems) * double(bytesOf(compute))) << " MiB), "
     << frozenElems << " frozen ("
     << mib(double(frozenElems) * double(bytesOf(compute))) << " MiB) in "
     << compute << "\n\n";
  // MXFP8 rows are named beside the method; compute-type rows, the
  // default, are not.
  auto methodText = [](const ParamRow &row) {
    return row.rows == "mxfp8" ? row.method + " (mxfp8 rows)" : row.method;
  };
  size_t nameWidth = 9, shapeWidth = 5, methodWidth = 11;
  for (const std::string &name : order) {
    nameWidth = std::max(nameWidth, rows[name].name.size());
    shapeWidth = std::max(shapeWidth, rows[name].shape.size());
    methodWidth = std::max(methodWidth, methodText(rows[name]).size());
  }
  auto pad = [&](StringRef text, size_t width) {
    os << text;
    for (size_t i = text.size(); i < width + 2; ++i)
      os << ' ';
  };
  pad("parameter", nameWidth);
  pad("shape", shapeWidth);
  pad("norm method", methodWidth);
  os << "norm GFLOP  weight-grad GFLOP  predicted us\n";
  for (const std::string &name : order) {
    const ParamRow &row = rows[name];
    pad(row.name, nameWidth);
    pad(row.shape, shapeWidth);
    pad(methodText(row), methodWidth);
    os << llvm::format("%10.3f  %17.3f  %12.3f\n", row.normFlops / 1e9,
                       row.gradFlops / 1e9, row.seconds * 1e6);
  }
  os << "\nper physical batch and rank (GFLOP of matrix products):\n"
     << "  forward " << giga(totals.forward);
  if (totals.recompute > 0)
    os << ", recomputed forward " << giga(totals.recompute);
  os << ", input gradients " << giga(totals.inputGrads) << ", per-sample norms "
     << giga(totals.norms) << ", clipped weight gradients "
     << giga(totals.weightGrads) << ", total " << giga(total) << "\n";
  os << "  predicted time of norms and clipped weight gradients: "
     << llvm::format("%.3f", predictedSeconds * 1e3) << " ms ("
     << nameOf(backend) << " time model)\n";
  os << "  communication per rank: " << totals.gathers << " all-gathers, "
     << mib(totals.gatherBytes) << " MiB received; " << totals.scatters
     << " reduce-scatters, " << mib(totals.scatterBytes) << " MiB\n";
  if (keptGathers > 0)
    os << "  gathered units kept from the forward for the backward: "
       << keptGathers << " (no second gather, or cast from the master on "
       << "one rank, a step)\n";
  // One shard: a unit's compute-type parameters beside its master are the
  // copy dpc --compute-copy keeps, which the update writes.
  if (shards == 1 && globals.count("master") && globals.count("parameters"))
    os << "  compute-type copy of the weights kept for the run and written "
       << "by the optimizer update: " << mib(globals["parameters"])
       << " MiB (no cast of a unit from its master)\n";
  if (microSteps > 0)
    os << "per logical step: " << microSteps << " physical batch(es) expected, "
       << giga(total * microSteps) << " GFLOP per rank\n";
  if (!sumsInUpdate.empty())
    os << "  clipped sums formed by the optimizer update from the per-sample "
       << "gradients (one micro-step a step): " << sumsInUpdate.size()
       << " parameters; their gradients are never written\n";
  if (!written.empty())
    os << "  weight gradients written by the micro-step instead of added "
       << "into zeroed ones (one micro-step a step): " << written.size()
       << " parameters\n";
  os << "  a step's last, partly filled physical batch: ";
  if (lastSizes.empty()) {
    os << "padded to " << physical << " rows\n";
  } else {
    os << "run on the smallest of ";
    llvm::interleaveComma(lastSizes, os);
    os << " rows that holds it, else " << physical << "\n";
  }
  if (replicas > 1)
    os << "  across replicas per step and rank: " << totals.allReduces
       << " all-reduces of gradient shards, " << mib(totals.allReduceBytes)
       << " MiB sent and received\n";
  os << "memory per rank: arena " << mib(arena) << " MiB, peak in use "
     << mib(peak) << " MiB (";
  bool first = true;
  for (auto &[kind, bytes] : globals) {
    os << (first ? "" : ", ") << kind << " " << mib(bytes);
    first = false;
  }
  os << " MiB; the rest temporaries)\n";
  if (!recomputed.empty()) {
    os << "recomputed before their backward: " << recomputed.size()
       << " block(s) (";
    llvm::interleave(recomputed, os, ", ");
    os << "): +" << giga(totals.recompute) << " GFLOP and +"
       << llvm::format("%.2f", recomputeTime * 1e3)
       << " ms per physical batch, no extra all-gather";
    if (arenaSaved >= 0)
      os << "; saves " << mib(double(arenaSaved)) << " MiB of arena ("
         << mib(double(arenaWithoutRecompute)) << " MiB without), "
         << mib(double(peakSaved)) << " MiB of peak";
    os << "\n";
  }
  if (rematerialized > 0)
    os << "rematerialized before their backward readers: " << rematerialized
       << " normalization, activation and product layer(s), one more "
          "elementwise pass each\n";
  os << "predicted at " << llvm::format("%g", double(tflops))
     << " TFLOP/s sustained, " << llvm::format("%g", double(nvlinkGBps))
     << " GB/s within a node of " << gpusPerNode << ", "
     << llvm::format("%g", double(networkGBps))
     << " GB/s between nodes: per physical batch compute "
     << llvm::format("%.2f", computeTime * 1e3) << " ms, communication "
     << llvm::format("%.2f", commTime * 1e3) << " ms ("
     << llvm::format("%.2f", std::max(0.0, commTime - computeTime) * 1e3)
     << " ms exposed)";
  if (replicas > 1)
    os << ", all-reduces " << llvm::format("%.2f", allReduceTime * 1e3)
       << " ms per step";
  os << "; step " << llvm::format("%.3f", stepTime) << " s\n";
  file->keep();
}

} // namespace
