//===- Cases.h - The parts of dpc-gpu-check -------------------*- C++ -*-===//
//
// KernelChecks.cpp compares every CUDA kernel with the CPU backend's on
// random inputs (a fresh seed per case), with the per-sample norms and
// clipped weight gradients in NormChecks.cpp, the acc-buffer kernels
// (optimizers, clip factors, materialized rows) in AccChecks.cpp, the rows
// updates, update groups and the finiteness flag in UpdateChecks.cpp, rope and
// attention in AttentionChecks.cpp and runCaptured and the driver's
// finiteness check in CapturedChecks.cpp; Timings.cpp
// times kernels at the sizes of the 1.1B Llama model; NcclChecks.cpp checks
// the NCCL communicator on 2 GPUs (threads of this process, or processes
// started with launcher variables).
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_CASES_H
#define DPC_TEST_GPU_CASES_H

#include "Check.h"

#include <functional>
#include <random>
#include <string>

namespace dprt::cpu {}
namespace dprt::cuda {}

namespace dpc::gpucheck {

// Every part compares the CPU backend's kernels with the CUDA backend's, in
// these element types.
namespace cpu = dprt::cpu;
namespace gpu = dprt::cuda;
inline constexpr DType F32 = DType::F32;
inline constexpr DType BF16 = DType::BF16;

struct Context {
  dprt::Rank *gpu = nullptr; ///< initialized CUDA rank with an arena
  dprt::Rank *cpu = nullptr; ///< CPU rank: a host arena for the StepState
  Report *report = nullptr;
  uint64_t baseSeed = 0;
  std::string filter; ///< run only kernels whose name contains this

  // The case being run.
  std::string kernel, dtype, shape;
  uint64_t seed = 0;
  std::mt19937_64 rng;

  /// Whether the filter lets kernel `k` run.
  bool wants(const std::string &k) const;
  /// Starts a case; false when the filter excludes it.
  bool begin(const std::string &kernel, const std::string &dtype,
             const std::string &shape);
  /// Waits for the GPU and compares the device side of `b` (the CUDA
  /// kernel's output) with its host side (the CPU kernel's), adding a row
  /// "<kernel>.<output>".
  void compare(const std::string &output, Buffer &b, double tol);
  /// Adds a row for the current case.
  void result(const std::string &output, bool pass, const std::string &note);
  /// Writes the StepState to both ranks' arenas.
  void setStepState(const dprt::StepState &state);
  /// Runs `body` as the current case; an exception becomes a FAIL row.
  void guarded(const std::function<void()> &body);
};

/// Tolerance of a result in the compute type: 1e-5 for f32, 1e-2 for bf16.
double tol(DType dt);
/// A case's shape label, "B2 T50 H4" (and " odd" for the odd shapes).
std::string dims(std::initializer_list<std::pair<const char *, int64_t>> d,
                 bool odd);

void kernelChecks(Context &ctx);
/// Kernels on acc (f32) buffers and materialized rows (AccChecks.cpp).
void accChecks(Context &ctx);
/// The *_update_rows optimizers, update_group and the update kernels'
/// finiteness flag (UpdateChecks.cpp; run by accChecks).
void updateChecks(Context &ctx);
/// The StepState of the optimizer checks: step 3, gradScale 0.25, lrScale
/// 0.5 and the run's learning rate and weight decay, which the kernels read
/// from it (UpdateChecks.cpp).
dprt::StepState checkedUpdateState();
/// Per-sample norms and clipped weight gradients (NormChecks.cpp), for each
/// dtype and shape kind.
void normChecks(Context &ctx, DType dt, bool odd);
void weightGradChecks(Context &ctx, DType dt, bool odd);
/// n token ids below `vocab`, drawn from rng, uploaded.
void randomTokens(IntBuffer &t, int64_t n, int32_t vocab, std::mt19937_64 &rng);
/// Clip factors with one masked sample (index 1), whose gradient rows are
/// NaN: the kernels must skip it.
void clipFactorsWithMaskedSample(Buffer &c, std::mt19937_64 &rng);
/// RMSNorm and LayerNorm (NormalizationChecks.cpp), for each dtype and
/// shape kind.
void normalizationChecks(Context &ctx, DType dt, bool odd);
/// rope and attention (AttentionChecks.cpp), for each dtype and shape kind.
void attentionChecks(Context &ctx, DType dt, bool odd);
void capturedStepCheck(Context &ctx);
/// The driver's check of the gradient shards (allFinite, allFiniteRanges)
/// on arena ranges with and without NaN and infinities.
void allFiniteCheck(Context &ctx);
/// The driver's queued copies (queueCopyToArena, queueCopyFromArena):
/// ordered with the kernels around them, a source reused at once, reads
/// that outgrow the staging.
void queuedCopiesCheck(Context &ctx);
/// Fused attention forward and backward inside runCaptured (warm-up,
/// capture, replay with new inputs) against the CPU backend.
void capturedAttentionCheck(Context &ctx);
void timings(Context &ctx);

/// Median microseconds of `launch` on stream `stream` of a CUDA rank (0
/// compute, 1 communication): `warmups` untimed calls, then 10 timed with
/// CUDA events.
double medianMicrosOnStream(dprt::Rank *rank, int32_t stream, int warmups,
                            const std::function<void()> &launch);

/// The NCCL checks of rank `rank` (initialized, with an arena of at least
/// ncclArenaBytes and its communicator); `timing` adds bandwidth rows.
void ncclChecks(dprt::Rank *rank, Report &report, bool timing);
constexpr int64_t kNcclArenaBytes = int64_t(64) << 20;

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_CASES_H
