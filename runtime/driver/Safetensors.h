//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The format (huggingface/safetensors): an 8-byte little-endian header size
// N, N bytes of JSON mapping each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets into the data that follows the
// header) plus an optional "__metadata__" object of strings, then the data.
// The writer streams the tensors in the order they were declared, so that a
// checkpoint never needs the whole model in memory at once.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_SAFETENSORS_H
#define DPRT_DRIVER_SAFETENSORS_H

#include "Checksum.h"

#include "dprt/types.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dprt::driver {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t begin = 0; ///< data offsets, filled by the writer / reader
  int64_t end = 0;

  int64_t numel() const;
};

class SafetensorsWriter {
public:
  /// Creates `path` and writes the header for `tensors` (in that order).
  /// Throws std::runtime_error on I/O errors.
  SafetensorsWriter(const std::string &path, std::vector<TensorInfo> tensors,
                    const std::map<std::string, std::string> &metadata);
  ~SafetensorsWriter();

  /// Writes the next tensor's data: numel * sizeOf(dtype) bytes.
  void write(const void *data);
  /// Writes the next `bytes` bytes of the tensors' data (declaration
  /// order, back to back), so that a tensor can be streamed in pieces of
  /// any size; a file is written either with write() or with writeBytes().
  void writeBytes(const void *data, int64_t bytes);
  /// Flushes, fsyncs and closes; throws if any write failed.
  void close();
  /// The checksum and size of every byte written (Checksum.h).
  const Checksum &checksum() const { return checksum_; }

private:
  /// Writes and checksums `bytes` bytes.
  void put(const void *data, size_t bytes);

  std::string path_;
  std::vector<TensorInfo> tensors_;
  size_t next_ = 0;
  int64_t written_ = 0; ///< data bytes written so far
  std::FILE *file_ = nullptr;
  Checksum checksum_;
};

class SafetensorsReader {
public:
  /// Opens `path` and parses its header; throws std::runtime_error with the
  /// path when the file is missing or not a valid safetensors file.
  explicit SafetensorsReader(const std::string &path);
  ~SafetensorsReader();

  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  /// The tensor `name`, or null.
  const TensorInfo *find(const std::string &name) const;
  /// Reads a tensor's bytes into `out`.
  void read(const TensorInfo &tensor, void *out);
  /// Reads `bytes` bytes of a tensor's data from byte `offset` of it into
  /// `out` (a ranged read: the rest of the file is not touched). Safe to
  /// call from several threads at once. Throws std::runtime_error naming the
  /// tensor and the file when the range lies outside the tensor or the file
  /// is shorter.
  void readRange(const TensorInfo &tensor, int64_t offset, int64_t bytes,
                 void *out) const;
  /// The file offset of the first data byte (8 + the header's size).
  int64_t dataStart() const { return dataStart_; }
  const std::string &path() const { return path_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

private:
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  int64_t dataStart_ = 0;
  std::FILE *file_ = nullptr;
};

/// "F32", "F64", "BF16".
const char *safetensorsDType(DType dt);

} // namespace dprt::driver

#endif // DPRT_DRIVER_SAFETENSORS_H
