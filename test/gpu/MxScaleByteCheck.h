//===- MxScaleByteCheck.h - The branch-free MXFP8 scale byte ----*- C++ -*-===//
//
// The CUDA backend's MXFP8 quantizers take a block's scale byte from
// mxScaleByte (cuda/Mxfp8.cuh), a carry into the exponent field in place of
// the rule's branches. This compares it, on the GPU, with the rule written
// out, for every finite amax >= 0.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_MXSCALEBYTECHECK_H
#define DPC_TEST_GPU_MXSCALEBYTECHECK_H

#include <cstdint>

namespace dpc::gpucheck {

struct MxScaleByteMismatches {
  uint64_t differ = 0;    ///< amax values where the two disagree
  uint64_t tried = 0;     ///< 0x7F800000: every finite amax >= 0
  uint32_t firstBits = 0; ///< an amax that differed, if any
};

/// Runs the comparison on the current device.
MxScaleByteMismatches mxScaleByteMismatches();

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_MXSCALEBYTECHECK_H
