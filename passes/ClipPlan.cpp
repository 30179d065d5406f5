//===- ClipPlan.cpp - Per-sample norms, clip factors, book-keeping --------===//

#include "passes/Passes.h"

#include "DP/DPModel.h"
#include "passes/CompiledRecipe.h"
#include "passes/CostModel.h"
#include "passes/Shapes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace dpc {
#define GEN_PASS_DEF_CLIPPLAN
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// The longest chain of accumulated terms behind a norm op's result: the
/// inner products it forms and the sums over them.
double accumulationLength(Operation *norm) {
  return llvm::TypeSwitch<Operation *, double>(norm)
      .Case([](NormRank1Op op) {
        auto x = cast<RankedTensorType>(op.getX().getType());
        auto dy = cast<RankedTensorType>(op.getDy().getType());
        return double(std::max(x.getShape().back(), dy.getShape().back()));
      })
      .Case([](NormGramOp op) {
        auto x = cast<RankedTensorType>(op.getX().getType());
        double t = double(x.getDimSize(1));
        double width = double(x.getShape().back());
        for (Value dy : op.getDys())
          width = std::max(
              width,
              double(cast<RankedTensorType>(dy.getType()).getShape().back()));
        return width * double(op.getDys().size()) + t * t;
      })
      .Case([](NormDirectOp op) {
        auto x = cast<RankedTensorType>(op.getX().getType());
        auto dy = cast<RankedTensorType>(op.getDy().getType());
        return double(x.getDimSize(1)) +
               double(x.getShape().back()) * double(dy.getShape().back());
      })
      .Case([](NormBiasOp op) {
        auto dy = cast<RankedTensorType>(op.getDy().getType());
        return double(dy.getNumElements() / dy.getDimSize(0));
      })
      .Case([](NormEmbeddingOp op) {
        auto dy = cast<RankedTensorType>(op.getDy().getType());
        double t = double(dy.getRank() == 3 ? dy.getDimSize(1) : 1);
        return t * t * double(dy.getShape().back());
      })
      .Case([](NormRowsOp op) {
        auto g = cast<RankedTensorType>(op.getGrads().getType());
        // A materialized weight gradient's elements are sums of T products.
        double products = 1.0;
        if (auto grad = op.getGrads().getDefiningOp<LinearPerSampleGradOp>())
          products = double(tokensOf(grad.getX()));
        return products + double(g.getShape().back());
      })
      .Case([](NormPositionEmbeddingOp op) {
        return double(rowsOf(op.getDy()) / batchOf(op.getDy())) *
               double(lastDim(op.getDy()));
      })
      .Case([](NormTiedCrossOp op) {
        // d-term products in M_b, then T_h T_e of them summed.
        double pairs =
            double(rowsOf(op.getX()) / batchOf(op.getX())) *
            double(rowsOf(op.getDembedding()) / batchOf(op.getDembedding()));
        return double(lastDim(op.getX())) + pairs;
      })
      .Case([](NormTiedDirectOp op) {
        // T_h-term products, T_e rows added, V d squares summed.
        return double(rowsOf(op.getX()) / batchOf(op.getX())) +
               double(rowsOf(op.getDembedding()) /
                      batchOf(op.getDembedding())) +
               double(lastDim(op.getX())) * double(lastDim(op.getDlogits()));
      })
      .Default([](Operation *) { return 1.0; });
}

bool isWeightGrad(Operation *op) {
  return isa<LinearGradWeightOp, BiasGradOp, EmbeddingGradOp,
             PositionEmbeddingGradOp, VectorGradOp>(op);
}

/// The clip factor a weight-gradient op scales by, or null.
Value scaleOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<LinearGradWeightOp, BiasGradOp, EmbeddingGradOp,
            PositionEmbeddingGradOp, VectorGradOp>(
          [](auto grad) { return grad.getScale(); })
      .Default([](Operation *) { return Value(); });
}

/// The parameter a weight-gradient op adds into.
StringAttr paramOf(Operation *op) {
  return cast<ParamUserOpInterface>(op).getParamRefs().front().getAttr();
}

struct ClipPlanPass : dpc::impl::ClipPlanBase<ClipPlanPass> {
  using ClipPlanBase::ClipPlanBase;

