//===- SimtEmulator.cpp - CUDA thread blocks run on the host --------------===//

#include "SimtEmulator.h"

#include <ucontext.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>

namespace dpc::test::simt {

namespace {

enum class State { Runnable, AtCollective, AtBarrier, Done };
enum class Kind { None, Shuffle, Ldsm, LdsmTrans, Mma };

/// One cp.async: `bytes` from src to dst, or zeros.
struct Copy {
  void *dst;
  const void *src;
  size_t bytes;
  bool zero;
};

/// Unwinds a fiber after an error was recorded.
struct Abort {};

constexpr size_t kStackBytes = 256 * 1024;

float bf16Value(uint16_t bits) {
  uint32_t w = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

} // namespace

uint16_t roundBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f))
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

struct Thread {
  ucontext_t ctx;
  std::unique_ptr<char[]> stack;
  State state = State::Runnable;
  // The posted collective and its operands.
  Kind kind = Kind::None;
  const uint16_t *addr = nullptr;
  float value = 0.0f;
  int mask = 0;
  uint32_t a[4] = {}, b[2] = {};
  float c[4] = {};
  // Its results.
  uint32_t r[4] = {};
  float out = 0.0f;
  float d[4] = {};
  // cp.async copies not yet committed, and committed groups not yet done.
  std::vector<Copy> open;
  std::deque<std::vector<Copy>> committed;
};

class Block {
public:
  Block(const Launch &launch, const Program *program)
      : launch_(launch), program_(program), smem_(launch.smemBytes),
        threads_(size_t(program ? launch.threads : 0)) {
    for (Thread &t : threads_)
      t.stack.reset(new char[kStackBytes]);
  }

  void runBlock(int bx, int by, int bz);

  Thread &thread(int tid) { return threads_[size_t(tid)]; }
  const Options &options() const { return launch_.options; }

  /// Records the first error and unwinds the calling fiber.
  [[noreturn]] void fail(const std::string &message) {
    if (error_.empty())
      error_ = message;
    throw Abort{};
  }
  const std::string &error() const { return error_; }

  /// Called by a fiber: waits for the warp's collective or the barrier.
  void arrive(int tid, State state) {
    threads_[size_t(tid)].state = state;
    swapcontext(&threads_[size_t(tid)].ctx, &scheduler_);
  }

  void checkShared(const void *p, size_t bytes, size_t align,
                   const char *what) {
    auto *c = static_cast<const unsigned char *>(p);
    if (c < smem_.data() || c + bytes > smem_.data() + smem_.size())
      fail(std::string(what) + ": shared address outside the block's " +
           std::to_string(smem_.size()) + " bytes");
    if ((c - smem_.data()) % ptrdiff_t(align) != 0)
      fail(std::string(what) + ": shared address not aligned to " +
           std::to_string(align));
  }

  void checkGlobal(const void *p, size_t bytes, size_t align, bool write,
                   const char *what) {
    if (reinterpret_cast<uintptr_t>(p) % align != 0)
      fail(std::string(what) + ": global address not aligned to " +
           std::to_string(align));
    auto inside = [&](const std::vector<Range> &ranges) {
      auto *c = static_cast<const unsigned char *>(p);
      for (const Range &r : ranges) {
        auto *b = static_cast<const unsigned char *>(r.begin);
        if (c >= b && c + bytes <= b + r.bytes)
          return true;
      }
      return false;
    };
    if (!inside(launch_.writable) && (write || !inside(launch_.readable)))
      fail(std::string(what) + ": global address outside the buffers the " +
           "launch may " + (write ? "write" : "read"));
  }

  static void perform(const Copy &c) {
    if (c.zero)
      std::memset(c.dst, 0, c.bytes);
    else
      std::memcpy(c.dst, c.src, c.bytes);
  }

private:
  static void entry();
  void resume(int tid);
  bool advanceWarp(int warp);
  void resolve(int warp);
  [[noreturn]] void schedulerError(const std::string &message) {
    throw std::runtime_error((error_.empty() ? message : error_) + " (block " +
                             std::to_string(bx_) + "," + std::to_string(by_) +
                             "," + std::to_string(bz_) + ")");
  }

