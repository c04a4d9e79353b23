// study/optuna.h on its own: a JournalStorage file replayed as Optuna replays it, and an Optuna
// study made a hyperpack study file and trials. The journal lines are written here in the shape
// Optuna 3.1 to 5.0 write them (optuna/storages/journal/_storage.py); the releases' own files are
// imported in tests/optuna_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "hyperpack/study/optuna.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;

constexpr char kFloat[] =
    R"({\"name\": \"FloatDistribution\", \"attributes\": {\"step\": null, \"low\": 0.0, \"high\": 1.0, \"log\": false}})";

// A journal of two studies (the first deleted), trials with Infinity and NaN in their values,
// a change to a finished trial (passed over, as Optuna does) and a last line cut short.
std::string Journal() {
  const std::string f = kFloat;
  return std::string(R"({"op_code":0,"worker_id":"w","study_name":"gone","directions":[1]}
{"op_code":4,"worker_id":"w","study_id":0,"datetime_start":"2026-11-24T19:24:49.669821"}
{"op_code":1,"worker_id":"w","study_id":0}
{"op_code":0,"worker_id":"w","study_name":"s","directions":[2]}
{"op_code":3,"worker_id":"w","study_id":1,"system_attr":{"study:metric_names":["acc"]}}
{"op_code":4,"worker_id":"w","study_id":1,"datetime_start":"2026-11-24T19:24:49.500000+01:00"}
{"op_code":5,"worker_id":"w","trial_id":1,"param_name":"x","param_value_internal":0.25,"distribution":")") +
         f + R"("}
{"op_code":7,"worker_id":"w","trial_id":1,"step":0,"intermediate_value":NaN}
{"op_code":7,"worker_id":"w","trial_id":1,"step":1,"intermediate_value":0.5}
{"op_code":9,"worker_id":"w","trial_id":1,"system_attr":{"constraints":[-Infinity, 0.5]}}
{"op_code":6,"worker_id":"w","trial_id":1,"state":1,"values":[0.75],"datetime_complete":"2026-11-24T19:24:50.500000+01:00"}
{"op_code":6,"worker_id":"w","trial_id":1,"state":3,"values":null,"datetime_complete":"2026-11-24T19:30:00"}
{"op_code":4,"worker_id":"w","study_id":1,"datetime_start":"2026-11-24T19:25:00","state":1,"params":{"x":0.5},"distributions":{"x":")" +
         f +
         R"("},"values":[Infinity],"intermediate_values":{"3":0.25},"datetime_complete":"2026-11-24T19:26:00"}
{"op_code":4,"worker_id":"w","study_id":1,"datetime_start":null,"state":4,"system_attrs":{"fixed_params":{"x":0.125}}}
{"op_code":4,"worker_id":"w","study_id":1,"datetime_st)";
}

TEST(OptunaJournalTest, IsReplayedAsOptunaReplaysIt) {
  auto studies = ParseOptunaJournal(Journal(), "j.log");
  ASSERT_TRUE(studies.ok()) << studies.status().message();
  ASSERT_EQ(studies->size(), 1u);  // the deleted one is gone
  const OptunaStudy& s = studies->front();
  EXPECT_EQ(s.name, "s");
  EXPECT_EQ(s.directions, std::vector<Direction>{Direction::kMaximize});
  EXPECT_EQ(s.metric_names, std::vector<std::string>{"acc"});
  ASSERT_EQ(s.trials.size(), 3u);
  const OptunaTrial& first = s.trials[0];
  EXPECT_EQ(first.number, 0);
  EXPECT_EQ(first.state, OptunaState::kComplete);  // the FAIL after it is passed over
  EXPECT_EQ(first.values, std::vector<double>{0.75});
  ASSERT_EQ(first.params.size(), 1u);
  EXPECT_EQ(first.params[0].internal, 0.25);
  EXPECT_TRUE(std::isnan(first.intermediate.at(0)));
  EXPECT_EQ(first.intermediate.at(1), 0.5);
  EXPECT_EQ(first.constraints.at("0"), -HUGE_VAL);
  EXPECT_EQ(first.constraints.at("1"), 0.5);
  ASSERT_TRUE(first.started && first.ended);
  EXPECT_DOUBLE_EQ(*first.ended - *first.started, 1.0);
  EXPECT_DOUBLE_EQ(*first.started, 1795544689.5);  // 19:24:49.5 at +01:00: 18:24:49.5 UTC
  EXPECT_EQ(s.trials[1].values, std::vector<double>{HUGE_VAL});
  EXPECT_EQ(s.trials[1].intermediate.at(3), 0.25);
  EXPECT_EQ(s.trials[2].state, OptunaState::kWaiting);
  EXPECT_EQ(s.trials[2].fixed_params, R"({"x":0.125})");
}

TEST(OptunaJournalTest, ABadLineBeforeTheLastIsAnErrorAtItsLine) {
  std::string text = Journal();
  text.replace(text.find("{\"op_code\":3"), 1, "[");
  auto studies = ParseOptunaJournal(text, "j.log");
  ASSERT_FALSE(studies.ok());
  EXPECT_THAT(studies.status().message(), HasSubstr("j.log:5: not a line of Optuna's journal"));
  auto odd = ParseOptunaJournal(R"({"op_code":12}
{"op_code":0,"study_name":"s","directions":[1]}
)",
                                "k.log");
  ASSERT_FALSE(odd.ok());
  EXPECT_THAT(odd.status().message(), HasSubstr("k.log:1: op_code 12 is not one Optuna writes"));
  auto typed = ParseOptunaJournal(R"({"op_code":0,"study_name":7,"directions":[1]}
{"op_code":0,"study_name":"s","directions":[1]}
)",
                                  "t.log");
  ASSERT_FALSE(typed.ok());
  EXPECT_THAT(typed.status().message(), HasSubstr("t.log:1: an operation whose fields"));
}