  void runOnOperation() override {
    FailureOr<CompiledRecipe> compiled =
        findTrainingStep(getOperation(), getArgument());
    if (failed(compiled) ||
        failed(plan(compiled->step, compiled->recipe.getClip(),
                    getComputeType(compiled->model),
                    compiled->recipe.getRecordsPerUnit())))
      return signalPassFailure();
  }

  /// unitRecords: k under user-level DP (the lowering runs each norm over
  /// k records' rows), else 1.
  LogicalResult plan(StepOp step, ClipAttr clip, Type computeType,
                     int64_t unitRecords);

  /// The norm-methods option: the method forced for a parameter (by name,
  /// or "*" for every linear weight). Fails with an error naming the entry.
  LogicalResult parseForcedMethods(StepOp step,
                                   const llvm::StringSet<> &linearWeights);

  /// The linear weights whose per-sample gradients are materialized: the
  /// forced ones, then greedily by predicted time saved per byte while the
  /// bytes fit materialize-bytes (their sum under flat and automatic
  /// clipping, where all of them live until the clip factors are known; the
  /// largest one under per-layer clipping, where each dies at once).
  llvm::DenseSet<StringAttr>
  chooseMaterialized(ArrayRef<LinearGradWeightOp> linears, bool perLayer,
                     bool share);

  /// The method forced for `param`, if any.
  std::optional<NormMethod> forcedMethod(StringRef param) const;

  llvm::StringMap<NormMethod> forced;
  std::optional<NormMethod> forcedAll;

  /// The norm ops of a table tied to a linear head (`grads`: its two
  /// weight-gradient ops), after the later of the two so that both output
  /// gradients exist: the head's own norm, the embedding's and their cross
  /// term, or the tied gradient formed where that is cheaper
  /// (chooseTiedDirect).
  FailureOr<SmallVector<Value>> planTiedNorm(ArrayRef<Operation *> grads,
                                             OpBuilder &builder, Type type);
};

FailureOr<SmallVector<Value>>
ClipPlanPass::planTiedNorm(ArrayRef<Operation *> grads, OpBuilder &builder,
                           Type type) {
  EmbeddingGradOp embedding;
  LinearGradWeightOp head;
  for (Operation *op : grads) {
    if (auto e = dyn_cast<EmbeddingGradOp>(op); e && !embedding)
      embedding = e;
    else if (auto l = dyn_cast<LinearGradWeightOp>(op); l && !head)
      head = l;
  }
  if (grads.size() != 2 || !embedding || !head)
    return grads.back()->emitOpError("adds into @")
           << paramOf(grads.back()).getValue() << " as " << grads.size()
           << " weight-gradient ops do; dp-clip-plan clips a shared "
              "parameter only as a table tied to one linear head";
  Operation *later = embedding->isBeforeInBlock(head)
                         ? head.getOperation()
                         : embedding.getOperation();
  builder.setInsertionPointAfter(later);
  Location loc = later->getLoc();
  ArrayAttr params = builder.getArrayAttr({embedding.getTableAttr()});
  Value x = head.getX(), dlogits = head.getDy();
  Value tokens = embedding.getTokens(), dembedding = embedding.getDy();
  TiedNormShape tied{batchOf(x), rowsOf(dembedding) / batchOf(dembedding),
                     rowsOf(x) / batchOf(x), lastDim(dlogits), lastDim(x)};
  LinearNormShape shape = linearNormShape(x, dlogits);
  NormMethod method = chooseLinearNormMethod(shape);
  double headFlops = method == NormMethod::rank1 ? rank1NormFlops(shape)
                     : method == NormMethod::gram
                         ? gramInputFlops(shape) + gramOutputFlops(shape)
                         : directNormFlops(shape);
  ++numTied;
  if (chooseTiedDirect(tied, headFlops))
    return SmallVector<Value>{NormTiedDirectOp::create(
        builder, loc, type, tokens, dembedding, x, dlogits, params)};
  // The head's norm as an untied head's (its A A^T is not shared: a tied
  // parameter's norm stays its own, for per-layer clipping).
  Value headNorm;
  switch (method) {
  case NormMethod::rank1:
    headNorm = NormRank1Op::create(builder, loc, type, x, dlogits, params);
    break;
  case NormMethod::gram:
    headNorm =
        NormGramOp::create(builder, loc, type, x, ValueRange{dlogits}, params);
    break;
  default:
    headNorm = NormDirectOp::create(builder, loc, type, x, dlogits, params);
    break;
  }
  Value embeddingNorm =
      NormEmbeddingOp::create(builder, loc, type, tokens, dembedding, params);
  Value cross = NormTiedCrossOp::create(builder, loc, type, tokens, dembedding,
                                        x, dlogits, params);
  return SmallVector<Value>{headNorm, embeddingNorm, cross};
}

