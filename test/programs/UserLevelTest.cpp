//===- UserLevelTest.cpp - User-level DP steps vs the f64 reference -------===//
//
// The tiny transformer compiled with `unit = #dp.unit<user, max_records =
// 2>` trains on a token file whose records name their users (12 users with
// 1 to 6 = 3k records, interleaved in the file). Each step's users and
// their at most k records are drawn with the program's own UserSampler
// keyed as the driver keys it; the f64 reference (PrivacyUnit::User) sums
// each user's per-record gradients and clips the sum, and the program's
// parameters after three steps must agree to 1e-10 (f64). The test also
// asserts what makes it able to fail: the steps clip some users and not
// others, include users with more than k records (so the choice of records
// matters) and users with fewer (padding slots inside a user), and the
// same batch clipped record by record would have moved the parameters
// measurably elsewhere.
//
//===----------------------------------------------------------------------===//

#include "ProcessHelpers.h"
#include "ProgramHarness.h"

#include "privacy/Sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

using namespace dpc::programs;
namespace ref = dpc::reference;

namespace {

constexpr int64_t kUsers = 12;
constexpr int64_t kMaxRecords = 2; // the recipes' max_records

/// User u has 1 + u % 6 records; record r of the file belongs to the user
/// the shuffled order gives it.
std::vector<int64_t> userOfRecords(uint64_t seed) {
  std::vector<int64_t> owner;
  for (int64_t u = 0; u < kUsers; ++u)
    for (int64_t i = 0; i < 1 + u % 6; ++i)
      owner.push_back(u);
  std::mt19937_64 rng(seed * 7 + 1);
  std::shuffle(owner.begin(), owner.end(), rng);
  return owner;
}

void append(std::string &out, const void *data, size_t bytes) {
  out.append(static_cast<const char *>(data), bytes);
}

/// A dpc-prepare token file (docs/data.md) of the text records with users:
/// record i is '\n', its bytes, '\n', every token in the loss, so that the
/// program reads the same inputs and targets as from the text file.
void writeTokenFile(const Records &records, const std::vector<int64_t> &users,
                    const std::string &path) {
  std::vector<int64_t> offsets = {0};
  std::vector<uint32_t> tokens;
  for (const std::string &line : records.lines) {
    tokens.push_back('\n');
    for (unsigned char c : line)
      tokens.push_back(c);
    tokens.push_back('\n');
    offsets.push_back(int64_t(tokens.size()));
  }
  const int64_t R = records.size(), N = int64_t(tokens.size());
  const int64_t bOffsets = 8 * (R + 1), bUsers = 8 * R, bTokens = 4 * N;
  auto range = [](int64_t begin, int64_t bytes) {
    return "[" + std::to_string(begin) + ", " + std::to_string(begin + bytes) +
           "]";
  };
  std::string header =
      "{\"__metadata__\": {\"format\": \"dpc-tokens\", \"format_version\": "
      "\"1\", \"vocab_size\": \"256\", \"eos_id\": \"10\", \"records\": \"" +
      std::to_string(R) + "\", \"tokens\": \"" + std::to_string(N) +
      "\", \"loss_tokens\": \"" + std::to_string(N) + "\", \"users\": \"" +
      std::to_string(kUsers) +
      "\", \"skipped_records\": \"0\"}, \"offsets\": {\"dtype\": \"I64\", "
      "\"shape\": [" +
      std::to_string(R + 1) + "], \"data_offsets\": " + range(0, bOffsets) +
      "}, \"users\": {\"dtype\": \"I64\", \"shape\": [" + std::to_string(R) +
      "], \"data_offsets\": " + range(bOffsets, bUsers) +
      "}, \"tokens\": {\"dtype\": \"U32\", \"shape\": [" + std::to_string(N) +
      "], \"data_offsets\": " + range(bOffsets + bUsers, bTokens) +
      "}, \"loss_mask\": {\"dtype\": \"U8\", \"shape\": [" + std::to_string(N) +
      "], \"data_offsets\": " + range(bOffsets + bUsers + bTokens, N) + "}}";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  std::string out;
  const uint64_t headerBytes = header.size();
  append(out, &headerBytes, 8);
  out += header;
  append(out, offsets.data(), 8 * offsets.size());
  append(out, users.data(), 8 * users.size());
  append(out, tokens.data(), 4 * tokens.size());
  out.append(size_t(N), '\1');
  std::ofstream(path, std::ios::binary) << out;
}

/// The records of each user in increasing order.
std::vector<std::vector<int64_t>>
recordsByUser(const std::vector<int64_t> &owner) {
  std::vector<std::vector<int64_t>> byUser(kUsers);
  for (size_t r = 0; r < owner.size(); ++r)
    byUser[owner[r]].push_back(int64_t(r));
  return byUser;
}

/// The slots of `step` as the program draws them (q = expected users / U).
std::vector<int64_t> userSlots(uint64_t seed, const std::vector<int64_t> &owner,
                               int64_t expectedUsers, int64_t step) {
  const double q = double(expectedUsers) / double(kUsers);
  return dprt::privacy::UserSampler(seed, recordsByUser(owner), kMaxRecords, q)
      .sample(step);
}

struct ReferenceRun {
  ref::Model model;
  std::vector<double> losses;
  int64_t users = 0, clippedUsers = 0, wholeUsers = 0;
  int64_t usersAboveK = 0, usersBelowK = 0;
};

ref::Recipe userRecipe(const ProgramId &id, int64_t expectedUsers) {
  ref::Recipe recipe = readRecipe(id).step;
  recipe.unit = ref::PrivacyUnit::User;
  const double q = double(expectedUsers) / double(kUsers);
  recipe.expectedBatch = q * double(kUsers);
  recipe.normRelErr = programNormRelErr(id);
  return recipe;
}

/// One reference step on the slots: slot i belongs to user group i / k, a
/// slot of -1 is padding (mask 0).
ref::StepResult referenceStep(ref::Model &m, const ProgramId &id,
                              const Records &records,
                              const std::vector<int64_t> &slots,
                              const ref::Recipe &recipe) {
  ref::Batch batch = referenceBatch(records, slots, modelTokens(id));
  Vec mask(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    batch.users.push_back(int64_t(i) / kMaxRecords);
    mask[i] = slots[i] >= 0 ? 1.0 : 0.0;
  }
  return m.dpStep(batch, mask, recipe);
}

ReferenceRun referenceSteps(const ProgramId &id, const Records &records,
                            const std::vector<int64_t> &owner, uint64_t seed,
                            int steps, const Tensors &initial) {
  const int64_t expectedUsers = readRecipe(id).expectedBatch;
  const ref::Recipe recipe = userRecipe(id, expectedUsers);
  ReferenceRun run{referenceModel(id, initial)};
  const auto byUser = recordsByUser(owner);
  for (int s = 1; s <= steps; ++s) {
    const std::vector<int64_t> slots = userSlots(seed, owner, expectedUsers, s);
    ref::StepResult r = referenceStep(run.model, id, records, slots, recipe);
    double sum = 0;
    int64_t real = 0;
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i] >= 0) {
        sum += r.loss[i];
        ++real;
      }
    run.losses.push_back(real ? sum / double(real) : std::nan(""));
    for (size_t u = 0; u < r.users.size(); ++u) {
      bool clipped = false;
      for (const auto &[name, c] : r.userClip)
        clipped = clipped || c[u] < 1.0;
      ++run.users;
      ++(clipped ? run.clippedUsers : run.wholeUsers);
      const int64_t n = int64_t(
          byUser[owner[slots[size_t(r.users[u]) * kMaxRecords]]].size());
      run.usersAboveK += n > kMaxRecords;
      run.usersBelowK += n < kMaxRecords;
    }
  }
  return run;
}

