//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//

#include "Safetensors.h"

#include "Json.h"
#include "privacy/PrivacyReport.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

namespace dprt::driver {
namespace {

[[noreturn]] void ioError(const std::string &what, const std::string &path) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

// A header larger than this is not one the program wrote: refuse it rather
// than allocate whatever a corrupt size field says.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

} // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

const char *safetensorsDType(DType dt) {
  switch (dt) {
  case DType::F64:
    return "F64";
  case DType::F32:
    return "F32";
  case DType::BF16:
    return "BF16";
  }
  return "?";
}

SafetensorsWriter::SafetensorsWriter(
    const std::string &path, std::vector<TensorInfo> tensors,
    const std::map<std::string, std::string> &metadata)
    : path_(path), tensors_(std::move(tensors)) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      header += (first ? "" : ",") + privacy::jsonString(key) + ":" +
                privacy::jsonString(value);
      first = false;
    }
    header += "}";
  }
  int64_t offset = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo &t = tensors_[i];
    t.begin = offset;
    t.end = offset + t.numel() * sizeOf(t.dtype);
    offset = t.end;
    header += (i == 0 && metadata.empty() ? "" : ",") +
              privacy::jsonString(t.name) + ":{\"dtype\":\"" +
              safetensorsDType(t.dtype) + "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(t.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(t.begin) + "," +
              std::to_string(t.end) + "]}";
  }
  header += "}";
  // Pad with spaces so that the data starts 8-byte aligned.
  while ((header.size() + 8) % 8 != 0)
    header += ' ';

  file_ = std::fopen(path.c_str(), "wb");
  if (!file_)
    ioError("cannot create", path);
  uint64_t size = header.size();
  unsigned char sizeBytes[8];
  for (int i = 0; i < 8; ++i)
    sizeBytes[i] = static_cast<unsigned char>(size >> (8 * i));
  put(sizeBytes, 8);
  put(header.data(), header.size());
}

void SafetensorsWriter::put(const void *data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes)
    ioError("cannot write", path_);
  checksum_.update(data, bytes);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_)
    std::fclose(file_);
}

void SafetensorsWriter::write(const void *data) {
  if (next_ >= tensors_.size())
    throw std::logic_error("SafetensorsWriter: more tensors than declared");
  const TensorInfo &t = tensors_[next_++];
  if (written_ != t.begin)
    throw std::logic_error("SafetensorsWriter: write() after writeBytes()");
  put(data, static_cast<size_t>(t.end - t.begin));
  written_ = t.end;
}

void SafetensorsWriter::writeBytes(const void *data, int64_t bytes) {
  const int64_t total = tensors_.empty() ? 0 : tensors_.back().end;
  if (bytes < 0 || bytes > total - written_)
    throw std::logic_error("SafetensorsWriter: more data than declared");
  put(data, static_cast<size_t>(bytes));
  written_ += bytes;
}

void SafetensorsWriter::close() {
  const int64_t total = tensors_.empty() ? 0 : tensors_.back().end;
  if (written_ != total)
    throw std::logic_error(
        "SafetensorsWriter: " + std::to_string(total - written_) +
        " declared bytes were not written");
  if (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0)
    ioError("cannot write", path_);
  std::FILE *file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0)
    ioError("cannot write", path_);
}

