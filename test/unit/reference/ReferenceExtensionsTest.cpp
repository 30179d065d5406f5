//===- ReferenceExtensionsTest.cpp - The reference's newer layers ---------===//
//
// What the reference learned for the next features, checked the way
// ReferenceTest.cpp checks the rest: gradients against central finite
// differences of the forward function (per layer, and per sample and
// parameter element of whole models), tables and clipping against their
// definitions written out again here. Every case draws its data from its own
// seed, printed with any failure (DPC_TEST_SEED=<n> replays a run).
//
//===----------------------------------------------------------------------===//

#include "reference/Model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <sstream>

using dprt::Activation;
using dprt::ClipMode;
using dprt::Reduction;
namespace ref = dpc::reference;
using ref::Vec;

namespace {

using Rng = std::mt19937_64;

//===----------------------------------------------------------------------===//
// Seeds, random data, comparisons
//===----------------------------------------------------------------------===//

/// Runs fn(rng) for `cases` cases, each with its own seed: drawn fresh per
/// run, or DPC_TEST_SEED + case to replay one; gtest prints it with any
/// failure of the case.
void forEachCase(int cases, const std::function<void(Rng &)> &fn) {
  uint64_t base;
  if (const char *env = std::getenv("DPC_TEST_SEED"))
    base = std::strtoull(env, nullptr, 10);
  else
    base = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  for (int i = 0; i < cases; ++i) {
    uint64_t seed = base + uint64_t(i);
    std::ostringstream trace;
    trace << "case " << i << ", seed " << seed << " (DPC_TEST_SEED=" << base
          << " reproduces this run)";
    SCOPED_TRACE(trace.str());
    Rng rng(seed);
    fn(rng);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

Vec normal(Rng &rng, int64_t n, double stddev = 1.0) {
  std::normal_distribution<double> d(0.0, stddev);
  Vec v(n);
  for (double &e : v)
    e = d(rng);
  return v;
}

Vec uniform(Rng &rng, int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(n);
  for (double &e : v)
    e = d(rng);
  return v;
}

int64_t uniformInt(Rng &rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

double dot(const Vec &a, const Vec &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// The worst error seen per kind of comparison, printed at the end of the
/// run (docs/testing.md quotes it).
class WorstErrors : public ::testing::Environment {
public:
  static WorstErrors &get() {
    static WorstErrors *w = [] {
      auto *e = new WorstErrors;
      ::testing::AddGlobalTestEnvironment(e);
      return e;
    }();
    return *w;
  }
  void record(const std::string &kind, double tol, double err) {
    double &w = worst_[{kind, tol}];
    w = std::max(w, err);
  }
  void TearDown() override {
    for (auto &[key, err] : worst_)
      std::printf("[worst error] %-24s tolerance %.0e: %.3e\n",
                  key.first.c_str(), key.second, err);
  }

private:
  std::map<std::pair<std::string, double>, double> worst_;
};

// Registered before main runs the tests.
const bool kWorstErrorsRegistered = (WorstErrors::get(), true);

/// ||out - want|| / ||scale|| against tol; infinity for a NaN, an infinity
/// or a size mismatch.
::testing::AssertionResult normwiseClose(const std::string &kind,
                                         const Vec &out, const Vec &want,
                                         const Vec &scale, double tol) {
  (void)kWorstErrorsRegistered;
  double num = 0, den = 0, err = INFINITY;
  if (out.size() == want.size() && scale.size() == want.size()) {
    bool finite = true;
    for (size_t i = 0; i < out.size(); ++i) {
      finite = finite && std::isfinite(out[i]);
      num += (out[i] - want[i]) * (out[i] - want[i]);
      den += scale[i] * scale[i];
    }
    if (finite)
      err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  }
  WorstErrors::get().record(kind, tol, err);
  if (err <= tol)
    return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << kind << ": relative error " << err << " > " << tol << " (" << out.size()
     << " elements vs " << want.size() << ")";
  return ::testing::AssertionFailure() << os.str();
}

/// max_i |out_i - want_i| / |want_i| against tol: for tables whose
/// entries span orders of magnitude.
::testing::AssertionResult elementwiseClose(const std::string &kind,
                                            const Vec &out, const Vec &want,
                                            double tol) {
  double err = out.size() == want.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < out.size() && i < want.size(); ++i) {
    double e = std::fabs(out[i] - want[i]) / std::fabs(want[i]);
    err = std::isnan(e) ? INFINITY : std::max(err, e);
  }
  WorstErrors::get().record(kind, tol, err);
  if (err <= tol)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << kind << ": elementwise relative error " << err << " > " << tol;
}

/// Identities that hold up to f64 rounding: a few hundred operations at
/// 2^-53 each stay far below 1e-12, and a wrong formula is far above it.
constexpr double kExactTolerance = 1e-12;

#define EXPECT_SAME(out, want)                                                 \
  EXPECT_TRUE(                                                                 \
      normwiseClose("f64 identity", (out), (want), (want), kExactTolerance))   \
      << #out

/// Five-point central differences of f at x, one element at a time:
///   f'(x) = (f(x - 2h) - 8 f(x - h) + 8 f(x + h) - f(x + 2h)) / (12 h)
/// + O(h^4 f^(5)). At h = 1e-4 the truncation error is ~1e-17 and the
/// rounding noise ~eps |f| / h ~ 1e-11 absolute. (ReferenceTest.cpp's
/// two-point differences at h = 1e-6 have ~1e-9 noise on these models, an
/// error of 1e-6 against the 1e-3 floor below where a gradient is exactly
/// zero, as that of GPT-2's key bias is.) The models here are smooth: no
/// relu, whose kink a stencil could straddle.
Vec numericGradient(const std::function<double(const Vec &)> &f, Vec x) {
  Vec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double xi = x[i], h = 1e-4 * std::max(1.0, std::fabs(xi));
    double at[4];
    const double steps[4] = {-2, -1, 1, 2};
    for (int k = 0; k < 4; ++k) {
      x[i] = xi + steps[k] * h;
      at[k] = f(x);
    }
    x[i] = xi;
    g[i] = (at[0] - 8 * at[1] + 8 * at[2] - at[3]) / (12 * h);
  }
  return g;
}

/// The error is measured against |numeric| + 1e-3, so that a gradient
/// that is exactly zero does not compare noise with noise; 1e-6 as in
/// ReferenceTest.cpp, some 100 times the noise above.
constexpr double kFdTolerance = 1e-6;

::testing::AssertionResult fdClose(const Vec &analytic, const Vec &numeric) {
  Vec scale(numeric.size());
  for (size_t i = 0; i < numeric.size(); ++i)
    scale[i] = std::fabs(numeric[i]) + 1e-3;
  return normwiseClose("finite differences", analytic, numeric, scale,
                       kFdTolerance);
}

#define EXPECT_FD(analytic, numeric)                                           \
  EXPECT_TRUE(fdClose((analytic), (numeric))) << #analytic

/// Every per-sample gradient element of every trainable parameter against
/// finite differences of that sample's loss.
void expectPerSampleGradientsMatchFiniteDifferences(ref::Model &m,
                                                    const ref::Batch &batch) {
  ref::StepResult r = m.perSampleGradients(batch);
  for (int64_t b = 0; b < batch.size; ++b)
    for (const std::string &p : m.trainableParams()) {
      SCOPED_TRACE("parameter " + p + ", sample " + std::to_string(b));
      Vec saved = m.param(p);
      Vec numeric = numericGradient(
          [&](const Vec &v) {
            m.param(p) = v;
            return m.losses(batch)[b];
          },
          saved);
      m.param(p) = saved;
      EXPECT_FD(r.grads.at(p)[b], numeric);
    }
}

/// Random parameters (norm gammas near 1).
void randomize(ref::Model &m, Rng &rng, double scale) {
  for (const std::string &p : m.paramNames()) {
    Vec &v = m.param(p);
    bool gamma = m.paramShape(p).size() == 1 && v[0] == 1.0;
    Vec r = normal(rng, int64_t(v.size()), gamma ? 0.1 : scale);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = (gamma ? 1.0 : 0.0) + r[i];
  }
}

//===----------------------------------------------------------------------===//
// Rotary embeddings with a frequency table
//===----------------------------------------------------------------------===//

TEST(RopeTable, ThetaFormIsTheTableOfThetaPowers) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 6, heads = 3,
            headDim = 2 * uniformInt(rng, 1, 6);
    double theta = uniform(rng, 1, 10.0, 1e6)[0];
    Vec table = ref::ropeInverseFrequencies(theta, headDim);
    ASSERT_EQ(int64_t(table.size()), headDim / 2);
    for (int64_t j = 0; j < headDim / 2; ++j)
      EXPECT_NEAR(table[j], 1.0 / std::pow(theta, double(2 * j) / headDim),
                  1e-15 * table[j]);
    Vec x = normal(rng, batch * tokens * heads * headDim);
    EXPECT_EQ(ref::ropeForward(x, batch, tokens, heads, headDim, theta),
              ref::ropeForward(x, batch, tokens, heads, headDim, table));
    EXPECT_EQ(ref::ropeBackward(x, batch, tokens, heads, headDim, theta),
              ref::ropeBackward(x, batch, tokens, heads, headDim, table));
  });
}

