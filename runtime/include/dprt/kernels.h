//===- kernels.h - The kernels the emitted program calls ------------------===//
//
// One function per runtime call of the lowered program. Both backends
// (runtime/cpu, runtime/cuda) implement every function with exactly the
// semantics written here; the emitted code and the tests see only this
// header.
//
// Conventions
// - Row-major buffers. A layer input of B samples with T tokens each and
//   width d is B*T rows of d elements ("rows" = B*T; T = 1 for classifiers).
//   Sample b owns rows [b*T, (b+1)*T).
// - `dt` is the compute type of activations and gathered parameters. Buffers
//   marked `acc` hold the accumulation type accOf(dt) (f64 for f64 models,
//   f32 otherwise): per-sample squared norms, clip factors, masks, losses,
//   normalization statistics, Gram matrices, gradient accumulators, master
//   weights and optimizer state. bf16 buffers are computed in f32 and rounded
//   to nearest even on store; reductions always accumulate in acc or wider.
// - `n2` buffers hold per-sample squared norms; norm kernels ADD to them
//   (n2[b] += ...), so one buffer collects every layer's contribution.
// - Weight-gradient kernels ADD to their gradient buffers (acc type).
// - Input-gradient kernels write their result, or add to it when
//   `accumulate` is true (a value read by several layers sums the gradients).
// - Kernels run on the rank's compute stream in issue order; collectives on
//   the stream they are given.
// - Pointers are never aliased unless a comment says so.
// - Each backend defines the kernels in its own namespace (dprt::cpu,
//   dprt::cuda) so that both can be linked into one checking program.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_KERNELS_H
#define DPRT_KERNELS_H

#include "dprt/rank.h"
#include "dprt/types.h"

#include <cstdint>

namespace dprt {

namespace cpu {
#include "dprt/kernels.inc"
} // namespace cpu

namespace cuda {
#include "dprt/kernels.inc"
} // namespace cuda

// The emitted program calls dprt::<kernel>; it is compiled for one backend,
// and this picks it. A program that checks one backend against the other
// calls dprt::cpu::<kernel> and dprt::cuda::<kernel> by name.
#if defined(DPRT_BACKEND_CUDA)
using namespace cuda;
#else
using namespace cpu;
#endif

} // namespace dprt

#endif // DPRT_KERNELS_H
