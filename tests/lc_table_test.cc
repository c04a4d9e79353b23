// bench/lc_table.py's repeats: a table's best configurations trained again with other model seeds
// (hyperpack-trainer on Fashion-MNIST, as the trainer-* tables were made), and what show-repeats
// makes of such a file: the seed-to-seed deviation, how the table's finals rank against the other
// seeds' means, and where the table's best lands by its mean.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace hyperpack::bench {
namespace {

using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::ContainsRegex;
using Json = nlohmann::json;

testing::Ran LcTable(std::vector<std::string> args) {
  args.insert(args.begin(),
              {"/usr/bin/python3", std::string(HYPERPACK_SOURCE_DIR) + "/bench/lc_table.py"});
  return RunCommand(args);
}

// Three configurations of trainer-mlp-fmnist, two epochs; the curves are made up (not the
// trainer's), with final errors 0.3, 0.1, 0.2.
Json MadeUpTrainerTable() {
  Json configs = Json::array();
  const double finals[] = {0.3, 0.1, 0.2};
  for (int i = 0; i < 3; ++i)
    configs.push_back({{"params",
                        {{"lr", 0.05},
                         {"batch_size", 256},
                         {"momentum", 0.9},
                         {"weight_decay", 1e-5},
                         {"width", 32 + 16 * i}}},
                       {"error", {0.5, finals[i]}},
                       {"seconds", {1.0, 1.0}}});
  return {{"family", "trainer-mlp-fmnist"}, {"epochs", 2}, {"configs", configs}};
}

TEST(LcTableTest, TrainsATablesBestConfigurationsAgainWithOtherSeeds) {
#ifndef HYPERPACK_TRAINER
  GTEST_SKIP() << "this build has no hyperpack-trainer (no libtorch)";
#else
  TempDir dir;
  WriteFile(dir / "table.json", MadeUpTrainerTable().dump());
  auto ran = LcTable({"repeats", dir / "table.json", "--top", "2", "--offsets", "0,1", "--curves",
                      "--trainer", HYPERPACK_TRAINER, "--out", dir / "r.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json r = Json::parse(ReadFile(dir / "r.json"));
  ASSERT_EQ(r["configs"].size(), 2u);
  // The best two by the table's final error, best first.
  EXPECT_EQ(r["configs"][0]["index"], 1);
  EXPECT_EQ(r["configs"][1]["index"], 2);
  EXPECT_DOUBLE_EQ(r["configs"][0]["final"].get<double>(), 0.1);
  bool seeds_differ = false;
  for (const Json& c : r["configs"]) {
    ASSERT_EQ(c["repeats"].size(), 2u);
    // Two epochs learn something: far below chance (0.9, what a failed run is recorded as).
    for (const Json& v : c["repeats"]) {
      EXPECT_GE(v.get<double>(), 0.0);
      EXPECT_LT(v.get<double>(), 0.5);
    }
    seeds_differ |= c["repeats"][0] != c["repeats"][1];
    // --curves: each seed's whole curve, ending at its repeat.
    ASSERT_EQ(c["curves"].size(), 2u);
    for (size_t o = 0; o < 2; ++o) {
      ASSERT_EQ(c["curves"][o].size(), 2u);
      EXPECT_EQ(c["curves"][o][1], c["repeats"][o]);
    }
    // Offset 0 is the table's own seed; the made-up curves are not what the trainer gives.
    EXPECT_EQ(c["reproduced"], false);
  }
  EXPECT_TRUE(seeds_differ) << "the other seed never reached the trainer";
  EXPECT_EQ(r["curve_offsets"], Json({0, 1}));
  auto shown = LcTable({"show-repeats", dir / "r.json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, ContainsRegex("trainer-mlp-fmnist +2 +2 .* 0/2"));
#endif
}

TEST(LcTableTest, ShowsHowFarTheTablesFinalsAreTheConfigurationsOwn) {
  TempDir dir;
  // The table's best (0.10) is a lucky draw: its other seeds give 0.13 twice, a mean of 0.12,
  // third of three; configuration 1's mean is 0.11, the lowest.
  Json r = {
      {"family", "small"},
      {"offsets", {0, 1, 2}},
      {"configs",
       {{{"index", 0}, {"final", 0.10}, {"repeats", {0.10, 0.13, 0.13}}, {"reproduced", true}},
        {{"index", 1}, {"final", 0.11}, {"repeats", {0.11, 0.11, 0.11}}, {"reproduced", true}},
        {{"index", 2}, {"final", 0.12}, {"repeats", {0.12, 0.10, 0.12}}, {"reproduced", false}}}}};
  WriteFile(dir / "r.json", r.dump());
  auto shown = LcTable({"show-repeats", dir / "r.json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  // Variances 3e-4, 0 and 1.33e-4 pool to a deviation of 0.0120; the finals' ranks (0, 1, 2)
  // against the other seeds' means' (2, 0, 1) correlate at -0.5; the best is third by its mean,
  // 0.01 above the lowest; two of three runs at offset 0 gave the table's curve.
  EXPECT_THAT(shown.out, ContainsRegex("small +3 +3 +0\\.0120 +-0\\.50 +3 +0\\.0100 +2/3"));
}

TEST(LcTableTest, ShowRepeatsRefusesAFileThatIsNotRepeats) {
  TempDir dir;
  // A table, not its repeats; a repeats file whose configuration lacks a seed; a truncated file.
  WriteFile(dir / "table.json", MadeUpTrainerTable().dump());
  WriteFile(dir / "short.json",
            Json({{"family", "small"},
                  {"offsets", {0, 1}},
                  {"configs",
                   {{{"index", 0}, {"final", 0.1}, {"repeats", {0.1, 0.2}}, {"reproduced", true}},
                    {{"index", 1}, {"final", 0.2}, {"repeats", {0.2}}, {"reproduced", true}}}}})
                .dump());
  WriteFile(dir / "cut.json", R"({"family": "small", "offsets": [0,)");
  const std::pair<const char*, const char*> cases[] = {
      {"table.json", "no 'offsets': not the output of lc_table.py repeats"},
      {"short.json", "configs\\[1\\] needs final, reproduced and one repeat per offset \\(2\\)"},
      {"cut.json", "cut.json: "}};
  for (const auto& [name, says] : cases) {
    auto shown = LcTable({"show-repeats", dir / name});
    EXPECT_NE(shown.exit_code, 0) << name;
    EXPECT_THAT(shown.err, ContainsRegex(std::string("^lc_table: .*") + says)) << shown.err;
    EXPECT_THAT(shown.err, ::testing::Not(::testing::HasSubstr("Traceback"))) << shown.err;
  }
}

// Three configurations' runs with `offsets`, listed in `order`: configuration i's at offset o is
// base + i + o / 100.
Json MadeUpRepeats(const std::vector<int>& offsets, const std::vector<int>& order, double base) {
  Json configs = Json::array();
  for (int i : order) {
    Json repeats = Json::array();
    for (int o : offsets) repeats.push_back(base + i + o / 100.0);
    configs.push_back({{"index", i},
                       {"final", 0.1 * i},
                       {"repeats", repeats},
                       {"reproduced", offsets[0] == 0 ? Json(i == 1) : Json()}});
  }
  return {{"family", "small"},  {"table", "t.json"},  {"of", 3},       {"top", 3},
          {"offsets", offsets}, {"configs", configs}, {"command", "r"}};
}

// Later seeds of the same configurations join a file's: offsets and repeats side by side, by
// configuration, in the first file's order; offset 0's `reproduced` kept. Files that do not fit
// together are refused by name.
TEST(LcTableTest, MergesRepeatsOfTheSameConfigurationsWithOtherSeeds) {
  TempDir dir;
  WriteFile(dir / "a.json", MadeUpRepeats({0, 1, 2}, {2, 0, 1}, 0).dump());
  WriteFile(dir / "b.json", MadeUpRepeats({3, 4}, {0, 1, 2}, 10).dump());
  auto ran = LcTable({"merge-repeats", dir / "a.json", dir / "b.json", "--out", dir / "m.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json m = Json::parse(ReadFile(dir / "m.json"));
  EXPECT_EQ(m["offsets"], Json({0, 1, 2, 3, 4}));
  ASSERT_EQ(m["configs"].size(), 3u);
  EXPECT_EQ(m["configs"][0]["index"], 2);
  EXPECT_EQ(m["configs"][0]["repeats"],
            Json({0 + 2 + 0 / 100.0, 0 + 2 + 1 / 100.0, 0 + 2 + 2 / 100.0, 10.0 + 2 + 3 / 100.0,
                  10.0 + 2 + 4 / 100.0}));
  EXPECT_EQ(m["configs"][2]["reproduced"], true);
  EXPECT_EQ(m["command"], "r && r");
  auto shown = LcTable({"show-repeats", dir / "m.json"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;

  Json other = MadeUpRepeats({3, 4}, {0, 1, 2}, 10);
  other["family"] = "big";
  WriteFile(dir / "family.json", other.dump());
  other = MadeUpRepeats({3, 4}, {0, 1}, 10);
  WriteFile(dir / "fewer.json", other.dump());
  WriteFile(dir / "twice.json", MadeUpRepeats({2, 3}, {0, 1, 2}, 10).dump());
  const std::pair<const char*, const char*> cases[] = {
      {"family.json", "family.json: family big, but .*a.json has small"},
      {"fewer.json", "fewer.json: other configurations than .*a.json's"},
      {"twice.json", "offset 2 is in both .*a.json and .*twice.json"}};
  for (const auto& [name, says] : cases) {
    auto refused = LcTable({"merge-repeats", dir / "a.json", dir / name, "--out", dir / "x.json"});
    EXPECT_NE(refused.exit_code, 0) << name;
    EXPECT_THAT(refused.err, ContainsRegex(std::string("^lc_table: .*") + says)) << refused.err;
  }
}

// A seed trained again with --curves joins a file that has its final errors: the finals must
// agree (the seed reproduced), and its whole curves are kept; a curve that does not end at its
// final, or finals that differ, are refused by name.
TEST(LcTableTest, MergesTheWholeCurvesOfASeedTrainedAgain) {
  TempDir dir;
  WriteFile(dir / "a.json", MadeUpRepeats({1, 2, 3}, {2, 0, 1}, 0).dump());
  Json again = MadeUpRepeats({1, 2}, {0, 1, 2}, 0);
  again["curve_offsets"] = {1, 2};
  for (Json& c : again["configs"]) c["curves"] = {{0.9, c["repeats"][0]}, {0.8, c["repeats"][1]}};
  WriteFile(dir / "c.json", again.dump());
  auto ran = LcTable({"merge-repeats", dir / "a.json", dir / "c.json", "--out", dir / "m.json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const Json m = Json::parse(ReadFile(dir / "m.json"));
  EXPECT_EQ(m["offsets"], Json({1, 2, 3}));
  EXPECT_EQ(m["curve_offsets"], Json({1, 2}));
  ASSERT_EQ(m["configs"].size(), 3u);
  EXPECT_EQ(m["configs"][0]["index"], 2);
  EXPECT_EQ(m["configs"][0]["repeats"],
            Json({0 + 2 + 1 / 100.0, 0 + 2 + 2 / 100.0, 0 + 2 + 3 / 100.0}));
  EXPECT_EQ(m["configs"][0]["curves"], Json({{0.9, 0 + 2 + 1 / 100.0}, {0.8, 0 + 2 + 2 / 100.0}}));
  EXPECT_EQ(LcTable({"show-repeats", dir / "m.json"}).exit_code, 0);

  Json bent = again;
  bent["configs"][1]["curves"][1][1] = 0.5;
  WriteFile(dir / "bent.json", bent.dump());
  Json moved = again;
  moved["configs"][2]["repeats"][0] = 7.0;
  moved["configs"][2]["curves"][0][1] = 7.0;
  WriteFile(dir / "moved.json", moved.dump());
  const std::pair<const char*, const char*> cases[] = {
      {"bent.json",
       "bent.json: configuration 1: the curve of offset 2 ends at 0.5, its repeat "
       "is 1.0[0-9]*"},
      {"moved.json",
       "offset 1 is in both .*a.json and .*moved.json with other final errors "
       "\\(configuration 2: 2.0[0-9]* and 7.0\\)"}};
  for (const auto& [name, says] : cases) {
    auto refused = LcTable({"merge-repeats", dir / "a.json", dir / name, "--out", dir / "x.json"});
    EXPECT_NE(refused.exit_code, 0) << name;
    EXPECT_THAT(refused.err, ContainsRegex(std::string("^lc_table: .*") + says)) << refused.err;
  }
}

}  // namespace
}  // namespace hyperpack::bench
