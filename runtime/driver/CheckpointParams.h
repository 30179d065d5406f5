//===- CheckpointParams.h - A checkpoint's parameters -----------*- C++ -*-===//
//
// What `dpc export` reads of a DPC checkpoint: every parameter's name and
// shape, its Hugging Face source (recorded under "hf_sources" in the
// manifest) and its values, read through CheckpointReader.
//
// Backend-independent.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKPOINTPARAMS_H
#define DPRT_DRIVER_CHECKPOINTPARAMS_H

#include "HfWeights.h"

#include "dprt/program.h"

#include <string>
#include <vector>

namespace dprt::driver {

struct CheckpointParams {
  std::string path; ///< the checkpoint directory (DIR/step-...)
  int64_t step = 0; ///< the optimizer steps it holds
  DType compute;    ///< the compute type of the run that saved it
  /// What the reader says a user should know (an old format, no
  /// checksums), one sentence each.
  std::vector<std::string> notes;
  /// Name, shape and Hugging Face source of each parameter (the unit and
  /// offsets are not used).
  std::vector<ParamSpec> params;
  LoRASpec lora;   ///< the program's LoRA, if it had one
  DType valueType; ///< the type `values` gives (the accumulation type)
  ParamValues values;
};

/// Opens the checkpoint DIR (a step-... directory, or a --save directory
/// whose `latest` names one) of any format and number of ranks
/// (CheckpointReader); each tensor file is verified before it is read.
/// Throws UsageError naming the file when it is not a usable checkpoint or
/// records no Hugging Face names.
CheckpointParams openCheckpointParams(const std::string &dir);

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKPOINTPARAMS_H
