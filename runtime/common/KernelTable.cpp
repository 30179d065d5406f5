//===- KernelTable.cpp - kernels.def against the declarations -------------===//
//
// Holds no code: it compiles only if every entry of dprt/kernels.def has
// exactly the parameter types of its declaration (kernels.inc in both
// backends' namespaces, program.h for describe_*). The compiler verifies
// dprt.call against the same table, so the two cannot drift apart.
//
//===----------------------------------------------------------------------===//

#include "dprt/kernels.h"
#include "dprt/program.h"

#include <cstdint>
#include <type_traits>

namespace dprt {
namespace kernel_kinds {
// The C++ type of each parameter kind of kernels.def.
using in = const void *;
using out = void *;
using inOrNull = const void *;
using outOrNull = void *;
using tokens = const int32_t *;
using offset = int64_t;
using offsetOrNone = int64_t;
using planned = int64_t;
using dtype = DType;
using activation = Activation;
using reduction = Reduction;
using clipMode = ClipMode;
using noiseGenerator = NoiseGeneratorKind;
using optimizer = OptimizerKind;
using sampling = SamplingKind;
using inputRole = InputRole;
using i64 = int64_t;
using i32 = int32_t;
using f64 = double;
using flag = bool;
using str = const char *;
using stream = int32_t;
using microstep = MicrostepFn;

#define DPRT_KERNEL(name, ...)                                                 \
  static_assert(                                                               \
      std::is_same_v<decltype(&cpu::name), void (*)(Rank *, __VA_ARGS__)>,     \
      "dprt::cpu::" #name " differs from its kernels.def entry");              \
  static_assert(                                                               \
      std::is_same_v<decltype(&cuda::name), void (*)(Rank *, __VA_ARGS__)>,    \
      "dprt::cuda::" #name " differs from its kernels.def entry");
#define DPRT_EVENT(name, ...) DPRT_KERNEL(name, __VA_ARGS__)
#define DPRT_DESCRIBE(name, ...)                                               \
  static_assert(std::is_same_v<decltype(&dprt::name),                          \
                               void (*)(ProgramSpec *, __VA_ARGS__)>,          \
                "dprt::" #name " differs from its kernels.def entry");
#include "dprt/kernels.def"
} // namespace kernel_kinds
} // namespace dprt
