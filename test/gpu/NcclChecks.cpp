//===- NcclChecks.cpp - The NCCL communicator on several GPUs -------------===//
//
// Run by every rank at once (threads of one process, or one process per
// GPU). Every rank's data is a known function of (rank, index), small
// integers that f32 and bf16 hold exactly and whose sums f32 adds exactly,
// so each rank checks its results against the host expectation bit for bit.
// The hybrid grid's all_reduce runs on a communicator split off the whole
// grid (ncclCommSplit), as the driver makes its groups. The last check
// captures all_gather and reduce_scatter (accumulating) on the
// communication stream into a CUDA graph with runCaptured and replays it
// with new data.
//
//===----------------------------------------------------------------------===//

#include "Cases.h"

#include "DeviceState.h"
#include "dprt/backend.h"
#include "dprt/comm.h"
#include "dprt/kernels.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <tuple>

namespace dpc::gpucheck {

namespace {

/// Rank `owner`'s element i of data set `salt`: an integer in [-128, 128].
double value(int owner, int64_t i, int salt) {
  return double((owner * 31 + i * 17 + salt * 7) % 257) - 128.0;
}

void addRow(Report &report, dprt::Rank *rank, const std::string &kernel,
            const std::string &dtype, const std::string &shape,
            const Row &compared) {
  Row row = compared;
  row.kernel = kernel;
  row.dtype = dtype;
  row.shape = shape + " rank " + std::to_string(rank->rank) + "/" +
              std::to_string(rank->world);
  report.add(row);
}

void allGatherCheck(dprt::Rank *rank, Report &report, DType dt, int64_t shard) {
  int r = rank->rank, w = rank->world;
  Buffer mine(dt, shard), full(dt, shard * w);
  for (int64_t i = 0; i < shard; ++i)
    mine.set(i, value(r, i, 1));
  mine.upload();
  full.poison();
  gpu::all_gather(rank, dt, mine.d(), full.d(), shard, 1);
  gpu::synchronize(rank);
  std::vector<double> expect(size_t(shard * w));
  for (int owner = 0; owner < w; ++owner)
    for (int64_t i = 0; i < shard; ++i)
      expect[size_t(owner * shard + i)] = value(owner, i, 1);
  addRow(report, rank, "nccl.all_gather", dprt::nameOf(dt),
         "shard " + std::to_string(shard),
         compareValues(full.download(), expect, 0));
}

void reduceScatterCheck(dprt::Rank *rank, Report &report, bool accumulate,
                        int64_t shard) {
  int r = rank->rank, w = rank->world;
  Buffer full(F32, shard * w), mine(F32, shard);
  for (int64_t j = 0; j < shard * w; ++j)
    full.set(j, value(r, j, 2));
  full.upload();
  if (accumulate) {
    for (int64_t i = 0; i < shard; ++i)
      mine.set(i, value(r, i, 3));
    mine.upload();
  } else {
    mine.poison();
  }
  gpu::reduce_scatter(rank, F32, full.d(), mine.d(), shard, accumulate, 1);
  gpu::synchronize(rank);
  std::vector<double> expect(static_cast<size_t>(shard));
  for (int64_t i = 0; i < shard; ++i) {
    double sum = accumulate ? value(r, i, 3) : 0.0;
    for (int owner = 0; owner < w; ++owner)
      sum += value(owner, r * shard + i, 2);
    expect[size_t(i)] = sum;
  }
  addRow(report, rank, "nccl.reduce_scatter", "f32",
         "shard " + std::to_string(shard) + (accumulate ? " acc" : ""),
         compareValues(mine.download(), expect, 0));
}

/// all_reduce (the sum of a gradient shard over the replicas of a hybrid
/// grid) on a group split off the whole grid: here one group of every rank,
/// the grid's ranks as replicas of one shard each.
void splitAllReduceCheck(dprt::Rank *rank, Report &report, DType acc,
                         int64_t count) {
  int r = rank->rank, w = rank->world;
  std::unique_ptr<dprt::Communicator> group = rank->comm->split(0, r);
  Row sizes;
  sizes.pass = group->rank() == r && group->size() == w;
  sizes.note = "rank " + std::to_string(group->rank()) + " of " +
               std::to_string(group->size());
  addRow(report, rank, "nccl.split", "-", "one group", sizes);
  Buffer data(acc, count);
  for (int64_t i = 0; i < count; ++i)
    data.set(i, value(r, i, 4));
  data.upload();
  struct Replicas {
    dprt::Rank *rank;
    ~Replicas() {
      rank->replicaComm = nullptr;
      rank->replicas = 1;
    }
  } restore{rank};
  rank->replicaComm = group.get();
  rank->replicas = w;
  gpu::all_reduce(rank, acc, data.d(), count, 1);
  gpu::synchronize(rank);
  std::vector<double> expect(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    for (int owner = 0; owner < w; ++owner)
      expect[size_t(i)] += value(owner, i, 4);
  addRow(report, rank, "nccl.all_reduce", dprt::nameOf(acc),
         "count " + std::to_string(count),
         compareValues(data.download(), expect, 0));
}

// The captured step's buffers in the rank's arena (fixed addresses for the
// graph): A this rank's shard, B the gathered buffer, C the reduce-scatter
// accumulator, D the sum of C over the calls.
constexpr int64_t kStepShard = 65539;
constexpr int64_t kA = int64_t(1) << 20, kC = int64_t(2) << 20,
                  kD = int64_t(3) << 20, kB = int64_t(4) << 20;

void ncclStep(dprt::Rank *r) {
  char *a = dprt::arena(r);
  gpu::record_event(r, 0, 0);
  gpu::wait_event(r, 1, 0);
  gpu::all_gather(r, F32, a + kA, a + kB, kStepShard, 1);
  gpu::reduce_scatter(r, F32, a + kB, a + kC, kStepShard, true, 1);
  gpu::record_event(r, 1, 1);
  gpu::wait_event(r, 0, 1);
  gpu::accumulate(r, F32, a + kC, a + kD, kStepShard);
}

void capturedCheck(dprt::Rank *rank, Report &report) {
  int r = rank->rank, w = rank->world;
  if (kB + int64_t(w) * kStepShard * 4 > rank->arenaBytes)
    throw std::runtime_error("the NCCL check's arena is too small");
  size_t bytes = size_t(kStepShard) * sizeof(float);
  std::vector<float> zeros(kStepShard, 0.0f), shard(kStepShard),
      c(kStepShard, 0.0f), d(kStepShard, 0.0f), got(kStepShard);
  gpu::copyToArena(rank, kC, zeros.data(), int64_t(bytes));
  gpu::copyToArena(rank, kD, zeros.data(), int64_t(bytes));
  // The exposed-communication probes (the driver's --trace) must change
  // nothing, and must see the compute stream wait: here it has nothing to
  // do but wait for the collectives.
  rank->measureExposedComm = true;
  for (int call = 1; call <= 4; ++call) {
    for (int64_t i = 0; i < kStepShard; ++i)
      shard[i] = float(value(r, i, 10 + call));
    gpu::copyToArena(rank, kA, shard.data(), int64_t(bytes));
    rank->exposedCommSeconds = 0;
    const auto begin = std::chrono::steady_clock::now();
    gpu::runCaptured(rank, 3, ncclStep);
    gpu::synchronize(rank);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    // Every rank gathers the same B; slice r of it is rank r's shard, so
    // the reduce-scatter adds w times this rank's shard.
    for (int64_t i = 0; i < kStepShard; ++i) {
      c[i] += float(w) * shard[i];
      d[i] += c[i];
    }
    std::string shape = capturedCallLabel(call);
    for (auto [name, offset, want] :
         {std::make_tuple("C", kC, &c), std::make_tuple("D", kD, &d)}) {
      gpu::copyFromArena(rank, got.data(), offset, int64_t(bytes));
      addRow(report, rank, std::string("nccl.runCaptured.") + name, "f32",
             shape,
             compareValues(std::vector<double>(got.begin(), got.end()),
                           std::vector<double>(want->begin(), want->end()), 0));
    }
    Row exposed;
    exposed.pass =
        rank->exposedCommSeconds > 0 && rank->exposedCommSeconds <= wall;
    exposed.note = "waited " + std::to_string(rank->exposedCommSeconds * 1e6) +
                   " us of " + std::to_string(wall * 1e6) + " us";
    addRow(report, rank, "nccl.exposedComm", "-", shape, exposed);
  }
  rank->measureExposedComm = false;
}

void ncclTimings(dprt::Rank *rank, Report &report) {
  int w = rank->world;
  // A 64 MiB bf16 shard (the 1.1B model over 2 ranks is ~1.1 GB a rank).
  int64_t shard = int64_t(32) << 20;
  void *a = nullptr, *b = nullptr;
  cudaCheck(cudaMalloc(&a, size_t(shard) * 4), "cudaMalloc");
  cudaCheck(cudaMalloc(&b, size_t(shard) * 4 * size_t(w)), "cudaMalloc");
  cudaCheck(cudaMemset(a, 0, size_t(shard) * 4), "cudaMemset");
  cudaCheck(cudaMemset(b, 0, size_t(shard) * 4 * size_t(w)), "cudaMemset");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::string who =
      " rank " + std::to_string(rank->rank) + "/" + std::to_string(w);
  Timing t;
  t.kernel = "nccl.all_gather";
  t.dtype = "bf16";
  t.shape = "shard 32M" + who;
  t.microseconds = medianMicrosOnStream(
      rank, 1, 1, [&] { gpu::all_gather(rank, BF16, a, b, shard, 1); });
  t.rate = double(shard) * 2 * w / (t.microseconds * 1e3);
  t.unit = "GB/s (gathered bytes)";
  report.addTiming(t);
  t.kernel = "nccl.reduce_scatter";
  t.dtype = "f32";
  t.microseconds = medianMicrosOnStream(rank, 1, 1, [&] {
    gpu::reduce_scatter(rank, F32, b, a, shard, false, 1);
  });
  t.rate = double(shard) * 4 * w / (t.microseconds * 1e3);
  t.unit = "GB/s (reduced bytes)";
  report.addTiming(t);
  cudaFree(a);
  cudaFree(b);
}

} // namespace

void ncclChecks(dprt::Rank *rank, Report &report, bool timing) {
  auto guarded = [&](const std::string &what, const std::function<void()> &f) {
    try {
      f();
    } catch (const std::exception &e) {
      Row row;
      row.kernel = what;
      row.dtype = "-";
      row.shape = "rank " + std::to_string(rank->rank);
      row.note = std::string("exception: ") + e.what();
      report.add(row);
    }
  };
  for (DType dt : {F32, BF16})
    guarded("nccl.all_gather",
            [&] { allGatherCheck(rank, report, dt, 1000003); });
  for (bool acc : {false, true})
    guarded("nccl.reduce_scatter",
            [&] { reduceScatterCheck(rank, report, acc, 1000003); });
  for (DType acc : {F32, DType::F64})
    guarded("nccl.all_reduce",
            [&] { splitAllReduceCheck(rank, report, acc, 1000003); });
  guarded("nccl.allReduceHost", [&] {
    int r = rank->rank, w = rank->world;
    double values[2] = {double(r + 1), 10.0 * r};
    rank->comm->allReduceHost(values, 2);
    std::vector<double> expect = {w * (w + 1) / 2.0, 10.0 * w * (w - 1) / 2.0};
    addRow(report, rank, "nccl.allReduceHost", "f64", "2 values",
           compareValues({values[0], values[1]}, expect, 0));
    rank->comm->barrier();
    Row ok;
    ok.pass = true;
    addRow(report, rank, "nccl.barrier", "-", "", ok);
  });
  guarded("nccl.runCaptured", [&] { capturedCheck(rank, report); });
  if (timing)
    guarded("nccl.timing", [&] { ncclTimings(rank, report); });
}

} // namespace dpc::gpucheck
