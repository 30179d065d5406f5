//===- Checkpoint.cpp - Training state and atomic checkpoints -------------===//

#include "Checkpoint.h"

#include "Checksum.h"
#include "Json.h"
#include "Options.h"
#include "privacy/PrivacyReport.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace dprt::driver {
namespace {

using privacy::jsonNumber;
using privacy::jsonString;

/// JSON numbers are doubles: whole numbers are exact up to 2^53.
constexpr int64_t kMaxJsonInteger = int64_t{1} << 53;

[[noreturn]] void ioError(const std::string &what, const std::string &path) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(errno));
}

std::string hex64(uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof(buffer), "0x%016" PRIx64, value);
  return buffer;
}

/// The member `key` as a finite number in [min, max].
double numberIn(const JsonValue &object, const char *key, double min,
                double max) {
  const double value = object.at(key).number();
  if (!(value >= min && value <= max))
    throw JsonError(std::string("\"") + key + "\" must be in [" +
                    jsonNumber(min) + ", " + jsonNumber(max) + "], got " +
                    jsonNumber(value));
  return value;
}

void fsyncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    ioError("cannot open the directory", dir);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0)
    ioError("cannot fsync the directory", dir);
}

/// Test hook: DPRT_TEST_CHECKPOINT_FAULT=crash-before-rename ends the process
/// at the worst moment of a save (every file written, nothing published);
/// =fail-rename makes the rename fail as a full disk would.
std::string checkpointFault() {
  const char *fault = std::getenv("DPRT_TEST_CHECKPOINT_FAULT");
  return fault ? fault : "";
}

std::string stepName(int64_t step) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "step-%08" PRId64, step);
  return buffer;
}

} // namespace

std::string toJson(const CheckpointState &s) {
  std::ostringstream os;
  os << "{\n"
     << "  \"format\": \"dpc-checkpoint\",\n"
     << "  \"format_version\": " << CheckpointState::kFormatVersion << ",\n"
     << "  \"model\": " << jsonString(s.model) << ",\n"
     << "  \"backend\": " << jsonString(s.backend) << ",\n"
     << "  \"compute\": " << jsonString(s.compute) << ",\n"
     << "  \"ranks\": " << s.ranks << ",\n"
     << "  \"step\": " << s.step << ",\n"
     << "  \"total_steps\": " << s.totalSteps << ",\n"
     << "  \"seed\": " << jsonString(hex64(s.seed)) << ",\n"
     << "  \"init_key\": " << jsonString(hex64(s.initKey)) << ",\n"
     << "  \"noise_key\": [";
  for (int i = 0; i < 4; ++i)
    os << (i ? ", " : "") << jsonString(hex64(s.noiseKey[i]));
  os << "],\n"
     << "  \"noise_generator\": " << jsonString(s.generator) << ",\n"
     << "  \"sampler\": {\"kind\": " << jsonString(s.sampler)
     << ", \"next_step\": " << s.nextSamplerStep
     << ", \"q\": " << jsonNumber(s.q) << ", \"batch\": " << s.shuffleBatch
     << ", \"dataset_records\": " << s.datasetRecords
     << ", \"dataset_fingerprint\": " << jsonString(hex64(s.datasetFingerprint))
     << "},\n"
     << "  \"privacy\": {\"sigma\": " << jsonNumber(s.sigma)
     << ", \"max_grad_norm\": " << jsonNumber(s.maxNorm)
     << ", \"delta\": " << jsonNumber(s.delta) << ", \"target_epsilon\": "
     << (s.targetEpsilon > 0 ? jsonNumber(s.targetEpsilon) : "null")
     << ", \"epsilon\": " << jsonNumber(s.epsilon) << "},\n"
     << "  \"accountant\": {\"kind\": " << jsonString(s.accountant)
     << ", \"segments\": [";
  for (size_t i = 0; i < s.segments.size(); ++i)
    os << (i ? ", " : "") << "{\"q\": " << jsonNumber(s.segments[i].q)
       << ", \"sigma\": " << jsonNumber(s.segments[i].sigma)
       << ", \"steps\": " << s.segments[i].steps << "}";
  os << "]},\n"
     << "  \"optimizer\": {\"kind\": " << jsonString(s.optimizer)
     << ", \"lr\": " << jsonNumber(s.lr)
     << ", \"momentum\": " << jsonNumber(s.momentum)
     << ", \"nesterov\": " << (s.nesterov ? "true" : "false")
     << ", \"beta1\": " << jsonNumber(s.beta1)
     << ", \"beta2\": " << jsonNumber(s.beta2)
     << ", \"eps\": " << jsonNumber(s.eps)
     << ", \"weight_decay\": " << jsonNumber(s.weightDecay) << "},\n"
     << "  \"schedule\": {\"warmup\": " << s.warmup
     << ", \"decay\": " << jsonString(s.decay)
     << ", \"min_lr_ratio\": " << jsonNumber(s.minLrRatio)
     << ", \"horizon\": " << s.lrHorizon << "}";
  if (!s.tokenizer.empty())
    os << ",\n  \"data\": {\"tokenizer\": " << jsonString(s.tokenizer) << "}";
  if (!s.files.empty()) {
    os << ",\n  \"files\": {";
    for (size_t i = 0; i < s.files.size(); ++i)
      os << (i ? ", " : "") << jsonString(s.files[i].name)
         << ": {\"bytes\": " << s.files[i].bytes
         << ", \"xxh3_64\": " << jsonString(hex64(s.files[i].checksum)) << "}";
    os << "}";
  }
  os << "\n}\n";
  return os.str();
}

