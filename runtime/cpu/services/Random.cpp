//===- Random.cpp - Initialization and gradient noise on the CPU ----------===//
//
// The random pointer kernels of kernels.inc for dprt::cpu. Every value is a
// pure function of (key, step, global index, stream) through dprt/rng.h, so
// a rank that owns any slice of a unit draws exactly what a single rank would
// draw there. The keys come from the StepState through dprt/keys.h, as on the
// CUDA backend.
//
//===----------------------------------------------------------------------===//

#include "../GradientNoise.h"

#include "dprt/kernels.h"
#include "dprt/keys.h"

#include <stdexcept>
#include <string>

namespace dprt::cpu {
namespace {

const StepState &stepState(const Rank *rank) {
  return *reinterpret_cast<const StepState *>(rank->arena + rank->stateOffset);
}

void requireAcc(DType acc, const char *kernel) {
  if (acc != DType::F32 && acc != DType::F64)
    throw std::invalid_argument(std::string(kernel) +
                                ": acc buffers are f32 or f64, got " +
                                nameOf(acc));
}

/// Stores `n` values value(i) into an f32 or f64 buffer, each rounded once.
template <class Value>
void store(DType acc, void *out, int64_t n, Value value) {
  if (acc == DType::F64) {
    auto *p = static_cast<double *>(out);
    for (int64_t i = 0; i < n; ++i)
      p[i] = value(i);
  } else {
    auto *p = static_cast<float *>(out);
    for (int64_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(value(i));
  }
}

} // namespace

// master[i] = std * z, z = gaussianF64 at (initKey, step 0, globalIndex + i,
// kParameterInitStream), computed in double and rounded once.
void init_normal(Rank *rank, DType acc, void *master, int64_t n,
                 int64_t globalIndex, double std) {
  requireAcc(acc, "init_normal");
  const NoiseKey key = initKeyOf(stepState(rank));
  store(acc, master, n, [&](int64_t i) {
    return std * gaussianF64(NoiseGenerator::Philox, key, 0,
                             static_cast<uint64_t>(globalIndex + i),
                             kParameterInitStream);
  });
}

// master[i] = bound * (2u - 1) in (-bound, bound], u = uniformF64 in (0, 1]
// at the same counter as init_normal.
void init_uniform(Rank *rank, DType acc, void *master, int64_t n,
                  int64_t globalIndex, double bound) {
  requireAcc(acc, "init_uniform");
  const NoiseKey key = initKeyOf(stepState(rank));
  store(acc, master, n, [&](int64_t i) {
    double u = uniformF64(NoiseGenerator::Philox, key, 0,
                          static_cast<uint64_t>(globalIndex + i),
                          kParameterInitStream);
    return bound * (2.0 * u - 1.0);
  });
}

// f64: grad[i] += noiseStd * gaussianF64(..., kGradientNoiseStream);
// f32: grad[i] += float(noiseStd * double(gradientNoiseF32(...))),
// at (noise key, StepState::step, globalIndex + i).
void add_noise(Rank *rank, DType acc, void *grad, int64_t n,
               int64_t globalIndex) {
  requireAcc(acc, "add_noise");
  const GradientNoise noise(stepState(rank), true);
  if (!noise.on())
    return;
  if (acc == DType::F64) {
    auto *g = static_cast<double *>(grad);
    for (int64_t i = 0; i < n; ++i)
      g[i] = noise.add(g[i], globalIndex + i);
  } else {
    auto *g = static_cast<float *>(grad);
    for (int64_t i = 0; i < n; ++i)
      g[i] = noise.add(g[i], globalIndex + i);
  }
}

} // namespace dprt::cpu
