//===- CheckpointReader.cpp - A checkpoint's parameters, one at a time ----===//

#include "CheckpointReader.h"

#include "Checkpoint.h"
#include "Options.h"
#include "ShardedCheckpoint.h"

namespace dprt::driver {

int64_t CheckpointParameter::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

CheckpointReader::CheckpointReader(const std::string &path)
    : path_(resolveCheckpoint(path)) {
  const std::string statePath = path_ + "/state.json";
  const CheckpointState state =
      checkpointStateFromJson(readTextFile(statePath), statePath);
  checkpoint_ =
      std::make_unique<ShardedCheckpoint>(path_, state, nullptr, notes_);
  const CheckpointManifest &m = checkpoint_->manifest();
  model_ = m.model;
  step_ = m.step;
  for (const ManifestParam &p : m.params)
    parameters_.push_back({p.name, p.shape, p.trainable});
}

CheckpointReader::~CheckpointReader() = default;

const std::string &CheckpointReader::path() const { return path_; }
const std::string &CheckpointReader::model() const { return model_; }
int64_t CheckpointReader::step() const { return step_; }
const std::string &CheckpointReader::hfSources() const {
  return checkpoint_->manifest().hfSources;
}

const std::string &CheckpointReader::lora() const {
  return checkpoint_->manifest().lora;
}

DType CheckpointReader::dtype() const { return checkpoint_->manifest().dtype; }
int CheckpointReader::formatVersion() const {
  return checkpoint_->formatVersion();
}
int CheckpointReader::ranks() const { return checkpoint_->manifest().ranks; }
const std::vector<CheckpointParameter> &CheckpointReader::parameters() const {
  return parameters_;
}
const std::vector<std::string> &CheckpointReader::notes() const {
  return notes_;
}

void CheckpointReader::read(const CheckpointParameter &parameter,
                            std::vector<char> &out) {
  out.resize(static_cast<size_t>(parameter.numel() * sizeOf(dtype())));
  read(parameter.name, dtype(), out.data());
}

void CheckpointReader::read(const std::string &name, DType to, void *out) {
  const int index = checkpoint_->paramIndex(name);
  if (index < 0)
    throw UsageError("the checkpoint '" + path_ + "' has no parameter '" +
                     name + "'");
  const ManifestParam &p = checkpoint_->manifest().params[index];
  checkpoint_->read(p.unit, 0, p.offset, p.offset + p.numel(), to, out);
}

void CheckpointReader::verify() {
  for (int f = 0; f < checkpoint_->fileCount(); ++f)
    checkpoint_->verifyFile(f);
}

} // namespace dprt::driver
