//===- Evaluation.h - The loss on held-out data -----------------*- C++ -*-===//
//
// --eval-data FILE: the forward pass (dp_forward) over every record of FILE,
// world * P records at a time (rank r takes records [r P, (r + 1) P) of each
// group, the last group padded), with the current parameters. For a
// language model the result is the mean cross-entropy per counted target
// token over the whole set, as transformers reports it:
//   eval_loss = sum_i n_i loss_i / sum_i n_i   (per-sample mean loss)
//   eval_loss = sum_i loss_i / sum_i n_i       (per-sample sum)
// with n_i the counted targets of record i; not the mean of the records'
// means. For other models it is the mean per-sample loss. eval_ppl =
// exp(eval_loss) for cross-entropy models.
//
// Evaluation reads no training data and draws nothing from the privacy
// budget; the loss on private evaluation data is itself a release that the
// accountant does not count (docs/privacy.md).
//
// Compiled once per backend.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_EVALUATION_H
#define DPRT_DRIVER_EVALUATION_H

#include "Dataset.h"
#include "ProcessRanks.h"
#include "Progress.h"

#include "dprt/program.h"

#include <cstdint>

namespace dprt::driver {

class Evaluator {
public:
  Evaluator(const ProgramSpec &spec, ProcessRanks &ranks, const Dataset &data)
      : spec_(spec), ranks_(ranks), data_(data) {}

  /// Evaluates the current parameters; every rank of the run takes part.
  EvalResult evaluate(int64_t step);

private:
  const ProgramSpec &spec_;
  ProcessRanks &ranks_;
  const Dataset &data_;
};

} // namespace dprt::driver

#endif // DPRT_DRIVER_EVALUATION_H
