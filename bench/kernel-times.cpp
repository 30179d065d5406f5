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
// A second table lists where the GPU sat idle: the gaps between one piece
// of work's end and the next one's start (no kernel, memset or copy
// running), by the pair of names around them, largest total first. Gaps
// under 5 us (a graph's kernels back to back) are summed in one row. Run a
// program for two step counts and subtract (bench/kernel-times-steady.py)
// to get a step's gaps in the steady state, or count from a marker:
// DPC_KERNEL_TIMES_MARK=NAME DPC_KERNEL_TIMES_LAST=K counts only the work
// from the K-th last start of a kernel whose name contains NAME on (a
// kernel that runs once a step, such as the embedding's gatherRowsKernel:
// the tables then cover the last K - 1 whole steps and what followed them).
// DPC_KERNEL_TIMES_BYTES=1 names memsets and copies with their sizes.
//
//===----------------------------------------------------------------------===//

#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

struct Totals {
  uint64_t calls = 0, ns = 0;
};

/// One piece of GPU work, for the idle gaps between them.
struct Interval {
  uint64_t start, end;
  const std::string *name; ///< one of `names`
};

std::mutex mutex;
/// The names of the work seen (the intervals point into it).
std::set<std::string> *names = new std::set<std::string>;
std::vector<Interval> *intervals = new std::vector<Interval>;

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

/// " N B" with DPC_KERNEL_TIMES_BYTES=1, else nothing.
std::string bytesOf(uint64_t bytes) {
  static const bool shown = [] {
    const char *v = std::getenv("DPC_KERNEL_TIMES_BYTES");
    return v && *v == '1';
  }();
  return shown ? " " + std::to_string(bytes) + " B" : std::string();
}

std::string shorten(const std::string &name, size_t most) {
  return name.size() > most ? name.substr(0, most - 3) + "..." : name;
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
      name = "[memset" + bytesOf(m->bytes) + "]";
      start = m->start;
      end = m->end;
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto *m = reinterpret_cast<CUpti_ActivityMemcpy6 *>(record);
      name = "[memcpy" + bytesOf(m->bytes) + "]";
      start = m->start;
      end = m->end;
    } else {
      continue;
    }
    intervals->push_back({start, end, &*names->insert(name).first});
  }
  std::free(buffer);
}

/// The idle gaps of the GPU: time in the span that no recorded work
/// covers, summed by the names of the work that ended before the gap and
/// the work that started after it.
void printGaps(FILE *out, const std::vector<Interval> &window) {
  constexpr uint64_t kShortNs = 5000;
  std::map<std::string, Totals> gaps;
  Totals shortGaps, all;
  uint64_t busyUntil = 0;
  const std::string *before = nullptr;
  for (const Interval &work : window) {
    if (before && work.start > busyUntil) {
      const uint64_t ns = work.start - busyUntil;
      Totals &row = ns < kShortNs
                        ? shortGaps
                        : gaps[*before + "` -> `" + *work.name];
      ++row.calls;
      row.ns += ns;
      ++all.calls;
      all.ns += ns;
    }
    if (work.end >= busyUntil) {
      busyUntil = work.end;
      before = work.name;
    }
  }
  gaps["(gaps under 5 us)"] = shortGaps;
  std::vector<std::pair<std::string, Totals>> rows(gaps.begin(), gaps.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ns > b.second.ns;
  });
  std::fprintf(out, "\nkernel-times: the GPU idle %.3f ms in %llu gaps\n",
               all.ns / 1e6, (unsigned long long)all.calls);
  std::fprintf(out, "| gap after -> before | gaps | total ms | mean us |\n");
  std::fprintf(out, "|---|---|---|---|\n");
  for (size_t i = 0; i < rows.size() && i < 30; ++i) {
    const auto &[pair, t] = rows[i];
    if (t.calls == 0)
      continue;
    std::fprintf(out, "| `idle: %s` | %llu | %.3f | %.1f |\n",
                 shorten(pair, 200).c_str(), (unsigned long long)t.calls,
                 t.ns / 1e6, t.ns / 1e3 / double(t.calls));
  }
}

__attribute__((constructor)) void start() {
  check(cuptiActivityRegisterCallbacks(requested, completed),
        "cuptiActivityRegisterCallbacks");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
        "cuptiActivityEnable");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "cuptiActivityEnable");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "cuptiActivityEnable");
}

