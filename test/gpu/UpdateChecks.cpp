//===- UpdateChecks.cpp - The rows updates and update groups on the GPU ---===//
//
// The *_update_rows optimizers against the CPU's and, bit for bit, against
// the composition they replace; update_group against the same calls one by
// one; and the update kernels' own finiteness flag. The tolerances are
// KernelChecks.cpp's.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "dprt/backend.h"
#include "dprt/kernels.h"

#include <cstring>
#include <limits>
#include <vector>

namespace dpc::gpucheck {

dprt::StepState checkedUpdateState() {
  dprt::StepState state{};
  state.step = 3;
  state.gradScale = 0.25;
  state.lrScale = 0.5;
  state.lr = 1e-2;
  state.weightDecay = 0.01;
  return state;
}

namespace {

/// checkedUpdateState with Philox noise of std 0.5 under a fixed key (an
/// update draws it where its noise index is not -1).
dprt::StepState noisedUpdateState() {
  dprt::StepState state = checkedUpdateState();
  state.noiseStd = 0.5;
  state.noiseKey[0] = 0x243f6a8885a308d3ull;
  state.noiseKey[1] = 0x13198a2e03707344ull;
  state.noiseGenerator = static_cast<int32_t>(dprt::NoiseGeneratorKind::Philox);
  return state;
}

/// The bytes of the device side of `b`, to compare results bit for bit (a
/// -0 against a +0 too).
std::vector<uint8_t> deviceBytes(Buffer &b) {
  std::vector<uint8_t> bytes(size_t(b.size()) * size_t(dprt::sizeOf(b.type())));
  cudaCheck(
      cudaMemcpy(bytes.data(), b.d(), bytes.size(), cudaMemcpyDeviceToHost),
      "cudaMemcpy(deviceBytes)");
  return bytes;
}

/// Adds a row: whether x and y hold the same bits on the device.
void sameBits(Context &ctx, const std::string &output, Buffer &x, Buffer &y) {
  std::vector<uint8_t> a = deviceBytes(x), b = deviceBytes(y);
  const size_t es = size_t(dprt::sizeOf(x.type()));
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < a.size(); i += es)
    if (std::memcmp(&a[i], &b[i], es) != 0) {
      if (first < 0)
        first = int64_t(i / es);
      ++differ;
    }
  ctx.result(output, differ == 0,
             differ == 0 ? "identical"
                         : std::to_string(differ) + " elements differ, first " +
                               std::to_string(first));
}

/// The *_update_rows optimizers (one micro-step a step: the update reads
/// the materialized rows and their clip factors): against the CPU's, and bit
/// for bit against the GPU's zeroed gradient, rows_weighted_sum and plain
/// update, which they replace. Rows of f32 and bf16, with one masked sample
/// (NaN rows), with and without noise; n = 65536 (16-byte loads of the rows
/// and 4 floats of the master a thread), odd, and misaligned by an element.
/// MXFP8 rows of 65536 also with 5 and 12 samples: SGD's kernel that
/// fetches the rows ahead of the noise takes at most 8 (Optimizers.cu).
void updateRowsChecks(Context &ctx) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const char *names[] = {"sgd_update_rows", "momentum_update_rows",
                         "momentum_update_rows", "adamw_update_rows"};
  for (DType dt : {F32, BF16, DType::MXFP8})
    for (int shape = 0; shape < 4; ++shape)
      for (int64_t batch : {8, 5, 12})
        for (bool noise : {false, true})
          for (int opt = 0; opt < 4; ++opt) {
            if (batch != 8 && (dt != DType::MXFP8 || shape != 0))
              continue;
            // MXFP8 rows hold whole blocks of 32: 100000 for the odd length
            // (rows not 8-byte aligned: the fused update). Shape 3, MXFP8
            // only: 67840 = 33 tiles of 2048 and 256 elements, rows 8-byte
            // aligned, so AdamW's tiles (Optimizers.cu) end in a partial one.
            if (shape == 3 && dt != DType::MXFP8)
              continue;
            const int64_t n = shape == 1
                                  ? (dt == DType::MXFP8 ? 100000 : 100003)
                              : shape == 3 ? 67840
                                           : 65536;
            const int64_t mis = shape == 2 ? 1 : 0;
            const bool nesterov = opt == 2;
            if (!ctx.begin(names[opt], nameOf(dt),
                           dims({{"B", batch}, {"n", n}}, shape == 1) +
                               (mis ? " misaligned" : "") +
                               (nesterov ? " nesterov" : "") +
                               (noise ? " noise" : "") + " masked"))
              continue;
            ctx.guarded([&] {
              ctx.setStepState(noisedUpdateState());
              const int64_t index = noise ? 1000003 : -1;
              // The fused update on (w, a, b); the composition it replaces on
              // (w2, a2, b2).
              Buffer w(F32, n, mis), a(F32, n, mis), b(F32, n, mis),
                  g(dt, batch * n, mis, n), c(F32, batch), w2(F32, n, mis),
                  a2(F32, n, mis), b2(F32, n, mis), grad(F32, n, mis);
              // With bf16 rows the fused update also stores the bf16 copy of
              // the weights (params, what layers read) at p; the composition
              // casts w2 into p2.
              const bool copy = dt == BF16;
              Buffer p(BF16, n, mis), p2(BF16, n, mis);
              void *ph = copy ? p.h() : nullptr, *pd = copy ? p.d() : nullptr;
              w.randn(ctx.rng);
              a.randn(ctx.rng, 0.1);
              b.uniform(ctx.rng, 0, 0.01);
              g.randn(ctx.rng);
              for (int64_t i = n; i < 2 * n; ++i)
                g.set(i, nan);
              g.upload();
              clipFactorsWithMaskedSample(c, ctx.rng);
              for (int64_t i = 0; i < n; ++i) {
                w2.set(i, w.get(i));
                a2.set(i, a.get(i));
                b2.set(i, b.get(i));
              }
              for (Buffer *x : {&w2, &a2, &b2})
                x->upload();
              if (opt == 0) {
                cpu::sgd_update_rows(ctx.cpu, dt, w.h(), g.h(), c.h(), batch, n,
                                     index, BF16, ph);
                gpu::sgd_update_rows(ctx.gpu, dt, w.d(), g.d(), c.d(), batch, n,
                                     index, BF16, pd);
              } else if (opt < 3) {
                cpu::momentum_update_rows(ctx.cpu, dt, w.h(), a.h(), g.h(),
                                          c.h(), batch, n, 0.9, nesterov, index,
                                          BF16, ph);
                gpu::momentum_update_rows(ctx.gpu, dt, w.d(), a.d(), g.d(),
                                          c.d(), batch, n, 0.9, nesterov, index,
                                          BF16, pd);
              } else {
                cpu::adamw_update_rows(ctx.cpu, dt, w.h(), a.h(), b.h(), g.h(),
                                       c.h(), batch, n, 0.9, 0.999, 1e-8, index,
                                       BF16, ph);
                gpu::adamw_update_rows(ctx.gpu, dt, w.d(), a.d(), b.d(), g.d(),
                                       c.d(), batch, n, 0.9, 0.999, 1e-8, index,
                                       BF16, pd);
              }
              ctx.compare("master", w, 1e-6);
              if (opt > 0)
                ctx.compare(opt < 3 ? "velocity" : "m", a, 1e-6);
              if (opt == 3)
                ctx.compare("v", b, 1e-6);
              // A master within 1e-6 of the CPU's can round to the neighbouring
              // bf16: the copies agree normwise to far better than 1 ulp.
              if (copy)
                ctx.compare("params", p, 1e-4);
              gpu::zero(ctx.gpu, grad.d(), n * int64_t(sizeof(float)));
              gpu::rows_weighted_sum(ctx.gpu, dt, g.d(), c.d(), grad.d(), batch,
                                     n);
              if (opt == 0)
                gpu::sgd_update(ctx.gpu, F32, w2.d(), grad.d(), n, index);
              else if (opt < 3)
                gpu::momentum_update(ctx.gpu, F32, w2.d(), a2.d(), grad.d(), n,
                                     0.9, nesterov, index);
              else
                gpu::adamw_update(ctx.gpu, F32, w2.d(), a2.d(), b2.d(),
                                  grad.d(), n, 0.9, 0.999, 1e-8, index);
              gpu::synchronize(ctx.gpu);
              const std::string same = " = rows_weighted_sum + update";
              sameBits(ctx, "master" + same, w, w2);
              if (opt > 0)
                sameBits(ctx, (opt < 3 ? "velocity" : "m") + same, a, a2);
              if (opt == 3)
                sameBits(ctx, "v" + same, b, b2);
              if (copy) {
                gpu::cast(ctx.gpu, F32, w2.d(), BF16, p2.d(), n);
                gpu::synchronize(ctx.gpu);
                sameBits(ctx, "params" + same + " + cast", p, p2);
              }
            });
          }
}

