//===- FusedNorms.cu - When and how the fused norm products run -----------===//
//
// The CUDA backend's side of NormGemms.h: whether a norm kernel runs its
// fused product (built with it, an sm_90 GPU, bf16, a shape it takes and,
// unless an environment variable forces a path, a shape where dpc-gpu-
// check's timings found it faster: dprt/fused_norms.h), and running it: the
// product, then each sample's partial sums added in a fixed order. Only this
// file is compiled with DPRT_WITH_SM90_GEMM; without it every fused path says
// no.
//
//===----------------------------------------------------------------------===//

#include "NormGemms.h"
#include "Reduce.cuh"

#include "dprt/fused_norms.h"

#include <cstdlib>
#include <cstring>

namespace dprt::cuda {

#ifdef DPRT_WITH_SM90_GEMM

namespace {

/// The variable `name` (read on every call): unset or empty, `byDefault`;
/// "fused" or "two-pass" force a path; anything else is an error.
bool fusedAsked(const char *name, bool byDefault) {
  const char *env = std::getenv(name);
  if (!env || !*env)
    return byDefault;
  if (std::strcmp(env, "fused") == 0)
    return true;
  if (std::strcmp(env, "two-pass") == 0)
    return false;
  fail(std::string(name) + "=" + env + ": expected 'fused' or 'two-pass'");
}

/// Runs one fused norm product (NormGemms.h), `run(partials, workspace)`,
/// and adds each sample's `perSample` partial sums into n2[b] in a fixed
/// order. False, having done nothing, where CUTLASS refuses the problem; a
/// failed launch throws.
template <class Run>
bool runFusedNorm(Rank *rank, int64_t batch, int64_t perSample,
                  size_t workspaceBytes, float *n2, const char *name, Run run) {
  ScratchLayout layout;
  size_t tilesAt = layout.add(size_t(batch * perSample) * sizeof(float));
  size_t workspaceAt = layout.add(workspaceBytes);
  size_t segmentAt = layout.add(segmentScratchBytes(batch, perSample));
  char *base = static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
  auto *tiles = reinterpret_cast<float *>(base + tilesAt);
  switch (run(tiles, base + workspaceAt)) {
  case sm90::RunStatus::Refused:
    return false;
  case sm90::RunStatus::Failed:
    fail(std::string(name) + ": the fused product failed: " +
         cudaGetErrorString(cudaGetLastError()));
  case sm90::RunStatus::Ran:
    break;
  }
  checkLaunch(name);
  segmentedSum(rank, batch, perSample, ValueOp{tiles, perSample}, n2, true,
               reinterpret_cast<float *>(base + segmentAt), name);
  return true;
}

/// Whether the GPU and type are those of the fused products.
bool fusedHardware(Rank *rank, DType dt) {
  return dt == DType::BF16 && deviceState(rank).computeCapability == 90;
}

} // namespace

/// g[b] = dy_b^T x_b in bf16 and n2[b] += ||g[b]||^2 with the squares
/// summed in the product's epilogue (NormGemms.h). False, having done
/// nothing, where fusedPerSampleGradRuns is false, a pointer is not 16-byte
/// aligned or CUTLASS refuses the problem.
bool fusedPerSampleGrad(Rank *rank, DType dt, const void *x, const void *dy,
                        void *g, float *n2, int64_t batch, int64_t tokens,
                        int64_t in, int64_t out) {
  if (!fusedPerSampleGradRuns(rank, dt, batch, tokens, in, out) ||
      !aligned16(x) || !aligned16(dy) || !aligned16(g))
    return false;
  const sm90::LinearProblem p{dy, x, batch, tokens, in, out};
  const int sms = deviceState(rank).smCount;
  return runFusedNorm(rank, batch, sm90::linearPartials(p),
                      sm90::perSampleGradWorkspace(p, sms), n2,
                      "linear_per_sample_grad",
                      [&](float *partials, void *workspace) {
                        return sm90::runPerSampleGrad(p, g, partials, workspace,
                                                      sms, computeStream(rank));
                      });
}

bool fusedMxPerSampleGrad(Rank *rank, DType dt, const void *x, const void *dy,
                          void *g, float *n2, int64_t batch, int64_t tokens,
                          int64_t in, int64_t out) {
  if (!n2 || !fusedHardware(rank, dt) ||
      !sm90::takesMxLinear(batch, tokens, in, out) || !aligned16(x) ||
      !aligned16(dy) || !aligned16(g))
    return false;
  const sm90::LinearProblem p{dy, x, batch, tokens, in, out};
  const int sms = deviceState(rank).smCount;
  return runFusedNorm(rank, batch, sm90::mxLinearPartials(p),
                      sm90::mxPerSampleGradWorkspace(p, sms), n2,
                      "linear_per_sample_grad",
                      [&](float *partials, void *workspace) {
                        return sm90::runMxPerSampleGrad(
                            p, g, partials, workspace, sms,
                            computeStream(rank));
                      });
}

/// n2[b] += ||dy_b^T x_b||^2 with the squares summed in the product's
/// epilogue and the product not stored. False as fusedPerSampleGrad.
bool fusedDirectNorm(Rank *rank, DType dt, const void *x, const void *dy,
                     float *n2, int64_t batch, int64_t tokens, int64_t in,
                     int64_t out) {
  if (!fusedDirectNormRuns(rank, dt, batch, tokens, in, out) || !aligned16(x) ||
      !aligned16(dy))
    return false;
  const sm90::LinearProblem p{dy, x, batch, tokens, in, out};
  const int sms = deviceState(rank).smCount;
  return runFusedNorm(rank, batch, sm90::linearPartials(p),
                      sm90::directNormWorkspace(p, sms), n2, "norm_direct",
                      [&](float *partials, void *workspace) {
                        return sm90::runDirectNorm(p, partials, workspace, sms,
                                                   computeStream(rank));
                      });
}

/// n2[b] += <Ka_b, Dy_b Dy_b^T> with the products summed in the Gram
/// product's epilogue. False as fusedPerSampleGrad.
bool fusedGramNorm(Rank *rank, DType dt, const void *dy, const void *ka,
                   float *n2, int64_t batch, int64_t tokens, int64_t dim) {
  if (!fusedGramNormRuns(rank, dt, batch, tokens, dim) || !aligned16(dy) ||
      !aligned16(ka))
    return false;
  const sm90::GramProblem p{dy, static_cast<const float *>(ka), batch, tokens,
                            dim};
  const int sms = deviceState(rank).smCount;
  return runFusedNorm(rank, batch, sm90::gramPartials(p),
                      sm90::gramNormWorkspace(p, sms), n2, "gram_norm",
                      [&](float *partials, void *workspace) {
                        return sm90::runGramNorm(p, partials, workspace, sms,
                                                 computeStream(rank));
                      });
}

bool fusedNormProductsBuilt() { return true; }

bool fusedPerSampleGradRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                            int64_t in, int64_t out) {
  // The variable first, so that a bad value is an error on every GPU.
  return fusedAsked("DPRT_PER_SAMPLE_GRAD",
                    perSampleGradFusedByDefault(tokens, out)) &&
         fusedHardware(rank, dt) && sm90::takesLinear(batch, tokens, in, out);
}

