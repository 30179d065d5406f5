//===- Checksum.h - Checksums of checkpoint files ---------------*- C++ -*-===//
//
// XXH3-64 (xxHash, Yann Collet; the algorithm of xxHash 0.8's XXH3_64bits
// with seed 0) of a file's bytes: manifest.json records one per shard file,
// state.json that of manifest.json, and a resume verifies them, so that a
// flipped bit in a shard is an error naming the file rather than a silently
// different model. Not a
// cryptographic hash: it detects corruption, not tampering.
//
// xxhash.h (Debian's libxxhash-dev) is compiled in header-only
// (XXH_INLINE_ALL): the training programs link nothing new, so they still
// run on machines without libxxhash.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_CHECKSUM_H
#define DPRT_DRIVER_CHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace dprt::driver {

/// A streaming XXH3-64 of the bytes given to update(), in order.
class Checksum {
public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum &) = delete;
  Checksum &operator=(const Checksum &) = delete;

  void update(const void *data, size_t bytes);
  uint64_t value() const;
  /// Bytes given so far.
  int64_t bytes() const { return bytes_; }

private:
  void *state_;
  int64_t bytes_ = 0;
};

/// The checksum of the whole file `path`, and its size in `bytes`; throws
/// std::runtime_error naming the file when it cannot be read.
uint64_t checksumOfFile(const std::string &path, int64_t &bytes);

/// "0x" and 16 hexadecimal digits.
std::string checksumText(uint64_t value);

} // namespace dprt::driver

#endif // DPRT_DRIVER_CHECKSUM_H
