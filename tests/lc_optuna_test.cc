// bench/lc_optuna.py, Optuna's samplers and pruners replayed on a table of learning curves as
// asha_bench --table replays hyperpack's, under each Optuna release users run (3.1, 4.6, 5.0;
// skipped, saying why, where a release is not at hand): it runs, charges within the budget,
// refuses GPSampler where the release has none, and `table` sets its runs beside others of the
// same budget only. Its serving and scoring (each proposal by the same nearest configuration as
// bench/curve_table.h, the scores by other seeds, the finalists) are checked once, under 3.1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "curve_table.h"
#include "test_util.h"

namespace hyperpack::bench {
namespace {

using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using Json = nlohmann::json;

// Six configurations of a log float and an int, three epochs each, final errors 0.1 .. 0.6.
std::string SmallTable() {
  Json configs = Json::array();
  for (int i = 0; i < 6; ++i)
    configs.push_back({{"params", {{"lr", std::pow(10.0, -4 + 0.7 * i)}, {"width", 10 + 19 * i}}},
                       {"error", {0.9 - 0.05 * i, 0.8 - 0.1 * i, 0.6 - 0.1 * i}},
                       {"seconds", {1.0, 1.0 + 0.1 * i, 1.0}}});
  return Json({{"family", "small"},
               {"epochs", 3},
               {"space",
                {{{"name", "lr"}, {"type", "float"}, {"low", 1e-4}, {"high", 1.0}, {"log", true}},
                 {{"name", "width"}, {"type", "int"}, {"low", 10}, {"high", 110}, {"log", false}}}},
               {"configs", configs}})
      .dump();
}

// Other seeds' trainings of SmallTable's configurations (offsets 0 and 1) whose second seed
// reverses the table's order: configuration 0 is the best again.
std::string ReversedRepeats() {
  Json repeats = {{"family", "small"}, {"of", 6}, {"offsets", {0, 1}}, {"configs", Json::array()}};
  for (int i = 0; i < 6; ++i)
    repeats["configs"].push_back({{"index", i}, {"repeats", {0.6 - 0.1 * i, 0.1 + 0.1 * i}}});
  return repeats.dump();
}

// Three other seeds of SmallTable's configurations: the two served to finalists' runs (0.05 +
// 0.01 i, then 0.07 + 0.01 i: no table final's value) and one to judge by, the table's own order.
Json ServedRepeats() {
  Json repeats = {
      {"family", "small"}, {"of", 6}, {"offsets", {1, 2, 3}}, {"configs", Json::array()}};
  for (int i = 0; i < 6; ++i)
    repeats["configs"].push_back(
        {{"index", i}, {"repeats", {0.05 + 0.01 * i, 0.07 + 0.01 * i, 0.6 - 0.1 * i}}});
  return repeats;
}

class LcOptunaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const testing::OptunaPython found = testing::FindOptunaPython(GetParam());
    if (found.skip) GTEST_SKIP() << found.why;
    ASSERT_FALSE(found.path.empty()) << found.why;
    python_ = found.path;
    table_ = dir_ / "table.json";
    WriteFile(table_, SmallTable());
  }

  testing::Ran Script(std::vector<std::string> args) {
    args.insert(args.begin(), {python_, std::string(HYPERPACK_SOURCE_DIR) + "/bench/lc_optuna.py"});
    return RunCommand(args, dir_.path().string());
  }

  // Python `code` with bench/lc_optuna.py imported as `m`; `args` are sys.argv[2:].
  testing::Ran Module(const std::string& code, std::vector<std::string> args = {}) {
    const std::string script =
        "import sys\nsys.path.insert(0, sys.argv[1])\nimport lc_optuna as m\n" + code;
    args.insert(args.begin(),
                {python_, "-c", script, std::string(HYPERPACK_SOURCE_DIR) + "/bench"});
    return RunCommand(args);
  }

  TempDir dir_;
  std::string python_, table_;
};

// How the replays are served and scored, which no Optuna release changes (the serving of
// proposals, the scores, the finalists, the shipped repeats): under Debian's Optuna (3.1) only.
class LcScoringTest : public LcOptunaTest {
 protected:
  // Both replays refuse `flag` (a way of serving fresh draws) without --fresh-draws.
  void ExpectRefusedWithoutFreshDraws(const std::string& flag) {
    auto alone = RunCommand(
        {ASHA_BENCH, "--table", table_, "--seeds", "1", "--methods", "random", "--" + flag});
    EXPECT_EQ(alone.exit_code, 2);
    EXPECT_THAT(alone.err, HasSubstr("--" + flag + " is a way of serving fresh draws"));
    auto py_alone = Script({"run", "--table", table_, "--methods", "random", "--seeds", "1",
                            "--" + flag, "--out", dir_ / "x.json"});
    EXPECT_NE(py_alone.exit_code, 0);
    EXPECT_THAT(py_alone.err, HasSubstr("--" + flag + " is a way of serving fresh draws"));
  }
};

