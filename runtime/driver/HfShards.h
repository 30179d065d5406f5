//===- HfShards.h - Hugging Face weights in and out of shards -*- C++ -*-===//
//
// --init and --export on the ranks (HfWeights.h has the folders): a load
// writes into each local rank's master shard the elements that rank owns
// (rank r owns elements [r * shard, (r + 1) * shard) of each FSDP unit),
// read from the folder's mapped files, so that a process reads only the
// bytes of its own shards; an export gathers each parameter from the master
// shards, one tensor at a time.
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_HFSHARDS_H
#define DPRT_DRIVER_HFSHARDS_H

#include "HfWeights.h"
#include "ProcessRanks.h"

#include "dprt/program.h"

namespace dprt::driver {

/// Loads every parameter `folder` has a source for into the local ranks'
/// master shards (the accumulation type) and then derives their compute
/// copies; parameters without a source keep what dp_init gave them. A value
/// that is not finite stops every rank (the verdict is all-reduced) with
/// UsageError naming the tensor.
void loadHfWeights(const HfInit &folder, const ProgramSpec &spec,
                   ProcessRanks &ranks);

/// Writes the master weights as a Hugging Face folder, a peft adapter or
/// the merged model (writeHfExport, options.mode). This process must drive
/// every rank.
void exportHfWeights(const HfExportOptions &options, const ProgramSpec &spec,
                     ProcessRanks &ranks);

/// The parameters' values in the accumulation type, gathered from the
/// local ranks' shards (the master shards; a frozen unit's compute-type
/// shard, widened). This process must drive every rank.
ParamValues masterValues(const ProgramSpec &spec, ProcessRanks &ranks);

} // namespace dprt::driver

#endif // DPRT_DRIVER_HFSHARDS_H