// What the fuzzer found (fuzz/optuna_journal_fuzzer.cc): numbers past what their fields hold are
// errors, not undefined conversions.
TEST(OptunaJournalTest, NumbersPastTheirFieldsAreErrors) {
  auto state = ParseOptunaJournal(R"({"op_code":0,"study_name":"s","directions":[1]}
{"op_code":4,"study_id":0,"state":2.2e21}
)",
                                  "j.log");
  ASSERT_FALSE(state.ok());
  EXPECT_THAT(state.status().message(),
              HasSubstr("j.log:2: trial 0: state 2.2e+21 is not Optuna's"));
  OptunaStudy s;
  s.name = "s";
  s.directions = {Direction::kMinimize};
  OptunaTrial t;
  t.state = OptunaState::kComplete;
  t.values = {1};
  t.params = {
      {"n", R"({"name": "IntDistribution", "attributes": {"low": 0, "high": 2.06e31}})", 3}};
  s.trials = {t};
  auto imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 1});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(), HasSubstr("parameter 'n': a range [0, 2.06e+31]"));
  s.trials[0].params = {
      {"c", R"({"name": "CategoricalDistribution", "attributes": {"choices": [1, 2]}})", NAN}};
  imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 1});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(), HasSubstr("trial 0: parameter 'c': a value of nan"));
}

TEST(OptunaJournalTest, AStorageIsToldByItsFirstBytes) {
  EXPECT_TRUE(LooksLikeOptunaStorage(std::string("SQLite format 3\0rest", 20)));
  EXPECT_TRUE(LooksLikeOptunaStorage("{\"op_code\":0,\"study_name\":\"s\"}\n{\"op_code\""));
  EXPECT_FALSE(LooksLikeOptunaStorage("{\"name\": \"s\"}\n"));
  EXPECT_FALSE(LooksLikeOptunaStorage("name: s\nobjective: {metric: loss}\n"));
  EXPECT_FALSE(LooksLikeOptunaStorage(""));
}

TEST(OptunaJournalTest, AStudyIsChosenByName) {
  std::vector<OptunaStudy> two(2);
  two[0].name = "a";
  two[1].name = "b";
  EXPECT_EQ(ChooseOptunaStudy(two, "b", "f.db")->name, "b");
  auto which = ChooseOptunaStudy(two, "", "f.db");
  ASSERT_FALSE(which.ok());
  EXPECT_THAT(which.status().message(),
              HasSubstr("holds 2 Optuna studies ('a', 'b'): name one with --study"));
  auto none = ChooseOptunaStudy(two, "c", "f.db");
  EXPECT_THAT(none.status().message(), HasSubstr("no Optuna study 'c'; it holds 'a', 'b'"));
  EXPECT_EQ(ChooseOptunaStudy({two[0]}, "", "f.db")->name, "a");
}

// A trial of `state` with parameters (name, distribution JSON, internal value).
OptunaTrial Trial(int number, OptunaState state, std::vector<OptunaParam> params,
                  std::vector<double> values = {}) {
  OptunaTrial t;
  t.number = number;
  t.state = state;
  t.params = std::move(params);
  t.values = std::move(values);
  return t;
}