CheckpointState checkpointStateFromJson(const std::string &text,
                                        const std::string &path) {
  CheckpointState s;
  try {
    JsonValue root = JsonValue::parse(text);
    if (root.at("format").string() != "dpc-checkpoint")
      throw JsonError("not a dpc checkpoint");
    int64_t version = root.at("format_version").integer();
    if (version != 1 && version != CheckpointState::kFormatVersion)
      throw JsonError("format version " + std::to_string(version) +
                      ", this program reads versions 1 to " +
                      std::to_string(CheckpointState::kFormatVersion));
    s.formatVersion = static_cast<int32_t>(version);
    s.model = root.at("model").string();
    s.backend = root.at("backend").string();
    s.compute = root.at("compute").string();
    s.ranks = static_cast<int32_t>(
        integerIn(root, "ranks", 1, std::numeric_limits<int32_t>::max()));
    s.step = integerIn(root, "step", 0, kMaxSteps);
    s.totalSteps = integerIn(root, "total_steps", 0, kMaxSteps);
    s.seed = parseHex64(root.at("seed"));
    s.initKey = parseHex64(root.at("init_key"));
    const auto &keys = root.at("noise_key").array();
    if (keys.size() != 4)
      throw JsonError("noise_key needs 4 words");
    for (int i = 0; i < 4; ++i)
      s.noiseKey[i] = parseHex64(keys[i]);
    s.generator = root.at("noise_generator").string();
    const JsonValue &sampler = root.at("sampler");
    s.sampler = sampler.at("kind").string();
    s.nextSamplerStep = integerIn(sampler, "next_step", 1, kMaxSteps + 1);
    s.q = numberIn(sampler, "q", 0, 1);
    s.shuffleBatch = integerIn(sampler, "batch", 0, kMaxJsonInteger);
    s.datasetRecords =
        integerIn(sampler, "dataset_records", 0, kMaxJsonInteger);
    s.datasetFingerprint = parseHex64(sampler.at("dataset_fingerprint"));
    const JsonValue &privacy = root.at("privacy");
    s.sigma = numberIn(privacy, "sigma", 0, HUGE_VAL);
    s.maxNorm = numberIn(privacy, "max_grad_norm", 0, HUGE_VAL);
    // 0 only for a run without DP (no clipping, no noise generator).
    if (!std::isfinite(s.maxNorm) || (!(s.maxNorm > 0) && s.generator != "none"))
      throw JsonError("\"max_grad_norm\" must be finite and > 0");
    s.delta = numberIn(privacy, "delta", 0, 1);
    const JsonValue &target = privacy.at("target_epsilon");
    s.targetEpsilon =
        target.isNull() ? 0 : numberIn(privacy, "target_epsilon", 0, HUGE_VAL);
    const JsonValue &epsilon = privacy.at("epsilon");
    s.epsilon = epsilon.isNull() ? HUGE_VAL : epsilon.number();
    // The history is replayed one step at a time on resume: its length is
    // bounded by the step before anything is composed.
    int64_t history = 0;
    const JsonValue &accountant = root.at("accountant");
    s.accountant = accountant.at("kind").string();
    if (!privacy::parseAccountantKind(s.accountant))
      throw JsonError("unknown accountant '" + s.accountant + "'");
    for (const JsonValue &segment : accountant.at("segments").array()) {
      s.segments.push_back({numberIn(segment, "q", 0, 1),
                            numberIn(segment, "sigma", 0, HUGE_VAL),
                            integerIn(segment, "steps", 0, s.step - history)});
      history += s.segments.back().steps;
    }
    const JsonValue &opt = root.at("optimizer");
    s.optimizer = opt.at("kind").string();
    s.lr = opt.at("lr").number();
    s.momentum = opt.at("momentum").number();
    s.nesterov = opt.at("nesterov").boolean();
    s.beta1 = opt.at("beta1").number();
    s.beta2 = opt.at("beta2").number();
    s.eps = opt.at("eps").number();
    s.weightDecay = opt.at("weight_decay").number();
    if (!(s.lr >= 0) || !std::isfinite(s.lr) || !(s.weightDecay >= 0) ||
        !std::isfinite(s.weightDecay))
      throw JsonError("the optimizer's lr and weight_decay must be finite "
                      "and >= 0");
    // Absent in checkpoints written before schedules: constant.
    if (const JsonValue *schedule = root.find("schedule")) {
      s.warmup = integerIn(*schedule, "warmup", 0, kMaxSteps);
      s.decay = schedule->at("decay").string();
      LrDecay decay;
      if (!parseLrDecay(s.decay, decay))
        throw JsonError("unknown decay '" + s.decay + "'");
      s.minLrRatio = numberIn(*schedule, "min_lr_ratio", 0, 1);
      s.lrHorizon = integerIn(*schedule, "horizon", 0, kMaxSteps);
    }
    if (const JsonValue *data = root.find("data"))
      s.tokenizer = data->at("tokenizer").string();
    if (const JsonValue *files = root.find("files"))
      for (const auto &[name, file] : files->object()) {
        if (name.empty() || name.find('/') != std::string::npos ||
            name[0] == '.')
          throw JsonError("\"files\" names '" + name +
                          "', not a file of the checkpoint");
        s.files.push_back({name, integerIn(file, "bytes", 0, kMaxJsonInteger),
                           parseHex64(file.at("xxh3_64"))});
      }
  } catch (const JsonError &e) {
    throw UsageError("the checkpoint state '" + path +
                     "' is not valid: " + e.what());
  }
  if (s.nextSamplerStep != s.step + 1 || (s.step > 0 && s.totalSteps < s.step))
    throw UsageError("the checkpoint state '" + path +
                     "' is not valid: inconsistent step counters");
  return s;
}

