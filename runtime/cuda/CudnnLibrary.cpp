//===- CudnnLibrary.cpp - libcudnn.so.9 opened at run time ----------------===//
//
// The cuDNN entry points the frontend calls (the undefined cudnn* symbols of
// CudnnAttention.o), each forwarding to the function of the same name in
// libcudnn.so.9. The library is opened RTLD_LOCAL, so its symbols never
// stand in for these; dlsym on its handle finds its own definitions.
//
// The frontend also compiles an experimental Blackwell RMSNorm engine that
// calls NVRTC; our graphs never reach it, but its calls must link, so the
// NVRTC functions it names forward likewise to libnvrtc.so.13, opened on
// the first call (NVRTC_ERROR_INTERNAL_ERROR where it is missing).
//
//===----------------------------------------------------------------------===//

#include "CudnnLibrary.h"

#include <cudnn.h>
#include <nvrtc.h>

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <type_traits>

// Name, parameter list, argument list of every forwarded function that
// returns cudnnStatus_t.
#define DPRT_CUDNN_STATUS_FUNCTIONS(X)                                         \
  X(cudnnCreate, (cudnnHandle_t * handle), (handle))                           \
  X(cudnnDestroy, (cudnnHandle_t handle), (handle))                            \
  X(cudnnSetStream, (cudnnHandle_t handle, cudaStream_t stream),               \
    (handle, stream))                                                          \
  X(cudnnGetStream, (cudnnHandle_t handle, cudaStream_t * stream),             \
    (handle, stream))                                                          \
  X(cudnnBackendCreateDescriptor,                                              \
    (cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t * d),         \
    (type, d))                                                                 \
  X(cudnnBackendDestroyDescriptor, (cudnnBackendDescriptor_t d), (d))          \
  X(cudnnBackendFinalize, (cudnnBackendDescriptor_t d), (d))                   \
  X(cudnnBackendSetAttribute,                                                  \
    (cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,             \
     cudnnBackendAttributeType_t type, int64_t count, const void *elements),   \
    (d, name, type, count, elements))                                          \
  X(cudnnBackendGetAttribute,                                                  \
    (cudnnBackendDescriptor_t const d, cudnnBackendAttributeName_t name,       \
     cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,      \
     void *elements),                                                          \
    (d, name, type, requested, count, elements))                               \
  X(cudnnBackendExecute,                                                       \
    (cudnnHandle_t handle, cudnnBackendDescriptor_t plan,                      \
     cudnnBackendDescriptor_t pack),                                           \
    (handle, plan, pack))

// The same for the NVRTC functions the frontend names.
#define DPRT_NVRTC_FUNCTIONS(X)                                                \
  X(nvrtcCreateProgram,                                                        \
    (nvrtcProgram * prog, const char *src, const char *name, int numHeaders,   \
     const char *const *headers, const char *const *includeNames),             \
    (prog, src, name, numHeaders, headers, includeNames))                      \
  X(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))                        \
  X(nvrtcCompileProgram,                                                       \
    (nvrtcProgram prog, int numOptions, const char *const *options),           \
    (prog, numOptions, options))                                               \
  X(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t * size), (prog, size))       \
  X(nvrtcGetCUBIN, (nvrtcProgram prog, char *cubin), (prog, cubin))            \
  X(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t * size), (prog, size))  \
  X(nvrtcGetProgramLog, (nvrtcProgram prog, char *log), (prog, log))

namespace {

/// The address of `name` in the library behind `handle`, as `pointer`'s
/// type; null where it is missing.
template <class Pointer>
void findSymbol(void *handle, Pointer &pointer, const char *name) {
  pointer = reinterpret_cast<Pointer>(dlsym(handle, name));
}

struct NvrtcFunctions {
#define DPRT_NVRTC_POINTER(name, params, args) decltype(&::name) name = nullptr;
  DPRT_NVRTC_FUNCTIONS(DPRT_NVRTC_POINTER)
#undef DPRT_NVRTC_POINTER
};

/// libnvrtc.so.13's functions, opened on first use; null where missing.
const NvrtcFunctions &nvrtc() {
  static const NvrtcFunctions functions = [] {
    NvrtcFunctions f;
    if (void *lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL)) {
#define DPRT_NVRTC_FIND(name, params, args) findSymbol(lib, f.name, #name);
      DPRT_NVRTC_FUNCTIONS(DPRT_NVRTC_FIND)
#undef DPRT_NVRTC_FIND
    }
    return f;
  }();
  return functions;
}