  const Launch &launch_;
  const Program *program_;
  std::vector<unsigned char> smem_;
  std::vector<Thread> threads_;
  ucontext_t scheduler_;
  int bx_ = 0, by_ = 0, bz_ = 0;
  std::string error_;
};

namespace {
thread_local Block *tlsBlock = nullptr;
thread_local int tlsTid = 0;
thread_local const Program *tlsProgram = nullptr;
thread_local unsigned char *tlsSmem = nullptr;
thread_local int tlsBx = 0, tlsBy = 0, tlsBz = 0;
} // namespace

void Block::entry() {
  Block *block = tlsBlock;
  const int tid = tlsTid;
  try {
    Ops ops(*block, tid);
    (*tlsProgram)(ops, tlsBx, tlsBy, tlsBz, tid, tlsSmem);
  } catch (const Abort &) {
  } catch (const std::exception &e) {
    if (block->error_.empty())
      block->error_ = std::string("exception: ") + e.what();
  }
  block->threads_[size_t(tid)].state = State::Done;
  // Returning switches to uc_link, the scheduler.
}

void Block::resume(int tid) {
  tlsBlock = this;
  tlsTid = tid;
  tlsProgram = program_;
  tlsSmem = smem_.data();
  tlsBx = bx_;
  tlsBy = by_;
  tlsBz = bz_;
  swapcontext(&scheduler_, &threads_[size_t(tid)].ctx);
}

void Block::runBlock(int bx, int by, int bz) {
  bx_ = bx;
  by_ = by;
  bz_ = bz;
  // Shared memory starts as NaN (bf16 and f32) to expose reads of what no
  // copy wrote.
  std::memset(smem_.data(), 0xff, smem_.size());
  for (Thread &t : threads_) {
    t.state = State::Runnable;
    t.kind = Kind::None;
    t.open.clear();
    t.committed.clear();
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = t.stack.get();
    t.ctx.uc_stack.ss_size = kStackBytes;
    t.ctx.uc_link = &scheduler_;
    makecontext(&t.ctx, &Block::entry, 0);
  }
  const int warps = int(threads_.size()) / 32;
  for (;;) {
    bool any = false;
    switch (launch_.options.schedule) {
    case Schedule::RoundRobin:
      for (int w = 0; w < warps; ++w)
        any |= advanceWarp(w);
      break;
    case Schedule::WarpsAscending:
      for (int w = 0; w < warps; ++w)
        while (advanceWarp(w))
          any = true;
      break;
    case Schedule::WarpsDescending:
      for (int w = warps - 1; w >= 0; --w)
        while (advanceWarp(w))
          any = true;
      break;
    }
    if (any)
      continue;
    size_t done = 0, atBarrier = 0;
    for (const Thread &t : threads_) {
      done += t.state == State::Done;
      atBarrier += t.state == State::AtBarrier;
    }
    if (done == threads_.size())
      break;
    if (atBarrier == threads_.size()) {
      for (Thread &t : threads_)
        t.state = State::Runnable;
      continue;
    }
    schedulerError(done ? "a barrier that some threads never reach (they "
                          "exited)"
                        : "deadlock");
  }
  if (!error_.empty())
    schedulerError(error_);
  for (const Thread &t : threads_) {
    bool pending = !t.open.empty();
    for (const std::vector<Copy> &g : t.committed)
      pending |= !g.empty();
    if (pending)
      schedulerError("a thread exited with cp.async copies never waited for");
  }
}

bool Block::advanceWarp(int warp) {
  bool any = false;
  for (int lane = 0; lane < 32; ++lane)
    if (threads_[size_t(warp * 32 + lane)].state == State::Runnable) {
      resume(warp * 32 + lane);
      any = true;
    }
  int waiting = 0;
  for (int lane = 0; lane < 32; ++lane)
    waiting += threads_[size_t(warp * 32 + lane)].state == State::AtCollective;
  if (waiting == 32) {
    resolve(warp);
    return true;
  }
  if (waiting > 0 && !error_.empty())
    schedulerError(error_);
  if (waiting > 0)
    schedulerError("divergent warp collective: " + std::to_string(waiting) +
                   " of 32 lanes of warp " + std::to_string(warp) +
                   " wait for it");
  return any;
}

