//===- LaunchEnvironment.cpp - Rank and world size from a launcher --------===//
//
// torchrun, Open MPI's mpirun and Slurm's srun each tell a process where it
// sits through their own variables. Reading them is the same for every
// backend; which backend honours them is backend.inc's readLaunchEnvironment.
//
//===----------------------------------------------------------------------===//

#include "dprt/comm.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace dprt {
namespace {

[[noreturn]] void malformed(const std::string &message) {
  throw std::invalid_argument(message);
}

/// The variable `name` as a whole number in [0, INT_MAX], range-checked
/// before the conversion; false when unset or empty.
bool readCount(const char *name, int &out) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return false;
  errno = 0;
  char *end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end || errno == ERANGE || x < 0 || x > INT_MAX)
    malformed(std::string(name) + "=" + v + " is not a whole number in [0, " +
              std::to_string(INT_MAX) + "]");
  out = static_cast<int>(x);
  return true;
}

/// One launcher's variables.
struct VariableSet {
  const char *launcher;
  const char *rank, *world, *local, *localSize;
};

constexpr VariableSet kSets[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
};

std::string assignment(const char *name, int value) {
  return std::string(name) + "=" + std::to_string(value);
}

bool readSet(const VariableSet &set, LaunchEnvironment &env) {
  int rank = 0, world = 0, local = 0, localSize = 0;
  const bool hasRank = readCount(set.rank, rank);
  const bool hasWorld = readCount(set.world, world);
  if (!hasRank && !hasWorld)
    return false;
  if (hasRank != hasWorld)
    malformed(std::string(set.rank) + " and " + set.world +
              " must be set together");
  if (!readCount(set.local, local))
    malformed(std::string(set.local) + " must be set beside " + set.rank +
              ": it chooses this process's GPU");
  if (world < 1 || rank >= world)
    malformed(assignment(set.rank, rank) + " is not below " +
              assignment(set.world, world));
  if (set.localSize && readCount(set.localSize, localSize) &&
      local >= localSize)
    malformed(assignment(set.local, local) + " is not below " +
              assignment(set.localSize, localSize) +
              ": the launcher's variables contradict each other");
  env.rank = rank;
  env.world = world;
  env.localRank = local;
  env.launcher = set.launcher;
  env.variables = assignment(set.rank, rank) + ", " +
                  assignment(set.world, world) + ", " +
                  assignment(set.local, local);
  return true;
}

} // namespace

bool readLauncherVariables(const std::string &launcher,
                           LaunchEnvironment &env) {
  for (const VariableSet &set : kSets)
    if (launcher == set.launcher)
      return readSet(set, env);
  throw std::invalid_argument("unknown launcher '" + launcher + "'");
}

void checkLauncherAgreement() {
  // torchrun's and mpirun's sets of one size describe the same processes
  // (neither starts the other in practice); Slurm's are left out: under
  // sbatch they describe the batch step, inherited by every process that
  // mpirun starts on the first node.
  LaunchEnvironment torchrun, mpirun;
  const bool hasTorchrun = readSet(kSets[0], torchrun);
  const bool hasMpirun = readSet(kSets[1], mpirun);
  if (hasTorchrun && hasMpirun && torchrun.world == mpirun.world &&
      torchrun.rank != mpirun.rank)
    malformed("the launcher's variables contradict each other: " +
              torchrun.variables + " (torchrun) but " + mpirun.variables +
              " (mpirun); unset the ones left over from another job");
}

std::string ncclRendezvous(const LaunchEnvironment &env) {
  const char *commId = std::getenv("NCCL_COMM_ID");
  if (commId && *commId)
    return commId;
  const char *addr = std::getenv("MASTER_ADDR");
  const bool hasAddr = addr && *addr;
  int port = 0;
  const bool hasPort = readCount("MASTER_PORT", port);
  if (!hasAddr && !hasPort)
    malformed("rank " + std::to_string(env.rank) + " of " +
              std::to_string(env.world) + " (" + env.variables +
              ") has no address to meet the other processes at: set "
              "NCCL_COMM_ID=<host>:<port> (rank 0's host, a free port), or "
              "MASTER_ADDR and MASTER_PORT as torchrun does");
  if (!hasAddr)
    malformed("MASTER_PORT is set but MASTER_ADDR is not: set both (rank "
              "0's host and a port), or NCCL_COMM_ID=<host>:<port>");
  if (!hasPort)
    malformed(std::string("MASTER_ADDR=") + addr +
              " is set but MASTER_PORT is not: set both, or "
              "NCCL_COMM_ID=<host>:<port>");
  // torchrun's rendezvous store listens at MASTER_PORT itself.
  if (port < 1 || port > 65534)
    malformed("MASTER_PORT=" + std::to_string(port) +
              " is not a port in [1, 65534] (NCCL meets at MASTER_PORT + 1)");
  return std::string(addr) + ":" + std::to_string(port + 1);
}

bool readLauncherVariables(LaunchEnvironment &env) {
  checkLauncherAgreement();
  for (const VariableSet &set : kSets)
    if (readSet(set, env))
      return true;
  return false;
}

} // namespace dprt