TEST_P(LcOptunaTest, ReplaysEachMethodWithinTheBudgetOnTheTablesCurves) {
  std::string methods = "tpe+hyperband,tpe+median,random";
  if (GetParam() != "3.1") methods += ",gp+sha";
  const std::string out = dir_ / "optuna.json";
  auto ran = Script({"run", "--table", table_, "--seeds", "2", "--methods", methods,
                     "--budget-trials", "12", "--out", out});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json runs = Json::parse(testing::ReadFile(out));
  // 12 full runs of the mean (3.25 s) and a tenth of it per start, on 8 GPUs.
  EXPECT_NEAR(runs["horizon_s"].get<double>(), 12 * 3.25 * 1.1 / 8, 1e-9);
  std::set<double> finals;  // as the table holds them
  for (int i = 0; i < 6; ++i) finals.insert(0.6 - 0.1 * i);
  EXPECT_EQ(runs["best_final_error"].get<double>(), *finals.begin());
  ASSERT_EQ(runs["runs"].size(),
            2 * static_cast<size_t>(std::count(methods.begin(), methods.end(), ',') + 1));
  int completions = 0, measured = 0;
  for (const Json& r : runs["runs"]) {
    EXPECT_GE(r["trials"].get<int>(), 8) << r.dump();  // a trial per GPU at the start
    // The table holds 6 configurations: a run of 8 or more trials repeats some.
    const int configs = r["configs"].get<int>(), full = r["full_configs"].get<int>();
    EXPECT_GE(configs, 1) << r.dump();
    EXPECT_LE(configs, 6) << r.dump();
    EXPECT_LE(full, configs) << r.dump();
    EXPECT_LE(full, static_cast<int>(r["completions"].size())) << r.dump();
    EXPECT_EQ(full > 0, !r["completions"].empty()) << r.dump();
    // Distances to the incumbent in the 2-dimensional unit cube, once a trial has completed.
    for (const char* key : {"near_started", "near_full"}) {
      ASSERT_TRUE(r.contains(key)) << r.dump();
      if (r[key].is_null()) continue;
      EXPECT_GE(r[key].get<double>(), 0.0) << r.dump();
      EXPECT_LE(r[key].get<double>(), std::sqrt(2.0) + 1e-12) << r.dump();
      ++measured;
    }
    if (r["completions"].empty()) {
      EXPECT_TRUE(r["near_full"].is_null()) << r.dump();
    }
    // The share of trials begun at an edge of the cube.
    ASSERT_TRUE(r["at_bound"].is_number()) << r.dump();
    EXPECT_GE(r["at_bound"].get<double>(), 0.0) << r.dump();
    EXPECT_LE(r["at_bound"].get<double>(), 1.0) << r.dump();
    for (const Json& c : r["completions"]) {
      ++completions;
      EXPECT_LE(c[0].get<double>(), runs["horizon_s"].get<double>());
      EXPECT_GE(c[0].get<double>(), 0.325 + 3.0) << "a start and three epochs";
      EXPECT_EQ(finals.count(c[1].get<double>()), 1u) << c.dump();
    }
  }
  EXPECT_GT(completions, 0);
  EXPECT_GT(measured, 0) << "no run began a trial after one had completed";
  // Beside itself: the table names every method, with its seeds.
  auto table = Script({"table", out, "--reference", "optuna random"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("| optuna tpe+hyperband | 2 |"));
  // The mean regret at the whole budget follows the last budget's median [quartiles].
  EXPECT_THAT(table.out, ContainsRegex("\\] \\| ([0-9.e-]+|none) \\| ([0-9.]+|never) \\|"));
  // Trials, and the distinct configurations that served them.
  EXPECT_THAT(table.out, ContainsRegex("\\| [0-9]+ \\([1-6]\\) \\| [0-9]+ \\([0-6]\\) \\|"));
  // How near its incumbent each method searched, and how often at a bound.
  EXPECT_THAT(
      table.out,
      ContainsRegex("\\| [0-9]\\.[0-9][0-9], ([0-9]\\.[0-9][0-9]|\\?) \\| [01]\\.[0-9][0-9] \\|"));
}

// A replay is the seed's: Hyperband assigns each trial a bracket by a hash of the study's name,
// so a study named at random would prune differently from one run to the next.
TEST_P(LcOptunaTest, ReplaysTheSameSeedTheSameWayFromOneRunToTheNext) {
  std::vector<Json> trials;
  for (const char* name : {"a.json", "b.json"}) {
    const std::string out = dir_ / name;
    auto ran = Script({"run", "--table", table_, "--seeds", "4", "--methods",
                       "random+hyperband,tpe+hyperband", "--budget-trials", "40", "--out", out});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    Json runs = Json::parse(testing::ReadFile(out))["runs"];
    for (Json& r : runs) r.erase("seconds");  // the replay's own run time
    trials.push_back(runs);
  }
  EXPECT_EQ(trials[0], trials[1]);
}

// --first-seed F replays seeds F .. F+N-1 as a run of seeds from 0 replays them, in both replays,
// so that more seeds add to earlier runs.
TEST_P(LcScoringTest, MoreSeedsFromAFirstSeedAreTheSameRunsAsFromZero) {
  std::map<std::string, std::map<int, Json>> by_seed;  // "from0" / "from2" -> seed -> its run
  for (const auto& [tag, first, seeds] :
       {std::tuple<std::string, std::string, std::string>{"from0", "0", "4"},
        {"from2", "2", "2"}}) {
    const std::string optuna = dir_ / (tag + "_optuna.json"), ours = dir_ / (tag + "_ours.json");
    auto ran = Script({"run", "--table", table_, "--seeds", seeds, "--first-seed", first,
                       "--methods", "tpe+hyperband", "--budget-trials", "20", "--out", optuna});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", seeds, "--first-seed", first,
                      "--methods", "gp+asha", "--budget-trials", "20", "--threads", "1", "--json",
                      ours});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    for (const std::string& file : {optuna, ours}) {
      const Json parsed = Json::parse(testing::ReadFile(file));  // the loop below reads into it
      for (Json r : parsed["runs"]) {
        r.erase("seconds");
        by_seed[tag][r["seed"].get<int>() * 10 + (file == ours)] = r;
      }
    }
  }
  ASSERT_EQ(by_seed["from2"].size(), 4u);
  for (const auto& [key, run] : by_seed["from2"]) {
    EXPECT_GE(key / 10, 2);
    EXPECT_EQ(run, by_seed["from0"].at(key)) << "seed " << key / 10;
  }
}

TEST_P(LcScoringTest, ServesAProposalByTheSameNearestConfigurationAsTheCppReplay) {
  auto table = CurveTable::Parse(SmallTable(), "small");
  ASSERT_TRUE(table.ok()) << table.status().message();
  std::mt19937 rng(3);
  Json configs = Json::array();
  std::vector<size_t> expected;
  for (int i = 0; i < 40; ++i) {
    const double lr = std::pow(10.0, std::uniform_real_distribution<double>(-4, 0)(rng));
    const int64_t width = std::uniform_int_distribution<int64_t>(10, 110)(rng);
    configs.push_back({{"lr", lr}, {"width", width}});
    expected.push_back(table->Nearest({{"lr", lr}, {"width", width}}));
  }
  const std::string script =
      "import json\n"
      "t = m.Table(m.load_table(sys.argv[2]))\n"
      "print(json.dumps([t.nearest(p) for p in json.loads(sys.argv[3])]))\n";
  auto ran = Module(script, {table_, configs.dump()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(Json::parse(ran.out).get<std::vector<size_t>>(), expected);
}

// A trial is at a bound when a numeric parameter with more than two values is within 0.02 of
// one; a switch (an int of two values) always is, and does not count.
TEST_P(LcScoringTest, CountsTheTrialsBegunAtABoundOfAGradedParameter) {
  const std::string script =
      "space = [{'name': 'lr', 'type': 'float', 'low': 1e-4, 'high': 1.0, 'log': True},\n"
      "         {'name': 'width', 'type': 'int', 'low': 10, 'high': 110},\n"
      "         {'name': 'average', 'type': 'int', 'low': 0, 'high': 1}]\n"
      "xs = [[0.5, 0.5, 0], [0.01, 0.5, 1], [0.5, 0.995, 0], [0.3, 0.03, 1], [0.97, 0.5, 0]]\n"
      "print(m.at_bound([(0.0, x, False) for x in xs], space), m.at_bound([], space))\n";
  auto ran = Module(script);
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "0.4 None\n");
}

// Each time a report beat every earlier one: later, lower, one of the table's errors, the first no
// sooner than a start and an epoch, and the last no higher than the best completion.
void ExpectReportsImproving(const Json& run) {
  ASSERT_TRUE(run.contains("reported")) << run.dump();
  const Json& reported = run["reported"];
  ASSERT_FALSE(reported.empty()) << run.dump();
  EXPECT_GE(reported[0][0].get<double>(), 0.325 + 1.0 - 1e-9) << run.dump();
  for (size_t k = 0; k < reported.size(); ++k) {
    const double error = reported[k][1].get<double>();
    bool in_table = false;
    for (int i = 0; i < 6; ++i)
      for (double e : {0.9 - 0.05 * i, 0.8 - 0.1 * i, 0.6 - 0.1 * i})
        in_table = in_table || std::fabs(e - error) < 1e-9;
    EXPECT_TRUE(in_table) << error;
    if (k == 0) continue;
    EXPECT_GE(reported[k][0].get<double>(), reported[k - 1][0].get<double>()) << run.dump();
    // Lower: the table's equal errors (0.8 - 0.1 x 5, 0.6 - 0.1 x 3) may differ in their last bit
    // and be written alike, so within 1e-9.
    EXPECT_LT(error, reported[k - 1][1].get<double>() + 1e-9) << run.dump();
  }
  for (const Json& c : run["completions"])
    EXPECT_LE(reported.back()[1].get<double>(), c[1].get<double>()) << run.dump();
}

// asha_bench --json (hyperpack's replay) and lc_optuna.py run (Optuna's) keep the same reports,
// and `table` sets both side by side with how soon a report came within the gap.
TEST_P(LcOptunaTest, SetsBothReplaysSideBySideWithTheFirstReportWithinTheGap) {
  const std::string hyperpack = dir_ / "hyperpack.json", optuna = dir_ / "optuna.json";
  auto ran =
      RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods", "random,gp+asha",
                  "--budget-trials", "12", "--threads", "1", "--json", hyperpack});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  ran = Script({"run", "--table", table_, "--seeds", "2", "--methods", "random,tpe+hyperband",
                "--budget-trials", "12", "--out", optuna});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  // Parsed once each and kept: a loop over a temporary's member would read a destroyed value.
  const std::vector<Json> files = {Json::parse(testing::ReadFile(hyperpack)),
                                   Json::parse(testing::ReadFile(optuna))};
  for (const Json& f : files) {
    ASSERT_EQ(f["runs"].size(), 4u) << "two methods, two seeds";
    for (const Json& r : f["runs"]) {
      ExpectReportsImproving(r);
      // Each completion names the configuration that served it: the table's final error is its
      // own.
      ASSERT_FALSE(r["completions"].empty());
      ASSERT_EQ(r["completed_configs"].size(), r["completions"].size());
      for (size_t k = 0; k < r["completions"].size(); ++k)
        EXPECT_NEAR(r["completions"][k][1].get<double>(),
                    0.6 - 0.1 * r["completed_configs"][k].get<int>(), 1e-12);
    }
  }
  WriteFile(dir_ / "repeats.json", ReversedRepeats());
  auto table = Script(
      {"table", hyperpack, optuna, "--reference", "random", "--repeats", dir_ / "repeats.json"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              HasSubstr("share of the budget to a report within 0.005 of the best (0.105)"));
  EXPECT_THAT(table.out, HasSubstr("less the lowest such mean (0.1)"));
  EXPECT_THAT(table.out, HasSubstr("| the best it completed, so scored (median at the whole "
                                   "budget) |"));
  const std::string share = "(0\\.[0-9]+|1|never)", regret = "(0|0\\.[0-9]+|none)";
  for (const char* method : {"random", "gp\\+asha", "optuna random"}) {
    EXPECT_THAT(table.out, ContainsRegex(std::string("\\| ") + method + " \\|[^\n]*\\| " + share +
                                         " \\[" + share + ", " + share + "\\] \\|\n"));
    EXPECT_THAT(table.out, ContainsRegex(std::string("\n\\| ") + method + " \\| " + regret +
                                         " \\[" + regret + ", " + regret + "\\] \\|"));
  }
}

