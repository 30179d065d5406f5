//===- Attention.cu - Attention on the GPU --------------------------------===//
//
// Three implementations of attention (AttentionPath.h says which runs):
// - cudnn (bf16, head size 64 or 128; the default where libcudnn.so.9 is
//   found and cuDNN builds a graph for the shape): cuDNN's fused SDPA,
//   CudnnAttention.cpp.
// - fused (bf16, head size 64 or 128; where cuDNN declines, or
//   DPRT_ATTENTION=fused): the FlashAttention-2
//   style block programs of FlashAttention.h, which never form the T x T
//   scores in memory. Forward: one kernel. Backward: a row-stats pass
//   (lse log2(e) and D = rowsum(dO o O) to scratch), then one kernel for dQ
//   (a block per query block) and one for dK, dV (a block per key block,
//   over every query head of its group); no atomics, deterministic.
// - materialized (f32, other head sizes, misaligned pointers, or
//   DPRT_ATTENTION=materialized; MaterializedAttention.cu): the scores of
//   a group of heads in f32 scratch and strided-batched cuBLASLt GEMMs, one
//   batch entry per key/value head: for sample b and r < heads/kvHeads,
//   entry j computes query head h = j * group + r against key/value head j,
//   so every operand sits at a constant stride (queries g * headDim apart,
//   keys headDim apart) and grouped-query attention needs no copies.
//     forward:  S = scale Q K^T (f32), P = softmax(S) row by row (causal
//               mask, lse kept), O = P V.
//     backward: S again, dP = dO V^T, then per row P = exp(S - lse) and
//               dS = P (dP - D) with D = sum_s P dP, then dV += P^T dO,
//               dQ = scale dS K, dK += scale dS^T Q.
//   dK and dV sum over the query heads of a group in f32 accumulators and
//   are rounded once at the end of each sample. Scratch holds the T x T
//   matrices of as many key/value heads as fit in DPRT_ATTENTION_SCRATCH_MB
//   (default 256 MiB; at least one head); it is sized in the un-captured
//   warm-up run.
//
//===----------------------------------------------------------------------===//

#include "AttentionPath.h"
#include "CudnnAttention.h"
#include "FlashAttention.h"
#include "MaterializedAttention.h"
#include "Reduce.cuh"

#include "dprt/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace dprt::cuda {

namespace {

AttentionShape checkedShape(int64_t batch, int64_t tokens, int64_t heads,
                            int64_t kvHeads, int64_t headDim, bool causal,
                            const char *name) {
  if (heads <= 0 || kvHeads <= 0 || heads % kvHeads != 0)
    fail(std::string(name) + ": heads (" + std::to_string(heads) +
         ") must be a positive multiple of kvHeads (" +
         std::to_string(kvHeads) + ")");
  if (tokens * kvHeads > int64_t(INT32_MAX))
    fail(std::string(name) + ": too many tokens for one launch");
  return AttentionShape{batch, tokens, heads, kvHeads, headDim, causal};
}

//===----------------------------------------------------------------------===//
// Fused attention (FlashAttention.h)
//===----------------------------------------------------------------------===//

/// The machine operations of FlashAttention.h's block programs: inline PTX.
struct DeviceOps {
  __device__ __forceinline__ static uint32_t shared(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }
  __device__ __forceinline__ void syncThreads() { __syncthreads(); }
  /// 16 bytes global -> shared, bypassing L1; zeros when !valid.
  __device__ __forceinline__ void cpAsync16(void *dst, const void *src,
                                            bool valid) {
    asm volatile(
        "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared(dst)),
        "l"(src), "r"(valid ? 16 : 0)
        : "memory");
  }
  __device__ __forceinline__ void cpAsync4(void *dst, const void *src,
                                           bool valid) {
    asm volatile(
        "cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared(dst)),
        "l"(src), "r"(valid ? 4 : 0)
        : "memory");
  }
  __device__ __forceinline__ void commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  /// Waits until at most N of this thread's committed groups are pending.
  template <int N> __device__ __forceinline__ void waitGroup() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
  }
  __device__ __forceinline__ void ldsm(uint32_t (&r)[4], const uint16_t *p) {
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(shared(p)));
  }
  __device__ __forceinline__ void ldsmTrans(uint32_t (&r)[4],
                                            const uint16_t *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, "
                 "%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared(p)));
  }
  /// d += a b for a 16 x 16 bf16 A, a 16 x 8 bf16 B and f32 d.
  __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                      uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, "
        "%3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ float shflXor(float v, int mask) {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  __device__ __forceinline__ float exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  __device__ __forceinline__ float log2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  }
  /// lo in the low half, as mma and memory order want it.
  __device__ __forceinline__ uint32_t packBf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
  }
  __device__ __forceinline__ float bitsToFloat(uint32_t bits) {
    return __uint_as_float(bits);
  }
  __device__ __forceinline__ void load128(uint32_t (&r)[4], const uint16_t *p) {
    const uint4 v = *reinterpret_cast<const uint4 *>(p);
    r[0] = v.x;
    r[1] = v.y;
    r[2] = v.z;
    r[3] = v.w;
  }
  __device__ __forceinline__ float loadF32(const float *p) { return *p; }
  __device__ __forceinline__ void store32(uint16_t *p, uint32_t v) {
    *reinterpret_cast<uint32_t *>(p) = v;
  }
  __device__ __forceinline__ void storeF32(float *p, float v) { *p = v; }
};

