//===- Tokenizer.cpp - A model's tokenizer, through dpc-prepare -----------===//

#include "Tokenizer.h"

#include "Json.h"
#include "Options.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DPRT_DPC_PREPARE
#define DPRT_DPC_PREPARE "dpc-prepare"
#endif

namespace dprt::driver {
namespace {

/// `text` as one shell word.
std::string quoted(const std::string &text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// A file under $TMPDIR (or /tmp) holding `content`, removed at the end of
/// its scope.
class ScratchFile {
public:
  explicit ScratchFile(const std::string &content) {
    const char *dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/dpc-generate-XXXXXX";
    const int fd = mkstemp(path_.data());
    if (fd < 0)
      throw std::runtime_error("cannot create a scratch file in " + path_);
    close(fd);
    std::ofstream out(path_, std::ios::binary);
    out << content;
    if (!out)
      throw std::runtime_error("cannot write the scratch file " + path_);
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  ScratchFile(const ScratchFile &) = delete;
  ScratchFile &operator=(const ScratchFile &) = delete;
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

} // namespace

Tokenizer::Tokenizer(std::string folder) : folder_(std::move(folder)) {
  const char *program = std::getenv("DPC_PREPARE");
  program_ = program && *program ? program : DPRT_DPC_PREPARE;
}

std::string Tokenizer::run(const std::string &args) const {
  const std::string command =
      quoted(program_) + " --tokenizer " + quoted(folder_) + " " + args;
  std::FILE *pipe = popen(command.c_str(), "r");
  if (!pipe)
    throw std::runtime_error("cannot run " + program_);
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // dpc-prepare said why on stderr; status 2 is a bad folder or input.
  if (code == 2)
    throw UsageError("the tokenizer '" + folder_ +
                     "' could not be used (dpc-prepare's error above)");
  if (code != 0)
    throw std::runtime_error(program_ + " failed (exit status " +
                             std::to_string(code) +
                             "); set DPC_PREPARE to a working dpc-prepare");
  return out;
}

Tokenizer::Encoded Tokenizer::encode(const std::string &text) const {
  ScratchFile input(text);
  const std::string out = run("--encode " + quoted(input.path()));
  Encoded e;
  try {
    const JsonValue root = JsonValue::parse(out);
    for (const JsonValue &id : root.at("ids").array())
      e.ids.push_back(static_cast<int32_t>(id.integer()));
    e.eos = static_cast<int32_t>(root.at("eos_id").integer());
  } catch (const JsonError &error) {
    throw std::runtime_error(program_ +
                             " --encode printed no ids: " + error.what());
  }
  return e;
}

std::vector<std::string>
Tokenizer::decode(const std::vector<std::vector<int32_t>> &sequences) const {
  std::string lines;
  for (const std::vector<int32_t> &ids : sequences) {
    lines += "[";
    for (size_t i = 0; i < ids.size(); ++i)
      lines += (i ? ", " : "") + std::to_string(ids[i]);
    lines += "]\n";
  }
  ScratchFile input(lines);
  const std::string out = run("--decode " + quoted(input.path()));
  std::vector<std::string> texts;
  size_t begin = 0;
  while (begin < out.size()) {
    size_t end = out.find('\n', begin);
    if (end == std::string::npos)
      end = out.size();
    try {
      texts.push_back(
          JsonValue::parse(out.substr(begin, end - begin)).string());
    } catch (const JsonError &error) {
      throw std::runtime_error(program_ +
                               " --decode printed no text: " + error.what());
    }
    begin = end + 1;
  }
  if (texts.size() != sequences.size())
    throw std::runtime_error(program_ + " --decode printed " +
                             std::to_string(texts.size()) + " texts for " +
                             std::to_string(sequences.size()) + " samples");
  return texts;
}

} // namespace dprt::driver
