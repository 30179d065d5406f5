//===- Check.cpp - Shared pieces of dpc-gpu-check -------------------------===//

#include "Check.h"

#include "cpu/Mxfp8.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace dpc::gpucheck {

void cudaCheck(cudaError_t status, const char *call) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(call) + ": " +
                             cudaGetErrorString(status));
}

namespace {

/// Value i of elements of type dt at `bytes` (MXFP8: rows of `row`
/// elements, each its elements then its scales, types.h).
double valueAt(DType dt, const uint8_t *bytes, int64_t row, int64_t i) {
  switch (dt) {
  case DType::F64:
    return reinterpret_cast<const double *>(bytes)[i];
  case DType::F32:
    return reinterpret_cast<const float *>(bytes)[i];
  case DType::BF16:
    return bf16ToFloat(reinterpret_cast<const uint16_t *>(bytes)[i]);
  case DType::MXFP8:
    return dprt::cpu::load(dprt::cpu::MxRows(bytes, row), i);
  }
  return 0;
}

} // namespace

Buffer::Buffer(DType dt, int64_t n, int64_t misalign, int64_t row)
    : dt_(dt), n_(n), row_(row > 0 ? row : n),
      host_(size_t(dprt::storageBytes(dt, n))) {
  if (dt == DType::MXFP8 && (row_ % dprt::kMxBlock != 0 || n % row_ != 0))
    throw std::invalid_argument(
        "an MXFP8 buffer holds whole rows of whole blocks of 32");
  size_t bytes = host_.size() + size_t(misalign * dprt::sizeOf(dt)) + 256;
  cudaCheck(cudaMalloc(&base_, bytes), "cudaMalloc(Buffer)");
  dev_ = static_cast<char *>(base_) + misalign * dprt::sizeOf(dt);
}

Buffer::~Buffer() { cudaFree(base_); }

double Buffer::get(int64_t i) const {
  return valueAt(dt_, host_.data(), row_, i);
}

void Buffer::set(int64_t i, double v) {
  uint8_t *p = host_.data();
  switch (dt_) {
  case DType::F64:
    reinterpret_cast<double *>(p)[i] = v;
    return;
  case DType::F32:
    reinterpret_cast<float *>(p)[i] = float(v);
    return;
  case DType::BF16:
    reinterpret_cast<uint16_t *>(p)[i] = floatToBf16(float(v));
    return;
  case DType::MXFP8: {
    // Under the block's scale (fill sets the scales); a value that is not
    // finite makes the block NaN.
    const int64_t b = i / row_, j = i - b * row_;
    uint8_t *rowBytes = p + b * dprt::storageBytes(DType::MXFP8, row_);
    uint8_t &scale = rowBytes[row_ + j / dprt::kMxBlock];
    if (!std::isfinite(v) || scale == 0xFF) {
      scale = 0xFF;
      std::fill_n(rowBytes + j / dprt::kMxBlock * dprt::kMxBlock,
                  dprt::kMxBlock, uint8_t(0x7F));
      return;
    }
    rowBytes[j] =
        dprt::cpu::floatToE4m3(float(std::ldexp(v, 127 - int(scale))));
    return;
  }
  }
}

void Buffer::fill(const std::function<double()> &draw) {
  if (dt_ == DType::MXFP8) {
    std::vector<float> v(static_cast<size_t>(n_));
    for (float &e : v)
      e = float(draw());
    const int64_t stride = dprt::storageBytes(DType::MXFP8, row_);
    for (int64_t b = 0; b < n_ / row_; ++b)
      dprt::cpu::quantizeMx(v.data() + b * row_, row_,
                            host_.data() + b * stride,
                            host_.data() + b * stride + row_);
  } else {
    for (int64_t i = 0; i < n_; ++i)
      set(i, draw());
  }
  upload();
}

void Buffer::randn(std::mt19937_64 &rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  fill([&] { return normal(rng); });
}

void Buffer::uniform(std::mt19937_64 &rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  fill([&] { return u(rng); });
}