// A run's choice by a time is its completed trial with the lowest error seen (the first of
// equals), scored by the other seeds' mean for that configuration; a lucky draw scores worse than
// the trial it displaced. A repeats file must cover the table's every configuration.
TEST_P(LcScoringTest, ScoresARunsChoiceByOtherSeedsTrainingsOfIt) {
  Json partial = {
      {"family", "small"}, {"of", 6}, {"offsets", {0, 1, 2}}, {"configs", Json::array()}};
  for (int i = 0; i < 6; ++i)
    partial["configs"].push_back(
        {{"index", i}, {"repeats", {0.5, 0.3 - 0.02 * i, 0.1 + 0.04 * i}}});
  WriteFile(dir_ / "all.json", partial.dump());
  partial["configs"].erase(5);
  WriteFile(dir_ / "five.json", partial.dump());
  const std::string script =
      "e = m.read_expected(sys.argv[2], 'small')\n"
      "print(' '.join(f'{e[i]:.2f}' for i in range(6)))\n"
      "run = {'completions': [[1, 0.2], [3, 0.1], [5, 0.1]], 'completed_configs': [2, 4, 5]}\n"
      "best = min(e.values())\n"
      "print(' '.join(f'{m.expected_regret_at(run, t, e, best):.2f}' for t in (0.5, 2, 4, 6)))\n"
      "for path, family in ((sys.argv[3], 'small'), (sys.argv[2], 'other')):\n"
      "    try:\n"
      "        m.read_expected(path, family)\n"
      "    except SystemExit as x:\n"
      "        print(x)\n";
  auto ran = Module(script, {dir_ / "all.json", dir_ / "five.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  // Means over offsets 1 and 2 only: 0.2 + 0.01 i; the best is configuration 0's 0.20.
  EXPECT_THAT(ran.out, HasSubstr("0.20 0.21 0.22 0.23 0.24 0.25\ninf 0.02 0.04 0.04\n"));
  EXPECT_THAT(ran.out, HasSubstr("5 of the table's 6 configurations; --repeats needs every one"));
  EXPECT_THAT(ran.out, HasSubstr("repeats of small, not of other"));
}

// --judge names the offsets to judge by (older runs' commands keep their numbers as the repeats
// files grow); the table's own seed and those served to finalists saw the runs and are refused.
TEST_P(LcScoringTest, JudgesByTheOffsetsItIsToldNeverByOnesTheRunsSaw) {
  Json repeats = {
      {"family", "small"}, {"of", 6}, {"offsets", {0, 1, 2, 3}}, {"configs", Json::array()}};
  for (int i = 0; i < 6; ++i)
    repeats["configs"].push_back(
        {{"index", i}, {"repeats", {0.5, 0.3 - 0.02 * i, 0.1 + 0.04 * i, 0.2 + 0.01 * i}}});
  WriteFile(dir_ / "repeats.json", repeats.dump());
  const std::string script =
      "def show(e):\n"
      "    print(' '.join(f'{e[i]:.3f}' for i in range(6)))\n"
      "path = sys.argv[2]\n"
      "show(m.read_expected(path, 'small'))\n"
      "show(m.read_expected(path, 'small', 1))\n"
      "show(m.read_expected(path, 'small', 1, m.parse_offsets('2')))\n"
      "show(m.read_expected(path, 'small', 0, m.parse_offsets('1,3')))\n"
      "print(m.parse_offsets('3-6'))\n"
      "for served, judge in ((0, '0'), (1, '1'), (1, '2,4'), (0, 'x'), (0, '2,2')):\n"
      "    try:\n"
      "        m.read_expected(path, 'small', served, m.parse_offsets(judge))\n"
      "    except SystemExit as x:\n"
      "        print(x)\n";
  auto ran = Module(script, {dir_ / "repeats.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_THAT(ran.out, HasSubstr("0.200 0.210 0.220 0.230 0.240 0.250\n"  // offsets 1-3
                                 "0.150 0.175 0.200 0.225 0.250 0.275\n"  // 2-3: after 1 served
                                 "0.100 0.140 0.180 0.220 0.260 0.300\n"  // 2 alone
                                 "0.250 0.245 0.240 0.235 0.230 0.225\n"  // 1 and 3
                                 "[3, 4, 5, 6]\n"));
  EXPECT_THAT(ran.out, HasSubstr("--judge 0: the table's own seed"));
  EXPECT_THAT(ran.out, HasSubstr("--judge 1: served to the runs' finalists; judge by offsets "
                                 "the runs did not see (2,3)"));
  EXPECT_THAT(ran.out,
              HasSubstr("--judge 4: " + (dir_ / "repeats.json") + " has offsets [0, 1, 2, 3]"));
  EXPECT_THAT(ran.out, HasSubstr("--judge x: expected distinct offsets"));
  EXPECT_THAT(ran.out, HasSubstr("--judge 2,2: expected distinct offsets"));
  // The subcommands take it and say what they judged by.
  const std::string runs = dir_ / "optuna.json";
  ASSERT_EQ(Script({"run", "--table", table_, "--seeds", "1", "--methods", "random",
                    "--budget-trials", "12", "--out", runs})
                .exit_code,
            0);
  auto table = Script({"table", runs, "--reference", "optuna random", "--repeats",
                       dir_ / "repeats.json", "--judge", "3"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("(judged by offsets 3)"));
  EXPECT_THAT(table.out, HasSubstr("less the lowest such mean (0.2)"));
  auto fin = Script(
      {"finalists", runs, "--table", table_, "--repeats", dir_ / "repeats.json", "--judge", "3"});
  ASSERT_EQ(fin.exit_code, 0) << fin.err;
  EXPECT_THAT(fin.out, HasSubstr("again with offset 1, scored by the mean of offsets 3,"));
}

// A run that trains its k best completed configurations again before the budget ends: chosen
// from what had completed by the budget less the longest of their runs and a start, by the mean
// of two draws, scored by a third seed; the plain choice where nothing had completed that early.
TEST_P(LcScoringTest, ChoosesAmongTheFinalistsByTheMeanOfTwoDraws) {
  const std::string script =
      "run = {'completions': [[1, 0.30], [2, 0.20], [3, 0.25], [4, 0.22]],\n"
      "       'completed_configs': [0, 1, 2, 3]}\n"
      "full = {c: 1.0 for c in range(4)}\n"
      "again = {0: 0.28, 1: 0.40, 2: 0.21, 3: 0.22}\n"
      "judge = {0: 0.5, 1: 0.6, 2: 0.1, 3: 0.3}\n"
      "print(' '.join(f'{m.finalists_at(run, t, 3, full, 1.0, again, judge):.2f}'\n"
      "               for t in (10, 4.5, 2.5, 0.5)))\n";
  auto ran = Module(script);
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  // t = 10: configurations 1, 3, 2 by 8 s, means 0.30, 0.22, 0.23: 3, judged 0.3. t = 4.5: by
  // 2.5 s only 1 and 0 (means 0.30, 0.29): 0, judged 0.5. t = 2.5: nothing by 0.5 s, the plain
  // choice, 1 (0.6). t = 0.5: nothing completed.
  EXPECT_EQ(ran.out, "0.30 0.50 0.60 inf\n");
  // The re-runs are the first other seed's; the judge is the mean of the seeds after it.
  auto split = Module(
      "r = {'offsets': [0, 1, 3, 4], 'configs': [{'index': 5, 'repeats': [0.9, 0.2, 0.3, 0.6]}]}\n"
      "again, judge = m.serve_and_judge(r, [1, 2, 3])\n"
      "print(again, {c: round(v, 6) for c, v in judge.items()})\n");
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_EQ(split.out, "{5: 0.2} {5: 0.45}\n");
  // The subcommand wants a second seed besides the table's own to judge by.
  WriteFile(dir_ / "one.json", ReversedRepeats());
  const std::string runs = dir_ / "optuna.json";
  ASSERT_EQ(Script({"run", "--table", table_, "--seeds", "1", "--methods", "random",
                    "--budget-trials", "12", "--out", runs})
                .exit_code,
            0);
  auto refused = Script({"finalists", runs, "--table", table_, "--repeats", dir_ / "one.json"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("finalists need two seeds besides the table's own"));
}

// asha_bench's method NAME:fK runs the shipped budget.finalists: a finalist is served its
// configuration's curve ending at the repeats' first other seed, a third run at the second, each
// run keeps its study's own choice after every completion, and `table` judges the runs by the
// seeds after the served ones.
TEST_P(LcScoringTest, ReplaysFinalistsWithOtherSeedsAndJudgesByTheSeedsAfterThem) {
  const Json repeats = ServedRepeats();
  WriteFile(dir_ / "repeats.json", repeats.dump());
  const std::string runs = dir_ / "hyperpack.json";
  auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods",
                         "random,random:f2", "--budget-trials", "40", "--threads", "1", "--repeats",
                         dir_ / "repeats.json", "--json", runs});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json j = Json::parse(testing::ReadFile(runs));
  EXPECT_EQ(j["repeats_served"], 2);
  int served = 0, third = 0;
  for (const Json& r : j["runs"]) {
    const bool finalists = r["method"] == "random:f2";
    EXPECT_EQ(r["finalists"], finalists ? 2 : 0);
    ASSERT_FALSE(r["choices"].empty());
    for (size_t k = 0; k < r["completions"].size(); ++k) {
      const int c = r["completed_configs"][k].get<int>();
      const double v = r["completions"][k][1].get<double>();
      if (std::abs(v - (0.05 + 0.01 * c)) < 1e-9)
        ++served;
      else if (std::abs(v - (0.07 + 0.01 * c)) < 1e-9)
        ++third;
      else
        EXPECT_NEAR(v, 0.6 - 0.1 * c, 1e-9);
    }
  }
  EXPECT_GE(served, 2) << "each run with finalists served its re-runs another seed's draw";
  EXPECT_GE(third, 1) << "a slot left idle at the end trained a finalist a third time";
  EXPECT_LE(third, served);
  auto table = Script({"table", runs, "--reference", "random", "--repeats", dir_ / "repeats.json"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out,
              HasSubstr("(the first 2 served to finalists, judged by the seeds after them)"));
  EXPECT_THAT(table.out, HasSubstr("| random:f2 |"));

  Json other = repeats;
  other["family"] = "large";
  WriteFile(dir_ / "other.json", other.dump());
  for (const auto& [methods, why] :
       {std::pair<std::string, std::string>{"random:f2", "repeats of 'large', not of 'small'"},
        {"random:fx", "':fx' is not :fK (K finalists, 1-100), :aN"},
        {"random:f2:a1", "':a1' is not :fK (K finalists, 1-100), :aN (the mean of the last N"},
        {"random:r0", "or :rK (re-run the K best as they rank, 1-100)"}}) {
    auto refused = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "1", "--methods", methods,
                               "--repeats", dir_ / "other.json"});
    EXPECT_EQ(refused.exit_code, 2) << methods;
    EXPECT_THAT(refused.err, HasSubstr(why));
  }
}

// With --fresh-draws both replays serve each further trial of a configuration (a proposal
// nearest one already served) its next draw, the table's own and the repeats' first two other
// seeds in turn, as a new training would; without it, the first trial's curve again. `table`
// refuses to set runs of the two rules side by side.
TEST_P(LcScoringTest, ServesEachFurtherTrialOfAConfigurationItsNextDrawWithFreshDraws) {
  WriteFile(dir_ / "repeats.json", ServedRepeats().dump());
  const std::string ours = dir_ / "ours.json", optuna = dir_ / "optuna.json";
  const std::string plain = dir_ / "plain.json";
  auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods", "random",
                         "--budget-trials", "40", "--threads", "1", "--repeats",
                         dir_ / "repeats.json", "--fresh-draws", "--json", ours});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto run = Script({"run", "--table", table_, "--methods", "random", "--seeds", "2",
                     "--fresh-draws", "--repeats", dir_ / "repeats.json", "--out", optuna});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto old =
      Script({"run", "--table", table_, "--methods", "random", "--seeds", "1", "--out", plain});
  ASSERT_EQ(old.exit_code, 0) << old.err;
  for (const std::string& path : {ours, optuna, plain}) {
    const Json j = Json::parse(testing::ReadFile(path));
    const bool fresh = path != plain;
    EXPECT_EQ(j["fresh_draws"], fresh) << path;
    EXPECT_EQ(j["repeats_served"], fresh ? 2 : 0) << path;
    for (const Json& r : j["runs"]) {
      EXPECT_EQ(r.contains("completed_draws"), fresh) << path;
      if (fresh) EXPECT_EQ(r["completed_draws"].size(), r["completions"].size()) << path;
    }
    for (const Json& r : j["runs"]) {
      std::map<int, std::set<int>> draws;  // by configuration: 0 the table's own, 1 and 2 served
      for (size_t k = 0; k < r["completions"].size(); ++k) {
        const int c = r["completed_configs"][k].get<int>();
        const double v = r["completions"][k][1].get<double>();
        const double of[] = {0.6 - 0.1 * c, 0.05 + 0.01 * c, 0.07 + 0.01 * c};
        if (c == 5) continue;  // its own draw, 0.1, is also its first served one
        const int d =
            static_cast<int>(std::find_if(std::begin(of), std::end(of),
                                          [&](double x) { return std::abs(x - v) < 1e-9; }) -
                             std::begin(of));
        ASSERT_LT(d, 3) << path << ": configuration " << c << " completed at " << v;
        draws[c].insert(d);
        // The runs say which draw each completion was served (with fresh draws only).
        if (fresh) EXPECT_EQ(r["completed_draws"][k], d) << path << ": completion " << k;
      }
      for (const auto& [c, seen] : draws) {
        const auto n = std::count(r["completed_configs"].begin(), r["completed_configs"].end(), c);
        if (!fresh) EXPECT_EQ(seen, std::set<int>{0}) << path << ": configuration " << c;
        if (fresh && n >= 4) EXPECT_EQ(seen.size(), 3u) << path << ": configuration " << c;
      }
    }
  }
  auto mixed =
      Script({"table", optuna, plain, "--reference", "random", "--repeats", dir_ / "repeats.json"});
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_THAT(mixed.err, HasSubstr("plain.json was replayed without --fresh-draws"));
  auto lone = RunCommand({ASHA_BENCH, "--seeds", "1", "--methods", "random", "--fresh-draws"});
  EXPECT_EQ(lone.exit_code, 2);
  EXPECT_THAT(lone.err, HasSubstr("--fresh-draws serves a table's repeats: pass --table too"));
}

