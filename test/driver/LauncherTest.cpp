//===- LauncherTest.cpp - Training programs launched as processes ---------===//
//
// The fixture programs run as a cluster runs them: mpirun -np 2 starts two
// processes of the CPU backend that join through MPI. They must train the
// same bits as the same program with its two ranks as threads (both sum in
// rank order), report every rank's heartbeat, end a job with a hung or dead
// rank with a message naming the rank and the collective instead of
// hanging, and refuse launches that do not fit the program (exit status 2).
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"
#include "Json.h"
#include "ProcessHelpers.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

using namespace dpctest;
using dprt::driver::JsonValue;
using dprt::driver::resolveCheckpoint;

namespace {

const std::string kClassifier1 = DPC_FIXTURE_CLASSIFIER_1;
const std::string kClassifier2 = DPC_FIXTURE_CLASSIFIER_2;
const std::string kBigram2 = DPC_FIXTURE_BIGRAM_2;
const std::string kMpiexec = DPC_MPIEXEC;

/// Three classes in 4 features, as TrainingProgramTest writes them.
std::string classifierCsv(int records) {
  uint64_t state = 777;
  auto uniform = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) / 9007199254740992.0 * 2 - 1;
  };
  std::ostringstream os;
  char line[128];
  for (int i = 0; i < records; ++i) {
    const int label = i % 3;
    double f[4];
    for (int j = 0; j < 4; ++j)
      f[j] = (j == label ? 2.0 : 0.0) + 0.8 * uniform();
    std::snprintf(line, sizeof line, "%.5f,%.5f,%.5f,%.5f,%d\n", f[0], f[1],
                  f[2], f[3], label);
    os << line;
  }
  return os.str();
}

std::vector<JsonValue> readJsonLines(const std::string &path) {
  std::vector<JsonValue> lines;
  std::istringstream in(readFile(path));
  std::string line;
  while (std::getline(in, line))
    lines.push_back(JsonValue::parse(line));
  return lines;
}

