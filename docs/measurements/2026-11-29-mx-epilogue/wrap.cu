// Bench wrapper: one per-sample MXFP8 product source (SRC) in namespace VNS.
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_compute_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_load_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "Mxfp8.cuh"
#define sm90 VNS
#define STR2(x) #x
#define STR(x) STR2(x)
#include STR(SRC)
namespace dprt::cuda::sm90 {
bool takesLinear(int64_t batch, int64_t tokens, int64_t in, int64_t out) {
  return positiveInts({batch, tokens, in, out}) && in % 8 == 0 && out % 8 == 0;
}
}
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
extern "C" int CAT(run_, VNS)(const void *dy, const void *x, int64_t b,
                               int64_t t, int64_t in, int64_t out, void *g,
                               float *partials, void *ws, int sms, int,
                               int, cudaStream_t s) {
  dprt::cuda::VNS::LinearProblem p{dy, x, b, t, in, out};
  return int(dprt::cuda::VNS::runMxPerSampleGrad(p, g, partials, ws, sms, s));
}
extern "C" size_t CAT(ws_, VNS)(int64_t b, int64_t t, int64_t in, int64_t out,
                                int sms) {
  dprt::cuda::VNS::LinearProblem p{nullptr, nullptr, b, t, in, out};
  return dprt::cuda::VNS::mxPerSampleGradWorkspace(p, sms);
}
extern "C" int64_t CAT(partials_, VNS)(int64_t b, int64_t t, int64_t in,
                                       int64_t out) {
  dprt::cuda::VNS::LinearProblem p{nullptr, nullptr, b, t, in, out};
  return dprt::cuda::VNS::mxLinearPartials(p);
}
