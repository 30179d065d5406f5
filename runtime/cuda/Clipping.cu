//===- Clipping.cu - Per-sample clip factors on the GPU -------------------===//
//
// The clip factor of each sample from its squared norm, as the CPU backend's
// Clipping.cpp computes it, in double; the bound C is read from the
// StepState in the arena on the device, so that a captured graph stays valid
// when the run changes it.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"

#include "dprt/kernels.h"

#include <stdexcept>
#include <string>

namespace dprt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void clipFactorsKernel(const float *n2, const float *mask, float *c,
                                  int64_t batch, int64_t unitRecords,
                                  ClipMode mode, double clipShare, double gamma,
                                  double relErr, const StepState *state) {
  // The run's C times this factor's share of it.
  const double maxNorm = state->clipNorm * clipShare;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < batch;
       b += int64_t(gridDim.x) * blockDim.x) {
    const double sq = n2[b / unitRecords];
    const double mk = mask[b];
    // A masked sample, or one whose norm is NaN (min(1, NaN) would let it
    // through unclipped), contributes nothing. A Gram norm can round to
    // slightly below zero; its true value is >= 0.
    if (mk == 0.0 || sq != sq) {
      c[b] = 0.0f;
      continue;
    }
    const double norm = sqrt(sq > 0.0 ? sq : 0.0) * (1.0 + relErr);
    const double f = mode == ClipMode::Automatic
                         ? maxNorm / (norm + gamma)
                         : fmin(1.0, maxNorm / (norm + 1e-6));
    c[b] = float(mk * f);
  }
}

} // namespace

void clip_factors(Rank *rank, DType acc, const void *n2, const void *mask,
                  void *c, int64_t batch, int64_t unitRecords, ClipMode mode,
                  double clipShare, double gamma, double relErr) {
  requireAcc(acc, "clip_factors");
  if (unitRecords < 1 || batch % unitRecords != 0)
    throw std::invalid_argument("clip_factors: the batch " +
                                std::to_string(batch) +
                                " is not a multiple of the unit's " +
                                std::to_string(unitRecords) + " records");
  if (batch <= 0)
    return;
  clipFactorsKernel<<<gridFor(rank, batch, kThreads), kThreads, 0,
                      computeStream(rank)>>>(
      static_cast<const float *>(n2), static_cast<const float *>(mask),
      static_cast<float *>(c), batch, unitRecords, mode, clipShare, gamma,
      relErr, deviceStepState(rank));
  checkLaunch("clip_factors");
}

} // namespace dprt::cuda
