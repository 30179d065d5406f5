//===- ProcessHelpers.cpp - Running fixture programs from tests -----------===//

#include "ProcessHelpers.h"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace dpctest {

TempDir::TempDir() {
  char pattern[] = "/tmp/dpc-driver-test-XXXXXX";
  if (!mkdtemp(pattern))
    throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void writeFile(const std::string &path, const std::string &content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

void writeTokenFile(
    const std::string &path, const std::vector<TokenRecordData> &records,
    int64_t vocab, int64_t eos,
    const std::vector<std::pair<std::string, std::string>> &metadata) {
  std::vector<int64_t> offsets{0};
  std::vector<uint32_t> ids;
  std::vector<uint8_t> mask;
  for (const TokenRecordData &r : records) {
    if (r.ids.size() != r.mask.size())
      throw std::runtime_error("a token record's ids and mask differ");
    ids.insert(ids.end(), r.ids.begin(), r.ids.end());
    mask.insert(mask.end(), r.mask.begin(), r.mask.end());
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  int64_t lossTokens = 0;
  for (uint8_t m : mask)
    lossTokens += m;
  std::map<std::string, std::string> meta{
      {"format", "dpc-tokens"},
      {"format_version", "1"},
      {"vocab_size", std::to_string(vocab)},
      {"eos_id", std::to_string(eos)},
      {"records", std::to_string(records.size())},
      {"tokens", std::to_string(ids.size())},
      {"loss_tokens", std::to_string(lossTokens)},
      {"users", "0"}};
  for (const auto &[key, value] : metadata)
    meta[key] = value;
  // Each value is written between quotes as given: the caller escapes it.
  std::ostringstream header;
  header << "{\"__metadata__\": {";
  bool first = true;
  for (const auto &[key, value] : meta) {
    header << (first ? "" : ", ") << "\"" << key << "\": \"" << value << "\"";
    first = false;
  }
  header << "}";
  const uint64_t offsetsBytes = offsets.size() * 8, idsBytes = ids.size() * 4;
  header << ", \"offsets\": {\"dtype\": \"I64\", \"shape\": [" << offsets.size()
         << "], \"data_offsets\": [0, " << offsetsBytes
         << "]}, \"tokens\": {\"dtype\": \"U32\", \"shape\": [" << ids.size()
         << "], \"data_offsets\": [" << offsetsBytes << ", "
         << offsetsBytes + idsBytes
         << "]}, \"loss_mask\": {\"dtype\": \"U8\", \"shape\": [" << mask.size()
         << "], \"data_offsets\": [" << offsetsBytes + idsBytes << ", "
         << offsetsBytes + idsBytes + mask.size() << "]}}";
  std::string json = header.str();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((uint64_t(json.size()) >> (8 * i)) & 0xff);
  bytes += json;
  // The host is little-endian (the reader refuses others as well).
  bytes.append(reinterpret_cast<const char *>(offsets.data()), offsetsBytes);
  bytes.append(reinterpret_cast<const char *>(ids.data()), idsBytes);
  bytes.append(reinterpret_cast<const char *>(mask.data()), mask.size());
  writeFile(path, bytes);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot read " + path);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

RunResult runProgram(const std::string &binary,
                     const std::vector<std::string> &args,
                     const std::vector<std::string> &env) {
  TempDir capture;
  const std::string outPath = capture / "stdout", errPath = capture / "stderr";
  pid_t pid = fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = open(outPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
      _exit(127);
    for (const std::string &assignment : env) {
      size_t eq = assignment.find('=');
      setenv(assignment.substr(0, eq).c_str(),
             assignment.substr(eq + 1).c_str(), 1);
    }
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(binary.c_str()));
    for (const std::string &arg : args)
      argv.push_back(const_cast<char *>(arg.c_str()));
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0)
    throw std::runtime_error("waitpid failed");
  RunResult result;
  result.status =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = readFile(outPath);
  result.err = readFile(errPath);
  return result;
}

} // namespace dpctest