struct CudnnFunctions {
#define DPRT_CUDNN_POINTER(name, params, args) decltype(&::name) name = nullptr;
  DPRT_CUDNN_STATUS_FUNCTIONS(DPRT_CUDNN_POINTER)
#undef DPRT_CUDNN_POINTER
  decltype(&::cudnnGetVersion) cudnnGetVersion = nullptr;
  decltype(&::cudnnGetErrorString) cudnnGetErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) cudnnGetLastErrorString = nullptr;
};

/// Set once by loadCudnn when every function was found; read afterwards.
CudnnFunctions *loaded = nullptr;

/// Opens the library and finds every function: "" or why not.
std::string open(CudnnFunctions &f) {
  void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *error = dlerror();
    return std::string("libcudnn.so.9 not found (") +
           (error ? error : "dlopen failed") + ")";
  }
  std::string missing;
  auto find = [&](auto &pointer, const char *name) {
    findSymbol(lib, pointer, name);
    if (!pointer)
      missing += std::string(missing.empty() ? "" : ", ") + name;
  };
#define DPRT_CUDNN_FIND(name, params, args) find(f.name, #name);
  DPRT_CUDNN_STATUS_FUNCTIONS(DPRT_CUDNN_FIND)
#undef DPRT_CUDNN_FIND
  find(f.cudnnGetVersion, "cudnnGetVersion");
  find(f.cudnnGetErrorString, "cudnnGetErrorString");
  find(f.cudnnGetLastErrorString, "cudnnGetLastErrorString");
  if (!missing.empty())
    return "libcudnn.so.9 lacks " + missing;
  // The frontend's SDPA graphs need cuDNN 9.
  const size_t version = f.cudnnGetVersion();
  if (version < 90000)
    return "libcudnn.so.9 reports version " + std::to_string(version) +
           "; the cuDNN path needs 9.0 or later";
  return "";
}

} // namespace

namespace dprt::cuda {

const std::string &loadCudnn() {
  static std::once_flag once;
  static std::string declined;
  std::call_once(once, [] {
    static CudnnFunctions functions;
    declined = open(functions);
    if (declined.empty())
      loaded = &functions;
  });
  return declined;
}

} // namespace dprt::cuda

extern "C" {

#define DPRT_CUDNN_FORWARD(name, params, args)                                 \
  cudnnStatus_t CUDNNWINAPI name params {                                      \
    return loaded ? loaded->name args : CUDNN_STATUS_NOT_INITIALIZED;          \
  }
DPRT_CUDNN_STATUS_FUNCTIONS(DPRT_CUDNN_FORWARD)
#undef DPRT_CUDNN_FORWARD

size_t CUDNNWINAPI cudnnGetVersion(void) {
  return loaded ? loaded->cudnnGetVersion() : 0;
}

const char *CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  return loaded ? loaded->cudnnGetErrorString(status)
                : "libcudnn.so.9 is not loaded";
}

void CUDNNWINAPI cudnnGetLastErrorString(char *message, size_t maxSize) {
  if (loaded) {
    loaded->cudnnGetLastErrorString(message, maxSize);
  } else if (message && maxSize > 0) {
    message[0] = '\0';
  }
}

#define DPRT_NVRTC_FORWARD(name, params, args)                                 \
  nvrtcResult name params {                                                    \
    return nvrtc().name ? nvrtc().name args : NVRTC_ERROR_INTERNAL_ERROR;      \
  }
DPRT_NVRTC_FUNCTIONS(DPRT_NVRTC_FORWARD)
#undef DPRT_NVRTC_FORWARD

} // extern "C"