TEST(RopeTable, TurnsPairJByTTimesItsFrequency) {
  forEachCase(2, [](Rng &rng) {
    int64_t tokens = 7, heads = 2, headDim = 8, half = headDim / 2;
    Vec table = uniform(rng, half, 0.01, 3.0);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < half; ++j) {
        // A unit vector on element j of head 1 at token t turns into
        // (cos, sin)(t f_j) on elements (j, j + half).
        Vec x(tokens * heads * headDim, 0.0);
        int64_t base = (t * heads + 1) * headDim;
        x[base + j] = 1.0;
        Vec y = ref::ropeForward(x, 1, tokens, heads, headDim, table);
        Vec want(x.size(), 0.0);
        want[base + j] = std::cos(double(t) * table[j]);
        want[base + j + half] = std::sin(double(t) * table[j]);
        EXPECT_SAME(y, want);
      }
  });
}

TEST(RopeTable, BackwardMatchesFiniteDifferencesForAnyTable) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 5, heads = 2, headDim = 6;
    int64_t n = batch * tokens * heads * headDim;
    Vec table = uniform(rng, headDim / 2, 0.001, 2.0);
    Vec x = normal(rng, n), dy = normal(rng, n);
    EXPECT_FD(ref::ropeBackward(dy, batch, tokens, heads, headDim, table),
              numericGradient(
                  [&](const Vec &v) {
                    return dot(dy, ref::ropeForward(v, batch, tokens, heads,
                                                    headDim, table));
                  },
                  x));
    Vec y = ref::ropeForward(x, batch, tokens, heads, headDim, table);
    EXPECT_NEAR(ref::sumSquares(y), ref::sumSquares(x),
                1e-12 * ref::sumSquares(x));
  });
}

TEST(RopeTable, ModelWithATableMatchesFiniteDifferences) {
  forEachCase(2, [](Rng &rng) {
    int64_t tokens = 5, heads = 2, headDim = 4, width = heads * headDim;
    ref::Model m(tokens);
    m.realInput("x", 3);
    m.realInput("y", width);
    m.linear("w", "w.b", "x", "h", 3, width);
    m.rope("h", "hr", heads, headDim,
           ref::llama3InverseFrequencies(500.0, headDim, {4.0, 1.0, 2.0, 4}));
    m.mse("hr", "y", Reduction::Sum);
    randomize(m, rng, 0.7);
    ref::Batch batch;
    batch.size = 2;
    batch.reals["x"] = normal(rng, batch.size * tokens * 3);
    batch.reals["y"] = normal(rng, batch.size * tokens * width);
    expectPerSampleGradientsMatchFiniteDifferences(m, batch);
  });
}

