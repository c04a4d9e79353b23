// bench/curve_table.h: the tables of real learning curves that bench/lc_table.py made, read and
// checked; a proposed configuration served by its nearest neighbour; a malformed table refused
// with the field that is wrong.
#include "curve_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace hyperpack::bench {
namespace {

// Two configurations of a space with a log float and a linear int, three epochs each.
constexpr const char* kSmall = R"({
  "family": "small", "epochs": 3,
  "space": [{"name": "lr", "type": "float", "low": 0.0001, "high": 1.0, "log": true},
            {"name": "width", "type": "int", "low": 10, "high": 110, "log": false}],
  "configs": [
    {"params": {"lr": 0.001, "width": 20}, "error": [0.5, 0.4, 0.3], "seconds": [1, 1, 1]},
    {"params": {"lr": 0.1, "width": 100}, "error": [0.6, 0.3, 0.2], "seconds": [2, 2, 3]}]})";

std::string With(const std::string& from, const std::string& to) {
  std::string text = kSmall;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(CurveTableTest, ReadsASmallTable) {
  auto t = CurveTable::Parse(kSmall, "small.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->family(), "small");
  EXPECT_EQ(t->epochs(), 3);
  ASSERT_EQ(t->curves().size(), 2u);
  EXPECT_EQ(t->curves()[1].config.at("width"), Value(int64_t{100}));
  EXPECT_DOUBLE_EQ(t->BestFinalError(), 0.2);
  EXPECT_DOUBLE_EQ(t->MeanFullSeconds(), (3.0 + 7.0) / 2);
}

// Distances are taken in the unit cube with log dimensions in log space. At width 60 (halfway),
// lr 0.03 is 1.5 decades above 0.001 and half a decade below 0.1: nearer the second, where on a
// linear scale it would be nearer the first (0.029 against 0.07 of the range).
TEST(CurveTableTest, ServesAConfigurationByItsNearestNeighbourInTheUnitCube) {
  auto t = CurveTable::Parse(kSmall, "small.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->Nearest({{"lr", 0.0012}, {"width", int64_t{25}}}), 0u);
  EXPECT_EQ(t->Nearest({{"lr", 0.08}, {"width", int64_t{95}}}), 1u);
  EXPECT_EQ(t->Nearest({{"lr", 0.03}, {"width", int64_t{60}}}), 1u);
  EXPECT_EQ(t->Nearest({{"lr", 0.004}, {"width", int64_t{60}}}), 0u);
  // The width counts as much as the learning rate's decades: lr 0.02 at width 20 is the first's.
  EXPECT_EQ(t->Nearest({{"lr", 0.02}, {"width", int64_t{20}}}), 0u);
}

// The same distance, between any two configurations: lr 0.001 to 0.1 is two of the range's four
// decades (0.5), width 20 to 100 is 0.8 of its range.
TEST(CurveTableTest, MeasuresTheDistanceBetweenTwoConfigurationsInTheUnitCube) {
  auto t = CurveTable::Parse(kSmall, "small.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const Config& a = t->curves()[0].config;
  const Config& b = t->curves()[1].config;
  EXPECT_NEAR(t->Distance(a, b), std::sqrt(0.5 * 0.5 + 0.8 * 0.8), 1e-12);
  EXPECT_DOUBLE_EQ(t->Distance(b, a), t->Distance(a, b));
  EXPECT_EQ(t->Distance(a, a), 0.0);
  // Outside the bounds counts as at them (the rule Nearest uses): lr 10 as 1, a decade from 0.1.
  EXPECT_NEAR(t->Distance({{"lr", 10.0}, {"width", int64_t{100}}}, b), 0.25, 1e-12);
}

TEST(CurveTableTest, RefusesAMalformedTableNamingTheField) {
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"{", "not JSON"},
      {"[1, 2]", "expected a JSON object"},
      {With("\"epochs\": 3", "\"epochs\": 0"), "epochs: 0 is not in 1..10000"},
      {With("\"epochs\": 3", "\"epochs\": \"3\""), "epochs: expected a whole number"},
      {With("\"type\": \"float\"", "\"type\": \"categorical\""),
       "space[0].type: 'categorical'; expected float or int"},
      {With("\"low\": 0.0001", "\"low\": 0"), "space[0]: bounds [0, 1] are not a range"},
      {With("\"error\": [0.5, 0.4, 0.3]", "\"error\": [0.5, 0.4]"),
       "configs[0].error: expected a list of 3 numbers"},
      {With("\"seconds\": [2, 2, 3]", "\"seconds\": [2, -2, 3]"),
       "configs[1].seconds[1]: -2 is not a finite non-negative number"},
      {With("\"width\": 100}", "\"width\": 500}"), "configs[1].params"},
      {With("\"width\": 100}", "\"width\": 50.5}"), "configs[1].params.width: expected an integer"},
      {With("{\"lr\": 0.001, ", "{"), "configs[0].params.lr: missing or not a number"},
      {With("\"family\": \"small\"", "\"family\": 7"), "small.json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 60));
    auto t = CurveTable::Parse(c.text, "small.json");
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("small.json"), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find(c.expected), std::string::npos) << t.status().message();
  }
  auto missing = CurveTable::Read("/nonexistent/table.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/table.json: cannot open"),
            std::string::npos);
}

// The tables in bench/data read whole, and each configuration is its own nearest neighbour.
TEST(CurveTableTest, ReadsTheTablesInTheTree) {
  struct Table {
    const char* family;
    size_t configs;
  };
  for (const Table& table : {Table{"mlp-sgd-fmnist", 256}, Table{"mlp-adam-digits", 256},
                             Table{"linear-sgd-fmnist", 256}, Table{"mlp-adam-fmnist", 256},
                             Table{"trainer-mlp-fmnist", 256}, Table{"trainer-cnn-fmnist", 128}}) {
    const std::string family = table.family;
    SCOPED_TRACE(family);
    const std::string path =
        std::string(HYPERPACK_SOURCE_DIR) + "/bench/data/lc_" + family + ".json";
    auto t = CurveTable::Read(path);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->family(), family);
    EXPECT_EQ(t->epochs(), 27);
    ASSERT_EQ(t->curves().size(), table.configs);
    EXPECT_GT(t->BestFinalError(), 0.0);
    EXPECT_LT(t->BestFinalError(), 0.2);
    EXPECT_GT(t->MeanFullSeconds(), 0.0);
    for (size_t i = 0; i < t->curves().size(); i += 17)
      EXPECT_EQ(t->Nearest(t->curves()[i].config), i);
  }
}