// Two other seeds' whole curves of SmallTable's configurations (offsets 7 and 8), ending where
// `served`'s first two seeds do, each first epoch (0.001 and 0.002 above 0.001 i) below every
// error the table holds.
Json WholeCurves(const Json& served) {
  Json kept = {{"family", "small"}, {"of", 6}, {"configs", Json::array()}};
  kept["offsets"] = kept["curve_offsets"] = Json::array({7, 8});
  for (const Json& c : served["configs"]) {
    const double i = c["index"].get<int>();
    const Json& r = c["repeats"];
    kept["configs"].push_back(
        {{"index", c["index"]},
         {"repeats", {r[0], r[1]}},
         {"curves", {{0.001 * (i + 1), 0.03, r[0]}, {0.002 + 0.001 * i, 0.04, r[1]}}}});
  }
  return kept;
}

// With --draw-curves too, a fresh draw is another seed's whole curve (lc_table.py repeats
// --curves; here offsets 7 and 8, ending where the repeats' served seeds do), which a method sees
// epoch by epoch: their first epochs (0.001 and 0.002 above 0.001 i) are below every error the
// table holds, so they show among the improving reports, and only then. The final errors, and so
// the random searches' completions, are those of --fresh-draws alone. The two rules are not set
// side by side.
TEST_P(LcScoringTest, ServesAWholeOtherTrainingWithDrawCurves) {
  const std::string finals = dir_ / "finals.json", curves = dir_ / "curves.json";
  WriteFile(finals, ServedRepeats().dump());
  WriteFile(curves, WholeCurves(ServedRepeats()).dump());
  std::map<std::string, Json> files;
  for (const std::string tag : {"", "_c"}) {
    const std::string ours = dir_ / ("ours" + tag + ".json");
    const std::string optuna = dir_ / ("optuna" + tag + ".json");
    std::vector<std::string> a = {ASHA_BENCH,  "--table",       table_,      "--seeds", "2",
                                  "--methods", "random",        "--threads", "1",       "--repeats",
                                  finals,      "--fresh-draws", "--json",    ours};
    std::vector<std::string> o = {"run",       "--table", table_,  "--methods",
                                  "random",    "--seeds", "2",     "--fresh-draws",
                                  "--repeats", finals,    "--out", optuna};
    if (!tag.empty()) {
      a.push_back("--draw-curves=" + curves);
      o.insert(o.end(), {"--draw-curves", curves});
    }
    auto ran = RunCommand(a);
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    auto run = Script(o);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    files["ours" + tag] = Json::parse(testing::ReadFile(ours));
    files["optuna" + tag] = Json::parse(testing::ReadFile(optuna));
  }
  for (const std::string name : {"ours", "optuna"}) {
    const Json &plain = files[name], &whole = files[name + "_c"];
    EXPECT_EQ(plain["draw_curves"], false) << name;
    EXPECT_EQ(whole["draw_curves"], true) << name;
    ASSERT_EQ(plain["runs"].size(), whole["runs"].size());
    int early = 0;
    for (size_t k = 0; k < whole["runs"].size(); ++k) {
      const Json &a = whole["runs"][k]["completions"], &b = plain["runs"][k]["completions"];
      ASSERT_EQ(a.size(), b.size()) << name;
      for (size_t c = 0; c < a.size(); ++c)  // the finals' rule adds a shift: within rounding
        EXPECT_NEAR(a[c][1].get<double>(), b[c][1].get<double>(), 1e-12) << name << " " << c;
      for (const Json& r : plain["runs"][k]["reported"]) EXPECT_GE(r[1].get<double>(), 0.05);
      for (const Json& r : whole["runs"][k]["reported"]) early += r[1].get<double>() < 0.0075;
    }
    EXPECT_GE(early, 2) << name << ": a served seed's first epoch was reported in each run";
  }
  auto mixed = Script({"table", dir_ / "optuna_c.json", dir_ / "optuna.json", "--reference",
                       "random", "--repeats", finals});
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_THAT(mixed.err, HasSubstr("optuna.json was replayed without --draw-curves"));
}

