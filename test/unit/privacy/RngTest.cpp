//===- RngTest.cpp - Counter-based generators and Gaussian noise ----------===//

#include "dprt/rng.h"
#include "dprt/keys.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

using namespace dprt;

namespace dprt {
// Names the generator in parameterized test output.
void PrintTo(NoiseGenerator generator, std::ostream *os) {
  *os << (generator == NoiseGenerator::Philox ? "Philox" : "ChaCha20");
}
} // namespace dprt

namespace {

// Random123 tests/kat_vectors, the three "philox4x32 10" lines
// (columns: counter[4], key[2], expected output[4]).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t counter[4];
    uint32_t key[2];
    uint32_t expected[4];
  };
  const Case cases[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case &c : cases) {
    uint32_t out[4];
    philox4x32Block(c.counter, c.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], c.expected[i]) << "word " << i;
  }
}

// RFC 8439 section 2.3.2: key 00 01 .. 1f, block count 1,
// nonce 00 00 00 09 00 00 00 4a 00 00 00 00.
TEST(ChaCha20, MatchesRfc8439BlockFunctionVector) {
  uint32_t key[8];
  for (uint32_t i = 0; i < 8; ++i)
    key[i] = (4 * i) | (4 * i + 1) << 8 | (4 * i + 2) << 16 | (4 * i + 3) << 24;
  const uint32_t counterNonce[4] = {0x00000001, 0x09000000, 0x4a000000,
                                    0x00000000};
  const uint32_t expected[16] = {
      0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
      0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
      0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  uint32_t out[16];
  chacha20Block(key, counterNonce, out);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(out[i], expected[i]) << "word " << i;
  // The serialized block starts 10 f1 e7 e4 (little-endian words).
  EXPECT_EQ(out[0] & 0xff, 0x10u);
  EXPECT_EQ(out[0] >> 24, 0xe4u);
}

TEST(Counter, LayoutIsIndexThenStepThenStream) {
  uint32_t counter[4];
  makeCounter(/*step=*/0x00ABCDEF12345678ull, /*index=*/0x1122334455667788ull,
              /*stream=*/5, counter);
  EXPECT_EQ(counter[0], 0x55667788u);
  EXPECT_EQ(counter[1], 0x11223344u);
  EXPECT_EQ(counter[2], 0x12345678u);
  EXPECT_EQ(counter[3], (0xABCDEFu << 8) | 5u);
}

TEST(Counter, StreamsStepsAndIndicesGiveDifferentValues) {
  NoiseKey key = NoiseKey::fromSeed(42);
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    double base = gaussianF64(gen, key, 3, 10, kGradientNoiseStream);
    EXPECT_NE(base, gaussianF64(gen, key, 3, 10, kParameterInitStream));
    EXPECT_NE(base, gaussianF64(gen, key, 4, 10, kGradientNoiseStream));
    EXPECT_NE(base, gaussianF64(gen, key, 3, 11, kGradientNoiseStream));
    EXPECT_NE(base, gaussianF64(gen, NoiseKey::fromSeed(43), 3, 10,
                                kGradientNoiseStream));
    EXPECT_NE(base, gaussianF64(gen, key, 3 + (1ull << 32), 10,
                                kGradientNoiseStream));
  }
  EXPECT_NE(gaussianF64(NoiseGenerator::Philox, key, 3, 10, 0),
            gaussianF64(NoiseGenerator::ChaCha20, key, 3, 10, 0));
}

