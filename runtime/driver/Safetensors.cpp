//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//

#include "Safetensors.h"

#include "Dataset.h"
#include "Json.h"
#include "privacy/PrivacyReport.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <sys/mman.h>
#include <unistd.h>

namespace dprt::driver {
namespace {

[[noreturn]] void ioError(const std::string &what, const std::string &path) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

// A header larger than this is not one the program wrote: refuse it rather
// than allocate whatever a corrupt size field says.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

/// The element size of a safetensors dtype, 0 if unknown.
int64_t dtypeBytes(const std::string &dtype) {
  static const std::pair<const char *, int64_t> kSizes[] = {
      {"F64", 8},         {"F32", 4},        {"F16", 2},     {"BF16", 2},
      {"I64", 8},         {"U64", 8},        {"I32", 4},     {"U32", 4},
      {"I16", 2},         {"U16", 2},        {"I8", 1},      {"U8", 1},
      {"BOOL", 1},        {"F8_E4M3", 1},    {"F8_E5M2", 1}, {"F8_E8M0", 1},
      {"F8_E4M3FNUZ", 1}, {"F8_E5M2FNUZ", 1}};
  for (const auto &[name, bytes] : kSizes)
    if (dtype == name)
      return bytes;
  return 0;
}

/// IEEE 754 binary16 to double.
double halfToDouble(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(mantissa, -24); // subnormal: m 2^-24
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude =
        std::ldexp(1024 + mantissa, exponent - 25); // (1 + m/2^10) 2^(e-15)
  return sign ? -magnitude : magnitude;
}

} // namespace

double loadStored(StoredType type, const void *in) {
  switch (type) {
  case StoredType::F64:
    return loadAs(DType::F64, in);
  case StoredType::F32:
    return loadAs(DType::F32, in);
  case StoredType::BF16:
    return loadAs(DType::BF16, in);
  case StoredType::F16: {
    uint16_t h;
    std::memcpy(&h, in, 2);
    return halfToDouble(h);
  }
  case StoredType::Other:
    break;
  }
  throw std::logic_error("loadStored: a type the driver does not convert");
}

int64_t storedSize(StoredType type) {
  switch (type) {
  case StoredType::F64:
    return 8;
  case StoredType::F32:
    return 4;
  case StoredType::BF16:
  case StoredType::F16:
    return 2;
  case StoredType::Other:
    break;
  }
  throw std::logic_error("storedSize: a type the driver does not convert");
}

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

SafetensorsReader::SafetensorsReader(const std::string &path, bool anyType)
    : path_(path) {
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
  fileBytes_ = std::ftell(file_);
  const int64_t dataBytes = fileBytes_ - dataStart_;

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
      t.storedName = dtype;
      if (dtype == "F32") {
        t.dtype = DType::F32;
        t.stored = StoredType::F32;
      } else if (dtype == "F64") {
        t.dtype = DType::F64;
        t.stored = StoredType::F64;
      } else if (dtype == "BF16") {
        t.dtype = DType::BF16;
        t.stored = StoredType::BF16;
      } else if (anyType && dtype == "F16") {
        t.stored = StoredType::F16;
      } else if (anyType && dtypeBytes(dtype) > 0) {
        t.stored = StoredType::Other;
      } else {
        throw JsonError("tensor '" + name + "' has dtype " + dtype +
                        (anyType ? " (not a safetensors dtype)"
                                 : " (F32, F64 or BF16 expected)"));
      }
      const int64_t elementBytes = dtypeBytes(dtype);
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
      if (t.begin < 0 || t.end < t.begin ||
          t.end - t.begin != t.numel() * elementBytes)
        throw JsonError("tensor '" + name +
                        "' has data offsets that do not match its shape");
      if (t.end > dataBytes)
        throw JsonError("tensor '" + name + "' ends at byte " +
                        std::to_string(dataStart_ + t.end) +
                        " but the file has " + std::to_string(fileBytes_) +
                        ": it is truncated");
      if (index_.count(name))
        throw JsonError("tensor '" + name + "' is listed twice");
      index_[name] = tensors_.size();
      tensors_.push_back(std::move(t));
    }
  } catch (const JsonError &e) {
    throw std::runtime_error("'" + path +
                             "' is not a valid safetensors file: " + e.what());
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (map_)
    munmap(map_, static_cast<size_t>(fileBytes_));
  if (file_)
    std::fclose(file_);
}