// With --rotate-draws the draw a configuration is first served turns with the seed: its k-th
// trial is served draw (seed + configuration + k) mod 3, in both replays, so that over seeds the
// table's own training is not always the one a configuration is judged by first. Random search
// prunes nothing, so its k-th completion of a configuration is its k-th trial.
TEST_P(LcScoringTest, TurnsTheFirstDrawWithTheSeedWithRotateDraws) {
  const std::string finals = dir_ / "finals.json";
  WriteFile(finals, ServedRepeats().dump());
  const std::string ours = dir_ / "ours.json", optuna = dir_ / "optuna.json";
  auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "3", "--first-seed", "4",
                         "--methods", "random", "--threads", "1", "--repeats", finals,
                         "--fresh-draws", "--rotate-draws", "--json", ours});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  auto run =
      Script({"run", "--table", table_, "--methods", "random", "--seeds", "3", "--first-seed", "4",
              "--fresh-draws", "--rotate-draws", "--repeats", finals, "--out", optuna});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const std::string& path : {ours, optuna}) {
    const Json j = Json::parse(testing::ReadFile(path));
    EXPECT_EQ(j["rotate_draws"], true) << path;
    std::set<int> first;  // the draws first served, over runs and configurations
    for (const Json& r : j["runs"]) {
      const int seed = r["seed"].get<int>();
      std::map<int, int> visits;
      for (size_t k = 0; k < r["completions"].size(); ++k) {
        const int c = r["completed_configs"][k].get<int>();
        const int draw = (seed + c + visits[c]++) % 3;
        if (visits[c] == 1) first.insert(draw);
        EXPECT_EQ(r["completed_draws"][k], draw) << path << ": seed " << seed << ", " << k;
        const double of[] = {0.6 - 0.1 * c, 0.05 + 0.01 * c, 0.07 + 0.01 * c};
        EXPECT_NEAR(r["completions"][k][1].get<double>(), of[draw], 1e-9) << path << " " << k;
      }
    }
    EXPECT_EQ(first, (std::set<int>{0, 1, 2})) << path;
  }
  auto plain = Script({"run", "--table", table_, "--methods", "random", "--seeds", "1",
                       "--fresh-draws", "--repeats", finals, "--out", dir_ / "plain.json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto mixed =
      Script({"table", optuna, dir_ / "plain.json", "--reference", "random", "--repeats", finals});
  EXPECT_NE(mixed.exit_code, 0);
  EXPECT_THAT(mixed.err, HasSubstr("plain.json was replayed without --rotate-draws"));
  ExpectRefusedWithoutFreshDraws("rotate-draws");
}

// With --model-choice each run is written again as NAME~model: the same run, its choice at the end
// the configuration tuner::RecommendByModel recommends. On a table without noise whose errors fall
// along the configurations, that is the study's own choice, the best single run.
TEST_P(LcScoringTest, WritesEachRunAgainChosenByTheModelWithModelChoice) {
  const std::string ours = dir_ / "ours.json";
  auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods", "random",
                         "--threads", "1", "--model-choice", "--json", ours});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json runs = Json::parse(testing::ReadFile(ours))["runs"];
  ASSERT_EQ(runs.size(), 4u);
  for (size_t i = 0; i < runs.size(); i += 2) {
    const Json &own = runs[i], &model = runs[i + 1];
    EXPECT_EQ(own["method"], "random");
    EXPECT_EQ(model["method"], "random~model");
    EXPECT_EQ(model["seed"], own["seed"]);
    EXPECT_EQ(model["completions"], own["completions"]);
    ASSERT_GE(own["completions"].size(), 8u);  // enough runs for a model
    EXPECT_EQ(model["choices"], own["choices"]);
    EXPECT_EQ(own["choices"].back()[1], 5);  // the table's best, error 0.1
  }
  auto plain = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods", "random",
                           "--threads", "1", "--json", ours});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(Json::parse(testing::ReadFile(ours))["runs"].size(), 2u);
}

