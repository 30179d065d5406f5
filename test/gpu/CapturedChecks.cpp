//===- CapturedChecks.cpp - Kernels replayed in CUDA graphs --------------===//
//
// runCaptured: a step of kernels (clip factors, AdamW, events between the
// two streams, an all-gather and a sum) and the fused attention step, each
// warmed up, captured and replayed with new inputs and step state, every
// call against the CPU backend; and the driver's services around the steps:
// the finiteness check of the gradient shards and the queued copies. The
// kernels one by one are in KernelChecks.cpp.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "AttentionPath.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cmath>
#include <cstring>

namespace dpc::gpucheck {

using dprt::ClipMode;

//===----------------------------------------------------------------------===//
// runCaptured
//===----------------------------------------------------------------------===//

namespace {

// The captured step's buffers, at fixed arena offsets (a graph replays fixed
// addresses); f32, kStepN elements each.
constexpr int64_t kStepN = 4099;
constexpr int64_t kSlotBytes = 32768;
constexpr int64_t kMaster = 1 * kSlotBytes, kM = 2 * kSlotBytes,
                  kV = 3 * kSlotBytes, kGrad = 4 * kSlotBytes,
                  kCopy = 5 * kSlotBytes, kSum = 6 * kSlotBytes,
                  kN2 = 7 * kSlotBytes, kMask = 8 * kSlotBytes,
                  kClip = 9 * kSlotBytes;
/// Samples of the captured clip factors.
constexpr int64_t kClipBatch = 64;

/// Clip factors and AdamW on the compute stream, a copy of the new master
/// on the communication stream (all_gather of one rank), and a sum of the
/// copies back on the compute stream, ordered by events. The clipping bound,
/// the learning rate and the weight decay come from the StepState, so each
/// replay must follow the values of its call.
void capturedStep(dprt::Rank *r) {
  char *a = dprt::arena(r);
  gpu::clip_factors(r, F32, a + kN2, a + kMask, a + kClip, kClipBatch, 1,
                    ClipMode::Flat, 1.0, 0.01, 1e-3);
  gpu::adamw_update(r, F32, a + kMaster, a + kM, a + kV, a + kGrad, kStepN, 0.9,
                    0.999, 1e-8);
  gpu::record_event(r, 0, 0);
  gpu::wait_event(r, 1, 0);
  gpu::all_gather(r, F32, a + kMaster, a + kCopy, kStepN, 1);
  gpu::record_event(r, 1, 1);
  gpu::wait_event(r, 0, 1);
  gpu::accumulate(r, F32, a + kCopy, a + kSum, kStepN);
}

} // namespace

void capturedStepCheck(Context &ctx) {
  if (!ctx.begin("runCaptured", "f32",
                 "clip+adamw+events+copy, 4 calls, C/lr/wd per call"))
    return;
  ctx.guarded([&] {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> master(kStepN), m(kStepN), v(kStepN), grad(kStepN),
        sum(kStepN, 0.0f);
    for (int64_t i = 0; i < kStepN; ++i) {
      master[i] = normal(ctx.rng);
      m[i] = 0.1f * normal(ctx.rng);
      v[i] = 0.01f * std::fabs(normal(ctx.rng));
    }
    size_t bytes = size_t(kStepN) * sizeof(float);
    gpu::copyToArena(ctx.gpu, kMaster, master.data(), int64_t(bytes));
    gpu::copyToArena(ctx.gpu, kM, m.data(), int64_t(bytes));
    gpu::copyToArena(ctx.gpu, kV, v.data(), int64_t(bytes));
    gpu::copyToArena(ctx.gpu, kSum, sum.data(), int64_t(bytes));
    std::vector<float> n2(kClipBatch), mask(kClipBatch, 1.0f), clip(kClipBatch);
    for (int64_t b = 0; b < kClipBatch; ++b)
      n2[b] = 4.0f * std::fabs(normal(ctx.rng));
    gpu::copyToArena(ctx.gpu, kN2, n2.data(), kClipBatch * 4);
    gpu::copyToArena(ctx.gpu, kMask, mask.data(), kClipBatch * 4);
    // Call 1 runs un-captured, call 2 captures and launches, calls 3 and 4
    // replay with a new StepState and new gradients.
    for (int call = 1; call <= 4; ++call) {
      dprt::StepState state{};
      state.step = call;
      state.gradScale = 1.0 / double(call + 1);
      state.lrScale = 1.0 - 0.1 * call;
      state.lr = 1e-2 * call;
      state.weightDecay = 0.01 * (call % 2);
      state.clipNorm = 0.5 * call;
      ctx.setStepState(state);
      for (int64_t i = 0; i < kStepN; ++i)
        grad[i] = normal(ctx.rng);
      gpu::copyToArena(ctx.gpu, kGrad, grad.data(), int64_t(bytes));
      gpu::runCaptured(ctx.gpu, 7, capturedStep);
      cpu::clip_factors(ctx.cpu, F32, n2.data(), mask.data(), clip.data(),
                        kClipBatch, 1, ClipMode::Flat, 1.0, 0.01, 1e-3);
      cpu::adamw_update(ctx.cpu, F32, master.data(), m.data(), v.data(),
                        grad.data(), kStepN, 0.9, 0.999, 1e-8);
      for (int64_t i = 0; i < kStepN; ++i)
        sum[i] += master[i];
      auto check = [&](const char *name, int64_t offset,
                       const std::vector<float> &want, double tolerance) {
        std::vector<float> got(want.size());
        gpu::copyFromArena(ctx.gpu, got.data(), offset,
                           int64_t(want.size() * sizeof(float)));
        Row row = compareValues(std::vector<double>(got.begin(), got.end()),
                                std::vector<double>(want.begin(), want.end()),
                                tolerance);
        row.kernel = "runCaptured." + std::string(name);
        row.dtype = "f32";
        row.shape = capturedCallLabel(call);
        row.seed = ctx.seed;
        ctx.report->add(row);
      };
      check("master", kMaster, master, 1e-6);
      check("v", kV, v, 1e-6);
      check("sum", kSum, sum, 1e-6);
      check("clip", kClip, clip, 1e-6);
    }
  });
}

namespace {

// The captured attention step: bf16, fixed arena offsets from 1 MiB on, 100
// tokens (a partial block), causal, GQA group 2.
constexpr int64_t kAttB = 1, kAttT = 100, kAttH = 4, kAttKV = 2, kAttHd = 64;
constexpr int64_t kAttQ = kAttB * kAttT * kAttH * kAttHd;
constexpr int64_t kAttK = kAttB * kAttT * kAttKV * kAttHd;
constexpr int64_t kAttL = kAttB * kAttH * kAttT;
constexpr int64_t kAttSlot = int64_t(1) << 16; // bytes, >= every buffer
constexpr int64_t kAttBase = int64_t(1) << 20;
/// AttWorkspace, last: the backward's workspace as dpc reserves it in the
/// arena (attentionBackwardWorkspaceBytes, larger than a slot).
enum AttBuffer {
  AttQ,
  AttK,
  AttV,
  AttO,
  AttLse,
  AttDout,
  AttDq,
  AttDk,
  AttDv,
  AttWorkspace
};
constexpr int64_t attOffset(AttBuffer b) { return kAttBase + b * kAttSlot; }

void capturedAttention(dprt::Rank *r) {
  char *a = dprt::arena(r);
  auto at = [&](AttBuffer b) { return a + attOffset(b); };
  gpu::attention_forward(r, BF16, at(AttQ), at(AttK), at(AttV), at(AttO),
                         at(AttLse), kAttB, kAttT, kAttH, kAttKV, kAttHd, true);
  gpu::attention_backward(r, BF16, at(AttQ), at(AttK), at(AttV), at(AttO),
                          at(AttLse), at(AttDout), at(AttDq), at(AttDk),
                          at(AttDv), kAttB, kAttT, kAttH, kAttKV, kAttHd, true,
                          at(AttWorkspace));
}

} // namespace

/// The captured attention step under DPRT_ATTENTION=`asked`, in runCaptured
/// slot `slot`.
static void capturedAttentionRun(Context &ctx, const char *asked, int slot) {
  ScopedEnv path("DPRT_ATTENTION", asked);
  if (!ctx.begin("runCaptured.attention", "bf16",
                 std::string("B1 T100 H4 KV2 hd64 causal, 3 calls, ") + asked))
    return;
  static_assert(kAttQ * 2 <= kAttSlot && kAttL * 4 <= kAttSlot,
                "the buffers fit their slots");
  static_assert(attOffset(AttWorkspace) +
                        dprt::attentionBackwardWorkspaceBytes(
                            BF16, kAttB, kAttT, kAttH, kAttKV, kAttHd) <=
                    kNcclArenaBytes,
                "the workspace fits the arena");
  ctx.guarded([&] {
    const gpu::AttentionPath runs[2] = {
        gpu::attentionPathFor(ctx.gpu, BF16, kAttB, kAttT, kAttH, kAttKV,
                              kAttHd, true, false),
        gpu::attentionPathFor(ctx.gpu, BF16, kAttB, kAttT, kAttH, kAttKV,
                              kAttHd, true, true)};
    auto name = [](gpu::AttentionPath p) {
      return p == gpu::AttentionPath::Cudnn   ? "cudnn"
             : p == gpu::AttentionPath::Fused ? "fused"
                                              : "materialized";
    };
    const std::string label =
        runs[0] == runs[1]
            ? std::string(name(runs[0]))
            : std::string(name(runs[0])) + " (backward " + name(runs[1]) + ")";
    // Call 1 runs un-captured, call 2 captures and launches, call 3
    // replays; each with new inputs at the same addresses.
    for (int call = 1; call <= 3; ++call) {
      Buffer q(BF16, kAttQ), k(BF16, kAttK), v(BF16, kAttK), o(BF16, kAttQ),
          lse(F32, kAttL), dout(BF16, kAttQ), dq(BF16, kAttQ), dk(BF16, kAttK),
          dv(BF16, kAttK);
      for (Buffer *b : {&q, &k, &v, &dout})
        b->randn(ctx.rng);
      for (Buffer *b : {&o, &lse, &dq, &dk, &dv})
        b->poison();
      auto put = [&](AttBuffer at, Buffer &b) {
        gpu::copyToArena(ctx.gpu, attOffset(at), b.h(),
                         b.size() * dprt::sizeOf(b.type()));
      };
      put(AttQ, q);
      put(AttK, k);
      put(AttV, v);
      put(AttDout, dout);
      put(AttO, o);
      put(AttLse, lse);
      put(AttDq, dq);
      put(AttDk, dk);
      put(AttDv, dv);
      // Poisoned on every call: no path may read what it did not write.
      Buffer workspace(F32, (dprt::attentionBackwardWorkspaceBytes(
                                 BF16, kAttB, kAttT, kAttH, kAttKV, kAttHd) +
                             3) /
                                4);
      workspace.poison();
      put(AttWorkspace, workspace);
      gpu::runCaptured(ctx.gpu, slot, capturedAttention);
      cpu::attention_forward(ctx.cpu, BF16, q.h(), k.h(), v.h(), o.h(), lse.h(),
                             kAttB, kAttT, kAttH, kAttKV, kAttHd, true);
      // The GPU's backward used its own forward outputs; so does the CPU's.
      cpu::attention_backward(ctx.cpu, BF16, q.h(), k.h(), v.h(), o.h(),
                              lse.h(), dout.h(), dq.h(), dk.h(), dv.h(), kAttB,
                              kAttT, kAttH, kAttKV, kAttHd, true, nullptr);
      auto check = [&](const char *name, AttBuffer at, Buffer &want,
                       double tolerance) {
        std::vector<uint8_t> bytes(size_t(want.size()) *
                                   size_t(dprt::sizeOf(want.type())));
        gpu::copyFromArena(ctx.gpu, bytes.data(), attOffset(at),
                           int64_t(bytes.size()));
        std::vector<double> got(size_t(want.size()));
        for (size_t i = 0; i < got.size(); ++i) {
          if (want.type() == F32) {
            float f;
            std::memcpy(&f, bytes.data() + 4 * i, 4);
            got[i] = f;
          } else {
            uint16_t h;
            std::memcpy(&h, bytes.data() + 2 * i, 2);
            got[i] = bf16ToFloat(h);
          }
        }
        Row row = compareValues(got, want.hostValues(), tolerance);
        row.kernel = std::string("runCaptured.attention.") + name;
        row.dtype = "bf16";
        row.shape = label + ", " + capturedCallLabel(call);
        row.seed = ctx.seed;
        ctx.report->add(row);
      };
      check("o", AttO, o, 2e-2);
      check("lse", AttLse, lse, 1e-5);
      check("dq", AttDq, dq, 3e-2);
      check("dk", AttDk, dk, 3e-2);
      check("dv", AttDv, dv, 3e-2);
    }
  });
}

void capturedAttentionCheck(Context &ctx) {
  // cuDNN (in a build with it) and the fused kernels, each in its own slot.
  bool cudnnBuilt = false;
  {
    ScopedEnv path("DPRT_ATTENTION", "cudnn");
    cudnnBuilt = gpu::attentionPath(BF16, kAttHd) == gpu::AttentionPath::Cudnn;
  }
  if (cudnnBuilt)
    capturedAttentionRun(ctx, "cudnn", 8);
  capturedAttentionRun(ctx, "fused", 9);
}

//===----------------------------------------------------------------------===//
// allFinite and allFiniteRanges
//===----------------------------------------------------------------------===//

void allFiniteCheck(Context &ctx) {
  if (!ctx.begin("allFiniteRanges", "f32", "3 ranges, NaN/inf in each"))
    return;
  ctx.guarded([&] {
    // Three ranges in the arena slots of the captured step (4099, 24576 and
    // 0 elements: the middle one spans three slots, the last is empty).
    const int64_t offsets[3] = {kMaster, kM, kClip};
    const int64_t counts[3] = {kStepN, 3 * kSlotBytes / 4, 0};
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(size_t(3 * kSlotBytes / 4));
    for (float &v : values)
      v = 1e3f * normal(ctx.rng);
    values[17] = 1e18f; // large but finite: its square, 1e36, is too
    for (int r = 0; r < 2; ++r)
      gpu::copyToArena(ctx.gpu, offsets[r], values.data(),
                       counts[r] * int64_t(sizeof(float)));
    auto expect = [&](const std::string &what, bool want) {
      bool ranges = gpu::allFiniteRanges(ctx.gpu, F32, offsets, counts, 3);
      bool each = true;
      for (int r = 0; r < 3; ++r)
        each &= gpu::allFinite(ctx.gpu, F32, offsets[r], counts[r]);
      ctx.result(what, ranges == want && each == want,
                 std::string("ranges ") + (ranges ? "finite" : "not finite") +
                     ", one at a time " + (each ? "finite" : "not finite"));
    };
    expect("finite", true);
    const float bad[2] = {std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::infinity()};
    for (int r = 0; r < 2; ++r)
      for (float b : bad) {
        const int64_t at = r == 0 ? kStepN - 1 : 12345;
        gpu::copyToArena(ctx.gpu, offsets[r] + at * 4, &b, 4);
        expect(std::string(std::isnan(b) ? "nan" : "inf") + " in range " +
                   std::to_string(r),
               false);
        gpu::copyToArena(ctx.gpu, offsets[r] + at * 4, &values[size_t(at)], 4);
      }
    expect("finite again", true);
  });
}

//===----------------------------------------------------------------------===//
// queueCopyToArena and queueCopyFromArena
//===----------------------------------------------------------------------===//

void queuedCopiesCheck(Context &ctx) {
  if (!ctx.begin("queuedCopies", "f32",
                 "host->arena->host around a kernel, reused source, growth"))
    return;
  ctx.guarded([&] {
    // In the captured step's slots. The driver's pattern: a micro-step's
    // inputs queued, the step, its losses queued back, the next inputs from
    // the same host buffer, all before one synchronize.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto randoms = [&](size_t n) {
      std::vector<float> v(n);
      for (float &x : v)
        x = normal(ctx.rng);
      return v;
    };
    const size_t n = size_t(kStepN), bytes = n * sizeof(float);
    const std::vector<float> base = randoms(n), first = randoms(n),
                             second = randoms(n), wide = randoms(3 * n);
    gpu::copyToArena(ctx.gpu, kSum, base.data(), int64_t(bytes));
    std::vector<float> source = first;
    std::vector<float> readFirst(n), readSum(n), readSecond(n),
        readWide(3 * n);
    char *a = ctx.gpu->arena;
    gpu::queueCopyToArena(ctx.gpu, kGrad, source.data(), int64_t(bytes));
    gpu::accumulate(ctx.gpu, F32, a + kGrad, a + kSum, kStepN);
    gpu::queueCopyFromArena(ctx.gpu, readFirst.data(), kGrad, int64_t(bytes));
    source = second; // at once: the queued copy took its bytes
    gpu::queueCopyToArena(ctx.gpu, kGrad, source.data(), int64_t(bytes));
    gpu::queueCopyFromArena(ctx.gpu, readSum.data(), kSum, int64_t(bytes));
    gpu::queueCopyFromArena(ctx.gpu, readSecond.data(), kGrad,
                            int64_t(bytes));
    // Larger than what is left of the staging: it lands what is queued and
    // grows, and the reads before it still arrive.
    gpu::queueCopyToArena(ctx.gpu, kM, wide.data(), int64_t(3 * bytes));
    gpu::queueCopyFromArena(ctx.gpu, readWide.data(), kM, int64_t(3 * bytes));
    gpu::synchronize(ctx.gpu);
    auto same = [](const std::vector<float> &x, const std::vector<float> &y) {
      return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    };
    std::vector<float> sum(n);
    for (size_t i = 0; i < n; ++i)
      sum[i] = base[i] + first[i];
    double sumErr = 0;
    for (size_t i = 0; i < n; ++i)
      sumErr = std::max(sumErr, double(std::fabs(readSum[i] - sum[i])));
    ctx.result("first copy before the kernel", same(readFirst, first),
               "read back what was queued first");
    ctx.result("kernel between the copies", sumErr <= 1e-6,
               "max |sum - (base + first)| = " + std::to_string(sumErr));
    ctx.result("second copy after it", same(readSecond, second),
               "read back the reused source's new bytes");
    ctx.result("read past the staging", same(readWide, wide),
               "3 slots read back after the staging grew");
    // The same reads again, into the grown staging: all four between two
    // waits now (the driver's next step of the same shape).
    const std::vector<float> wide2 = randoms(3 * n);
    std::vector<float> again(n), againWide(3 * n);
    gpu::queueCopyToArena(ctx.gpu, kM, wide2.data(), int64_t(3 * bytes));
    for (int k = 0; k < 3; ++k)
      gpu::queueCopyFromArena(ctx.gpu, again.data(), kGrad, int64_t(bytes));
    gpu::queueCopyFromArena(ctx.gpu, againWide.data(), kM,
                            int64_t(3 * bytes));
    gpu::synchronize(ctx.gpu);
    ctx.result("grown staging reused", same(again, second) &&
                                           same(againWide, wide2),
               "4 reads of 6 slots read back in the grown staging");
  });
}

} // namespace dpc::gpucheck
