//===- RandomKernelsTest.cpp - init_normal, init_uniform, add_noise -------===//
//
// The CPU backend's random kernels draw exactly dprt/rng.h's values at the
// global indices they are given, with the keys documented at StepState.
//
//===----------------------------------------------------------------------===//

#include "dprt/backend.h"
#include "dprt/kernels.h"
#include "dprt/rng.h"

#include <gtest/gtest.h>

#include <vector>

using namespace dprt;

namespace {

/// A rank whose arena holds only the StepState (at offset 0).
struct StateRank {
  Rank rank;
  StateRank() {
    cpu::allocateArena(&rank, 1024);
    rank.stateOffset = 0;
  }
  ~StateRank() { cpu::freeArena(&rank); }
  StepState &state() { return rank.hostState; }
  void upload() { cpu::uploadStepState(&rank); }
};

NoiseKey seedKey(uint64_t seed) {
  NoiseKey key{};
  key.seed = seed;
  return key;
}

} // namespace

TEST(RandomKernels, InitNormalDrawsTheInitializerStreamAtGlobalIndices) {
  StateRank r;
  r.state().initKey = 0x1234abcdull;
  r.upload();
  std::vector<double> f64(50);
  std::vector<float> f32(50);
  cpu::init_normal(&r.rank, DType::F64, f64.data(), 50, 1000, 0.02);
  cpu::init_normal(&r.rank, DType::F32, f32.data(), 50, 1000, 0.02);
  for (int i = 0; i < 50; ++i) {
    double z = gaussianF64(NoiseGenerator::Philox, seedKey(0x1234abcdull), 0,
                           1000 + i, kParameterInitStream);
    EXPECT_EQ(f64[i], 0.02 * z);
    EXPECT_EQ(f32[i], static_cast<float>(0.02 * z));
  }
}

TEST(RandomKernels, InitUniformLiesInTheSymmetricInterval) {
  StateRank r;
  r.state().initKey = 7;
  r.upload();
  std::vector<double> values(4000);
  cpu::init_uniform(&r.rank, DType::F64, values.data(), 4000, 12, 0.5);
  double lo = 1, hi = -1, mean = 0;
  for (int i = 0; i < 4000; ++i) {
    double u = uniformF64(NoiseGenerator::Philox, seedKey(7), 0, 12 + i,
                          kParameterInitStream);
    EXPECT_EQ(values[i], 0.5 * (2 * u - 1));
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
    mean += values[i] / 4000;
  }
  EXPECT_GT(lo, -0.5);
  EXPECT_LE(hi, 0.5);
  EXPECT_LT(lo, -0.49);
  EXPECT_GT(hi, 0.49);
  EXPECT_NEAR(mean, 0, 0.03);
}

TEST(RandomKernels, AddNoiseUsesTheStepStateKeyStepAndGenerator) {
  for (NoiseGeneratorKind kind :
       {NoiseGeneratorKind::Philox, NoiseGeneratorKind::ChaCha20}) {
    StateRank r;
    StepState &s = r.state();
    s.step = 17;
    s.noiseStd = 2.5;
    s.noiseKey[0] = 0x0123456789abcdefull;
    s.noiseKey[1] = 0xfedcba9876543210ull;
    s.noiseKey[2] = 42;
    s.noiseKey[3] = 0xffffffff00000001ull;
    s.noiseGenerator = static_cast<int32_t>(kind);
    r.upload();
    NoiseKey key{};
    key.seed = s.noiseKey[0];
    for (int i = 0; i < 4; ++i) {
      key.chachaKey[2 * i] = static_cast<uint32_t>(s.noiseKey[i]);
      key.chachaKey[2 * i + 1] = static_cast<uint32_t>(s.noiseKey[i] >> 32);
    }
    NoiseGenerator gen = kind == NoiseGeneratorKind::ChaCha20
                             ? NoiseGenerator::ChaCha20
                             : NoiseGenerator::Philox;
    std::vector<double> f64(40, 1.0);
    std::vector<float> f32(40, 1.0f);
    cpu::add_noise(&r.rank, DType::F64, f64.data(), 40, 5000);
    cpu::add_noise(&r.rank, DType::F32, f32.data(), 40, 5000);
    for (int i = 0; i < 40; ++i) {
      EXPECT_EQ(f64[i], 1.0 + 2.5 * gaussianF64(gen, key, 17, 5000 + i,
                                                kGradientNoiseStream));
      EXPECT_EQ(f32[i], 1.0f + static_cast<float>(
                                   2.5 * static_cast<double>(gradientNoiseF32(
                                             gen, key, 17, 5000 + i))));
    }
  }
}