struct UserCase {
  const char *recipe;
  int ranks;
};

/// The same steps with each record clipped on its own (the record-level
/// reference on the user-level batches).
ref::Model recordLevelSteps(const ProgramId &id, const Records &records,
                            const std::vector<int64_t> &owner, uint64_t seed,
                            int steps, const Tensors &initial) {
  const int64_t expectedUsers = readRecipe(id).expectedBatch;
  ref::Model m = referenceModel(id, initial);
  ref::Recipe recipe = userRecipe(id, expectedUsers);
  recipe.unit = ref::PrivacyUnit::Sample;
  for (int step = 1; step <= steps; ++step)
    referenceStep(m, id, records, userSlots(seed, owner, expectedUsers, step),
                  recipe);
  return m;
}

class UserLevel : public ::testing::TestWithParam<UserCase> {};

TEST_P(UserLevel, MatchesTheReference) {
  const ProgramId id{"tinylm-f64", GetParam().recipe, GetParam().ranks};
  const int steps = 3;
  const int64_t expectedUsers = readRecipe(id).expectedBatch;
  // The first seed whose steps clip some users and leave others whole, and
  // bring users with more and with fewer than k records, and where clipping
  // records instead of users would move the parameters by more than 1e-3
  // (the seed stays an input: the choice looks only at the sampler, the
  // data and the initial parameters, never at a trained result).
  uint64_t seed = testSeed();
  dpctest::TempDir dir;
  Records records;
  std::vector<int64_t> owner;
  Tensors initial;
  ReferenceRun expected{ref::Model(1)};
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 40) << "no seed clips some users and not others, "
                              "or tells users from records";
    owner = userOfRecords(seed);
    records = makeRecords(id, seed, int64_t(owner.size()));
    runProgram(id, {"--steps", "0", "--seed", std::to_string(seed), "--save",
                    dir / ("initial" + std::to_string(seed))});
    initial = readCheckpointParams(
        latestCheckpoint(dir / ("initial" + std::to_string(seed))));
    expected = referenceSteps(id, records, owner, seed, steps, initial);
    const ref::Model perRecord =
        recordLevelSteps(id, records, owner, seed, steps, initial);
    double apart = 0;
    for (const std::string &name : perRecord.paramNames())
      apart = std::max(
          apart, relativeError(
                     difference(perRecord.param(name), initial.at(name)),
                     difference(expected.model.param(name), initial.at(name))));
    if (expected.clippedUsers > 0 && expected.wholeUsers > 0 &&
        expected.usersAboveK > 0 && expected.usersBelowK > 0 && apart > 1e-3)
      break;
    ++seed;
  }
  const std::string data = dir / "users.tokens";
  writeTokenFile(records, owner, data);
  const std::string s = std::to_string(seed);
  const std::string out =
      runProgram(id, {"--data", data, "--steps", std::to_string(steps),
                      "--seed", s, "--save", dir / "trained", "--metrics",
                      dir / "metrics.jsonl", "--sigma", "0"});
  EXPECT_NE(out.find("one user (at most 2 records) as the privacy unit"),
            std::string::npos)
      << out;
  const Tensors trained =
      readCheckpointParams(latestCheckpoint(dir / "trained"));

  double worstParams = 0, worstUpdate = 0;
  for (const std::string &name : expected.model.paramNames()) {
    const Vec &theta0 = initial.at(name);
    const double e =
        relativeError(trained.at(name), expected.model.param(name));
    const double u =
        relativeError(difference(trained.at(name), theta0),
                      difference(expected.model.param(name), theta0));
    EXPECT_LE(e, 1e-10) << "parameter " << name;
    EXPECT_LE(u, 1e-10) << "update of " << name;
    worstParams = std::max(worstParams, e);
    worstUpdate = std::max(worstUpdate, u);
  }
  const std::vector<double> users =
      metricValues(dir / "metrics.jsonl", "users");
  ASSERT_EQ(users.size(), size_t(steps));
  for (int step = 1; step <= steps; ++step)
    EXPECT_EQ(users[step - 1],
              double(userSlots(seed, owner, expectedUsers, step).size() /
                     kMaxRecords))
        << "step " << step;
  const std::vector<double> losses = metricLosses(dir / "metrics.jsonl");
  ASSERT_EQ(losses.size(), expected.losses.size());
  for (size_t i = 0; i < losses.size(); ++i) {
    if (std::isnan(expected.losses[i])) { // no user sampled: no loss
      EXPECT_TRUE(std::isnan(losses[i])) << "step " << i + 1;
      continue;
    }
    EXPECT_NEAR(losses[i], expected.losses[i],
                1e-10 * std::fabs(expected.losses[i]))
        << "step " << i + 1;
  }

  // Blindness: the same steps with each record clipped on its own.
  const ref::Model perRecord =
      recordLevelSteps(id, records, owner, seed, steps, initial);
  double distance = 0;
  for (const std::string &name : perRecord.paramNames())
    distance = std::max(
        distance,
        relativeError(difference(trained.at(name), initial.at(name)),
                      difference(perRecord.param(name), initial.at(name))));
  EXPECT_GT(distance, 1e-4) << "clipping records instead of users would not "
                               "have changed the result: the test is blind";
  std::printf("[user-level] %s seed %llu: parameters %.2e, updates %.2e; "
              "%lld users in %d steps, %lld clipped, %lld whole, %lld with "
              "more than k records, %lld with fewer; record-level clipping "
              "%.2e away\n",
              id.name().c_str(), static_cast<unsigned long long>(seed),
              worstParams, worstUpdate, static_cast<long long>(expected.users),
              steps, static_cast<long long>(expected.clippedUsers),
              static_cast<long long>(expected.wholeUsers),
              static_cast<long long>(expected.usersAboveK),
              static_cast<long long>(expected.usersBelowK), distance);
}

