//===- OptimizerAndMemoryTest.cpp - Optimizers, cast, fill, zero ----------===//
//
// Optimizers run several steps against the reference's, with the learning
// rate, its schedule factor lrScale, the weight decay, gradScale and the step
// count taken from the StepState in the arena (drawn anew at every step, as
// a schedule or a resumed run with other flags changes them). cast is
// checked bit for bit against an independent round-to-nearest-even.
//
//===----------------------------------------------------------------------===//

#include "KernelTestSupport.h"

#include "dprt/backend.h"

#include <cstring>
#include <limits>

using namespace dpc::test;
using dprt::accOf;
using dprt::DType;
namespace cpu = dprt::cpu;
namespace ref = dpc::reference;

namespace {

Vec scaled(Vec v, double s) {
  for (double &e : v)
    e *= s;
  return v;
}

/// Draws the step's scalars into the rank's StepState: the learning rate
/// around `lr`, the weight decay 0 or around `weightDecay`.
void randomStepState(Rng &rng, TestRank &r, int64_t step, double lr,
                     double weightDecay) {
  r.state().step = step;
  r.state().gradScale = uniformScalar(rng, 0.01, 1);
  r.state().lrScale = uniformScalar(rng, 0.1, 1);
  r.state().lr = lr * uniformScalar(rng, 0.5, 2);
  r.state().weightDecay =
      uniformInt(rng, 0, 1) ? 0.0 : weightDecay * uniformScalar(rng, 0.5, 2);
}

/// The step the reference takes: lr * lrScale.
double stepLr(TestRank &r) { return r.state().lr * r.state().lrScale; }

TEST(SgdUpdate, MatchesReferenceWithTheStepStatesLrAndDecay) {
  forEachCaseAndDType(12, [](Rng &rng, DType dt) {
    DType acc = accOf(dt);
    int64_t n = uniformInt(rng, 1, 200);
    Buffer w(acc, normal(rng, n));
    Vec wRef = w.values();
    TestRank r;
    for (int64_t step = 1; step <= 3; ++step) {
      randomStepState(rng, r, step, 0.1, 0.01);
      Buffer g(acc, normal(rng, n));
      cpu::sgd_update(r.get(), acc, w.data(), g.data(), n);
      ref::sgdStep(wRef, scaled(g.values(), r.state().gradScale), stepLr(r),
                   r.state().weightDecay);
    }
    EXPECT_CLOSE(w.values(), wRef, accTolerance(dt), dt);
  });
}

TEST(MomentumUpdate, MatchesReferenceOverStepsPlainAndNesterov) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    DType acc = accOf(dt);
    int64_t n = uniformInt(rng, 1, 200);
    double mom = 0.9;
    bool nesterov = uniformInt(rng, 0, 1);
    Buffer w(acc, normal(rng, n)), vel(acc, Vec(n, 0.0));
    Vec wRef = w.values(), velRef(n, 0.0);
    TestRank r;
    for (int64_t step = 1; step <= 4; ++step) {
      randomStepState(rng, r, step, 0.05, 0.01);
      Buffer g(acc, normal(rng, n));
      cpu::momentum_update(r.get(), acc, w.data(), vel.data(), g.data(), n, mom,
                           nesterov);
      ref::momentumStep(wRef, velRef, scaled(g.values(), r.state().gradScale),
                        stepLr(r), mom, nesterov, r.state().weightDecay);
    }
    EXPECT_CLOSE(w.values(), wRef, accTolerance(dt), dt);
    EXPECT_CLOSE(vel.values(), velRef, accTolerance(dt), dt);
  });
}