// NAME:rK runs budget.rerun_top K: configurations among the K best train again (served their next
// draw), and the study's choice at the end is the model's, as --model-choice's NAME~model is.
TEST_P(LcScoringTest, RerunTopTrainsTheBestAgainAndChoosesAsTheModelDoes) {
  const std::string finals = dir_ / "finals.json", ours = dir_ / "ours.json";
  WriteFile(finals, ServedRepeats().dump());
  auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "2", "--methods", "random:r3",
                         "--threads", "1", "--repeats", finals, "--fresh-draws", "--model-choice",
                         "--json", ours});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json runs = Json::parse(testing::ReadFile(ours))["runs"];
  ASSERT_EQ(runs.size(), 4u);
  for (size_t i = 0; i < runs.size(); i += 2) {
    const Json &own = runs[i], &model = runs[i + 1];
    ASSERT_EQ(own["method"], "random:r3");
    EXPECT_GT(own["reruns"].get<int>(), 0) << "the best configurations trained again";
    EXPECT_LE(own["reruns"].get<int>(), 6) << "each of the table's six at most once";
    EXPECT_EQ(own["choices"].back(), model["choices"].back());
  }
}

// --draw-curves wants two seeds' whole curves, and fresh draws to serve them.
TEST_P(LcScoringTest, RefusesDrawCurvesWithoutTwoSeedsCurvesOrFreshDraws) {
  const std::string finals = dir_ / "finals.json";
  WriteFile(finals, ServedRepeats().dump());
  auto no_curves = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "1", "--methods", "random",
                               "--repeats", finals, "--fresh-draws", "--draw-curves=" + finals});
  EXPECT_EQ(no_curves.exit_code, 2);
  EXPECT_THAT(no_curves.err, HasSubstr("expected the whole curves of 2 seeds (curve_offsets"));
  auto py_no_curves =
      Script({"run", "--table", table_, "--methods", "random", "--seeds", "1", "--fresh-draws",
              "--draw-curves", finals, "--repeats", finals, "--out", dir_ / "x.json"});
  EXPECT_NE(py_no_curves.exit_code, 0);
  EXPECT_THAT(py_no_curves.err, HasSubstr("expected the whole curves of 2 seeds (curve_offsets"));
  ExpectRefusedWithoutFreshDraws("draw-curves");
}

// A method whose study acts at its budget's end (finalists) is judged at a part of the budget by a
// study given that part, where one is at hand, not by the whole budget's study read at that time;
// a file of any other budget is still refused.
TEST_P(LcScoringTest, JudgesAPartOfTheBudgetByAStudyGivenThatPart) {
  WriteFile(dir_ / "repeats.json", ServedRepeats().dump());
  std::map<std::string, std::string> runs;
  for (const char* budget : {"40", "20", "12"}) {
    runs[budget] = dir_ / (std::string("b") + budget + ".json");
    auto ran = RunCommand({ASHA_BENCH, "--table", table_, "--seeds", "3", "--methods", "random:f2",
                           "--budget-trials", budget, "--threads", "1", "--repeats",
                           dir_ / "repeats.json", "--json", runs[budget]});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
  }
  // A row's cells: "| random:f2 | 3 | <at 0.5> | <at 1> |" in the first table.
  auto cells = [](const std::string& out) {
    const size_t at = out.find("| random:f2 | 3 | ");
    EXPECT_NE(at, std::string::npos) << out;
    std::vector<std::string> found;
    size_t from = at + std::string("| random:f2 | 3 | ").size();
    for (int k = 0; k < 2 && at != std::string::npos; ++k) {
      const size_t end = out.find(" | ", from);
      found.push_back(out.substr(from, end - from));
      from = end + 3;
    }
    return found;
  };
  const std::vector<std::string> common = {"--reference", "random:f2", "--budgets",
                                           "0.5,1",       "--repeats", dir_ / "repeats.json"};
  auto Table = [&](std::vector<std::string> files) {
    files.insert(files.begin(), "table");
    files.insert(files.end(), common.begin(), common.end());
    return Script(files);
  };
  auto whole = Table({runs["40"]}), half = Table({runs["20"]}),
       both = Table({runs["40"], runs["20"]});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(half.exit_code, 0) << half.err;
  ASSERT_EQ(both.exit_code, 0) << both.err;
  const auto w = cells(whole.out), h = cells(half.out), b = cells(both.out);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], h[1] + "*") << both.out;  // the half-budget study at its end
  EXPECT_EQ(b[1], w[1]);                    // the whole budget's own
  EXPECT_THAT(both.out, HasSubstr("\\* a study given that part of the budget"));
  EXPECT_THAT(whole.out, ::testing::Not(HasSubstr("a study given that part")));
  auto other = Table({runs["40"], runs["12"]});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.err, HasSubstr("nor one of --budgets' shares of it (0.5, 1)"));
  auto part_only = Script({"table", runs["20"], runs["40"], "--reference", "random:f2", "--budgets",
                           "0.5,1", "--repeats", "none"});
  EXPECT_EQ(part_only.exit_code, 0) << part_only.err;  // the longest is the whole, in any order
}