// transformers 5.23.0's _compute_llama3_parameters, in f64; printed by
// llama3_inv_freq.py (next to this file).
// theta, head_dim, factor, low, high, original = (500000.0, 128, 8.0, 1.0,
// 4.0, 8192): Llama 3.1 8B.
const double kLlama31_8B[] = {1,
                              0.81461723385654472,
                              0.66360123769608848,
                              0.54058100463576697,
                              0.44036660267178046,
                              0.35873022375128993,
                              0.29222782257301511,
                              0.2380538204803507,
                              0.19392274474868576,
                              0.15797280990904317,
                              0.12868737343265052,
                              0.10483095217796996,
                              0.085397100285765609,
                              0.069565949614160322,
                              0.056669621445291044,
                              0.04616405026546052,
                              0.037606030930863933,
                              0.030634520893224042,
                              0.024955408670558694,
                              0.020329105980970156,
                              0.016560440080994446,
                              0.013490419890226748,
                              0.010989528534539826,
                              0.0089522593361943993,
                              0.0072926647372171085,
                              0.0059407303756749668,
                              0.0048394213457198928,
                              0.0039422760301166563,
                              0.0032114459947525913,
                              0.0021665707635033591,
                              0.0013718935677611381,
                              0.00085675141291963208,
                              0.00052484616099295468,
                              0.00031269375038406517,
                              0.00017850781276799638,
                              9.5562123539646833e-05,
                              7.7846552739324498e-05,
                              6.3415143457776151e-05,
                              5.1659068748189563e-05,
                              4.2082367687255257e-05,
                              3.4281021959525912e-05,
                              2.7925911282444464e-05,
                              2.2748928601828183e-05,
                              1.8531669290821308e-05,
                              1.509621717643313e-05,
                              1.2297638677963614e-05,
                              1.0017868402809974e-05,
                              8.1607282474359434e-06,
                              6.6478698711812362e-06,
                              5.4154693654999229e-06,
                              4.4115346745584042e-06,
                              3.593712173650999e-06,
                              2.9274998701761677e-06,
                              2.3847918463583037e-06,
                              1.942692537204043e-06,
                              1.5825508208909101e-06,
                              1.2891731721515574e-06,
                              1.0501826834601687e-06,
                              8.5549691264436605e-07,
                              6.9690252855116753e-07,
                              5.6770881007598369e-07,
                              4.6246538050008837e-07,
                              3.7673226901739635e-07,
                              3.0689259889145111e-07};
// (500000.0, 8, 8.0, 1.0, 4.0, 16): test/fixtures/hf/llama3-rope.
const double kLlama3RopeFixture[] = {0.57605640109551159, 0.0047007538663579916,
                                     0.00017677669529663688,
                                     6.6478698711812362e-06};

/// Two formulations of a table differ by rounding: theta^(-x) against
/// 1 / theta^x (numpy's or this test's) a few ulps, and in the blended band
/// the weight s = (r - low) / (high - low) carries a few ulps of
/// r / (high - low), which the result f ((1 - s) / factor + s) turns into a
/// relative error of up to `factor` times that: 1e-14 at factor 32 (seen:
/// 2e-14). A wrong band, weight or factor is off by far more than 1e-12.
constexpr double kTableTolerance = 1e-12;

TEST(Llama3Rope, MatchesTransformersTables) {
  struct Case {
    int64_t headDim, original;
    const double *table;
  };
  for (Case c :
       {Case{128, 8192, kLlama31_8B}, Case{8, 16, kLlama3RopeFixture}}) {
    SCOPED_TRACE("head_dim " + std::to_string(c.headDim));
    Vec got = ref::llama3InverseFrequencies(500000.0, c.headDim,
                                            {8.0, 1.0, 4.0, c.original});
    EXPECT_TRUE(elementwiseClose("llama3 table", got,
                                 Vec(c.table, c.table + c.headDim / 2),
                                 kTableTolerance));
  }
  // The 8B table has all three bands: kept (wavelength < 2048), scaled by
  // 1/8 (wavelength > 8192) and interpolated between.
  Vec plain = ref::ropeInverseFrequencies(500000.0, 128);
  int kept = 0, scaled = 0, smoothed = 0;
  for (int j = 0; j < 64; ++j) {
    double r = kLlama31_8B[j] / plain[j];
    kept += std::fabs(r - 1) < 1e-12;
    scaled += std::fabs(r - 0.125) < 1e-12;
    smoothed += r > 0.125 + 1e-3 && r < 1 - 1e-3;
  }
  EXPECT_EQ(kept + scaled + smoothed, 64);
  EXPECT_GT(kept, 0);
  EXPECT_GT(scaled, 0);
  EXPECT_GT(smoothed, 0);
}

