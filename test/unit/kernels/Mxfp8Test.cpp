//===- Mxfp8Test.cpp - MXFP8 per-sample rows against f64 -----------------===//
//
// The CPU backend's MXFP8 rows (types.h, runtime/cpu/Mxfp8.h) against the
// test support's independent route (every e4m3 value from its definition,
// rounding by a search over all codes) and the f64 per-sample gradients.
// The clipped sums and updates from MXFP8 rows are in
// OptimizerAndMemoryTest.cpp, the clip bound in ClipBoundPropertyTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include "cpu/Mxfp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace dpc::test;
using dprt::DType;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

/// A random n2 buffer to add into; `init` receives its values.
Buffer startingNorms(Rng &rng, DType dt, int64_t batch, Vec &init) {
  Buffer n2 =
      outputBuffer(rng, dprt::accOf(dt), batch, /*accumulate=*/true, 0, 3);
  init = n2.values();
  return n2;
}

TEST(Mxfp8, E4m3ConversionsMatchTheSearchOverEveryCode) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(cpu::e4m3ToFloat(uint8_t(code))));
      continue;
    }
    const double v = mx::e4m3Value(uint8_t(code));
    EXPECT_EQ(double(cpu::e4m3ToFloat(uint8_t(code))), v) << code;
    EXPECT_EQ(cpu::floatToE4m3(float(v)), uint8_t(code)) << code;
  }
  // Ties between neighbours go to the even code; just off a tie, to the
  // nearer one.
  for (int code = 0; code < 0x7E; ++code) {
    const double lo = mx::e4m3Value(uint8_t(code)),
                 hi = mx::e4m3Value(uint8_t(code + 1)), mid = (lo + hi) / 2;
    const uint8_t even = uint8_t(code % 2 ? code + 1 : code);
    EXPECT_EQ(cpu::floatToE4m3(float(mid)), even) << code;
    EXPECT_EQ(cpu::floatToE4m3(float(-mid)), uint8_t(0x80 | even)) << code;
    EXPECT_EQ(cpu::floatToE4m3(std::nextafter(float(mid), 0.0f)),
              uint8_t(code))
        << code;
    EXPECT_EQ(cpu::floatToE4m3(std::nextafter(float(mid), 1e9f)),
              uint8_t(code + 1))
        << code;
  }
  EXPECT_EQ(cpu::floatToE4m3(449.0f), 0x7E);
  EXPECT_EQ(cpu::floatToE4m3(-1e30f), 0xFE);
  EXPECT_EQ(cpu::floatToE4m3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(cpu::floatToE4m3(std::nanf("")), 0x7F);
  forEachCase(4, [](Rng &rng) {
    for (int i = 0; i < 2000; ++i) {
      const float v = float(uniformScalar(rng, -1, 1) *
                            std::ldexp(1.0, int(uniformInt(rng, -14, 10))));
      ASSERT_EQ(cpu::floatToE4m3(v), mx::e4m3Code(v)) << v;
    }
  });
}

TEST(Mxfp8, BlockExponentIsTheSmallestThatFits) {
  EXPECT_EQ(cpu::mxBlockExponent(0.0f), -126);
  for (int e = -126; e <= 119; ++e) {
    // 448 * 2^e itself fits under e; the next float up needs e + 1.
    const float edge = std::ldexp(448.0f, e);
    EXPECT_EQ(cpu::mxBlockExponent(edge), mx::blockExponent(edge)) << e;
    const float above =
        std::nextafter(edge, std::numeric_limits<float>::infinity());
    EXPECT_EQ(cpu::mxBlockExponent(above), mx::blockExponent(above))
        << e;
  }
  forEachCase(4, [](Rng &rng) {
    for (int i = 0; i < 2000; ++i) {
      const float a = float(uniformScalar(rng, 0.5, 1) *
                            std::ldexp(1.0, int(uniformInt(rng, -140, 120))));
      ASSERT_EQ(cpu::mxBlockExponent(a), mx::blockExponent(a)) << a;
    }
  });
}

