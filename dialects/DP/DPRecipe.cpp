//===- DPRecipe.cpp - The recipe: parsing, printing, verification ---------===//
//
// dp.recipe's custom syntax and its verifier: the recipe's attributes
// against each other and against the model it trains (its parameters,
// forward inputs and largest activation). The model's ops are in DPOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "DP/DPOps.h"
#include "DP/DPSizes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/GlobPattern.h"

#include <cfloat>
#include <limits>

using namespace mlir;
using namespace dpc::dp;

//===----------------------------------------------------------------------===//
// RecipeOp
//===----------------------------------------------------------------------===//

int64_t RecipeOp::getPhysicalBatch() {
  return llvm::TypeSwitch<Attribute, int64_t>(getSampling())
      .Case<PoissonAttr, ShuffleAttr>(
          [](auto sampling) { return sampling.getPhysicalBatch(); })
      .Default([](Attribute) { return 0; });
}

int64_t RecipeOp::getRecordsPerUnit() {
  std::optional<PrivacyUnitAttr> unit = getUnit();
  return unit ? unit->recordsPerUnit() : 1;
}

ParseResult RecipeOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  FlatSymbolRefAttr model;
  if (parser.parseSymbolName(name) || parser.parseKeyword("for") ||
      parser.parseAttribute(model) ||
      parser.parseOptionalAttrDict(result.attributes))
    return failure();
  result.addAttribute(getSymNameAttrName(result.name), name);
  result.addAttribute(getModelAttrName(result.name), model);
  return success();
}

/// One field a line, in the order of the op's definition.
void RecipeOp::print(OpAsmPrinter &p) {
  p << " ";
  p.printSymbolName(getSymName());
  p << " for " << getModelAttr() << " {";
  p.increaseIndent();
  bool first = true;
  auto field = [&](StringRef key, Attribute value) {
    if (!value)
      return;
    p << (first ? "" : ",");
    first = false;
    p.printNewline();
    p << key << " = ";
    p.printAttributeWithoutType(value);
  };
  field("clip", getClipAttr());
  field("noise", getNoiseAttr());
  field("sampling", getSamplingAttr());
  field("unit", getUnitAttr());
  field("optimizer", getOptimizerAttr());
  field("schedule", getScheduleAttr());
  field("steps", getStepsAttr());
  field("precision", getPrecisionAttr());
  field("shard", getShardAttr());
  field("grid", getGridAttr());
  if (getSeed() != 0)
    field("seed", getSeedAttr());
  field("train", getTrainAttr());
  field("freeze", getFreezeAttr());
  field("lora", getLoraAttr());
  for (NamedAttribute extra : (*this)->getDiscardableAttrs())
    field(extra.getName().getValue(), extra.getValue());
  p.decreaseIndent();
  p.printNewline();
  p << "}";
}