TEST(Llama3Rope, MatchesTheDefinitionOnRandomConfigs) {
  forEachCase(20, [](Rng &rng) {
    double theta = std::exp(uniform(rng, 1, std::log(100.0), std::log(1e7))[0]);
    int64_t headDim = 2 * uniformInt(rng, 1, 64);
    ref::Llama3RopeScaling s;
    s.factor = uniform(rng, 1, 1.5, 32)[0];
    s.lowFreqFactor = uniform(rng, 1, 0.5, 2)[0];
    s.highFreqFactor = s.lowFreqFactor + uniform(rng, 1, 0.5, 6)[0];
    s.originalMaxPositions = uniformInt(rng, 8, 1 << 15);
    Vec got = ref::llama3InverseFrequencies(theta, headDim, s);
    // Meta's apply_scaling, written in terms of how many wavelengths of
    // f fit into the original context: r = L f / (2 pi). Many (r > high):
    // kept; few (r < low): f / factor; else a blend weighted by where r
    // lies between low and high.
    Vec want(headDim / 2);
    for (int64_t j = 0; j < headDim / 2; ++j) {
      double f = 1.0 / std::pow(theta, double(2 * j) / double(headDim));
      double r = double(s.originalMaxPositions) * f / (2.0 * M_PI);
      if (r > s.highFreqFactor)
        want[j] = f;
      else if (r < s.lowFreqFactor)
        want[j] = f / s.factor;
      else {
        double w = (r - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
        want[j] = f * (w + (1 - w) / s.factor);
      }
    }
    EXPECT_TRUE(elementwiseClose("llama3 table", got, want, kTableTolerance));
  });
  EXPECT_THROW(ref::llama3InverseFrequencies(1e4, 8, {8.0, 4.0, 1.0, 8192}),
               std::invalid_argument);
}

//===----------------------------------------------------------------------===//
// Learned positions and tied parameters
//===----------------------------------------------------------------------===//

struct GptShape {
  int64_t vocab = 7, tokens = 4, maxPositions = 6, width = 8, heads = 2,
          ffn = 12;
};

/// A one-block GPT-2: wte + wpe, pre-LayerNorm causal attention and a
/// gelu(tanh) MLP with biases, a final LayerNorm and the head `head` (the
/// name "wte" ties it to the token embedding, as tie_word_embeddings does).
ref::Model tinyGpt(const GptShape &s, const std::string &head) {
  int64_t d = s.width;
  ref::Model m(s.tokens);
  m.tokenInput("tok");
  m.tokenInput("tgt");
  m.embedding("wte", "tok", "e", s.vocab, d);
  m.positionEmbedding("wpe", "e", "x0", s.maxPositions, d);
  m.layerNorm("ln1.g", "ln1.b", "x0", "h", d, 1e-5);
  m.linear("q.w", "q.b", "h", "q", d, d);
  m.linear("k.w", "k.b", "h", "k", d, d);
  m.linear("v.w", "v.b", "h", "v", d, d);
  m.attention("q", "k", "v", "a", s.heads, s.heads, d / s.heads, true);
  m.linear("o.w", "o.b", "a", "o", d, d);
  m.add("x0", "o", "x1");
  m.layerNorm("ln2.g", "ln2.b", "x1", "n", d, 1e-5);
  m.linear("fc.w", "fc.b", "n", "f", d, s.ffn);
  m.activation(Activation::GeluTanh, "f", "g");
  m.linear("proj.w", "proj.b", "g", "p", s.ffn, d);
  m.add("x1", "p", "x2");
  m.layerNorm("lnf.g", "lnf.b", "x2", "z", d, 1e-5);
  m.linear(head, "", "z", "logits", d, s.vocab);
  m.crossEntropy("logits", "tgt", s.vocab, /*hasIgnore=*/true, -1);
  return m;
}

/// Random tokens and targets, about one target in five ignored (-1), but
/// never the last, and tokens 0 and 1 differ. Otherwise a sample could have
/// no gradient at all (no counted target: the cross term of a tied norm
/// would vanish) or none of its queries (counting token 0 only, which
/// attends to itself alone; or one token throughout, whose equal values
/// make attention's output independent of the queries).
ref::Batch lmBatch(Rng &rng, int64_t size, int64_t tokens, int64_t vocab) {
  ref::Batch b;
  b.size = size;
  for (int64_t i = 0; i < size * tokens; ++i) {
    b.tokens["tok"].push_back(int32_t(uniformInt(rng, 0, vocab - 1)));
    b.tokens["tgt"].push_back(uniformInt(rng, 0, 4) == 0
                                  ? -1
                                  : int32_t(uniformInt(rng, 0, vocab - 1)));
  }
  for (int64_t s = 0; s < size; ++s) {
    b.tokens["tgt"][(s + 1) * tokens - 1] =
        int32_t(uniformInt(rng, 0, vocab - 1));
    int32_t &second = b.tokens["tok"][s * tokens + 1];
    second = int32_t(
        (b.tokens["tok"][s * tokens] + uniformInt(rng, 1, vocab - 1)) % vocab);
  }
  return b;
}

TEST(PositionEmbedding, AddsRowTAndMatchesFiniteDifferences) {
  forEachCase(3, [](Rng &rng) {
    int64_t batch = 2, tokens = 3, maxPositions = 5, dim = 4;
    Vec x = normal(rng, batch * tokens * dim),
        table = normal(rng, maxPositions * dim),
        dy = normal(rng, batch * tokens * dim);
    Vec y = ref::positionEmbeddingForward(x, table, batch, tokens, dim);
    Vec want = x;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < dim; ++j)
          want[(b * tokens + t) * dim + j] += table[t * dim + j];
    EXPECT_EQ(y, want);
    ref::PerSample g = ref::positionEmbeddingGradPerSample(dy, batch, tokens,
                                                           maxPositions, dim);
    for (int64_t b = 0; b < batch; ++b) {
      SCOPED_TRACE("sample " + std::to_string(b));
      Vec dyb(dy.begin() + b * tokens * dim,
              dy.begin() + (b + 1) * tokens * dim);
      Vec xb(x.begin() + b * tokens * dim, x.begin() + (b + 1) * tokens * dim);
      // Positions tokens .. maxPositions-1 are not read: exactly zero.
      EXPECT_FD(g[b], numericGradient(
                          [&](const Vec &p) {
                            return dot(dyb, ref::positionEmbeddingForward(
                                                xb, p, 1, tokens, dim));
                          },
                          table));
      for (int64_t i = tokens * dim; i < maxPositions * dim; ++i)
        EXPECT_EQ(g[b][i], 0.0);
    }
  });
  ref::Model m(/*tokens=*/4);
  m.realInput("x", 2);
  EXPECT_THROW(m.positionEmbedding("wpe", "x", "y", 3, 2),
               std::invalid_argument);
}

TEST(TiedParameters, TinyGptPerSampleGradientsMatchFiniteDifferences) {
  forEachCase(1, [](Rng &rng) {
    GptShape s;
    ref::Model m = tinyGpt(s, "wte");
    randomize(m, rng, 0.5);
    EXPECT_EQ(m.paramShape("wte"), (std::vector<int64_t>{s.vocab, s.width}));
    EXPECT_EQ(std::count(m.paramNames().begin(), m.paramNames().end(), "wte"),
              1);
    ref::Batch batch = lmBatch(rng, 2, s.tokens, s.vocab);
    expectPerSampleGradientsMatchFiniteDifferences(m, batch);
    ref::StepResult r = m.perSampleGradients(batch);
    for (int64_t b = 0; b < batch.size; ++b)
      for (int64_t i = s.tokens * s.width; i < s.maxPositions * s.width; ++i)
        EXPECT_EQ(r.grads["wpe"][b][i], 0.0) << "unreached position";
  });
}

TEST(TiedParameters, TwoLinearsAndTwoNormsOfOneShapeMatchFiniteDifferences) {
  forEachCase(2, [](Rng &rng) {
    // y = rms(rms(W silu(W x + b) + b)) with W, b and gamma each read twice.
    ref::Model m(/*tokens=*/3);
    m.realInput("x", 5);
    m.realInput("y", 5);
    m.linear("w", "b", "x", "h", 5, 5);
    m.activation(Activation::Silu, "h", "a");
    m.linear("w", "b", "a", "h2", 5, 5);
    m.rmsNorm("g", "h2", "n1", 5, 1e-5);
    m.rmsNorm("g", "n1", "n2", 5, 1e-5);
    m.mse("n2", "y");
    EXPECT_EQ(m.paramNames(), (std::vector<std::string>{"w", "b", "g"}));
    randomize(m, rng, 0.8);
    ref::Batch batch;
    batch.size = 2;
    batch.reals["x"] = normal(rng, 2 * 3 * 5);
    batch.reals["y"] = normal(rng, 2 * 3 * 5);
    expectPerSampleGradientsMatchFiniteDifferences(m, batch);
  });
}