OptunaParam Cat(const std::string& name, const std::string& choices, double index) {
  return {name,
          R"({"name": "CategoricalDistribution", "attributes": {"choices": )" + choices + "}}",
          index};
}

OptunaParam Old(const std::string& name, const std::string& kind, const std::string& attrs,
                double v) {
  return {name, R"({"name": ")" + kind + R"(", "attributes": )" + attrs + "}", v};
}

TEST(OptunaImportTest, OptunasOlderDistributionsAndRangesThatGrewMakeOneSpace) {
  OptunaStudy s;
  s.name = "old study!";
  s.directions = {Direction::kMinimize};
  s.trials = {
      Trial(0, OptunaState::kComplete,
            {Old("lr", "LogUniformDistribution", R"({"low": 1e-5, "high": 0.1})", 0.01),
             Old("units", "IntUniformDistribution", R"({"low": 8, "high": 64, "step": 8})", 16),
             {"d", R"({"type": "float", "low": 0, "high": 0.5})", 0.1},
             Cat("act", R"(["relu", "1.5", null])", 1)},
            {0.5}),
      Trial(1, OptunaState::kComplete,
            {Old("lr", "LogUniformDistribution", R"({"low": 1e-6, "high": 0.1})", 1e-6),
             Old("units", "IntUniformDistribution", R"({"low": 8, "high": 128, "step": 8})", 128),
             {"d", R"({"type": "float", "low": 0, "high": 0.5})", 0.2},
             Cat("act", R"(["relu", "1.5", null])", 0)},
            {HUGE_VAL}),
      Trial(2, OptunaState::kRunning, {})};
  auto imported = ImportOptunaStudy(s, {"f.db", "python train.py --lr {lr}", 5});
  ASSERT_FALSE(imported.ok());  // a None choice has no hyperpack value
  EXPECT_THAT(imported.status().message(), HasSubstr("parameter 'act': a choice of null"));
  for (OptunaTrial& t : s.trials)
    if (!t.params.empty()) t.params[3] = Cat("act", R"(["relu", "1.5"])", t.params[3].internal);
  imported = ImportOptunaStudy(s, {"f.db", "python train.py --lr {lr}", 5});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  const std::string& yaml = imported->study_yaml;
  EXPECT_THAT(yaml, HasSubstr("name: old-study-\n"));
  EXPECT_THAT(yaml, HasSubstr("lr: {type: float, low: 1e-06, high: 0.1, log: true}"));
  EXPECT_THAT(yaml, HasSubstr("units: {type: int, low: 8, high: 128, step: 8}"));
  EXPECT_THAT(yaml, HasSubstr("act: {type: categorical, values: [relu, \"1.5\"]}"));
  EXPECT_THAT(yaml, HasSubstr("budget: {max_trials: 7}"));  // two ended, five more
  ParseOutcome parsed = ParseStudy(yaml, "s.yaml");
  ASSERT_TRUE(parsed.spec) << parsed.ErrorText() << "\n" << yaml;
  EXPECT_EQ(parsed.spec->trial.command, "python train.py --lr {lr}");
  ASSERT_EQ(imported->trials.size(), 2u);
  EXPECT_EQ(imported->trials[0].state, ImportedTrial::State::kCompleted);
  EXPECT_EQ(imported->trials[0].params.at("act"), Value(std::string("1.5")));
  EXPECT_EQ(imported->trials[0].params.at("units"), Value(int64_t{16}));
  // An infinite value is no completed trial here: failed, and said so, as the running one is.
  EXPECT_EQ(imported->trials[1].state, ImportedTrial::State::kFailed);
  EXPECT_THAT(imported->warnings,
              ::testing::Contains(HasSubstr("1 COMPLETE trial(s) without a finite value")));
  EXPECT_THAT(imported->warnings,
              ::testing::Contains(HasSubstr("1 trial(s) RUNNING in Optuna are left out")));
}

