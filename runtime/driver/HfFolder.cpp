//===- HfFolder.cpp - Hugging Face folders: shared pieces ----------------===//

#include "HfFolder.h"

#include "Options.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <unistd.h>

namespace dprt::driver {
namespace {

namespace fs = std::filesystem;

void fsyncPath(const std::string &path, bool directory) {
  const int fd =
      ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string reason = std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    throw std::runtime_error("cannot fsync '" + path + "': " + reason);
  }
  ::close(fd);
}

} // namespace

[[noreturn]] void throwProblems(const std::vector<std::string> &problems) {
  std::string text = problems[0];
  for (size_t i = 1; i < problems.size() && i < 3; ++i)
    text += "; " + problems[i];
  if (problems.size() > 3)
    text += "; and " + std::to_string(problems.size() - 3) + " more";
  throw UsageError(text);
}

void copyFileDurably(const std::string &from, const std::string &to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw std::runtime_error("cannot copy '" + from + "' to '" + to +
                             "': " + ec.message());
  fsyncPath(to, false);
}

void writeAtomically(const std::string &dir,
                     const std::function<void(const std::string &)> &fill) {
  const fs::path target = fs::absolute(fs::path(dir)).lexically_normal();
  const std::string temporary =
      (target.parent_path() /
       ("." + target.filename().string() + ".tmp-" + std::to_string(getpid())))
          .string();
  std::error_code ec;
  fs::remove_all(temporary, ec);
  if (!fs::create_directory(temporary, ec) || ec)
    throw std::runtime_error("cannot create '" + temporary +
                             "': " + ec.message());
  try {
    fill(temporary);
    fsyncPath(temporary, true);
    // An empty folder given as the target is replaced; rename(2) refuses a
    // non-empty one, which checkHfExport has already refused.
    if (std::rename(temporary.c_str(), target.c_str()) != 0)
      throw std::runtime_error("cannot rename '" + temporary + "' to '" +
                               target.string() + "': " + std::strerror(errno));
    fsyncPath(target.parent_path().string(), true);
  } catch (...) {
    fs::remove_all(temporary, ec);
    throw;
  }
}

void checkExportFolder(const std::string &dir) {
  std::error_code ec;
  if (fs::exists(dir, ec) &&
      !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw UsageError("the export folder '" + dir +
                     "' exists and is not empty: remove it or export "
                     "elsewhere");
  const fs::path parent =
      fs::absolute(fs::path(dir)).lexically_normal().parent_path();
  if (!fs::is_directory(parent, ec) || ::access(parent.c_str(), W_OK) != 0)
    throw UsageError("cannot create the export folder '" + dir + "': '" +
                     parent.string() +
                     "' is not a directory this program may write");
}

} // namespace dprt::driver
