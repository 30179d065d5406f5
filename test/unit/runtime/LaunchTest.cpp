//===- LaunchTest.cpp - Launcher variables and the CPU's communicators ----===//
//
// readLauncherVariables (comm.h) reads torchrun's, mpirun's and srun's
// variables with every number range-checked; the CPU backend's launch
// services run every rank as a thread of this process.
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
                                          "SLURM_LOCALID"};

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

TEST_F(LauncherVariables, TheCpuBackendIgnoresLaunchers) {
  set({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}});
  LaunchEnvironment env;
  EXPECT_FALSE(cpu::readLaunchEnvironment(env));
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
