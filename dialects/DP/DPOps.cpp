//===- DPOps.cpp - Models, layers and recipes -----------------------------===//

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

#include "DP/DPInterfaces.cpp.inc"

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Looks a parameter up from a layer. Fails with a located diagnostic when the
/// symbol is missing or names something other than a dp.param.
FailureOr<ParamOp> lookupParam(Operation *user, FlatSymbolRefAttr ref,
                               SymbolTableCollection &tables) {
  Operation *symbol = tables.lookupNearestSymbolFrom(user, ref.getAttr());
  if (!symbol)
    return user->emitOpError("reads unknown parameter ") << ref;
  auto param = dyn_cast<ParamOp>(symbol);
  if (!param)
    return user->emitOpError() << ref << " is not a dp.param";
  return param;
}

/// A parameter's shape must be exactly `expected`.
LogicalResult checkParamShape(Operation *user, StringRef role, ParamOp param,
                              ArrayRef<int64_t> expected) {
  ArrayRef<int64_t> actual = param.getTensorType().getShape();
  if (actual == expected)
    return success();
  return user->emitOpError()
         << role << " @" << param.getSymName() << " has shape "
         << shapeString(actual) << " but this layer needs "
         << shapeString(expected);
}

/// Layers compute in the parameter's float type: it must equal the
/// activation's.
LogicalResult checkParamElementType(Operation *user, ParamOp param,
                                    Type activationElement) {
  Type paramElement = param.getTensorType().getElementType();
  if (paramElement == activationElement)
    return success();
  return user->emitOpError()
         << "parameter @" << param.getSymName() << " is " << paramElement
         << " but the activations are " << activationElement;
}

/// Shapes that agree on every dimension but the last.
LogicalResult checkSameLeadingDims(Operation *op, Value input, Value output) {
  ArrayRef<int64_t> in = tensorType(input).getShape();
  ArrayRef<int64_t> out = tensorType(output).getShape();
  if (in.size() == out.size() && in.drop_back() == out.drop_back())
    return success();
  return op->emitOpError() << "input " << shapeString(in) << " and output "
                           << shapeString(out)
                           << " must agree on all dimensions but the last";
}

/// A normalization's eps keeps a zero row from dividing by zero. The CUDA
/// kernels add it in f32, where a value below the normal range flushes to 0
/// and one above it becomes infinite.
LogicalResult checkEps(Operation *op, double eps) {
  auto emitError = [&] { return op->emitOpError(); };
  if (failed(verifyFloatField(emitError, "eps", eps, FloatRange::above(0.0))))
    return failure();
  return verifyFloatField(emitError, "eps (added in f32)", eps,
                          FloatRange::between(FLT_MIN, false, FLT_MAX, false));
}