/// Checks the MXFP8 rows `g` [batch, n] against f64 values `exact`: every
/// block's scale fits its largest magnitude (within the f32 arithmetic's
/// error of the f64 one) and is the smallest that does, and every element is
/// within half a step of e4m3 under that scale.
void expectBlockRounded(const Buffer &g, int64_t dim, const Vec &exact,
                        double relErr) {
  const auto *bytes = static_cast<const uint8_t *>(g.data());
  const int64_t n = g.size(), stride = dprt::storageBytes(DType::MXFP8, dim);
  for (int64_t k = 0; k < n / dprt::kMxBlock; ++k) {
    double amax = 0;
    for (int64_t i = 0; i < dprt::kMxBlock; ++i)
      amax = std::max(amax, std::fabs(exact[k * dprt::kMxBlock + i]));
    // Row b's scales follow its elements (types.h).
    const int64_t b = k * dprt::kMxBlock / dim;
    const int e =
        int(bytes[b * stride + dim + (k * dprt::kMxBlock - b * dim) /
                                         dprt::kMxBlock]) -
        127;
    const double unit = std::ldexp(1.0, e);
    EXPECT_LE(amax, 448 * unit * (1 + relErr)) << "block " << k;
    if (e > -126)
      EXPECT_GT(amax, 224 * unit * (1 - relErr)) << "block " << k;
    for (int64_t i = 0; i < dprt::kMxBlock; ++i) {
      const int64_t j = k * dprt::kMxBlock + i;
      const double held = g.get(j), want = exact[j];
      // Half a step: 2^-4 of the magnitude's binade for normal e4m3 values,
      // 2^-10 of the scale below them; and the f32 sums' error.
      const double halfStep =
          std::fabs(held / unit) >= 1.0 / 64
              ? std::ldexp(1.0, std::ilogb(held) - 4)
              : std::ldexp(unit, -10);
      EXPECT_LE(std::fabs(held - want), halfStep + relErr * amax)
          << "element " << j << " held " << held << " f64 " << want;
    }
  }
}

TEST(LinearPerSampleGrad, Mxfp8RowsAreTheBlockRoundedGradientsWithTheirNorms) {
  forEachCase(16, [](Rng &rng) {
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(dprt::nameOf(dt));
      const int64_t batch = uniformInt(rng, 1, 5),
                    tokens = uniformInt(rng, 1, 12),
                    in = 32 * uniformInt(rng, 1, 3),
                    out = uniformInt(rng, 1, 20);
      // Magnitudes over a wide range, so that blocks get many scales.
      const double size = std::ldexp(1.0, int(uniformInt(rng, -20, 20)));
      Vec xv = normal(rng, batch * tokens * in, size),
          dyv = normal(rng, batch * tokens * out);
      for (int64_t i = 0; i < int64_t(xv.size()); i += 7)
        xv[i] *= 64; // some large elements a block
      Buffer x(dt, xv), dy(dt, dyv);
      Buffer g(DType::MXFP8, batch * out * in, out * in),
          alone(DType::MXFP8, batch * out * in, out * in);
      Vec init;
      Buffer n2 = startingNorms(rng, dt, batch, init);
      TestRank r;
      cpu::linear_per_sample_grad(r.get(), dt, DType::MXFP8, x.data(),
                                  dy.data(), g.data(), n2.data(), batch,
                                  tokens, in, out);
      cpu::linear_per_sample_grad(r.get(), dt, DType::MXFP8, x.data(),
                                  dy.data(), alone.data(), nullptr, batch,
                                  tokens, in, out);
      ref::PerSample want = ref::linearWeightGradPerSample(
          x.values(), dy.values(), batch, tokens, in, out);
      Vec flat;
      for (const Vec &w : want)
        flat.insert(flat.end(), w.begin(), w.end());
      expectBlockRounded(g, out * in, flat, 1e-5);
      const auto *a = static_cast<const uint8_t *>(g.data());
      const auto *b = static_cast<const uint8_t *>(alone.data());
      EXPECT_TRUE(std::equal(a, a + dprt::storageBytes(DType::MXFP8, g.size()),
                             b))
          << "without n2, other rows";
      // The norms are those of the values held (what the clipped sum adds).
      Vec held = g.values(), heldNorms(batch, 0.0);
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t i = 0; i < out * in; ++i)
          heldNorms[s] += held[s * out * in + i] * held[s * out * in + i];
      EXPECT_CLOSE(n2.values(), ref::addForward(init, heldNorms),
                   accTolerance(dt), dt);
    }
  });
}

