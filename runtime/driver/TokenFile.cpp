//===- TokenFile.cpp - Memory-mapped token files of dpc-prepare -----------===//

#include "TokenFile.h"

#include "Json.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace dprt::driver {
namespace {

constexpr const char *kFormat = "dpc-tokens";
constexpr const char *kFormatVersion = "1";
// A header larger than this is not one dpc-prepare wrote (its header is a
// few hundred bytes): refuse it rather than parse whatever a size field says.
constexpr uint64_t kMaxHeaderBytes = 1u << 20;

struct TensorSpec {
  const char *name;
  const char *dtype;
  uint64_t elementBytes;
  bool required;
};

// In the order dpc-prepare writes them; the reader accepts any order.
constexpr TensorSpec kTensors[] = {
    {"offsets", "I64", 8, true},       {"users", "I64", 8, false},
    {"source_lines", "I64", 8, false}, {"tokens", "U32", 4, true},
    {"loss_mask", "U8", 1, true},
};
enum TensorIndex { kOffsets, kUsers, kSourceLines, kTokens, kLossMask };

bool hostIsLittleEndian() {
  const uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// A metadata value that must be a non-negative decimal integer.
bool parseCount(const std::string &text, int64_t &value) {
  if (text.empty() || text.size() > 18)
    return false;
  value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

} // namespace

void TokenFile::fail(uint64_t offset, const std::string &what) const {
  throw TokenFileError(path_ + ": byte " + std::to_string(offset) + ": " +
                       what);
}

uint64_t TokenFile::byteOf(const void *p) const {
  return static_cast<uint64_t>(static_cast<const unsigned char *>(p) - base_);
}

TokenFile::TokenFile(const std::string &path) : path_(path) {
  if (!hostIsLittleEndian())
    throw TokenFileError(path + ": token files are little-endian and this "
                                "host is not");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw TokenFileError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw TokenFileError(path + ": cannot stat: " + std::strerror(err));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(0, "the file has " + std::to_string(size_) +
                " bytes, less than the 8-byte header length");
  }
  void *map = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    throw TokenFileError(path + ": cannot map: " + std::strerror(err));
  base_ = static_cast<const unsigned char *>(map);
  // Training samples records at random: read-ahead around a record would
  // mostly read other records.
  ::madvise(map, size_, MADV_RANDOM);

  try {
    uint64_t headerBytes = 0;
    for (int i = 0; i < 8; ++i)
      headerBytes |= static_cast<uint64_t>(base_[i]) << (8 * i);
    if (headerBytes > kMaxHeaderBytes || headerBytes > size_ - 8)
      fail(0,
           "header length " + std::to_string(headerBytes) +
               " exceeds the file's " + std::to_string(size_) + " bytes" +
               (headerBytes > kMaxHeaderBytes ? " (or the 1 MiB limit)" : ""));
    const uint64_t dataStart = 8 + headerBytes;
    fingerprint_ = 0xcbf29ce484222325ull;
    for (uint64_t i = 8; i < dataStart; ++i)
      fingerprint_ = (fingerprint_ ^ base_[i]) * 0x100000001b3ull;
    JsonValue header;
    try {
      header = JsonValue::parse(
          std::string(reinterpret_cast<const char *>(base_ + 8), headerBytes));
    } catch (const JsonError &e) {
      fail(8, std::string("the header is not JSON: ") + e.what() +
                  " (counted from byte 8)");
    }
    if (!header.isObject())
      fail(8, "the header is not a JSON object");

    const JsonValue *meta = header.find("__metadata__");
    if (!meta || !meta->isObject())
      fail(8, "no __metadata__ in the header: not a dpc-prepare token file");
    for (const auto &[key, value] : meta->object()) {
      if (!value.isString())
        fail(8, "metadata '" + key + "' is not a string");
      metadata_[key] = value.string();
    }
    auto metaString = [&](const char *key) -> const std::string & {
      auto it = metadata_.find(key);
      if (it == metadata_.end())
        fail(8, std::string("the metadata has no '") + key + "'");
      return it->second;
    };
    auto metaCount = [&](const char *key) {
      int64_t value = 0;
      if (!parseCount(metaString(key), value))
        fail(8, std::string("metadata '") + key + "' is '" + metaString(key) +
                    "', not a count");
      return value;
    };
    if (metaString("format") != kFormat)
      fail(8, "metadata format is '" + metaString("format") + "', not '" +
                  kFormat + "'");
    if (metaString("format_version") != kFormatVersion)
      fail(8, "format_version " + metaString("format_version") +
                  " is not the version this program reads (" + kFormatVersion +
                  ")");
    vocab_ = metaCount("vocab_size");
    eos_ = metaCount("eos_id");
    // Samples hold ids as int32.
    if (vocab_ == 0 || vocab_ > (int64_t{1} << 31))
      fail(8, "vocab_size " + std::to_string(vocab_) + " is out of range");
    if (eos_ >= vocab_)
      fail(8, "eos_id " + std::to_string(eos_) + " is not below vocab_size " +
                  std::to_string(vocab_));
    users_ = metadata_.count("users") ? metaCount("users") : 0;

    // Every tensor: the dtype and one dimension the format says, data inside
    // the file, aligned to its element, no two overlapping.
    const uint64_t dataBytes = size_ - dataStart;
    const unsigned char *tensorData[std::size(kTensors)] = {};
    uint64_t tensorCount[std::size(kTensors)] = {};
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto &[name, value] : header.object()) {
      if (name == "__metadata__")
        continue;
      size_t which = 0;
      while (which < std::size(kTensors) && name != kTensors[which].name)
        ++which;
      if (which == std::size(kTensors))
        fail(8, "unexpected tensor '" + name + "' in the header");
      const TensorSpec &spec = kTensors[which];
      try {
        if (value.at("dtype").string() != spec.dtype)
          fail(8, "tensor '" + name + "' has dtype " +
                      value.at("dtype").string() + ", not " + spec.dtype);
        const auto &shape = value.at("shape").array();
        const auto &offsets = value.at("data_offsets").array();
        if (shape.size() != 1 || shape[0].integer() < 0)
          fail(8, "tensor '" + name + "' must have one dimension");
        if (offsets.size() != 2 || offsets[0].integer() < 0 ||
            offsets[1].integer() < offsets[0].integer())
          fail(8, "tensor '" + name + "' has bad data_offsets");
        const uint64_t count = static_cast<uint64_t>(shape[0].integer());
        const uint64_t begin = static_cast<uint64_t>(offsets[0].integer());
        const uint64_t end = static_cast<uint64_t>(offsets[1].integer());
        if (end > dataBytes)
          fail(dataStart + std::min(begin, dataBytes),
               "tensor '" + name + "' ends at byte " +
                   std::to_string(dataStart + end) + ", past the end of the " +
                   std::to_string(size_) + "-byte file (truncated?)");
        if (end - begin != count * spec.elementBytes)
          fail(dataStart + begin, "tensor '" + name + "' has " +
                                      std::to_string(end - begin) +
                                      " bytes for " + std::to_string(count) +
                                      " elements of " + spec.dtype);
        if ((dataStart + begin) % spec.elementBytes != 0)
          fail(dataStart + begin, "tensor '" + name + "' is not aligned to " +
                                      std::to_string(spec.elementBytes) +
                                      " bytes");
        tensorData[which] = base_ + dataStart + begin;
        tensorCount[which] = count;
        if (begin != end)
          ranges.emplace_back(begin, end);
      } catch (const JsonError &e) {
        fail(8, "tensor '" + name + "': " + e.what());
      }
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        fail(dataStart + ranges[i].first, "two tensors overlap");
    for (size_t i = 0; i < std::size(kTensors); ++i)
      if (kTensors[i].required && !tensorData[i])
        fail(8,
             std::string("no tensor '") + kTensors[i].name + "' in the header");

    offsets_ = reinterpret_cast<const int64_t *>(tensorData[kOffsets]);
    ids_ = reinterpret_cast<const uint32_t *>(tensorData[kTokens]);
    mask_ = reinterpret_cast<const uint8_t *>(tensorData[kLossMask]);
    if (tensorCount[kOffsets] == 0)
      fail(byteOf(offsets_), "tensor 'offsets' is empty (it has R + 1 "
                             "elements)");
    records_ = static_cast<int64_t>(tensorCount[kOffsets] - 1);
    tokens_ = static_cast<int64_t>(tensorCount[kTokens]);
    if (tensorCount[kLossMask] != tensorCount[kTokens])
      fail(byteOf(mask_), "tensor 'loss_mask' has " +
                              std::to_string(tensorCount[kLossMask]) +
                              " elements and 'tokens' " +
                              std::to_string(tensorCount[kTokens]));
    if (records_ == 0)
      fail(byteOf(offsets_), "the file has no records");

    // offsets[0] = 0 <= offsets[1] <= ... <= offsets[R] = N.
    if (offsets_[0] != 0)
      fail(byteOf(offsets_),
           "offsets[0] is " + std::to_string(offsets_[0]) + ", not 0");
    for (int64_t r = 1; r <= records_; ++r) {
      if (offsets_[r] < offsets_[r - 1] || offsets_[r] > tokens_)
        fail(byteOf(offsets_ + r),
             "offsets[" + std::to_string(r) +
                 "] = " + std::to_string(offsets_[r]) +
                 (offsets_[r] > tokens_
                      ? " is past the " + std::to_string(tokens_) + " tokens"
                      : " is below offsets[" + std::to_string(r - 1) +
                            "] = " + std::to_string(offsets_[r - 1])));
      maxLength_ = std::max(maxLength_, offsets_[r] - offsets_[r - 1]);
    }
    if (offsets_[records_] != tokens_)
      fail(byteOf(offsets_ + records_),
           "offsets[" + std::to_string(records_) +
               "] = " + std::to_string(offsets_[records_]) + ", not the " +
               std::to_string(tokens_) + " tokens");

    if (tensorData[kSourceLines]) {
      sourceLines_ =
          reinterpret_cast<const int64_t *>(tensorData[kSourceLines]);
      if (tensorCount[kSourceLines] != static_cast<uint64_t>(records_))
        fail(byteOf(sourceLines_),
             "tensor 'source_lines' has " +
                 std::to_string(tensorCount[kSourceLines]) + " elements for " +
                 std::to_string(records_) + " records");
      // `sources`: the input files in order with their record counts, as a
      // JSON array [{"path": ..., "records": n}, ...] summing to R.
      if (auto it = metadata_.find("sources"); it != metadata_.end()) {
        int64_t first = 0;
        try {
          for (const JsonValue &entry : JsonValue::parse(it->second).array()) {
            const int64_t count = entry.at("records").integer();
            if (count < 0 || count > records_ - first)
              throw JsonError("the record counts exceed the file's records");
            sources_.emplace_back(first, entry.at("path").string());
            first += count;
          }
        } catch (const JsonError &e) {
          fail(8, std::string("metadata 'sources' is not a list of input "
                              "files and their records: ") +
                      e.what());
        }
        if (first != records_)
          fail(8, "metadata 'sources' counts " + std::to_string(first) +
                      " records, the file has " + std::to_string(records_));
      }
    }

    if (tensorData[kUsers]) {
      userIndex_ = reinterpret_cast<const int64_t *>(tensorData[kUsers]);
      if (tensorCount[kUsers] != static_cast<uint64_t>(records_))
        fail(byteOf(userIndex_),
             "tensor 'users' has " + std::to_string(tensorCount[kUsers]) +
                 " elements for " + std::to_string(records_) + " records");
      for (int64_t r = 0; r < records_; ++r)
        if (userIndex_[r] < 0 || userIndex_[r] >= users_)
          fail(byteOf(userIndex_ + r),
               "users[" + std::to_string(r) + "] = " +
                   std::to_string(userIndex_[r]) + " is not below the " +
                   std::to_string(users_) + " users of the metadata");
    } else if (users_ != 0) {
      fail(8, "the metadata counts " + std::to_string(users_) +
                  " users but there is no tensor 'users'");
    }
  } catch (...) {
    unmap();
    throw;
  }
}

TokenFile::~TokenFile() { unmap(); }

void TokenFile::unmap() {
  if (base_)
    ::munmap(const_cast<unsigned char *>(base_), size_);
  base_ = nullptr;
}

TokenFile::TokenFile(TokenFile &&other) noexcept { *this = std::move(other); }

TokenFile &TokenFile::operator=(TokenFile &&other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    metadata_ = std::move(other.metadata_);
    records_ = other.records_;
    tokens_ = other.tokens_;
    vocab_ = other.vocab_;
    eos_ = other.eos_;
    users_ = other.users_;
    maxLength_ = other.maxLength_;
    fingerprint_ = other.fingerprint_;
    offsets_ = other.offsets_;
    userIndex_ = other.userIndex_;
    sourceLines_ = other.sourceLines_;
    sources_ = std::move(other.sources_);
    ids_ = other.ids_;
    mask_ = other.mask_;
  }
  return *this;
}