/// A per-sample loss is f64 for f64 models and f32 otherwise.
LogicalResult checkLossType(Operation *op, Type activationElement, Value loss,
                            int64_t batch) {
  auto lossType = tensorType(loss);
  Type expected = activationElement.isF64()
                      ? Type(Float64Type::get(op->getContext()))
                      : Type(Float32Type::get(op->getContext()));
  if (lossType.getElementType() != expected)
    return op->emitOpError() << "the per-sample loss must be " << expected
                             << ", got " << lossType.getElementType();
  if (lossType.getDimSize(0) != batch)
    return op->emitOpError()
           << "the loss has " << lossType.getDimSize(0)
           << " entries but the batch has " << batch << " samples";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

ForwardOp ModelOp::getForward() {
  for (Operation &op : getBody().front())
    if (auto forward = dyn_cast<ForwardOp>(op))
      return forward;
  return nullptr;
}

LogicalResult ModelOp::verifyRegions() {
  ForwardOp forward;
  StepOp step;
  for (Operation &op : getBody().front()) {
    if (isa<ParamOp, UnitOp>(op))
      continue;
    if (auto s = dyn_cast<StepOp>(op)) {
      if (step)
        return s.emitOpError("a model has one training step");
      step = s;
      continue;
    }
    if (auto f = dyn_cast<ForwardOp>(op)) {
      if (forward)
        return f.emitOpError("a model has one forward pass; the first is at ")
               << forward.getLoc();
      forward = f;
      continue;
    }
    return op.emitOpError("cannot appear in a dp.model, which holds only "
                          "dp.param and dp.forward (and dp.step and dp.unit "
                          "after the passes)");
  }
  if (!forward)
    return emitOpError("has no dp.forward");

  // Every parameter is read by exactly one layer, except a token embedding
  // table that one dp.linear also reads as its weight (tied input and output
  // embeddings). Its per-sample gradient is the sum of the two uses'
  // gradients, whose norm dp-clip-plan forms with their cross term; any
  // other sharing would be clipped wrong, so it is refused.
  llvm::MapVector<StringAttr, SmallVector<Operation *, 2>> readers;
  forward.walk([&](ParamUserOpInterface user) {
    for (FlatSymbolRefAttr ref : user.getParamRefs())
      readers[ref.getAttr()].push_back(user);
  });
  for (auto &[name, users] : readers) {
    if (users.size() == 1)
      continue;
    auto refName = FlatSymbolRefAttr::get(name);
    auto embedding = dyn_cast<EmbeddingOp>(users[0]);
    auto linear = dyn_cast<LinearOp>(users[1]);
    if (!embedding || !linear)
      std::tie(embedding, linear) = std::make_pair(
          dyn_cast<EmbeddingOp>(users[1]), dyn_cast<LinearOp>(users[0]));
    StringRef why;
    if (users.size() > 2)
      why = "which two other layers already read";
    else if (users[0] == users[1])
      why = "twice";
    else if (!embedding || !linear)
      why = "which another layer already reads";
    else if (linear.getWeightAttr().getAttr() != name)
      why = "as a bias, which the embedding already reads";
    if (why.empty())
      continue;
    Operation *extra = users[users.size() > 2 ? 2 : 1];
    InFlightDiagnostic diag =
        extra->emitOpError()
        << "reads parameter " << refName << " " << why
        << "; a parameter may be shared only as the table of one dp.embedding "
           "that is also the weight of one dp.linear (tied input and output "
           "embeddings)";
    diag.attachNote(users[0]->getLoc()) << "first read here";
    return diag;
  }

  Type paramElement;
  for (auto param : getBody().front().getOps<ParamOp>()) {
    if (!readers.count(param.getSymNameAttr()))
      return param.emitOpError("parameter @")
             << param.getSymName() << " is never read by the forward pass";
    Type element = param.getTensorType().getElementType();
    if (!paramElement) {
      paramElement = element;
    } else if (element != paramElement) {
      return param.emitOpError("parameter @")
             << param.getSymName() << " is " << element
             << " but the model's other parameters are " << paramElement
             << "; one model computes in one float type";
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ParamOp
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  RankedTensorType type = getTensorType();
  if (!isa<FloatType>(type.getElementType()))
    return emitOpError("parameters are float tensors, got ") << type;
  std::optional<int64_t> bytes = getNumBytes(type);
  if (!bytes)
    return emitOpError("parameter @")
           << getSymName() << " of shape " << shapeString(type.getShape())
           << " has more bytes than int64 counts";
  if (*bytes == 0)
    return emitOpError("parameter has no elements");
  if (*bytes > kMaxTensorBytes)
    return emitOpError("parameter @")
           << getSymName() << " of shape " << shapeString(type.getShape())
           << " takes " << formatBytes(*bytes)
           << ", more than the 1 TiB that no device holds";
  if (std::optional<Attribute> init = getInit()) {
    if (!isa<NormalInitAttr, UniformInitAttr, ZerosInitAttr, OnesInitAttr,
             DiagonalInitAttr>(*init))
      return emitOpError("init must be #dp.normal, #dp.uniform, #dp.zeros, "
                         "#dp.ones or #dp.diagonal, got ")
             << *init;
    if (isa<DiagonalInitAttr>(*init) &&
        (type.getRank() != 2 || type.getDimSize(0) != type.getDimSize(1)))
      return emitOpError("#dp.diagonal initializes a square matrix, not ")
             << type;
  }
  if (std::optional<StringRef> unit = getUnit(); unit && unit->empty())
    return emitOpError("unit name must not be empty");
  return success();
}

//===----------------------------------------------------------------------===//
// ForwardOp
//===----------------------------------------------------------------------===//

/// `(%a: T, ...) -> R attributes {...} { body }`, shared by dp.forward and
/// dp.step.
static ParseResult parseBatchFunction(OpAsmParser &parser,
                                      OperationState &result,
                                      StringAttr functionTypeName) {
  SmallVector<OpAsmParser::Argument> arguments;
  SmallVector<Type> resultTypes;
  if (parser.parseArgumentList(arguments, OpAsmParser::Delimiter::Paren,
                               /*allowType=*/true) ||
      parser.parseArrowTypeList(resultTypes) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  SmallVector<Type> inputTypes;
  for (OpAsmParser::Argument &argument : arguments)
    inputTypes.push_back(argument.type);
  result.addAttribute(functionTypeName,
                      TypeAttr::get(parser.getBuilder().getFunctionType(
                          inputTypes, resultTypes)));
  Region *body = result.addRegion();
  return parser.parseRegion(*body, arguments);
}

static void printBatchFunction(OpAsmPrinter &p, Operation *op,
                               FunctionType type, StringAttr functionTypeName) {
  Block &body = op->getRegion(0).front();
  p << "(";
  llvm::interleaveComma(body.getArguments(), p, [&](BlockArgument argument) {
    p.printRegionArgument(argument);
  });
  p << ") -> ";
  ArrayRef<Type> results = type.getResults();
  if (results.size() == 1)
    p << results.front();
  else
    p << "(" << results << ")";
  p.printOptionalAttrDictWithKeyword(op->getAttrs(), {functionTypeName});
  p << " ";
  p.printRegion(op->getRegion(0), /*printEntryBlockArgs=*/false);
}

ParseResult ForwardOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseBatchFunction(parser, result,
                            getFunctionTypeAttrName(result.name));
}

void ForwardOp::print(OpAsmPrinter &p) {
  printBatchFunction(p, *this, getFunctionType(), getFunctionTypeAttrName());
}

ParseResult StepOp::parse(OpAsmParser &parser, OperationState &result) {
  return parseBatchFunction(parser, result,
                            getFunctionTypeAttrName(result.name));
}

void StepOp::print(OpAsmPrinter &p) {
  printBatchFunction(p, *this, getFunctionType(), getFunctionTypeAttrName());
}

LogicalResult ForwardOp::verifyRegions() {
  FunctionType type = getFunctionType();
  Block &body = getBodyBlock();
  if (body.getArgumentTypes() != type.getInputs())
    return emitOpError("block arguments do not match the function type");
  if (body.getNumArguments() == 0)
    return emitOpError("needs at least one input");
  if (type.getNumResults() != 1)
    return emitOpError("returns exactly one value, the per-sample loss");
  auto lossType = dyn_cast<RankedTensorType>(type.getResult(0));
  if (!lossType || lossType.getRank() != 1 ||
      !isa<FloatType>(lossType.getElementType()))
    return emitOpError("must return a 1-D float tensor (one loss per "
                       "sample), got ")
           << type.getResult(0);

  auto terminator = dyn_cast<ReturnOp>(body.getTerminator());
  if (!terminator)
    return emitOpError("must end with dp.return");
  if (terminator.getOperandTypes() != type.getResults())
    return terminator.emitOpError("returns ")
           << terminator.getOperandTypes()
           << " but the forward pass is declared to return "
           << type.getResults();

  // The leading dimension of every tensor is the sample dimension and is the
  // same throughout: a layer that mixed samples would break the per-sample
  // gradient that clipping bounds. The other dimensions are the shape of one
  // sample: static, not empty, and small enough to hold.
  int64_t batch = lossType.getDimSize(0);
  auto checkBatch = [&](Operation *where, Value value,
                        StringRef what) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    if (!tensor || tensor.getRank() == 0)
      return where->emitOpError() << what << " must be a ranked tensor with "
                                  << "a leading sample dimension";
    auto dim = [](int64_t d) {
      return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
    };
    if (tensor.getDimSize(0) != batch)
      return where->emitOpError()
             << what << " has " << dim(tensor.getDimSize(0))
             << " samples in its leading dimension but the forward pass has "
             << dim(batch);
    std::string shape = shapeString(tensor.getShape());
    for (auto [index, size] : llvm::enumerate(tensor.getShape())) {
      if (index > 0 && ShapedType::isDynamic(size))
        return where->emitOpError()
               << what << " of shape " << shape << " has a dynamic dimension #"
               << index << "; only the leading (sample) dimension may be '?'";
      if (size == 0)
        return where->emitOpError()
               << what << " of shape " << shape
               << " has a dimension of size 0: it holds nothing";
    }
    std::optional<int64_t> bytes = getNumBytes(tensor);
    StringRef perSample =
        ShapedType::isDynamic(batch) ? " per sample" : " in all";
    if (!bytes)
      return where->emitOpError()
             << what << " of shape " << shape << " has more bytes" << perSample
             << " than int64 counts";
    if (*bytes > kMaxTensorBytes)
      return where->emitOpError()
             << what << " of shape " << shape << " takes "
             << formatBytes(*bytes) << perSample
             << ", more than the 1 TiB that no device holds";
    return success();
  };
  for (BlockArgument argument : body.getArguments())
    if (failed(checkBatch(*this, argument,
                          "input #" + std::to_string(argument.getArgNumber()))))
      return failure();
  for (Operation &op : body) {
    if (op.getDialect() != getOperation()->getDialect() ||
        isa<ModelOp, ParamOp, ForwardOp, RecipeOp>(op))
      return op.emitOpError("is not a layer; dp.forward holds only dp layers");
    for (OpResult result : op.getResults())
      if (failed(checkBatch(&op, result,
                            "result #" +
                                std::to_string(result.getResultNumber()))))
        return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Layers with parameters
//===----------------------------------------------------------------------===//

SmallVector<FlatSymbolRefAttr, 2> EmbeddingOp::getParamRefs() {
  return {getTableAttr()};
}

LogicalResult EmbeddingOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParamOp> table = lookupParam(*this, getTableAttr(), tables);
  if (failed(table))
    return failure();
  RankedTensorType tableType = table->getTensorType();
  if (tableType.getRank() != 2)
    return emitOpError("table @")
           << table->getSymName() << " must be 2-D (vocabulary x width), got "
           << shapeString(tableType.getShape());
  SmallVector<int64_t> expected(getTokens().getType().getShape());
  expected.push_back(tableType.getDimSize(1));
  if (getOutput().getType().getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("output shape ")
           << shapeString(getOutput().getType().getShape())
           << " must be the token shape followed by the table width, "
           << shapeString(expected);
  return checkParamElementType(*this, *table,
                               getOutput().getType().getElementType());
}

SmallVector<FlatSymbolRefAttr, 2> LinearOp::getParamRefs() {
  SmallVector<FlatSymbolRefAttr, 2> refs{getWeightAttr()};
  if (FlatSymbolRefAttr bias = getBiasAttr())
    refs.push_back(bias);
  return refs;
}

LogicalResult LinearOp::verify() {
  int64_t rank = getInput().getType().getRank();
  if (rank != 2 && rank != 3)
    return emitOpError("input must be samples x features or samples x "
                       "tokens x features, got rank ")
           << rank;
  if (getInput().getType().getElementType() !=
      getOutput().getType().getElementType())
    return emitOpError("input and output element types differ");
  return checkSameLeadingDims(*this, getInput(), getOutput());
}

LogicalResult LinearOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParamOp> weight = lookupParam(*this, getWeightAttr(), tables);
  if (failed(weight))
    return failure();
  int64_t in = getInput().getType().getShape().back();
  int64_t out = getOutput().getType().getShape().back();
  Type element = getInput().getType().getElementType();
  if (failed(checkParamShape(*this, "weight", *weight, {out, in})) ||
      failed(checkParamElementType(*this, *weight, element)))
    return failure();
  if (FlatSymbolRefAttr biasRef = getBiasAttr()) {
    FailureOr<ParamOp> bias = lookupParam(*this, biasRef, tables);
    if (failed(bias) || failed(checkParamShape(*this, "bias", *bias, {out})) ||
        failed(checkParamElementType(*this, *bias, element)))
      return failure();
  }
  return success();
}

/// Normalization scales and biases are vectors over the last dimension.
static LogicalResult verifyNormParams(Operation *op, Value input,
                                      FlatSymbolRefAttr scaleRef,
                                      FlatSymbolRefAttr biasRef,
                                      SymbolTableCollection &tables) {
  int64_t width = tensorType(input).getShape().back();
  Type element = tensorType(input).getElementType();
  for (auto [role, ref] :
       {std::pair<StringRef, FlatSymbolRefAttr>{"scale", scaleRef},
        {"bias", biasRef}}) {
    if (!ref)
      continue;
    FailureOr<ParamOp> param = lookupParam(op, ref, tables);
    if (failed(param) || failed(checkParamShape(op, role, *param, {width})) ||
        failed(checkParamElementType(op, *param, element)))
      return failure();
  }
  return success();
}

SmallVector<FlatSymbolRefAttr, 2> RMSNormOp::getParamRefs() {
  return {getScaleAttr()};
}

LogicalResult RMSNormOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("input needs a sample and a feature dimension");
  return checkEps(*this, getEps().convertToDouble());
}

LogicalResult RMSNormOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyNormParams(*this, getInput(), getScaleAttr(), nullptr, tables);
}

SmallVector<FlatSymbolRefAttr, 2> LayerNormOp::getParamRefs() {
  SmallVector<FlatSymbolRefAttr, 2> refs{getScaleAttr()};
  if (FlatSymbolRefAttr bias = getBiasAttr())
    refs.push_back(bias);
  return refs;
}

LogicalResult LayerNormOp::verify() {
  if (getInput().getType().getRank() < 2)
    return emitOpError("input needs a sample and a feature dimension");
  return checkEps(*this, getEps().convertToDouble());
}

LogicalResult LayerNormOp::verifySymbolUses(SymbolTableCollection &tables) {
  return verifyNormParams(*this, getInput(), getScaleAttr(), getBiasAttr(),
                          tables);
}

SmallVector<FlatSymbolRefAttr, 2> PositionEmbeddingOp::getParamRefs() {
  return {getTableAttr()};
}

LogicalResult PositionEmbeddingOp::verify() {
  if (getInput().getType().getRank() != 3)
    return emitOpError("input must be samples x tokens x features, got rank ")
           << getInput().getType().getRank();
  return success();
}

LogicalResult
PositionEmbeddingOp::verifySymbolUses(SymbolTableCollection &tables) {
  FailureOr<ParamOp> table = lookupParam(*this, getTableAttr(), tables);
  if (failed(table))
    return failure();
  ArrayRef<int64_t> shape = table->getTensorType().getShape();
  int64_t tokens = getInput().getType().getDimSize(1);
  int64_t width = getInput().getType().getDimSize(2);
  if (shape.size() != 2 || shape[1] != width)
    return emitOpError("table @")
           << table->getSymName() << " has shape " << shapeString(shape)
           << " but this layer needs positions x " << width;
  if (shape[0] < tokens)
    return emitOpError("table @")
           << table->getSymName() << " holds " << shape[0]
           << " positions but a sample has " << tokens << " tokens";
  return checkParamElementType(*this, *table,
                               getInput().getType().getElementType());
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  RankedTensorType q = getQuery().getType(), k = getKey().getType();
  if (q.getRank() != 3 || k.getRank() != 3)
    return emitOpError("query and key must be samples x tokens x features");
  if (q.getShape().drop_back() != k.getShape().drop_back())
    return emitOpError("query ") << shapeString(q.getShape()) << " and key "
                                 << shapeString(k.getShape())
                                 << " must have the same samples and tokens";
  if (q.getElementType() != k.getElementType())
    return emitOpError("query and key element types differ");
  // The head geometry below divides the widths: they must be known.
  if (q.isDynamicDim(2) || k.isDynamicDim(2))
    return emitOpError("query ")
           << shapeString(q.getShape()) << " and key "
           << shapeString(k.getShape()) << " need static widths";
  int64_t heads = getHeads(), kvHeads = getNumKVHeads();
  int64_t width = q.getShape().back();
  if (width % heads != 0)
    return emitOpError("query width ")
           << width << " is not divisible by " << heads << " heads";
  if (heads % kvHeads != 0)
    return emitOpError() << heads << " query heads cannot be grouped over "
                         << kvHeads << " key/value heads";
  int64_t headDim = width / heads;
  if (k.getShape().back() != kvHeads * headDim)
    return emitOpError("key width ")
           << k.getShape().back()
           << " must be kv_heads x head size = " << kvHeads << " x " << headDim;
  if (getRope() && headDim % 2 != 0)
    return emitOpError("rotary embedding needs an even head size, got ")
           << headDim;
  if (getRopeScalingAttr() && !getRope())
    return emitOpError("has rope_scaling but no rotary embedding (rope)");
  return verifyFloatField([&] { return emitOpError(); }, "rope_theta",
                          getRopeTheta().convertToDouble(),
                          FloatRange::above(0.0));
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  RankedTensorType logits = getLogits().getType();
  RankedTensorType targets = getTargets().getType();
  if (logits.getRank() != 2 && logits.getRank() != 3)
    return emitOpError("logits must be samples x classes or samples x "
                       "tokens x vocabulary");
  if (targets.getShape() != logits.getShape().drop_back())
    return emitOpError("targets ")
           << shapeString(targets.getShape()) << " must match the logits "
           << shapeString(logits.getShape()) << " without their last dimension";
  // An ignore_index no target can hold would silently ignore nothing.
  if (std::optional<int64_t> ignore = getIgnoreIndex();
      ignore && targets.getElementType().isInteger(32) &&
      (*ignore < std::numeric_limits<int32_t>::min() ||
       *ignore > std::numeric_limits<int32_t>::max()))
    return emitOpError("ignore_index ")
           << *ignore << " is outside the range of the i32 targets";
  return checkLossType(*this, logits.getElementType(), getLoss(),
                       logits.getDimSize(0));
}

LogicalResult MSEOp::verify() {
  RankedTensorType prediction = getPrediction().getType();
  if (prediction.getRank() < 2)
    return emitOpError("prediction needs a sample and a feature dimension");
  return checkLossType(*this, prediction.getElementType(), getLoss(),
                       prediction.getDimSize(0));
}

#define GET_OP_CLASSES
#include "DP/DPOps.cpp.inc"
