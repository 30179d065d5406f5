//===- ModelWriter.h - Builds a dp.model layer by layer ---------*- C++ -*-===//
//
// The family importers describe a model as parameters (each with the
// checkpoint tensor it comes from) and layers on activations of shape
// ? x T x width; this writer turns that into a dp.model with the dialect's
// builders. Parameters appear in the order they are declared.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_IMPORTERS_HUGGINGFACE_MODELWRITER_H
#define DPC_IMPORTERS_HUGGINGFACE_MODELWRITER_H

#include "DP/DPOps.h"

#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace dpc::hf {

/// Where a dp.param's values are in a Hugging Face checkpoint.
struct CheckpointTensor {
  /// The tensor's name in model.safetensors (`hf.name`).
  std::string name;
  /// The checkpoint stores [in, out] (GPT-2's Conv1D) where dp has [out, in]
  /// (`hf.transposed`).
  bool transposed = false;
  /// Rows [first, last) of the tensor, after transposition, when one
  /// checkpoint tensor holds several dp parameters (`hf.rows`).
  std::optional<std::pair<int64_t, int64_t>> rows;
};

enum class Activation { Relu, Silu, GeluErf, GeluTanh };

/// How each parameter starts when no checkpoint is loaded.
enum class Init { Normal, Ones, Zeros };

class ModelWriter {
public:
  /// Starts `dp.model @name` whose forward pass maps tokens ? x seq to a loss
  /// per sample, computing in `element`.
  ModelWriter(mlir::ModuleOp module, llvm::StringRef name, mlir::Type element,
              int64_t seq, double initStd);

  /// Declares a parameter read by one of the layers below.
  mlir::FlatSymbolRefAttr param(llvm::StringRef name,
                                llvm::ArrayRef<int64_t> shape, Init init,
                                CheckpointTensor source);

  mlir::Value tokens() const { return tokenInput; }
  mlir::Value embedding(mlir::FlatSymbolRefAttr table, int64_t width);
  /// x + table[t] for the position t of each token (learned positions).
  mlir::Value positionEmbedding(mlir::FlatSymbolRefAttr table, mlir::Value x);
  /// `bias` may be null.
  mlir::Value linear(mlir::FlatSymbolRefAttr weight,
                     mlir::FlatSymbolRefAttr bias, mlir::Value x, int64_t out);
  mlir::Value rmsNorm(mlir::FlatSymbolRefAttr scale, mlir::Value x, double eps);
  /// `bias` may be null.
  mlir::Value layerNorm(mlir::FlatSymbolRefAttr scale,
                        mlir::FlatSymbolRefAttr bias, mlir::Value x,
                        double eps);
  /// Causal attention; rotary embedding with base `ropeTheta` when given,
  /// its frequencies scaled by `ropeScaling` (e.g. #dp.rope_llama3) when
  /// that is not null.
  mlir::Value attention(mlir::Value q, mlir::Value k, mlir::Value v,
                        int64_t heads, int64_t kvHeads,
                        std::optional<double> ropeTheta,
                        mlir::Attribute ropeScaling = {});
  mlir::Value activation(Activation kind, mlir::Value x);
  mlir::Value add(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  /// Ends the forward pass with the mean next-token cross-entropy of each
  /// sample (targets -1 are padding).
  void crossEntropy(mlir::Value logits);

  dp::ModelOp model() const { return modelOp; }

private:
  mlir::RankedTensorType activationType(int64_t width) const;

  mlir::OpBuilder builder;
  mlir::Location loc;
  mlir::Type element;
  int64_t seq;
  double initStd;
  dp::ModelOp modelOp;
  dp::ForwardOp forward;
  mlir::Value tokenInput, targetInput;
};

} // namespace dpc::hf

#endif // DPC_IMPORTERS_HUGGINGFACE_MODELWRITER_H