TEST(OptunaImportTest, ASpaceNoCategoricalExplainsIsRefusedNamingTheParameter) {
  const std::string f =
      R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})";
  OptunaStudy s;
  s.name = "s";
  s.directions = {Direction::kMinimize};
  s.trials = {Trial(0, OptunaState::kComplete, {{"x", f, 0.2}}, {1}),
              Trial(1, OptunaState::kComplete, {{"x", f, 0.8}, {"y", f, 0.5}}, {1})};
  auto imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 20});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(),
              HasSubstr("parameter 'y' is set in 1 of 2 trials and no categorical parameter's "
                        "value tells which"));
  // A parameter that is a number in one trial and a categorical in another.
  s.trials[1].params = {Cat("x", "[1, 2]", 0)};
  imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 20});
  ASSERT_FALSE(imported.ok());
  EXPECT_THAT(imported.status().message(),
              HasSubstr("parameter 'x' is a categorical in one trial"));
  s.trials.clear();
  imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 20});
  EXPECT_THAT(imported.status().message(), HasSubstr("has no trial with parameters"));
}

// A distribution's fields of a type Optuna never writes (the fuzzer's "log": 1) are refused by
// name, never thrown: a flag that is not true or false, a name or attributes that are not what
// they should be, a step that is not a number.
TEST(OptunaImportTest, DistributionFieldsOfTheWrongTypeAreErrorsNotExceptions) {
  struct Case {
    std::string distribution, says;
  };
  for (const Case& c : {
           Case{R"({"name": "FloatDistribution", "attributes": {"low": 0, "high": 1, "log": 1}})",
                "a range whose 'log' is 1, not true or false"},
           Case{R"({"name": 5, "attributes": {"low": 0, "high": 1}})", "is not one Optuna writes"},
           Case{R"({"name": "FloatDistribution", "attributes": 5})",
                "a range without its low and high"},
           Case{R"({"name": "IntDistribution", "attributes": {"low": 0, "high": 8, "step": "2"}})",
                "a step that is not a number"},
       }) {
    OptunaStudy s;
    s.name = "s";
    s.directions = {Direction::kMinimize};
    s.trials = {Trial(0, OptunaState::kComplete, {{"x", c.distribution, 0.5}}, {1})};
    auto imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 20});
    ASSERT_FALSE(imported.ok()) << c.distribution;
    EXPECT_THAT(imported.status().message(), HasSubstr(c.says)) << c.distribution;
  }
}

TEST(OptunaImportTest, PrunedTrialsKeepTheirLastReportAndConditionsTakeSeveralValues) {
  OptunaStudy s;
  s.name = "s";
  s.directions = {Direction::kMaximize};
  const std::string f =
      R"({"name": "FloatDistribution", "attributes": {"step": null, "low": 0.0, "high": 1.0, "log": false}})";
  const std::string opts = R"(["sgd", "adam", "rmsprop"])";
  s.trials = {Trial(0, OptunaState::kComplete, {Cat("opt", opts, 0), {"m", f, 0.9}}, {0.8}),
              Trial(1, OptunaState::kPruned, {Cat("opt", opts, 2), {"m", f, 0.5}}),
              Trial(2, OptunaState::kFail, {Cat("opt", opts, 1)})};
  s.trials[1].intermediate = {{1, 0.25}, {4, 0.5}};
  auto imported = ImportOptunaStudy(s, {"f.db", std::nullopt, 0});
  ASSERT_TRUE(imported.ok()) << imported.status().message();
  EXPECT_THAT(imported->study_yaml,
              HasSubstr(R"(m: {type: float, low: 0.0, high: 1.0, when: "opt in [sgd, rmsprop]"})"));
  EXPECT_THAT(imported->study_yaml, HasSubstr("objective: {metric: value, direction: maximize}"));
  EXPECT_THAT(imported->study_yaml, HasSubstr("# No trial.command"));
  ParseOutcome parsed = ParseStudy(imported->study_yaml, "s.yaml");
  ASSERT_TRUE(parsed.spec) << parsed.ErrorText();
  const ImportedTrial& pruned = imported->trials[1];
  EXPECT_EQ(pruned.state, ImportedTrial::State::kPruned);
  EXPECT_EQ(pruned.value, 0.5);
  EXPECT_EQ(pruned.reports, (std::vector<std::pair<int64_t, double>>{{1, 0.25}, {4, 0.5}}));
  EXPECT_EQ(imported->trials[2].state, ImportedTrial::State::kFailed);
  EXPECT_EQ(imported->trials[2].params.count("m"), 0u);
  s.directions.assign(5, Direction::kMinimize);
  EXPECT_THAT(ImportOptunaStudy(s, {"f.db", std::nullopt, 0}).status().message(),
              HasSubstr("has 5 objectives; hyperpack studies have 1 to 4"));
}

}  // namespace
}  // namespace hyperpack::study