template <int HD>
__global__ void __launch_bounds__(flash::ForwardTiles<HD>::kThreads,
                                  flash::ForwardTiles<HD>::kMinBlocks)
    flashForwardKernel(const __grid_constant__ flash::Problem p) {
  extern __shared__ __align__(16) unsigned char smem[];
  DeviceOps ops;
  flash::forwardBlock<HD>(ops, p, blockIdx.x, blockIdx.y, blockIdx.z,
                          threadIdx.x, smem);
}

template <int HD>
__global__ void flashRowStatsKernel(const __grid_constant__ flash::Problem p,
                                    int64_t n) {
  DeviceOps ops;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    flash::rowStatsElement<HD>(ops, p, e);
}

template <int HD>
__global__ void __launch_bounds__(flash::QueryGradTiles<HD>::kThreads,
                                  flash::QueryGradTiles<HD>::kMinBlocks)
    flashQueryGradKernel(const __grid_constant__ flash::Problem p) {
  extern __shared__ __align__(16) unsigned char smem[];
  DeviceOps ops;
  flash::queryGradBlock<HD>(ops, p, blockIdx.x, blockIdx.y, blockIdx.z,
                            threadIdx.x, smem);
}

template <int HD>
__global__ void __launch_bounds__(flash::KeyValueGradTiles<HD>::kThreads,
                                  flash::KeyValueGradTiles<HD>::kMinBlocks)
    flashKeyValueGradKernel(const __grid_constant__ flash::Problem p) {
  extern __shared__ __align__(16) unsigned char smem[];
  DeviceOps ops;
  flash::keyValueGradBlock<HD>(ops, p, blockIdx.x, blockIdx.y, blockIdx.z,
                               threadIdx.x, smem);
}

template <class Kernel> void allowSharedMemory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    checkCuda(cudaFuncSetAttribute(kernel,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(bytes)),
              "cudaFuncSetAttribute(fused attention)");
}

/// The most shared memory any of the three fused kernels of head size HD
/// asks for: 104 KB for the dQ kernel at 128, more than the 99 KB an sm_86
/// or sm_89 block may have.
template <int HD> constexpr size_t fusedSmemBytes() {
  return std::max({flash::ForwardTiles<HD>::kSmemBytes,
                   flash::QueryGradTiles<HD>::kSmemBytes,
                   flash::KeyValueGradTiles<HD>::kSmemBytes});
}

/// Whether all three fused kernels of this head size fit the device's
/// shared memory. Forward and backward decide alike, so a call's backward
/// never meets a forward from the other path.
bool fusedFits(const DeviceState &st, int64_t headDim) {
  return (headDim == 64 ? fusedSmemBytes<64>() : fusedSmemBytes<128>()) <=
         st.smemOptin;
}