TEST(TiedParameters, ShapesMustAgree) {
  ref::Model m(/*tokens=*/2);
  m.tokenInput("tok");
  m.embedding("emb", "tok", "x", 6, 4);
  // [out = 4, in = 4] is not the table's [6, 4].
  EXPECT_THROW(m.linear("emb", "", "x", "y", 4, 4), std::invalid_argument);
  m.linear("emb", "", "x", "logits", 4, 6);
  EXPECT_EQ(m.paramNames(), std::vector<std::string>{"emb"});
}

/// The tied model and its twin with the head apart ("lm_head", the same
/// values): the twin's two gradients are the tied parameter's two uses.
struct TiedAndTwin {
  ref::Model tied, twin;
};

TiedAndTwin tiedAndTwin(Rng &rng, const GptShape &s) {
  TiedAndTwin p{tinyGpt(s, "wte"), tinyGpt(s, "lm_head")};
  randomize(p.tied, rng, 0.5);
  for (const std::string &name : p.tied.paramNames())
    p.twin.param(name) = p.tied.param(name);
  p.twin.param("lm_head") = p.tied.param("wte");
  return p;
}

TEST(TiedParameters, GradientIsTheSumOfTheUsesAndTheNormHasTheCrossTerm) {
  forEachCase(4, [](Rng &rng) {
    GptShape s;
    auto [tied, twin] = tiedAndTwin(rng, s);
    ref::Batch batch = lmBatch(rng, 3, s.tokens, s.vocab);
    ref::StepResult r = tied.perSampleGradients(batch);
    ref::StepResult u = twin.perSampleGradients(batch);
    EXPECT_EQ(r.loss, u.loss);
    EXPECT_EQ(r.grads.count("lm_head"), 0u);
    for (int64_t b = 0; b < batch.size; ++b) {
      SCOPED_TRACE("sample " + std::to_string(b));
      const Vec &emb = u.grads["wte"][b], &head = u.grads["lm_head"][b];
      Vec sum = emb;
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += head[i];
      EXPECT_SAME(r.grads["wte"][b], sum);
      // ||e + h||^2 = ||e||^2 + ||h||^2 + 2 <e, h>, to rounding (1e-12),
      // and on random data the cross term is far above rounding: a norm
      // formed as the sum of the two uses' squared norms would be wrong.
      // |cross| / separate is typically 0.1 and has a density near 0 of
      // about 40 (smallest of 2400 samples: 1.2e-5), so 1e-9 fails a sample
      // with probability ~4e-8.
      double separate = ref::sumSquares(emb) + ref::sumSquares(head);
      double cross = 2 * dot(emb, head);
      EXPECT_NEAR(r.norm2["wte"][b], separate + cross,
                  1e-12 * (separate + std::fabs(cross)));
      EXPECT_GT(std::fabs(cross), 1e-9 * separate);
      EXPECT_GT(std::fabs(r.norm2["wte"][b] - separate), 1e-9 * separate);
      // The sample's norm counts the tied parameter once, with its cross
      // term.
      double n2 = 0;
      for (const std::string &p : tied.trainableParams())
        n2 += ref::sumSquares(r.grads[p][b]);
      EXPECT_NEAR(r.norm[b], std::sqrt(n2), 1e-12 * std::sqrt(n2));
      EXPECT_NEAR(r.norm[b] * r.norm[b], u.norm[b] * u.norm[b] + cross,
                  1e-10 * n2);
    }
  });
}

TEST(TiedParameters, DpStepClipsAndStepsTheSummedGradientOnce) {
  forEachCase(2, [](Rng &rng) {
    GptShape s;
    auto [tied, twin] = tiedAndTwin(rng, s);
    ref::Batch batch = lmBatch(rng, 4, s.tokens, s.vocab);
    Vec mask{1, 1, 0, 1};
    ref::StepResult u = twin.perSampleGradients(batch);
    // n_b of the summed gradient: the untied norm plus the cross term.
    Vec n(batch.size);
    for (int64_t b = 0; b < batch.size; ++b)
      n[b] = std::sqrt(u.norm[b] * u.norm[b] +
                       2 * dot(u.grads["wte"][b], u.grads["lm_head"][b]));
    ref::Recipe recipe;
    // Between the smallest and the largest norm: some samples are clipped,
    // some are not.
    recipe.maxNorm =
        0.5 * (std::min({n[0], n[1], n[3]}) + std::max({n[0], n[1], n[3]}));
    recipe.lr = 0.3;
    recipe.expectedBatch = 3;
    Vec before = tied.param("wte");
    ref::StepResult r = tied.dpStep(batch, mask, recipe);
    Vec want = before;
    for (int64_t b = 0; b < batch.size; ++b) {
      const Vec &emb = u.grads["wte"][b], &head = u.grads["lm_head"][b];
      double c = mask[b] * std::min(1.0, recipe.maxNorm / (n[b] + 1e-6));
      EXPECT_NEAR(r.clip["wte"][b], c, 1e-12);
      for (size_t i = 0; i < want.size(); ++i)
        want[i] -= recipe.lr * c * (emb[i] + head[i]) / recipe.expectedBatch;
    }
    EXPECT_SAME(tied.param("wte"), want);
  });
}

//===----------------------------------------------------------------------===//
// LoRA
//===----------------------------------------------------------------------===//

/// x [tokens, in] -> loraLinear -> y, loss ||y - target||^2 (sum).
ref::Model loraRegression(int64_t tokens, int64_t in, int64_t out, int64_t rank,
                          double scaling) {
  ref::Model m(tokens);
  m.realInput("x", in);
  m.realInput("target", out);
  m.loraLinear("w", "w.b", "w.lora_A", "w.lora_B", "x", "y", in, out, rank,
               scaling);
  m.mse("y", "target", Reduction::Sum);
  return m;
}