LogicalResult RecipeOp::verify() {
  for (NamedAttribute field : (*this)->getDiscardableAttrs())
    return emitOpError("unknown recipe field '")
           << field.getName().getValue()
           << "'; the fields are clip, noise, sampling, optimizer, "
              "schedule, steps, precision, shard, grid, seed, train, freeze, "
              "lora and unit";
  if (getSeedAttr().getInt() < 0)
    return emitOpError("seed must be >= 0");
  if (getTrainAttr() && getFreezeAttr())
    return emitOpError("gives both train and freeze; name the parameters "
                       "that train or those that do not, not both");
  for (auto [key, patterns] :
       {std::pair(StringRef("train"), getTrainAttr()),
        std::pair(StringRef("freeze"), getFreezeAttr())}) {
    if (!patterns)
      continue;
    if (patterns.empty())
      return emitOpError() << key << " must list at least one pattern";
    for (Attribute pattern : patterns) {
      StringRef text = cast<StringAttr>(pattern).getValue();
      if (text.empty())
        return emitOpError() << key << " has an empty pattern";
      if (llvm::Expected<llvm::GlobPattern> glob =
              llvm::GlobPattern::create(text);
          !glob) {
        std::string message = llvm::toString(glob.takeError());
        return emitOpError()
               << key << " pattern '" << text << "' is not a glob: " << message;
      }
    }
  }
  if (int64_t steps = getStepsAttr().getInt(); steps > kMaxExactCount)
    return emitOpError("steps = ")
           << steps << " is above 2^53, the largest count the accountant "
           << "holds exactly";
  // Without clipping one sample can move the sum arbitrarily far: no amount
  // of noise bounds what it reveals.
  if (getClip().getMode() == ClipMode::none && !isa<NoNoiseAttr>(getNoise()))
    return emitOpError("adds noise to unclipped gradients: with clip = "
                       "#dp.clip<none> a sample's gradient is unbounded, so "
                       "noise protects nothing; use noise = #dp.none for "
                       "training without DP, or clip the gradients");
  // Clipping without noise is neither private nor the plain baseline: it
  // would pay for per-sample norms and still release raw (clipped) sums.
  if (getClip().getMode() != ClipMode::none && isa<NoNoiseAttr>(getNoise()))
    return emitOpError("clips gradients but adds no noise: without noise "
                       "the clipped sum is released as it is, so the run is "
                       "not differentially private and the per-sample norms "
                       "buy nothing; use clip = #dp.clip<none> with noise = "
                       "#dp.none for training without DP, or add noise");
  if (std::optional<PrivacyUnitAttr> unit = getUnit();
      unit && unit->getKind() == UnitKind::user) {
    int64_t k = unit->getMaxRecords();
    // A user's k slots are one sample of the norm kernels (k T tokens), so
    // they must lie in one physical batch: k divides it.
    if (getPhysicalBatch() % k != 0)
      return emitOpError("unit: max_records = ")
             << k << " must divide the physical batch " << getPhysicalBatch()
             << ": a user's records fill k consecutive slots of one physical "
                "batch";
    if (!isa<PoissonAttr>(getSampling()))
      return emitOpError("unit: user-level DP samples users with Poisson "
                         "sampling; #dp.shuffle draws records");
    if (getClip().getMode() == ClipMode::none)
      return emitOpError("unit: user-level DP bounds each user's gradient, "
                         "which needs clipping; clip = #dp.clip<none> trains "
                         "without DP");
  }
  if (std::optional<ScheduleAttr> schedule = getSchedule();
      schedule && schedule->getWarmup() > getSteps())
    return emitOpError("schedule warms up over ")
           << schedule->getWarmup() << " steps, more than the recipe's "
           << getSteps() << ": the learning rate would never reach its peak";
  return success();
}

namespace {
/// A tensor of the forward pass, what it is and where it is defined.
struct LargestActivation {
  RankedTensorType type;
  std::string what;
  Operation *owner = nullptr;
  int64_t bytesPerSample = -1;
};
} // namespace

/// The tensor of the forward pass with the most bytes per sample: the one
/// the physical batch makes largest.
static LargestActivation findLargestActivation(ForwardOp forward) {
  LargestActivation largest;
  auto consider = [&](Value value, Operation *owner, std::string what) {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type)
      return;
    std::optional<int64_t> bytes = getNumBytes(type);
    if (bytes && *bytes > largest.bytesPerSample)
      largest = {type, std::move(what), owner, *bytes};
  };
  for (BlockArgument input : forward.getInputs())
    consider(input, forward,
             "input #" + std::to_string(input.getArgNumber()) +
                 " of the forward pass");
  for (Operation &op : forward.getBodyBlock())
    for (OpResult result : op.getResults())
      consider(result, &op,
               "result #" + std::to_string(result.getResultNumber()) + " of " +
                   op.getName().getStringRef().str());
  return largest;
}