/// `binary args` as `np` processes of mpirun (as root in containers, more
/// processes than cores, no core binding: ctest runs tests side by side),
/// within `limit` seconds; DPRT_TEST_FAULT is passed on when `env` sets it.
RunResult mpirun(int np, const std::string &binary,
                 const std::vector<std::string> &args,
                 const std::vector<std::string> &env = {}, int limit = 300) {
  std::vector<std::string> all = {std::to_string(limit),
                                  kMpiexec,
                                  "--allow-run-as-root",
                                  "--oversubscribe",
                                  "--bind-to",
                                  "none",
                                  "-x",
                                  "DPRT_TEST_FAULT",
                                  "-np",
                                  std::to_string(np),
                                  binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<std::string> withFault = env;
  bool hasFault = false;
  for (const std::string &e : env)
    hasFault |= e.rfind("DPRT_TEST_FAULT=", 0) == 0;
  if (!hasFault)
    withFault.push_back("DPRT_TEST_FAULT=");
  return runProgram("/usr/bin/timeout", all, withFault);
}

class Launcher : public ::testing::Test {
protected:
  void SetUp() override {
    csv_ = dir_ / "data.csv";
    writeFile(csv_, classifierCsv(240));
    text_ = dir_ / "corpus.txt";
    std::string text;
    const char *words[] = {"the cat sat", "a dog ran", "the sun set"};
    for (int i = 0; i < 150; ++i)
      text += std::string(words[i % 3]) + "\n";
    writeFile(text_, text);
    key_ = dir_ / "noise.key";
    writeFile(key_, std::string(64, 'c') + "\n");
  }

  /// Trains `binary` with `args` as threads and as 2 processes of mpirun,
  /// and expects the same checkpoint files and the same losses.
  void expectProcessesMatchThreads(const std::string &binary,
                                   const std::vector<std::string> &args) {
    auto withOutputs = [&](const std::string &name) {
      std::vector<std::string> all = args;
      all.insert(all.end(), {"--save", dir_ / (name + "-ck"), "--metrics",
                             dir_ / (name + ".jsonl"), "--quiet"});
      return all;
    };
    RunResult threads = runProgram(binary, withOutputs("threads"));
    ASSERT_EQ(threads.status, 0) << threads.err;
    RunResult processes = mpirun(2, binary, withOutputs("processes"));
    ASSERT_EQ(processes.status, 0) << processes.err;

    // Every shard file and the manifest (sharded checkpoints,
    // docs/training-program.md): each process wrote its own rank's file.
    for (const char *file :
         {"rank-00000-of-00002.safetensors", "rank-00001-of-00002.safetensors",
          "manifest.json"}) {
      const std::string a =
          readFile(resolveCheckpoint(dir_ / "threads-ck") + "/" + file);
      const std::string b =
          readFile(resolveCheckpoint(dir_ / "processes-ck") + "/" + file);
      EXPECT_EQ(a.size(), b.size()) << file;
      EXPECT_TRUE(a == b) << file << " differs between threads and processes";
    }
    const auto t = readJsonLines(dir_ / "threads.jsonl");
    const auto p = readJsonLines(dir_ / "processes.jsonl");
    ASSERT_EQ(t.size(), p.size());
    int sameLoss = 0;
    for (size_t i = 0; i < t.size(); ++i) {
      EXPECT_EQ(t[i].at("loss").number(), p[i].at("loss").number())
          << "step " << i + 1;
      EXPECT_EQ(t[i].at("epsilon").number(), p[i].at("epsilon").number());
      sameLoss += t[i].at("loss").number() == p[i].at("loss").number();
      // Processes report every rank's heartbeat; threads share one clock.
      EXPECT_EQ(t[i].find("ranks"), nullptr);
      ASSERT_NE(p[i].find("ranks"), nullptr) << "step " << i + 1;
      const auto &ranks = p[i].at("ranks").array();
      ASSERT_EQ(ranks.size(), 2u);
      for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(ranks[r].at("rank").integer(), r);
        EXPECT_GT(ranks[r].at("step_time_s").number(), 0);
        EXPECT_GT(ranks[r].at("memory_bytes").integer(), 0);
      }
    }
    std::printf("    2 processes vs 2 threads: %d of %zu step losses equal, "
                "checkpoints byte-identical: %s\n",
                sameLoss, t.size(), HasFailure() ? "no" : "yes");
  }

  TempDir dir_;
  std::string csv_, text_, key_;
};

} // namespace

TEST_F(Launcher, TwoProcessesTrainTheBitsOfTwoThreads) {
  expectProcessesMatchThreads(
      kClassifier2, {"--data", csv_, "--steps", "12", "--sigma", "1.5"});
}

// The language model draws its noise with the secure generator: every
// process must be given the same key.
TEST_F(Launcher, TwoProcessesTrainTheBitsOfTwoThreadsForTheLanguageModel) {
  expectProcessesMatchThreads(
      kBigram2, {"--data", text_, "--steps", "6", "--noise-key", key_});
}

