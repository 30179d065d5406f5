//===- SimtEmulator.h - CUDA thread blocks run on the host ------*- C++ -*-===//
//
// Runs block programs written against the machine operations of
// runtime/cuda/FlashAttention.h on the CPU, so that the fused attention's
// device code is tested where no GPU is present. Each thread of a block is a
// fiber (ucontext) with its own stack; a fiber runs until it reaches a warp
// collective (ldmatrix, mma.sync, shuffle) or a block barrier, and the
// collective is carried out once all 32 lanes of the warp have posted their
// operands. The operations follow the PTX ISA:
//   ldmatrix.m8n8.x4[.trans].b16: lane 8m + r gives the address of row r of
//     matrix m; register m of lane l holds row l/4, elements 2(l%4) and
//     2(l%4)+1 of matrix m (with .trans: column l/4, rows 2(l%4), 2(l%4)+1);
//     the lower-indexed element in the low 16 bits.
//   mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32: with g = lane/4,
//     t = lane%4, A registers hold (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..),
//     (g+8, 2t+8..); B registers (k = 2t..2t+1, n = g), (k = 2t+8.., n = g);
//     C/D (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
//   cp.async: copies complete at cp.async.wait_group (CopyTiming::Deferred,
//     as late as the hardware may) or at once (Eager, as early as it may);
//     a zero-size source fills zeros.
// Hazards surface as wrong results: a missing wait reads stale shared memory
// under Deferred; a missing barrier lets one warp overwrite a buffer another
// still reads when warps run one after another (WarpsAscending,
// WarpsDescending). Shared memory starts as NaN; every access is checked
// against the block's shared memory and the global ranges of the launch, and
// divergent collectives, barriers that some thread never reaches and
// deadlocks are errors.
//
//===----------------------------------------------------------------------===//

#ifndef DPC_TEST_SIMT_EMULATOR_H
#define DPC_TEST_SIMT_EMULATOR_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dpc::test::simt {

enum class Schedule {
  RoundRobin,      ///< every warp advances one collective at a time
  WarpsAscending,  ///< warp 0 runs to its next barrier, then warp 1, ...
  WarpsDescending, ///< the last warp first
};

enum class CopyTiming { Deferred, Eager };

struct Options {
  Schedule schedule = Schedule::RoundRobin;
  CopyTiming copies = CopyTiming::Deferred;
};

/// A range of global memory a launch may read or write.
struct Range {
  const void *begin;
  size_t bytes;
};

class Block;

/// The machine operations of FlashAttention.h for one emulated thread.
class Ops {
public:
  Ops(Block &block, int tid) : block_(block), tid_(tid) {}

  void syncThreads();
  void cpAsync16(void *dst, const void *src, bool valid);
  void cpAsync4(void *dst, const void *src, bool valid);
  void commit();
  template <int N> void waitGroup() { waitGroupN(N); }
  void ldsm(uint32_t (&r)[4], const uint16_t *p);
  void ldsmTrans(uint32_t (&r)[4], const uint16_t *p);
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
  float shflXor(float v, int mask);
  float exp2(float x);
  float log2(float x);
  uint32_t packBf16(float lo, float hi);
  float bitsToFloat(uint32_t bits);
  void load128(uint32_t (&r)[4], const uint16_t *p);
  float loadF32(const float *p);
  void store32(uint16_t *p, uint32_t v);
  void storeF32(float *p, float v);

private:
  void waitGroupN(int n);
  Block &block_;
  int tid_;
};

using Program = std::function<void(Ops &ops, int blockX, int blockY, int blockZ,
                                   int tid, unsigned char *smem)>;

struct Launch {
  int gridX = 1, gridY = 1, gridZ = 1;
  int threads = 128; ///< a multiple of 32
  size_t smemBytes = 0;
  std::vector<Range> readable, writable;
  Options options;
};

/// Runs `program` for every block of the grid, blocks one after another.
/// Throws std::runtime_error with the first error found.
void run(const Launch &launch, const Program &program);

/// A grid-stride kernel's body run once per element n < count, on the host
/// (for element-wise programs without collectives); accesses are checked.
void runElements(const Launch &launch, int64_t count,
                 const std::function<void(Ops &ops, int64_t n)> &element);

/// f32 -> bf16 bits, round to nearest even (what cvt.rn.bf16x2.f32 does).
uint16_t roundBf16(float f);

} // namespace dpc::test::simt

#endif // DPC_TEST_SIMT_EMULATOR_H