TEST(AdamwUpdate, MatchesReferenceWithBiasCorrectionOverSteps) {
  forEachCaseAndDType(16, [](Rng &rng, DType dt) {
    DType acc = accOf(dt);
    int64_t n = uniformInt(rng, 1, 200);
    double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    Buffer w(acc, normal(rng, n)), m(acc, Vec(n, 0.0)), v(acc, Vec(n, 0.0));
    Vec wRef = w.values(), mRef(n, 0.0), vRef(n, 0.0);
    TestRank r;
    for (int64_t step = 1; step <= 5; ++step) {
      randomStepState(rng, r, step, 1e-3, 0.1);
      Buffer g(acc, normal(rng, n));
      cpu::adamw_update(r.get(), acc, w.data(), m.data(), v.data(), g.data(), n,
                        b1, b2, eps);
      ref::adamwStep(wRef, mRef, vRef, scaled(g.values(), r.state().gradScale),
                     step, stepLr(r), b1, b2, eps, r.state().weightDecay);
    }
    EXPECT_CLOSE(w.values(), wRef, accTolerance(dt), dt);
    EXPECT_CLOSE(m.values(), mRef, accTolerance(dt), dt);
    EXPECT_CLOSE(v.values(), vRef, accTolerance(dt), dt);
  });
}

/// Raw bits of a buffer, to compare casts exactly (NaN included).
std::vector<unsigned char> bits(const Buffer &b) {
  const auto *p = static_cast<const unsigned char *>(b.data());
  return std::vector<unsigned char>(p, p + b.size() * dprt::sizeOf(b.dtype()));
}

/// Whether x and y hold the same bits, element by element (a -0 against a
/// +0 fails); on failure, how many elements differ and the first of them.
::testing::AssertionResult sameBits(const Buffer &x, const Buffer &y) {
  const size_t es = size_t(dprt::sizeOf(x.dtype()));
  const auto *a = static_cast<const unsigned char *>(x.data());
  const auto *b = static_cast<const unsigned char *>(y.data());
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < x.size(); ++i)
    if (std::memcmp(a + i * es, b + i * es, es) != 0 && differ++ == 0)
      first = i;
  if (x.size() == y.size() && x.dtype() == y.dtype() && differ == 0)
    return ::testing::AssertionSuccess();
  auto failure = ::testing::AssertionFailure()
                 << differ << " of " << x.size() << " elements differ";
  if (first >= 0)
    failure << ", first " << first << ": " << x.get(first) << " vs "
            << y.get(first);
  return failure;
}

enum class Optimizer { Sgd, Momentum, Nesterov, AdamW };

const char *nameOf(Optimizer o) {
  switch (o) {
  case Optimizer::Sgd:
    return "sgd";
  case Optimizer::Momentum:
    return "momentum";
  case Optimizer::Nesterov:
    return "nesterov";
  case Optimizer::AdamW:
    return "adamw";
  }
  return "?";
}

constexpr double kMomentum = 0.9, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

/// Master weights, optimizer state (velocity or m and v; unused ones stay
/// as they are), and the materialized rows g [batch, n] with their clip
/// factors c, of which some are 0 (their rows NaN, which the kernels must
/// skip).
struct RowsCase {
  DType rows;
  int64_t batch, n;
  Buffer w, a, b, g, c;
  RowsCase(Rng &rng, DType rows, int64_t batch, int64_t n)
      : rows(rows), batch(batch), n(n), w(accOf(rows), normal(rng, n)),
        a(accOf(rows), normal(rng, n, 0.1)),
        b(accOf(rows), uniform(rng, n, 0.0, 0.01)),
        g(rows, normal(rng, batch * n), n), c(accOf(rows), batch) {
    for (int64_t s = 0; s < batch; ++s) {
      // Batch 8: sample 2 always dropped; batch 1: never (all would be).
      bool dropped = batch > 1 && (s == 2 || uniformInt(rng, 0, 3) == 0);
      c.set(s, dropped ? 0.0 : uniformScalar(rng, 0.5, 1.0));
      if (dropped)
        for (int64_t i = 0; i < n; ++i)
          g.set(s * n + i, std::numeric_limits<double>::quiet_NaN());
    }
  }
};

