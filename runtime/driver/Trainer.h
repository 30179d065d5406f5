//===- Trainer.h - The training program's main loop -------------*- C++ -*-===//
//
// The `main` of every program `dpc` builds: it parses the command line,
// reads the data, starts the ranks (ProcessRanks.h), sets up the privacy
// session (PrivacySession.h), trains with DP-SGD (Poisson sampling,
// physical batches, noise, accounting), writes metrics, traces and
// checkpoints (Checkpointer.h), generates text (TextGenerator.h) and prints
// the report (RunReport.h). See docs/training-program.md.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_DRIVER_TRAINER_H
#define DPRT_DRIVER_TRAINER_H

namespace dprt::driver {

/// Runs the training program; returns the exit status: 0 done, 1 failure,
/// 2 bad arguments, data or checkpoint.
int runTrainingProgram(int argc, char **argv);

} // namespace dprt::driver

#endif // DPRT_DRIVER_TRAINER_H