void Block::resolve(int warp) {
  Thread *lane[32];
  for (int l = 0; l < 32; ++l)
    lane[l] = &threads_[size_t(warp * 32 + l)];
  const Kind kind = lane[0]->kind;
  for (int l = 0; l < 32; ++l)
    if (lane[l]->kind != kind)
      schedulerError("lanes of warp " + std::to_string(warp) +
                     " wait for different collectives");
  switch (kind) {
  case Kind::Shuffle:
    for (int l = 0; l < 32; ++l)
      lane[l]->out = lane[l ^ lane[l]->mask]->value;
    break;
  case Kind::Ldsm:
  case Kind::LdsmTrans:
    for (int l = 0; l < 32; ++l)
      for (int m = 0; m < 4; ++m) {
        uint16_t lo, hi;
        if (kind == Kind::Ldsm) {
          const uint16_t *row = lane[m * 8 + l / 4]->addr;
          lo = row[2 * (l % 4)];
          hi = row[2 * (l % 4) + 1];
        } else {
          lo = lane[m * 8 + 2 * (l % 4)]->addr[l / 4];
          hi = lane[m * 8 + 2 * (l % 4) + 1]->addr[l / 4];
        }
        lane[l]->r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
      }
    break;
  case Kind::Mma: {
    double A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      const Thread &x = *lane[l];
      auto pair = [](double &lo, double &hi, uint32_t w) {
        lo = bf16Value(uint16_t(w & 0xffffu));
        hi = bf16Value(uint16_t(w >> 16));
      };
      pair(A[g][2 * t], A[g][2 * t + 1], x.a[0]);
      pair(A[g + 8][2 * t], A[g + 8][2 * t + 1], x.a[1]);
      pair(A[g][2 * t + 8], A[g][2 * t + 9], x.a[2]);
      pair(A[g + 8][2 * t + 8], A[g + 8][2 * t + 9], x.a[3]);
      double b0, b1, b2, b3;
      pair(b0, b1, x.b[0]);
      pair(b2, b3, x.b[1]);
      B[2 * t][g] = b0;
      B[2 * t + 1][g] = b1;
      B[2 * t + 8][g] = b2;
      B[2 * t + 9][g] = b3;
      C[g][2 * t] = x.c[0];
      C[g][2 * t + 1] = x.c[1];
      C[g + 8][2 * t] = x.c[2];
      C[g + 8][2 * t + 1] = x.c[3];
    }
    auto product = [&](int row, int col) {
      double sum = C[row][col];
      for (int k = 0; k < 16; ++k)
        sum += A[row][k] * B[k][col];
      return float(sum);
    };
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      lane[l]->d[0] = product(g, 2 * t);
      lane[l]->d[1] = product(g, 2 * t + 1);
      lane[l]->d[2] = product(g + 8, 2 * t);
      lane[l]->d[3] = product(g + 8, 2 * t + 1);
    }
    break;
  }
  case Kind::None:
    schedulerError("internal: a collective without a kind");
  }
  for (int l = 0; l < 32; ++l) {
    lane[l]->kind = Kind::None;
    lane[l]->state = State::Runnable;
  }
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

void Ops::syncThreads() { block_.arrive(tid_, State::AtBarrier); }

void Ops::cpAsync16(void *dst, const void *src, bool valid) {
  block_.checkShared(dst, 16, 16, "cp.async 16");
  if (valid)
    block_.checkGlobal(src, 16, 16, false, "cp.async 16");
  Copy c{dst, src, 16, !valid};
  if (block_.options().copies == CopyTiming::Eager)
    Block::perform(c);
  else
    block_.thread(tid_).open.push_back(c);
}

