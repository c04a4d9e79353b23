// Results evaluated elsewhere (study/results.h), as `hyperpack add-results` reads them: our own
// JSON and CSV, and the CSV that Optuna's study.trials_dataframe().to_csv() writes (its columns as
// Optuna 3.1's optuna/study/_dataframe.py names them, in the shape of an export found in a public
// repository: number, value, times, params_NAME, state).
#include "hyperpack/study/results.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;

StudySpec Spec() {
  ParseOutcome parsed = ParseStudy(R"(name: s
objective: {metric: acc, direction: maximize}
search_space:
  lr: {type: float, low: 0.0001, high: 0.1, log: true}
  layers: {type: int, low: 1, high: 4}
  opt: {type: categorical, values: [sgd, adam]}
  bn: {type: categorical, values: [true, false]}
  momentum: {type: float, low: 0, high: 1, when: "opt == 'sgd'"}
  epochs: {type: fixed, value: 10}
)",
                                   "s.yaml");
  EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
  return *parsed.spec;
}

TEST(ResultsTest, OptunasCsvExportReadsAsWrittenAndOnlyCompleteRowsAreResults) {
  // pandas' index column first, conditional parameters left empty, bools as True/False.
  const std::string csv =
      ",number,value,datetime_start,datetime_complete,duration,params_bn,params_layers,params_lr,"
      "params_momentum,params_opt,user_attrs_note,state\n"
      "0,0,0.91,2022-03-05 22:45:49.272971,2022-03-05 22:50:11.641672,0 days 00:04:22.368701,"
      "True,3,0.001,,adam,x,COMPLETE\n"
      "1,1,,2022-03-05 22:50:11,2022-03-05 22:51:00,0 days 00:00:49,False,2,0.01,0.9,sgd,,FAIL\n"
      "2,2,0.52,2022-03-05 22:51:00,2022-03-05 22:52:00,0 days 00:01:00,False,1,0.05,0.5,sgd,,"
      "PRUNED\n"
      "3,3,0.88,2022-03-05 22:52:00,2022-03-05 22:53:00,0 days 00:01:00,False,4,0.0002,0.25,sgd,"
      "y,COMPLETE\n";
  int skipped = -1;
  auto results = ParseResults(csv, "optuna.csv", Spec(), &skipped);
  ASSERT_TRUE(results.ok()) << results.status().message();
  EXPECT_EQ(skipped, 2);
  ASSERT_EQ(results->size(), 2u);
  const PriorResult& a = (*results)[0];
  EXPECT_EQ(a.line, 2);
  EXPECT_DOUBLE_EQ(a.value, 0.91);
  EXPECT_EQ(a.params.at("bn"), Value{true});
  EXPECT_EQ(a.params.at("layers"), Value{int64_t{3}});
  EXPECT_EQ(a.params.at("opt"), Value{std::string("adam")});
  EXPECT_FALSE(a.params.count("momentum")) << "inactive under adam";
  EXPECT_EQ(a.params.at("epochs"), Value{int64_t{10}}) << "the fixed parameter is filled in";
  EXPECT_EQ((*results)[1].line, 5);
  EXPECT_EQ((*results)[1].params.at("momentum"), Value{0.25});
}

TEST(ResultsTest, JsonListsOfNestedOrFlatResults) {
  const std::string json = R"([
  {"params": {"lr": 0.001, "layers": 2, "opt": "adam", "bn": false}, "value": 0.8},
  {"lr": 0.01, "layers": 1.0, "opt": "sgd", "momentum": 0, "bn": true, "acc": 0.7}
])";
  auto results = ParseResults(json, "r.json", Spec());
  ASSERT_TRUE(results.ok()) << results.status().message();
  ASSERT_EQ(results->size(), 2u);
  EXPECT_EQ((*results)[1].line, 3);
  EXPECT_EQ((*results)[1].params.at("layers"), Value{int64_t{1}}) << "a whole float for an int";
  EXPECT_EQ((*results)[1].params.at("momentum"), Value{0.0}) << "an int for a float";
  EXPECT_DOUBLE_EQ((*results)[1].value, 0.7) << "the metric's name holds the value";
}

TEST(ResultsTest, EachBadFileSaysWhereAndWhatWouldDo) {
  const StudySpec spec = Spec();
  struct Case {
    std::string text, expected;
  };
  const Case cases[] = {
      {"lr,layers,opt,bn,run_id,value\n", "r:1: column 'run_id' is not a parameter"},
      {"lr,layers,opt,bn\n0.01,2,adam,True\n", "r:1: no \"value\" (or \"acc\") column"},
      {"lr,layers,opt,bn,value\n0.01,2,adam,True,0.5\n0.01,9,adam,True,0.5\n",
       "r:3: parameter 'layers': 9 is not a value it can take"},
      {"lr,layers,opt,bn,value\n0.01,2,rmsprop,True,0.5\n",
       "r:2: 'rmsprop' is not a value of categorical parameter opt"},
      {"lr,layers,opt,bn,value\n0.01,2,adam,True\n", "r:2: 4 cells where the header has 5"},
      {"lr,layers,opt,bn,value\n0.01,2,adam,True,\n", "r:2: no finite value"},
      {"[{\"lr\": 0.01, \"layers\": 2, \"opt\": \"adam\", \"bn\": true, \"value\": 1},\n 3]",
       "r:2: a result is an object"},
      {"[{\"lr\": 0.01,\n", "r:2: not JSON"},
      {"{\"lr\": 0.01}", "r:1: expected a list of results"},
  };
  for (const Case& c : cases) {
    auto results = ParseResults(c.text, "r", spec);
    ASSERT_FALSE(results.ok()) << c.text;
    EXPECT_THAT(results.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

}  // namespace
}  // namespace hyperpack::study