/// Raises the dynamic shared-memory limit of every fused kernel that fits
/// the device above 48 KB, once per device: the first call is the
/// un-captured warm-up run.
void prepareFusedKernels(Rank *rank) {
  DeviceState &st = deviceState(rank);
  if (st.fusedAttentionReady)
    return;
  if (fusedFits(st, 64)) {
    allowSharedMemory(flashForwardKernel<64>,
                      flash::ForwardTiles<64>::kSmemBytes);
    allowSharedMemory(flashQueryGradKernel<64>,
                      flash::QueryGradTiles<64>::kSmemBytes);
    allowSharedMemory(flashKeyValueGradKernel<64>,
                      flash::KeyValueGradTiles<64>::kSmemBytes);
  }
  if (fusedFits(st, 128)) {
    allowSharedMemory(flashForwardKernel<128>,
                      flash::ForwardTiles<128>::kSmemBytes);
    allowSharedMemory(flashQueryGradKernel<128>,
                      flash::QueryGradTiles<128>::kSmemBytes);
    allowSharedMemory(flashKeyValueGradKernel<128>,
                      flash::KeyValueGradTiles<128>::kSmemBytes);
  }
  st.fusedAttentionReady = true;
}

/// Whether the fused kernels take a call they are asked for: the tiles fit
/// the device's shared memory, the grid fits (heads and batch index grid
/// dimensions y and z) and every bf16 pointer is 16-byte aligned (rows are
/// then too: headDim is 64 or 128; lse is read and written a float at a
/// time).
bool fusedTakes(Rank *rank, const AttentionShape &a, bool aligned) {
  return aligned && fusedFits(deviceState(rank), a.headDim) &&
         a.heads <= 65535 && a.batch <= 65535 && a.tokens <= INT32_MAX - 256;
}

bool allAligned(std::initializer_list<const void *> pointers) {
  for (const void *p : pointers)
    if (!aligned16(p))
      return false;
  return true;
}

CudnnAttentionShape cudnnShape(const AttentionShape &a, bool backward) {
  return CudnnAttentionShape{a.batch,   a.tokens, a.heads, a.kvHeads,
                             a.headDim, a.causal, backward};
}

/// The path of one call: attentionPath's choice, then cuDNN declining
/// (why in `why`) to the fused kernels, and those declining to the
/// materialized path.
AttentionPath pathFor(Rank *rank, DType dt, const AttentionShape &a,
                      bool backward, bool aligned, std::string *why) {
  const AttentionPath first = attentionPath(dt, a.headDim);
  if (first == AttentionPath::Materialized)
    return first;
  if (first == AttentionPath::Cudnn) {
    std::string declined =
        aligned ? cudnnAttentionDeclines(rank, cudnnShape(a, backward))
                : "a pointer is not 16-byte aligned";
    if (declined.empty())
      return AttentionPath::Cudnn;
    if (why)
      *why = std::move(declined);
  }
  return fusedTakes(rank, a, aligned) ? AttentionPath::Fused
                                      : AttentionPath::Materialized;
}

flash::Problem fusedProblem(const AttentionShape &a) {
  flash::Problem p{};
  p.dims = flash::makeDims(a.batch, a.tokens, a.heads, a.kvHeads, a.headDim,
                           a.causal);
  return p;
}

template <int HD> struct FusedKernels {
  using Forward = flash::ForwardTiles<HD>;
  using QueryGrad = flash::QueryGradTiles<HD>;
  using KeyValueGrad = flash::KeyValueGradTiles<HD>;

  static void forward(const flash::Problem &p, cudaStream_t stream) {
    const flash::GridShape g = flash::forwardGrid(p.dims);
    flashForwardKernel<HD><<<dim3(g.x, g.y, g.z), Forward::kThreads,
                             Forward::kSmemBytes, stream>>>(p);
    checkLaunch("attention_forward (fused)");
  }

  static void backward(Rank *rank, const flash::Problem &p,
                       cudaStream_t stream) {
    const flash::Dims &d = p.dims;
    const int64_t n = int64_t(d.batch) * d.tokens * d.heads;
    flashRowStatsKernel<HD><<<gridFor(rank, n, 256), 256, 0, stream>>>(p, n);
    checkLaunch("attention_backward (fused row stats)");
    const flash::GridShape gq = flash::queryGradGrid(d);
    flashQueryGradKernel<HD><<<dim3(gq.x, gq.y, gq.z), QueryGrad::kThreads,
                               QueryGrad::kSmemBytes, stream>>>(p);
    checkLaunch("attention_backward (fused dq)");
    const flash::GridShape gk = flash::keyValueGradGrid(d);
    flashKeyValueGradKernel<HD>
        <<<dim3(gk.x, gk.y, gk.z), KeyValueGrad::kThreads,
           KeyValueGrad::kSmemBytes, stream>>>(p);
    checkLaunch("attention_backward (fused dk, dv)");
  }
};

