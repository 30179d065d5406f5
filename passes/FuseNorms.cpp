//===- FuseNorms.cpp - Norm work folded into the ops that read its data ---===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

namespace dpc {
#define GEN_PASS_DEF_FUSENORMS
#include "passes/Passes.h.inc"
} // namespace dpc

using namespace mlir;
using namespace dpc;
using namespace dpc::dp;

namespace {

/// Where a norm's squared values go: the dp.norm_sum that reads it, or the
/// norm itself when it is read by something else (a per-layer clip factor).
Operation *sinkOf(Value norm) {
  if (norm.hasOneUse() && isa<NormSumOp>(*norm.getUsers().begin()))
    return *norm.getUsers().begin();
  return nullptr;
}

struct FuseNormsPass : dpc::impl::FuseNormsBase<FuseNormsPass> {
  void runOnOperation() override {
    // User-level DP needs the norm of a user's summed scale gradients, not
    // the sum of its records' norms that the fused kernels add.
    // (After dp-specialize the module holds the one recipe it compiles.)
    bool perRecord = true;
    for (RecipeOp recipe : getOperation().getOps<RecipeOp>())
      perRecord = perRecord && recipe.getRecordsPerUnit() == 1;
    getOperation().walk([&](StepOp step) {
      if (perRecord)
        fuseNormLayers(step);
      fuseBiases(step);
    });
  }

  /// norm_rows of per-sample scale/bias gradients or of materialized
  /// linear weight gradients -> the op that forms them adds their norms. All
  /// norm_rows of one backward op must add into one place, since the kernel
  /// adds them into one buffer.
  void fuseNormLayers(StepOp step) {
    llvm::DenseMap<Operation *, SmallVector<NormRowsOp>> byProducer;
    step.walk([&](NormRowsOp rows) {
      Operation *producer = rows.getGrads().getDefiningOp();
      if (isa_and_nonnull<RMSNormGradOp, LayerNormGradOp,
                          LinearPerSampleGradOp>(producer))
        byProducer[producer].push_back(rows);
    });
    for (auto &[producer, rows] : byProducer) {
      if (rows.size() > 1) {
        Operation *sink = sinkOf(rows.front().getNorms());
        if (!sink || llvm::any_of(rows, [&](NormRowsOp r) {
              return sinkOf(r.getNorms()) != sink;
            }))
          continue;
      }
      for (NormRowsOp r : rows) {
        r.setFused(true);
        ++numFusedRows;
      }
    }
  }

  /// norm_bias(dy) + norm_rank1/norm_direct(x, dy) of the same layer, adding
  /// into the same norm_sum -> one op with the bias.
  void fuseBiases(StepOp step) {
    SmallVector<NormBiasOp> biases;
    step.walk([&](NormBiasOp bias) { biases.push_back(bias); });
    for (NormBiasOp bias : biases) {
      Operation *sink = sinkOf(bias.getNorms());
      if (!sink)
        continue;
      Operation *weightNorm = nullptr;
      for (Operation *user : bias.getDy().getUsers())
        if (isa<NormRank1Op, NormDirectOp>(user) &&
            sinkOf(user->getResult(0)) == sink && !user->hasAttr("bias")) {
          weightNorm = user;
          break;
        }
      if (!weightNorm)
        continue;
      SmallVector<Attribute> params(
          cast<ArrayAttr>(weightNorm->getAttr("params")).getValue());
      params.append(bias.getParams().begin(), bias.getParams().end());
      OpBuilder builder(weightNorm);
      weightNorm->setAttr("params", builder.getArrayAttr(params));
      weightNorm->setAttr("bias", builder.getUnitAttr());
      // The bias no longer adds its own part to the sum.
      auto sum = cast<NormSumOp>(sink);
      SmallVector<Value> parts;
      for (Value part : sum.getParts())
        if (part != bias.getNorms())
          parts.push_back(part);
      sum.getPartsMutable().assign(parts);
      // The fused op runs where the later of the two ran, so that both
      // output gradients exist.
      if (weightNorm->isBeforeInBlock(bias))
        weightNorm->moveAfter(bias);
      bias.erase();
      ++numFusedBiases;
    }
  }
};

} // namespace