TEST_F(Launcher, ASecureRunOfSeveralProcessesNeedsAKeyFile) {
  RunResult r = mpirun(2, kBigram2, {"--data", text_, "--steps", "2"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("needs the same secret key on every rank: pass "
                       "--noise-key FILE"),
            std::string::npos)
      << r.err;
}

// Rank 1 stops before a collective of step 3 and never comes back: rank 0
// gives up after --collective-timeout and names itself, the collective,
// the step and rank 1; mpirun then stops rank 1, which says where it was.
TEST_F(Launcher, AHungProcessEndsTheJobNamingTheRankAndTheCollective) {
  const auto begin = std::chrono::steady_clock::now();
  RunResult r = mpirun(
      2, kClassifier2,
      {"--data", csv_, "--steps", "6", "--quiet", "--collective-timeout", "3"},
      {"DPRT_TEST_FAULT=1:hang:3"}, 120);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  std::printf("    hung rank: job ended after %.1f s with status %d\n", seconds,
              r.status);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 124) << "the job hung until the test's time limit";
  EXPECT_NE(r.err.find("classifier-2: error: rank 0: "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" of step 3 did not finish within 3 s "
                       "(--collective-timeout): no message from rank 1"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("classifier-2: rank 1: stopped by SIGTERM in step 3, "
                       "outside collectives"),
            std::string::npos)
      << r.err;
}

// The same with the ranks as threads of one process: the waiting rank
// names the one that never came, and the process ends without it.
TEST_F(Launcher, AHungThreadEndsTheRunNamingTheRankAndTheCollective) {
  RunResult r = runProgram("/usr/bin/timeout",
                           {"120", kClassifier2, "--data", csv_, "--steps", "6",
                            "--quiet", "--collective-timeout", "2"},
                           {"DPRT_TEST_FAULT=1:hang:3"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("classifier-2: error: rank 0: "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" of step 3 did not finish within 2 s "
                       "(--collective-timeout): rank 1 has not reached it"),
            std::string::npos)
      << r.err;
}

// A process that dies (as a crash would): the job ends, and the survivor
// says where it was when it was stopped or gave up.
TEST_F(Launcher, ADeadProcessEndsTheJob) {
  RunResult r = mpirun(
      2, kClassifier2,
      {"--data", csv_, "--steps", "6", "--quiet", "--collective-timeout", "20"},
      {"DPRT_TEST_FAULT=1:exit:3"}, 120);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 124) << "the job hung until the test's time limit";
  const bool stopped = r.err.find("classifier-2: rank 0: stopped by SIGTERM") !=
                       std::string::npos;
  const bool gaveUp =
      r.err.find("classifier-2: error: rank 0: ") != std::string::npos;
  EXPECT_TRUE(stopped || gaveUp) << r.err;
}

TEST_F(Launcher, LaunchesThatDoNotFitTheProgramExitWithStatusTwo) {
  struct Case {
    const char *what;
    int processes; ///< 0: the program alone, with `env`
    std::string binary;
    std::vector<std::string> env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"3 processes for 2 ranks",
       3,
       kClassifier2,
       {},
       "mpirun started 3 processes (OMPI_COMM_WORLD_RANK="},
      {"3 processes for 2 ranks, the fix",
       3,
       kClassifier2,
       {},
       "but the program was compiled for 2 ranks: start 2 processes, or "
       "recompile with dpc --ranks 3"},
      {"2 processes for 1 rank",
       2,
       kClassifier1,
       {},
       "but the program was compiled for 1 rank:"},
      {"torchrun's processes on the CPU",
       0,
       kClassifier2,
       {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1"},
       "started by torchrun as one of 2 processes (RANK=1, WORLD_SIZE=2, "
       "LOCAL_RANK=1), but the CPU backend's processes join through MPI"},
      {"srun without MPI",
       0,
       kClassifier2,
       {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0"},
       "started by srun as one of 2 processes"},
      {"rank without world size",
       0,
       kClassifier2,
       {"RANK=0"},
       "RANK and WORLD_SIZE must be set together"},
      {"no local rank",
       0,
       kClassifier2,
       {"RANK=0", "WORLD_SIZE=2"},
       "LOCAL_RANK must be set beside RANK"},
      {"rank out of range",
       0,
       kClassifier2,
       {"SLURM_PROCID=4", "SLURM_NTASKS=2", "SLURM_LOCALID=0"},
       "SLURM_PROCID=4 is not below SLURM_NTASKS=2"},
      {"contradicting launchers",
       0,
       kClassifier2,
       {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "OMPI_COMM_WORLD_RANK=0",
        "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0"},
       "the launcher's variables contradict each other"},
  };
  for (const Case &c : cases) {
    const std::vector<std::string> args = {"--data", csv_, "--steps", "2",
                                           "--quiet"};
    RunResult r = c.processes > 0 ? mpirun(c.processes, c.binary, args)
                                  : runProgram(c.binary, args, c.env);
    EXPECT_EQ(r.status, 2) << c.what << ": " << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << c.what << ": " << r.err;
  }
  for (const char *timeout : {"0", "-1", "nan", "604801"}) {
    RunResult r = runProgram(kClassifier2, {"--data", csv_, "--steps", "1",
                                            "--collective-timeout", timeout});
    EXPECT_EQ(r.status, 2) << timeout << ": " << r.err;
    EXPECT_NE(r.err.find("--collective-timeout"), std::string::npos) << r.err;
  }
}
