//===- Fft.cpp - Power-of-two complex FFT for the PLD accountant ----------===//
//
// Complex arithmetic is spelled out on the real and imaginary parts
// (std::complex<double> is an array of two doubles): the operator* of
// std::complex checks for NaN results and calls a library routine, which
// keeps the butterfly loops from vectorizing.
//
//===----------------------------------------------------------------------===//

#include "privacy/Fft.h"

#include <cassert>
#include <cmath>

namespace dprt::privacy {

namespace {

/// Sub-transforms up to this length (256 KiB of data) run iteratively: they
/// fit in a core's L2 cache.
constexpr size_t kCacheBlock = size_t(1) << 14;

/// One decimation-in-frequency pass over a block of length n, with w the n / 2
/// twiddles exp(-2 pi i j / n): (a, b) -> (a + b, (a - b) w_j).
void forwardPass(double *x, size_t n, const double *w) {
  size_t half = n / 2;
  double *lo = x, *hi = x + 2 * half;
  for (size_t j = 0; j < half; ++j) {
    double wr = w[2 * j], wi = w[2 * j + 1];
    double ar = lo[2 * j], ai = lo[2 * j + 1];
    double br = hi[2 * j], bi = hi[2 * j + 1];
    double dr = ar - br, di = ai - bi;
    lo[2 * j] = ar + br;
    lo[2 * j + 1] = ai + bi;
    hi[2 * j] = dr * wr - di * wi;
    hi[2 * j + 1] = dr * wi + di * wr;
  }
}

/// One decimation-in-time pass with conjugate twiddles:
/// (a, b) -> (a + b conj(w^j), a - b conj(w^j)).
void inversePass(double *x, size_t n, const double *w) {
  size_t half = n / 2;
  double *lo = x, *hi = x + 2 * half;
  for (size_t j = 0; j < half; ++j) {
    double wr = w[2 * j], wi = -w[2 * j + 1];
    double br = hi[2 * j], bi = hi[2 * j + 1];
    double tr = br * wr - bi * wi, ti = br * wi + bi * wr;
    double ar = lo[2 * j], ai = lo[2 * j + 1];
    lo[2 * j] = ar + tr;
    lo[2 * j + 1] = ai + ti;
    hi[2 * j] = ar - tr;
    hi[2 * j + 1] = ai - ti;
  }
}

} // namespace

Fft::Fft(size_t size) : size_(size), log2Size_(0) {
  assert(size >= 1 && (size & (size - 1)) == 0 && "size must be 2^k");
  while ((size_t(1) << log2Size_) < size)
    ++log2Size_;
  if (size < 2)
    return;
  twiddles_.resize(size);
  // The longest level from its own angles (no recurrence: errors stay at one
  // rounding of cos and sin), the shorter ones by taking every other entry.
  size_t half = size / 2;
  for (size_t j = 0; j < half; ++j) {
    double angle =
        -2.0 * M_PI * static_cast<double>(j) / static_cast<double>(size);
    twiddles_[half + j] = {std::cos(angle), std::sin(angle)};
  }
  for (size_t len = size / 2; len >= 2; len /= 2)
    for (size_t j = 0; j < len / 2; ++j)
      twiddles_[len / 2 + j] = twiddles_[len + 2 * j];
}

const double *Fft::twiddlesOf(size_t length) const {
  return reinterpret_cast<const double *>(twiddles_.data() + length / 2);
}

void Fft::forwardRecursive(std::complex<double> *data, size_t n) const {
  double *x = reinterpret_cast<double *>(data);
  if (n <= kCacheBlock) {
    for (size_t len = n; len >= 2; len /= 2)
      for (size_t start = 0; start < n; start += len)
        forwardPass(x + 2 * start, len, twiddlesOf(len));
    return;
  }
  forwardPass(x, n, twiddlesOf(n));
  forwardRecursive(data, n / 2);
  forwardRecursive(data + n / 2, n / 2);
}

void Fft::inverseRecursive(std::complex<double> *data, size_t n) const {
  double *x = reinterpret_cast<double *>(data);
  if (n <= kCacheBlock) {
    for (size_t len = 2; len <= n; len *= 2)
      for (size_t start = 0; start < n; start += len)
        inversePass(x + 2 * start, len, twiddlesOf(len));
    return;
  }
  inverseRecursive(data, n / 2);
  inverseRecursive(data + n / 2, n / 2);
  inversePass(x, n, twiddlesOf(n));
}

void Fft::forward(std::complex<double> *data) const {
  if (size_ > 1)
    forwardRecursive(data, size_);
}

void Fft::inverse(std::complex<double> *data) const {
  if (size_ > 1)
    inverseRecursive(data, size_);
}

size_t Fft::bitReverse(size_t k) const {
  size_t r = 0;
  for (int b = 0; b < log2Size_; ++b)
    r |= ((k >> b) & 1) << (log2Size_ - 1 - b);
  return r;
}

size_t Fft::partnerPosition(size_t p) {
  if (p < 2)
    return p; // frequencies 0 and N / 2 are their own partners
  size_t high = p;
  while (high & (high - 1))
    high &= high - 1;
  return p ^ (high - 1);
}

} // namespace dprt::privacy