void Ops::cpAsync4(void *dst, const void *src, bool valid) {
  block_.checkShared(dst, 4, 4, "cp.async 4");
  if (valid)
    block_.checkGlobal(src, 4, 4, false, "cp.async 4");
  Copy c{dst, src, 4, !valid};
  if (block_.options().copies == CopyTiming::Eager)
    Block::perform(c);
  else
    block_.thread(tid_).open.push_back(c);
}

void Ops::commit() {
  Thread &t = block_.thread(tid_);
  t.committed.push_back(std::move(t.open));
  t.open.clear();
}

void Ops::waitGroupN(int n) {
  Thread &t = block_.thread(tid_);
  while (t.committed.size() > size_t(n)) {
    for (const Copy &c : t.committed.front())
      Block::perform(c);
    t.committed.pop_front();
  }
}

void Ops::ldsm(uint32_t (&r)[4], const uint16_t *p) {
  block_.checkShared(p, 16, 16, "ldmatrix");
  Thread &t = block_.thread(tid_);
  t.kind = Kind::Ldsm;
  t.addr = p;
  block_.arrive(tid_, State::AtCollective);
  std::memcpy(r, t.r, sizeof(r));
}

void Ops::ldsmTrans(uint32_t (&r)[4], const uint16_t *p) {
  block_.checkShared(p, 16, 16, "ldmatrix.trans");
  Thread &t = block_.thread(tid_);
  t.kind = Kind::LdsmTrans;
  t.addr = p;
  block_.arrive(tid_, State::AtCollective);
  std::memcpy(r, t.r, sizeof(r));
}

void Ops::mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Thread &t = block_.thread(tid_);
  t.kind = Kind::Mma;
  std::memcpy(t.a, a, sizeof(t.a));
  t.b[0] = b0;
  t.b[1] = b1;
  std::memcpy(t.c, d, sizeof(t.c));
  block_.arrive(tid_, State::AtCollective);
  std::memcpy(d, t.d, sizeof(t.d));
}

float Ops::shflXor(float v, int mask) {
  Thread &t = block_.thread(tid_);
  t.kind = Kind::Shuffle;
  t.value = v;
  t.mask = mask;
  block_.arrive(tid_, State::AtCollective);
  return t.out;
}

float Ops::exp2(float x) { return std::exp2(x); }
float Ops::log2(float x) { return std::log2(x); }

uint32_t Ops::packBf16(float lo, float hi) {
  return uint32_t(roundBf16(lo)) | (uint32_t(roundBf16(hi)) << 16);
}

float Ops::bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void Ops::load128(uint32_t (&r)[4], const uint16_t *p) {
  block_.checkGlobal(p, 16, 16, false, "load128");
  std::memcpy(r, p, 16);
}

float Ops::loadF32(const float *p) {
  block_.checkGlobal(p, 4, 4, false, "loadF32");
  return *p;
}

void Ops::store32(uint16_t *p, uint32_t v) {
  block_.checkGlobal(p, 4, 4, true, "store32");
  std::memcpy(p, &v, 4);
}

void Ops::storeF32(float *p, float v) {
  block_.checkGlobal(p, 4, 4, true, "storeF32");
  *p = v;
}

//===----------------------------------------------------------------------===//
// Launches
//===----------------------------------------------------------------------===//

void run(const Launch &launch, const Program &program) {
  if (launch.threads <= 0 || launch.threads % 32 != 0)
    throw std::runtime_error("threads must be a positive multiple of 32");
  Block block(launch, &program);
  for (int z = 0; z < launch.gridZ; ++z)
    for (int y = 0; y < launch.gridY; ++y)
      for (int x = 0; x < launch.gridX; ++x)
        block.runBlock(x, y, z);
}

void runElements(const Launch &launch, int64_t count,
                 const std::function<void(Ops &ops, int64_t n)> &element) {
  Block block(launch, nullptr);
  Ops ops(block, 0);
  try {
    for (int64_t n = 0; n < count; ++n)
      element(ops, n);
  } catch (const Abort &) {
    throw std::runtime_error(block.error() + " (element program)");
  }
}

} // namespace dpc::test::simt
