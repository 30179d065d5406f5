//===- LaunchTest.cpp - Launcher variables and the CPU's communicators ----===//
//
// readLauncherVariables (comm.h) reads torchrun's, mpirun's and srun's
// variables with every number range-checked and contradictions named;
// ncclRendezvous turns torchrun's MASTER_ADDR/MASTER_PORT into NCCL's
// address; the CPU backend's launch services run every rank as a thread of
// this process, or join an MPI launcher's job and refuse others.
//
//===----------------------------------------------------------------------===//

#include "dprt/backend.h"
#include "dprt/comm.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

using namespace dprt;

namespace {

const char *const kLauncherVariables[] = {"RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "OMPI_COMM_WORLD_RANK",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "SLURM_PROCID",
                                          "SLURM_NTASKS",
                                          "SLURM_LOCALID",
                                          "LOCAL_WORLD_SIZE",
                                          "OMPI_COMM_WORLD_LOCAL_SIZE",
                                          "PMIX_RANK",
                                          "PMI_RANK",
                                          "NCCL_COMM_ID",
                                          "MASTER_ADDR",
                                          "MASTER_PORT"};

/// Sets the given variables for one test and clears every launcher
/// variable before and after it.
class LauncherVariables : public ::testing::Test {
protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char *name : kLauncherVariables)
      unsetenv(name);
  }
  static void
  set(const std::vector<std::pair<const char *, const char *>> &vars) {
    for (const auto &[name, value] : vars)
      setenv(name, value, 1);
  }
  static std::string error() {
    LaunchEnvironment env;
    try {
      readLauncherVariables(env);
    } catch (const std::invalid_argument &e) {
      return e.what();
    }
    return "";
  }
};

} // namespace

TEST_F(LauncherVariables, NoneSetMeansNoLauncher) {
  LaunchEnvironment env;
  EXPECT_FALSE(readLauncherVariables(env));
  EXPECT_EQ(env.world, 1);
}

TEST_F(LauncherVariables, TorchrunComesBeforeTheAllocation) {
  set({{"RANK", "3"},
       {"WORLD_SIZE", "4"},
       {"LOCAL_RANK", "1"},
       {"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "1"},
       {"SLURM_LOCALID", "0"}});
  LaunchEnvironment env;
  ASSERT_TRUE(readLauncherVariables(env));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world, 4);
  EXPECT_EQ(env.localRank, 1);
  EXPECT_EQ(env.launcher, "torchrun");
}