const TensorInfo *SafetensorsReader::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const unsigned char *SafetensorsReader::mapped(const TensorInfo &tensor) {
  if (!map_) {
    void *map = mmap(nullptr, static_cast<size_t>(fileBytes_), PROT_READ,
                     MAP_PRIVATE, fileno(file_), 0);
    if (map == MAP_FAILED)
      ioError("cannot map", path_);
    map_ = map;
  }
  return static_cast<const unsigned char *>(map_) + dataStart_ + tensor.begin;
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

SafetensorsFolder::SafetensorsFolder(const std::string &dir,
                                     const std::string &file)
    : dir_(dir) {
  const std::string path = dir + "/" + file;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error("'" + dir + "' has no " + file);
  files_.push_back(std::make_unique<SafetensorsReader>(path, true));
  for (const TensorInfo &t : files_.back()->tensors())
    byName_[t.name] = {files_.back().get(), &t};
}

SafetensorsFolder::SafetensorsFolder(const std::string &dir) : dir_(dir) {
  namespace fs = std::filesystem;
  const std::string single = dir + "/model.safetensors";
  const std::string indexPath = dir + "/model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(single, ec)) {
    files_.push_back(std::make_unique<SafetensorsReader>(single, true));
    for (const TensorInfo &t : files_.back()->tensors())
      byName_[t.name] = {files_.back().get(), &t};
    return;
  }
  if (!fs::is_regular_file(indexPath, ec)) {
    std::string hint;
    if (fs::exists(dir + "/pytorch_model.bin", ec) ||
        fs::exists(dir + "/pytorch_model.bin.index.json", ec))
      hint = " (it has pytorch_model.bin, which is not read: save the model "
             "with safetensors)";
    throw std::runtime_error("'" + dir +
                             "' has neither model.safetensors nor "
                             "model.safetensors.index.json" +
                             hint);
  }
  indexed_ = true;
  std::string text;
  {
    std::FILE *f = std::fopen(indexPath.c_str(), "rb");
    if (!f)
      ioError("cannot read", indexPath);
    char buffer[1 << 16];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;)
      text.append(buffer, n);
    std::fclose(f);
  }
  auto bad = [&](const std::string &what) {
    return std::runtime_error("'" + indexPath +
                              "' is not a valid index: " + what);
  };
  std::vector<std::pair<std::string, std::string>> weightMap;
  try {
    JsonValue root = JsonValue::parse(text);
    for (const auto &[name, file] : root.at("weight_map").object())
      weightMap.emplace_back(name, file.string());
  } catch (const JsonError &e) {
    throw bad(e.what());
  }
  std::map<std::string, SafetensorsReader *> byFile;
  for (const auto &[name, file] : weightMap) {
    if (file.empty() || file == "." || file == ".." ||
        file.find('/') != std::string::npos)
      throw bad("tensor '" + name + "' is in '" + file +
                "', which is not a file name in the folder");
    if (!byFile.count(file)) {
      files_.push_back(std::make_unique<SafetensorsReader>(dir + "/" + file,
                                                           /*anyType=*/true));
      byFile[file] = files_.back().get();
    }
    SafetensorsReader *reader = byFile[file];
    const TensorInfo *t = reader->find(name);
    if (!t)
      throw bad("it puts tensor '" + name + "' in '" + file +
                "', which does not hold it");
    if (byName_.count(name))
      throw bad("tensor '" + name + "' is listed twice");
    byName_[name] = {reader, t};
  }
  for (const auto &file : files_)
    for (const TensorInfo &t : file->tensors()) {
      const Entry entry = find(t.name);
      if (entry.tensor != &t)
        throw bad("'" + file->path() + "' holds tensor '" + t.name + "', " +
                  (entry.file
                       ? "which the index puts in '" + entry.file->path() + "'"
                       : std::string("which the index does not list")));
    }
}

SafetensorsFolder::Entry
SafetensorsFolder::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? Entry{nullptr, nullptr} : it->second;
}

std::vector<SafetensorsFolder::Entry> SafetensorsFolder::entries() const {
  std::vector<Entry> out;
  for (const auto &file : files_)
    for (const TensorInfo &t : file->tensors())
      out.push_back({file.get(), &t});
  return out;
}

std::string SafetensorsFolder::describe() const {
  if (!indexed_)
    return std::filesystem::path(files_[0]->path()).filename().string();
  return std::to_string(files_.size()) +
         (files_.size() == 1 ? " shard" : " shards") +
         " of model.safetensors.index.json";
}

} // namespace dprt::driver