// Two ranks: the users' slots are spread over ranks and micro-steps in
// whole users (k divides the physical batch), each rank's norms its own.
INSTANTIATE_TEST_SUITE_P(ProgramStep, UserLevel,
                         ::testing::Values(UserCase{"user_sgd", 1},
                                           UserCase{"user_per_layer_sgd", 1},
                                           UserCase{"user_sgd", 2}),
                         [](const ::testing::TestParamInfo<UserCase> &i) {
                           return caseName("tinylm-f64", i.param.recipe) +
                                  "Ranks" + std::to_string(i.param.ranks);
                         });

// A run interrupted after step 1 and resumed draws the same users and the
// same records of each (the sampler is a pure function of key, step and
// user) and ends bitwise where the uninterrupted run ends; the checkpoint
// counts users, and the resumed run checks it against the data.
TEST(UserLevelResume, ResumedRunIsIdentical) {
  const ProgramId id{"tinylm-f64", "user_sgd", 1};
  const uint64_t seed = testSeed();
  dpctest::TempDir dir;
  const std::vector<int64_t> owner = userOfRecords(seed);
  writeTokenFile(makeRecords(id, seed, int64_t(owner.size())), owner,
                 dir / "users.tokens");
  const std::vector<std::string> common = {"--data",  dir / "users.tokens",
                                           "--seed",  std::to_string(seed),
                                           "--sigma", "0.5"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  runProgram(id, with({"--steps", "3", "--save", dir / "uninterrupted"}));
  runProgram(id, with({"--steps", "1", "--save", dir / "resumed"}));
  const std::string state =
      dpctest::readFile(latestCheckpoint(dir / "resumed") + "/state.json");
  EXPECT_NE(state.find("\"dataset_records\": " + std::to_string(kUsers)),
            std::string::npos)
      << state;
  runProgram(id, with({"--steps", "3", "--resume", dir / "resumed", "--save",
                       dir / "resumed"}));
  const Tensors a =
      readCheckpointParams(latestCheckpoint(dir / "uninterrupted"));
  const Tensors b = readCheckpointParams(latestCheckpoint(dir / "resumed"));
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, values] : a)
    EXPECT_TRUE(values == b.at(name)) << name << " differs after the resume";
}

// A program compiled for user-level DP refuses data without users.
TEST(UserLevelData, DataWithoutUsersIsAnError) {
  const ProgramId id{"tinylm-f64", "user_sgd", 1};
  dpctest::TempDir dir;
  const Records records = makeRecords(id, 1, 8);
  writeRecords(records, dir / "data.txt");
  dpctest::RunResult r = dpctest::runProgram(
      programPath(id), {"--data", dir / "data.txt", "--steps", "1"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("compiled for user-level DP"), std::string::npos)
      << r.err;
}

} // namespace
