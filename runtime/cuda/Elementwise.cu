//===- Elementwise.cu - Activations, products, sums and casts on the GPU --===//
//
// One grid-stride map per kernel, 16-byte vectors when every pointer allows
// it. Each element is computed in f32 and rounded once to the storage type.
//
//===----------------------------------------------------------------------===//

#include "DeviceMath.cuh"

#include "dprt/kernels.h"

namespace dprt::cuda {

namespace {

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

template <class T> struct ActivationForwardOp {
  Activation act;
  const T *x;
  T *y;
  template <int W> __device__ void apply(int64_t i) const {
    float v[W];
    loadVec<W>(x + i, v);
#pragma unroll
    for (int j = 0; j < W; ++j)
      v[j] = activate(act, v[j]);
    storeVec<W>(y + i, v);
  }
};

template <class T> struct ActivationBackwardOp {
  Activation act;
  const T *x, *dy;
  T *dx;
  bool accumulate;
  template <int W> __device__ void apply(int64_t i) const {
    float xv[W], g[W];
    loadVec<W>(x + i, xv);
    loadVec<W>(dy + i, g);
#pragma unroll
    for (int j = 0; j < W; ++j)
      g[j] *= activationDerivative(act, xv[j]);
    if (accumulate) {
      float old[W];
      loadVec<W>(dx + i, old);
#pragma unroll
      for (int j = 0; j < W; ++j)
        g[j] += old[j];
    }
    storeVec<W>(dx + i, g);
  }
};

/// y = a * b (kMul) or a + b.
template <class T, bool kMul> struct BinaryOp {
  const T *a, *b;
  T *y;
  template <int W> __device__ void apply(int64_t i) const {
    float u[W], v[W];
    loadVec<W>(a + i, u);
    loadVec<W>(b + i, v);
#pragma unroll
    for (int j = 0; j < W; ++j)
      u[j] = kMul ? u[j] * v[j] : u[j] + v[j];
    storeVec<W>(y + i, u);
  }
};

template <class T> struct GluForwardOp {
  Activation act;
  const T *gate, *up;
  T *y;
  template <int W> __device__ void apply(int64_t i) const {
    float g[W], u[W];
    loadVec<W>(gate + i, g);
    loadVec<W>(up + i, u);
#pragma unroll
    for (int j = 0; j < W; ++j)
      g[j] = gluActivate(act, g[j]) * u[j];
    storeVec<W>(y + i, g);
  }
};

/// dgate = dy * up * act'(gate), dup = dy * act(gate); either may be null.
/// y, when not null: act(gate) * up, GluForwardOp's bits (gluActivate and
/// gluActivationAndDerivative's act(x) are the same expression).
template <class T> struct GluBackwardOp {
  Activation act;
  const T *gate, *up, *dy;
  T *dgate, *dup, *y;
  template <int W> __device__ void apply(int64_t i) const {
    float g[W], u[W], d[W], dg[W], du[W], out[W];
    loadVec<W>(gate + i, g);
    loadVec<W>(up + i, u);
    loadVec<W>(dy + i, d);
#pragma unroll
    for (int j = 0; j < W; ++j) {
      float a, da;
      gluActivationAndDerivative(act, g[j], a, da);
      dg[j] = d[j] * u[j] * da;
      du[j] = d[j] * a;
      out[j] = a * u[j];
    }
    if (dgate)
      storeVec<W>(dgate + i, dg);
    if (dup)
      storeVec<W>(dup + i, du);
    if (y)
      storeVec<W>(y + i, out);
  }
};

template <class T> struct MulBackwardOp {
  const T *a, *b, *dy;
  T *da, *db;
  bool accumulateA, accumulateB;

  template <int W>
  __device__ void gradient(const T *other, T *out, bool acc, int64_t i,
                           const float (&g)[W]) const {
    float v[W];
    loadVec<W>(other + i, v);
#pragma unroll
    for (int j = 0; j < W; ++j)
      v[j] *= g[j];
    if (acc) {
      float old[W];
      loadVec<W>(out + i, old);
#pragma unroll
      for (int j = 0; j < W; ++j)
        v[j] += old[j];
    }
    storeVec<W>(out + i, v);
  }

  template <int W> __device__ void apply(int64_t i) const {
    float g[W];
    loadVec<W>(dy + i, g);
    if (da)
      gradient<W>(b, da, accumulateA, i, g);
    if (db)
      gradient<W>(a, db, accumulateB, i, g);
  }
};

template <class T> struct AccumulateOp {
  const T *x;
  T *y;
  template <int W> __device__ void apply(int64_t i) const {
    float u[W], v[W];
    loadVec<W>(y + i, u);
    loadVec<W>(x + i, v);
#pragma unroll
    for (int j = 0; j < W; ++j)
      u[j] += v[j];
    storeVec<W>(y + i, u);
  }
};

template <class S, class D> struct CastOp {
  const S *src;
  D *dst;
  template <int W> __device__ void apply(int64_t i) const {
    float v[W];
    loadVec<W>(src + i, v);
    storeVec<W>(dst + i, v);
  }
};

template <class T> struct FillOp {
  T *p;
  double value;
  template <int W> __device__ void apply(int64_t i) const {
    // The value rounded once to T, then held exactly as f32.
    float v = toFloat(fromDouble<T>(value));
    float w[W];
#pragma unroll
    for (int j = 0; j < W; ++j)
      w[j] = v;
    storeVec<W>(p + i, w);
  }
};

/// Launched never: cudaFuncGetAttributes on it says whether this binary
/// holds code (SASS or PTX) the current device can run.
__global__ void kernelImageProbe() {}

bool allAligned(std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (p && !aligned16(p))
      return false;
  return true;
}

} // namespace

cudaError_t probeKernelImage() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, kernelImageProbe);
}