std::string TokenFile::source(int64_t record) const {
  if (!sourceLines_ || record < 0 || record >= records_)
    return "";
  const std::string line = std::to_string(sourceLines_[record]);
  // The last input file whose first record is at or before `record`.
  auto after = std::upper_bound(
      sources_.begin(), sources_.end(), record,
      [](int64_t r, const std::pair<int64_t, std::string> &source) {
        return r < source.first;
      });
  if (after == sources_.begin())
    return "line " + line;
  return std::prev(after)->second + ":" + line;
}

TokenRecord TokenFile::record(int64_t record) const {
  TokenRecord view;
  view.tokens = ids_ + offsets_[record];
  view.lossMask = mask_ + offsets_[record];
  view.length = length(record);
  view.user = user(record);
  return view;
}

int64_t TokenFile::usedLength(int64_t record, int64_t T,
                              Overflow overflow) const {
  if (record < 0 || record >= records_)
    throw TokenFileError(path_ + ": record " + std::to_string(record) +
                         " is not in [0, " + std::to_string(records_) + ")");
  const int64_t n = length(record);
  if (n <= T + 1)
    return n;
  if (overflow == Overflow::Error)
    fail(byteOf(offsets_ + record),
         "record " + std::to_string(record) + " has " + std::to_string(n) +
             " tokens, more than the " + std::to_string(T + 1) +
             " a sample of " + std::to_string(T) + " positions holds");
  return T + 1;
}

