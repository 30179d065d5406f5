//===- dpc-import-hf.cpp - A Hugging Face checkpoint to a dp model --------===//
//
//   dpc-import-hf DIR -o model.mlir [--seq T] [--batch P] [--dtype
//   bf16|f32|f64] [--lora R[:ALPHA] [--lora-targets q_proj,v_proj,...]]
//
// Reads DIR/config.json and writes the dp model with a default recipe;
// with --lora the recipe adds peft-style LoRA adapters (#dp.lora).
// Exit status: 0 on success; 2 when the config asks for what the importer
// cannot honour or is malformed (one line per problem, each naming the field
// and its value); 1 for usage and file errors.
//
//===----------------------------------------------------------------------===//

#include "DP/DPDialect.h"
#include "importers/HuggingFace/HuggingFace.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("dpc-import-hf options");
static cl::opt<std::string> inputDir(cl::Positional,
                                     cl::desc("<checkpoint directory>"),
                                     cl::Required, cl::cat(category));
static cl::opt<std::string> outputFile("o",
                                       cl::desc("Output file (default: -)"),
                                       cl::value_desc("model.mlir"),
                                       cl::init("-"), cl::cat(category));
static cl::opt<int64_t>
    seqOpt("seq",
           cl::desc("Tokens per sample (default: max_position_embeddings, at "
                    "most 1024)"),
           cl::init(0), cl::cat(category));
static cl::opt<int64_t>
    batchOpt("batch",
             cl::desc("Samples per rank and physical batch (default 8)"),
             cl::init(8), cl::cat(category));
static cl::opt<std::string>
    dtypeOpt("dtype",
             cl::desc("bf16, f32 or f64 (default: the checkpoint's dtype)"),
             cl::init(""), cl::cat(category));

static cl::opt<std::string>
    loraOpt("lora",
            cl::desc("Add LoRA adapters of rank R to the recipe, scaled by "
                     "ALPHA / R (default ALPHA = R)"),
            cl::value_desc("R[:ALPHA]"), cl::init(""), cl::cat(category));
static cl::list<std::string>
    loraTargetsOpt("lora-targets",
                   cl::desc("Hugging Face modules that get adapters (default "
                            "q_proj,v_proj)"),
                   cl::value_desc("q_proj,v_proj,..."), cl::CommaSeparated,
                   cl::cat(category));

/// `--lora R[:ALPHA]`, or a message naming the option.
static std::optional<dpc::hf::ImportOptions::LoRA>
parseLoRA(llvm::StringRef text, std::string &error) {
  auto [rankText, alphaText] = text.split(':');
  dpc::hf::ImportOptions::LoRA lora;
  if (rankText.getAsInteger(10, lora.rank) || lora.rank <= 0) {
    error = "--lora: the rank must be a positive integer, not '" +
            rankText.str() + "'";
    return std::nullopt;
  }
  lora.alpha = double(lora.rank);
  if (text.contains(':') &&
      (alphaText.getAsDouble(lora.alpha) || !(lora.alpha > 0))) {
    error = "--lora: alpha must be a positive number, not '" + alphaText.str() +
            "'";
    return std::nullopt;
  }
  return lora;
}

static int fail(const llvm::Twine &message) {
  llvm::errs() << "dpc-import-hf: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "dpc-import-hf: a Hugging Face checkpoint's config.json to a dp model\n\n"
      "  dpc-import-hf DIR -o model.mlir [--seq T] [--batch P] "
      "[--dtype bf16|f32|f64]\n"
      "                [--lora R[:ALPHA] [--lora-targets q_proj,v_proj]]\n\n"
      "Exit status 2: the config asks for what the importer cannot honour "
      "or is malformed.\n");

  llvm::SmallString<256> configPath(inputDir);
  llvm::sys::path::append(configPath, "config.json");
  auto buffer = llvm::MemoryBuffer::getFile(configPath);
  if (!buffer)
    return fail("cannot read " + configPath + ": " +
                buffer.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::errs() << "dpc-import-hf: error: " << configPath
                 << ": not valid JSON: " << llvm::toString(json.takeError())
                 << "\n";
    return 2;
  }

  dpc::hf::ImportOptions options;
  if (seqOpt.getNumOccurrences())
    options.seq = seqOpt;
  options.batch = batchOpt;
  if (dtypeOpt.getNumOccurrences())
    options.dtype = dtypeOpt;
  if (loraTargetsOpt.getNumOccurrences() && !loraOpt.getNumOccurrences()) {
    llvm::errs() << "dpc-import-hf: error: --lora-targets needs --lora\n";
    return 2;
  }
  if (loraOpt.getNumOccurrences()) {
    std::string error;
    options.lora = parseLoRA(loraOpt, error);
    if (!options.lora) {
      llvm::errs() << "dpc-import-hf: error: " << error << "\n";
      return 2;
    }
    options.lora->targets.assign(loraTargetsOpt.begin(), loraTargetsOpt.end());
    if (!loraTargetsOpt.getNumOccurrences())
      options.lora->targets = {"q_proj", "v_proj"};
  }

  DialectRegistry registry;
  registry.insert<dpc::dp::DPDialect, shard::ShardDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  dpc::hf::ImportErrors errors;
  OwningOpRef<ModuleOp> module =
      dpc::hf::importConfig(context, *json, options, errors);
  if (!module) {
    for (const std::string &error : errors)
      llvm::errs() << "dpc-import-hf: error: " << configPath << ": " << error
                   << "\n";
    return 2;
  }

  std::string error;
  auto out = openOutputFile(outputFile, &error);
  if (!out)
    return fail(error);
  dpc::hf::printImportedModule(*module, configPath, out->os());
  out->keep();
  return 0;
}