TEST(Lora, ForwardIsPeftsFormulaAndMergesIntoTheBaseWeight) {
  forEachCase(3, [](Rng &rng) {
    int64_t tokens = 3, in = 5, out = 4, rank = 2;
    double scaling = 16.0 / rank; // lora_alpha 16
    ref::Model m = loraRegression(tokens, in, out, rank, scaling);
    randomize(m, rng, 0.6);
    EXPECT_EQ(m.paramShape("w.lora_A"), (std::vector<int64_t>{rank, in}));
    EXPECT_EQ(m.paramShape("w.lora_B"), (std::vector<int64_t>{out, rank}));
    EXPECT_EQ(m.trainableParams(),
              (std::vector<std::string>{"w.lora_A", "w.lora_B"}));
    ref::Batch batch;
    batch.size = 2;
    batch.reals["x"] = normal(rng, batch.size * tokens * in);
    batch.reals["target"] = normal(rng, batch.size * tokens * out);
    const Vec &w = m.param("w"), &bias = m.param("w.b"),
              &a = m.param("w.lora_A"), &bm = m.param("w.lora_B");
    const Vec &x = batch.reals["x"], &target = batch.reals["target"];
    // y_t = W x_t + bias + scaling B (A x_t), loss = sum (y - target)^2.
    Vec want(batch.size, 0.0);
    for (int64_t r = 0; r < batch.size * tokens; ++r) {
      Vec ax(rank, 0.0);
      for (int64_t k = 0; k < rank; ++k)
        for (int64_t i = 0; i < in; ++i)
          ax[k] += a[k * in + i] * x[r * in + i];
      for (int64_t o = 0; o < out; ++o) {
        double y = bias[o];
        for (int64_t i = 0; i < in; ++i)
          y += w[o * in + i] * x[r * in + i];
        for (int64_t k = 0; k < rank; ++k)
          y += scaling * bm[o * rank + k] * ax[k];
        want[r / tokens] +=
            (y - target[r * out + o]) * (y - target[r * out + o]);
      }
    }
    EXPECT_SAME(m.losses(batch), want);
    // peft's merge: W + scaling B A in a plain linear gives the same losses.
    ref::Model merged(tokens);
    merged.realInput("x", in);
    merged.realInput("target", out);
    merged.linear("w", "w.b", "x", "y", in, out);
    merged.mse("y", "target", Reduction::Sum);
    merged.param("w") = w;
    merged.param("w.b") = bias;
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        for (int64_t k = 0; k < rank; ++k)
          merged.param("w")[o * in + i] +=
              scaling * bm[o * rank + k] * a[k * in + i];
    EXPECT_SAME(merged.losses(batch), want);
    // With the base trained as well, every gradient is its own finite
    // difference.
    m.setTrainable("w", true);
    m.setTrainable("w.b", true);
    expectPerSampleGradientsMatchFiniteDifferences(m, batch);
  });
}

struct LlamaShape {
  int64_t vocab = 7, tokens = 5, width = 8, heads = 2, kvHeads = 1, rank = 2;
  double alpha = 4;
};

/// A one-block Llama (attention only) with Llama 3 rope and peft's default
/// LoRA targets for Llama, q_proj and v_proj; everything else frozen.
ref::Model tinyLoraLlama(const LlamaShape &s) {
  int64_t d = s.width, hd = d / s.heads, kv = s.kvHeads * hd;
  double scaling = s.alpha / double(s.rank);
  ref::Model m(s.tokens);
  m.tokenInput("tok");
  m.tokenInput("tgt");
  m.embedding("emb", "tok", "x0", s.vocab, d);
  m.rmsNorm("n1", "x0", "h", d, 1e-5);
  m.loraLinear("wq", "", "wq.lora_A", "wq.lora_B", "h", "q", d, d, s.rank,
               scaling);
  m.linear("wk", "", "h", "k", d, kv);
  m.loraLinear("wv", "", "wv.lora_A", "wv.lora_B", "h", "v", d, kv, s.rank,
               scaling);
  // At original_max_position_embeddings 16 the two frequencies of a head of
  // 4 fall in the interpolated and the scaled band.
  Vec invFreq =
      ref::llama3InverseFrequencies(500000.0, hd, {8.0, 1.0, 4.0, 16});
  m.rope("q", "qr", s.heads, hd, invFreq);
  m.rope("k", "kr", s.kvHeads, hd, invFreq);
  m.attention("qr", "kr", "v", "a", s.heads, s.kvHeads, hd, true);
  m.linear("wo", "", "a", "o", d, d);
  m.add("x0", "o", "x1");
  m.rmsNorm("norm", "x1", "f", d, 1e-5);
  m.linear("head", "", "f", "logits", d, s.vocab);
  m.crossEntropy("logits", "tgt", s.vocab, /*hasIgnore=*/true, -1);
  for (const std::string &p : m.paramNames())
    if (p.find(".lora_") == std::string::npos)
      m.setTrainable(p, false);
  return m;
}

TEST(Lora, AdapterGradientsMatchFiniteDifferencesAndTheBaseHasNone) {
  forEachCase(2, [](Rng &rng) {
    LlamaShape s;
    ref::Model m = tinyLoraLlama(s);
    randomize(m, rng, 0.5);
    EXPECT_EQ(m.trainableParams(),
              (std::vector<std::string>{"wq.lora_A", "wq.lora_B", "wv.lora_A",
                                        "wv.lora_B"}));
    ref::Batch batch = lmBatch(rng, 2, s.tokens, s.vocab);
    expectPerSampleGradientsMatchFiniteDifferences(m, batch);
    ref::StepResult r = m.perSampleGradients(batch);
    EXPECT_EQ(r.grads.size(), 4u);
    EXPECT_EQ(r.grads.count("wq"), 0u);
    EXPECT_EQ(r.grads.count("wv"), 0u);
  });
}