TEST(NoiseKey, SeedDerivationIsDeterministicAndSecretKeyIsUsed) {
  NoiseKey a = NoiseKey::fromSeed(7), b = NoiseKey::fromSeed(7),
           c = NoiseKey::fromSeed(8);
  EXPECT_TRUE(std::equal(a.chachaKey, a.chachaKey + 8, b.chachaKey));
  EXPECT_FALSE(std::equal(a.chachaKey, a.chachaKey + 8, c.chachaKey));
  const uint32_t secret[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  NoiseKey s = NoiseKey::withSecretKey(7, secret);
  EXPECT_TRUE(std::equal(s.chachaKey, s.chachaKey + 8, secret));
  EXPECT_NE(gradientNoiseF32(NoiseGenerator::ChaCha20, s, 0, 0),
            gradientNoiseF32(NoiseGenerator::ChaCha20, a, 0, 0));
  // Philox reads only the seed.
  EXPECT_EQ(gradientNoiseF32(NoiseGenerator::Philox, s, 0, 0),
            gradientNoiseF32(NoiseGenerator::Philox, a, 0, 0));
}

// keys.h's seed expansion: the four SplitMix64 outputs of the seed
// (Steele, Lea, Flood 2014; computed independently in Python). A change here
// changes every noise value and every batch of every seeded run.
TEST(RunKeys, SeedExpandsToFourSplitMix64Words) {
  const struct {
    uint64_t seed;
    uint64_t words[4];
  } cases[] = {
      {7,
       {0x63cbe1e459320dd7ull, 0x044c3cd7f43c661cull, 0xe6984080bab12a02ull,
        0x953aeb70673e29cbull}},
      {0x0123456789abcdefull,
       {0x157a3807a48faa9dull, 0xd573529b34a1d093ull, 0x2f90b72e996dccbeull,
        0xa2d419334c4667ecull}},
  };
  for (const auto &c : cases) {
    uint64_t words[4];
    noiseKeyWordsFromSeed(c.seed, words);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(words[i], c.words[i]) << "seed " << c.seed << " word " << i;
    // The same words as NoiseKey::fromSeed's ChaCha20 key.
    const NoiseKey derived = NoiseKey::fromSeed(c.seed);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(derived.chachaKey[i],
                static_cast<uint32_t>(c.words[i / 2] >> (32 * (i % 2))));
  }
  // The run's Philox seed is the first word, not the seed itself.
  uint64_t words[4];
  noiseKeyWordsFromSeed(7, words);
  EXPECT_EQ(noiseKeyFromWords(words).seed, 0x63cbe1e459320dd7ull);
}

// A given 256-bit key (a secure run's --noise-key 0011..eeff as four
// big-endian-written 64-bit words): Philox's seed is word 0, ChaCha20's key
// words are the halves, low half first.
TEST(RunKeys, WordsBecomeThePhiloxSeedAndTheChaChaKeyWords) {
  const uint64_t words[4] = {0x0011223344556677ull, 0x8899aabbccddeeffull,
                             0x0123456789abcdefull, 0xfedcba9876543210ull};
  const NoiseKey key = noiseKeyFromWords(words);
  EXPECT_EQ(key.seed, 0x0011223344556677ull);
  const uint32_t expected[8] = {0x44556677u, 0x00112233u, 0xccddeeffu,
                                0x8899aabbu, 0x89abcdefu, 0x01234567u,
                                0x76543210u, 0xfedcba98u};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(key.chachaKey[i], expected[i]) << "word " << i;
}

// The kernels read the key from the StepState, the sampler from the words:
// both see the same NoiseKey.
TEST(RunKeys, NoiseAndSamplingUseTheSameKey) {
  StepState state{};
  noiseKeyWordsFromSeed(42, state.noiseKey);
  const NoiseKey noise = noiseKeyOf(state);
  const NoiseKey sampling = samplingKeyFromWords(state.noiseKey);
  EXPECT_EQ(noise.seed, sampling.seed);
  EXPECT_TRUE(
      std::equal(noise.chachaKey, noise.chachaKey + 8, sampling.chachaKey));
  // The initializer is keyed by the seed itself, independently.
  state.initKey = 42;
  EXPECT_EQ(initKeyOf(state).seed, 42u);
  EXPECT_EQ(noiseGeneratorOf(state), NoiseGenerator::Philox);
  state.noiseGenerator = static_cast<int32_t>(NoiseGeneratorKind::ChaCha20);
  EXPECT_EQ(noiseGeneratorOf(state), NoiseGenerator::ChaCha20);
}

TEST(Uniform, NeverZeroSoTheLogarithmIsFinite) {
  EXPECT_EQ(uniformOpenClosedF32(0), 5.9604644775390625e-8f);
  EXPECT_EQ(uniformOpenClosedF32(0xffffffffu), 1.0f);
  EXPECT_EQ(uniformClosedOpenF32(0), 0.0f);
  EXPECT_LT(uniformClosedOpenF32(0xffffffffu), 1.0f);
  EXPECT_EQ(uniformOpenClosedF64(0, 0), 1.1102230246251565e-16);
  EXPECT_EQ(uniformOpenClosedF64(0xffffffffu, 0xffffffffu), 1.0);
  EXPECT_LT(uniformClosedOpenF64(0xffffffffu, 0xffffffffu), 1.0);
  // Extreme uniforms give the extreme, finite Gaussians.
  float c = 1, s = 1;
  boxMullerPairF32(1.0f, 0.0f, c, s);
  EXPECT_EQ(c, 0.0f);
  EXPECT_EQ(s, 0.0f);
  float maxF32 = 0, sine = 1;
  boxMullerPairF32(uniformOpenClosedF32(0), 0.0f, maxF32, sine);
  EXPECT_TRUE(std::isfinite(maxF32));
  EXPECT_NEAR(maxF32, std::sqrt(2 * 24 * std::log(2.0)), 1e-5);
  EXPECT_EQ(sine, 0.0f);
  // The sine branch at a quarter turn reaches the same extreme.
  boxMullerPairF32(uniformOpenClosedF32(0), 0.25f, c, s);
  EXPECT_NEAR(s, std::sqrt(2 * 24 * std::log(2.0)), 1e-5);
  EXPECT_TRUE(std::isfinite(c));
  double maxF64 = boxMullerF64(uniformOpenClosedF64(0, 0), 0.0);
  EXPECT_NEAR(maxF64, std::sqrt(2 * 53 * std::log(2.0)), 1e-12);
}

double normalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

struct SampleStatistics {
  double mean;
  double variance;
  double ksStatistic;
};

/// Mean, variance and the Kolmogorov-Smirnov distance to N(0, 1).
SampleStatistics statistics(std::vector<double> draws) {
  double n = static_cast<double>(draws.size());
  double sum = 0;
  for (double x : draws)
    sum += x;
  double mean = sum / n, squares = 0;
  for (double x : draws)
    squares += (x - mean) * (x - mean);
  std::sort(draws.begin(), draws.end());
  double ks = 0;
  for (size_t i = 0; i < draws.size(); ++i) {
    double cdf = normalCdf(draws[i]);
    ks = std::max({ks, (i + 1) / n - cdf, cdf - i / n});
  }
  return {mean, squares / (n - 1), ks};
}

/// Checks the draws against N(0, 1): mean within 5 standard errors, variance
/// within 5 standard errors (sd of the sample variance ~ sqrt(2 / n)), and
/// the KS distance below the 0.001-level critical value 1.95 / sqrt(n).
void expectStandardNormal(const std::vector<double> &draws) {
  double n = static_cast<double>(draws.size());
  SampleStatistics s = statistics(draws);
  EXPECT_LT(std::fabs(s.mean), 5 / std::sqrt(n));
  EXPECT_LT(std::fabs(s.variance - 1), 5 * std::sqrt(2 / n));
  EXPECT_LT(s.ksStatistic, 1.95 / std::sqrt(n));
}

class GaussianTest : public ::testing::TestWithParam<NoiseGenerator> {};

TEST_P(GaussianTest, F32OverIndicesIsStandardNormal) {
  NoiseKey key = NoiseKey::fromSeed(2024);
  std::vector<double> draws(1000000);
  for (size_t j = 0; j < draws.size(); ++j)
    draws[j] = gradientNoiseF32(GetParam(), key, 17, j);
  expectStandardNormal(draws);
}

// The four f32 values of one block (two Box-Muller pairs): each lane alone
// standard normal, and no lane correlated with another, in the values or in
// their squares (the two values of a pair share the radius r: their squares
// would be correlated if the angle were not uniform).
TEST_P(GaussianTest, F32LanesOfABlockAreIndependent) {
  NoiseKey key = NoiseKey::fromSeed(77);
  const int n = 250000;
  std::vector<std::vector<double>> lanes(4, std::vector<double>(n));
  for (int q = 0; q < n; ++q) {
    float z[4];
    gradientNoiseQuadF32(GetParam(), key, 9, uint64_t(q), z);
    for (int l = 0; l < 4; ++l) {
      lanes[l][q] = z[l];
      // The element-wise definition reads the same block.
      ASSERT_EQ(z[l],
                gradientNoiseF32(GetParam(), key, 9, 4 * uint64_t(q) + l));
    }
  }
  for (int l = 0; l < 4; ++l)
    expectStandardNormal(lanes[l]);
  // Products of independent N(0, 1): mean 0, sd 1; z^2 - 1: sd sqrt(2).
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      double values = 0, squares = 0;
      for (int q = 0; q < n; ++q) {
        values += lanes[a][q] * lanes[b][q];
        squares +=
            (lanes[a][q] * lanes[a][q] - 1) * (lanes[b][q] * lanes[b][q] - 1);
      }
      EXPECT_LT(std::fabs(values / n), 5 / std::sqrt(double(n)))
          << "lanes " << a << ", " << b;
      EXPECT_LT(std::fabs(squares / n), 5 * 2 / std::sqrt(double(n)))
          << "lanes " << a << ", " << b;
    }
}