/// One step of `opt` on the case's buffers: the _rows kernel (`fused`), or
/// a zeroed gradient, rows_weighted_sum and the plain update, as the
/// compiler emits them when it does not fuse.
void rowsStep(TestRank &r, Optimizer opt, bool fused, RowsCase &k,
              int64_t noiseIndex) {
  const DType acc = accOf(k.rows);
  const bool nesterov = opt == Optimizer::Nesterov;
  if (fused) {
    switch (opt) {
    case Optimizer::Sgd:
      cpu::sgd_update_rows(r.get(), k.rows, k.w.data(), k.g.data(), k.c.data(),
                           k.batch, k.n, noiseIndex);
      return;
    case Optimizer::Momentum:
    case Optimizer::Nesterov:
      cpu::momentum_update_rows(r.get(), k.rows, k.w.data(), k.a.data(),
                                k.g.data(), k.c.data(), k.batch, k.n, kMomentum,
                                nesterov, noiseIndex);
      return;
    case Optimizer::AdamW:
      cpu::adamw_update_rows(r.get(), k.rows, k.w.data(), k.a.data(),
                             k.b.data(), k.g.data(), k.c.data(), k.batch, k.n,
                             kBeta1, kBeta2, kEps, noiseIndex);
      return;
    }
  }
  Buffer grad(acc, Vec(k.n, 0.0));
  cpu::rows_weighted_sum(r.get(), k.rows, k.g.data(), k.c.data(), grad.data(),
                         k.batch, k.n);
  switch (opt) {
  case Optimizer::Sgd:
    cpu::sgd_update(r.get(), acc, k.w.data(), grad.data(), k.n, noiseIndex);
    return;
  case Optimizer::Momentum:
  case Optimizer::Nesterov:
    cpu::momentum_update(r.get(), acc, k.w.data(), k.a.data(), grad.data(), k.n,
                         kMomentum, nesterov, noiseIndex);
    return;
  case Optimizer::AdamW:
    cpu::adamw_update(r.get(), acc, k.w.data(), k.a.data(), k.b.data(),
                      grad.data(), k.n, kBeta1, kBeta2, kEps, noiseIndex);
    return;
  }
}

/// n not a multiple of 8: below 256, or past the CPU kernel's block of 4096
/// elements.
int64_t oddLength(Rng &rng) {
  int64_t n = 8 * (uniformInt(rng, 0, 1) ? uniformInt(rng, 0, 31)
                                         : uniformInt(rng, 512, 600));
  return n + uniformInt(rng, 1, 7);
}

/// A row length for `rows`: oddLength's, or for MXFP8 (whole blocks of 32)
/// a multiple of 32 below 256 or past 4096.
int64_t rowLength(Rng &rng, DType rows) {
  if (rows != DType::MXFP8)
    return oddLength(rng);
  return 32 * (uniformInt(rng, 0, 1) ? uniformInt(rng, 1, 7)
                                     : uniformInt(rng, 128, 150));
}

constexpr DType kRowTypes[] = {DType::BF16, DType::F32, DType::MXFP8};

constexpr Optimizer kOptimizers[] = {Optimizer::Sgd, Optimizer::Momentum,
                                     Optimizer::Nesterov, Optimizer::AdamW};

TEST(UpdateRows, SameBitsAsRowsWeightedSumIntoZeroThenTheUpdate) {
  forEachCase(3, [](Rng &rng) {
    for (Optimizer opt : kOptimizers)
      for (DType rows : kRowTypes)
        for (int64_t batch : {int64_t(1), int64_t(8)})
          for (bool noise : {false, true}) {
            const int64_t n = rowLength(rng, rows);
            SCOPED_TRACE(std::string(nameOf(opt)) + " " + dprt::nameOf(rows) +
                         " B" + std::to_string(batch) + " n" +
                         std::to_string(n) + (noise ? " noise" : ""));
            TestRank r;
            randomStepState(rng, r, uniformInt(rng, 1, 5), 0.1, 0.01);
            r.state().noiseStd = 0.5;
            r.state().noiseKey[0] = rng();
            r.state().noiseKey[1] = rng();
            r.state().noiseGenerator = static_cast<int32_t>(
                uniformInt(rng, 0, 1) ? dprt::NoiseGeneratorKind::Philox
                                      : dprt::NoiseGeneratorKind::ChaCha20);
            const int64_t noiseIndex = noise ? uniformInt(rng, 0, 1 << 20) : -1;
            RowsCase fused(rng, rows, batch, n);
            RowsCase composed = fused;
            rowsStep(r, opt, true, fused, noiseIndex);
            rowsStep(r, opt, false, composed, noiseIndex);
            EXPECT_TRUE(sameBits(fused.w, composed.w)) << "master";
            EXPECT_TRUE(sameBits(fused.a, composed.a)) << "velocity or m";
            EXPECT_TRUE(sameBits(fused.b, composed.b)) << "v";
          }
  });
}

