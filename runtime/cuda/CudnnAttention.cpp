//===- CudnnAttention.cpp - Attention through cuDNN's fused SDPA ----------===//
//
// The graphs (cuDNN frontend, BSHD strides, see CudnnAttention.h):
//   forward:  [O, Stats] = sdpa(Q, K, V), attn_scale 1/sqrt(headDim),
//             generate_stats; causal: the top-left diagonal band with right
//             bound 0 (token t sees keys s <= t).
//   backward: [dQ, dK, dV] = sdpa_backward(Q, K, V, O, dO, Stats) with the
//             same scale and mask; dK, dV [batch, kvHeads, tokens, headDim]
//             (cuDNN reduces over the group); cuDNN's deterministic
//             algorithm only with DPRT_CUDNN_DETERMINISTIC=1.
// I/O bf16, intermediates and compute f32. Each graph is built with
// heuristics mode A (falling back to the fallback list) on first use and
// cached per rank, keyed by every shape parameter and the direction.
//
//===----------------------------------------------------------------------===//

#include "CudnnAttention.h"
#include "DeviceState.h"

#include <cstdlib>
#include <cstring>

#ifdef DPRT_WITH_CUDNN

#include "CudnnLibrary.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

namespace dprt::cuda {

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

/// A built graph, or why it did not build.
struct CudnnGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspaceBytes = 0;
  std::string declined;
};

using GraphKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                            bool, bool, int>;

bool deterministicBackward() {
  const char *env = std::getenv("DPRT_CUDNN_DETERMINISTIC");
  // Not by default: the deterministic algorithm's workspace grows with the
  // sequence (4.1 GiB at B 1, T 8192, 32 heads on an H200), outside the
  // planned arena, and it is the slower one.
  if (!env || !*env || std::strcmp(env, "0") == 0)
    return false;
  if (std::strcmp(env, "1") == 0)
    return true;
  fail(std::string("DPRT_CUDNN_DETERMINISTIC=") + env + ": expected 0 or 1");
}

} // namespace

struct CudnnAttentionState {
  cudnnHandle_t handle = nullptr;
  /// Why the handle could not be made ("" when it was).
  std::string declined;
  std::map<GraphKey, CudnnGraph> graphs;

  ~CudnnAttentionState() {
    graphs.clear();
    if (handle)
      cudnnDestroy(handle);
  }
};