std::optional<NormMethod> ClipPlanPass::forcedMethod(StringRef param) const {
  auto it = forced.find(param);
  if (it != forced.end())
    return it->second;
  return forcedAll;
}

LogicalResult
ClipPlanPass::parseForcedMethods(StepOp step,
                                 const llvm::StringSet<> &linearWeights) {
  for (const std::string &entry : normMethods) {
    auto [name, methodName] = StringRef(entry).split('=');
    std::optional<NormMethod> method =
        llvm::StringSwitch<std::optional<NormMethod>>(methodName.trim())
            .Case("gram", NormMethod::gram)
            .Case("direct", NormMethod::direct)
            .Case("materialized", NormMethod::materialized)
            .Default(std::nullopt);
    name = name.trim();
    if (!method || name.empty())
      return step.emitOpError("norm-methods entry '")
             << entry
             << "' is not PARAM=METHOD with METHOD gram, direct or "
                "materialized";
    if (name == "*") {
      forcedAll = method;
      continue;
    }
    if (!linearWeights.contains(name))
      return step.emitOpError("norm-methods entry '")
             << entry << "' names @" << name
             << ", which is not the trainable weight of a linear layer "
                "(a table tied to a head keeps its own norms)";
    forced[name] = *method;
  }
  return success();
}

llvm::DenseSet<StringAttr>
ClipPlanPass::chooseMaterialized(ArrayRef<LinearGradWeightOp> linears,
                                 bool perLayer, bool share) {
  llvm::DenseSet<StringAttr> chosen;
  // Layers that would share one A A^T pay a share of it each.
  llvm::DenseMap<Value, int64_t> gramReaders;
  for (LinearGradWeightOp grad : linears)
    if (chooseLinearNormMethod(linearNormShape(grad.getX(), grad.getDy())) ==
        NormMethod::gram)
      ++gramReaders[grad.getX()];
  DeviceRates rates = deviceRates(backend);
  struct Candidate {
    StringAttr param;
    double saved;
    int64_t bytes;
  };
  SmallVector<Candidate> candidates;
  int64_t used = 0;
  for (LinearGradWeightOp grad : linears) {
    LinearNormShape shape = linearNormShape(grad.getX(), grad.getDy());
    Type element =
        cast<RankedTensorType>(grad.getX().getType()).getElementType();
    int64_t computeBytes = element.isF64() ? 8 : element.isF32() ? 4 : 2;
    int64_t accBytes = element.isF64() ? 8 : 4;
    // The bytes plan() will have the lowering allocate: for MXFP8 rows
    // 1 + 1/32 an element, about half of bf16 rows' 2.
    PerSampleRows rows = rowsFormatFor(shape, element, perSampleRows, rates);
    int64_t bytes = materializedBytes(shape, computeBytes, rows);
    StringAttr param = grad.getWeightAttr().getAttr();
    std::optional<NormMethod> method = forcedMethod(param.getValue());
    if (method == NormMethod::materialized) {
      chosen.insert(param);
      used = perLayer ? std::max(used, bytes) : used + bytes;
      continue;
    }
    if (method)
      continue;
    NormMethod usual = chooseLinearNormMethod(shape);
    double gramShare = usual == NormMethod::gram && share
                           ? 1.0 / double(gramReaders.lookup(grad.getX()))
                           : 1.0;
    double saved = linearParamSeconds(shape, usual, computeBytes, accBytes,
                                      rates, gramShare) -
                   linearParamSeconds(shape, NormMethod::materialized,
                                      computeBytes, accBytes, rates,
                                      /*gramInputShare=*/1.0,
                                      /*sumInUpdate=*/false, rows);
    if (saved > 0)
      candidates.push_back({param, saved, bytes});
  }
  if (materializeBytes == 0)
    return chosen;
  // Most time saved per byte first.
  llvm::stable_sort(candidates, [](const Candidate &a, const Candidate &b) {
    return a.saved / double(a.bytes) > b.saved / double(b.bytes);
  });
  for (const Candidate &c : candidates) {
    int64_t next = perLayer ? std::max(used, c.bytes) : used + c.bytes;
    if (materializeBytes >= 0 && next > materializeBytes)
      continue;
    chosen.insert(c.param);
    used = next;
  }
  return chosen;
}