// A runs file of SmallTable given `horizon` seconds; each run its method, seed and choices
// ([time, configuration] pairs), which is all `paired` reads of a run.
Json ChoiceRuns(double horizon, const std::vector<std::tuple<std::string, int, Json>>& runs) {
  Json out = {{"tool", "hyperpack"},
              {"family", "small"},
              {"gpus", 8},
              {"epochs", 3},
              {"horizon_s", horizon},
              {"start_cost_s", 0.1},
              {"best_final_error", 0.1},
              {"runs", Json::array()}};
  for (const auto& [method, seed, choices] : runs)
    out["runs"].push_back({{"method", method},
                           {"seed", seed},
                           {"completions", Json::array()},
                           {"completed_configs", Json::array()},
                           {"choices", choices}});
  return out;
}

// `paired`: each variant run against the base's of the same method and seed, at the variant's
// budget. ReversedRepeats judges configuration i by 0.1 + 0.1 i: regret 0.1 i, the median 0.25.
TEST_P(LcScoringTest, PairsEachRunWithTheBasesOfTheSameMethodAndSeedAtTheVariantsBudget) {
  WriteFile(dir_ / "repeats.json", ReversedRepeats());
  // The base was given 4 s: read at the variant's 2 s, random's choice is still configuration 3.
  WriteFile(
      dir_ / "base.json",
      ChoiceRuns(4, {{"gp", 0, {{1, 2}}}, {"gp", 1, {{1, 4}}}, {"random", 0, {{1, 3}, {3, 0}}}})
          .dump());
  // Better by 0.2; level; nothing chosen by 2 s, so the median configuration's 0.25: by 0.05.
  WriteFile(
      dir_ / "variant.json",
      ChoiceRuns(2, {{"gp:f2", 0, {{1, 0}}}, {"gp:f2", 1, {{1.5, 4}}}, {"random:f2", 0, {{3, 1}}}})
          .dump());
  auto ran = Script({"paired", dir_ / "base.json", dir_ / "variant.json", "--strip", ":f2",
                     "--repeats", dir_ / "repeats.json", "--json", dir_ / "paired.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json rows = Json::parse(testing::ReadFile(dir_ / "paired.json"))["rows"];
  ASSERT_EQ(rows.size(), 2u) << rows.dump();  // the table's, and all tables'
  const Json& all = rows[1];
  EXPECT_EQ(all["table"], "all");
  EXPECT_EQ(all["pairs"], 3);
  const std::vector<double> diffs = {-200, 0, -50};
  const double mean = (diffs[0] + diffs[1] + diffs[2]) / 3;
  double ss = 0;
  for (double d : diffs) ss += (d - mean) * (d - mean);
  EXPECT_NEAR(all["difference"].get<double>(), mean, 1e-9);
  EXPECT_NEAR(all["standard_error"].get<double>(), std::sqrt(ss / 2 / 3), 1e-9);
  EXPECT_NEAR(all["base_mean"].get<double>(), (200 + 400 + 300) / 3.0, 1e-9);
  EXPECT_EQ(all["lower"], 2);
  EXPECT_EQ(all["level"], 1);
  EXPECT_EQ(all["higher"], 0);
  EXPECT_THAT(ran.out, HasSubstr("| all | 1 | 3 | 300.000 | -83.333 ± "));

  auto odd = Script({"paired", dir_ / "base.json", "--repeats", dir_ / "repeats.json"});
  EXPECT_EQ(odd.exit_code, 1);
  EXPECT_THAT(odd.err, HasSubstr("pass files in pairs, BASE VARIANT"));
  auto unmatched = Script(
      {"paired", dir_ / "base.json", dir_ / "variant.json", "--repeats", dir_ / "repeats.json"});
  EXPECT_EQ(unmatched.exit_code, 1);
  EXPECT_THAT(unmatched.err, HasSubstr("has no run of gp:f2, seed 0"));
  auto shorter = Script({"paired", dir_ / "variant.json", dir_ / "base.json", "--strip", ":f2",
                         "--repeats", dir_ / "repeats.json"});
  EXPECT_EQ(shorter.exit_code, 1);
  EXPECT_THAT(shorter.err, HasSubstr("less than"));
}

// Runs for `versus` on SmallTable, judged by ReversedRepeats (configuration i's regret 0.1 i,
// an unfinished run's the median 0.25): our gp chooses configurations 0 and 1, Optuna's tpe 3 to
// 5 (its last seed only at 3 s), Optuna's random what our gp does.
void WriteVersusRuns(const TempDir& dir) {
  WriteFile(dir / "repeats.json", ReversedRepeats());
  Json ours = ChoiceRuns(4, {{"gp", 0, {{1, 0}}},
                             {"gp", 1, {{1, 0}}},
                             {"gp", 2, {{1, 1}}},
                             {"gp", 3, {{1, 0}}},
                             {"gp", 4, {{1, 1}}}});
  ours["in_place"] = false;
  Json optuna = ChoiceRuns(4, {{"tpe", 0, {{1, 3}}},
                               {"tpe", 1, {{1, 4}}},
                               {"tpe", 2, {{1, 3}}},
                               {"tpe", 3, {{1, 5}}},
                               {"tpe", 4, {{3, 4}}},
                               {"random", 0, {{1, 1}}},
                               {"random", 1, {{1, 0}}},
                               {"random", 2, {{1, 0}}},
                               {"random", 3, {{1, 1}}},
                               {"random", 4, {{1, 0}}}});
  optuna["tool"] = "optuna";
  WriteFile(dir / "ours.json", ours.dump());
  WriteFile(dir / "optuna.json", optuna.dump());
}

// `versus`: our method against each Optuna pair of the same table, by the medians of each run's
// choice, a bootstrap saying which side is lower, and the mean gap pooled over tables.
TEST_P(LcScoringTest, SetsOurMethodAgainstEachOptunaPairWithABootstrapOfTheMedians) {
  WriteVersusRuns(dir_);
  auto ran =
      Script({"versus", dir_ / "ours.json", dir_ / "optuna.json", "--ours", "gp", "--budgets",
              "0.5,1", "--repeats", dir_ / "repeats.json", "--json", dir_ / "versus.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json out = Json::parse(testing::ReadFile(dir_ / "versus.json"));
  ASSERT_EQ(out["rows"].size(), 4u) << out.dump();  // two budgets x two pairs
  std::map<std::pair<double, std::string>, Json> rows;
  for (const Json& r : out["rows"]) rows[{r["budget"].get<double>(), r["optuna"]}] = r;
  const Json& tpe_half = rows.at({0.5, "tpe"});
  EXPECT_NEAR(tpe_half["optuna_median"].get<double>(), 300, 1e-9);  // .3 .4 .3 .5 and .25
  const Json& tpe = rows.at({1.0, "tpe"});
  EXPECT_NEAR(tpe["ours_median"].get<double>(), 0, 1e-9);
  EXPECT_NEAR(tpe["optuna_median"].get<double>(), 400, 1e-9);
  // Every draw of ours is at most 0.1, of tpe's at least 0.3: ours is lower in all of them.
  EXPECT_EQ(tpe["lower_share"].get<double>(), 1.0);
  EXPECT_LE(tpe["interval"][1].get<double>(), -200 + 1e-9);
  EXPECT_GE(tpe["interval"][0].get<double>(), -500 - 1e-9);
  const std::vector<double> a = {0, 0, 100, 0, 100}, b = {300, 400, 300, 500, 400};
  auto error = [](const std::vector<double>& v) {
    double m = 0, ss = 0;
    for (double x : v) m += x / v.size();
    for (double x : v) ss += (x - m) * (x - m);
    return std::sqrt(ss / (v.size() - 1) / v.size());
  };
  EXPECT_NEAR(tpe["mean_gap"].get<double>(), 40 - 380, 1e-9);
  EXPECT_NEAR(tpe["mean_gap_error"].get<double>(), std::hypot(error(a), error(b)), 1e-9);
  // The same choices: level, undecided (the interval holds zero), neither side mostly lower.
  const Json& same = rows.at({1.0, "random"});
  EXPECT_NEAR(same["median_gap"].get<double>(), 0, 1e-9);
  EXPECT_LE(same["interval"][0].get<double>(), 0);
  EXPECT_GE(same["interval"][1].get<double>(), 0);
  EXPECT_LT(same["lower_share"].get<double>(), 0.95);
  EXPECT_LT(same["higher_share"].get<double>(), 0.95);
  EXPECT_THAT(ran.out,
              HasSubstr("| small | 1 | 5, 5 | 0.000 | 0.000 (random) | 1 / 1 / 0 | 1 / 0 |"));
  // The bar (below every pair) fails wherever random's median draw is not above ours: ours is 0
  // with P(at most two of five draws are 0.1) = 1 - q, random's 0.1 with q, q = P(three or more).
  const double q = 10 * std::pow(0.4, 3) * 0.36 + 5 * std::pow(0.4, 4) * 0.6 + std::pow(0.4, 5);
  for (const Json& c : out["cells"])
    if (c["budget"] == 1.0) EXPECT_NEAR(c["bar_share"].get<double>(), (1 - q) * q, 0.04);
  ASSERT_EQ(out["pooled"].size(), 4u);
  EXPECT_THAT(ran.out, HasSubstr("| tpe | -310.000 ± "));  // at half: .04 less .35
}

TEST_P(LcScoringTest, VersusRefusesAMethodItHasNoRunsOfAndATableWithoutOptunasRuns) {
  WriteVersusRuns(dir_);
  auto unknown = Script({"versus", dir_ / "ours.json", dir_ / "optuna.json", "--ours", "gp+asha",
                         "--repeats", dir_ / "repeats.json"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("no runs of gp+asha on small (methods: gp, optuna tpe"));
  auto alone =
      Script({"versus", dir_ / "ours.json", "--ours", "gp", "--repeats", dir_ / "repeats.json"});
  EXPECT_EQ(alone.exit_code, 1);
  EXPECT_THAT(alone.err, HasSubstr("no Optuna runs of small"));
}

// The repeats bench/data ships beside its tables, by which `table` scores the runs unless told
// otherwise: each covers its table's every configuration, with the table's own final errors; and
// the whole curves that --draw-curves serves (lc_FAMILY.curves.json), read as run reads them.
TEST_P(LcScoringTest, ShipsRepeatsAndCurvesThatCoverTheirTables) {
  const std::string script =
      "import glob, json, os\n"
      "for path in sorted(glob.glob(os.path.join(sys.argv[2], 'lc_*.json'))):\n"
      "    if path.endswith(('.repeats.json', '.curves.json')):\n"
      "        continue\n"
      "    t = json.load(open(path))\n"
      "    r = m.shipped_repeats(t['family'])\n"
      "    if r is None:\n"
      "        continue\n"
      "    e, raw = m.read_expected(r, t['family']), json.load(open(r))\n"
      "    same = all(abs(c['final'] - t['configs'][c['index']]['error'][-1]) < 1e-9\n"
      "               for c in raw['configs'])\n"
      "    whole = sorted(e) == list(range(len(t['configs'])))\n"
      "    print(t['family'], 'ok' if same and whole else 'differs', len(e))\n"
      "    if os.path.exists(m.shipped_curves(t['family'])):\n"
      "        c = m.draw_curves(m.shipped_curves(t['family']), m.Table(t))\n"
      "        print(t['family'], 'curves', len(c), len(c[0]), len(c[0][0]))\n"
      "print('small:', m.shipped_repeats('small'))\n";
  auto ran = Module(script, {std::string(HYPERPACK_SOURCE_DIR) + "/bench/data"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_THAT(ran.out, HasSubstr("mlp-adam-digits ok 256\n"));
  // Two other seeds' whole curves of every configuration, each of the table's 27 epochs.
  for (const char* family : {"mlp-adam-digits", "mlp-sgd-fmnist", "linear-sgd-fmnist",
                             "mlp-adam-fmnist", "trainer-mlp-fmnist"})
    EXPECT_THAT(ran.out, HasSubstr(std::string(family) + " curves 256 2 27\n"));
  EXPECT_THAT(ran.out, ::testing::Not(HasSubstr("differs"))) << ran.out;
  EXPECT_THAT(ran.out, HasSubstr("small: None\n"));
}

// The first report within the gap, as shares of the budget over seeds: median [quartiles]; a run
// that never reported within it counts as past the budget; runs written before reports were kept
// give '?'.
TEST_P(LcScoringTest, TimesTheFirstReportWithinTheGapOverSeeds) {
  const std::string script =
      "runs = [{'reported': [[1, 0.5], [4, 0.1]]}, {'reported': [[2, 0.1]]},\n"
      "        {'reported': [[3, 0.5]]}, {'reported': [[6, 0.09], [8, 0.05]]}]\n"
      "print(m.report_cell(runs, 0.1, 10), '|', m.report_cell(runs + [{}], 0.1, 10))\n";
  auto ran = Module(script);
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "0.5 [0.35, never] | ?\n");
}

TEST_P(LcOptunaTest, RefusesWhatItCannotRunOrCompareSayingWhy) {
  if (GetParam() == "3.1") {
    auto gp = Script(
        {"run", "--table", table_, "--seeds", "1", "--methods", "gp", "--out", dir_ / "gp.json"});
    EXPECT_EQ(gp.exit_code, 1);
    EXPECT_THAT(gp.err, HasSubstr("has no GPSampler (3.6 and later)"));
  }
  auto unknown = Script({"run", "--table", table_, "--methods", "tpe+asha", "--out", dir_ / "x"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, HasSubstr("unknown method 'tpe+asha'"));
  // Two replays of different budgets are not set side by side.
  for (const char* budget : {"12", "20"})
    ASSERT_EQ(Script({"run", "--table", table_, "--seeds", "1", "--methods", "random",
                      "--budget-trials", budget, "--out", dir_ / (std::string(budget) + ".json")})
                  .exit_code,
              0);
  auto mixed =
      Script({"table", dir_ / "12.json", dir_ / "20.json", "--reference", "optuna random"});
  EXPECT_EQ(mixed.exit_code, 1);
  EXPECT_THAT(mixed.err, HasSubstr("not the same budget"));
  auto not_runs = Script({"table", table_});
  EXPECT_EQ(not_runs.exit_code, 1);
  EXPECT_THAT(not_runs.err, HasSubstr("not the runs of asha_bench --json or lc_optuna.py run"));
}

std::string ReleaseName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  name.replace(name.find('.'), 1, "_");
  return "optuna_" + name;
}
INSTANTIATE_TEST_SUITE_P(Releases, LcOptunaTest, ::testing::Values("3.1", "4.6", "5.0"),
                         ReleaseName);
INSTANTIATE_TEST_SUITE_P(Debian, LcScoringTest, ::testing::Values("3.1"), ReleaseName);

}  // namespace
}  // namespace hyperpack::bench