void fusedForward(Rank *rank, const AttentionShape &a, const bf16 *q,
                  const bf16 *k, const bf16 *v, bf16 *o, float *lse) {
  prepareFusedKernels(rank);
  flash::Problem p = fusedProblem(a);
  p.q = reinterpret_cast<const uint16_t *>(q);
  p.k = reinterpret_cast<const uint16_t *>(k);
  p.v = reinterpret_cast<const uint16_t *>(v);
  p.o = reinterpret_cast<uint16_t *>(o);
  p.lse = lse;
  if (a.headDim == 64)
    FusedKernels<64>::forward(p, computeStream(rank));
  else
    FusedKernels<128>::forward(p, computeStream(rank));
}

/// Its row statistics in `workspace` when that holds them (the arena's,
/// `workspaceBytes` long), else in the compute stream's scratch.
void fusedBackward(Rank *rank, const AttentionShape &a, const bf16 *q,
                   const bf16 *k, const bf16 *v, const bf16 *o,
                   const float *lse, const bf16 *dout, bf16 *dq, bf16 *dk,
                   bf16 *dv, void *workspace, size_t workspaceBytes) {
  prepareFusedKernels(rank);
  const size_t stats = size_t(a.batch * a.heads * a.tokens) * sizeof(float);
  ScratchLayout layout;
  size_t lse2At = layout.add(stats);
  size_t deltaAt = layout.add(stats);
  char *base =
      workspace && layout.bytes <= workspaceBytes
          ? static_cast<char *>(workspace)
          : static_cast<char *>(scratch(rank, kComputeStream, layout.bytes));
  flash::Problem p = fusedProblem(a);
  p.q = reinterpret_cast<const uint16_t *>(q);
  p.k = reinterpret_cast<const uint16_t *>(k);
  p.v = reinterpret_cast<const uint16_t *>(v);
  // The backward only reads o and lse; Problem carries the forward's view.
  p.o = const_cast<uint16_t *>(reinterpret_cast<const uint16_t *>(o));
  p.lse = const_cast<float *>(lse);
  p.dout = reinterpret_cast<const uint16_t *>(dout);
  p.lse2 = reinterpret_cast<float *>(base + lse2At);
  p.delta = reinterpret_cast<float *>(base + deltaAt);
  p.dq = reinterpret_cast<uint16_t *>(dq);
  p.dk = reinterpret_cast<uint16_t *>(dk);
  p.dv = reinterpret_cast<uint16_t *>(dv);
  if (a.headDim == 64)
    FusedKernels<64>::backward(rank, p, computeStream(rank));
  else
    FusedKernels<128>::backward(rank, p, computeStream(rank));
}

} // namespace

AttentionPath attentionPath(DType dt, int64_t headDim) {
  const char *env = std::getenv("DPRT_ATTENTION");
  AttentionPath asked = AttentionPath::Cudnn;
  if (env && *env) {
    if (std::strcmp(env, "materialized") == 0)
      asked = AttentionPath::Materialized;
    else if (std::strcmp(env, "fused") == 0)
      asked = AttentionPath::Fused;
    else if (std::strcmp(env, "cudnn") != 0)
      fail(std::string("DPRT_ATTENTION=") + env +
           ": expected 'cudnn', 'fused' or 'materialized'");
  }
  if (asked == AttentionPath::Materialized || dt != DType::BF16 ||
      (headDim != 64 && headDim != 128))
    return AttentionPath::Materialized;
  if (asked == AttentionPath::Cudnn && !cudnnAttentionBuilt())
    return AttentionPath::Fused;
  return asked;
}

