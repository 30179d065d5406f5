//===- ModelWriter.cpp - Builds a dp.model layer by layer -----------------===//

#include "ModelWriter.h"

using namespace mlir;
using namespace dpc;
using namespace dpc::hf;

ModelWriter::ModelWriter(ModuleOp module, StringRef name, Type element,
                         int64_t seq, double initStd)
    : builder(module.getContext()), loc(module.getLoc()), element(element),
      seq(seq), initStd(initStd) {
  builder.setInsertionPointToEnd(module.getBody());
  modelOp = dp::ModelOp::create(builder, loc, name);
  Block *body = builder.createBlock(&modelOp.getBody());

  MLIRContext *ctx = module.getContext();
  auto tokenType = RankedTensorType::get({ShapedType::kDynamic, seq},
                                         IntegerType::get(ctx, 32));
  // A per-sample loss is f64 for f64 models and f32 otherwise.
  Type lossElement = element.isF64() ? element : Float32Type::get(ctx);
  auto lossType = RankedTensorType::get({ShapedType::kDynamic}, lossElement);
  builder.setInsertionPointToEnd(body);
  forward = dp::ForwardOp::create(
      builder, loc, builder.getFunctionType({tokenType, tokenType}, lossType));
  Block *forwardBody = builder.createBlock(&forward.getBody());
  tokenInput = forwardBody->addArgument(tokenType, loc);
  targetInput = forwardBody->addArgument(tokenType, loc);
}

RankedTensorType ModelWriter::activationType(int64_t width) const {
  return RankedTensorType::get({ShapedType::kDynamic, seq, width}, element);
}

FlatSymbolRefAttr ModelWriter::param(StringRef name, ArrayRef<int64_t> shape,
                                     Init init, CheckpointTensor source) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(forward);
  Attribute initAttr;
  switch (init) {
  case Init::Normal:
    initAttr = dp::NormalInitAttr::get(builder.getContext(), APFloat(initStd));
    break;
  case Init::Ones:
    initAttr = dp::OnesInitAttr::get(builder.getContext());
    break;
  case Init::Zeros:
    initAttr = dp::ZerosInitAttr::get(builder.getContext());
    break;
  }
  auto param = dp::ParamOp::create(builder, loc, name,
                                   RankedTensorType::get(shape, element),
                                   initAttr, /*trainable=*/true,
                                   /*unit=*/StringAttr());
  param->setAttr("hf.name", builder.getStringAttr(source.name));
  if (source.transposed)
    param->setAttr("hf.transposed", builder.getUnitAttr());
  if (source.rows)
    param->setAttr("hf.rows", builder.getDenseI64ArrayAttr(
                                  {source.rows->first, source.rows->second}));
  return FlatSymbolRefAttr::get(param.getSymNameAttr());
}

Value ModelWriter::embedding(FlatSymbolRefAttr table, int64_t width) {
  builder.setInsertionPointToEnd(&forward.getBodyBlock());
  return dp::EmbeddingOp::create(builder, loc, activationType(width), table,
                                 tokenInput);
}

Value ModelWriter::positionEmbedding(FlatSymbolRefAttr table, Value x) {
  return dp::PositionEmbeddingOp::create(builder, loc, table, x);
}

Value ModelWriter::linear(FlatSymbolRefAttr weight, FlatSymbolRefAttr bias,
                          Value x, int64_t out) {
  return dp::LinearOp::create(builder, loc, activationType(out), weight, bias,
                              x, Value());
}

Value ModelWriter::rmsNorm(FlatSymbolRefAttr scale, Value x, double eps) {
  return dp::RMSNormOp::create(builder, loc, scale, x,
                               builder.getF64FloatAttr(eps));
}

Value ModelWriter::layerNorm(FlatSymbolRefAttr scale, FlatSymbolRefAttr bias,
                             Value x, double eps) {
  return dp::LayerNormOp::create(builder, loc, scale, bias, x,
                                 builder.getF64FloatAttr(eps));
}

Value ModelWriter::attention(Value q, Value k, Value v, int64_t heads,
                             int64_t kvHeads, std::optional<double> ropeTheta,
                             Attribute ropeScaling) {
  return dp::AttentionOp::create(
      builder, loc, q, k, v, builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(kvHeads), builder.getUnitAttr(),
      ropeTheta ? builder.getUnitAttr() : UnitAttr(),
      builder.getF64FloatAttr(ropeTheta.value_or(10000.0)), ropeScaling);
}

Value ModelWriter::activation(Activation kind, Value x) {
  switch (kind) {
  case Activation::Relu:
    return dp::ReluOp::create(builder, loc, x);
  case Activation::Silu:
    return dp::SiluOp::create(builder, loc, x);
  case Activation::GeluErf:
    return dp::GeluOp::create(builder, loc, x, dp::GeluApproximation::erf);
  case Activation::GeluTanh:
    return dp::GeluOp::create(builder, loc, x, dp::GeluApproximation::tanh);
  }
  llvm_unreachable("unknown activation");
}

Value ModelWriter::add(Value a, Value b) {
  return dp::AddOp::create(builder, loc, a, b);
}

Value ModelWriter::mul(Value a, Value b) {
  return dp::MulOp::create(builder, loc, a, b);
}

void ModelWriter::crossEntropy(Value logits) {
  Type lossType = forward.getFunctionType().getResult(0);
  Value loss = dp::CrossEntropyOp::create(builder, loc, lossType, logits,
                                          targetInput, dp::LossReduction::mean,
                                          builder.getI64IntegerAttr(-1));
  dp::ReturnOp::create(builder, loc, ValueRange{loss});
}