TEST(LinearPerSampleGrad, Mxfp8BlockWithANonFiniteValueIsNaN) {
  const int64_t batch = 2, tokens = 3, in = 64, out = 2;
  Vec xv(batch * tokens * in, 0.25), dyv(batch * tokens * out, 1.0);
  xv[tokens * in + 40] = std::numeric_limits<double>::infinity(); // b 1
  Buffer x(DType::F32, xv), dy(DType::F32, dyv);
  Buffer g(DType::MXFP8, batch * out * in, out * in),
      n2(DType::F32, Vec(batch, 0.0));
  TestRank r;
  cpu::linear_per_sample_grad(r.get(), DType::F32, DType::MXFP8, x.data(),
                              dy.data(), g.data(), n2.data(), batch, tokens,
                              in, out);
  // Sample 1's column 40 is infinite in both rows: blocks 1 of rows 0 and 1.
  for (int64_t j = 0; j < batch * out * in; ++j) {
    const bool bad = j >= out * in && (j % in) / 32 == 1;
    EXPECT_EQ(std::isnan(g.get(j)), bad) << j;
    if (!bad)
      EXPECT_EQ(g.get(j), 0.75) << j; // 3 tokens of 0.25 * 1
  }
  EXPECT_EQ(n2.get(0), 0.75 * 0.75 * out * in);
  EXPECT_TRUE(std::isnan(n2.get(1)));
}

// A step's last micro-step may cover fewer samples than the physical batch
// (dp_microstep_<r>) and write the first r rows of the buffer that the
// update then reads with the full batch (dropped samples' factors 0): a
// row's place must not depend on the batch a call covers (types.h).
TEST(LinearPerSampleGrad, Mxfp8RowsOfFewerSamplesReadTheSameInTheFullBatch) {
  forEachCase(4, [](Rng &rng) {
    const int64_t full = 4, batch = 2, tokens = 5, in = 64, out = 3,
                  dim = in * out;
    Buffer x(DType::F32, normal(rng, batch * tokens * in)),
        dy(DType::F32, normal(rng, batch * tokens * out));
    Buffer g(DType::MXFP8, full * dim, dim); // NaN: rows 2 and 3 stay so
    TestRank r;
    cpu::linear_per_sample_grad(r.get(), DType::F32, DType::MXFP8, x.data(),
                                dy.data(), g.data(), nullptr, batch, tokens,
                                in, out);
    Buffer c(DType::F32, Vec{0.5, 0.75, 0.0, 0.0});
    Buffer fewer(DType::F32, Vec(dim, 0.0)), all(DType::F32, Vec(dim, 0.0));
    cpu::rows_weighted_sum(r.get(), DType::MXFP8, g.data(), c.data(),
                           fewer.data(), batch, dim);
    cpu::rows_weighted_sum(r.get(), DType::MXFP8, g.data(), c.data(),
                           all.data(), full, dim);
    EXPECT_EQ(all.values(), fewer.values());
    ref::PerSample want = ref::linearWeightGradPerSample(
        x.values(), dy.values(), batch, tokens, in, out);
    EXPECT_CLOSE(all.values(), ref::weightedSum(want, {0.5, 0.75}), 1.0 / 16,
                 DType::F32);
  });
}

TEST(NormRows, Mxfp8IsTheNormOfTheValuesHeld) {
  forEachCase(8, [](Rng &rng) {
    const int64_t batch = uniformInt(rng, 1, 4),
                  dim = 32 * uniformInt(rng, 1, 40);
    Vec v = normal(rng, batch * dim, std::ldexp(1.0, int(uniformInt(rng, -30, 30))));
    Buffer g(DType::MXFP8, v, dim);
    Vec init;
    Buffer n2 = startingNorms(rng, DType::F32, batch, init);
    TestRank r;
    cpu::norm_rows(r.get(), DType::MXFP8, g.data(), n2.data(), batch, dim);
    Vec held = g.values(), want(batch, 0.0);
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t i = 0; i < dim; ++i)
        want[s] += held[s * dim + i] * held[s * dim + i];
    EXPECT_CLOSE(n2.values(), ref::addForward(init, want),
                 accTolerance(DType::F32), DType::F32);
    // Within 2^-4 of the unrounded values' norms.
    Vec exact(batch, 0.0);
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t i = 0; i < dim; ++i)
        exact[s] += v[s * dim + i] * v[s * dim + i];
    EXPECT_CLOSE(n2.values(), ref::addForward(init, exact), 1.0 / 8,
                 DType::F32);
  });
}

} // namespace
