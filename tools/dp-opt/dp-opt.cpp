//===- dp-opt.cpp - The DPC pass driver -----------------------------------===//
//
// Like mlir-opt, for the dp dialect and DPC's passes.
//
//===----------------------------------------------------------------------===//

#include "DP/DPDialect.h"
#include "DPRT/DPRTDialect.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  dpc::registerDPCPasses();
  dpc::registerPipelines();
  mlir::DialectRegistry registry;
  registry.insert<dpc::dp::DPDialect, dpc::rt::DPRTDialect,
                  mlir::shard::ShardDialect, mlir::emitc::EmitCDialect>();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "DPC pass driver: dp dialect models and DP-SGD recipes\n",
      registry));
}
