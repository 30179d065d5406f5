//===- FftTest.cpp - The PLD accountant's FFT against the definition ------===//

#include "privacy/Fft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

using namespace dprt::privacy;

namespace {

std::vector<std::complex<double>> randomSignal(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<std::complex<double>> x(n);
  for (std::complex<double> &v : x)
    v = {uniform(rng), uniform(rng)};
  return x;
}

/// X_k = sum_j x_j exp(-2 pi i j k / n) in long double.
std::complex<long double> dft(const std::vector<std::complex<double>> &x,
                              size_t k) {
  size_t n = x.size();
  std::complex<long double> sum = 0;
  for (size_t j = 0; j < n; ++j) {
    long double angle = -2.0L * M_PIl * static_cast<long double>((j * k) % n) /
                        static_cast<long double>(n);
    sum += std::complex<long double>(x[j].real(), x[j].imag()) *
           std::complex<long double>(std::cos(angle), std::sin(angle));
  }
  return sum;
}

TEST(Fft, ForwardIsTheDftInBitReversedOrder) {
  // Lengths below and above the cache block (2^14), where the transform
  // recurses.
  for (size_t n : {1u, 2u, 4u, 8u, 64u, 1024u, 32768u}) {
    Fft fft(n);
    std::vector<std::complex<double>> x = randomSignal(n, n);
    std::vector<std::complex<double>> spectrum = x;
    fft.forward(spectrum.data());
    // All frequencies for short signals, a spread of them for long ones.
    size_t step = n <= 1024 ? 1 : n / 31;
    for (size_t k = 0; k < n; k += step) {
      std::complex<long double> expected = dft(x, k);
      std::complex<double> got = spectrum[fft.bitReverse(k)];
      // Rounding of an FFT grows like log n; |X_k| is about sqrt(n).
      double error = static_cast<double>(std::abs(
          std::complex<long double>(got.real(), got.imag()) - expected));
      EXPECT_LT(error, 1e-14 * std::sqrt(static_cast<double>(n)) *
                           std::log2(2.0 * static_cast<double>(n)))
          << "n = " << n << ", k = " << k;
    }
  }
}

TEST(Fft, InverseUndoesForwardTimesLength) {
  for (size_t n : {2u, 32u, 4096u, 131072u}) {
    Fft fft(n);
    std::vector<std::complex<double>> x = randomSignal(n, 7 * n);
    std::vector<std::complex<double>> y = x;
    fft.forward(y.data());
    fft.inverse(y.data());
    double worst = 0;
    for (size_t j = 0; j < n; ++j)
      worst = std::max(worst, std::abs(y[j] / static_cast<double>(n) - x[j]));
    EXPECT_LT(worst, 1e-14) << "n = " << n;
  }
}

TEST(Fft, BitReverseAndPartnerPosition) {
  for (size_t n : {1u, 2u, 8u, 256u, 4096u}) {
    Fft fft(n);
    for (size_t k = 0; k < n; ++k) {
      size_t p = fft.bitReverse(k);
      ASSERT_LT(p, n);
      EXPECT_EQ(fft.bitReverse(p), k);
      // The partner of frequency k's position holds frequency N - k.
      EXPECT_EQ(Fft::partnerPosition(p), fft.bitReverse((n - k) % n))
          << "n = " << n << ", k = " << k;
    }
  }
}

// A product of spectra is a cyclic convolution: what the PLD accountant
// relies on to compose.
TEST(Fft, PointwiseProductIsCyclicConvolution) {
  const size_t n = 512;
  Fft fft(n);
  std::vector<std::complex<double>> a = randomSignal(n, 1),
                                    b = randomSignal(n, 2);
  std::vector<std::complex<double>> fa = a, fb = b;
  fft.forward(fa.data());
  fft.forward(fb.data());
  for (size_t p = 0; p < n; ++p)
    fa[p] *= fb[p];
  fft.inverse(fa.data());
  for (size_t j = 0; j < n; j += 37) {
    std::complex<double> expected = 0;
    for (size_t i = 0; i < n; ++i)
      expected += a[i] * b[(j + n - i) % n];
    EXPECT_LT(std::abs(fa[j] / static_cast<double>(n) - expected), 1e-12);
  }
}

} // namespace