TEST(RandomKernels, AddNoiseDoesNothingWithoutNoise) {
  StateRank r;
  r.state().step = 3;
  r.state().noiseStd = 0;
  r.upload();
  std::vector<float> grad(10, 0.25f);
  cpu::add_noise(&r.rank, DType::F32, grad.data(), 10, 0);
  for (float g : grad)
    EXPECT_EQ(g, 0.25f);
}

TEST(RandomKernels, NoiseDiffersBetweenSteps) {
  StateRank r;
  r.state().noiseStd = 1;
  r.state().noiseKey[0] = 99;
  r.state().step = 1;
  r.upload();
  std::vector<double> a(8, 0), b(8, 0);
  cpu::add_noise(&r.rank, DType::F64, a.data(), 8, 0);
  r.state().step = 2;
  r.upload();
  cpu::add_noise(&r.rank, DType::F64, b.data(), 8, 0);
  for (int i = 0; i < 8; ++i)
    EXPECT_NE(a[i], b[i]);
}

TEST(RandomKernels, RejectBf16AccumulationBuffers) {
  StateRank r;
  r.upload();
  std::vector<uint16_t> buffer(4);
  EXPECT_THROW(cpu::init_normal(&r.rank, DType::BF16, buffer.data(), 4, 0, 1),
               std::invalid_argument);
}

TEST(RandomKernels, OptimizersWithANoiseIndexAddTheNoiseOfAddNoise) {
  // An update given noiseIndex reads grad[i] plus add_noise's noise at
  // global index noiseIndex + i: bit for bit the parameters and state of
  // add_noise followed by the plain update, for both generators, f32 and
  // f64, and every optimizer; the gradient itself is left as it was.
  for (NoiseGeneratorKind kind :
       {NoiseGeneratorKind::Philox, NoiseGeneratorKind::ChaCha20})
    for (DType acc : {DType::F32, DType::F64})
      for (int optimizer = 0; optimizer < 3; ++optimizer) {
        SCOPED_TRACE(std::string(nameOf(acc)) + " optimizer " +
                     std::to_string(optimizer) + " generator " +
                     std::to_string(int(kind)));
        StateRank r;
        StepState &s = r.state();
        s.step = 5;
        s.noiseStd = 0.75;
        s.noiseKey[0] = 0x9e3779b97f4a7c15ull;
        s.noiseKey[1] = 7;
        s.noiseGenerator = static_cast<int32_t>(kind);
        s.lr = 0.01;
        s.lrScale = 0.5;
        s.weightDecay = 0.1;
        s.gradScale = 0.25;
        r.upload();
        const int64_t n = 37, index = 123456;
        const size_t bytes = n * (acc == DType::F64 ? 8 : 4);
        auto buffer = [&](double base) {
          std::vector<unsigned char> b(bytes);
          for (int64_t i = 0; i < n; ++i) {
            double v = base + 0.01 * double(i) * (i % 2 ? -1 : 1);
            if (acc == DType::F64)
              reinterpret_cast<double *>(b.data())[i] = v;
            else
              reinterpret_cast<float *>(b.data())[i] = float(v);
          }
          return b;
        };
        auto grad = buffer(0.3), noised = grad;
        std::vector<unsigned char> w[2] = {buffer(1.0), buffer(1.0)},
                                   m[2] = {buffer(0.2), buffer(0.2)},
                                   v[2] = {buffer(0.5), buffer(0.5)};
        cpu::add_noise(&r.rank, acc, noised.data(), n, index);
        ASSERT_NE(noised, grad);
        auto update = [&](int side, const void *g, int64_t noiseIndex) {
          switch (optimizer) {
          case 0:
            cpu::sgd_update(&r.rank, acc, w[side].data(), g, n, noiseIndex);
            break;
          case 1:
            cpu::momentum_update(&r.rank, acc, w[side].data(), m[side].data(),
                                 g, n, 0.9, true, noiseIndex);
            break;
          default:
            cpu::adamw_update(&r.rank, acc, w[side].data(), m[side].data(),
                              v[side].data(), g, n, 0.9, 0.999, 1e-8,
                              noiseIndex);
          }
        };
        update(0, noised.data(), -1);
        auto before = grad;
        update(1, grad.data(), index);
        EXPECT_EQ(grad, before);
        EXPECT_EQ(w[1], w[0]);
        EXPECT_EQ(m[1], m[0]);
        EXPECT_EQ(v[1], v[0]);
      }
}