void writeFileDurably(const std::string &path, const std::string &content) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    ioError("cannot create", path);
  bool ok =
      std::fwrite(content.data(), 1, content.size(), file) == content.size() &&
      std::fflush(file) == 0 && ::fsync(fileno(file)) == 0;
  int savedErrno = errno;
  if (std::fclose(file) != 0 || !ok) {
    errno = ok ? errno : savedErrno;
    ioError("cannot write", path);
  }
}

std::string readTextFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UsageError("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

namespace {

/// Field 22 of /proc/PID/stat: when the process started, in clock ticks
/// since boot (0 if unknown). With the pid it names one process even after
/// the pid is reused.
uint64_t processStartTicks(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // Field 2, the command, is in parentheses and may hold spaces.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22)
      return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

std::string hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0)
    return "unknown";
  return name;
}

/// Who a lock file names.
struct LockOwner {
  bool known = false; ///< the file held a readable owner
  long pid = 0;
  std::string host;
  uint64_t startTicks = 0;

  std::string describe() const {
    return "process " + std::to_string(pid) + " on host " + host;
  }
};

LockOwner readLockOwner(int fd) {
  std::string text;
  char buffer[512];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof(buffer), at);
    if (n <= 0)
      break;
    text.append(buffer, static_cast<size_t>(n));
    at += n;
    if (text.size() > 4096)
      break;
  }
  LockOwner owner;
  try {
    const JsonValue root = JsonValue::parse(text);
    const int64_t pid = root.at("pid").integer();
    if (pid <= 0 || pid > std::numeric_limits<int32_t>::max())
      return owner;
    owner.pid = static_cast<long>(pid);
    owner.host = root.at("host").string();
    owner.startTicks = parseHex64(root.at("start_ticks"));
    owner.known = true;
  } catch (const JsonError &) {
  }
  return owner;
}