LogicalResult RecipeOp::verifySymbolUses(SymbolTableCollection &tables) {
  auto model = tables.lookupNearestSymbolFrom<ModelOp>(*this, getModelAttr());
  if (!model)
    return emitOpError("trains unknown model ") << getModelAttr();

  // Ranks of a grid of known size (1 without a grid).
  int64_t ranks = 1;
  if (FlatSymbolRefAttr gridRef = getGridAttr()) {
    auto grid =
        tables.lookupNearestSymbolFrom<mlir::shard::GridOp>(*this, gridRef);
    if (!grid)
      return emitOpError("refers to unknown grid ")
             << gridRef << " (declare it with shard.grid)";
    // 1-D: FSDP over every rank; 2-D (replicas x shards): hybrid sharding.
    ArrayRef<int64_t> shape = grid.getShape();
    if (shape.size() != 1 && shape.size() != 2)
      return emitOpError("shards over a 1-D grid (FSDP) or a 2-D grid of "
                         "replicas x shards (hybrid sharding); ")
             << gridRef << " has shape " << shapeString(shape);
    for (int64_t size : shape)
      if (!ShapedType::isDynamic(size) && size < 1)
        return emitOpError("grid ")
               << gridRef << " has shape " << shapeString(shape)
               << ": every dimension needs at least one rank";
    ranks = 1;
    for (int64_t size : shape) {
      std::optional<int64_t> product =
          ShapedType::isDynamic(size) || ShapedType::isDynamic(ranks)
              ? std::optional<int64_t>(ShapedType::kDynamic)
              : llvm::checkedMul(ranks, size);
      if (!product)
        return emitOpError("grid ")
               << gridRef << " has shape " << shapeString(shape)
               << ", more ranks than int64 counts";
      ranks = *product;
    }
  }

  // The recipe's compute type is the model's float type: the recipe cannot
  // silently retype a model.
  ForwardOp forward = model.getForward();
  Type modelElement;
  for (auto param : model.getBody().front().getOps<ParamOp>()) {
    modelElement = param.getTensorType().getElementType();
    break;
  }
  if (std::optional<PrecisionAttr> precision = getPrecision();
      precision && modelElement && precision->getCompute() != modelElement)
    return emitOpError("computes in ")
           << precision->getCompute() << " but model @" << model.getSymName()
           << " is written in " << modelElement;

  int64_t physical = getPhysicalBatch();
  if (forward && !forward.getInputs().empty()) {
    int64_t batch =
        cast<RankedTensorType>(forward.getInputs().front().getType())
            .getDimSize(0);
    if (!ShapedType::isDynamic(batch) && batch != physical)
      return emitOpError("physical batch is ")
             << physical << " but model @" << model.getSymName()
             << " is written for batches of " << batch;
  }

  // A rank holds the activations of a whole physical batch at once: the
  // largest of them, times the batch, must fit a device.
  if (forward && physical >= 1) {
    LargestActivation largest = findLargestActivation(forward);
    if (largest.type) {
      std::optional<int64_t> bytes = getNumBytes(largest.type, physical);
      if (!bytes || *bytes > kMaxTensorBytes) {
        InFlightDiagnostic diag = emitOpError("physical_batch = ") << physical;
        if (!bytes)
          diag << " overflows int64 in the bytes of " << largest.what << " ("
               << largest.type << ")";
        else
          diag << " makes " << largest.what << " (" << largest.type << ") take "
               << formatBytes(*bytes)
               << " per rank, more than the 1 TiB that no device holds";
        diag.attachNote(largest.owner->getLoc()) << "the tensor is here";
        return diag;
      }
    }
  }
  if (!ShapedType::isDynamic(ranks) && !llvm::checkedMul(ranks, physical))
    return emitOpError("physical_batch = ")
           << physical << " on " << ranks
           << " ranks overflows int64 in the samples of one physical batch";
  if (auto shuffle = dyn_cast<ShuffleAttr>(getSampling());
      shuffle && shuffle.getBatch() < shuffle.getPhysicalBatch())
    return emitOpError("logical batch ")
           << shuffle.getBatch() << " is smaller than the physical batch "
           << shuffle.getPhysicalBatch();
  return success();
}
