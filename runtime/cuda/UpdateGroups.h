//===- UpdateGroups.h - Small _rows updates in one launch -------*- C++ -*-===//
//
// Internal to runtime/cuda: the one entry of UpdateGroups.cu that
// Optimizers.cu calls. update_group itself is declared in kernels.inc.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_UPDATEGROUPS_H
#define DPRT_CUDA_UPDATEGROUPS_H

#include "OptimizerSteps.cuh"

namespace dprt::cuda {

/// Defers a _rows update on rows of T (W = kRowsWidth elements a thread,
/// every pointer aligned, n a multiple of W) into the open group, if there
/// is one and the update alone would not fill one wave of updateKernel;
/// false when it is to run now. A group of another optimizer,
/// hyperparameters, clip factors or batch, or a full one, is launched
/// first. Instantiated for Sgd, Momentum and AdamW on f32 and bf16 rows.
template <class Opt, class T>
bool deferToGroup(Rank *rank, const Opt &opt, const T *g, const float *c,
                  int64_t batch, int64_t n, int64_t noiseIndex, bf16 *copy);

} // namespace dprt::cuda

#endif // DPRT_CUDA_UPDATEGROUPS_H
