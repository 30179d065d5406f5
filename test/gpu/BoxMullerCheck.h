//===- BoxMullerCheck.h - The GPU's Box-Muller against libm's ---*- C++ -*-===//
//
// rng.h's device Box-Muller (boxMullerPairBitsF32) takes logf's, sqrtf's and
// sincospif's steps without their branches for arguments its uniforms never
// are. This compares it, on the GPU, with those functions for every one of
// the 2^24 values each uniform can take.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_GPU_BOXMULLERCHECK_H
#define DPC_TEST_GPU_BOXMULLERCHECK_H

#include <cstdint>

namespace dpc::gpucheck {

/// Differences in bits between the device Box-Muller's pieces and
/// sqrtf(-2 logf(u)) and sincospif(2 v).
struct BoxMullerMismatches {
  uint64_t radius = 0; ///< of the 2^24 values of u
  uint64_t sine = 0;   ///< of the 2^24 values of v
  uint64_t cosine = 0; ///< of the 2^24 values of v
  uint64_t pairs = 0;  ///< of `pairsTried` (u, v) pairs, either output
  uint64_t pairsTried = 0;
  uint32_t firstBits = 0; ///< the first 32-bit word that differed, if any
};

/// Runs the comparison on the current device.
BoxMullerMismatches boxMullerMismatches();

} // namespace dpc::gpucheck

#endif // DPC_TEST_GPU_BOXMULLERCHECK_H