/// Whether the owner (on this host) still runs: its pid exists and, when
/// the lock recorded it, started at the same time.
bool runsHere(const LockOwner &owner) {
  if (::kill(static_cast<pid_t>(owner.pid), 0) != 0 && errno != EPERM)
    return false;
  const uint64_t start = processStartTicks(owner.pid);
  return owner.startTicks == 0 || start == 0 || start == owner.startTicks;
}

} // namespace

const char *CheckpointLock::fileName() { return "lock"; }

CheckpointLock::CheckpointLock(const std::string &dir, std::string &warning) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw UsageError(
        "cannot create the checkpoint directory '" + dir +
        "' (--save): " + (ec ? ec.message() : std::string("not a directory")));
  path_ = (fs::path(dir) / fileName()).string();
  const std::string host = hostName();
  auto inUse = [&](const LockOwner &owner, const std::string &advice) {
    return UsageError(
        "the checkpoint directory '" + dir + "' (--save) is in use by " +
        (owner.known ? owner.describe() : std::string("another process")) +
        " (its lock file " + path_ + "): " + advice);
  };
  // A previous owner removes the file when it ends: if it went between our
  // open and our flock, the flock is on a file no one else will see.
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw UsageError("cannot write into the checkpoint directory '" + dir +
                       "' (--save): cannot create '" + path_ +
                       "': " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      const LockOwner owner = readLockOwner(fd);
      ::close(fd);
      throw inUse(owner, "wait for that run to end, or save elsewhere");
    }
    // Other flock failures (a file system without locks) leave the decision
    // to the owner the file names.
    struct stat held, named;
    if (::fstat(fd, &held) == 0 &&
        (::stat(path_.c_str(), &named) != 0 || held.st_ino != named.st_ino ||
         held.st_dev != named.st_dev)) {
      ::close(fd);
      if (attempt < 10)
        continue;
      throw std::runtime_error("cannot take the lock '" + path_ +
                               "': it keeps being replaced");
    }
    const LockOwner owner = readLockOwner(fd);
    if (owner.known && owner.host != host) {
      ::close(fd);
      throw inUse(owner, "its process cannot be checked from here; if that "
                         "run has ended, remove the lock file");
    }
    if (owner.known && runsHere(owner)) {
      ::close(fd);
      throw inUse(owner, "wait for that run to end, or save elsewhere");
    }
    if (owner.known)
      warning = "taking over the stale lock " + path_ + " of " +
                owner.describe() + ", which is no longer running";
    else if (held.st_size > 0)
      warning = "taking over the unreadable lock " + path_;
    const std::string content =
        "{\"pid\": " + std::to_string(::getpid()) +
        ", \"host\": " + jsonString(host) + ", \"start_ticks\": " +
        jsonString(hex64(processStartTicks(::getpid()))) + "}\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, content.data(), content.size(), 0) !=
            static_cast<ssize_t>(content.size()) ||
        ::fsync(fd) != 0) {
      const int error = errno;
      ::close(fd);
      throw UsageError("cannot write the lock file '" + path_ +
                       "' (--save): " + std::strerror(error));
    }
    fd_ = fd;
    return;
  }
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0)
    return;
  // Removed while still held, so that no one takes a lock that is about to
  // vanish (the next owner checks that the file it holds is still there).
  ::unlink(path_.c_str());
  ::close(fd_);
}