TEST_F(LauncherVariables, MpirunAndSrun) {
  set({{"OMPI_COMM_WORLD_RANK", "1"},
       {"OMPI_COMM_WORLD_SIZE", "2"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  LaunchEnvironment env;
  ASSERT_TRUE(readLauncherVariables(env));
  EXPECT_EQ(env.launcher, "mpirun");
  clear();
  set({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(readLauncherVariables(env));
  EXPECT_EQ(env.launcher, "srun");
  EXPECT_EQ(env.rank, 5);
}

TEST_F(LauncherVariables, MalformedValuesNameTheVariable) {
  set({{"RANK", "0"}, {"WORLD_SIZE", "4294967297"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(error().find("WORLD_SIZE=4294967297 is not a whole number in [0, "
                         "2147483647]"),
            std::string::npos)
      << error();
  clear();
  set({{"RANK", "-1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(error().find("RANK=-1 is not a whole number"), std::string::npos);
  clear();
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(error().find("LOCAL_RANK must be set beside RANK"),
            std::string::npos);
  clear();
  set({{"RANK", "1"}});
  EXPECT_NE(error().find("RANK and WORLD_SIZE must be set together"),
            std::string::npos);
  clear();
  set({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  EXPECT_NE(error().find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
}

TEST_F(LauncherVariables, ContradictionsAreNamed) {
  set({{"RANK", "1"},
       {"WORLD_SIZE", "2"},
       {"LOCAL_RANK", "1"},
       {"OMPI_COMM_WORLD_RANK", "0"},
       {"OMPI_COMM_WORLD_SIZE", "2"},
       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_NE(error().find("contradict each other: RANK=1, WORLD_SIZE=2, "
                         "LOCAL_RANK=1 (torchrun) but OMPI_COMM_WORLD_RANK=0"),
            std::string::npos)
      << error();
  clear();
  set({{"RANK", "1"},
       {"WORLD_SIZE", "4"},
       {"LOCAL_RANK", "2"},
       {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_NE(error().find("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"),
            std::string::npos)
      << error();
  // torchrun inside a Slurm allocation: the sets differ in size and are
  // nested, not contradictory.
  clear();
  set({{"RANK", "3"},
       {"WORLD_SIZE", "4"},
       {"LOCAL_RANK", "1"},
       {"SLURM_PROCID", "0"},
       {"SLURM_NTASKS", "2"},
       {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(error(), "");
}

TEST_F(LauncherVariables, NcclMeetsAtNcclCommIdOrTorchrunsMaster) {
  LaunchEnvironment env;
  env.rank = 1;
  env.world = 2;
  env.variables = "RANK=1, WORLD_SIZE=2, LOCAL_RANK=1";
  auto rendezvousError = [&]() -> std::string {
    try {
      ncclRendezvous(env);
    } catch (const std::invalid_argument &e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(rendezvousError().find("has no address to meet the other "
                                   "processes at: set NCCL_COMM_ID"),
            std::string::npos)
      << rendezvousError();
  set({{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(ncclRendezvous(env), "node7:29501");
  set({{"NCCL_COMM_ID", "10.0.0.1:4000"}});
  EXPECT_EQ(ncclRendezvous(env), "10.0.0.1:4000");
  clear();
  set({{"MASTER_ADDR", "node7"}});
  EXPECT_NE(rendezvousError().find("MASTER_ADDR=node7 is set but MASTER_PORT "
                                   "is not"),
            std::string::npos);
  clear();
  set({{"MASTER_PORT", "29500"}});
  EXPECT_NE(rendezvousError().find("MASTER_PORT is set but MASTER_ADDR is "
                                   "not"),
            std::string::npos);
  set({{"MASTER_ADDR", "node7"}, {"MASTER_PORT", "65535"}});
  EXPECT_NE(rendezvousError().find("MASTER_PORT=65535 is not a port"),
            std::string::npos);
  set({{"MASTER_PORT", "http"}});
  EXPECT_NE(rendezvousError().find("MASTER_PORT=http is not a whole number"),
            std::string::npos);
}

TEST_F(LauncherVariables, TheCpuBackendJoinsOnlyMpiLaunchers) {
  // One process of torchrun: its ranks are threads, as without a launcher.
  set({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
  LaunchEnvironment env;
  EXPECT_TRUE(cpu::readLaunchEnvironment(env));
  EXPECT_EQ(env.world, 1);
  // Several: torchrun sets up no MPI.
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  try {
    cpu::readLaunchEnvironment(env);
    ADD_FAILURE() << "torchrun's 2 processes were accepted";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "started by torchrun as one of 2 processes (RANK=1, "
                  "WORLD_SIZE=2, LOCAL_RANK=1), but the CPU backend's "
                  "processes join through MPI"),
              std::string::npos)
        << e.what();
  }
  // A PMIx launcher without its rank variables.
  clear();
  set({{"PMIX_RANK", "0"}});
  EXPECT_THROW(cpu::readLaunchEnvironment(env), std::invalid_argument);
}

TEST(CpuLaunch, EveryRankIsAThreadCommunicatorOfThisProcess) {
  Launch launch;
  launch.world = 3;
  launch.localRanks = 3;
  launch.sharedDevice = true;
  auto comms = cpu::makeCommunicators(launch);
  ASSERT_EQ(comms.size(), 3u);
  for (auto &comm : comms)
    EXPECT_NE(comm, nullptr);
  EXPECT_EQ(launch.deviceOf(2), 0);
  Launch split = launch;
  split.localRanks = 1;
  split.multiProcess = true;
  EXPECT_THROW(cpu::makeCommunicators(split), std::runtime_error);
}
