//===- dpc-export.cpp - A DPC checkpoint as a Hugging Face folder ---------===//
//
// dpc-export CKPT_DIR --like HF_DIR -o OUT [--merged] [--dtype bf16|f32]
//                     [--shard-size BYTES]
//
// Writes the parameters of a DPC checkpoint (a step-... directory, or a
// --save directory whose `latest` names one) as a Hugging Face folder that
// transformers loads: what a training program's --export writes at the end
// of a run, from a checkpoint offline (runtime/driver/HfWeights.h,
// docs/huggingface.md). The checkpoint records where each parameter goes
// (its model was imported with dpc import-hf); HF_DIR gives config.json and
// the tokenizer files. A checkpoint of a program with LoRA is written as a
// peft adapter, or with --merged as the model with the adapters merged into
// their weights (docs/lora.md). Exit status: 0 written, 1 I/O failure, 2 usage
// error or a checkpoint or folder that does not fit.
//
//===----------------------------------------------------------------------===//

#include "CheckpointParams.h"
#include "HfWeights.h"
#include "Options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace dprt;
using namespace dprt::driver;

namespace {

const char *const kUsage =
    R"(usage: dpc export CKPT_DIR --like HF_DIR -o OUT [options]

Writes the parameters of a DPC checkpoint as a Hugging Face folder: OUT gets
config.json and the tokenizer files of HF_DIR and the weights under their
Hugging Face names (model.safetensors, sharded with
model.safetensors.index.json above --shard-size). The checkpoint's model must
have been imported with dpc import-hf. OUT is written atomically and must
not exist (or be empty). A checkpoint of a program with LoRA (#dp.lora) is
written as a peft adapter (adapter_config.json, adapter_model.safetensors and
the tokenizer files), or with --merged as the model with W + (alpha/r) B A in
place of each adapted weight.

options:
  --like HF_DIR       the folder the model was imported from (required)
  -o OUT              the folder to write (required)
  --merged            LoRA: write the merged model, not the adapter
  --dtype bf16|f32    the stored type (default: the run's compute type,
                      bf16 for bf16 models, f32 otherwise; f32 for an
                      adapter)
  --shard-size BYTES  largest shard (default 5e9)
  -h, --help          this text
)";

int64_t parseBytes(const std::string &text) {
  char *end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE ||
      !std::isfinite(value) || value < 1 || value != std::floor(value) ||
      value >= 9.2e18)
    throw UsageError("option --shard-size needs a whole number of bytes >= 1, "
                     "got '" +
                     text + "'");
  return static_cast<int64_t>(value);
}

} // namespace

int main(int argc, char **argv) {
  try {
    std::string checkpoint;
    HfExportOptions options;
    std::string dtype;
    bool merged = false;
    std::vector<std::string> args(argv + 1, argv + argc);
    for (size_t i = 0; i < args.size(); ++i) {
      std::string flag = args[i], value;
      bool hasValue = false;
      if (size_t eq = flag.find('=');
          flag.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        hasValue = true;
      }
      auto take = [&]() -> std::string {
        if (hasValue)
          return value;
        if (i + 1 >= args.size())
          throw UsageError("option " + flag + " needs a value");
        return args[++i];
      };
      if (flag == "-h" || flag == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (flag == "--like") {
        options.like = take();
      } else if (flag == "-o") {
        options.dir = take();
      } else if (flag == "--merged") {
        if (hasValue)
          throw UsageError("option --merged takes no value");
        merged = true;
      } else if (flag == "--dtype") {
        dtype = take();
        options.dtype = parseExportDType("--dtype", dtype);
      } else if (flag == "--shard-size") {
        options.maxShardBytes = parseBytes(take());
      } else if (flag.rfind("-", 0) == 0) {
        throw UsageError("unknown option '" + flag + "' (see --help)");
      } else if (checkpoint.empty()) {
        checkpoint = flag;
      } else {
        throw UsageError("one checkpoint at a time: '" + checkpoint +
                         "' and '" + flag + "'");
      }
    }
    if (checkpoint.empty())
      throw UsageError("give the checkpoint directory (see --help)");
    if (options.like.empty())
      throw UsageError("--like HF_DIR is required: the folder whose "
                       "config.json and tokenizer files go with the weights");
    if (options.dir.empty())
      throw UsageError("-o OUT is required");

    CheckpointParams params = openCheckpointParams(checkpoint);
    for (const std::string &note : params.notes)
      std::fprintf(stderr, "dpc export: note: %s\n", note.c_str());
    if (merged && !params.lora.present())
      throw UsageError("--merged: the checkpoint's program has no LoRA "
                       "adapters to merge");
    options.kind = merged                  ? HfExportKind::Merged
                   : params.lora.present() ? HfExportKind::Adapter
                                           : HfExportKind::Model;
    if (dtype.empty())
      options.dtype =
          params.compute == DType::BF16 && options.kind != HfExportKind::Adapter
              ? DType::BF16
              : DType::F32;
    writeHfExport(options, params.params, params.lora, params.valueType,
                  params.values);
    const char *what =
        options.kind == HfExportKind::Adapter  ? "the peft adapter of "
        : options.kind == HfExportKind::Merged ? "the merged model of "
                                               : "";
    std::printf("wrote %s: %s%zu parameters of step %lld of '%s' as %s\n",
                options.dir.c_str(), what, params.params.size(),
                static_cast<long long>(params.step), params.path.c_str(),
                options.dtype == DType::BF16 ? "bf16" : "f32");
    return 0;
  } catch (const UsageError &e) {
    std::fprintf(stderr, "dpc export: error: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "dpc export: error: %s\n", e.what());
    return 1;
  }
}