std::string CheckpointDirectory::begin(int64_t step) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec)
    throw std::runtime_error("cannot create the checkpoint directory '" + dir_ +
                             "': " + ec.message());
  // Leftovers of a save that was interrupted; never a published checkpoint.
  for (const auto &entry : fs::directory_iterator(dir_, ec))
    if (std::string name = entry.path().filename().string();
        name.rfind(".tmp-", 0) == 0 || name.rfind(".latest-", 0) == 0)
      fs::remove_all(entry.path(), ec);
  step_ = step;
  temporary_ = temporaryPath(dir_, step, token());
  fs::remove_all(temporary_, ec);
  if (!fs::create_directory(temporary_, ec) || ec)
    throw std::runtime_error("cannot create '" + temporary_ +
                             "': " + ec.message());
  return temporary_;
}

int64_t CheckpointDirectory::token() const { return ::getpid(); }

std::string CheckpointDirectory::temporaryPath(const std::string &dir,
                                               int64_t step, int64_t token) {
  return (fs::path(dir) /
          (".tmp-" + stepName(step) + "-" + std::to_string(token)))
      .string();
}

void CheckpointDirectory::abandon() {
  if (temporary_.empty())
    return;
  std::error_code ec;
  fs::remove_all(temporary_, ec);
  temporary_.clear();
}

std::string CheckpointDirectory::commit() {
  fsyncDirectory(temporary_);
  std::string name = stepName(step_);
  // A checkpoint of the same step may exist (a resumed run saving again):
  // never replace a published directory, take the next free name.
  for (int suffix = 1; fs::exists(fs::path(dir_) / name); ++suffix)
    name = stepName(step_) + "." + std::to_string(suffix);
  const std::string target = (fs::path(dir_) / name).string();

  const std::string fault = checkpointFault();
  if (fault == "crash-before-rename")
    std::_Exit(86);
  if (fault == "fail-rename") {
    errno = EIO;
    ioError("cannot rename the checkpoint into place (test fault)", target);
  }
  if (std::rename(temporary_.c_str(), target.c_str()) != 0)
    ioError("cannot rename the checkpoint into place", target);
  fsyncDirectory(dir_);

  const std::string latest = (fs::path(dir_) / "latest").string();
  const std::string latestTemporary =
      (fs::path(dir_) / (".latest-" + std::to_string(::getpid()))).string();
  writeFileDurably(latestTemporary, name + "\n");
  if (std::rename(latestTemporary.c_str(), latest.c_str()) != 0)
    ioError("cannot update", latest);
  fsyncDirectory(dir_);
  temporary_.clear();
  return target;
}

const char *optimizerName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Momentum:
    return "momentum";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "?";
}

void describeProgram(const ProgramSpec &spec, CheckpointState &s) {
  const RecipeSpec &r = spec.recipe;
  s.model = spec.model;
  s.backend = spec.backend;
  s.compute = nameOf(spec.compute);
  s.ranks = spec.ranks;
  s.optimizer = optimizerName(r.optimizer);
  s.lr = r.lr;
  s.momentum = r.momentum;
  s.nesterov = r.nesterov;
  s.beta1 = r.beta1;
  s.beta2 = r.beta2;
  s.eps = r.eps;
  s.weightDecay = r.weightDecay;
}