namespace {

/// [batch, heads, tokens, headDim] over rows of `heads` heads.
void bshd(fe::graph::Tensor_attributes &t, const char *name, int64_t uid,
          const CudnnAttentionShape &s, int64_t heads) {
  t.set_name(name)
      .set_uid(uid)
      .set_dim({s.batch, heads, s.tokens, s.headDim})
      .set_stride(
          {s.tokens * heads * s.headDim, s.headDim, heads * s.headDim, 1});
}

std::shared_ptr<fe::graph::Tensor_attributes>
input(fe::graph::Graph &g, const char *name, int64_t uid,
      const CudnnAttentionShape &s, int64_t heads) {
  fe::graph::Tensor_attributes t;
  bshd(t, name, uid, s, heads);
  return g.tensor(t);
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes> &t,
            const char *name, int64_t uid, const CudnnAttentionShape &s,
            int64_t heads) {
  t->set_output(true);
  bshd(*t, name, uid, s, heads);
}

/// Stats f32 [batch, heads, tokens, 1], contiguous: the lse of kernels.inc.
void statsLayout(fe::graph::Tensor_attributes &t,
                 const CudnnAttentionShape &s) {
  t.set_name("Stats")
      .set_uid(kStats)
      .set_dim({s.batch, s.heads, s.tokens, 1})
      .set_stride({s.heads * s.tokens, s.tokens, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

std::shared_ptr<fe::graph::Graph> makeGraph(const CudnnAttentionShape &s,
                                            bool deterministic) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const float scale = float(1.0 / std::sqrt(double(s.headDim)));
  auto q = input(*g, "Q", kQ, s, s.heads);
  auto k = input(*g, "K", kK, s, s.kvHeads);
  auto v = input(*g, "V", kV, s, s.kvHeads);
  if (!s.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention_forward")
                       .set_generate_stats(true)
                       .set_attn_scale(scale);
    if (s.causal)
      options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
          .set_diagonal_band_right_bound(0);
    auto [o, stats] = g->sdpa(q, k, v, options);
    output(o, "O", kO, s, s.heads);
    stats->set_output(true);
    statsLayout(*stats, s);
    return g;
  }
  auto o = input(*g, "O", kO, s, s.heads);
  auto dO = input(*g, "dO", kDO, s, s.heads);
  fe::graph::Tensor_attributes statsAttrs;
  statsLayout(statsAttrs, s);
  auto stats = g->tensor(statsAttrs);
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("attention_backward")
                     .set_attn_scale(scale)
                     .set_deterministic_algorithm(deterministic);
  if (s.causal)
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, options);
  output(dq, "dQ", kDQ, s, s.heads);
  output(dk, "dK", kDK, s, s.kvHeads);
  output(dv, "dV", kDV, s, s.kvHeads);
  return g;
}

/// Builds the graph of `s`: "" and the graph, or the frontend's message.
CudnnGraph buildGraph(cudnnHandle_t handle, const CudnnAttentionShape &s,
                      bool deterministic) {
  CudnnGraph built;
  try {
    std::shared_ptr<fe::graph::Graph> g = makeGraph(s, deterministic);
    fe::error_t status =
        g->build(handle, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (status.is_good())
      status = g->get_workspace_size(built.workspaceBytes);
    if (!status.is_good()) {
      built.declined =
          "the cuDNN graph does not build: " + status.get_message();
      return built;
    }
    built.graph = std::move(g);
  } catch (const std::exception &e) {
    built.declined = std::string("the cuDNN graph does not build: ") + e.what();
  }
  return built;
}

CudnnAttentionState &stateOf(Rank *rank) {
  DeviceState &st = deviceState(rank);
  if (!st.cudnn) {
    auto state = std::make_shared<CudnnAttentionState>();
    state->declined = loadCudnn();
    if (state->declined.empty()) {
      cudnnStatus_t status = cudnnCreate(&state->handle);
      if (status != CUDNN_STATUS_SUCCESS) {
        state->handle = nullptr;
        state->declined =
            std::string("cudnnCreate: ") + cudnnGetErrorString(status);
      }
    }
    st.cudnn = std::move(state);
  }
  return *st.cudnn;
}

GraphKey keyOf(const CudnnAttentionShape &s, bool deterministic) {
  return GraphKey{
      s.batch,         s.tokens, s.heads,    s.kvHeads,
      s.headDim,       s.causal, s.backward, s.backward && deterministic,
      int(DType::BF16)};
}

const char *kernelName(const CudnnAttentionShape &s) {
  return s.backward ? "attention_backward" : "attention_forward";
}

/// The handle works on the rank's compute stream.
void setStream(Rank *rank, CudnnAttentionState &state,
               const CudnnAttentionShape &s) {
  cudnnStatus_t status = cudnnSetStream(state.handle, computeStream(rank));
  if (status != CUDNN_STATUS_SUCCESS)
    fail(std::string(kernelName(s)) +
         " (cudnn): cudnnSetStream: " + cudnnGetErrorString(status));
}

const CudnnGraph &graphFor(Rank *rank, const CudnnAttentionShape &s) {
  CudnnAttentionState &state = stateOf(rank);
  const bool deterministic = deterministicBackward();
  GraphKey key = keyOf(s, deterministic);
  auto it = state.graphs.find(key);
  if (it != state.graphs.end())
    return it->second;
  CudnnGraph built;
  if (!state.declined.empty()) {
    built.declined = state.declined;
  } else {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    checkCuda(cudaStreamIsCapturing(computeStream(rank), &capture),
              "cudaStreamIsCapturing");
    if (capture != cudaStreamCaptureStatusNone)
      fail(std::string(kernelName(s)) +
           ": a cuDNN graph for a new shape while the compute stream is "
           "captured into a CUDA graph; runCaptured builds them in its "
           "un-captured first run, so the step launched different work in "
           "its second run");
    setStream(rank, state, s);
    built = buildGraph(state.handle, s, deterministic);
    // The frontend probes the device through this runtime; an error it
    // left behind (a declined shape) must not surface at the next
    // checkLaunch of another kernel. Every launch of ours is checked at
    // once, so nothing of ours is pending here.
    cudaGetLastError();
    if (allocLogEnabled() && built.graph)
      std::fprintf(stderr,
                   "dprt: cuDNN %s B %lld T %lld H %lld KV %lld hd %lld%s: "
                   "workspace %lld bytes\n",
                   kernelName(s), (long long)s.batch, (long long)s.tokens,
                   (long long)s.heads, (long long)s.kvHeads,
                   (long long)s.headDim, s.causal ? " causal" : "",
                   (long long)built.workspaceBytes);
  }
  return state.graphs.emplace(key, std::move(built)).first->second;
}

/// Runs s's graph on `pack`. Its workspace: `planned` when that holds the
/// `plannedBytes` it needs (the arena's, attention_backward), else the
/// compute stream's scratch.
void execute(Rank *rank, const CudnnAttentionShape &s,
             std::unordered_map<int64_t, void *> &pack, void *planned,
             size_t plannedBytes) {
  const CudnnGraph &g = graphFor(rank, s);
  if (!g.graph)
    fail(std::string(kernelName(s)) + " (cudnn): " + g.declined);
  CudnnAttentionState &state = stateOf(rank);
  setStream(rank, state, s);
  void *workspace = nullptr;
  if (g.workspaceBytes > 0)
    workspace = planned && size_t(g.workspaceBytes) <= plannedBytes
                    ? planned
                    : scratch(rank, kComputeStream, size_t(g.workspaceBytes));
  fe::error_t result = g.graph->execute(state.handle, pack, workspace);
  if (!result.is_good())
    fail(std::string(kernelName(s)) + " (cudnn): " + result.get_message());
}

} // namespace

bool cudnnAttentionBuilt() { return true; }

std::string cudnnAttentionLibrary() {
  const std::string &declined = loadCudnn();
  if (!declined.empty())
    return "off: " + declined;
  const size_t v = cudnnGetVersion();
  return "cuDNN " + std::to_string(v / 10000) + "." +
         std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         ", frontend " + std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

std::string cudnnAttentionDeclines(Rank *rank, const CudnnAttentionShape &s) {
  return graphFor(rank, s).declined;
}

void cudnnAttentionForward(Rank *rank, const CudnnAttentionShape &s,
                           const void *q, const void *k, const void *v, void *o,
                           float *lse) {
  std::unordered_map<int64_t, void *> pack = {{kQ, const_cast<void *>(q)},
                                              {kK, const_cast<void *>(k)},
                                              {kV, const_cast<void *>(v)},
                                              {kO, o},
                                              {kStats, lse}};
  execute(rank, s, pack, nullptr, 0);
}

int64_t cudnnAttentionWorkspaceBytes(Rank *rank, const CudnnAttentionShape &s) {
  const CudnnGraph &g = graphFor(rank, s);
  return g.graph ? g.workspaceBytes : -1;
}

void cudnnAttentionBackward(Rank *rank, const CudnnAttentionShape &s,
                            const void *q, const void *k, const void *v,
                            const void *o, const float *lse, const void *dout,
                            void *dq, void *dk, void *dv, void *workspace,
                            size_t workspaceBytes) {
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)},
      {kK, const_cast<void *>(k)},
      {kV, const_cast<void *>(v)},
      {kO, const_cast<void *>(o)},
      {kStats, const_cast<float *>(lse)},
      {kDO, const_cast<void *>(dout)},
      {kDQ, dq},
      {kDK, dk},
      {kDV, dv}};
  execute(rank, s, pack, workspace, workspaceBytes);
}

} // namespace dprt::cuda

#else // !DPRT_WITH_CUDNN

namespace dprt::cuda {

struct CudnnAttentionState {};

bool cudnnAttentionBuilt() { return false; }

std::string cudnnAttentionLibrary() {
  return "off: this build has no cuDNN path";
}

std::string cudnnAttentionDeclines(Rank *, const CudnnAttentionShape &) {
  return "this build has no cuDNN path (CMake did not find cudnn.h, "
         "libcudnn or the cuDNN frontend's headers)";
}

void cudnnAttentionForward(Rank *, const CudnnAttentionShape &, const void *,
                           const void *, const void *, void *, float *) {
  fail("attention_forward: this build has no cuDNN path");
}

int64_t cudnnAttentionWorkspaceBytes(Rank *, const CudnnAttentionShape &) {
  return -1;
}

void cudnnAttentionBackward(Rank *, const CudnnAttentionShape &, const void *,
                            const void *, const void *, const void *,
                            const float *, const void *, void *, void *, void *,
                            void *, size_t) {
  fail("attention_backward: this build has no cuDNN path");
}

} // namespace dprt::cuda

#endif // DPRT_WITH_CUDNN
