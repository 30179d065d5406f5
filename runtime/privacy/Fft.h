//===- Fft.h - Power-of-two complex FFT for the PLD accountant --*- C++ -*-===//
//
// In-place radix-2 fast Fourier transform of a power-of-two length, used by
// the PLD accountant to compose privacy loss distributions (a composition is
// a convolution, and T-fold self-composition is a pointwise T-th power in
// the Fourier domain).
//
// The forward transform (decimation in frequency) leaves the spectrum in
// bit-reversed order and the inverse (decimation in time) reads it in that
// order, so no permutation pass is needed: the accountant only multiplies
// spectra pointwise. Large transforms recurse on halves until a block fits
// in cache (the cache-oblivious order), then finish iteratively.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_PRIVACY_FFT_H
#define DPRT_PRIVACY_FFT_H

#include <complex>
#include <cstddef>
#include <vector>

namespace dprt::privacy {

class Fft {
public:
  /// A transform of length `size`, a power of two >= 1.
  explicit Fft(size_t size);

  size_t size() const { return size_; }

  /// X_k = sum_j x_j exp(-2 pi i j k / N), with X_k stored at position
  /// bitReverse(k).
  void forward(std::complex<double> *data) const;

  /// x_j = sum_k X_k exp(+2 pi i j k / N) (unscaled: inverse(forward(x)) is
  /// N x), reading X_k from position bitReverse(k), writing x_j at j.
  void inverse(std::complex<double> *data) const;

  /// The position of frequency k in the forward transform's output (an
  /// involution).
  size_t bitReverse(size_t k) const;

  /// The position of frequency N - k (mod N) given the position `p` of
  /// frequency k. With h the highest set bit of p, it is p ^ (h - 1): inside
  /// each block [2^j, 2^(j+1)) of positions, frequencies k and N - k sit at
  /// mirrored places, so a loop over p and its partner walks memory in order.
  static size_t partnerPosition(size_t p);

private:
  void forwardRecursive(std::complex<double> *data, size_t n) const;
  void inverseRecursive(std::complex<double> *data, size_t n) const;
  /// The twiddles exp(-2 pi i j / length), j < length / 2, contiguous.
  const double *twiddlesOf(size_t length) const;

  size_t size_;
  int log2Size_;
  /// Level by level, so that every pass reads its twiddles in order:
  /// entry length / 2 + j is exp(-2 pi i j / length) for the lengths 2, 4,
  /// ..., N (N entries in all).
  std::vector<std::complex<double>> twiddles_;
};

} // namespace dprt::privacy

#endif // DPRT_PRIVACY_FFT_H