bool fusedDirectNormRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                         int64_t in, int64_t out) {
  return fusedAsked("DPRT_DIRECT_NORM",
                    directNormFusedByDefault(batch, in, out)) &&
         fusedHardware(rank, dt) && sm90::takesLinear(batch, tokens, in, out);
}

bool fusedGramNormRuns(Rank *rank, DType dt, int64_t batch, int64_t tokens,
                       int64_t dim) {
  return fusedAsked("DPRT_GRAM_NORM", gramNormFusedByDefault(dim)) &&
         fusedHardware(rank, dt) && sm90::takesGram(batch, tokens, dim);
}

#else // A build without the products: every fused path says no.

bool fusedPerSampleGrad(Rank *, DType, const void *, const void *, void *,
                        float *, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool fusedMxPerSampleGrad(Rank *, DType, const void *, const void *, void *,
                          float *, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool fusedDirectNorm(Rank *, DType, const void *, const void *, float *,
                     int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool fusedGramNorm(Rank *, DType, const void *, const void *, float *, int64_t,
                   int64_t, int64_t) {
  return false;
}
bool fusedNormProductsBuilt() { return false; }
bool fusedPerSampleGradRuns(Rank *, DType, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool fusedDirectNormRuns(Rank *, DType, int64_t, int64_t, int64_t, int64_t) {
  return false;
}
bool fusedGramNormRuns(Rank *, DType, int64_t, int64_t, int64_t) {
  return false;
}

#endif

} // namespace dprt::cuda