// A configuration trained again is served the repeats' seeds besides the table's own, in order; a
// file of another table, missing a configuration or with too few seeds is refused by name.
TEST(CurveTableTest, ReadsTheOtherSeedsOfARepeatsFile) {
  auto t = CurveTable::Parse(kSmall, "small.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string repeats = R"({"family": "small", "offsets": [0, 1, 2], "of": 2, "configs": [
      {"index": 1, "final": 0.2, "repeats": [0.2, 0.25, 0.3]},
      {"index": 0, "final": 0.3, "repeats": [0.3, 0.35, 0.4]}]})";
  auto first = ParseRepeats(repeats, "r.json", *t, 1);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(*first, (std::vector<std::vector<double>>{{0.35, 0.25}}));
  auto both = ParseRepeats(repeats, "r.json", *t, 2);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(*both, (std::vector<std::vector<double>>{{0.35, 0.25}, {0.4, 0.3}}));
  EXPECT_NE(ParseRepeats(repeats, "r.json", *t, 3)
                .status()
                .message()
                .find("r.json: 2 seeds besides the table's own (offsets), 3 wanted"),
            std::string::npos);

  std::string other = repeats;
  other.replace(other.find("small"), 5, "large");
  EXPECT_NE(ParseRepeats(other, "r.json", *t, 1)
                .status()
                .message()
                .find("r.json: repeats of 'large', not of 'small'"),
            std::string::npos);
  std::string one = R"({"family": "small", "offsets": [1], "configs": [
      {"index": 1, "repeats": [0.25]}]})";
  EXPECT_NE(ParseRepeats(one, "r.json", *t, 1)
                .status()
                .message()
                .find("configuration 0 of the table has no finite repeat"),
            std::string::npos);
  EXPECT_FALSE(
      ParseRepeats(R"({"family": "small", "offsets": [0], "configs": []})", "r.json", *t, 1).ok());
  EXPECT_FALSE(ParseRepeats("[", "r.json", *t, 1).ok());
}

// With --curves a repeats file keeps its seeds' whole curves: the first `draws` of curve_offsets
// read draw by draw, each by table index (curve_offsets' order, not the offsets'); a file with
// fewer seeds' curves, a curve of another length or one not ending at its repeat is refused by
// name.
TEST(CurveTableTest, ReadsTheWholeCurvesOfOtherSeeds) {
  auto t = CurveTable::Parse(kSmall, "small.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string repeats = R"({"family": "small", "offsets": [7, 8], "of": 2,
      "curve_offsets": [8, 7], "configs": [
      {"index": 1, "final": 0.2, "repeats": [0.25, 0.3],
       "curves": [[0.7, 0.5, 0.3], [0.6, 0.4, 0.25]]},
      {"index": 0, "final": 0.3, "repeats": [0.35, 0.4],
       "curves": [[0.8, 0.6, 0.4], [0.9, 0.5, 0.35]]}]})";
  auto both = ParseRepeatCurves(repeats, "r.json", *t, 2);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ(*both, (RepeatCurves{{{0.8, 0.6, 0.4}, {0.7, 0.5, 0.3}},
                                 {{0.9, 0.5, 0.35}, {0.6, 0.4, 0.25}}}));
  auto one = ParseRepeatCurves(repeats, "r.json", *t, 1);
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->size(), 1u);

  const std::pair<std::pair<std::string, std::string>, std::string> cases[] = {
      {{R"("curve_offsets": [8, 7])", R"("curve_offsets": [8])"},
       "r.json: expected the whole curves of 2 seeds (curve_offsets): lc_table.py repeats "
       "--curves"},
      {{R"("curve_offsets": [8, 7])", R"("curve_offsets": [8, 0])"},
       "r.json: curve offset 0 is not one of the file's seeds besides the table's own"},
      {{"[0.9, 0.5, 0.35]", "[0.5, 0.35]"}, "r.json: configuration 0: expected 3 errors in "},
      {{"[0.6, 0.4, 0.25]", "[0.6, 0.4, 0.26]"},
       "r.json: configuration 1: curves[1] ends at 0.26, its repeat is 0.25"},
      {{"[0.8, 0.6, 0.4]", "[0.8, null, 0.4]"}, "curves[0] holds null, not a finite error"},
      {{R"("repeats": [0.35, 0.4])", R"("repeats": [0.35])"},
       "configs: expected {index: a table index, repeats: one final error per offset}"}};
  for (const auto& [edit, says] : cases) {
    std::string text = repeats;
    ASSERT_NE(text.find(edit.first), std::string::npos) << edit.first;
    text.replace(text.find(edit.first), edit.first.size(), edit.second);
    auto read = ParseRepeatCurves(text, "r.json", *t, 2);
    ASSERT_FALSE(read.ok()) << edit.second;
    EXPECT_NE(read.status().message().find(says), std::string::npos) << read.status().message();
  }
}

}  // namespace
}  // namespace hyperpack::bench
