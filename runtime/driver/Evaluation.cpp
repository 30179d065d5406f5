//===- Evaluation.cpp - The loss on held-out data -------------------------===//

#include "Evaluation.h"

#include "common/Trace.h"
#include "dprt/backend.h"

#include <chrono>
#include <cmath>

namespace dprt::driver {
namespace {

/// The graph slot of dp_forward; TextGenerator runs the same function in
/// the same slot, so one captured graph serves both.
constexpr int kForwardSlot = 2;

} // namespace

EvalResult Evaluator::evaluate(int64_t step) {
  const auto begin = std::chrono::steady_clock::now();
  const int64_t batch = spec_.physicalBatch;
  const int64_t world = ranks_.launch().world;
  const int64_t records = data_.size();
  const int64_t groups = (records + world * batch - 1) / (world * batch);
  const DType acc = accOf(spec_.compute);
  const int64_t accBytes = sizeOf(acc);
  const bool perToken = spec_.lossReduction == Reduction::Mean;
  // Summed over the ranks: loss weighted by tokens, tokens, samples.
  double totals[3] = {0, 0, 0};
  ranks_.run([&](int i) {
    RankSlot &slot = ranks_.slot(i);
    Rank &rank = slot.rank;
    double sums[3] = {0, 0, 0};
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t first = (g * world + rank.rank) * batch;
      const int64_t count =
          std::max<int64_t>(0, std::min(batch, records - first));
      for (size_t k = 0; k < spec_.inputs.size(); ++k) {
        const InputSpec &input = spec_.inputs[k];
        std::vector<char> &rows = slot.inputs[k];
        const int64_t rowBytes = static_cast<int64_t>(rows.size()) / batch;
        for (int64_t row = 0; row < batch; ++row)
          data_.writeRow(input, row < count ? first + row : -1,
                         rows.data() + row * rowBytes);
        copyToArena(&rank, input.offset, rows.data(),
                    static_cast<int64_t>(rows.size()));
      }
      for (int64_t row = 0; row < batch; ++row)
        storeAs(acc, row < count ? 1.0 : 0.0,
                slot.mask.data() + row * accBytes);
      copyToArena(&rank, spec_.maskOffset, slot.mask.data(),
                  static_cast<int64_t>(slot.mask.size()));
      {
        DPRT_TRACE(rank.rank, trace::Track::Compute, "dp_forward");
        runCaptured(&rank, kForwardSlot, dp_forward);
      }
      copyFromArena(&rank, slot.losses.data(), spec_.lossOffset,
                    static_cast<int64_t>(slot.losses.size()));
      for (int64_t row = 0; row < count; ++row) {
        const double loss = loadAs(acc, slot.losses.data() + row * accBytes);
        const double tokens = static_cast<double>(data_.tokensOf(first + row));
        sums[0] += perToken ? tokens * loss : loss;
        sums[1] += tokens;
        sums[2] += 1;
      }
    }
    synchronize(&rank);
    rank.comm->allReduceHost(sums, 3);
    if (i == 0)
      for (int k = 0; k < 3; ++k)
        totals[k] = sums[k];
  });
  EvalResult r;
  r.step = step;
  // Per counted target token; a record of another model counts as one.
  r.loss = totals[0] / totals[1];
  r.perplexity = spec_.classes > 0 ? std::exp(r.loss) : std::nan("");
  r.samples = static_cast<int64_t>(totals[2]);
  r.tokens = static_cast<int64_t>(totals[1]);
  r.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return r;
}

} // namespace dprt::driver