void checkResumable(const ProgramSpec &spec, const CheckpointState &s,
                    const std::string &path) {
  const RecipeSpec &r = spec.recipe;
  if (s.model != spec.model)
    throw UsageError("the checkpoint '" + path + "' is of model '" + s.model +
                     "', this program trains '" + spec.model + "'");
  if (s.compute != nameOf(spec.compute))
    throw UsageError("the checkpoint '" + path + "' was trained in " +
                     s.compute + ", this program computes in " +
                     nameOf(spec.compute));
  if (s.optimizer != optimizerName(r.optimizer) || s.momentum != r.momentum ||
      s.nesterov != r.nesterov || s.beta1 != r.beta1 || s.beta2 != r.beta2 ||
      s.eps != r.eps)
    throw UsageError("the checkpoint '" + path +
                     "' was written by a program with another optimizer; "
                     "resume with the program that wrote it");
}

namespace {

/// The step and suffix of a checkpoint name "step-NNNNNNNN[.k]"; false for
/// any other name.
bool parseStepName(const std::string &name, int64_t &step, int64_t &suffix) {
  if (name.rfind("step-", 0) != 0)
    return false;
  const size_t dot = name.find('.', 5);
  const std::string digits = name.substr(5, dot - 5);
  const std::string tail = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (digits.empty() || digits.size() > 17 ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      (dot != std::string::npos &&
       (tail.empty() || tail.size() > 9 ||
        tail.find_first_not_of("0123456789") != std::string::npos)))
    return false;
  step = std::stoll(digits);
  suffix = tail.empty() ? 0 : std::stoll(tail);
  return true;
}

} // namespace

std::vector<std::string> pruneCheckpoints(const std::string &dir,
                                          int64_t keep) {
  struct Entry {
    int64_t step, suffix;
    std::string name;
  };
  std::vector<Entry> checkpoints;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0, suffix = 0;
    if (parseStepName(name, step, suffix) && entry.is_directory(ec) &&
        fs::exists(entry.path() / "state.json", ec))
      checkpoints.push_back({step, suffix, name});
  }
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const Entry &a, const Entry &b) {
              return a.step != b.step ? a.step < b.step : a.suffix < b.suffix;
            });
  std::string latest;
  if (fs::exists(fs::path(dir) / "latest", ec)) {
    latest = readTextFile((fs::path(dir) / "latest").string());
    while (!latest.empty() && (latest.back() == '\n' || latest.back() == '\r'))
      latest.pop_back();
  }
  std::vector<std::string> removed;
  const int64_t surplus =
      static_cast<int64_t>(checkpoints.size()) - std::max<int64_t>(keep, 1);
  for (int64_t i = 0; i < surplus; ++i) {
    const std::string &name = checkpoints[i].name;
    if (name == latest)
      continue;
    const fs::path from = fs::path(dir) / name;
    const fs::path doomed = fs::path(dir) / (".tmp-pruned-" + name + "-" +
                                             std::to_string(::getpid()));
    if (std::rename(from.c_str(), doomed.c_str()) != 0)
      ioError("cannot remove the old checkpoint", from.string());
    fs::remove_all(doomed, ec);
    removed.push_back(name);
  }
  if (!removed.empty())
    fsyncDirectory(dir);
  return removed;
}

std::string resolveCheckpoint(const std::string &dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "state.json", ec))
    return dir;
  const std::string latest = (fs::path(dir) / "latest").string();
  if (!fs::exists(latest, ec))
    throw UsageError("'" + dir +
                     "' is not a checkpoint: it has neither a state.json nor "
                     "a 'latest' file");
  std::string name = readTextFile(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r'))
    name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos)
    throw UsageError("'" + latest + "' does not name a checkpoint");
  const std::string path = (fs::path(dir) / name).string();
  if (!fs::exists(fs::path(path) / "state.json", ec))
    throw UsageError("'" + latest + "' names '" + name +
                     "', which has no state.json");
  return path;
}

} // namespace dprt::driver