// The documented layout: element 4q + l is lane l of the block of (step, q,
// kGradientNoiseF32Stream); lanes 0, 1 the cosine and sine of words 0, 1.
TEST(GradientNoiseF32, LanesComeFromTheBlockOfTheQuadOnItsOwnStream) {
  NoiseKey key = NoiseKey::fromSeed(11);
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    uint32_t bits[4];
    randomBlock(gen, key, 5, 1234, kGradientNoiseF32Stream, bits);
    for (int pair = 0; pair < 2; ++pair) {
      const double u = ((bits[2 * pair] >> 8) + 1) * 0x1p-24;
      const double v = (bits[2 * pair + 1] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2 * std::log(u)), t = 2 * M_PI * v;
      EXPECT_NEAR(gradientNoiseF32(gen, key, 5, 4 * 1234 + 2 * pair),
                  r * std::cos(t), 1e-5);
      EXPECT_NEAR(gradientNoiseF32(gen, key, 5, 4 * 1234 + 2 * pair + 1),
                  r * std::sin(t), 1e-5);
    }
    EXPECT_NE(kGradientNoiseF32Stream, kGradientNoiseStream);
  }
}

TEST_P(GaussianTest, F64OverIndicesIsStandardNormal) {
  NoiseKey key = NoiseKey::fromSeed(99);
  std::vector<double> draws(1000000);
  for (size_t j = 0; j < draws.size(); ++j)
    draws[j] = gaussianF64(GetParam(), key, 0, j, kGradientNoiseStream);
  expectStandardNormal(draws);
}

