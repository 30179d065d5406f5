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
