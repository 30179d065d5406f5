//===- DPBase.td - The dp dialect ----------------------------*- tablegen -*-===//
//
// The `dp` dialect describes a model at the level of layers, its parameters,
// and the differentially private training recipe that trains it.
//
//===----------------------------------------------------------------------===//

#ifndef DP_BASE_TD
#define DP_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/CommonTypeConstraints.td"

def DP_Dialect : Dialect {
  let name = "dp";
  let cppNamespace = "::dpc::dp";
  let summary = "Layer-level models and DP-SGD training recipes";
  let description = [{
    A `dp.model` holds the parameters of a model (`dp.param`) and one
    `dp.forward` region that maps a physical batch of samples to one loss per
    sample. The leading dimension of every activation is the sample
    dimension: a sample is the privacy unit, and every per-sample gradient is
    clipped on its own.

    A `dp.recipe` names a model and says how to train it with DP-SGD:
    clipping, noise (a noise multiplier or a target epsilon), sampling,
    optimizer, number of steps, precision and the FSDP sharding policy over
    an upstream `shard.grid`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class DP_Op<string mnemonic, list<Trait> traits = []>
    : Op<DP_Dialect, mnemonic, traits>;

class DP_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<DP_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

// Activations are ranked float tensors whose leading dimension is the sample.
def DP_Activation : RankedTensorOf<[AnyFloat]>;
def DP_TokenTensor : RankedTensorOf<[I32, I64]>;
def DP_PerSampleLoss : 1DTensorOf<[F32, F64]>;

#endif // DP_BASE_TD