TEST(UpdateRows, MatchesAnF64SumOfTheWeightedRowsAndTheReferenceStep) {
  forEachCase(3, [](Rng &rng) {
    for (Optimizer opt : kOptimizers)
      for (DType rows : kRowTypes)
        for (int64_t batch : {int64_t(1), int64_t(8)}) {
          const int64_t n = rowLength(rng, rows), step = uniformInt(rng, 1, 5);
          SCOPED_TRACE(std::string(nameOf(opt)) + " " + dprt::nameOf(rows) +
                       " B" + std::to_string(batch) + " n" + std::to_string(n));
          TestRank r;
          randomStepState(rng, r, step, 0.1, 0.01);
          // A gradScale near 1, so that a dropped row or a wrong factor
          // moves the parameters by far more than the f32 tolerance.
          r.state().gradScale = uniformScalar(rng, 0.5, 1.0);
          // Noise keyed but not asked for (noiseIndex -1): none is added.
          r.state().noiseStd = 0.5;
          RowsCase k(rng, rows, batch, n);
          Vec w = k.w.values(), a = k.a.values(), b = k.b.values();
          Vec grad(size_t(n), 0.0);
          for (int64_t s = 0; s < batch; ++s)
            if (k.c.get(s) != 0)
              for (int64_t i = 0; i < n; ++i)
                grad[size_t(i)] += k.c.get(s) * k.g.get(s * n + i);
          grad = scaled(grad, r.state().gradScale);
          rowsStep(r, opt, true, k, -1);
          const double lr = stepLr(r), decay = r.state().weightDecay;
          switch (opt) {
          case Optimizer::Sgd:
            ref::sgdStep(w, grad, lr, decay);
            break;
          case Optimizer::Momentum:
          case Optimizer::Nesterov:
            ref::momentumStep(w, a, grad, lr, kMomentum,
                              opt == Optimizer::Nesterov, decay);
            break;
          case Optimizer::AdamW:
            ref::adamwStep(w, a, b, grad, step, lr, kBeta1, kBeta2, kEps,
                           decay);
            break;
          }
          const DType acc = accOf(rows);
          EXPECT_CLOSE(k.w.values(), w, accTolerance(acc), acc);
          EXPECT_CLOSE(k.a.values(), a, accTolerance(acc), acc);
          EXPECT_CLOSE(k.b.values(), b, accTolerance(acc), acc);
        }
  });
}

// The driver's check of a run that stops at a non-finite step: every update
// (the _rows kernels and the plain ones after rows_weighted_sum) flags a
// gradient element that is NaN or infinite in StepState::nonFiniteGradient,
// and nothing for the NaN rows of a dropped sample (c = 0), which the sum
// skips. The flag stays set until the driver uploads the next step's state.
TEST(UpdateRows, FlagAGradientElementThatIsNotFinite) {
  forEachCase(3, [](Rng &rng) {
    for (Optimizer opt : kOptimizers)
      for (DType rows : kRowTypes)
        for (bool fused : {true, false}) {
          const int64_t batch = 8, n = rowLength(rng, rows);
          SCOPED_TRACE(std::string(nameOf(opt)) + " " + dprt::nameOf(rows) +
                       (fused ? " _rows" : " plain") + " n" +
                       std::to_string(n));
          TestRank r;
          randomStepState(rng, r, 2, 0.1, 0.01);
          RowsCase k(rng, rows, batch, n); // sample 2 dropped, its rows NaN
          rowsStep(r, opt, fused, k, -1);
          EXPECT_FALSE(dprt::cpu::updatesMetNonFinite(r.get()));
          // An element of a sample that is not dropped.
          int64_t kept = 0;
          while (kept < batch && k.c.get(kept) == 0)
            ++kept;
          ASSERT_LT(kept, batch);
          const int64_t at = kept * n + uniformInt(rng, 0, n - 1);
          for (double bad : {std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()}) {
            r.state().nonFiniteGradient = 0; // the driver's next upload
            k.g.set(at, bad);
            rowsStep(r, opt, fused, k, -1);
            EXPECT_TRUE(dprt::cpu::updatesMetNonFinite(r.get())) << bad;
            k.g.set(at, 0.5);
            rowsStep(r, opt, fused, k, -1);
            EXPECT_TRUE(dprt::cpu::updatesMetNonFinite(r.get()))
                << "cleared by a later update";
          }
        }
  });
}

