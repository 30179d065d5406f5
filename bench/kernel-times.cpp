//===- kernel-times.cpp - Where a program's GPU time goes, per kernel ----===//
//
// A library to LD_PRELOAD into any CUDA program (a dpc training program, the
// GPU check): CUPTI's activity API records every kernel the GPU ran,
// CUDA-graph launches included, and at exit the library prints one table of
// kernels by total GPU time (calls, total ms, mean us, share of all kernel
// time). The device machines have no Nsight Systems; CUPTI comes with
// PyTorch's wheels (nvidia/cu13/lib or nvidia/cuda_cupti/lib).
//
//   nvcc -O2 -shared -Xcompiler -fPIC bench/kernel-times.cpp -lcupti \
//        -o kernel-times.so
//   LD_PRELOAD=$PWD/kernel-times.so LD_LIBRARY_PATH=<libcupti dir> \
//       ./program --data ... --steps 8 --quiet
//
// DPC_KERNEL_TIMES=FILE writes the table there instead of stderr;
// DPC_KERNEL_TIMES_ROWS=N prints the N largest rows (default 40).
//
//===----------------------------------------------------------------------===//

#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Totals {
  uint64_t calls = 0, ns = 0;
};

std::mutex mutex;
std::map<std::string, Totals> *kernels = new std::map<std::string, Totals>;
uint64_t first = UINT64_MAX, last = 0;

void check(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS)
    return;
  const char *text = "?";
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "kernel-times: %s: %s\n", what, text);
}

/// The demangled name without its parameter list (template arguments kept:
/// they tell the kernels of one template apart).
std::string nameOf(const char *mangled) {
  int status = 0;
  char *plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain ? plain : mangled;
  std::free(plain);
  // Shorter rows: the namespaces every DPC kernel shares.
  for (const std::string &noise :
       {std::string("dprt::cuda::(anonymous namespace)::"),
        std::string("dprt::cuda::")})
    for (size_t at; (at = name.find(noise)) != std::string::npos;)
      name.erase(at, noise.size());
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (name[i] == '(' && depth == 0 &&
             name.compare(i, 21, "(anonymous namespace)") != 0)
      return name.substr(0, i);
  }
  return name;
}

void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *maxRecords) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t *>(std::aligned_alloc(8, *size));
  *maxRecords = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buffer, size_t,
                        size_t valid) {
  CUpti_Activity *record = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    // Memsets and copies take the GPU's memory bandwidth as kernels do (a
    // zeroed gradient is a memset), so they are rows of their own.
    std::string name;
    uint64_t start = 0, end = 0;
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto *k = reinterpret_cast<CUpti_ActivityKernel10 *>(record);
      name = nameOf(k->name);
      start = k->start;
      end = k->end;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto *m = reinterpret_cast<CUpti_ActivityMemset4 *>(record);
      name = "[memset]";
      start = m->start;
      end = m->end;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *m = reinterpret_cast<CUpti_ActivityMemcpy6 *>(record);
      name = "[memcpy]";
      start = m->start;
      end = m->end;
    } else {
      continue;
    }
    Totals &t = (*kernels)[name];
    ++t.calls;
    t.ns += end - start;
    first = std::min<uint64_t>(first, start);
    last = std::max<uint64_t>(last, end);
  }
  std::free(buffer);
}

__attribute__((constructor)) void start() {
  check(cuptiActivityRegisterCallbacks(requested, completed),
        "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        "cuptiActivityEnable");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable");
}

__attribute__((destructor)) void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<std::pair<std::string, Totals>> rows(kernels->begin(),
                                                   kernels->end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ns > b.second.ns;
  });
  uint64_t total = 0, calls = 0;
  for (const auto &r : rows) {
    total += r.second.ns;
    calls += r.second.calls;
  }
  // A process that ran no kernel (one of Inductor's compile workers, which
  // inherit LD_PRELOAD) must not overwrite the table of the one that did.
  if (calls == 0)
    return;
  FILE *out = stderr;
  if (const char *path = std::getenv("DPC_KERNEL_TIMES"))
    if (FILE *f = std::fopen(path, "w"))
      out = f;
  size_t limit = 40;
  if (const char *n = std::getenv("DPC_KERNEL_TIMES_ROWS"))
    limit = std::strtoul(n, nullptr, 10);
  std::fprintf(out,
               "kernel-times: %llu kernels, %.3f ms of kernel time in a "
               "%.3f ms span (first kernel start to last end)\n",
               (unsigned long long)calls, total / 1e6,
               last > first ? (last - first) / 1e6 : 0.0);
  std::fprintf(out, "| kernel | calls | total ms | mean us | share |\n");
  std::fprintf(out, "|---|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size() && i < limit; ++i) {
    const auto &[name, t] = rows[i];
    std::string shown = name.size() > 110 ? name.substr(0, 107) + "..." : name;
    std::fprintf(out, "| `%s` | %llu | %.3f | %.1f | %.1f %% |\n",
                 shown.c_str(), (unsigned long long)t.calls, t.ns / 1e6,
                 t.ns / 1e3 / double(t.calls), 100.0 * t.ns / double(total));
  }
  if (out != stderr)
    std::fclose(out);
}

} // namespace
