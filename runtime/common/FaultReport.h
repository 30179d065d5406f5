//===- FaultReport.h - What a process was doing when a rank failed -*- C++
//-*-===//
//
// A job of several processes ends when one of them fails: the launcher
// (mpirun, srun --kill-on-bad-exit) sends the others SIGTERM, or their
// collectives time out. Either way each process should say which rank it
// is and what it was doing. This file keeps that (the step, the collective
// in progress) in process-wide atomics that the driver and the
// communicators update, installs the SIGTERM handler that prints it, and
// holds the test-only fault switch that makes a rank fail on purpose.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_COMMON_FAULTREPORT_H
#define DPRT_COMMON_FAULTREPORT_H

#include <cstdint>
#include <string>

namespace dprt::faults {

/// The optimizer step this process is in (0: before the first).
void setStep(int64_t step);
int64_t currentStep();

/// The collective this process's rank is waiting in (`name` must be a
/// string literal), or none after leaveCollective.
void enterCollective(const char *name, int64_t sequence);
void leaveCollective();

/// "in all_gather #12 of step 3", "in step 3, outside collectives",
/// "before the first step".
std::string describeActivity();

/// "all_gather #12 of step 3", "barrier #2 before the first step".
std::string describeCollective(const char *name, int64_t sequence);

/// From now on SIGTERM (and SIGINT) print
///   "<program>: rank <rank>: stopped by SIGTERM <activity>; the launcher
///    ends the job when another rank fails or the job is cancelled"
/// and end the process with status 128 + the signal, instead of dying
/// silently. For processes of a multi-process job; the message is formatted
/// with async-signal-safe calls only.
void installTerminationReport(const std::string &program, int rank);

/// Writes "<program>: error: <message>" to stderr and ends the process at
/// once with `status`, running no destructors: for a process whose threads
/// cannot unwind because they wait for GPU work that nothing will end.
[[noreturn]] void endProcess(const std::string &message, int status);

/// The test-only fault switch DPRT_TEST_FAULT=RANK:ACTION:STEP, checked by
/// the driver at the start of each step of each rank: at step STEP, rank
/// RANK
///   exit   ends its process at once with status 3, as a crash would;
///   hang   stops without ever reaching its next collective (sleeps), as a
///          stuck rank would.
/// Throws std::invalid_argument for a malformed value. Does nothing unless
/// the variable is set.
void injectTestFault(int rank, int64_t step);

} // namespace dprt::faults

#endif // DPRT_COMMON_FAULTREPORT_H
