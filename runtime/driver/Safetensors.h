//===- Safetensors.h - Reading and writing .safetensors files ---*- C++ -*-===//
//
// The format (huggingface/safetensors): an 8-byte little-endian header size
// N, N bytes of JSON mapping each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets into the data that follows the
// header) plus an optional "__metadata__" object of strings, then the data.
// The writer streams the tensors in the order they were declared, so that a
// checkpoint never needs the whole model in memory at once.
//
// Hugging Face folders hold model.safetensors, or shards named by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor:
// file}}); SafetensorsFolder opens either. Their tensors may be F16 too, and
// are read through a read-only mapping of the file, so that a process
// touches only the bytes it converts.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_SAFETENSORS_H
#define DPRT_DRIVER_SAFETENSORS_H

#include "Checksum.h"

#include "dprt/types.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dprt::driver {

/// How a file stores a tensor's elements: the runtime's types, F16, or a
/// type the driver does not convert (integers, booleans, 8-bit floats),
/// which a reader opened with anyType lists but cannot load.
enum class StoredType { F64, F32, BF16, F16, Other };

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32; ///< the stored type when it is F64, F32 or BF16
  std::vector<int64_t> shape;
  int64_t begin = 0; ///< data offsets, filled by the writer / reader
  int64_t end = 0;
  StoredType stored = StoredType::F32; ///< filled by the reader
  std::string storedName = "F32";      ///< the header's dtype, e.g. "F16"

  int64_t numel() const;
};

/// Reads one element stored as `type` (not Other).
double loadStored(StoredType type, const void *in);
/// Bytes per element of `type` (not Other).
int64_t storedSize(StoredType type);

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
  /// path when the file is missing, truncated or not a valid safetensors
  /// file. Without `anyType` a tensor stored as anything but F64, F32 or
  /// BF16 is an error (a checkpoint's own files); with it, every type of
  /// the format is listed (TensorInfo::stored), for the caller to refuse
  /// what it needs and cannot convert.
  explicit SafetensorsReader(const std::string &path, bool anyType = false);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader &) = delete;
  SafetensorsReader &operator=(const SafetensorsReader &) = delete;

  const std::string &path() const { return path_; }

  const std::vector<TensorInfo> &tensors() const { return tensors_; }
  /// The tensor `name`, or null.
  const TensorInfo *find(const std::string &name) const;
  /// Reads a tensor's bytes into `out`.
  void read(const TensorInfo &tensor, void *out);
  /// The tensor's bytes in a read-only mapping of the file (made on first
  /// use, kept until the reader goes): only the pages read are loaded.
  const unsigned char *mapped(const TensorInfo &tensor);
  /// Reads `bytes` bytes of a tensor's data from byte `offset` of it into
  /// `out` (a ranged read: the rest of the file is not touched). Safe to
  /// call from several threads at once. Throws std::runtime_error naming the
  /// tensor and the file when the range lies outside the tensor or the file
  /// is shorter.
  void readRange(const TensorInfo &tensor, int64_t offset, int64_t bytes,
                 void *out) const;
  /// The file offset of the first data byte (8 + the header's size).
  int64_t dataStart() const { return dataStart_; }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

private:
  std::string path_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_; ///< name -> position in tensors_
  std::map<std::string, std::string> metadata_;
  int64_t dataStart_ = 0;
  int64_t fileBytes_ = 0;
  std::FILE *file_ = nullptr;
  void *map_ = nullptr;
};

/// The weights of a Hugging Face model folder: DIR/model.safetensors if it
/// exists (as transformers prefers it), else the shards that
/// DIR/model.safetensors.index.json names. Opening reads the headers only
/// and checks the index: every file it names exists in DIR (a plain file
/// name) and holds the tensors the index puts there, and no tensor is in
/// two files or in a file but not in the index.
class SafetensorsFolder {
public:
  /// Throws std::runtime_error naming the file of the first problem.
  explicit SafetensorsFolder(const std::string &dir);
  /// The one file DIR/`file` (a peft adapter's adapter_model.safetensors).
  SafetensorsFolder(const std::string &dir, const std::string &file);

  /// Where a tensor is.
  struct Entry {
    SafetensorsReader *file;
    const TensorInfo *tensor;
  };
  /// The tensor `name`, or {nullptr, nullptr}.
  Entry find(const std::string &name) const;
  /// Every tensor, in the order of the files and their headers.
  std::vector<Entry> entries() const;
  /// "model.safetensors" (the one file's name) or "3 shards of
  /// model.safetensors.index.json".
  std::string describe() const;

private:
  std::string dir_;
  bool indexed_ = false; ///< the files are the shards an index names
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, Entry> byName_;
};

/// "F32", "F64", "BF16".
const char *safetensorsDType(DType dt);

} // namespace dprt::driver

#endif // DPRT_DRIVER_SAFETENSORS_H
