//===- ProgramHarness.h - Compiled training programs vs the reference -*- C++
//-*-===//
//
// What the program-level tests need to treat a training binary as a black
// box and check it against the f64 reference (test/reference):
//  - the binaries, compiled by `dpc` from test/programs/models at test time
//    (ctest compiles them in its `dpc-programs` fixture; a test run by hand
//    compiles a missing one itself);
//  - the recipe's numbers, read from the model file (not from the compiler);
//  - data files written from a seed, and the same records as reference
//    batches (text: input '\n' + bytes, target bytes + '\n', padded with
//    token 0 / target -1);
//  - the logical batch of a step, drawn with the program's Poisson sampler
//    keyed as the driver keys it;
//  - checkpoints and metrics read back with a reader of this file's own.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_PROGRAMS_PROGRAMHARNESS_H
#define DPC_TEST_PROGRAMS_PROGRAMHARNESS_H

#include "reference/Model.h"

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace dpc::programs {

using reference::Vec;

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

/// One binary: `dpc models/<model>.mlir --recipe <recipe> --ranks <ranks>
/// [--recompute <recompute>]` (and `--norm-method '*=<normMethod>'` when that
/// is set).
/// `model` is a file stem such as "mlp-f64" or "tinylm-f32".
struct ProgramId {
  std::string model;
  std::string recipe;
  int ranks = 1;
  /// `dpc --recompute` ("" for dpc's default: none without a budget).
  std::string recompute = "";
  /// The per-sample norm method forced for every linear weight, or "".
  std::string normMethod;
  /// `dpc --rematerialize=on` (dp-rematerialize), or off.
  bool rematerialize = true;
  /// `dpc --reshard-after-forward`: "" for dpc's default (auto), "on"
  /// (every unit gathered again before its backward) or "off" (the
  /// forward's gathers kept for the backward).
  std::string reshard = "";
  /// `dpc --sum-in-update`: auto (true), or off (every clipped sum added
  /// into the gradient by the micro-step).
  bool sumInUpdate = true;
  /// `dpc --overwrite-gradients`: auto (true), or off (every weight
  /// gradient added into a gradient dp_apply zeroed).
  bool overwriteGradients = true;
  /// `dpc --last-batch-sizes` ("" for dpc's default, auto).
  std::string lastBatchSizes = "";
  /// `dpc --compute-copy`: "" for dpc's default (auto: off on the CPU, which
  /// has no memory budget), "on" or "off".
  std::string computeCopy = "";
  /// `dpc --per-sample-rows`: "" for dpc's default (auto: the compute type
  /// on the CPU), "compute" or "mxfp8".
  std::string perSampleRows = "";

  std::string name() const;
  bool isLanguageModel() const;
  bool isF64() const;
};

/// The binary's path; compiles it when it does not exist yet.
std::string programPath(const ProgramId &id);

/// A parameter as the compiled program lays it out (from dp_describe in the
/// program's C++): the first element's index in the model's flat space,
/// which keys its noise.
struct ParamLayout {
  std::string name;
  int64_t globalIndex = 0;
  int64_t numel = 0;
  bool trainable = true;
};
std::vector<ParamLayout> programLayout(const ProgramId &id);

/// The relative slack the program's clip factors add to every per-sample
/// norm for its rounding error (the last argument of its clip_factors
/// calls, docs/clip-planning.md "Rounding of the norm"); the same in every
/// call.
double programNormRelErr(const ProgramId &id);

/// The numbers of a recipe, read from the model file.
struct RecipeValues {
  reference::Recipe step; ///< expectedBatch is set per data set
  int64_t expectedBatch = 0;
  int64_t physicalBatch = 0;
};
RecipeValues readRecipe(const ProgramId &id);

/// Runs the program with `args`; fails the test (fatal) if it does not exit
/// with status 0. Returns its stderr and stdout.
std::string runProgram(const ProgramId &id,
                       const std::vector<std::string> &args);

//===----------------------------------------------------------------------===//
// Data
//===----------------------------------------------------------------------===//

/// Training records as the program reads them (one per line of the file).
struct Records {
  bool text = false;
  std::vector<std::string> lines; ///< text records
  std::vector<Vec> features;      ///< CSV records, values as stored
  std::vector<int32_t> labels;

  int64_t size() const {
    return text ? int64_t(lines.size()) : int64_t(labels.size());
  }
};

/// `count` lines of 1 .. maxBytes printable bytes.
Records makeText(std::mt19937_64 &rng, int64_t count, int64_t maxBytes);
/// `count` rows of N(0, 1) features and uniform labels; with `f32` every
/// feature is an f32 value (the program stores features in its compute
/// type, so the reference must see the same numbers).
Records makeClassification(std::mt19937_64 &rng, int64_t count,
                           int64_t features, int64_t classes, bool f32);
/// `count` records for the program's model from `seed`: text lines of 1 to
/// T - 1 bytes for language models, classification rows otherwise.
Records makeRecords(const ProgramId &id, uint64_t seed, int64_t count);
/// Writes the records in the program's format (text or CSV).
void writeRecords(const Records &records, const std::string &path);

/// The records at `indices` as a reference batch for the model's inputs:
/// "tok"/"tgt" for language models of `tokens` positions, "x"/"label"
/// for classifiers. An index of -1 is a padding row, filled as the driver
/// fills one.
reference::Batch referenceBatch(const Records &records,
                                const std::vector<int64_t> &indices,
                                int64_t tokens);

/// The sorted record indices of the logical batch of `step` for a run with
/// `seed` over `records` records at q = expectedBatch / records.
std::vector<int64_t> logicalBatch(uint64_t seed, int64_t records,
                                  int64_t expectedBatch, int64_t step);

/// The standard normal the program adds (times sigma C) to global element
/// `index` of the summed gradient at `step`: gaussianF64 for f64 programs,
/// gradientNoiseF32 for f32 ones, from the run's noise key.
double gradientNoise(uint64_t seed, int64_t step, int64_t index, bool f64);

//===----------------------------------------------------------------------===//
// Checkpoints and metrics
//===----------------------------------------------------------------------===//

/// Every tensor of a .safetensors file (F32 or F64), as doubles.
using Tensors = std::map<std::string, Vec>;
Tensors readSafetensors(const std::string &path);

/// DIR/<latest>: the checkpoint a `--save DIR` run wrote last.
std::string latestCheckpoint(const std::string &dir);

/// Every state of every unit of the checkpoint directory `checkpoint`
/// (sharded, format version 2) in full, "<unit>.<state>" ("unit.b0.master",
/// "unit.b0.adam_m"), put together from the rank files by the ranges of
/// manifest.json. Written from docs/training-program.md, not with the
/// driver's reader.
Tensors readUnitStates(const std::string &checkpoint);

/// Every parameter of the checkpoint directory `checkpoint`: cut out of its
/// unit's "<unit>.master" (readUnitStates) at the manifest's offset.
Tensors readCheckpointParams(const std::string &checkpoint);

/// Expects `b` to hold the same tensors as `a` bit for bit: prints
/// "[bits] <what>: N of M values differ" and fails the test unless N = 0.
void expectSameBits(const Tensors &a, const Tensors &b,
                    const std::string &what);

/// The "loss" of each line of a --metrics file (NaN for null).
std::vector<double> metricLosses(const std::string &path);
/// The number `key` of each line of a --metrics file (NaN for null).
std::vector<double> metricValues(const std::string &path,
                                 const std::string &key);

//===----------------------------------------------------------------------===//
// The reference models of models/*.mlir
//===----------------------------------------------------------------------===//

/// The reference model of a program's model file, with its parameters set
/// from `params` (every tensor must exist with the model's size).
reference::Model referenceModel(const ProgramId &id, const Tensors &params);
/// `m` with the values of `params`, which must hold exactly its parameters.
reference::Model fillReferenceModel(const ProgramId &id, reference::Model m,
                                    const Tensors &params);

/// What the recipe trains, read from the model file: its `freeze`
/// patterns and its LoRA adapters (rank, alpha / rank, targets).
struct TrainedParams {
  std::vector<std::string> freeze;
  std::vector<std::string> loraTargets;
  int64_t loraRank = 0;
  double loraScaling = 1.0;
};
TrainedParams readTrainedParams(const ProgramId &id);

/// Positions per sample of the model (1 for classifiers).
int64_t modelTokens(const ProgramId &id);

//===----------------------------------------------------------------------===//
// Errors and seeds
//===----------------------------------------------------------------------===//

/// ||a - b|| / ||b|| (||a|| when b = 0).
double relativeError(const Vec &a, const Vec &b);
/// max(0, ||a - b|| - slack) / ||b||: the error of a beyond an error of
/// `slack` that is allowed for.
double relativeErrorBeyond(const Vec &a, const Vec &b, double slack);
Vec difference(const Vec &a, const Vec &b);
double norm(const Vec &a);
/// 2^-53 for f64 programs, 2^-24 for f32 ones.
double unitRoundoff(const ProgramId &id);

/// A gtest case name from file stems and recipe names:
/// ("tinylm-f32", "flat_sgd") -> "TinylmF32FlatSgd".
std::string caseName(const std::string &model, const std::string &recipe);

/// A fresh seed per call, or DPC_TEST_SEED (+ salt) when set; logged.
uint64_t testSeed(uint64_t salt = 0);

} // namespace dpc::programs

#endif // DPC_TEST_PROGRAMS_PROGRAMHARNESS_H
