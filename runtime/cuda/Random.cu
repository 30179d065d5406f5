//===- Random.cu - Parameter initialization and Gaussian noise on the GPU -===//
//
// Each element's value is a pure function of (key, step, global index), drawn
// from rng.h with the keys of keys.h, exactly as on the CPU backend: the
// values do not depend on how parameters are sharded or on the backend
// (initialization is computed in double on both; noise in float on f32
// models, where the device's log/sin/cos may differ from the host's in the
// last bits). The StepState is read on the device, so captured graphs stay
// valid across steps.
//
//===----------------------------------------------------------------------===//

#include "DeviceState.h"
#include "GradientNoise.cuh"

#include "dprt/kernels.h"
#include "dprt/keys.h"

namespace dprt::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void initNormalKernel(float *master, int64_t n, int64_t globalIndex,
                                 double std, const StepState *state) {
  const NoiseKey key = initKeyOf(*state);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    master[i] = float(std * gaussianF64(NoiseGenerator::Philox, key, 0,
                                        uint64_t(globalIndex + i),
                                        kParameterInitStream));
}

__global__ void initUniformKernel(float *master, int64_t n, int64_t globalIndex,
                                  double bound, const StepState *state) {
  const NoiseKey key = initKeyOf(*state);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    double u = uniformF64(NoiseGenerator::Philox, key, 0,
                          uint64_t(globalIndex + i), kParameterInitStream);
    master[i] = float(bound * (2.0 * u - 1.0));
  }
}

__global__ void addNoiseKernel(float *grad, int64_t n, int64_t globalIndex,
                               const StepState *state) {
  const GradientNoise noise = GradientNoise::of(*state, true);
  if (!noise.on)
    return;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    grad[i] = noise.add(grad[i], globalIndex + i);
}

} // namespace

void init_normal(Rank *rank, DType acc, void *master, int64_t n,
                 int64_t globalIndex, double std) {
  requireAcc(acc, "init_normal");
  if (n <= 0)
    return;
  initNormalKernel<<<gridFor(rank, n, kThreads), kThreads, 0,
                     computeStream(rank)>>>(
      static_cast<float *>(master), n, globalIndex, std, deviceStepState(rank));
  checkLaunch("init_normal");
}

void init_uniform(Rank *rank, DType acc, void *master, int64_t n,
                  int64_t globalIndex, double bound) {
  requireAcc(acc, "init_uniform");
  if (n <= 0)
    return;
  initUniformKernel<<<gridFor(rank, n, kThreads), kThreads, 0,
                      computeStream(rank)>>>(static_cast<float *>(master), n,
                                             globalIndex, bound,
                                             deviceStepState(rank));
  checkLaunch("init_uniform");
}

void add_noise(Rank *rank, DType acc, void *grad, int64_t n,
               int64_t globalIndex) {
  requireAcc(acc, "add_noise");
  if (n <= 0)
    return;
  addNoiseKernel<<<gridFor(rank, n, kThreads), kThreads, 0,
                   computeStream(rank)>>>(static_cast<float *>(grad), n,
                                          globalIndex, deviceStepState(rank));
  checkLaunch("add_noise");
}

} // namespace dprt::cuda