void activation_forward(Rank *rank, DType dt, Activation act, const void *x,
                        void *y, int64_t n) {
  dispatchCompute(dt, "activation_forward", [&](auto tag) {
    using T = decltype(tag);
    ActivationForwardOp<T> op{act, static_cast<const T *>(x),
                              static_cast<T *>(y)};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({x, y}), op,
                       "activation_forward");
  });
}

void activation_backward(Rank *rank, DType dt, Activation act, const void *x,
                         const void *dy, void *dx, int64_t n, bool accumulate) {
  dispatchCompute(dt, "activation_backward", [&](auto tag) {
    using T = decltype(tag);
    ActivationBackwardOp<T> op{act, static_cast<const T *>(x),
                               static_cast<const T *>(dy), static_cast<T *>(dx),
                               accumulate};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({x, dy, dx}), op,
                       "activation_backward");
  });
}

void mul_forward(Rank *rank, DType dt, const void *a, const void *b, void *y,
                 int64_t n) {
  dispatchCompute(dt, "mul_forward", [&](auto tag) {
    using T = decltype(tag);
    BinaryOp<T, true> op{static_cast<const T *>(a), static_cast<const T *>(b),
                         static_cast<T *>(y)};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({a, b, y}), op,
                       "mul_forward");
  });
}

void glu_forward(Rank *rank, DType dt, Activation act, const void *gate,
                 const void *up, void *y, int64_t n) {
  dispatchCompute(dt, "glu_forward", [&](auto tag) {
    using T = decltype(tag);
    GluForwardOp<T> op{act, static_cast<const T *>(gate),
                       static_cast<const T *>(up), static_cast<T *>(y)};
    launchMap<kVec2<T>>(rank, kComputeStream, n, allAligned({gate, up, y}), op,
                        "glu_forward");
  });
}

void glu_backward(Rank *rank, DType dt, Activation act, const void *gate,
                  const void *up, const void *dy, void *dgate, void *dup,
                  void *y, int64_t n) {
  if (!dgate && !dup && !y)
    return;
  dispatchCompute(dt, "glu_backward", [&](auto tag) {
    using T = decltype(tag);
    GluBackwardOp<T> op{act,
                        static_cast<const T *>(gate),
                        static_cast<const T *>(up),
                        static_cast<const T *>(dy),
                        static_cast<T *>(dgate),
                        static_cast<T *>(dup),
                        static_cast<T *>(y)};
    launchMap<kVec2<T>>(rank, kComputeStream, n,
                        allAligned({gate, up, dy, dgate, dup, y}), op,
                        "glu_backward");
  });
}