TEST(Cast, RoundsToNearestEvenBitForBitBetweenAllTypes) {
  forEachCase(4, [](Rng &rng) {
    // Random values over a wide range, exact bf16 ties, values a hair
    // beside a tie (f64 -> f32 -> bf16 would round twice on them), and the
    // special values.
    Vec v = normal(rng, 64, 10.0);
    for (int i = 0; i < 32; ++i) {
      double x = bf16Value(bf16Bits(normal(rng, 1, 100.0)[0]));
      int e;
      std::frexp(x, &e);
      double halfUlp = std::ldexp(1.0, e - 9); // bf16: 8 significand bits
      double hair = std::ldexp(1.0, e - 40);
      v.push_back(x + halfUlp);
      v.push_back(x + halfUlp + hair);
      v.push_back(x + halfUlp - hair);
    }
    for (double s : {0.0, -0.0, 1e-45, -3e38, 3.5e38, 1e300,
                     std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()})
      v.push_back(s);
    for (DType from : allDTypes())
      for (DType to : allDTypes()) {
        SCOPED_TRACE(std::string(dprt::nameOf(from)) + " -> " +
                     dprt::nameOf(to));
        Buffer src(from, v), dst(to, int64_t(v.size()));
        TestRank r;
        cpu::cast(r.get(), from, src.data(), to, dst.data(), int64_t(v.size()));
        Buffer want(to, src.values());
        EXPECT_EQ(bits(dst), bits(want));
      }
  });
}

TEST(Cast, Bf16RoundingOfAnF64TieNeighbourIsNotDoubled) {
  // 1 + 2^-8 + 2^-30: f32 rounds it to 1 + 2^-8, a bf16 tie that would
  // round down to 1; the f64 value is above the tie, so bf16 gets 1 + 2^-7.
  double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  Buffer src(DType::F64, Vec{x, -x}), dst(DType::BF16, 2);
  TestRank r;
  cpu::cast(r.get(), DType::F64, src.data(), DType::BF16, dst.data(), 2);
  EXPECT_EQ(dst.values(),
            (Vec{1.0 + std::ldexp(1.0, -7), -(1.0 + std::ldexp(1.0, -7))}));
}

TEST(Fill, SetsEveryElementToTheRoundedValue) {
  forEachCaseAndDType(8, [](Rng &rng, DType dt) {
    int64_t n = uniformInt(rng, 1, 100);
    double value = normal(rng, 1)[0];
    Buffer p(dt, n);
    TestRank r;
    cpu::fill(r.get(), dt, p.data(), n, value);
    EXPECT_EQ(p.values(), rounded(dt, Vec(n, value)));
  });
}

TEST(Zero, ClearsExactlyTheGivenBytes) {
  std::vector<unsigned char> mem(64, 0xab);
  TestRank r;
  cpu::zero(r.get(), mem.data() + 8, 40);
  for (size_t i = 0; i < mem.size(); ++i)
    EXPECT_EQ(mem[i], i >= 8 && i < 48 ? 0 : 0xab) << "byte " << i;
}

} // namespace