void Buffer::poison() {
  std::fill(host_.begin(), host_.end(), 0xff);
  cudaCheck(cudaMemset(dev_, 0xff, host_.size()), "cudaMemset(poison)");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void Buffer::upload() {
  cudaCheck(
      cudaMemcpy(dev_, host_.data(), host_.size(), cudaMemcpyHostToDevice),
      "cudaMemcpy(upload)");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

std::vector<double> Buffer::download() const {
  std::vector<uint8_t> bytes(host_.size());
  cudaCheck(
      cudaMemcpy(bytes.data(), dev_, bytes.size(), cudaMemcpyDeviceToHost),
      "cudaMemcpy(download)");
  std::vector<double> out(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i)
    out[size_t(i)] = valueAt(dt_, bytes.data(), row_, i);
  return out;
}

std::vector<double> Buffer::hostValues() const {
  std::vector<double> out(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i)
    out[size_t(i)] = get(i);
  return out;
}

IntBuffer::IntBuffer(int64_t n) : host_(size_t(n)) {
  cudaCheck(cudaMalloc(&dev_, size_t(n > 0 ? n : 1) * sizeof(int32_t)),
            "cudaMalloc(IntBuffer)");
}

IntBuffer::~IntBuffer() { cudaFree(dev_); }

void IntBuffer::upload() {
  cudaCheck(cudaMemcpy(dev_, host_.data(), host_.size() * sizeof(int32_t),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy(IntBuffer)");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void Report::add(const Row &row) {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.push_back(row);
  // Progress, so that a crash or a hang still shows what ran.
  std::printf("%s %s %s [%s] rel=%.1e%s%s\n", row.pass ? "PASS" : "FAIL",
              row.kernel.c_str(), row.dtype.c_str(), row.shape.c_str(), row.rel,
              row.note.empty() ? "" : " ", row.note.c_str());
  std::fflush(stdout);
}

void Report::addTiming(const Timing &t) {
  std::lock_guard<std::mutex> lock(mutex_);
  timings_.push_back(t);
  std::printf("TIME %-34s %-5s %-34s %10.1f us %8.1f %s\n", t.kernel.c_str(),
              t.dtype.c_str(), t.shape.c_str(), t.microseconds, t.rate,
              t.unit.c_str());
  std::fflush(stdout);
}

namespace {

void printRows(std::FILE *out, const std::vector<Row> &rows, bool failedOnly) {
  std::fprintf(out, "%-36s %-5s %-36s %20s %10s %10s %7s %s\n", "kernel",
               "dtype", "shape", "seed", "max|g-c|", "rel", "tol", "result");
  for (const Row &r : rows)
    if (!failedOnly || !r.pass)
      std::fprintf(out, "%-36s %-5s %-36s %20llu %10.3e %10.3e %7.0e %s%s%s\n",
                   r.kernel.c_str(), r.dtype.c_str(), r.shape.c_str(),
                   (unsigned long long)r.seed, r.maxAbs, r.rel, r.tol,
                   r.pass ? "PASS" : "FAIL", r.note.empty() ? "" : "  ",
                   r.note.c_str());
}

void printTimings(std::FILE *out, const std::vector<Timing> &timings) {
  if (timings.empty())
    return;
  std::fprintf(out, "\n%-34s %-5s %-34s %10s %10s\n", "kernel (timed)", "dtype",
               "shape", "median us", "rate");
  for (const Timing &t : timings)
    std::fprintf(out, "%-34s %-5s %-34s %10.1f %10.1f %s\n", t.kernel.c_str(),
                 t.dtype.c_str(), t.shape.c_str(), t.microseconds, t.rate,
                 t.unit.c_str());
}

} // namespace

int Report::print() {
  std::lock_guard<std::mutex> lock(mutex_);
  int failed = 0;
  for (const Row &r : rows_)
    failed += !r.pass;
  // Under the GPU machine's $OUT the whole table goes to a file and the
  // output ends with what must fit in the reply: failures and timings.
  const char *dir = std::getenv("OUT");
  const char *rank = std::getenv("RANK");
  std::string path =
      dir && *dir
          ? std::string(dir) + "/gpu-check-table" +
                (rank && *rank ? std::string("-rank") + rank : "") + ".txt"
          : std::string();
  std::FILE *file = path.empty() ? nullptr : std::fopen(path.c_str(), "a");
  if (file) {
    printRows(file, rows_, false);
    printTimings(file, timings_);
    std::fprintf(file, "\n%zu checks, %d failed\n", rows_.size(), failed);
    std::fclose(file);
    std::printf("\nfull table: %s\n", path.c_str());
    if (failed) {
      std::printf("\nfailed checks:\n");
      printRows(stdout, rows_, true);
    }
  } else {
    std::printf("\n");
    printRows(stdout, rows_, false);
  }
  printTimings(stdout, timings_);
  std::printf("\n%zu checks, %d failed\n", rows_.size(), failed);
  std::fflush(stdout);
  return failed;
}

std::string capturedCallLabel(int call) {
  return "call " + std::to_string(call) +
         (call == 1   ? " (warm-up)"
          : call == 2 ? " (capture)"
                      : " (replay)");
}

Row compareValues(const std::vector<double> &gpu,
                  const std::vector<double> &cpu, double tol) {
  Row row;
  row.tol = tol;
  if (gpu.size() != cpu.size()) {
    row.note = "size mismatch";
    return row;
  }
  double diff2 = 0, ref2 = 0;
  int64_t bad = 0, firstBad = -1;
  for (size_t i = 0; i < gpu.size(); ++i) {
    double g = gpu[i], c = cpu[i];
    if (std::isnan(c) && std::isnan(g))
      continue;
    if (!std::isfinite(g) || !std::isfinite(c)) {
      if (!(g == c)) {
        if (firstBad < 0)
          firstBad = int64_t(i);
        ++bad;
      }
      continue;
    }
    double d = std::fabs(g - c);
    row.maxAbs = std::max(row.maxAbs, d);
    diff2 += d * d;
    ref2 += c * c;
  }
  row.rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  row.pass = bad == 0 && (tol == 0 ? row.maxAbs == 0 : row.rel <= tol);
  if (bad) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "%lld non-finite mismatches, first at %lld (gpu %g, cpu %g)",
                  (long long)bad, (long long)firstBad, gpu[size_t(firstBad)],
                  cpu[size_t(firstBad)]);
    row.note = text;
  }
  return row;
}

} // namespace dpc::gpucheck
