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

bool readSet(const char *rankVar, const char *worldVar, const char *localVar,
             const char *launcher, LaunchEnvironment &env) {
  int rank = 0, world = 0, local = 0;
  const bool hasRank = readCount(rankVar, rank);
  const bool hasWorld = readCount(worldVar, world);
  if (!hasRank && !hasWorld)
    return false;
  if (hasRank != hasWorld)
    malformed(std::string(rankVar) + " and " + worldVar +
              " must be set together");
  if (!readCount(localVar, local))
    malformed(std::string(localVar) + " must be set beside " + rankVar +
              ": it chooses this process's GPU");
  if (world < 1 || rank >= world)
    malformed(std::string(rankVar) + "=" + std::to_string(rank) +
              " is not below " + worldVar + "=" + std::to_string(world));
  env.rank = rank;
  env.world = world;
  env.localRank = local;
  env.launcher = launcher;
  return true;
}

} // namespace

bool readLauncherVariables(LaunchEnvironment &env) {
  return readSet("RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun", env) ||
         readSet("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun", env) ||
         readSet("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "srun", env);
}

} // namespace dprt
