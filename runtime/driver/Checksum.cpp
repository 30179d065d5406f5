//===- Checksum.cpp - Checksums of checkpoint files -----------------------===//

#include "Checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

namespace dprt::driver {

Checksum::Checksum() : state_(XXH3_createState()) {
  if (!state_)
    throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t *>(state_));
}

Checksum::~Checksum() { XXH3_freeState(static_cast<XXH3_state_t *>(state_)); }

void Checksum::update(const void *data, size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t *>(state_), data, bytes);
  bytes_ += static_cast<int64_t>(bytes);
}

uint64_t Checksum::value() const {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t *>(state_));
}

uint64_t checksumOfFile(const std::string &path, int64_t &bytes) {
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> file(
      std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file)
    throw std::runtime_error("cannot read '" + path +
                             "': " + std::strerror(errno));
  Checksum checksum;
  // 4 MiB reads: large enough to run at disk speed, small beside a model.
  std::vector<char> buffer(size_t(4) << 20);
  for (;;) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    checksum.update(buffer.data(), n);
    if (n < buffer.size())
      break;
  }
  if (std::ferror(file.get()))
    throw std::runtime_error("cannot read '" + path +
                             "': " + std::strerror(errno));
  bytes = checksum.bytes();
  return checksum.value();
}

std::string checksumText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016" PRIx64, value);
  return text;
}

} // namespace dprt::driver