/// A device-to-device copy of `from` into `to` (the same type and size).
void copyDevice(Buffer &to, Buffer &from) {
  cudaCheck(cudaMemcpy(to.d(), from.d(),
                       size_t(from.size()) * size_t(dprt::sizeOf(from.type())),
                       cudaMemcpyDeviceToDevice),
            "cudaMemcpy(copyDevice)");
}

/// update_group: 60 _rows updates of one optimizer in a group (f32 and bf16
/// rows of 8 to 65536 elements, with noise, a masked sample) against the
/// same calls one by one, bit for bit (masters, state, bf16 copies). Among
/// them: more than one launch holds (48), a change of clip factors, an
/// update too large to defer and one misaligned (both run at once). Also
/// the errors of a group opened twice and one closed when none is open.
void updateGroupChecks(Context &ctx) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const char *names[] = {"sgd", "momentum", "adamw"};
  const int64_t batch = 8, count = 60, big = 1 << 21;
  const int64_t lengths[] = {2048, 256, 65536, 8, 1024, 512};
  for (int opt = 0; opt < 3; ++opt) {
    if (!ctx.begin(std::string("update_group ") + names[opt], "f32+bf16",
                   "60 updates, B8, noise, masked"))
      continue;
    ctx.guarded([&] {
      ctx.setStepState(noisedUpdateState());
      struct Entry {
        int64_t n, at, rowsAt;
        bool f32Rows, otherFactors, misaligned;
      };
      std::vector<Entry> entries;
      int64_t elements = 0, rows32 = 0, rows16 = 0;
      for (int64_t e = 0; e < count; ++e) {
        Entry x{lengths[e % 6], 0, 0, e % 2 == 0, e == 20, e == 35};
        if (e == 30)
          x.n = big;
        // Every master 16-byte aligned (offsets of 8 elements), but the
        // misaligned one's, one element further.
        x.at = elements + (x.misaligned ? 1 : 0);
        elements += x.n + 8;
        int64_t &rows = x.f32Rows ? rows32 : rows16;
        x.rowsAt = rows;
        rows += batch * x.n;
        entries.push_back(x);
      }
      Buffer w(F32, elements), a(F32, elements), b(F32, elements),
          p(BF16, elements), g32(F32, rows32), g16(BF16, rows16), c(F32, batch),
          c2(F32, batch), w2(F32, elements), a2(F32, elements),
          b2(F32, elements), p2(BF16, elements);
      w.randn(ctx.rng);
      a.randn(ctx.rng, 0.1);
      b.uniform(ctx.rng, 0, 0.01);
      p.randn(ctx.rng);
      g32.randn(ctx.rng);
      g16.randn(ctx.rng);
      // Sample 1's rows are NaN and its clip factor 0: skipped.
      for (const Entry &x : entries) {
        Buffer &g = x.f32Rows ? g32 : g16;
        for (int64_t i = x.rowsAt + x.n; i < x.rowsAt + 2 * x.n; ++i)
          g.set(i, nan);
      }
      g32.upload();
      g16.upload();
      clipFactorsWithMaskedSample(c, ctx.rng);
      clipFactorsWithMaskedSample(c2, ctx.rng);
      copyDevice(w2, w);
      copyDevice(a2, a);
      copyDevice(b2, b);
      copyDevice(p2, p);
      auto run = [&](Buffer &wb, Buffer &ab, Buffer &bb, Buffer &pb) {
        for (int64_t e = 0; e < count; ++e) {
          const Entry &x = entries[size_t(e)];
          const size_t rowBytes = x.f32Rows ? 4 : 2;
          const void *g =
              static_cast<const char *>((x.f32Rows ? g32 : g16).d()) +
              x.rowsAt * rowBytes;
          const void *cx = (x.otherFactors ? c2 : c).d();
          float *wx = static_cast<float *>(wb.d()) + x.at;
          float *ax = static_cast<float *>(ab.d()) + x.at;
          float *bx = static_cast<float *>(bb.d()) + x.at;
          void *px = static_cast<uint16_t *>(pb.d()) + x.at;
          const DType rows = x.f32Rows ? F32 : BF16;
          const int64_t index = 1000003 + 7 * e;
          if (opt == 0)
            gpu::sgd_update_rows(ctx.gpu, rows, wx, g, cx, batch, x.n, index,
                                 BF16, px);
          else if (opt == 1)
            gpu::momentum_update_rows(ctx.gpu, rows, wx, ax, g, cx, batch, x.n,
                                      0.9, false, index, BF16, px);
          else
            gpu::adamw_update_rows(ctx.gpu, rows, wx, ax, bx, g, cx, batch, x.n,
                                   0.9, 0.999, 1e-8, index, BF16, px);
        }
      };
      gpu::update_group(ctx.gpu, true);
      run(w, a, b, p);
      gpu::update_group(ctx.gpu, false);
      run(w2, a2, b2, p2);
      gpu::synchronize(ctx.gpu);
      const std::string same = " = the calls one by one";
      sameBits(ctx, "master" + same, w, w2);
      if (opt > 0)
        sameBits(ctx, (opt == 1 ? "velocity" : "m") + same, a, a2);
      if (opt == 2)
        sameBits(ctx, "v" + same, b, b2);
      sameBits(ctx, "params" + same, p, p2);
      // The masters moved: the group ran every update.
      const std::vector<double> after = w.download(), before = w.hostValues();
      int64_t moved = 0;
      for (const Entry &x : entries)
        moved += after[size_t(x.at)] != before[size_t(x.at)];
      ctx.result("updates run", moved == count,
                 std::to_string(moved) + " of " + std::to_string(count) +
                     " masters changed");
    });
  }
  if (ctx.begin("update_group", "-", "opened twice, closed when not open"))
    ctx.guarded([&] {
      auto throws = [&](auto f) {
        try {
          f();
        } catch (const std::exception &) {
          return true;
        }
        return false;
      };
      gpu::update_group(ctx.gpu, true);
      const bool twice = throws([&] { gpu::update_group(ctx.gpu, true); });
      gpu::update_group(ctx.gpu, false);
      const bool none = throws([&] { gpu::update_group(ctx.gpu, false); });
      ctx.result("errors", twice && none,
                 std::string(twice ? "" : "no error when opened twice; ") +
                     (none ? "both refused" : "no error when none is open"));
    });
}