AttentionPath attentionPathFor(Rank *rank, DType dt, int64_t batch,
                               int64_t tokens, int64_t heads, int64_t kvHeads,
                               int64_t headDim, bool causal, bool backward,
                               std::string *why) {
  if (why)
    why->clear();
  AttentionShape a =
      checkedShape(batch, tokens, heads, kvHeads, headDim, causal,
                   backward ? "attention_backward" : "attention_forward");
  return pathFor(rank, dt, a, backward, true, why);
}

void attention_forward(Rank *rank, DType dt, const void *q, const void *k,
                       const void *v, void *o, void *lse, int64_t batch,
                       int64_t tokens, int64_t heads, int64_t kvHeads,
                       int64_t headDim, bool causal) {
  dispatchCompute(dt, "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || tokens <= 0)
      return;
    AttentionShape a = checkedShape(batch, tokens, heads, kvHeads, headDim,
                                    causal, "attention_forward");
    if constexpr (std::is_same_v<T, bf16>) {
      switch (pathFor(rank, dt, a, false, allAligned({q, k, v, o}), nullptr)) {
      case AttentionPath::Cudnn:
        cudnnAttentionForward(rank, cudnnShape(a, false), q, k, v, o,
                              static_cast<float *>(lse));
        return;
      case AttentionPath::Fused:
        fusedForward(rank, a, static_cast<const T *>(q),
                     static_cast<const T *>(k), static_cast<const T *>(v),
                     static_cast<T *>(o), static_cast<float *>(lse));
        return;
      case AttentionPath::Materialized:
        break;
      }
    }
    materializedForward(rank, dt, a, static_cast<const T *>(q),
                        static_cast<const T *>(k), static_cast<const T *>(v),
                        static_cast<T *>(o), static_cast<float *>(lse));
  });
}

void attention_backward(Rank *rank, DType dt, const void *q, const void *k,
                        const void *v, const void *o, const void *lse,
                        const void *dout, void *dq, void *dk, void *dv,
                        int64_t batch, int64_t tokens, int64_t heads,
                        int64_t kvHeads, int64_t headDim, bool causal,
                        void *workspace) {
  // The materialized path does not read o: D = sum_s P dP (equal to the
  // rowsum of dO o O) is formed from P and dP in f32. The fused and cuDNN
  // paths read it for D. Every path reads lse as the natural-log
  // log-sum-exp, so a backward may follow another path's forward. The
  // workspace, when given, holds attentionBackwardWorkspaceBytes (the
  // cuDNN and fused paths use it; the materialized path its scratch).
  dispatchCompute(dt, "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    if (batch <= 0 || tokens <= 0)
      return;
    AttentionShape a = checkedShape(batch, tokens, heads, kvHeads, headDim,
                                    causal, "attention_backward");
    if constexpr (std::is_same_v<T, bf16>) {
      const size_t workspaceBytes =
          workspace ? size_t(attentionBackwardWorkspaceBytes(
                          dt, batch, tokens, heads, kvHeads, headDim))
                    : 0;
      switch (pathFor(rank, dt, a, true,
                      allAligned({q, k, v, o, dout, dq, dk, dv}), nullptr)) {
      case AttentionPath::Cudnn:
        cudnnAttentionBackward(rank, cudnnShape(a, true), q, k, v, o,
                               static_cast<const float *>(lse), dout, dq, dk,
                               dv, workspace, workspaceBytes);
        return;
      case AttentionPath::Fused:
        fusedBackward(
            rank, a, static_cast<const T *>(q), static_cast<const T *>(k),
            static_cast<const T *>(v), static_cast<const T *>(o),
            static_cast<const float *>(lse), static_cast<const T *>(dout),
            static_cast<T *>(dq), static_cast<T *>(dk), static_cast<T *>(dv),
            workspace, workspaceBytes);
        return;
      case AttentionPath::Materialized:
        break;
      }
    }
    materializedBackward(rank, dt, a, static_cast<const T *>(q),
                         static_cast<const T *>(k), static_cast<const T *>(v),
                         static_cast<const float *>(lse),
                         static_cast<const T *>(dout), static_cast<T *>(dq),
                         static_cast<T *>(dk), static_cast<T *>(dv));
  });
}

} // namespace dprt::cuda