TEST(Lora, PeftsInitialBGivesAZeroGradientOfAAndTheBaseDoesNotMove) {
  forEachCase(2, [](Rng &rng) {
    LlamaShape s;
    ref::Model m = tinyLoraLlama(s);
    randomize(m, rng, 0.5);
    // peft starts B at zero: the adapter adds nothing and A's gradient,
    // B^T times the output gradient, is exactly zero; B's is not.
    m.param("wq.lora_B").assign(m.param("wq.lora_B").size(), 0.0);
    ref::Batch batch = lmBatch(rng, 3, s.tokens, s.vocab);
    ref::StepResult r = m.perSampleGradients(batch);
    for (int64_t b = 0; b < batch.size; ++b) {
      EXPECT_EQ(ref::sumSquares(r.grads["wq.lora_A"][b]), 0.0);
      EXPECT_GT(ref::sumSquares(r.grads["wq.lora_B"][b]), 0.0);
    }
    std::map<std::string, Vec> before;
    for (const std::string &p : m.paramNames())
      before[p] = m.param(p);
    ref::Recipe recipe;
    recipe.lr = 0.2;
    m.dpStep(batch, Vec(batch.size, 1.0), recipe);
    for (const std::string &p : m.paramNames())
      if (p.find(".lora_") == std::string::npos)
        EXPECT_EQ(m.param(p), before[p]) << p;
    EXPECT_NE(m.param("wq.lora_B"), before["wq.lora_B"]);
    EXPECT_EQ(m.param("wq.lora_A"), before["wq.lora_A"]);
  });
}

//===----------------------------------------------------------------------===//
// DP off, user-level DP, the per-sample gradient matrix
//===----------------------------------------------------------------------===//

/// examples/mlp.mlir's classifier (4 features, 6 hidden, 3 classes) with
/// silu in place of relu: were every relu unit dead, which random
/// parameters allow, fc1's and the LayerNorm's gradients would be exactly
/// zero and a clipping check on them blind.
ref::Model classifier() {
  ref::Model m(1);
  m.realInput("x", 4);
  m.tokenInput("label");
  m.linear("fc1.w", "fc1.b", "x", "h", 4, 6);
  m.layerNorm("ln.g", "ln.b", "h", "n", 6, 1e-5);
  m.activation(Activation::Silu, "n", "a");
  m.linear("fc2.w", "fc2.b", "a", "logits", 6, 3);
  m.crossEntropy("logits", "label", 3);
  return m;
}

ref::Batch mlpBatch(Rng &rng, int64_t size, int64_t features, int64_t classes) {
  ref::Batch b;
  b.size = size;
  b.reals["x"] = normal(rng, size * features);
  for (int64_t i = 0; i < size; ++i)
    b.tokens["label"].push_back(int32_t(uniformInt(rng, 0, classes - 1)));
  return b;
}

std::map<std::string, Vec> paramValues(const ref::Model &m) {
  std::map<std::string, Vec> v;
  for (const std::string &p : m.paramNames())
    v[p] = m.param(p);
  return v;
}

/// SGD without weight decay moved every trainable parameter by
/// -lr sum[p] / B_expected.
void expectSgdStepBy(const ref::Model &m,
                     const std::map<std::string, Vec> &before,
                     const std::map<std::string, Vec> &sum,
                     const ref::Recipe &recipe) {
  for (const std::string &p : m.trainableParams()) {
    Vec want = before.at(p);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] -= recipe.lr * sum.at(p)[i] / recipe.expectedBatch;
    EXPECT_SAME(m.param(p), want);
  }
}

const ClipMode kClipModes[] = {ClipMode::Flat, ClipMode::PerLayer,
                               ClipMode::Automatic};

TEST(DpOff, StepsByThePlainSumOfThePerSampleGradients) {
  for (ClipMode mode : kClipModes)
    for (ref::PrivacyUnit unit :
         {ref::PrivacyUnit::Sample, ref::PrivacyUnit::User})
      forEachCase(1, [&](Rng &rng) {
        ref::Model m = classifier();
        randomize(m, rng, 1.0);
        ref::Batch batch = mlpBatch(rng, 5, 4, 3);
        batch.users = {1, 2, 1, 3, 2};
        Vec mask{1, 1, 0, 1, 1};
        ref::Recipe recipe;
        recipe.clip = mode;
        recipe.unit = unit;
        recipe.clipping = false;
        recipe.maxNorm = 1e-3; // would clip every sample
        recipe.lr = 0.5;
        recipe.expectedBatch = 4;
        auto before = paramValues(m);
        ref::StepResult r = m.dpStep(batch, mask, recipe);
        std::map<std::string, Vec> sum;
        for (const std::string &p : m.trainableParams()) {
          sum[p].assign(m.param(p).size(), 0.0);
          for (int64_t b = 0; b < batch.size; ++b) {
            EXPECT_EQ(r.clip[p][b], mask[b]);
            if (mask[b] != 0)
              for (size_t i = 0; i < sum[p].size(); ++i)
                sum[p][i] += r.grads[p][b][i];
          }
          EXPECT_SAME(r.clippedSum[p], sum[p]);
        }
        expectSgdStepBy(m, before, sum, recipe);
        // Not blind: with clipping the sum has norm <= 4 C = 4e-3 (per
        // layer 8e-3, automatic < 4e-3); the plain sum is of order 1.
        ref::Model clipped = classifier();
        for (auto &[p, v] : before)
          clipped.param(p) = v;
        recipe.clipping = true;
        ref::StepResult rc = clipped.dpStep(batch, mask, recipe);
        double plain = 0, diff = 0;
        for (const std::string &p : m.trainableParams())
          for (size_t i = 0; i < sum[p].size(); ++i) {
            plain += sum[p][i] * sum[p][i];
            diff += (rc.clippedSum[p][i] - sum[p][i]) *
                    (rc.clippedSum[p][i] - sum[p][i]);
          }
        EXPECT_GT(std::sqrt(diff), 0.5 * std::sqrt(plain));
      });
}

