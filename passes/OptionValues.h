//===- OptionValues.h - The values DPC's options take -----------*- C++ -*-===//
//
// Options that choose among a few values are enums, parsed by the command
// line library: a pass option (Passes.td), the dp-compile pipeline
// (Pipeline.h) and dpc take the same values from here, and a value's name
// is spelled once. So is the range of the number of ranks.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_PASSES_OPTIONVALUES_H
#define DPC_PASSES_OPTIONVALUES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <cstdint>
#include <limits>

namespace dpc {

/// A value of an enum option with its name on the command line.
template <typename EnumT> struct OptionValue {
  EnumT value;
  llvm::StringLiteral name;
  llvm::StringLiteral description;
};

/// The modifier of an option of type EnumT that lists its values (what
/// llvm::cl::values gives, built from a table).
template <typename EnumT, size_t N> struct OptionValues {
  const OptionValue<EnumT> (&table)[N];

  template <typename Opt> void apply(Opt &option) const {
    for (const OptionValue<EnumT> &value : table)
      option.getParser().addLiteralOption(value.name, value.value,
                                          value.description);
  }

  llvm::StringRef nameOf(EnumT value) const {
    for (const OptionValue<EnumT> &entry : table)
      if (entry.value == value)
        return entry.name;
    return "";
  }
};

/// The runtime backend a program is built for.
enum class Backend { CPU, CUDA };

inline constexpr OptionValue<Backend> kBackends[] = {
    {Backend::CPU, "cpu", "the CPU runtime (OpenBLAS)"},
    {Backend::CUDA, "cuda", "the CUDA runtime (cuBLASLt, NCCL)"},
};
inline OptionValues<Backend, 2> backendValues() { return {kBackends}; }
/// "cpu" or "cuda": what dp_describe records and dpc prints.
inline llvm::StringRef nameOf(Backend backend) {
  return backendValues().nameOf(backend);
}

/// How dp-report prints the plan.
enum class ReportFormat { Table, JSON };

inline constexpr OptionValue<ReportFormat> kReportFormats[] = {
    {ReportFormat::Table, "table", "a table for people"},
    {ReportFormat::JSON, "json", "one JSON object"},
};
inline OptionValues<ReportFormat, 2> reportFormatValues() {
  return {kReportFormats};
}

/// How the materialized norm method stores its per-sample weight gradients
/// (dp-clip-plan, dpc --per-sample-rows); rowsFormatFor (CostModel.h)
/// resolves auto per weight.
enum class PerSampleRows { Auto, Compute, MXFP8 };

inline constexpr OptionValue<PerSampleRows> kPerSampleRows[] = {
    {PerSampleRows::Auto, "auto",
     "MXFP8 where the device makes bf16 rows in the fused product (the cuda "
     "backend on Hopper, dprt/fused_norms.h), else the compute type"},
    {PerSampleRows::Compute, "compute",
     "in the compute type (bf16 for bf16 models)"},
    {PerSampleRows::MXFP8, "mxfp8",
     "OCP MXFP8: e4m3 elements, one power-of-two scale per 32 (about 0.52x "
     "the bytes of bf16 rows)"},
};
inline OptionValues<PerSampleRows, 3> perSampleRowsValues() {
  return {kPerSampleRows};
}

/// The most ranks a program runs on: dp_describe records the number as an
/// int32_t.
inline constexpr int64_t kMaxRanks = std::numeric_limits<int32_t>::max();

} // namespace dpc

#endif // DPC_PASSES_OPTIONVALUES_H