LogicalResult ClipPlanPass::plan(StepOp step, ClipAttr clip, Type computeType,
                                 int64_t unitRecords) {
  Block &body = step.getBodyBlock();
  // The weight-gradient ops of each parameter, in the order of the step:
  // one, or two for a table tied to a linear head.
  SmallVector<Operation *> weightGrads;
  llvm::MapVector<StringAttr, SmallVector<Operation *, 2>> gradsOf;
  for (Operation &op : body) {
    if (!isWeightGrad(&op))
      continue;
    if (scaleOf(&op))
      return op.emitOpError("is already clipped; dp-clip-plan runs once");
    weightGrads.push_back(&op);
    gradsOf[paramOf(&op)].push_back(&op);
  }
  if (gradsOf.empty())
    return step.emitOpError("has no trainable parameter to clip");

  auto setScale = [](Operation *op, Value scale) {
    llvm::TypeSwitch<Operation *>(op)
        .Case<LinearGradWeightOp, BiasGradOp, EmbeddingGradOp,
              PositionEmbeddingGradOp, VectorGradOp>(
            [&](auto grad) { grad.getScaleMutable().assign(scale); });
  };

  if (clip.getMode() == ClipMode::none) {
    // DP off: no per-sample norm and no clip factor; each sample's gradient
    // enters the sum weighted by its mask alone (0 for padding samples), so
    // the weight-gradient kernels are the private program's.
    for (Operation *op : weightGrads)
      setScale(op, step.getMask());
    return success();
  }

  bool perLayer = clip.getMode() == ClipMode::per_layer;
  bool share = shareGram && !perLayer;
  OpBuilder builder(step.getContext());
  auto flatRef = [&](FlatSymbolRefAttr ref) -> Attribute { return ref; };

  // Linear weights with one weight-gradient op: those may take any method.
  llvm::StringSet<> linearWeights;
  SmallVector<LinearGradWeightOp> linears;
  for (auto &[param, grads] : gradsOf)
    if (auto grad = dyn_cast<LinearGradWeightOp>(grads.front());
        grad && grads.size() == 1) {
      linearWeights.insert(param.getValue());
      linears.push_back(grad);
    }
  if (failed(parseForcedMethods(step, linearWeights)))
    return failure();
  // Under user-level DP a unit is k records: its norm is that of the sum of
  // their gradients, while materialized gradients are one per record (row),
  // so their norms would be the records'. Not chosen, and refused if forced.
  if (unitRecords > 1) {
    if (forcedAll == NormMethod::materialized ||
        llvm::any_of(forced, [](const auto &entry) {
          return entry.getValue() == NormMethod::materialized;
        }))
      return step.emitOpError(
          "cannot force the materialized norm method under user-level DP "
          "(#dp.unit<user>): its per-sample gradients are per record, and a "
          "user's norm is that of the sum of its records' gradients");
    linears.clear();
  }
  llvm::DenseSet<StringAttr> materialized =
      chooseMaterialized(linears, perLayer, share);

  // Gram layers grouped by the activation they read (q/k/v, gate/up).
  llvm::MapVector<Value, SmallVector<LinearGradWeightOp>> gramGroups;
  // The squared norm of each parameter (for per-layer clipping).
  llvm::DenseMap<StringAttr, Value> normOf;
  SmallVector<Value> norms;

  auto perSample = [&](Value x) {
    return RankedTensorType::get(
        {cast<RankedTensorType>(x.getType()).getDimSize(0)},
        cast<RankedTensorType>(step.getMask().getType()).getElementType());
  };

  for (auto &[param, grads] : gradsOf) {
    if (grads.size() > 1) {
      Type type = perSample(step.getMask());
      FailureOr<SmallVector<Value>> parts = planTiedNorm(grads, builder, type);
      if (failed(parts))
        return failure();
      llvm::append_range(norms, *parts);
      // Per-layer clipping clips the tied table as one parameter: the sum
      // of its parts.
      Value total = parts->front();
      if (parts->size() > 1 && perLayer)
        total = NormSumOp::create(builder, grads.back()->getLoc(), *parts);
      normOf[param] = total;
      continue;
    }
    Operation *op = grads.front();
    builder.setInsertionPointAfter(op);
    Location loc = op->getLoc();
    if (materialized.contains(param)) {
      // g_b = dy_b^T x_b for every sample where the weight gradient was,
      // its norm, and the clipped sum of the slices in place of the
      // weight-gradient product.
      auto grad = cast<LinearGradWeightOp>(op);
      LinearNormShape shape = linearNormShape(grad.getX(), grad.getDy());
      // In the compute type (bf16 slices are half the memory of f32 ones)
      // or, as per-sample-rows asks (rowsFormatFor), as MXFP8 (about half
      // of bf16 again); either way the norm is taken of the stored values
      // the clipped sum adds.
      Type compute =
          cast<RankedTensorType>(grad.getX().getType()).getElementType();
      Type stored = compute;
      if (rowsFormatFor(shape, compute, perSampleRows, deviceRates(backend)) ==
          PerSampleRows::MXFP8) {
        stored = Float8E4M3FNType::get(compute.getContext());
        ++numMXFP8Rows;
      }
      auto gradsType =
          RankedTensorType::get({shape.batch, shape.out * shape.in}, stored);
      Value perSampleGrads = LinearPerSampleGradOp::create(
          builder, loc, gradsType, grad.getX(), grad.getDy());
      Value norm = NormRowsOp::create(
          builder, loc, perSample(grad.getX()), perSampleGrads,
          builder.getArrayAttr({flatRef(grad.getWeightAttr())}), false);
      auto sum = VectorGradOp::create(builder, loc, grad.getWeightAttr(),
                                      perSampleGrads, Value());
      *llvm::find(weightGrads, op) = sum;
      grads.front() = sum;
      op->erase();
      ++numMaterialized;
      normOf[param] = norm;
      norms.push_back(norm);
      continue;
    }
    Value norm =
        llvm::TypeSwitch<Operation *, Value>(op)
            .Case([&](LinearGradWeightOp grad) -> Value {
              LinearNormShape shape =
                  linearNormShape(grad.getX(), grad.getDy());
              ArrayAttr params =
                  builder.getArrayAttr({flatRef(grad.getWeightAttr())});
              Type type = perSample(grad.getX());
              std::optional<NormMethod> method =
                  forcedMethod(grad.getWeightAttr().getValue());
              switch (method ? *method : chooseLinearNormMethod(shape)) {
              case NormMethod::rank1:
                ++numRank1;
                return builder.create<NormRank1Op>(loc, type, grad.getX(),
                                                   grad.getDy(), params);
              case NormMethod::gram:
                ++numGram;
                if (share) {
                  gramGroups[grad.getX()].push_back(grad);
                  return Value();
                }
                return builder.create<NormGramOp>(
                    loc, type, grad.getX(), ValueRange{grad.getDy()}, params);
              default:
                ++numDirect;
                return builder.create<NormDirectOp>(loc, type, grad.getX(),
                                                    grad.getDy(), params);
              }
            })
            .Case([&](BiasGradOp grad) -> Value {
              ++numOther;
              return builder.create<NormBiasOp>(
                  loc, perSample(grad.getDy()), grad.getDy(),
                  builder.getArrayAttr({flatRef(grad.getBiasAttr())}));
            })
            .Case([&](EmbeddingGradOp grad) -> Value {
              ++numOther;
              return builder.create<NormEmbeddingOp>(
                  loc, perSample(grad.getDy()), grad.getTokens(), grad.getDy(),
                  builder.getArrayAttr({flatRef(grad.getTableAttr())}));
            })
            .Case([&](PositionEmbeddingGradOp grad) -> Value {
              ++numOther;
              return builder.create<NormPositionEmbeddingOp>(
                  loc, perSample(grad.getDy()), grad.getDy(),
                  builder.getArrayAttr({flatRef(grad.getTableAttr())}));
            })
            .Case([&](VectorGradOp grad) -> Value {
              ++numOther;
              return builder.create<NormRowsOp>(
                  loc, perSample(grad.getGrads()), grad.getGrads(),
                  builder.getArrayAttr({flatRef(grad.getParamAttr())}));
            });
    if (norm) {
      normOf[param] = norm;
      norms.push_back(norm);
    }
  }

  // One A A^T per activation: after the last layer of the group, when every
  // output gradient of the group exists.
  for (auto &[x, group] : gramGroups) {
    builder.setInsertionPointAfter(group.back());
    SmallVector<Value> dys;
    SmallVector<Attribute> params;
    for (LinearGradWeightOp grad : group) {
      dys.push_back(grad.getDy());
      params.push_back(grad.getWeightAttr());
    }
    Value norm =
        builder.create<NormGramOp>(group.back().getLoc(), perSample(x), x, dys,
                                   builder.getArrayAttr(params));
    for (LinearGradWeightOp grad : group)
      normOf[paramOf(grad)] = norm;
    norms.push_back(norm);
  }

  // Norms are accumulated in f32 (f64 for f64 models).
  double unitRoundoff = computeType.isF64() ? 0x1p-53 : 0x1p-24;
  double longest = 1.0;
  for (Value norm : norms)
    longest = std::max(longest, accumulationLength(norm.getDefiningOp()));
  // User-level DP: the lowering runs each norm over a user's k records (k T
  // tokens, or k rows), and every length above is at most quadratic in T
  // (a rank-1 norm becomes a Gram norm of T = k: width + k^2).
  double k2 = double(unitRecords) * double(unitRecords);
  double relErr =
      normRelativeError(longest * k2 + k2 + double(norms.size()), unitRoundoff);
  Value mask = step.getMask();
  auto f64 = [](double v) { return APFloat(v); };
  double maxNorm = clip.getMaxNorm().convertToDouble();
  double gamma = clip.getGamma().convertToDouble();

  if (perLayer) {
    // C_l = C / sqrt(L) for L trainable parameters (a tied table is one):
    // the per-parameter bounds compose to C overall.
    double layerNorm = maxNorm / std::sqrt(double(gradsOf.size()));
    for (auto &[param, grads] : gradsOf) {
      Value norm = normOf.lookup(param);
      builder.setInsertionPointAfterValue(norm);
      Value factor = builder.create<ClipFactorOp>(
          grads.front()->getLoc(), norm, mask, ClipMode::per_layer,
          f64(layerNorm), f64(gamma), f64(relErr));
      Operation *insertAfter = factor.getDefiningOp();
      for (Operation *op : grads) {
        op->moveAfter(insertAfter);
        setScale(op, factor);
        insertAfter = op;
      }
    }
    return success();
  }

  // Flat and automatic clipping with book-keeping: every norm first, then
  // one factor per sample, then each clipped weight gradient once.
  Operation *lastNorm = norms.front().getDefiningOp();
  for (Value norm : norms)
    if (lastNorm->isBeforeInBlock(norm.getDefiningOp()))
      lastNorm = norm.getDefiningOp();
  builder.setInsertionPointAfter(lastNorm);
  Value total = builder.create<NormSumOp>(step.getLoc(), norms);
  Value factor =
      builder.create<ClipFactorOp>(step.getLoc(), total, mask, clip.getMode(),
                                   f64(maxNorm), f64(gamma), f64(relErr));
  Operation *insertAfter = factor.getDefiningOp();
  for (Operation *op : weightGrads) {
    op->moveAfter(insertAfter);
    setScale(op, factor);
    insertAfter = op;
  }
  return success();
}

} // namespace
