//===- UpdateGroups.cu - Small _rows updates in one launch ----------------===//
//
// update_group (kernels.inc): while dp_apply's group is open, each f32- or
// bf16-rows update too small to fill one wave of updateKernel is deferred
// (deferToGroup, called by Optimizers.cu's updateRows) and run with the
// others of its optimizer, clip factors and batch, up to 48 in a launch,
// when the group closes or changes key. groupUpdateKernel runs
// OptimizerSteps.cuh's element steps, so the bits are those of the calls one
// by one (gpu-check's update_group checks).
//
//===----------------------------------------------------------------------===//

#include "UpdateGroups.h"

#include "dprt/kernels.h"

#include <algorithm>
#include <string>
#include <vector>

namespace dprt::cuda {

namespace {

/// One _rows update of a group's launch: the buffers of its call, its
/// elements (a multiple of its rows' width) and its first block.
struct GroupEntry {
  float *master, *state1, *state2;
  const void *g;
  bf16 *copy;
  int64_t noiseIndex;
  int32_t n, firstBlock;
  bool f32Rows;
};

/// Updates a group launch takes at most: the launch's parameters stay
/// within the 4 KB every CUDA version passes.
constexpr int kGroupEntries = 48;

template <class Opt> struct GroupLaunch {
  Opt opt;
  const float *c;
  int64_t batch;
  int32_t count, blocks;
  GroupEntry entries[kGroupEntries];
};
static_assert(sizeof(GroupLaunch<AdamW>) <= 4000,
              "a group launch's parameters must fit in 4 KB");

/// The _rows updates of up to 48 parameters in one launch (update_group):
/// the entries' blocks of 256 vectors (p.blocks in all, entry e's from
/// firstBlock on), taken by the launch's blocks in turn, each running what
/// updateKernel<W> runs for its elements, W = kRowsWidth (the same loads,
/// sums, noise and steps, so the same bits). The parameters it is for are
/// small (an RMSNorm's gamma: 2048 elements in 2 blocks; a key or value
/// projection: 0.5 M in 256), and their own launches took 4.7 and 11.6 us
/// a call for 0.06 and 13 MB in the T = 1024 SGD DP step, 65 of them a
/// step. One wave of blocks that loop, so that the step's scalars and the
/// noise key are read once a block, not once per 256 vectors.
template <class Opt>
__global__ void __launch_bounds__(kThreads, 4)
    groupUpdateKernel(const __grid_constant__ GroupLaunch<Opt> p,
                      const StepState *state, int32_t *nonFinite) {
  const StepScalars s = loadScalars(state, p.opt.beta1, p.opt.beta2);
  const GradientNoise drawn = GradientNoise::of(*state, true);
  bool finite = true;
  int e = 0;
  for (int32_t block = blockIdx.x; block < p.blocks; block += gridDim.x) {
    // Blocks only move forward: so does their entry.
    while (e + 1 < p.count && p.entries[e + 1].firstBlock <= block)
      ++e;
    const GroupEntry &entry = p.entries[e];
    const Opt opt =
        withBuffers(p.opt, entry.master, entry.state1, entry.state2);
    GradientNoise noise = drawn;
    noise.on = drawn.on && entry.noiseIndex >= 0;
    const int64_t vector =
        int64_t(block - entry.firstBlock) * kThreads + threadIdx.x;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      constexpr int W = kRowsWidth<Opt, T>;
      const int64_t i = vector * W;
      if (i >= entry.n)
        return;
      const RowsGradient<PlainRowsView<T>> grad{
          PlainRowsView<T>{static_cast<const T *>(entry.g), entry.n}, p.c,
          p.batch};
      float raw[W];
      grad.template load<W>(i, raw);
      stepElements<W>(opt, s, noise, entry.noiseIndex, i, raw, entry.copy,
                      finite);
    };
    if (entry.f32Rows)
      run(float{});
    else
      run(bf16{});
  }
  if (!finite)
    atomicOr(nonFinite, 1);
}

} // namespace

/// What the updates of one launch share: the optimizer and its
/// hyperparameters, the clip factors and the batch.
struct GroupKey {
  OptimizerKind kind = OptimizerKind::SGD;
  double hyperparameters[3] = {};
  bool nesterov = false;
  const float *c = nullptr;
  int64_t batch = 0;

  bool operator==(const GroupKey &o) const {
    return kind == o.kind && nesterov == o.nesterov && c == o.c &&
           batch == o.batch &&
           std::equal(hyperparameters, hyperparameters + 3, o.hyperparameters);
  }
};

/// The *_update_rows calls an open update_group has deferred, all of one
/// key.
struct UpdateGroup {
  bool open = false;
  GroupKey key;
  std::vector<GroupEntry> entries;
  int32_t blocks = 0;
};