/// With DPC_KERNEL_TIMES_BYTES=1: what runs before and after each memset,
/// counted, so that the call that makes them can be told.
void printMemsetNeighbours(FILE *out, const std::vector<Interval> &window) {
  if (bytesOf(0).empty())
    return;
  std::map<std::string, uint64_t> counts;
  for (size_t i = 1; i + 1 < window.size(); ++i)
    if (window[i].name->rfind("[memset", 0) == 0)
      ++counts[shorten(*window[i - 1].name, 60) + "` -> `" + *window[i].name +
               "` -> `" + shorten(*window[i + 1].name, 60)];
  std::vector<std::pair<std::string, uint64_t>> rows(counts.begin(),
                                                     counts.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto &a, const auto &b) { return a.second > b.second; });
  std::fprintf(out, "\nkernel-times: memsets between\n");
  for (size_t i = 0; i < rows.size() && i < 30; ++i)
    std::fprintf(out, "  %6llu  `%s`\n", (unsigned long long)rows[i].second,
                 rows[i].first.c_str());
}

/// With a marker: the gaps of 20 us or more in the last whole step (from
/// the marker's second-to-last start to its last), in order.
void printLastStep(FILE *out, const std::vector<Interval> &window,
                   const char *mark) {
  std::vector<size_t> marks;
  for (size_t i = 0; i < window.size(); ++i)
    if (window[i].name->find(mark) != std::string::npos)
      marks.push_back(i);
  if (marks.size() < 2)
    return;
  const size_t from = marks[marks.size() - 2], to = marks.back();
  const uint64_t begin = window[from].start;
  std::fprintf(out,
               "\nkernel-times: the last whole step, %.3f ms: its gaps of "
               "20 us or more (ms from its start, us)\n",
               (window[to].start - begin) / 1e6);
  uint64_t busyUntil = window[from].end;
  for (size_t i = from + 1; i <= to; ++i) {
    const Interval &work = window[i];
    if (work.start > busyUntil && work.start - busyUntil >= 20000)
      std::fprintf(out, "  at %8.3f  %8.1f us  before `%s`\n",
                   (busyUntil - begin) / 1e6,
                   (work.start - busyUntil) / 1e3,
                   shorten(*work.name, 80).c_str());
    busyUntil = std::max(busyUntil, work.end);
  }
}

/// The work counted: all of it, or from the marker on (above).
std::vector<Interval> countedWork(FILE *out) {
  std::sort(intervals->begin(), intervals->end(),
            [](const Interval &a, const Interval &b) {
              return a.start < b.start;
            });
  const char *mark = std::getenv("DPC_KERNEL_TIMES_MARK");
  if (!mark || !*mark)
    return *intervals;
  const char *lastText = std::getenv("DPC_KERNEL_TIMES_LAST");
  const long last = lastText ? std::strtol(lastText, nullptr, 10) : 2;
  std::vector<size_t> marks;
  for (size_t i = 0; i < intervals->size(); ++i)
    if ((*intervals)[i].name->find(mark) != std::string::npos)
      marks.push_back(i);
  const size_t from =
      marks.size() >= size_t(last) && last > 0 ? marks[marks.size() - last] : 0;
  std::fprintf(out,
               "kernel-times: from the last %ld starts of `%s` on (%zu in "
               "all)\n",
               last, mark, marks.size());
  return std::vector<Interval>(intervals->begin() + from, intervals->end());
}

__attribute__((destructor)) void finish() {
  cuptiActivityFlushAll(1);
  std::lock_guard<std::mutex> lock(mutex);
  // A process that ran no kernel (one of Inductor's compile workers, which
  // inherit LD_PRELOAD) must not overwrite the table of the one that did.
  if (intervals->empty())
    return;
  FILE *out = stderr;
  if (const char *path = std::getenv("DPC_KERNEL_TIMES"))
    if (FILE *f = std::fopen(path, "w"))
      out = f;
  const std::vector<Interval> window = countedWork(out);
  uint64_t first = UINT64_MAX, last = 0;
  std::map<std::string, Totals> byName;
  for (const Interval &work : window) {
    Totals &t = byName[*work.name];
    ++t.calls;
    t.ns += work.end - work.start;
    first = std::min(first, work.start);
    last = std::max(last, work.end);
  }
  std::vector<std::pair<std::string, Totals>> rows(byName.begin(),
                                                   byName.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.ns > b.second.ns;
  });
  uint64_t total = 0, calls = 0;
  for (const auto &r : rows) {
    total += r.second.ns;
    calls += r.second.calls;
  }
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
    std::fprintf(out, "| `%s` | %llu | %.3f | %.1f | %.1f %% |\n",
                 shorten(name, 110).c_str(), (unsigned long long)t.calls, t.ns / 1e6,
                 t.ns / 1e3 / double(t.calls), 100.0 * t.ns / double(total));
  }
  printGaps(out, window);
  printMemsetNeighbours(out, window);
  if (const char *mark = std::getenv("DPC_KERNEL_TIMES_MARK"))
    if (*mark)
      printLastStep(out, window, mark);
  if (out != stderr)
    std::fclose(out);
}

} // namespace