// One parameter element across training steps: the noise of consecutive
// steps must look as independent as that of consecutive elements.
TEST_P(GaussianTest, OneElementOverStepsIsStandardNormalAndUncorrelated) {
  NoiseKey key = NoiseKey::fromSeed(5);
  const int n = 200000;
  std::vector<double> draws(n);
  for (int s = 0; s < n; ++s)
    draws[s] = gaussianF64(GetParam(), key, s, 123456789, kGradientNoiseStream);
  expectStandardNormal(draws);
  double lag1 = 0, streams = 0;
  for (int s = 0; s + 1 < n; ++s)
    lag1 += draws[s] * draws[s + 1];
  for (int s = 0; s < n; ++s)
    streams += draws[s] *
               gaussianF64(GetParam(), key, s, 123456789, kParameterInitStream);
  // Sums of n products of independent N(0,1) have sd sqrt(n).
  EXPECT_LT(std::fabs(lag1 / n), 5 / std::sqrt(double(n)));
  EXPECT_LT(std::fabs(streams / n), 5 / std::sqrt(double(n)));
}

INSTANTIATE_TEST_SUITE_P(Generators, GaussianTest,
                         ::testing::Values(NoiseGenerator::Philox,
                                           NoiseGenerator::ChaCha20),
                         [](const auto &param) {
                           return param.param == NoiseGenerator::Philox
                                      ? "Philox"
                                      : "ChaCha20";
                         });

// Each rank owns a contiguous slice of the flat parameter buffer, padded to
// a multiple of the rank count, and draws noise from global indices: the
// gathered noise must be bitwise the same for any number of ranks.
TEST(ShardedNoise, IndependentOfTheNumberOfRanks) {
  const uint64_t elements = 10007; // prime: uneven shards for every count
  const uint64_t step = 31;
  for (NoiseGenerator gen :
       {NoiseGenerator::Philox, NoiseGenerator::ChaCha20}) {
    NoiseKey key = NoiseKey::fromSeed(1234);
    std::vector<float> reference32(elements);
    std::vector<double> reference64(elements);
    for (uint64_t j = 0; j < elements; ++j) {
      reference32[j] = gradientNoiseF32(gen, key, step, j);
      reference64[j] = gaussianF64(gen, key, step, j, kGradientNoiseStream);
    }
    for (uint64_t ranks : {1, 2, 3, 4}) {
      uint64_t shard = (elements + ranks - 1) / ranks;
      std::vector<float> gathered32;
      std::vector<double> gathered64;
      // Ranks in reverse order: the order of computation must not matter.
      std::vector<std::vector<float>> shards32(ranks);
      std::vector<std::vector<double>> shards64(ranks);
      for (uint64_t r = ranks; r-- > 0;) {
        for (uint64_t local = 0; local < shard; ++local) {
          uint64_t global = r * shard + local;
          shards32[r].push_back(gradientNoiseF32(gen, key, step, global));
          shards64[r].push_back(
              gaussianF64(gen, key, step, global, kGradientNoiseStream));
        }
      }
      for (uint64_t r = 0; r < ranks; ++r) {
        gathered32.insert(gathered32.end(), shards32[r].begin(),
                          shards32[r].end());
        gathered64.insert(gathered64.end(), shards64[r].begin(),
                          shards64[r].end());
      }
      gathered32.resize(elements); // drop the padding
      gathered64.resize(elements);
      EXPECT_EQ(gathered32, reference32) << ranks << " ranks";
      EXPECT_EQ(gathered64, reference64) << ranks << " ranks";
    }
  }
}

} // namespace
