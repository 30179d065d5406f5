//===- Activations.cuh - Activations and their derivatives -----*- CUDA -*-===//
//
// Internal to runtime/cuda: the f32 activations of Elementwise.cu's maps, and
// the GLU's, which the GLU product's epilogue (GluProductGemm.cu) computes
// with the same expressions so that both paths round the same values.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_ACTIVATIONS_CUH
#define DPRT_CUDA_ACTIVATIONS_CUH

#include "dprt/types.h"

namespace dprt::cuda {

constexpr float kSqrt1_2 = 0.70710678118654752440f;     // 1/sqrt(2)
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // 1/sqrt(2 pi)
constexpr float kSqrt2OverPi = 0.79788456080286535588f; // sqrt(2/pi)
constexpr float kGeluCubic = 0.044715f;

__device__ __forceinline__ float activate(Activation act, float x) {
  switch (act) {
  case Activation::Relu:
    return x > 0.0f ? x : 0.0f;
  case Activation::Silu:
    return x / (1.0f + expf(-x));
  // 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 sigmoid(2u) without the
  // cancellation of 1 + (-1 + tiny) for negative x.
  case Activation::GeluErf:
    return 0.5f * x * erfcf(-x * kSqrt1_2);
  case Activation::GeluTanh:
    return x /
           (1.0f + expf(-2.0f * kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  }
  return __int_as_float(0x7fc00000); // an unknown activation gives NaN
}

__device__ __forceinline__ float activationDerivative(Activation act, float x) {
  switch (act) {
  case Activation::Relu:
    return x > 0.0f ? 1.0f : 0.0f;
  case Activation::Silu: {
    // d/dx x s(x) = s (1 + x (1 - s)).
    float s = 1.0f / (1.0f + expf(-x));
    return s * (1.0f + x * (1.0f - s));
  }
  case Activation::GeluErf:
    // Phi(x) + x phi(x).
    return 0.5f * erfcf(-x * kSqrt1_2) + x * kInvSqrt2Pi * expf(-0.5f * x * x);
  case Activation::GeluTanh: {
    // u = sqrt(2/pi) (x + 0.044715 x^3):
    // 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u'
    //   = s + 2 x s (1 - s) u' with s = sigmoid(2u), 1 - s = sigmoid(-2u).
    float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    float s = 1.0f / (1.0f + expf(-2.0f * u));
    float sn = 1.0f / (1.0f + expf(2.0f * u));
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return s + 2.0f * x * s * sn * du;
  }
  }
  return __int_as_float(0x7fc00000);
}

/// The logistic function with the fast exponential and division
/// (ex2.approx and an approximate reciprocal, a few ulp), as Inductor's
/// kernels compute it: with the IEEE expf and division the GLU kernels, which
/// move 3 to 5 bytes an element, spent as long in arithmetic as in memory.
/// 1 + e beyond 2^126 (x below -87) gives 0, the sigmoid's value in f32.
__device__ __forceinline__ float fastSigmoid(float x) {
  return __fdividef(1.0f, 1.0f + __expf(-x));
}

/// act(x) for the GLU kernels: SiLU from fastSigmoid.
__device__ __forceinline__ float gluActivate(Activation act, float x) {
  return act == Activation::Silu ? x * fastSigmoid(x) : activate(act, x);
}

/// act(x) and act'(x) together for the GLU backward: SiLU's sigmoid once.
__device__ __forceinline__ void
gluActivationAndDerivative(Activation act, float x, float &a, float &d) {
  if (act == Activation::Silu) {
    const float s = fastSigmoid(x);
    a = x * s;
    d = s * (1.0f + x * (1.0f - s));
    return;
  }
  a = activate(act, x);
  d = activationDerivative(act, x);
}

} // namespace dprt::cuda

#endif // DPRT_CUDA_ACTIVATIONS_CUH