void TokenFile::checkRange(int64_t begin, int64_t end) const {
  for (int64_t i = begin; i < end; ++i) {
    if (ids_[i] >= static_cast<uint64_t>(vocab_))
      fail(byteOf(ids_ + i), "token id " + std::to_string(ids_[i]) +
                                 " is not below vocab_size " +
                                 std::to_string(vocab_));
    if (mask_[i] > 1)
      fail(byteOf(mask_ + i), "loss_mask byte " + std::to_string(mask_[i]) +
                                  " is neither 0 nor 1");
  }
}

int64_t TokenFile::fillSample(int64_t record, int64_t T, int32_t *inputs,
                              int32_t *targets, Overflow overflow) const {
  const int64_t n = usedLength(record, T, overflow);
  const int64_t begin = offsets_[record];
  checkRange(begin, begin + n);
  const uint32_t *ids = ids_ + begin;
  const uint8_t *mask = mask_ + begin;
  const int64_t filled = n > 0 ? n - 1 : 0;
  int64_t counted = 0;
  for (int64_t t = 0; t < filled; ++t) {
    inputs[t] = static_cast<int32_t>(ids[t]);
    const bool inLoss = mask[t + 1] != 0;
    targets[t] = inLoss ? static_cast<int32_t>(ids[t + 1]) : -1;
    counted += inLoss;
  }
  std::fill(inputs + filled, inputs + T, 0);
  std::fill(targets + filled, targets + T, -1);
  return counted;
}

int64_t TokenFile::lossTargets(int64_t record, int64_t T,
                               Overflow overflow) const {
  const int64_t n = usedLength(record, T, overflow);
  const uint8_t *mask = mask_ + offsets_[record];
  int64_t counted = 0;
  for (int64_t t = 1; t < n; ++t)
    counted += mask[t] != 0;
  return counted;
}

void TokenFile::verifyTokens() const { checkRange(0, tokens_); }

} // namespace dprt::driver