TEST(UserLevelDp, ClipsEachUsersSummedGradientAsDefined) {
  for (ClipMode mode : kClipModes)
    forEachCase(2, [&](Rng &rng) {
      ref::Model m = classifier();
      randomize(m, rng, 1.0);
      // User 7: samples 0, 2, 3; user 3: samples 1, 4, 5 (masked), 7;
      // user 12: sample 6 (masked).
      ref::Batch batch = mlpBatch(rng, 8, 4, 3);
      batch.users = {7, 3, 7, 7, 3, 3, 12, 3};
      Vec mask{1, 1, 1, 1, 1, 0, 0, 1};
      const std::vector<int64_t> ids{3, 7, 12};
      std::vector<std::string> trainable = m.trainableParams();
      const double layers = double(trainable.size());

      // The definition: G_u = sum of u's unmasked per-sample gradients.
      ref::StepResult ps = m.perSampleGradients(batch);
      std::map<std::string, std::vector<Vec>> g;
      Vec n2(3, 0.0);
      for (const std::string &p : trainable) {
        g[p].assign(3, Vec(m.param(p).size(), 0.0));
        for (int64_t b = 0; b < batch.size; ++b) {
          int64_t u =
              std::find(ids.begin(), ids.end(), batch.users[b]) - ids.begin();
          if (mask[b] != 0)
            for (size_t i = 0; i < g[p][u].size(); ++i)
              g[p][u][i] += ps.grads[p][b][i];
        }
        for (int u = 0; u < 3; ++u)
          n2[u] += ref::sumSquares(g[p][u]);
      }
      // A masked sample's gradient is not zero: dropping it matters.
      EXPECT_GT(ps.norm[5], 0.0);
      // C between the two users' norms: user 3 or 7 is over it, the other
      // under (per layer: C_l = C / sqrt(L) between their norms in fc1.w).
      ref::Recipe recipe;
      recipe.clip = mode;
      recipe.unit = ref::PrivacyUnit::User;
      recipe.maxNorm = std::sqrt(std::sqrt(n2[0] * n2[1]));
      if (mode == ClipMode::PerLayer)
        recipe.maxNorm = std::sqrt(std::sqrt(ref::sumSquares(g["fc1.w"][0]) *
                                             ref::sumSquares(g["fc1.w"][1])) *
                                   layers);
      recipe.lr = 0.4;
      recipe.expectedBatch = 6;

      auto before = paramValues(m);
      ref::StepResult r = m.dpStep(batch, mask, recipe);
      EXPECT_EQ(r.users, ids);
      std::map<std::string, Vec> sum;
      Vec flatClipped(3, 0.0);
      for (const std::string &p : trainable) {
        SCOPED_TRACE(p);
        sum[p].assign(m.param(p).size(), 0.0);
        double bound = mode == ClipMode::PerLayer
                           ? recipe.maxNorm / std::sqrt(layers)
                           : recipe.maxNorm;
        for (int u = 0; u < 3; ++u) {
          EXPECT_SAME(r.userGrads[p][u], g[p][u]);
          double n = mode == ClipMode::PerLayer
                         ? std::sqrt(ref::sumSquares(g[p][u]))
                         : std::sqrt(n2[u]);
          double c = u == 2 ? 0.0 // every sample masked
                     : mode == ClipMode::Automatic
                         ? bound / (n + recipe.gamma)
                         : std::min(1.0, bound / (n + 1e-6));
          EXPECT_NEAR(r.userClip[p][u], c, 1e-12 * c);
          flatClipped[u] += c * c * ref::sumSquares(g[p][u]);
          for (size_t i = 0; i < sum[p].size(); ++i)
            sum[p][i] += c * g[p][u][i];
          if (mode == ClipMode::PerLayer)
            EXPECT_LE(c * n, bound * (1 + 1e-12));
        }
        EXPECT_SAME(r.clippedSum[p], sum[p]);
        for (int64_t b = 0; b < batch.size; ++b) {
          int64_t u =
              std::find(ids.begin(), ids.end(), batch.users[b]) - ids.begin();
          EXPECT_EQ(r.clip[p][b], mask[b] * r.userClip[p][u]);
        }
      }
      if (mode != ClipMode::Automatic) {
        // One of users 3 and 7 is clipped, the other kept whole.
        double c3 = r.userClip["fc1.w"][0], c7 = r.userClip["fc1.w"][1];
        EXPECT_TRUE(std::min(c3, c7) < 1.0 && std::max(c3, c7) == 1.0)
            << c3 << " " << c7;
      }
      if (mode == ClipMode::Flat)
        for (int u = 0; u < 2; ++u)
          EXPECT_LE(std::sqrt(flatClipped[u]), recipe.maxNorm * (1 + 1e-12));
      EXPECT_NEAR(r.userNorm[0], std::sqrt(n2[0]), 1e-12 * std::sqrt(n2[0]));
      expectSgdStepBy(m, before, sum, recipe);
    });
}

TEST(UserLevelDp, OneSamplePerUserIsSampleLevelDp) {
  for (ClipMode mode : kClipModes)
    forEachCase(1, [&](Rng &rng) {
      ref::Model m = classifier();
      randomize(m, rng, 1.0);
      ref::Batch batch = mlpBatch(rng, 5, 4, 3);
      batch.users = {40, 30, 20, 10, 0};
      Vec mask{1, 0, 1, 1, 1};
      ref::Recipe recipe;
      recipe.clip = mode;
      recipe.maxNorm = 0.3;
      ref::Model same = m;
      ref::StepResult bySample = m.dpStep(batch, mask, recipe);
      recipe.unit = ref::PrivacyUnit::User;
      ref::StepResult byUser = same.dpStep(batch, mask, recipe);
      for (const std::string &p : m.trainableParams()) {
        EXPECT_SAME(byUser.clip[p], bySample.clip[p]);
        EXPECT_SAME(byUser.clippedSum[p], bySample.clippedSum[p]);
        EXPECT_SAME(same.param(p), m.param(p));
      }
    });
}

TEST(UserLevelDp, NeedsOneUserPerSample) {
  Rng rng(1);
  ref::Model m = classifier();
  ref::Batch batch = mlpBatch(rng, 3, 4, 3);
  batch.users = {1, 2};
  ref::Recipe recipe;
  recipe.unit = ref::PrivacyUnit::User;
  EXPECT_THROW(m.dpStep(batch, Vec(3, 1.0), recipe), std::invalid_argument);
}

TEST(PerSampleGradientMatrix, RowBIsSampleBsGradient) {
  forEachCase(1, [](Rng &rng) {
    ref::Model m = classifier();
    randomize(m, rng, 1.0);
    ref::Batch batch = mlpBatch(rng, 5, 4, 3);
    ref::StepResult r = m.perSampleGradients(batch);
    for (const std::string &p : m.trainableParams()) {
      Vec mat = r.gradMatrix(p);
      size_t numel = m.param(p).size();
      ASSERT_EQ(mat.size(), batch.size * numel);
      for (int64_t b = 0; b < batch.size; ++b) {
        Vec row(mat.begin() + b * numel, mat.begin() + (b + 1) * numel);
        EXPECT_EQ(row, r.grads[p][b]);
        EXPECT_EQ(ref::sumSquares(row), r.norm2[p][b]);
      }
    }
    EXPECT_THROW(r.gradMatrix("nope"), std::invalid_argument);
  });
}

} // namespace