SafetensorsReader::SafetensorsReader(const std::string &path) : path_(path) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_)
    ioError("cannot read", path);
  unsigned char sizeBytes[8];
  if (std::fread(sizeBytes, 1, 8, file_) != 8)
    throw std::runtime_error("'" + path +
                             "' is not a safetensors file (too "
                             "short)");
  uint64_t size = 0;
  for (int i = 0; i < 8; ++i)
    size |= static_cast<uint64_t>(sizeBytes[i]) << (8 * i);
  if (size > kMaxHeaderBytes)
    throw std::runtime_error("'" + path +
                             "' is not a safetensors file "
                             "(header of " +
                             std::to_string(size) + " bytes)");
  std::string header(size, '\0');
  if (std::fread(header.data(), 1, size, file_) != size)
    throw std::runtime_error("'" + path + "' is truncated (header)");
  dataStart_ = static_cast<int64_t>(8 + size);
  if (std::fseek(file_, 0, SEEK_END) != 0)
    ioError("cannot read", path);
  const int64_t dataBytes = std::ftell(file_) - dataStart_;

  try {
    JsonValue root = JsonValue::parse(header);
    for (const auto &[name, value] : root.object()) {
      if (name == "__metadata__") {
        for (const auto &[key, item] : value.object())
          metadata_[key] = item.string();
        continue;
      }
      TensorInfo t;
      t.name = name;
      const std::string &dtype = value.at("dtype").string();
      if (dtype == "F32")
        t.dtype = DType::F32;
      else if (dtype == "F64")
        t.dtype = DType::F64;
      else if (dtype == "BF16")
        t.dtype = DType::BF16;
      else
        throw JsonError("tensor '" + name + "' has dtype " + dtype +
                        " (F32, F64 or BF16 expected)");
      // Each dimension, and the running element count, must fit in the
      // file's data before they are multiplied: a corrupt header must not
      // overflow the byte count it is checked against.
      int64_t elements = 1;
      for (const JsonValue &d : value.at("shape").array()) {
        const int64_t dim = d.integer();
        if (dim < 0)
          throw JsonError("tensor '" + name + "' has a negative dimension");
        if (dim > 0 && elements > dataBytes / dim)
          throw JsonError("tensor '" + name +
                          "' has more elements than the file has bytes");
        elements *= dim;
        t.shape.push_back(dim);
      }
      const auto &offsets = value.at("data_offsets").array();
      if (offsets.size() != 2)
        throw JsonError("tensor '" + name + "' needs two data offsets");
      t.begin = offsets[0].integer();
      t.end = offsets[1].integer();
      if (t.begin < 0 || t.end < t.begin || t.end > dataBytes ||
          t.end - t.begin != t.numel() * sizeOf(t.dtype))
        throw JsonError("tensor '" + name +
                        "' has data offsets that do not match its shape or "
                        "the file size");
      tensors_.push_back(std::move(t));
    }
  } catch (const JsonError &e) {
    throw std::runtime_error("'" + path +
                             "' is not a valid safetensors file: " + e.what());
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (file_)
    std::fclose(file_);
}

const TensorInfo *SafetensorsReader::find(const std::string &name) const {
  for (const TensorInfo &t : tensors_)
    if (t.name == name)
      return &t;
  return nullptr;
}

void SafetensorsReader::readRange(const TensorInfo &tensor, int64_t offset,
                                  int64_t bytes, void *out) const {
  if (offset < 0 || bytes < 0 || offset > tensor.end - tensor.begin - bytes)
    throw std::runtime_error("bytes [" + std::to_string(offset) + ", " +
                             std::to_string(offset + bytes) +
                             ") lie outside tensor '" + tensor.name + "' of '" +
                             path_ + "'");
  // pread keeps no file position: ranks read their ranges concurrently.
  const int fd = fileno(file_);
  char *to = static_cast<char *>(out);
  int64_t at = dataStart_ + tensor.begin + offset;
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, to, static_cast<size_t>(bytes), at);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw std::runtime_error(
          "cannot read tensor '" + tensor.name + "' of '" + path_ + "': " +
          (n == 0 ? std::string("the file is shorter than its header says")
                  : std::strerror(errno)));
    to += n;
    at += n;
    bytes -= n;
  }
}

void SafetensorsReader::read(const TensorInfo &tensor, void *out) {
  size_t bytes = static_cast<size_t>(tensor.end - tensor.begin);
  if (std::fseek(file_, static_cast<long>(dataStart_ + tensor.begin),
                 SEEK_SET) != 0 ||
      std::fread(out, 1, bytes, file_) != bytes)
    throw std::runtime_error("cannot read tensor '" + tensor.name + "' of '" +
                             path_ + "'");
}

} // namespace dprt::driver