/// The update kernels' own finiteness check of the gradient they read
/// (StepState::nonFiniteGradient, which a run that stops at a non-finite
/// step reads instead of a pass of its own over the gradients): every form
/// flags a NaN and an infinity at a vectorized element and in the scalar
/// tail, and flags nothing for a finite gradient or for NaN rows of a
/// masked sample (c = 0); the CPU's flag says the same.
void updateFlagChecks(Context &ctx) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  const int64_t n = 100003, batch = 4; // odd: vector loads and a tail
  const char *forms[] = {"sgd_update",           "momentum_update",
                         "adamw_update",         "sgd_update_rows",
                         "momentum_update_rows", "adamw_update_rows"};
  for (int form = 0; form < 6; ++form) {
    const bool rows = form >= 3;
    const DType dt = rows ? DType::BF16 : DType::F32;
    const int opt = form % 3;
    if (!ctx.begin(forms[form], dprt::nameOf(dt),
                   dims({{"B", rows ? batch : 1}, {"n", n}}, true) +
                       " non-finite flag"))
      continue;
    ctx.guarded([&] {
      Buffer w(DType::F32, n), a(DType::F32, n), b(DType::F32, n),
          g(dt, rows ? batch * n : n), c(DType::F32, batch);
      g.randn(ctx.rng);
      clipFactorsWithMaskedSample(c, ctx.rng); // sample 1 masked
      auto expect = [&](const std::string &what, bool want) {
        ctx.setStepState(checkedUpdateState()); // clears both flags
        for (Buffer *x : {&w, &a, &b})
          x->randn(ctx.rng, 0.1);
        b.uniform(ctx.rng, 0, 0.01);
        for (bool onCpu : {true, false}) {
          dprt::Rank *r = onCpu ? ctx.cpu : ctx.gpu;
          auto p = [&](Buffer &x) { return onCpu ? x.h() : x.d(); };
          if (!rows && opt == 0)
            (onCpu ? cpu::sgd_update : gpu::sgd_update)(
                r, DType::F32, p(w), p(g), n, -1, DType::F32, nullptr);
          else if (!rows && opt == 1)
            (onCpu ? cpu::momentum_update
                   : gpu::momentum_update)(r, DType::F32, p(w), p(a), p(g), n,
                                           0.9, false, -1, DType::F32, nullptr);
          else if (!rows)
            (onCpu ? cpu::adamw_update : gpu::adamw_update)(
                r, DType::F32, p(w), p(a), p(b), p(g), n, 0.9, 0.999, 1e-8, -1,
                DType::F32, nullptr);
          else if (opt == 0)
            (onCpu ? cpu::sgd_update_rows : gpu::sgd_update_rows)(
                r, dt, p(w), p(g), p(c), batch, n, -1, DType::BF16, nullptr);
          else if (opt == 1)
            (onCpu ? cpu::momentum_update_rows : gpu::momentum_update_rows)(
                r, dt, p(w), p(a), p(g), p(c), batch, n, 0.9, false, -1,
                DType::BF16, nullptr);
          else
            (onCpu ? cpu::adamw_update_rows : gpu::adamw_update_rows)(
                r, dt, p(w), p(a), p(b), p(g), p(c), batch, n, 0.9, 0.999, 1e-8,
                -1, DType::BF16, nullptr);
        }
        const bool onGpu = gpu::updatesMetNonFinite(ctx.gpu),
                   onCpu = cpu::updatesMetNonFinite(ctx.cpu);
        ctx.result("flag, " + what, onGpu == want && onCpu == want,
                   std::string("gpu ") + (onGpu ? "set" : "clear") + ", cpu " +
                       (onCpu ? "set" : "clear") + ", want " +
                       (want ? "set" : "clear"));
      };
      expect("finite", false);
      // Row 0 (c > 0) of the rows forms, the buffer itself otherwise.
      for (double bad : {nan, -inf})
        for (int64_t at : {int64_t(12345), n - 1}) {
          const double kept = g.get(at);
          g.set(at, bad);
          g.upload();
          expect(std::string(std::isnan(bad) ? "nan" : "inf") +
                     (at == n - 1 ? " in the tail" : " in a vector"),
                 true);
          g.set(at, kept);
          g.upload();
        }
      if (rows) {
        for (int64_t i = n; i < 2 * n; ++i)
          g.set(i, nan);
        g.upload();
        expect("nan rows of a masked sample", false);
      }
    });
  }
}

} // namespace

void updateChecks(Context &ctx) {
  updateRowsChecks(ctx);
  updateFlagChecks(ctx);
  updateGroupChecks(ctx);
}

} // namespace dpc::gpucheck