namespace {

/// An update's group key: its optimizer's kind and hyperparameters.
GroupKey keyOf(const Sgd &, const float *c, int64_t batch) {
  return GroupKey{OptimizerKind::SGD, {}, false, c, batch};
}
GroupKey keyOf(const Momentum &opt, const float *c, int64_t batch) {
  return GroupKey{
      OptimizerKind::Momentum, {opt.momentum}, opt.nesterov, c, batch};
}
GroupKey keyOf(const AdamW &opt, const float *c, int64_t batch) {
  return GroupKey{
      OptimizerKind::AdamW, {opt.beta1, opt.beta2, opt.eps}, false, c, batch};
}

float *stateBuffer(const Sgd &, int) { return nullptr; }
float *stateBuffer(const Momentum &opt, int k) {
  return k == 0 ? opt.velocity : nullptr;
}
float *stateBuffer(const AdamW &opt, int k) { return k == 0 ? opt.m : opt.v; }

template <class Opt>
void launchGroup(Rank *rank, const Opt &proto, const UpdateGroup &group) {
  GroupLaunch<Opt> p{};
  p.opt = proto;
  p.c = group.key.c;
  p.batch = group.key.batch;
  p.count = int32_t(group.entries.size());
  p.blocks = group.blocks;
  std::copy(group.entries.begin(), group.entries.end(), p.entries);
  groupUpdateKernel<Opt><<<oneWave<groupUpdateKernel<Opt>>(rank, group.blocks),
                           kThreads, 0, computeStream(rank)>>>(
      p, deviceStepState(rank), deviceNonFiniteFlag(rank));
  checkLaunch("update_group");
}

/// Launches the deferred updates, if any, and empties the group.
void flushGroup(Rank *rank, UpdateGroup &group) {
  if (group.entries.empty())
    return;
  const double *h = group.key.hyperparameters;
  switch (group.key.kind) {
  case OptimizerKind::SGD:
    launchGroup(rank, Sgd{nullptr}, group);
    break;
  case OptimizerKind::Momentum:
    launchGroup(rank, Momentum{nullptr, nullptr, h[0], group.key.nesterov},
                group);
    break;
  case OptimizerKind::AdamW:
    launchGroup(rank, AdamW{h[0], h[1], h[2], nullptr, nullptr, nullptr},
                group);
    break;
  }
  group.entries.clear();
  group.blocks = 0;
}

} // namespace

template <class Opt, class T>
bool deferToGroup(Rank *rank, const Opt &opt, const T *g, const float *c,
                  int64_t batch, int64_t n, int64_t noiseIndex, bf16 *copy) {
  DeviceState &st = deviceState(rank);
  if (!st.updates || !st.updates->open)
    return false;
  constexpr int W = kRowsWidth<Opt, T>;
  const int64_t blocks = (n / W + kThreads - 1) / kThreads;
  // updateKernel's bound: 4 blocks of kThreads a multiprocessor.
  if (blocks >= int64_t(st.smCount) * 4 || n > INT32_MAX)
    return false;
  UpdateGroup &group = *st.updates;
  const GroupKey key = keyOf(opt, c, batch);
  if (!(key == group.key) || group.entries.size() == size_t(kGroupEntries) ||
      int64_t(group.blocks) + blocks > INT32_MAX)
    flushGroup(rank, group);
  if (group.entries.empty())
    group.key = key;
  group.entries.push_back(GroupEntry{
      opt.master, stateBuffer(opt, 0), stateBuffer(opt, 1), g, copy, noiseIndex,
      int32_t(n), group.blocks, std::is_same_v<T, float>});
  group.blocks += int32_t(blocks);
  return true;
}

void update_group(Rank *rank, bool open) {
  DeviceState &st = deviceState(rank);
  if (!st.updates)
    st.updates = std::make_shared<UpdateGroup>();
  UpdateGroup &group = *st.updates;
  if (open == group.open)
    fail(open ? "update_group: a group is already open (update_group(true) "
                "twice without update_group(false) between)"
              : "update_group: no group is open");
  if (!open)
    flushGroup(rank, group);
  group.open = open;
}

#define DPRT_DEFER_TO_GROUP(Opt, T)                                            \
  template bool deferToGroup<Opt, T>(Rank *, const Opt &, const T *,           \
                                     const float *, int64_t, int64_t, int64_t, \
                                     bf16 *);
DPRT_DEFER_TO_GROUP(Sgd, float)
DPRT_DEFER_TO_GROUP(Sgd, bf16)
DPRT_DEFER_TO_GROUP(Momentum, float)
DPRT_DEFER_TO_GROUP(Momentum, bf16)
DPRT_DEFER_TO_GROUP(AdamW, float)
DPRT_DEFER_TO_GROUP(AdamW, bf16)
#undef DPRT_DEFER_TO_GROUP

} // namespace dprt::cuda