void add_forward(Rank *rank, DType dt, const void *a, const void *b, void *y,
                 int64_t n) {
  dispatchCompute(dt, "add_forward", [&](auto tag) {
    using T = decltype(tag);
    BinaryOp<T, false> op{static_cast<const T *>(a), static_cast<const T *>(b),
                          static_cast<T *>(y)};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({a, b, y}), op,
                       "add_forward");
  });
}

void mul_backward(Rank *rank, DType dt, const void *a, const void *b,
                  const void *dy, void *da, void *db, int64_t n,
                  bool accumulateA, bool accumulateB) {
  if (!da && !db)
    return;
  dispatchCompute(dt, "mul_backward", [&](auto tag) {
    using T = decltype(tag);
    MulBackwardOp<T> op{static_cast<const T *>(a),
                        static_cast<const T *>(b),
                        static_cast<const T *>(dy),
                        static_cast<T *>(da),
                        static_cast<T *>(db),
                        accumulateA,
                        accumulateB};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({a, b, dy, da, db}),
                       op, "mul_backward");
  });
}

void accumulateOnStream(Rank *rank, int32_t stream, DType dt, const void *x,
                        void *y, int64_t n) {
  dispatchCompute(dt, "accumulate", [&](auto tag) {
    using T = decltype(tag);
    AccumulateOp<T> op{static_cast<const T *>(x), static_cast<T *>(y)};
    launchMap<kVec<T>>(rank, stream, n, allAligned({x, y}), op, "accumulate");
  });
}

void accumulate(Rank *rank, DType dt, const void *x, void *y, int64_t n) {
  accumulateOnStream(rank, kComputeStream, dt, x, y, n);
}

void cast(Rank *rank, DType from, const void *src, DType to, void *dst,
          int64_t n) {
  requireCompute(from, "cast");
  requireCompute(to, "cast");
  if (n <= 0)
    return;
  if (from == to) {
    if (src != dst)
      checkCuda(cudaMemcpyAsync(dst, src, size_t(n * sizeOf(from)),
                                cudaMemcpyDeviceToDevice, computeStream(rank)),
                "cudaMemcpyAsync(cast)");
    return;
  }
  // Four elements a thread: 16 bytes of f32, 8 of bf16.
  bool vectorize = allAligned({src, dst});
  if (from == DType::F32) {
    CastOp<float, bf16> op{static_cast<const float *>(src),
                           static_cast<bf16 *>(dst)};
    launchMap<4>(rank, kComputeStream, n, vectorize, op, "cast");
  } else {
    CastOp<bf16, float> op{static_cast<const bf16 *>(src),
                           static_cast<float *>(dst)};
    launchMap<4>(rank, kComputeStream, n, vectorize, op, "cast");
  }
}

void gather_master(Rank *rank, DType from, const void *master, DType to,
                   void *full, int64_t elems, int32_t stream) {
  // The f32 master cast to the bf16 the layers read, on the stream the
  // schedule gives gathers (the communication stream), so that it overlaps
  // compute as a split unit's all-gather does.
  if (from != DType::F32 || to != DType::BF16)
    fail(std::string("gather_master: casts an f32 master to bf16, not ") +
         nameOf(from) + " to " + nameOf(to));
  if (elems <= 0)
    return;
  CastOp<float, bf16> op{static_cast<const float *>(master),
                         static_cast<bf16 *>(full)};
  launchMap<4>(rank, stream, elems, allAligned({master, full}), op,
               "gather_master");
}

void fill(Rank *rank, DType dt, void *p, int64_t n, double value) {
  dispatchCompute(dt, "fill", [&](auto tag) {
    using T = decltype(tag);
    FillOp<T> op{static_cast<T *>(p), value};
    launchMap<kVec<T>>(rank, kComputeStream, n, allAligned({p}), op, "fill");
  });
}

void zero(Rank *rank, void *p, int64_t bytes) {
  if (bytes < 0)
    fail("zero: negative byte count");
  if (bytes == 0)
    return;
  checkCuda(cudaMemsetAsync(p, 0, size_t(bytes), computeStream(rank)),
            "cudaMemsetAsync(zero)");
}

} // namespace dprt::cuda
