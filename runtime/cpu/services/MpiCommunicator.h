//===- MpiCommunicator.h - Collectives between processes over MPI -*- C++
//-*-===//
//
// The communicator of the CPU backend when each rank is a process started by
// Open MPI's mpirun (or by srun --mpi=pmix, which MPI_Init bootstraps from
// too). Every collective is built from non-blocking point-to-point messages
// (MPI_Isend / MPI_Irecv) that its rank polls against a deadline, for two
// reasons:
//  - Bits: the sums are formed here, in rank order 0, 1, ..., as
//    ThreadCommunicator forms them, so that a run with its ranks as
//    processes gives the same bits as one with its ranks as threads.
//    MPI's own reductions choose their order by algorithm and message size.
//  - Faults: each collective knows which peer's message it still waits for.
//    When the deadline (--collective-timeout) passes, it throws
//    CollectiveTimeout naming the rank, the collective, the step and those
//    peers; the driver then ends the process with an error status and the
//    launcher (mpirun, srun --kill-on-bad-exit) stops the others.
// Messages are tagged with the collective's number on the communicator and
// its kind, so that ranks whose code diverged wait (and time out) rather
// than pair unrelated data; a message of the wrong size is an error naming
// the peer.
//
// All MPI calls of a process are serialized (MPI_THREAD_SERIALIZED): MPI is
// initialized and finalized on the main thread, and the collectives run on
// the one rank thread of the process while the main thread waits for it.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CPU_SERVICES_MPICOMMUNICATOR_H
#define DPRT_CPU_SERVICES_MPICOMMUNICATOR_H

#include "dprt/comm.h"

#include <memory>
#include <string>
#include <vector>

namespace dprt::cpu {

/// MPI, initialized once per process on first use and finalized when the
/// last communicator made from it goes.
class MpiSession;

/// Whether this process was started by an MPI launcher that MPI_Init can
/// join: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE) or a PMIx/PMI launcher
/// such as srun --mpi=pmix (PMIX_RANK, PMI_RANK).
bool startedByMpiLauncher();

/// The communicator of this process over every rank of the job (MPI's
/// world), after checking that MPI's rank and size are those of `env`, the
/// launcher's variables. Throws std::runtime_error naming both when they
/// differ.
std::unique_ptr<Communicator>
makeMpiWorldCommunicator(const LaunchEnvironment &env, double timeoutSeconds);

} // namespace dprt::cpu

#endif // DPRT_CPU_SERVICES_MPICOMMUNICATOR_H
