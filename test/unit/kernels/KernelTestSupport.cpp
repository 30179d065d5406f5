//===- KernelTestSupport.cpp - Buffers, seeds and tolerances --------------===//

#include "KernelTestSupport.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

namespace dpc::test {

using dprt::DType;

double tolerance(DType dt) {
  switch (dt) {
  case DType::F64:
    return 1e-10;
  case DType::F32:
    return 1e-5;
  case DType::BF16:
    return 1e-2;
  case DType::MXFP8:
    return 1.0 / 16.0;
  }
  return 0;
}

double accTolerance(DType dt) { return dt == DType::F64 ? 1e-10 : 1e-5; }

double storedTolerance(DType dt) {
  return (dt == DType::BF16 ? 1.0 / 256.0 : 0.0) + accTolerance(dt);
}

double bf16Value(uint16_t bits) {
  uint32_t b = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint16_t bf16Bits(double d) {
  if (std::isnan(d))
    return 0x7fc0;
  uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  double a = std::fabs(d);
  // Magnitudes 0 .. 0x7f80 (infinity) are ordered like their values; for
  // the distance, infinity stands for 2^128, the next value after the
  // largest finite one, so that a halfway overflow rounds to infinity.
  auto value = [](uint32_t m) {
    return m == 0x7f80 ? std::ldexp(1.0, 128) : bf16Value(uint16_t(m));
  };
  uint32_t lo = 0, hi = 0x7f80; // the largest m with value(m) <= a
  if (a >= value(hi))
    return sign | 0x7f80;
  while (lo < hi) {
    uint32_t mid = (lo + hi + 1) / 2;
    if (value(mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  double below = a - value(lo), above = value(lo + 1) - a;
  uint32_t m = below < above   ? lo
               : above < below ? lo + 1
                               : (lo % 2 ? lo + 1 : lo);
  return uint16_t(sign | m);
}

namespace mx {

double e4m3Value(uint8_t code) {
  const int e = (code >> 3) & 0xF, m = code & 7;
  if (e == 0xF && m == 7)
    return std::numeric_limits<double>::quiet_NaN();
  const double magnitude =
      e == 0 ? m / 512.0 : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return code & 0x80 ? -magnitude : magnitude;
}

uint8_t e4m3Code(double v) {
  if (std::isnan(v))
    return 0x7F;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  const double a = std::fabs(v);
  // Codes 0 .. 0x7E are ordered like their values: the nearest by a search
  // over all of them, ties to the even code (an even mantissa), saturating.
  uint8_t best = 0;
  for (uint8_t c = 1; c <= 0x7E; ++c) {
    const double d = std::fabs(e4m3Value(c) - a),
                 dBest = std::fabs(e4m3Value(best) - a);
    if (d < dBest || (d == dBest && c % 2 == 0))
      best = c;
  }
  return sign | best;
}

int blockExponent(double amax) {
  for (int e = -126; e <= 127; ++e)
    if (amax <= 448.0 * std::ldexp(1.0, e))
      return e;
  return 127;
}

} // namespace mx

namespace {
int64_t bufferBytes(DType dt, int64_t n, int64_t row) {
  if (dt == DType::MXFP8 &&
      (row % dprt::kMxBlock != 0 || row == 0 || n % row != 0))
    throw std::invalid_argument(
        "an MXFP8 buffer holds whole rows of whole blocks of 32");
  return std::max<int64_t>(dprt::storageBytes(dt, n), 1);
}
} // namespace

Buffer::Buffer(DType dt, int64_t n, int64_t row)
    : dt_(dt), n_(n), row_(row > 0 ? row : n),
      bytes_(bufferBytes(dt, n, row > 0 ? row : n)) {
  poison();
}

unsigned char &Buffer::elementByte(int64_t i) {
  const int64_t b = i / row_;
  return bytes_[b * dprt::storageBytes(DType::MXFP8, row_) + i - b * row_];
}
unsigned char &Buffer::scaleByte(int64_t i) {
  const int64_t b = i / row_;
  return bytes_[b * dprt::storageBytes(DType::MXFP8, row_) + row_ +
                (i - b * row_) / dprt::kMxBlock];
}
unsigned char Buffer::elementByte(int64_t i) const {
  return const_cast<Buffer *>(this)->elementByte(i);
}
unsigned char Buffer::scaleByte(int64_t i) const {
  return const_cast<Buffer *>(this)->scaleByte(i);
}

Buffer::Buffer(DType dt, const Vec &v, int64_t row)
    : Buffer(dt, int64_t(v.size()), row) {
  if (dt == DType::MXFP8) {
    // Block by block, by types.h's rule: the scale from the block's largest
    // magnitude, each element rounded under it.
    for (int64_t k = 0; k < n_ / dprt::kMxBlock; ++k) {
      double amax = 0;
      bool finite = true;
      for (int64_t i = 0; i < dprt::kMxBlock; ++i) {
        finite &= std::isfinite(v[k * dprt::kMxBlock + i]);
        amax = std::max(amax, std::fabs(v[k * dprt::kMxBlock + i]));
      }
      scaleByte(k * dprt::kMxBlock) =
          finite ? uint8_t(mx::blockExponent(amax) + 127) : 0xFF;
      for (int64_t i = 0; i < dprt::kMxBlock; ++i)
        set(k * dprt::kMxBlock + i, v[k * dprt::kMxBlock + i]);
    }
    return;
  }
  for (int64_t i = 0; i < n_; ++i)
    set(i, v[i]);
}

double Buffer::get(int64_t i) const {
  switch (dt_) {
  case DType::F64:
    return reinterpret_cast<const double *>(bytes_.data())[i];
  case DType::F32:
    return reinterpret_cast<const float *>(bytes_.data())[i];
  case DType::BF16:
    return bf16Value(reinterpret_cast<const uint16_t *>(bytes_.data())[i]);
  case DType::MXFP8: {
    const uint8_t scale = scaleByte(i);
    return scale == 0xFF ? std::numeric_limits<double>::quiet_NaN()
                         : mx::e4m3Value(elementByte(i)) *
                               std::ldexp(1.0, int(scale) - 127);
  }
  }
  return 0;
}

void Buffer::set(int64_t i, double v) {
  switch (dt_) {
  case DType::F64:
    reinterpret_cast<double *>(bytes_.data())[i] = v;
    return;
  case DType::F32:
    reinterpret_cast<float *>(bytes_.data())[i] = float(v);
    return;
  case DType::BF16:
    reinterpret_cast<uint16_t *>(bytes_.data())[i] = bf16Bits(v);
    return;
  case DType::MXFP8: {
    // Under the block's scale, saturating; a value that is not finite makes
    // the whole block NaN (types.h).
    unsigned char &scale = scaleByte(i);
    if (!std::isfinite(v) || scale == 0xFF) {
      scale = 0xFF;
      const int64_t first = i / dprt::kMxBlock * dprt::kMxBlock;
      for (int64_t j = first; j < first + dprt::kMxBlock; ++j)
        elementByte(j) = 0x7F;
      return;
    }
    elementByte(i) = mx::e4m3Code(std::ldexp(v, 127 - int(scale)));
    return;
  }
  }
}

Vec Buffer::values() const {
  Vec v(n_);
  for (int64_t i = 0; i < n_; ++i)
    v[i] = get(i);
  return v;
}

void Buffer::poison() {
  for (int64_t i = 0; i < n_; ++i)
    set(i, std::numeric_limits<double>::quiet_NaN());
}


Vec rounded(DType dt, const Vec &v) { return Buffer(dt, v).values(); }

Vec uniform(Rng &rng, int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(n);
  for (double &e : v)
    e = d(rng);
  return v;
}

Vec normal(Rng &rng, int64_t n, double stddev) {
  std::normal_distribution<double> d(0.0, stddev);
  Vec v(n);
  for (double &e : v)
    e = d(rng);
  return v;
}

int64_t uniformInt(Rng &rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

double uniformScalar(Rng &rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

reference::Tokens randomTokens(Rng &rng, int64_t n, int64_t vocab) {
  return randomTargets(rng, n, vocab, 0, 0);
}

reference::Tokens randomTargets(Rng &rng, int64_t n, int64_t classes,
                                int32_t ignoreIndex, int64_t ignoreOneIn) {
  reference::Tokens t(n);
  for (int32_t &e : t)
    e = ignoreOneIn > 0 && uniformInt(rng, 1, ignoreOneIn) == 1
            ? ignoreIndex
            : int32_t(uniformInt(rng, 0, classes - 1));
  return t;
}

Buffer outputBuffer(Rng &rng, DType dt, int64_t n, bool accumulate, double lo,
                    double hi) {
  return accumulate ? Buffer(dt, uniform(rng, n, lo, hi)) : Buffer(dt, n);
}

Vec squaredNorms(const reference::PerSample &g) {
  Vec n(g.size());
  for (size_t b = 0; b < g.size(); ++b)
    n[b] = reference::sumSquares(g[b]);
  return n;
}

void randomizeParams(reference::Model &m, Rng &rng, double scale) {
  for (const std::string &p : m.paramNames()) {
    Vec &w = m.param(p);
    bool gamma = m.paramShape(p).size() == 1 && w[0] == 1.0;
    Vec r = normal(rng, int64_t(w.size()), gamma ? 0.1 : scale);
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = (gamma ? 1.0 : 0.0) + r[i];
  }
}

reference::Batch mlpBatch(Rng &rng, int64_t size, int64_t features,
                          int64_t classes) {
  reference::Batch b;
  b.size = size;
  b.reals["x"] = normal(rng, size * features);
  b.tokens["label"] = randomTokens(rng, size, classes);
  return b;
}

reference::Batch lmBatch(Rng &rng, int64_t size,
                         const reference::TinyLmShape &s) {
  reference::Batch b;
  b.size = size;
  b.tokens["tok"] = randomTokens(rng, size * s.tokens, s.vocab);
  b.tokens["tgt"] = randomTargets(rng, size * s.tokens, s.vocab, -1, 5);
  return b;
}

double relativeError(const Vec &out, const Vec &ref, const Vec &scale) {
  if (out.size() != ref.size() || scale.size() != ref.size())
    return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i]))
      return std::numeric_limits<double>::infinity();
    num += (out[i] - ref[i]) * (out[i] - ref[i]);
    den += scale[i] * scale[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

namespace {

/// Worst relative error seen per (dtype, tolerance), printed at the end of
/// a run of the test binary (docs/testing.md quotes it).
class ErrorSummary : public ::testing::Environment {
public:
  static ErrorSummary &get() {
    static ErrorSummary *s = [] {
      auto *e = new ErrorSummary;
      ::testing::AddGlobalTestEnvironment(e);
      return e;
    }();
    return *s;
  }
  void record(DType dt, double tol, double err) {
    std::lock_guard<std::mutex> lock(mutex_);
    double &w = worst_[{int(dt), tol}];
    w = std::max(w, err);
  }
  void TearDown() override {
    for (auto &[key, err] : worst_)
      std::printf("[worst error] %-4s tolerance %.0e: %.3e\n",
                  dprt::nameOf(DType(key.first)), key.second, err);
  }

private:
  std::mutex mutex_;
  std::map<std::pair<int, double>, double> worst_;
};

// Registered before main runs the tests.
const bool kSummaryRegistered = (ErrorSummary::get(), true);

} // namespace

::testing::AssertionResult closeTo(const Vec &out, const Vec &ref, double tol,
                                   DType dt, const Vec *scale) {
  (void)kSummaryRegistered;
  double err = relativeError(out, ref, scale ? *scale : ref);
  ErrorSummary::get().record(dt, tol, err);
  if (err <= tol)
    return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << "relative error " << err << " > " << tol << " (" << dprt::nameOf(dt)
     << ", " << out.size() << " elements)";
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i)
    if (!(std::fabs(out[i] - ref[i]) <= tol * (std::fabs(ref[i]) + 1e-300))) {
      os << "; first differing element " << i << ": " << out[i] << " vs "
         << ref[i];
      break;
    }
  return ::testing::AssertionFailure() << os.str();
}

Vec gammaGradTermSize(const Vec &x, const Vec &dy, int64_t batch,
                      int64_t tokens, int64_t dim, double eps, bool centre) {
  Vec size(batch * dim, 0.0);
  for (int64_t r = 0; r < batch * tokens; ++r) {
    double mu = 0, var = 0;
    if (centre)
      for (int64_t j = 0; j < dim; ++j)
        mu += x[r * dim + j] / dim;
    for (int64_t j = 0; j < dim; ++j)
      var += (x[r * dim + j] - mu) * (x[r * dim + j] - mu) / dim;
    double rstd = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < dim; ++j)
      size[(r / tokens) * dim + j] +=
          std::fabs(dy[r * dim + j] * (x[r * dim + j] - mu) * rstd);
  }
  return size;
}

namespace {

/// Runs fn(rng, i) for cases i = 0 .. cases-1, each with its own seed.
void runCases(int cases, const std::function<void(Rng &, int)> &fn) {
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
    fn(rng, i);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

} // namespace

void forEachCase(int cases, const std::function<void(Rng &)> &fn) {
  runCases(cases, [&](Rng &rng, int) { fn(rng); });
}

void forEachCaseAndDType(int cases,
                         const std::function<void(Rng &, DType)> &fn) {
  int n = int(allDTypes().size());
  runCases(cases * n, [&](Rng &rng, int i) {
    DType dt = allDTypes()[i % n];
    SCOPED_TRACE(std::string("dtype ") + dprt::nameOf(dt));
    fn(rng, dt);
  });
}

TestRank::TestRank() : arena_(2 * dprt::kArenaAlignment) {
  // The StepState at the first aligned offset of the arena.
  auto addr = reinterpret_cast<uintptr_t>(arena_.data());
  int64_t offset =
      int64_t((dprt::kArenaAlignment - addr % dprt::kArenaAlignment) %
              dprt::kArenaAlignment);
  rank_.arena = arena_.data();
  rank_.arenaBytes = int64_t(arena_.size());
  rank_.stateOffset = offset;
  state() = dprt::StepState{};
  state().step = 1;
  state().gradScale = 1.0;
  state().lrScale = 1.0;
  state().lr = 0.1;
  state().clipNorm = 1.0;
}

dprt::StepState &TestRank::state() {
  return *reinterpret_cast<dprt::StepState *>(rank_.arena + rank_.stateOffset);
}

} // namespace dpc::test
