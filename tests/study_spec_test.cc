// Tests for the study-file parser: a complete file comes back with every field filled in, and each
// kind of mistake is reported at the line and column of the token that is wrong, under the key path
// a user would look for, with a message that says what would be right.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>

#include "hyperpack/study/finalists.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "test_util.h"

namespace hyperpack::study {

// So that a failing expectation shows the diagnostic as a user would see it.
void PrintTo(const Diagnostic& d, std::ostream* os) { *os << "\"" << d.ToString() << "\""; }
void PrintTo(const SourcePos& p, std::ostream* os) {
  *os << p.file << ":" << p.line << ":" << p.column << " " << p.key;
}

namespace {

using hyperpack::testing::StudyYaml;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

ParseOutcome Parse(const std::string& text) { return ParseStudy(text, "study.yaml"); }

// A diagnostic at `line`:`column` (1-based) under `key` whose message contains `fragment`.
::testing::Matcher<const Diagnostic&> IsError(int line, int column, const std::string& key,
                                              const std::string& fragment) {
  return AllOf(Field("file", &Diagnostic::file, "study.yaml"),
               Field("line", &Diagnostic::line, line), Field("column", &Diagnostic::column, column),
               Field("key", &Diagnostic::key, key),
               Field("message", &Diagnostic::message, HasSubstr(fragment)));
}

// ---- a complete, valid file ---------------------------------------------------------------------

constexpr char kFullStudy[] = R"(name: resnet-cifar.v2
description: every kind of parameter
objective:
  metric: val_loss
  direction: minimize
  strategy: min
search_space:
  lr: {type: float, low: 1.0e-5, high: 0.1, log: true}
  batch_size: {type: int, low: 16, high: 512, log: true}
  layers: {type: int, low: 2, high: 10, step: 2}
  activation: {type: categorical, values: [relu, 1, 0.5, true, "2", 'tanh']}
  epochs: {type: fixed, value: 20}
  optimizer: [sgd, adamw, rmsprop]
  momentum:
    type: float
    low: 0.0
    high: 0.99
    when: optimizer == sgd
  nesterov:
    type: categorical
    values: [true, false]
    when: optimizer in [sgd, rmsprop]
  beta2: {type: float, low: 0.9, high: 0.9999, when: "optimizer != sgd"}
  width: {type: int, low: 32, high: 128, step: 32, when: layers == 4}
  data_parallel: {type: int, low: 1, high: 4}
  seed: 42
  mode: fast
trial:
  command: python train.py --lr {lr} --bs {batch_size} --out {trial_dir} --home ${HOME}
  workdir: runs/../runs2
  env:
    OMP_NUM_THREADS: "4"
    HP_MOMENTUM: "{momentum}"
  timeout: 1h30m
tuner: {algorithm: random, seed: 7}
budget: {max_trials: 40, max_parallel: 4, time_limit: 2h}
resources:
  gpus: "{data_parallel}"
  cpus: "{data_parallel} * 2 + 1"
)";

TEST(StudyFileTest, ParsesAFullExampleWithEveryField) {
  ParseOutcome out = Parse(kFullStudy);
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  ASSERT_TRUE(out.spec.has_value());
  const StudySpec& s = *out.spec;

  EXPECT_EQ(s.name, "resnet-cifar.v2");
  EXPECT_EQ(s.description, "every kind of parameter");
  EXPECT_EQ(s.source_path, "study.yaml");
  EXPECT_EQ(s.source_text, kFullStudy);
  EXPECT_EQ(s.objective.metric, "val_loss");
  EXPECT_EQ(s.objective.direction, Direction::kMinimize);
  EXPECT_EQ(s.objective.strategy, ObjectiveStrategy::kMin);

  const auto& params = s.space.params();
  ASSERT_EQ(params.size(), 13u);

  const ParamSpec& lr = params[0];
  EXPECT_EQ(lr.name, "lr");
  EXPECT_EQ(lr.type, ParamType::kFloat);
  EXPECT_EQ(lr.low, 1.0e-5);
  EXPECT_EQ(lr.high, 0.1);
  EXPECT_TRUE(lr.log);
  EXPECT_FALSE(lr.when.has_value());

  const ParamSpec& batch = params[1];
  EXPECT_EQ(batch.name, "batch_size");
  EXPECT_EQ(batch.type, ParamType::kInt);
  EXPECT_EQ(batch.low, 16);
  EXPECT_EQ(batch.high, 512);
  EXPECT_TRUE(batch.log);
  EXPECT_EQ(batch.step, 1);

  const ParamSpec& layers = params[2];
  EXPECT_EQ(layers.name, "layers");
  EXPECT_EQ(layers.type, ParamType::kInt);
  EXPECT_EQ(layers.low, 2);
  EXPECT_EQ(layers.high, 10);
  EXPECT_FALSE(layers.log);
  EXPECT_EQ(layers.step, 2);
  EXPECT_EQ(layers.Cardinality(), 5);

  // Plain scalars read as what they look like; quoted ones stay text.
  const ParamSpec& activation = params[3];
  EXPECT_EQ(activation.name, "activation");
  EXPECT_EQ(activation.type, ParamType::kCategorical);
  EXPECT_THAT(activation.values,
              ElementsAre(Value(std::string("relu")), Value(int64_t{1}), Value(0.5), Value(true),
                          Value(std::string("2")), Value(std::string("tanh"))));

  const ParamSpec& epochs = params[4];
  EXPECT_EQ(epochs.name, "epochs");
  EXPECT_EQ(epochs.type, ParamType::kFixed);
  EXPECT_EQ(epochs.value, Value(int64_t{20}));

  const ParamSpec& optimizer = params[5];
  EXPECT_EQ(optimizer.name, "optimizer");
  EXPECT_EQ(optimizer.type, ParamType::kCategorical);
  EXPECT_THAT(optimizer.values, ElementsAre(Value(std::string("sgd")), Value(std::string("adamw")),
                                            Value(std::string("rmsprop"))));

  const ParamSpec& momentum = params[6];
  EXPECT_EQ(momentum.name, "momentum");
  EXPECT_EQ(momentum.type, ParamType::kFloat);
  EXPECT_EQ(momentum.low, 0.0);
  EXPECT_EQ(momentum.high, 0.99);
  EXPECT_FALSE(momentum.log);
  ASSERT_TRUE(momentum.when.has_value());
  EXPECT_EQ(momentum.when->parent, "optimizer");
  EXPECT_EQ(momentum.when->op, Condition::Op::kEq);
  EXPECT_THAT(momentum.when->values, ElementsAre(Value(std::string("sgd"))));
  EXPECT_EQ(momentum.when->text, "optimizer == sgd");

  const ParamSpec& nesterov = params[7];
  EXPECT_EQ(nesterov.name, "nesterov");
  EXPECT_EQ(nesterov.type, ParamType::kCategorical);
  EXPECT_THAT(nesterov.values, ElementsAre(Value(true), Value(false)));
  ASSERT_TRUE(nesterov.when.has_value());
  EXPECT_EQ(nesterov.when->parent, "optimizer");
  EXPECT_EQ(nesterov.when->op, Condition::Op::kIn);
  EXPECT_THAT(nesterov.when->values,
              ElementsAre(Value(std::string("sgd")), Value(std::string("rmsprop"))));

  const ParamSpec& beta2 = params[8];
  EXPECT_EQ(beta2.name, "beta2");
  EXPECT_EQ(beta2.low, 0.9);
  EXPECT_EQ(beta2.high, 0.9999);
  ASSERT_TRUE(beta2.when.has_value());
  EXPECT_EQ(beta2.when->op, Condition::Op::kNe);
  EXPECT_THAT(beta2.when->values, ElementsAre(Value(std::string("sgd"))));

  // A condition on an int parent reads its value as an int.
  const ParamSpec& width = params[9];
  EXPECT_EQ(width.name, "width");
  EXPECT_EQ(width.step, 32);
  ASSERT_TRUE(width.when.has_value());
  EXPECT_EQ(width.when->parent, "layers");
  EXPECT_THAT(width.when->values, ElementsAre(Value(int64_t{4})));

  EXPECT_EQ(params[10].name, "data_parallel");
  EXPECT_EQ(params[10].type, ParamType::kInt);
  EXPECT_EQ(params[10].low, 1);
  EXPECT_EQ(params[10].high, 4);

  // Shorthand scalars are fixed parameters.
  EXPECT_EQ(params[11].name, "seed");
  EXPECT_EQ(params[11].type, ParamType::kFixed);
  EXPECT_EQ(params[11].value, Value(int64_t{42}));
  EXPECT_EQ(params[12].name, "mode");
  EXPECT_EQ(params[12].type, ParamType::kFixed);
  EXPECT_EQ(params[12].value, Value(std::string("fast")));

  EXPECT_EQ(s.trial.command,
            "python train.py --lr {lr} --bs {batch_size} --out {trial_dir} --home ${HOME}");
  // A relative workdir is resolved against the study file's directory (here the current one).
  EXPECT_EQ(s.trial.workdir, (std::filesystem::current_path() / "runs2").string());
  using Env = std::pair<std::string, std::string>;
  EXPECT_THAT(s.trial.env,
              ElementsAre(Env("OMP_NUM_THREADS", "4"), Env("HP_MOMENTUM", "{momentum}")));
  ASSERT_TRUE(s.trial.timeout_s.has_value());
  EXPECT_EQ(*s.trial.timeout_s, 90 * 60.0);

  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kRandom);
  EXPECT_EQ(s.tuner.seed, uint64_t{7});

  EXPECT_EQ(s.budget.max_trials, 40);
  EXPECT_EQ(s.budget.max_parallel, 4);
  EXPECT_EQ(s.budget.max_failed, 40 / 4);  // the default: max(5, max_trials / 4)
  ASSERT_TRUE(s.budget.time_limit_s.has_value());
  EXPECT_EQ(*s.budget.time_limit_s, 2 * 3600.0);

  ASSERT_TRUE(s.resources.gpus.has_value());
  ASSERT_TRUE(s.resources.cpus.has_value());
  EXPECT_THAT(s.resources.gpus->references(), ElementsAre("data_parallel"));
  Config config = {{"data_parallel", int64_t{3}}};
  auto gpus = s.resources.gpus->Evaluate(config);
  auto cpus = s.resources.cpus->Evaluate(config);
  ASSERT_TRUE(gpus.ok() && cpus.ok());
  EXPECT_EQ(*gpus, 3.0);
  EXPECT_EQ(*cpus, 3.0 * 2 + 1);
}

// The tests' study builder (test_util.h) writes what it is told, in both trial forms.
TEST(StudyYamlTest, WritesAStudyFileThatParsesAsWritten) {
  ParseOutcome flow =
      Parse(StudyYaml("b").Objective("acc", "maximize").Command("echo \"{x}\"").str());
  ASSERT_THAT(flow.errors, IsEmpty()) << flow.ErrorText();
  EXPECT_EQ(flow.spec->name, "b");
  EXPECT_EQ(flow.spec->objective.metric, "acc");
  EXPECT_EQ(flow.spec->objective.direction, Direction::kMaximize);
  EXPECT_EQ(flow.spec->trial.command, "echo \"{x}\"");
  ParseOutcome block =
      Parse(StudyYaml().Space("{y: [1, 2]}").TrialBlock("run {y}").str() + "  timeout: 5s\n");
  ASSERT_THAT(block.errors, IsEmpty()) << block.ErrorText();
  EXPECT_EQ(block.spec->trial.command, "run {y}");
  EXPECT_EQ(block.spec->trial.timeout_s, std::optional<double>(5));
  EXPECT_EQ(block.spec->space.params().front().name, "y");
}

TEST(StudyFileTest, FillsDefaultsForOptionalSections) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: maximize}
search_space:
  lr: {type: float, low: 0.001, high: 0.1}
trial:
  command: python train.py --lr {lr}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  const StudySpec& s = *out.spec;
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);
  EXPECT_EQ(s.objective.strategy, ObjectiveStrategy::kLast);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kGp);
  EXPECT_FALSE(s.tuner.seed.has_value());
  EXPECT_EQ(s.budget.max_trials, 100);
  EXPECT_EQ(s.budget.max_parallel, 1);
  EXPECT_EQ(s.budget.max_failed, 100 / 4);
  EXPECT_FALSE(s.budget.time_limit_s.has_value());
  EXPECT_FALSE(s.trial.timeout_s.has_value());
  EXPECT_TRUE(s.trial.workdir.empty());
  EXPECT_TRUE(s.trial.env.empty());
  EXPECT_FALSE(s.resources.gpus.has_value());
  EXPECT_FALSE(s.resources.cpus.has_value());
}

TEST(StudyFileTest, ReadsCostBudgetsAndCostAwareness) {
  ParseOutcome out = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str() +
      R"(tuner: {cost_aware: false}
budget: {gpu_hours: 40, core_hours: 2.5}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->tuner.cost_aware, std::optional<bool>(false));
  EXPECT_EQ(out.spec->budget.gpu_hours, std::optional<double>(40));
  EXPECT_EQ(out.spec->budget.core_hours, std::optional<double>(2.5));

  ParseOutcome bad = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str() +
      R"(tuner: {cost_aware: sometimes}
budget: {gpu_hours: 0, core_hours: lots}
)");
  EXPECT_THAT(
      bad.errors,
      UnorderedElementsAre(
          IsError(5, 21, "tuner.cost_aware", "expected true or false, got 'sometimes'"),
          IsError(6, 21, "budget.gpu_hours", "must be a number of hours > 0, e.g. 40 (got 0)"),
          IsError(6, 36, "budget.core_hours", "expected a number, got 'lots'")));
}

// last-N-avg (Ray Tune's scope name): the mean of the last N reports, N from 2 to 100.
TEST(StudyFileTest, ReadsTheMeanOfTheLastReportsAsAStrategyAndRejectsABadWindow) {
  auto with = [](const std::string& strategy) {
    return Parse("name: s\nobjective: {metric: loss, direction: minimize, strategy: " + strategy +
                 "}\nsearch_space: {lr: {type: float, low: 0.001, high: 0.1}}\n"
                 "trial: {command: \"run {lr}\"}\n");
  };
  ParseOutcome out = with("last-5-avg");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->objective.strategy, ObjectiveStrategy::kLastMean);
  EXPECT_EQ(out.spec->objective.window, 5);
  EXPECT_EQ(out.spec->objective.StrategyName(), "last-5-avg");
  EXPECT_THAT(DescribeStudy(*out.spec), HasSubstr("minimize loss (last-5-avg reported value)"));
  EXPECT_EQ(with("last-100-avg").spec->objective.window, 100);
  for (const std::string bad :
       {"last-1-avg", "last-101-avg", "last-x-avg", "last--avg", "last-3-mean", "mean"}) {
    ParseOutcome b = with(bad);
    EXPECT_FALSE(b.spec) << bad;
    EXPECT_THAT(b.errors,
                UnorderedElementsAre(IsError(
                    2, 58, "objective.strategy",
                    "'" + bad +
                        "' is not a strategy; expected last, min, max, best or last-N-avg (the "
                        "mean of the last N reports, N from 2 to 100, e.g. last-3-avg)")))
        << bad;
  }
}

TEST(StudyFileTest, ReadsTheRandomFractionAndRejectsOneOutsideZeroToOne) {
  const std::string head =
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str();
  ParseOutcome out = Parse(head + "tuner: {random_fraction: 0.25}\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->tuner.random_fraction, std::optional<double>(0.25));
  EXPECT_FALSE(Parse(head).spec->tuner.random_fraction.has_value());
  ParseOutcome bad = Parse(head + "tuner: {random_fraction: 1.5}\n");
  EXPECT_THAT(bad.errors,
              UnorderedElementsAre(IsError(
                  5, 26, "tuner.random_fraction",
                  "must be a number from 0 to 1, the share of proposals drawn from the Sobol "
                  "sequence instead of the model, e.g. 0.5 (got 1.5)")));
}

TEST(StudyFileTest, ReadsTheCompletedTrialsBeforeTheModelAndRejectsANegativeCount) {
  const std::string head =
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str();
  ParseOutcome out = Parse(head + "tuner: {initial_full_trials: 12}\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->tuner.initial_full_trials, std::optional<int>(12));
  EXPECT_FALSE(Parse(head).spec->tuner.initial_full_trials.has_value());
  ParseOutcome bad = Parse(head + "tuner: {initial_full_trials: -1}\n");
  EXPECT_THAT(bad.errors, UnorderedElementsAre(IsError(
                              5, 30, "tuner.initial_full_trials",
                              "must be between 0 and 100000, the completed trials before the model "
                              "proposes (0: from the initial design on) (got -1)")));
}

TEST(StudyFileTest, ReadsTheQueueAndRejectsWhatItCannotUse) {
  ParseOutcome out = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str() +
      R"(queue: {order: fifo, aging: 0.5, max_wait: 2h}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->queue.order, std::optional<scheduler::Order>(scheduler::Order::kArrival));
  EXPECT_EQ(out.spec->queue.aging, 0.5);
  EXPECT_EQ(out.spec->queue.max_wait_s, std::optional<double>(7200));

  ParseOutcome none = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str());
  ASSERT_THAT(none.errors, IsEmpty()) << none.ErrorText();
  EXPECT_FALSE(none.spec->queue.order.has_value()) << "the default follows resources";
  EXPECT_FALSE(none.spec->queue.max_wait_s.has_value());
  ParseOutcome off = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str() +
      R"(queue: {max_wait: none}
)");
  ASSERT_THAT(off.errors, IsEmpty()) << off.ErrorText();
  EXPECT_EQ(off.spec->queue.max_wait_s, std::optional<double>(0)) << "no starvation guard";

  ParseOutcome bad = Parse(
      StudyYaml().Space("{lr: {type: float, low: 0.001, high: 0.1}}").Command("run {lr}").str() +
      R"(queue: {order: sjff, aging: -1, max_wait: soon}
)");
  EXPECT_THAT(
      bad.errors,
      UnorderedElementsAre(
          IsError(5, 16, "queue.order", "'sjff' is not one of fifo, sjf; did you mean 'sjf'?"),
          IsError(5, 29, "queue.aging",
                  "must be a number >= 0, the seconds of predicted run time forgiven per "
                  "second waited, e.g. 1 (got -1)"),
          IsError(5, 43, "queue.max_wait",
                  "'soon' is not a duration; expected e.g. 45s, 10m, 1h30m, 2h or seconds")));
}

// A minimal study file with `top` (lines, or nothing) after its name.
ParseOutcome ParseWithTop(const std::string& top) {
  return Parse(StrCat("name: demo\n", top, R"(objective: {metric: loss, direction: minimize}
search_space: {lr: {type: float, low: 0.001, high: 0.1}}
trial: {command: "run {lr}"}
)"));
}

TEST(StudyFileTest, ReadsThePriorityAServerSharesBy) {
  ParseOutcome out = ParseWithTop("priority: 2.5\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->priority, 2.5);
  ParseOutcome none = ParseWithTop("");
  ASSERT_THAT(none.errors, IsEmpty()) << none.ErrorText();
  EXPECT_EQ(none.spec->priority, 1);
  for (const char* bad : {"0", "-1", "high", "5000"}) {
    ParseOutcome out = ParseWithTop(StrCat("priority: ", bad, "\n"));
    ASSERT_EQ(out.errors.size(), 1u) << bad;
    EXPECT_EQ(out.errors[0].key, "priority");
    EXPECT_EQ(out.errors[0].line, 2);
    EXPECT_EQ(out.errors[0].column, 11);
  }
}

TEST(StudyFileTest, DefaultMaxFailedIsAtLeastFive) {
  ParseOutcome out = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                           R"(budget: {max_trials: 8}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->budget.max_failed, 5);
}

TEST(StudyFileTest, ResolvesRelativeWorkdirAgainstTheStudyFilesDirectory) {
  ParseOutcome out = ParseStudy(
      StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(  workdir: ../runs
)",
      "/data/exp/study.yaml");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->trial.workdir, "/data/runs");
}

TEST(StudyFileTest, AcceptsShellExpansionsAndLiteralBracesInTheCommand) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial:
  command: 'run --x {x} --cache ${CACHE_DIR:-/tmp} --home ${HOME} --json {{"a": 1}}'
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->trial.command,
            R"(run --x {x} --cache ${CACHE_DIR:-/tmp} --home ${HOME} --json {{"a": 1}})");
}

// ---- YAML and the file's shape ------------------------------------------------------------------

TEST(StudyFileTest, ReportsYamlSyntaxErrorAtTheMisindentedKey) {
  ParseOutcome out = Parse(R"(name: demo
objective:
  metric: loss
 direction: minimize
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 2, "", "invalid YAML: end of map not found")));
}

TEST(StudyFileTest, ReportsYamlSyntaxErrorAtATabIndent) {
  ParseOutcome out = Parse("name: demo\n\tobjective: {metric: loss}\n");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(out.errors, ElementsAre(IsError(2, 1, "", "invalid YAML: illegal tab")));
}

TEST(StudyFileTest, RejectsARootThatIsNotAMapping) {
  ParseOutcome out = Parse(R"(- name: demo
- objective: {metric: loss}
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(out.errors, ElementsAre(IsError(1, 1, "", "a study file is a mapping with keys")));
}

TEST(StudyFileTest, RejectsAnEmptyFile) {
  ParseOutcome out = Parse("");
  EXPECT_FALSE(out.spec.has_value());
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_THAT(out.errors[0].message, HasSubstr("a study file is a mapping with keys"));
}

TEST(StudyFileTest, ReportsEveryMissingTopLevelKeyAtTheStartOfTheFile) {
  ParseOutcome out = Parse(R"(description: nothing else
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(out.errors, ElementsAre(IsError(1, 1, "name", "missing; expected the study's name"),
                                      IsError(1, 1, "objective", "missing; expected {metric: NAME"),
                                      IsError(1, 1, "search_space",
                                              "missing; expected a mapping of parameter")));
  // trial: may be left out: ask and tell (hyperpack create) run no command.
}

TEST(StudyFileTest, RejectsMissingName) {
  ParseOutcome out = Parse(R"(objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial:
  command: run {x}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(1, 1, "name", "missing; expected the study's name")));
}

TEST(StudyFileTest, RejectsMissingObjectiveMetricAndPointsAtTheObjectiveKey) {
  ParseOutcome out = Parse(R"(name: demo
objective:
  direction: minimize
search_space: {x: [1, 2]}
trial:
  command: run {x}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(2, 1, "objective.metric", "missing; expected the name")));
}

TEST(StudyFileTest, RejectsMissingObjectiveDirection) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss}
search_space: {x: [1, 2]}
trial:
  command: run {x}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(2, 1, "objective.direction",
                                              "missing; expected minimize or maximize")));
}

TEST(StudyFileTest, RejectsMisspelledDirectionAndSuggestsTheRightOne) {
  ParseOutcome out = Parse(
      StudyYaml().Objective("loss", "maximise").Space("{x: [1, 2]}").TrialBlock("run {x}").str());
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(2, 38, "objective.direction",
                                  "'maximise' is not a direction; expected 'maximize'")));
}

TEST(StudyFileTest, RejectsUnknownTopLevelKeyAndSuggestsTheRightOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
serch_space:
  x: [1, 2]
trial: {command: run}
)");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(3, 1, "", "unknown key 'serch_space'; did you mean 'search_space'?"),
                  IsError(1, 1, "search_space", "missing")));
}

TEST(StudyFileTest, RejectsMissingSearchSpaceValue) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
trial: {command: run}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(3, 1, "search_space",
                                              "expected a mapping of parameter names to their "
                                              "ranges, got nothing")));
}

TEST(StudyFileTest, ReportsAnEmptySectionAtItsKeyNotAtTheNextLine) {
  ParseOutcome out = Parse(R"(name: demo
objective:
search_space:
  x: [1, 2]
tuner:
trial:
)");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(2, 1, "objective", "expected a mapping of keys to values, got nothing"),
                  IsError(6, 1, "trial", "expected a mapping of keys to values, got nothing"),
                  IsError(5, 1, "tuner", "expected a mapping of keys to values, got nothing")));
}

TEST(StudyFileTest, ReportsAnEmptyParameterTypeAtTheParameter) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr:
    type:
    low: 0.1
trial:
  command: run
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 3, "search_space.lr.type", "'' is not a parameter type")));
}

TEST(StudyFileTest, RejectsDuplicateTopLevelKey) {
  ParseOutcome out =
      Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(name: other
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 1, "name", "duplicate key")));
}

// ---- parameters ---------------------------------------------------------------------------------

TEST(StudyFileTest, RejectsUnknownKeyInAParameterAndSuggestsTheRightOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 1e-4, hihg: 0.1}
trial:
  command: run {lr}
)");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(4, 32, "search_space.lr", "unknown key 'hihg'; did you mean 'high'?"),
                  IsError(4, 3, "search_space.lr.high", "missing; expected the upper bound")));
}

TEST(StudyFileTest, RejectsRangeWithoutHighAndPointsAtTheParameterKey) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  x: [1, 2]
  lr:
    type: float
    low: 0.1
trial:
  command: run {x}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 3, "search_space.lr.high",
                                              "missing; expected the upper bound")));
}

TEST(StudyFileTest, RejectsUnknownParameterTypeAndSuggestsTheRightOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr:
    type: flaot
    low: 0.001
    high: 0.1
trial: {command: run}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(5, 11, "search_space.lr.type",
                                  "'flaot' is not a parameter type; expected 'float'")));
}

TEST(StudyFileTest, RejectsParameterWithoutAType) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {low: 0.001, high: 0.1}
trial: {command: run}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 3, "search_space.lr.type",
                                  "missing; expected float, int, categorical or fixed")));
}

TEST(StudyFileTest, RejectsLogScaleWithNonPositiveLowAndNamesTheLine) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.0, high: 0.1, log: true}
trial:
  command: run {lr}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 26, "search_space.lr.low",
                                              "must be > 0 when log: true (got 0.0)")));
}

TEST(StudyFileTest, RejectsFloatHighNotAboveLow) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr:
    type: float
    low: 0.5
    high: 0.5
trial:
  command: run {lr}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(7, 11, "search_space.lr.high", "must be > low (0.5), got 0.5")));
}

TEST(StudyFileTest, RejectsIntHighBelowLow) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  units: {type: int, low: 64, high: 32}
trial:
  command: run {units}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 37, "search_space.units.high",
                                              "must be >= low (64), got 32")));
}

TEST(StudyFileTest, RejectsIntWithNonIntegerLow) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  units: {type: int, low: 1.5, high: 32}
trial:
  command: run {units}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 27, "search_space.units.low",
                                              "expected a whole number, got '1.5'")));
}

TEST(StudyFileTest, RejectsFloatBoundThatIsNotANumber) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: small, high: 0.1}
trial:
  command: run {lr}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 26, "search_space.lr.low", "expected a number, got 'small'")));
}

TEST(StudyFileTest, RejectsStepBelowOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  units: {type: int, low: 8, high: 64, step: 0}
trial:
  command: run {units}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 46, "search_space.units.step", "must be >= 1 (got 0)")));
}

TEST(StudyFileTest, RejectsStepCombinedWithLog) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  units: {type: int, low: 8, high: 64, step: 8, log: true}
trial:
  command: run {units}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 46, "search_space.units.step",
                                              "cannot be combined with log: true")));
}

TEST(StudyFileTest, WarnsWhenTheStepLeavesOneValueAndStillAcceptsTheFile) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  batch: {type: int, low: 16, high: 32, step: 64}
trial:
  command: run {batch}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_TRUE(out.spec.has_value());
  EXPECT_THAT(out.warnings,
              ElementsAre(IsError(4, 47, "search_space.batch",
                                  "warning: step 64 leaves one value (16) between low 16 and high "
                                  "32; to tune it, raise high to at least 80 or lower the step to "
                                  "at most 16; to pin it, write {type: fixed, value: 16}")));
  EXPECT_EQ(out.WarningText(),
            "study.yaml:4:47: search_space.batch: warning: step 64 leaves one value (16) between "
            "low 16 and high 32; to tune it, raise high to at least 80 or lower the step to at "
            "most 16; to pin it, write {type: fixed, value: 16}");
}

TEST(StudyFileTest, WarnsWhenIntLowEqualsHighOnALinearOrLogScale) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  units: {type: int, low: 16, high: 16}
  layers: {type: int, low: 4, high: 4, log: true}
  width: {type: int, low: 8, high: 8, step: 8}
trial:
  command: run {units} {layers} {width}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_TRUE(out.spec.has_value());
  EXPECT_THAT(out.warnings,
              ElementsAre(IsError(4, 37, "search_space.units",
                                  "warning: low and high are both 16, so the range holds one "
                                  "value; to tune it, raise high above 16; to pin it, write "
                                  "{type: fixed, value: 16}"),
                          IsError(5, 37, "search_space.layers", "low and high are both 4"),
                          IsError(6, 36, "search_space.width", "low and high are both 8")));
}

TEST(StudyFileTest, DoesNotWarnAboutRangesWithTwoOrMoreValues) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  batch: {type: int, low: 16, high: 32, step: 16}
  units: {type: int, low: 16, high: 17}
  lr: {type: float, low: 0.1, high: 0.2}
trial:
  command: run {batch} {units} {lr}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_THAT(out.warnings, IsEmpty()) << out.WarningText();
  EXPECT_EQ(out.WarningText(), "");
  EXPECT_THAT(Parse(kFullStudy).warnings, IsEmpty());
}

TEST(StudyFileTest, ReportsWarningsBesideErrorsInTheSameFile) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  batch: {type: int, low: 16, high: 32, step: 64}
  units: {type: int, low: 64, high: 32}
trial:
  command: run {batch} {units}
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 37, "search_space.units.high", "must be >= low")));
  EXPECT_THAT(out.warnings, ElementsAre(IsError(4, 47, "search_space.batch", "step 64")));
}

TEST(StudyFileTest, RejectsEmptyCategoricalValues) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: {type: categorical, values: []}
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 42, "search_space.optimizer.values",
                                  "expected a non-empty list of values, got an empty list")));
}

TEST(StudyFileTest, RejectsDuplicateCategoricalValueAtTheRepeat) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw, sgd]
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 27, "search_space.optimizer", "duplicate value sgd")));
}

TEST(StudyFileTest, RejectsInvalidParameterName) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  x: [1, 2]
  -lr: {type: float, low: 0.001, high: 0.1}
  "learning rate": {type: float, low: 0.001, high: 0.1}
trial:
  command: run {x}
)");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(5, 3, "search_space.-lr", "not a valid parameter name"),
                  IsError(6, 3, "search_space.learning rate", "not a valid parameter name")));
}

// Names as W&B with Hydra (dotted), Katib (dashed) and NNI (0_1) write them: valid, in placeholders
// and conditions too, and passed as HP_ variables with every other character made '_'.
TEST(StudyFileTest, AcceptsDottedDashedAndDigitLeadingParameterNames) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer.config.learning_rate: {type: float, low: 0.001, high: 0.1}
  num-layers: [2, 4]
  0_1: {type: int, low: 0, high: 3}
  head: {type: categorical, values: [a, b], when: num-layers == 4}
trial:
  command: run optimizer.config.learning_rate={optimizer.config.learning_rate} {num-layers} {0_1}
)");
  ASSERT_TRUE(out.spec) << out.ErrorText();
  EXPECT_EQ(out.spec->space.params().size(), 4u);
  EXPECT_EQ(ParamEnvName("optimizer.config.learning_rate"), "HP_OPTIMIZER_CONFIG_LEARNING_RATE");
  EXPECT_EQ(ParamEnvName("num-layers"), "HP_NUM_LAYERS");
  EXPECT_EQ(RenderTemplate(out.spec->trial.command,
                           {{"optimizer.config.learning_rate", 0.01},
                            {"num-layers", int64_t{4}},
                            {"0_1", int64_t{2}}},
                           {}),
            "run optimizer.config.learning_rate=0.01 4 2");
}

// Lists and mappings as values: each value is its JSON text, keys sorted, and the parameter is
// marked structured so the program gets them decoded.
TEST(StudyFileTest, ListsAndMappingsAreStructuredValues) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  files: {type: fixed, value: [a.yml, 2]}
  opt: [{optimizer: Adam, lr: 0.001}, {optimizer: SGD, lr: 0.01}]
  plain: [1, 2]
  none: {type: fixed, value: null}
trial:
  command: run {files}
)");
  ASSERT_TRUE(out.spec) << out.ErrorText();
  const ParamSpec* files = out.spec->space.Find("files");
  ASSERT_NE(files, nullptr);
  EXPECT_TRUE(files->structured);
  EXPECT_EQ(std::get<std::string>(files->value), R"(["a.yml",2])");
  const ParamSpec* opt = out.spec->space.Find("opt");
  ASSERT_NE(opt, nullptr);
  EXPECT_TRUE(opt->structured);
  EXPECT_EQ(std::get<std::string>(opt->values[0]), R"({"lr":0.001,"optimizer":"Adam"})");
  EXPECT_FALSE(out.spec->space.Find("plain")->structured);
  EXPECT_EQ(std::get<std::string>(out.spec->space.Find("none")->value), "null");
}

TEST(StudyFileTest, MetricsFromFilesNeedsAPathAndOnlyThem) {
  ParseOutcome ok = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial: {command: "run {x}", metrics_from: tensorboard, metrics_path: "{trial_dir}/tb"}
)");
  ASSERT_TRUE(ok.spec) << ok.ErrorText();
  EXPECT_EQ(ok.spec->trial.metrics_from, MetricsSource::kTensorboard);
  EXPECT_EQ(ok.spec->trial.metrics_path, "{trial_dir}/tb");
  ParseOutcome missing = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial: {command: "run {x}", metrics_from: file}
)");
  EXPECT_THAT(missing.errors, ElementsAre(IsError(4, 1, "trial.metrics_path", "missing")));
  ParseOutcome stray = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial: {command: "run {x}", metrics_path: "{nope}/tb"}
)");
  EXPECT_THAT(stray.errors,
              ElementsAre(IsError(4, 29, "trial.metrics_path",
                                  "is read only with metrics_from: tensorboard or file")));
}

// Found by the study parser's fuzzer: a structured value with bytes that are not UTF-8.
TEST(StudyFileTest, AStructuredValueThatIsNotUtf8NeitherThrowsNorCrashes) {
  ParseOutcome out =
      Parse(std::string("name: demo\nobjective: {metric: loss, direction: minimize}\n"
                        "search_space:\n  x: [[a, \"\xff\xfe\"], [b]]\n"
                        "trial: {command: run {x}}\n"));
  for (const Diagnostic& d : out.errors) EXPECT_FALSE(d.message.empty());
  if (out.spec) {
    EXPECT_TRUE(out.spec->space.Find("x")->structured);
  }
}

TEST(StudyFileTest, RejectsTwoParametersPassedAsOneVariable) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  a.b: [1, 2]
  a_b: [3, 4]
trial:
  command: run {a.b}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 3, "search_space.a_b",
                                              "'a_b' and 'a.b' would both be passed as HP_A_B")));
}

TEST(StudyFileTest, RejectsDuplicateParameter) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  x: [1, 2]
  x: [3, 4]
trial:
  command: run {x}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 3, "search_space.x", "duplicate parameter")));
}

// ---- conditions ---------------------------------------------------------------------------------

TEST(StudyFileTest, RejectsConditionOnAnUndeclaredParameterAndSuggestsOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw]
  momentum: {type: float, low: 0.0, high: 0.9, when: optimzer == sgd}
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(5, 54, "search_space.momentum.when",
                                  "'optimzer' is not a parameter declared before 'momentum'; "
                                  "did you mean 'optimizer'?")));
}

TEST(StudyFileTest, RejectsConditionOnAParameterDeclaredLater) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  momentum: {type: float, low: 0.0, high: 0.9, when: optimizer == sgd}
  optimizer: [sgd, adamw]
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(4, 54, "search_space.momentum.when",
                                              "'optimizer' is not a parameter declared before "
                                              "'momentum'")));
}

TEST(StudyFileTest, RejectsConditionValueThatTheParentCannotTake) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw]
  momentum:
    type: float
    low: 0.0
    high: 0.9
    when: optimizer == sdg
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(9, 11, "search_space.momentum.when",
                                              "'sdg' is not a value of 'optimizer'; did you mean "
                                              "'sgd'?")));
}

TEST(StudyFileTest, RejectsConditionListValueThatTheParentCannotTake) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  layers: {type: int, low: 1, high: 3}
  width:
    type: int
    low: 8
    high: 64
    when: layers in [2, 7]
trial:
  command: run {layers}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(9, 11, "search_space.width.when",
                                              "'7' is not a value of 'layers'")));
}

TEST(StudyFileTest, RejectsConditionOnAFloatParent) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.001, high: 0.1}
  warmup: {type: int, low: 0, high: 10, when: lr == 0.01}
trial:
  command: run {lr}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 47, "search_space.warmup.when",
                                              "conditions on a float parameter ('lr') are not "
                                              "supported")));
}

TEST(StudyFileTest, RejectsMalformedCondition) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw]
  momentum: {type: float, low: 0.0, high: 0.9, when: optimizer is sgd}
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 54, "search_space.momentum.when",
                                              "'optimizer is sgd' is not a condition; expected "
                                              "'PARAM == VALUE'")));
}

// A study whose `momentum` is conditioned on `optimizer` by `when`.
ParseOutcome ParseWithCondition(const std::string& when) {
  return Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw]
  momentum: {type: float, low: 0.0, high: 0.9, when: ")" +
               when + R"("}
trial:
  command: run {optimizer}
)");
}

TEST(StudyFileTest, ConditionsReadTheSameWithOrWithoutSpacesAroundTheOperator) {
  for (const char* when : {"optimizer==sgd", "  optimizer !=adamw ", "optimizer in[sgd]"}) {
    ParseOutcome out = ParseWithCondition(when);
    ASSERT_TRUE(out.errors.empty()) << when << ": " << out.errors.front().message;
    const ParamSpec& momentum = out.spec->space.params().at(1);
    ASSERT_TRUE(momentum.when.has_value()) << when;
    EXPECT_EQ(momentum.when->parent, "optimizer") << when;
    EXPECT_TRUE(momentum.when->Holds(std::string("sgd"))) << when;
    EXPECT_FALSE(momentum.when->Holds(std::string("adamw"))) << when;
  }
  // "in" glued to the name is part of the name; an operator with nothing after it is no condition.
  for (const char* when : {"optimizerin [sgd]", "optimizer == ", "optimizer in"}) {
    ParseOutcome out = ParseWithCondition(when);
    ASSERT_EQ(out.errors.size(), 1u) << when;
    EXPECT_THAT(out.errors.front().message, HasSubstr("is not a condition")) << when;
  }
}

TEST(StudyFileTest, RejectsInWithoutAList) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  optimizer: [sgd, adamw]
  momentum: {type: float, low: 0.0, high: 0.9, when: optimizer in sgd}
trial:
  command: run {optimizer}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(5, 54, "search_space.momentum.when",
                                              "expected a list after 'in'")));
}

// ---- trial --------------------------------------------------------------------------------------

TEST(StudyFileTest, RejectsCommandPlaceholderOfAnUnknownParameterAndSuggestsOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  learning_rate: {type: float, low: 0.001, high: 0.1}
trial:
  command: python train.py --lr {learning_rte}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 12, "trial.command",
                                              "'{learning_rte}' is not a parameter; did you mean "
                                              "'{learning_rate}'?")));
}

TEST(StudyFileTest, RejectsUnclosedBraceInCommand) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.001, high: 0.1}
trial:
  command: python train.py --lr {lr
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(6, 12, "trial.command", "'{' at character 22 is not closed")));
}

TEST(StudyFileTest, RejectsMissingCommand) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
trial:
  timeout: 10m
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 1, "trial.command", "missing; expected the command")));
}

TEST(StudyFileTest, RejectsMalformedTimeout) {
  ParseOutcome out =
      Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(  timeout: 10x
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 12, "trial.timeout", "'10x' is not a duration")));
}

TEST(StudyFileTest, RejectsEnvThatIsNotAMapping) {
  ParseOutcome out =
      Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(  env: [A=1, B=2]
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 8, "trial.env",
                                              "expected a mapping of variable names to values, got "
                                              "a list")));
}

TEST(StudyFileTest, RejectsEnvVariableWithAnInvalidNameOrUnknownPlaceholder) {
  ParseOutcome out = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(  env:
    1BAD: "1"
    GOOD: "{y}"
)");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(7, 5, "trial.env", "'1BAD' is not a valid environment variable name"),
                  IsError(8, 11, "trial.env.GOOD", "'{y}' is not a parameter")));
}

// ---- tuner, budget, resources -------------------------------------------------------------------

TEST(StudyFileTest, RejectsUnknownTunerAlgorithmAndSuggestsOne) {
  ParseOutcome out = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                           R"(tuner: {algorithm: sobel}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(
                              6, 20, "tuner.algorithm",
                              "'sobel' is not one of gp, random, sobol; did you mean 'sobol'?")));
}

TEST(StudyFileTest, RejectsNegativeSeed) {
  ParseOutcome out = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(tuner:
  algorithm: random
  seed: -1
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(8, 9, "tuner.seed", "must be >= 0 (got -1)")));
}

TEST(StudyFileTest, RejectsZeroMaxParallel) {
  ParseOutcome out = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(budget:
  max_trials: 10
  max_parallel: 0
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(8, 17, "budget.max_parallel",
                                              "must be between 1 and 1000000 (got 0)")));
}

TEST(StudyFileTest, RejectsResourceExpressionOfAnUnknownParameterAndSuggestsOne) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  data_parallel: {type: int, low: 1, high: 4}
trial:
  command: run {data_parallel}
resources:
  gpus: "{data_paralel} * 2"
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(8, 9, "resources.gpus",
                                              "'{data_paralel}' is not a parameter; did you mean "
                                              "'{data_parallel}'?")));
}

TEST(StudyFileTest, RejectsResourceExpressionOfAConditionalParameter) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  mode: [single, multi]
  gpus_per_trial: {type: int, low: 2, high: 8, when: mode == multi}
trial:
  command: run {mode}
resources:
  gpus: "{gpus_per_trial}"
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(9, 9, "resources.gpus",
                                  "'{gpus_per_trial}' is conditional (mode == multi)")));
}

TEST(StudyFileTest, RejectsMalformedResourceExpression) {
  ParseOutcome out =
      Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() + R"(resources: {cpus: 2 *}
)");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 19, "resources.cpus", "at character 4")));
}

// A trial's share of a GPU: memory as a size (binary and decimal units, plain MiB, a template
// with its unit), or gpus as a fraction below 1.
TEST(StudyFileTest, ReadsGpuMemoryAsASizeAndAFractionOfAGpuAsAShare) {
  struct Case {
    std::string text;
    double mib;  // for gib = 3
  };
  for (const Case& c : {Case{"2GiB", 2048}, Case{"1500", 1500}, Case{"512 MiB", 512},
                        Case{"\"{gib} * 2 GiB\"", 6144}, Case{"1GB", 1e9 / 1048576}}) {
    ParseOutcome out =
        Parse(StudyYaml().Space("{gib: {type: int, low: 1, high: 4}}").TrialBlock("run").str() +
              "resources: {gpu_memory: " + c.text + "}\n");
    ASSERT_TRUE(out.errors.empty()) << c.text << ": " << out.errors[0].ToString();
    const ResourceSpec& r = out.spec->resources;
    ASSERT_TRUE(r.gpu_memory.has_value()) << c.text;
    EXPECT_NEAR(*r.gpu_memory->Evaluate({{"gib", int64_t{3}}}) * r.gpu_memory_unit_mb, c.mib, 1e-6)
        << c.text;
    EXPECT_TRUE(r.SharesGpu());
  }
  ParseOutcome half = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                            "resources: {gpus: 0.5}\n");
  ASSERT_TRUE(half.errors.empty());
  EXPECT_TRUE(half.spec->resources.SharesGpu());
}

TEST(StudyFileTest, RejectsAShareBesideWholeGpusAndAFractionAboveOne) {
  ParseOutcome both = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                            "resources: {gpus: 2, gpu_memory: 4GiB}\n");
  EXPECT_THAT(both.errors,
              ElementsAre(IsError(6, 34, "resources.gpu_memory",
                                  "gives each rank whole GPUs; leave out gpu_memory, or make gpus "
                                  "a fraction such as 0.5")));
  ParseOutcome odd = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                           "resources: {gpus: 1.5}\n");
  EXPECT_THAT(odd.errors, ElementsAre(IsError(6, 19, "resources.gpus",
                                              "expected a whole number of GPUs, or a fraction "
                                              "below 1 to share one, got 1.5")));
  ParseOutcome bad = Parse(StudyYaml().Space("{x: [1, 2]}").TrialBlock("run {x}").str() +
                           "resources: {gpu_memory: [2GiB]}\n");
  EXPECT_THAT(bad.errors, ElementsAre(IsError(6, 25, "resources.gpu_memory",
                                              "expected a size such as 2GiB or 1500 (MiB)")));
}

// ---- several problems at once -------------------------------------------------------------------

TEST(StudyFileTest, ReportsEveryProblemInOneFileInOrder) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: up}
search_space:
  lr: {type: float, low: -1, high: 0.1, log: true}
  units: {type: int, low: 8, high: 4}
  optimizer: [sgd, sgd]
trial:
  command: run {lr} {unit}
  timeout: soon
tuner: {algorithm: grid}
budget: {max_trials: 0}
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(2, 38, "objective.direction", "'up' is not a direction"),
                  IsError(4, 26, "search_space.lr.low", "must be > 0 when log: true (got -1)"),
                  IsError(5, 36, "search_space.units.high", "must be >= low (8), got 4"),
                  IsError(6, 20, "search_space.optimizer", "duplicate value sgd"),
                  IsError(8, 12, "trial.command", "'{unit}' is not a parameter"),
                  IsError(9, 12, "trial.timeout", "'soon' is not a duration"),
                  IsError(10, 20, "tuner.algorithm", "'grid' is not one of gp, random, sobol"),
                  IsError(11, 22, "budget.max_trials", "must be between 1 and 1000000")));
  // lr is declared, so {lr} in the command is not reported again; {unit} is a typo.
  // One line per problem, each starting with file:line:column.
  std::string text = out.ErrorText();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n') + 1, static_cast<long>(out.errors.size()));
  EXPECT_THAT(text, HasSubstr("study.yaml:4:26: search_space.lr.low: must be > 0 when log: true"));
}

TEST(StudyFileTest, DoesNotReportReferencesToAParameterThatHasItsOwnError) {
  ParseOutcome out = Parse(R"(name: demo
objective: {metric: loss, direction: minimize}
search_space:
  workers: {type: int, low: 4, high: 1}
  optimizer: {type: categorical, values: []}
  momentum: {type: float, low: 0.0, high: 0.9, when: optimizer == sgd}
trial:
  command: run {workers} {optimizer} {momentum}
  env:
    N: "{workers}"
resources:
  cpus: "{workers} * 2"
)");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(4, 38, "search_space.workers.high", "must be >= low (4), got 1"),
                          IsError(5, 42, "search_space.optimizer.values",
                                  "expected a non-empty list of values, got an empty list")));
}

// ---- files --------------------------------------------------------------------------------------

TEST(LoadStudyFileTest, ReportsAMissingFileByName) {
  std::string path =
      (std::filesystem::temp_directory_path() / "hyperpack-no-such-dir" / "study.yaml").string();
  ParseOutcome out = LoadStudyFile(path);
  EXPECT_FALSE(out.spec.has_value());
  ASSERT_EQ(out.errors.size(), 1u);
  EXPECT_EQ(out.errors[0].file, path);
  EXPECT_EQ(out.errors[0].line, 0);
  EXPECT_THAT(out.errors[0].message, HasSubstr("cannot read the study file"));
  EXPECT_THAT(out.ErrorText(), HasSubstr(path));
}

// A directory of its own under the system's temporary directory, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "hyperpack-spec-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(LoadStudyFileTest, ParsesARealFileAndResolvesWorkdirNextToIt) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::filesystem::path file = dir.path() / "study.yaml";
  const std::string text = StudyYaml("from-disk")
                               .Objective("acc", "maximize")
                               .Space("{x: [1, 2]}")
                               .TrialBlock("run {x}")
                               .str() +
                           R"(  workdir: work
)";
  {
    std::ofstream out(file);
    out << text;
  }
  ParseOutcome out = LoadStudyFile(file.string());
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->name, "from-disk");
  EXPECT_EQ(out.spec->source_path, file.string());
  EXPECT_EQ(out.spec->source_text, text);
  EXPECT_EQ(out.spec->trial.workdir, (dir.path() / "work").string());
}

TEST(LoadStudyFileTest, NamesTheFileInDiagnostics) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::filesystem::path file = dir.path() / "bad.yaml";
  {
    std::ofstream out(file);
    out << "name: demo\n";
  }
  ParseOutcome out = LoadStudyFile(file.string());
  ASSERT_FALSE(out.errors.empty());
  for (const Diagnostic& d : out.errors) EXPECT_EQ(d.file, file.string());
  EXPECT_THAT(out.ErrorText(), HasSubstr(file.string() + ":1:1: objective: missing"));
}

TEST(StudyFileTest, TrialWarmIsOnUnlessTurnedOffAndMustBeABoolean) {
  constexpr char kBase[] =
      "name: s\nobjective: {metric: loss, direction: minimize}\n"
      "search_space: {x: {type: float, low: 0, high: 1}}\n";
  auto on = Parse(std::string(kBase) + "trial: {command: \"hyperpack-trainer --lr {x}\"}\n");
  ASSERT_TRUE(on.spec) << on.ErrorText();
  EXPECT_TRUE(on.spec->trial.warm);
  auto off = Parse(std::string(kBase) + "trial: {command: \"run {x}\", warm: false}\n");
  ASSERT_TRUE(off.spec) << off.ErrorText();
  EXPECT_FALSE(off.spec->trial.warm);
  auto bad = Parse(std::string(kBase) + "trial: {command: \"run {x}\", warm: sometimes}\n");
  EXPECT_FALSE(bad.spec);
  EXPECT_THAT(bad.ErrorText(), HasSubstr("trial.warm"));
}

// ---- objectives and constraints -----------------------------------------------------------------

constexpr char kTwoObjectives[] = R"(name: trade-off
objectives:
  - {metric: val_loss, direction: minimize}
  - {metric: throughput, direction: maximize, strategy: max}
constraints:
  - {metric: peak_mem_gb, max: 40}
  - {metric: val_accuracy, min: 0.9}
search_space: {lr: {type: float, low: 0.001, high: 0.1}}
trial: {command: "run {lr}"}
)";

TEST(StudyFileTest, ReadsSeveralObjectivesAndConstraints) {
  ParseOutcome out = Parse(kTwoObjectives);
  ASSERT_TRUE(out.spec) << out.ErrorText();
  const StudySpec& s = *out.spec;
  ASSERT_EQ(s.objectives.size(), 2u);
  EXPECT_TRUE(s.MultiObjective());
  EXPECT_TRUE(s.KeepsValues());
  EXPECT_EQ(s.objective.metric, "val_loss");  // the first stands for the study where one must
  EXPECT_EQ(s.objectives[1].metric, "throughput");
  EXPECT_EQ(s.objectives[1].direction, Direction::kMaximize);
  EXPECT_EQ(s.objectives[1].strategy, ObjectiveStrategy::kMax);
  ASSERT_EQ(s.constraints.size(), 2u);
  EXPECT_EQ(s.constraints[0].bound, Constraint::Bound::kMax);
  EXPECT_EQ(s.constraints[0].Violation(42), 2);
  EXPECT_EQ(s.constraints[1].bound, Constraint::Bound::kMin);
  EXPECT_GT(s.constraints[1].Violation(0.85), 0);
  EXPECT_LT(s.constraints[1].Violation(0.95), 0);
  EXPECT_THAT(DescribeStudy(s), AllOf(HasSubstr("objective   maximize throughput"),
                                      HasSubstr("constraint  peak_mem_gb <= 40"),
                                      HasSubstr("constraint  val_accuracy >= 0.9")));
  // One objective with a constraint keeps values too, and is not multi-objective.
  ParseOutcome one = ParseWithTop("constraints: [{metric: mem, max: 1}]\n");
  ASSERT_TRUE(one.spec) << one.ErrorText();
  EXPECT_FALSE(one.spec->MultiObjective());
  EXPECT_TRUE(one.spec->KeepsValues());
}

TEST(StudyFileTest, RejectsObjectivesThatAreNotTwoToFourDistinctMetrics) {
  ParseOutcome both = ParseWithTop(
      "objectives: [{metric: a, direction: minimize}, "
      "{metric: b, direction: minimize}]\n");
  EXPECT_THAT(both.errors,
              ElementsAre(IsError(2, 1, "objectives", "both objective and objectives are given")));
  ParseOutcome one = Parse(R"(name: demo
objectives: [{metric: a, direction: minimize}]
search_space: {x: [1, 2]}
trial: {command: "run {x}"}
)");
  EXPECT_THAT(one.errors,
              ElementsAre(IsError(2, 13, "objectives", "expected a list of 2 to 4 objectives")));
  ParseOutcome same = Parse(R"(name: demo
objectives:
  - {metric: a, direction: minimize}
  - {metric: a, direction: maximise}
search_space: {x: [1, 2]}
trial: {command: "run {x}"}
)");
  EXPECT_THAT(same.errors, UnorderedElementsAre(
                               IsError(4, 5, "objectives[1].metric", "'a' is already an objective"),
                               IsError(4, 28, "objectives[1].direction",
                                       "'maximise' is not a direction; expected 'maximize'")));
}

TEST(StudyFileTest, CostIsAnObjectiveAfterOneTheTrialReports) {
  ParseOutcome second = Parse(R"(name: demo
objectives: [{metric: loss, direction: minimize}, {metric: cost, direction: minimize}]
search_space: {x: [1, 2]}
trial: {command: "run {x}"}
)");
  ASSERT_TRUE(second.spec) << second.ErrorText();
  EXPECT_TRUE(second.spec->KeepsMetric(kCostMetric));
  EXPECT_FALSE(second.spec->KeepsMetric("x"));
  ParseOutcome first = Parse(R"(name: demo
objectives: [{metric: cost, direction: minimize}, {metric: loss, direction: minimize}]
search_space: {x: [1, 2]}
trial: {command: "run {x}"}
)");
  EXPECT_THAT(first.errors, ElementsAre(IsError(2, 14, "objectives[0].metric",
                                                "cost (hyperpack's own measure of a trial) cannot "
                                                "be the first objective")));
}

TEST(StudyFileTest, RejectsAConstraintWithoutExactlyOneBound) {
  ParseOutcome out = ParseWithTop(R"(constraints:
  - {metric: mem}
  - {metric: mem, max: 1, min: 0}
  - {metric: mem, max: lots}
  - {max: 3}
)");
  EXPECT_THAT(out.errors,
              UnorderedElementsAre(IsError(3, 5, "constraints[0]", "no bound is given"),
                                   IsError(4, 5, "constraints[1]", "both max and min are given"),
                                   IsError(5, 24, "constraints[2].max", "expected a number"),
                                   IsError(6, 5, "constraints[3].metric", "missing")));
}

TEST(StudyFileTest, RefusesTheMedianAndForecastPrunersWithSeveralObjectives) {
  ParseOutcome out = Parse(StrCat(kTwoObjectives, "pruner: {algorithm: median}\n"));
  EXPECT_THAT(out.errors, ElementsAre(IsError(10, 1, "pruner.algorithm",
                                              "the median pruner compares one value")));
  out = Parse(StrCat(kTwoObjectives, "pruner: {algorithm: forecast, max_resource: 9}\n"));
  EXPECT_THAT(out.errors, ElementsAre(IsError(10, 1, "pruner.algorithm",
                                              "the forecast pruner compares one value")));
  for (const char* pruner : {"asha", "hyperband", "none"})
    EXPECT_TRUE(
        Parse(StrCat(kTwoObjectives, "pruner: {algorithm: ", pruner, ", max_resource: 9}\n")).spec)
        << pruner;
}

TEST(StudyFileTest, WhatATunerLearnsOfATrialsValuesFollowsTheStudysOrder) {
  const StudySpec s = *Parse(kTwoObjectives).spec;
  tuner::TrialOutcome o;
  FillOutcomeValues(s, {{"throughput", 120}, {"val_loss", 0.3}, {"peak_mem_gb", 38}}, &o);
  EXPECT_EQ(o.values, (std::vector<double>{0.3, 120}));
  ASSERT_EQ(o.violations.size(), 2u);
  EXPECT_EQ(o.violations[0], -2);
  EXPECT_EQ(o.violations[1], std::numeric_limits<double>::infinity()) << "never reported";
  EXPECT_FALSE(MeetsConstraints(s, {{"peak_mem_gb", 38}}));
  EXPECT_TRUE(MeetsConstraints(s, {{"peak_mem_gb", 38}, {"val_accuracy", 0.9}}));
  FillOutcomeValues(s, {{"val_loss", 0.3}}, &o);
  EXPECT_TRUE(std::isnan(o.values[1]));
}

// ---- pruner ------------------------------------------------------------------------------------

const std::string kPrunerBase = StudyYaml("s").Command("run {x}").str();

TEST(StudyFileTest, PrunerDefaultsToNoneAndParsesEveryField) {
  auto none = Parse(kPrunerBase);
  ASSERT_TRUE(none.spec) << none.ErrorText();
  EXPECT_EQ(none.spec->pruner.algorithm, tuner::PrunerAlgorithm::kNone);
  auto asha = Parse(std::string(kPrunerBase) +
                    "pruner: {algorithm: hyperband, resource: step, min_resource: 100, "
                    "max_resource: 8100, reduction_factor: 3, mode: promote, in_place: false}\n");
  ASSERT_TRUE(asha.spec) << asha.ErrorText();
  EXPECT_TRUE(none.spec->pruner.in_place) << "promotions go on in place by default";
  const PrunerSpec& p = asha.spec->pruner;
  EXPECT_FALSE(p.in_place);
  EXPECT_EQ(p.algorithm, tuner::PrunerAlgorithm::kHyperband);
  EXPECT_EQ(p.resource, PrunerResource::kStep);
  EXPECT_EQ(p.min_resource, 100);
  EXPECT_EQ(p.max_resource, 8100);
  EXPECT_EQ(p.mode, tuner::PrunerMode::kPromote);
  auto median = Parse(std::string(kPrunerBase) +
                      "pruner: {algorithm: median, warmup_steps: 2, startup_trials: 4}\n");
  ASSERT_TRUE(median.spec) << median.ErrorText();
  EXPECT_EQ(median.spec->pruner.warmup_steps, 2);
  EXPECT_EQ(median.spec->pruner.startup_trials, 4);
  EXPECT_EQ(median.spec->pruner.probability, 0.05) << "the forecast's default";
  auto forecast = Parse(std::string(kPrunerBase) +
                        "pruner: {algorithm: forecast, max_resource: 27, probability: 0.1}\n");
  ASSERT_TRUE(forecast.spec) << forecast.ErrorText();
  EXPECT_EQ(forecast.spec->pruner.algorithm, tuner::PrunerAlgorithm::kForecast);
  EXPECT_EQ(forecast.spec->pruner.probability, 0.1);
}

TEST(StudyFileTest, PrunerErrorsSayWhereAndWhatWouldBeRight) {
  auto missing = Parse(std::string(kPrunerBase) + "pruner: {algorithm: asha}\n");
  EXPECT_THAT(missing.errors,
              ElementsAre(IsError(5, 1, "pruner.max_resource", "the epochs (or steps)")));
  auto bad = Parse(std::string(kPrunerBase) +
                   "pruner: {algorithm: ashaa, mode: pause, reduction_factor: 1, "
                   "max_resource: 27, min_resource: 0}\n");
  EXPECT_THAT(bad.errors, ElementsAre(IsError(5, 21, "pruner.algorithm", "did you mean 'asha'"),
                                      IsError(5, 34, "pruner.mode", "not one of stop, promote"),
                                      IsError(5, 94, "pruner.min_resource", "must be > 0"),
                                      IsError(5, 59, "pruner.reduction_factor", "must be > 1")));
  auto order = Parse(std::string(kPrunerBase) +
                     "pruner: {algorithm: asha, min_resource: 9, max_resource: 3}\n");
  EXPECT_THAT(order.errors,
              ElementsAre(IsError(5, 58, "pruner.max_resource", "greater than min_resource")));
  auto forecast =
      Parse(std::string(kPrunerBase) + "pruner: {algorithm: forecast, probability: 1.5}\n");
  EXPECT_THAT(forecast.errors,
              UnorderedElementsAre(IsError(5, 44, "pruner.probability", "between 0 and 1"),
                                   IsError(5, 1, "pruner.max_resource", "the epochs (or steps)")));
  // Only asha and hyperband pause: promote with another algorithm would be silently ignored.
  for (const char* algorithm : {"forecast", "median", "none"}) {
    auto promote = Parse(StrCat(kPrunerBase, "pruner: {algorithm: ", algorithm,
                                ", max_resource: 27, mode: promote}\n"));
    // The value's column: after "pruner: {algorithm: ", the name and ", max_resource: 27, mode: ".
    const int column = 47 + static_cast<int>(std::string(algorithm).size());
    EXPECT_THAT(promote.errors,
                ElementsAre(IsError(5, column, "pruner.mode",
                                    StrCat("with algorithm ", algorithm, " nothing pauses"))))
        << algorithm;
  }
  auto promote = Parse(StrCat(kPrunerBase, "pruner: {mode: promote}\n"));
  EXPECT_THAT(promote.errors, ElementsAre(IsError(5, 16, "pruner.mode", "use algorithm: asha")));
  for (const char* algorithm : {"asha", "hyperband"}) {
    auto ok = Parse(StrCat(kPrunerBase, "pruner: {algorithm: ", algorithm,
                           ", max_resource: 27, mode: promote}\n"));
    EXPECT_TRUE(ok.spec) << ok.ErrorText();
  }
  auto stop =
      Parse(StrCat(kPrunerBase, "pruner: {algorithm: forecast, max_resource: 27, mode: stop}\n"));
  EXPECT_TRUE(stop.spec) << stop.ErrorText();
}

TEST(StudyFileTest, APrunerFieldTheAlgorithmNeverReadsIsAWarning) {
  // An Optuna user's habit: a median pruner's warmup on a forecast, a forecast's probability on
  // asha.
  auto out = Parse(StrCat(kPrunerBase,
                          "pruner: {algorithm: asha, max_resource: 27, probability: 0.1, "
                          "warmup_steps: 3, in_place: false}\n"));
  ASSERT_TRUE(out.spec) << out.ErrorText();
  EXPECT_THAT(out.warnings,
              UnorderedElementsAre(IsError(5, 45, "pruner.probability",
                                           "only forecast reads it; with algorithm asha"),
                                   IsError(5, 63, "pruner.warmup_steps", "only median reads it")));
  auto median = Parse(
      StrCat(kPrunerBase, "pruner: {algorithm: median, reduction_factor: 2, startup_trials: 3}\n"));
  ASSERT_TRUE(median.spec) << median.ErrorText();
  EXPECT_THAT(
      median.warnings,
      ElementsAre(IsError(5, 29, "pruner.reduction_factor",
                          "only asha, hyperband and forecast read it; with algorithm median "
                          "it has no effect")));
  // What each algorithm reads draws no warning.
  for (const char* ok : {"{algorithm: forecast, max_resource: 27, min_resource: 3, "
                         "reduction_factor: 2, startup_trials: 4, probability: 0.1}",
                         "{algorithm: median, warmup_steps: 2, startup_trials: 4}",
                         "{algorithm: hyperband, max_resource: 27, min_resource: 1, "
                         "reduction_factor: 3, mode: promote, in_place: false}"}) {
    auto parsed = Parse(StrCat(kPrunerBase, "pruner: ", ok, "\n"));
    ASSERT_TRUE(parsed.spec) << parsed.ErrorText();
    EXPECT_THAT(parsed.warnings, IsEmpty()) << parsed.WarningText();
  }
}

// ---- cluster.slurm ------------------------------------------------------------------------------

const std::string kClusterBase = StudyYaml("s").Command("run {x}").str();

// A SourcePos in `file` at `line`:`column` under `key`.
::testing::Matcher<const SourcePos&> IsPos(const std::string& file, int line, int column,
                                           const std::string& key) {
  return AllOf(Field("file", &SourcePos::file, file), Field("line", &SourcePos::line, line),
               Field("column", &SourcePos::column, column), Field("key", &SourcePos::key, key));
}

constexpr char kAllSlurmKeys[] =
    "partition, account, qos, constraint, time_limit, mem, cpus_per_task, gpus_per_node, gres, "
    "signal, extra_args, poll_interval, pending_limit, gpu_shards, gpu_memory";

TEST(StudyFileTest, ClusterSlurmParsesEveryFieldAndWhereEachWasWritten) {
  ParseOutcome out = Parse(std::string(kClusterBase) + R"(cluster:
  slurm:
    partition: gpu
    account: proj42
    qos: high
    constraint: "a100&nvlink"
    time_limit: 1-02:00:00
    mem: 64G
    cpus_per_task: 8
    gpus_per_node: 4
    gres: true
    signal: B:SIGUSR1@120
    extra_args: [--exclusive, --nodelist=n01]
    poll_interval: 5s
    pending_limit: 10m
resources: {gpus: 2}
)");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  ASSERT_TRUE(out.spec->cluster.slurm.has_value());
  const SlurmSpec& slurm = *out.spec->cluster.slurm;
  EXPECT_EQ(slurm.partition, "gpu");
  EXPECT_EQ(slurm.account, "proj42");
  EXPECT_EQ(slurm.qos, "high");
  EXPECT_EQ(slurm.constraint, "a100&nvlink");
  EXPECT_EQ(slurm.time_limit_s, 93600);
  EXPECT_EQ(slurm.mem, "64G");
  EXPECT_EQ(slurm.cpus_per_task, 8);
  EXPECT_EQ(slurm.gpus_per_node, 4);
  EXPECT_TRUE(slurm.gres);
  EXPECT_EQ(slurm.signal, "B:SIGUSR1@120");
  EXPECT_THAT(slurm.extra_args, ElementsAre("--exclusive", "--nodelist=n01"));
  EXPECT_EQ(slurm.poll_s, 5);
  EXPECT_EQ(slurm.pending_limit_s, 600);
  // Each value's own line and column; the mapping at its `slurm` key; resources at its key.
  EXPECT_THAT(slurm.positions,
              ElementsAre(IsPos("study.yaml", 6, 3, "cluster.slurm"),
                          IsPos("study.yaml", 7, 16, "cluster.slurm.partition"),
                          IsPos("study.yaml", 8, 14, "cluster.slurm.account"),
                          IsPos("study.yaml", 9, 10, "cluster.slurm.qos"),
                          IsPos("study.yaml", 10, 17, "cluster.slurm.constraint"),
                          IsPos("study.yaml", 11, 17, "cluster.slurm.time_limit"),
                          IsPos("study.yaml", 12, 10, "cluster.slurm.mem"),
                          IsPos("study.yaml", 13, 20, "cluster.slurm.cpus_per_task"),
                          IsPos("study.yaml", 14, 20, "cluster.slurm.gpus_per_node"),
                          IsPos("study.yaml", 15, 11, "cluster.slurm.gres"),
                          IsPos("study.yaml", 16, 13, "cluster.slurm.signal"),
                          IsPos("study.yaml", 17, 17, "cluster.slurm.extra_args"),
                          IsPos("study.yaml", 18, 20, "cluster.slurm.poll_interval"),
                          IsPos("study.yaml", 19, 20, "cluster.slurm.pending_limit"),
                          IsPos("study.yaml", 20, 1, "resources")));
  ASSERT_NE(slurm.Position("partition"), nullptr);
  EXPECT_THAT(*slurm.Position("partition"), IsPos("study.yaml", 7, 16, "cluster.slurm.partition"));
  ASSERT_NE(slurm.Position("resources"), nullptr);
  EXPECT_THAT(*slurm.Position("resources"), IsPos("study.yaml", 20, 1, "resources"));
}

TEST(StudyFileTest, ClusterSlurmMayBeEmptyAndKeepsTheDefaults) {
  ParseOutcome out = Parse(std::string(kClusterBase) + "cluster: {slurm: {}}\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  ASSERT_TRUE(out.spec->cluster.slurm.has_value());
  const SlurmSpec& slurm = *out.spec->cluster.slurm;
  EXPECT_EQ(slurm.partition, "");
  EXPECT_EQ(slurm.account, "");
  EXPECT_EQ(slurm.qos, "");
  EXPECT_EQ(slurm.constraint, "");
  EXPECT_FALSE(slurm.time_limit_s.has_value());
  EXPECT_EQ(slurm.mem, "");
  EXPECT_EQ(slurm.cpus_per_task, 0);
  EXPECT_EQ(slurm.gpus_per_node, 0);
  EXPECT_FALSE(slurm.gres);
  EXPECT_EQ(slurm.signal, "USR1@90");
  EXPECT_THAT(slurm.extra_args, IsEmpty());
  EXPECT_EQ(slurm.poll_s, 2);
  EXPECT_EQ(slurm.pending_limit_s, 300);
  // No resources and no workdir: one CPU, in the directory the study is run from.
  EXPECT_FALSE(out.spec->resources.gpus.has_value());
  EXPECT_FALSE(out.spec->resources.cpus.has_value());
  EXPECT_EQ(out.spec->trial.workdir, "");
  // A key not written falls back to where the slurm mapping is.
  EXPECT_THAT(slurm.positions, ElementsAre(IsPos("study.yaml", 5, 11, "cluster.slurm")));
  ASSERT_NE(slurm.Position("partition"), nullptr);
  EXPECT_THAT(*slurm.Position("partition"), IsPos("study.yaml", 5, 11, "cluster.slurm"));
  ASSERT_NE(slurm.Position("resources"), nullptr);
  EXPECT_THAT(*slurm.Position("resources"), IsPos("study.yaml", 5, 11, "cluster.slurm"));
  EXPECT_EQ(SlurmSpec().Position("partition"), nullptr);

  ParseOutcome local = Parse(kClusterBase);
  ASSERT_THAT(local.errors, IsEmpty()) << local.ErrorText();
  EXPECT_FALSE(local.spec->cluster.slurm.has_value());
}

TEST(StudyFileTest, ClusterSlurmErrorsSayWhereAndWhatWouldBeRight) {
  ParseOutcome out = Parse(std::string(kClusterBase) + R"(cluster:
  slurm:
    partion: gpu
    mem: lots
    time_limit: -1
    extra_args: [--x, y]
    cpus_per_task: 0
    signal: USR1
    poll_interval: 0.1s
    gres: maybe
)");
  EXPECT_FALSE(out.spec.has_value());
  EXPECT_THAT(
      out.errors,
      ElementsAre(
          IsError(
              7, 5, "cluster.slurm",
              std::string("unknown key 'partion'; did you mean 'partition'? expected one of: ") +
                  kAllSlurmKeys),
          IsError(9, 17, "cluster.slurm.time_limit",
                  "must be > 0 (got -1); leave time_limit out for the partition's default"),
          IsError(8, 10, "cluster.slurm.mem",
                  "'lots' is not an amount of memory; write it as Slurm does, e.g. 16G, 512M or "
                  "4000 (megabytes)"),
          IsError(11, 20, "cluster.slurm.cpus_per_task", "must be between 1 and 1000000 (got 0)"),
          IsError(14, 11, "cluster.slurm.gres", "expected true or false, got 'maybe'"),
          IsError(12, 13, "cluster.slurm.signal",
                  "'USR1' is not a signal; expected [B:]NAME@SECONDS such as USR1@90 or "
                  "B:SIGUSR1@120, or false for no signal"),
          IsError(10, 23, "cluster.slurm.extra_args",
                  "'y' is not an sbatch option; each item starts with '-' and holds its value "
                  "too, e.g. --exclusive or --nodelist=n01"),
          IsError(13, 20, "cluster.slurm.poll_interval", "must be at least 0.2s (got 0.1s)")));
}

// How the cluster shares a GPU: its shards per GPU and each GPU's memory, as a size.
TEST(StudyFileTest, ClusterSlurmGpuShardsAndGpuMemory) {
  for (auto [text, mib] : std::vector<std::pair<std::string, int64_t>>{
           {"80GiB", 81920}, {"81920", 81920}, {"40 GB", 38146}, {"0.5 TiB", 524288}}) {
    ParseOutcome out =
        Parse(std::string(kClusterBase) + "cluster:\n  slurm: {gpu_shards: 8, gpu_memory: " + text +
              "}\nresources: {gpus: 0.25}\n");
    ASSERT_THAT(out.errors, IsEmpty()) << text << out.ErrorText();
    EXPECT_EQ(out.spec->cluster.slurm->gpu_shards, 8);
    EXPECT_EQ(out.spec->cluster.slurm->gpu_memory_mb, mib) << text;
    ASSERT_NE(out.spec->cluster.slurm->Position("gpu_memory"), nullptr);
    EXPECT_EQ(out.spec->cluster.slurm->Position("gpu_memory")->key, "cluster.slurm.gpu_memory");
  }
  ParseOutcome bad = Parse(std::string(kClusterBase) + R"(cluster:
  slurm:
    gpu_shards: 0
    gpu_memory: lots
)");
  EXPECT_FALSE(bad.spec.has_value());
  EXPECT_THAT(bad.errors,
              ElementsAre(IsError(7, 17, "cluster.slurm.gpu_shards",
                                  "must be between 1 and 1000000 (got 0): the shards each GPU has "
                                  "in the cluster's gres.conf (Name=shard Count=...)"),
                          IsError(8, 17, "cluster.slurm.gpu_memory",
                                  "expected each GPU's memory as a size such as 80GiB or 81920 "
                                  "(MiB), got 'lots'")));
}

TEST(StudyFileTest, ClusterAllowsOnlySlurmAndSlurmMustBeAMapping) {
  ParseOutcome other = Parse(std::string(kClusterBase) + "cluster: {pbs: {}}\n");
  EXPECT_THAT(other.errors,
              ElementsAre(IsError(5, 11, "cluster", "unknown key 'pbs'; expected one of: slurm")));
  ParseOutcome empty = Parse(std::string(kClusterBase) + "cluster:\n  slurm:\n");
  EXPECT_THAT(empty.errors, ElementsAre(IsError(6, 3, "cluster.slurm",
                                                "expected a mapping of keys to values, got "
                                                "nothing; for the cluster's defaults write "
                                                "slurm: {}")));
  ParseOutcome word = Parse(std::string(kClusterBase) + "cluster: slurm\n");
  EXPECT_THAT(word.errors, ElementsAre(IsError(5, 10, "cluster",
                                               "expected a mapping of keys to values, got "
                                               "'slurm'")));
  ParseOutcome args = Parse(std::string(kClusterBase) + "cluster: {slurm: {extra_args: --x}}\n");
  EXPECT_THAT(args.errors,
              ElementsAre(IsError(5, 31, "cluster.slurm.extra_args",
                                  "expected a list of sbatch options such as [--exclusive], got "
                                  "'--x'")));
}

// The seconds `cluster.slurm.time_limit: VALUE` parses to, or its first error.
std::string SlurmTimeLimit(const std::string& value) {
  ParseOutcome out =
      Parse(std::string(kClusterBase) + "cluster: {slurm: {time_limit: " + value + "}}\n");
  if (!out.errors.empty()) return out.errors[0].ToString();
  return FormatDouble(*out.spec->cluster.slurm->time_limit_s);
}

TEST(StudyFileTest, ClusterSlurmTimeLimitTakesSlurmsFormsAndDurations) {
  EXPECT_EQ(SlurmTimeLimit("1-02:00:00"), "93600");  // D-HH:MM:SS
  EXPECT_EQ(SlurmTimeLimit("90"), "5400");           // MM: a bare number is minutes, as to Slurm
  EXPECT_EQ(SlurmTimeLimit("90:30"), "5430");        // MM:SS
  EXPECT_EQ(SlurmTimeLimit("1:30:00"), "5400");      // HH:MM:SS
  EXPECT_EQ(SlurmTimeLimit("2-12"), "216000");       // D-HH
  EXPECT_EQ(SlurmTimeLimit("1-0:30"), "88200");      // D-HH:MM
  EXPECT_EQ(SlurmTimeLimit("2h"), "7200");
  EXPECT_EQ(SlurmTimeLimit("1h30m"), "5400");
  EXPECT_EQ(SlurmTimeLimit("45s"), "45");
  EXPECT_EQ(SlurmTimeLimit("0"),
            "study.yaml:5:31: cluster.slurm.time_limit: must be > 0 (got 0); leave time_limit out "
            "for the partition's default");
  EXPECT_EQ(SlurmTimeLimit("1.5"),
            "study.yaml:5:31: cluster.slurm.time_limit: '1.5' is not a time limit: a bare number "
            "is whole minutes, as Slurm reads it; expected e.g. 2h, 90m or 1h30m, or as Slurm "
            "writes it: 90 (minutes), 1:30:00 or 1-12:00:00");
  EXPECT_EQ(SlurmTimeLimit("soon"),
            "study.yaml:5:31: cluster.slurm.time_limit: 'soon' is not a time limit; expected e.g. "
            "2h, 90m or 1h30m, or as Slurm writes it: 90 (minutes), 1:30:00 or 1-12:00:00");
}

TEST(StudyFileTest, ClusterSlurmMemAndSignalTakeSlurmsForms) {
  auto parse = [](const std::string& slurm) {
    return Parse(std::string(kClusterBase) + "cluster: {slurm: " + slurm + "}\n");
  };
  auto plain = parse("{mem: 4000, signal: USR1@90}");
  ASSERT_THAT(plain.errors, IsEmpty()) << plain.ErrorText();
  EXPECT_EQ(plain.spec->cluster.slurm->mem, "4000");
  EXPECT_EQ(plain.spec->cluster.slurm->signal, "USR1@90");
  for (const char* off : {"\"\"", "false", "none"}) {
    auto none = parse(std::string("{signal: ") + off + "}");
    ASSERT_THAT(none.errors, IsEmpty()) << off << ": " << none.ErrorText();
    EXPECT_EQ(none.spec->cluster.slurm->signal, "") << off;
  }
  auto gb = parse("{mem: 16GB, signal: USR1@70000}");
  EXPECT_THAT(gb.errors,
              ElementsAre(IsError(5, 24, "cluster.slurm.mem", "'16GB' is not an amount of memory"),
                          IsError(5, 38, "cluster.slurm.signal",
                                  "the warning must come at most 65535 seconds ahead (got "
                                  "70000)")));
}

TEST(SlurmFlagTest, ParsesAFlowMappingWithOrWithoutBraces) {
  Result<SlurmSpec> braces = ParseSlurmFlag("{partition: debug, time_limit: 10m}");
  ASSERT_TRUE(braces.ok()) << braces.status().message();
  EXPECT_EQ(braces->partition, "debug");
  EXPECT_EQ(braces->time_limit_s, 600);
  EXPECT_EQ(braces->signal, "USR1@90");
  EXPECT_THAT(braces->positions, ElementsAre(IsPos("--slurm", 1, 1, "cluster.slurm"),
                                             IsPos("--slurm", 1, 13, "cluster.slurm.partition"),
                                             IsPos("--slurm", 1, 32, "cluster.slurm.time_limit")));

  Result<SlurmSpec> bare = ParseSlurmFlag("partition: debug, time_limit: 10m");
  ASSERT_TRUE(bare.ok()) << bare.status().message();
  EXPECT_EQ(bare->partition, "debug");
  EXPECT_EQ(bare->time_limit_s, 600);
  // Columns in the text as given, not in the braced copy that was parsed.
  EXPECT_THAT(bare->positions, ElementsAre(IsPos("--slurm", 1, 1, "cluster.slurm"),
                                           IsPos("--slurm", 1, 12, "cluster.slurm.partition"),
                                           IsPos("--slurm", 1, 31, "cluster.slurm.time_limit")));
}

TEST(SlurmFlagTest, ErrorsNameTheFlagAndTheColumn) {
  Result<SlurmSpec> bare = ParseSlurmFlag("partition: debug, time_limit: soon");
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bare.status().message(),
            "--slurm:1:31: time_limit: 'soon' is not a time limit; expected e.g. 2h, 90m or "
            "1h30m, or as Slurm writes it: 90 (minutes), 1:30:00 or 1-12:00:00");

  Result<SlurmSpec> two = ParseSlurmFlag("{mem: lots, partion: x}");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(two.status().message(),
            std::string("--slurm:1:13: unknown key 'partion'; did you mean 'partition'? expected "
                        "one of: ") +
                kAllSlurmKeys +
                "\n--slurm:1:7: mem: 'lots' is not an amount of memory; write it as Slurm does, "
                "e.g. 16G, 512M or 4000 (megabytes)");

  Result<SlurmSpec> yaml = ParseSlurmFlag("{partition: [gpu}");
  ASSERT_FALSE(yaml.ok());
  EXPECT_THAT(yaml.status().message(), ::testing::StartsWith("--slurm:1:"));
  EXPECT_THAT(yaml.status().message(), HasSubstr("invalid YAML"));
}

// `export.roles`: a parameter's name, or a fixed value of the role's kind.
TEST(StudyFileTest, ExportRolesNameParametersOrFixValues) {
  ParseOutcome ok =
      Parse(std::string(kClusterBase) +
            "export: {roles: {global_batch: x, data_parallel: 4, precision: bf16}}\n");
  ASSERT_TRUE(ok.errors.empty()) << ok.ErrorText();
  const auto& roles = ok.spec->exports.roles;
  ASSERT_EQ(roles.size(), 3u);
  EXPECT_EQ(roles.at(TrainingRole::kGlobalBatch).param, "x");
  EXPECT_EQ(std::get<int64_t>(*roles.at(TrainingRole::kDataParallel).fixed), 4);
  EXPECT_EQ(std::get<std::string>(*roles.at(TrainingRole::kPrecision).fixed), "bf16");

  ParseOutcome role = Parse(std::string(kClusterBase) + "export: {roles: {micro_bach: x}}\n");
  ASSERT_EQ(role.errors.size(), 1u);
  EXPECT_THAT(role.errors[0].ToString(),
              HasSubstr("study.yaml:5:18: export.roles: unknown key 'micro_bach'; did you mean "
                        "'micro_batch'?"));
  ParseOutcome value = Parse(std::string(kClusterBase) + "export: {roles: {micro_batch: mbs}}\n");
  EXPECT_THAT(value.errors,
              ElementsAre(IsError(5, 31, "export.roles.micro_batch",
                                  "'mbs' is not a parameter of search_space (x) nor a whole "
                                  "number >= 1")));
  ParseOutcome precision =
      Parse(std::string(kClusterBase) + "export: {roles: {precision: int8}}\n");
  EXPECT_THAT(precision.errors,
              ElementsAre(IsError(5, 29, "export.roles.precision",
                                  "'int8' is not a parameter of search_space (x) nor a precision: "
                                  "fp32, fp16 or bf16")));
  // The spellings other tools write, as the launcher exports read them (study/training.h).
  ParseOutcome spelled = Parse(std::string(kClusterBase) +
                               "export: {roles: {precision: 16-mixed, optimizer: adamw_torch}}\n");
  EXPECT_TRUE(spelled.errors.empty()) << spelled.ErrorText();
  ParseOutcome optimizer =
      Parse(std::string(kClusterBase) + "export: {roles: {optimizer: lion}}\n");
  EXPECT_THAT(optimizer.errors,
              ElementsAre(IsError(5, 29, "export.roles.optimizer",
                                  "'lion' is not a parameter of search_space (x) nor an optimizer: "
                                  "sgd, adam or adamw")));
}

// ---- metric patterns: objective.regex and trial.metrics
// ------------------------------------------

::testing::Matcher<const MetricPattern&> IsPattern(const std::string& name,
                                                   const std::string& pattern) {
  return AllOf(Field("name", &MetricPattern::name, name),
               Field("pattern", &MetricPattern::pattern, pattern));
}

TEST(StudyFileTest, ReadsObjectiveRegexFirstThenTrialMetricsInTheFilesOrder) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize, regex: 'Accuracy: (\d+)/10000'}
search_space: {lr: {type: float, low: 0.001, high: 1, log: true}}
trial:
  command: python main.py --lr {lr}
  metrics:
    test_loss: 'Average loss: ([0-9.eE+-]+)'
    epoch: 'Train Epoch: (\d+)'
)yaml");
  ASSERT_TRUE(out.spec) << out.ErrorText();
  EXPECT_EQ(out.spec->objective.metric, "accuracy");
  EXPECT_THAT(out.spec->metric_patterns,
              ElementsAre(IsPattern("accuracy", R"(Accuracy: (\d+)/10000)"),
                          IsPattern("test_loss", "Average loss: ([0-9.eE+-]+)"),
                          IsPattern("epoch", R"(Train Epoch: (\d+))")));
  EXPECT_THAT(Parse(kFullStudy).spec->metric_patterns, IsEmpty());
}

TEST(StudyFileTest, TheObjectivesPatternMayBeOneOfTrialMetrics) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize}
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics: {accuracy: 'Accuracy: (\d+)'}
)yaml");
  ASSERT_TRUE(out.spec) << out.ErrorText();
  EXPECT_THAT(out.spec->metric_patterns, ElementsAre(IsPattern("accuracy", R"(Accuracy: (\d+))")));
}

TEST(StudyFileTest, RejectsAMetricPatternThatDoesNotCompileAndSaysWhatTheLibrarySaid) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective:
  metric: accuracy
  direction: maximize
  regex: 'Accuracy: (\d+/10000'
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics: {loss: 'loss: ([0-9.]+', acc: 'a{3,1}(\d)'}
)yaml");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(5, 10, "objective.regex",
                          R"('Accuracy: (\d+/10000' is not a regular expression: Unmatched )"
                          R"(marking parenthesis ( or \( (at the end))"),
                  IsError(9, 19, "trial.metrics.loss", "is not a regular expression: Unmatched"),
                  IsError(9, 42, "trial.metrics.acc",
                          "is not a regular expression: Invalid content of repeat range (at "
                          "character 5)")));
}

TEST(StudyFileTest, RejectsAMetricPatternWithoutExactlyOneCaptureGroup) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize, regex: 'Accuracy: \d+'}
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics:
    test_loss: '(Average|Test) loss: ([0-9.]+)'
    lr: '(?:lr|learning rate): ([0-9.]+)'
)yaml");
  EXPECT_THAT(out.errors,
              ElementsAre(IsError(2, 59, "objective.regex",
                                  R"('Accuracy: \d+' has 0 capture groups; expected exactly one )"
                                  "capture group ( ... ) around the number"),
                          IsError(7, 16, "trial.metrics.test_loss",
                                  "has 2 capture groups; expected exactly one capture group")));
}

TEST(StudyFileTest, RejectsAnEmptyMetricPatternAndAMetricNameThatIsNotAnIdentifier) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize, regex: ''}
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics:
    -loss: 'val loss ([0-9.]+)'
    "first loss": 'first ([0-9.]+)'
    lr:
    wd: [1, 2]
)yaml");
  EXPECT_THAT(
      out.errors,
      ElementsAre(IsError(2, 59, "objective.regex",
                          "empty pattern; expected a regular expression with one capture group "
                          "around the number"),
                  IsError(7, 5, "trial.metrics",
                          "'-loss' is not a metric name; use letters, digits, '_', '.', '/' and "
                          "'-'"),
                  IsError(8, 5, "trial.metrics", "'first loss' is not a metric name"),
                  IsError(9, 5, "trial.metrics.lr", "expected a regular expression"),
                  IsError(10, 9, "trial.metrics.wd",
                          "expected a regular expression with one "
                          "capture group around the number, e.g. "
                          "'Average loss: ([0-9.eE+-]+)', got a list")));
}

TEST(StudyFileTest, RejectsTrialMetricsThatRepeatTheObjectiveRegexOrThatAreNotAMapping) {
  ParseOutcome out = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize, regex: 'Accuracy: (\d+)'}
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics: {accuracy: 'acc=(\d+)'}
)yaml");
  EXPECT_THAT(out.errors, ElementsAre(IsError(6, 13, "trial.metrics.accuracy",
                                              "'accuracy' is the objective's metric, already read "
                                              "by objective.regex")));
  ParseOutcome list = Parse(R"yaml(name: mnist
objective: {metric: accuracy, direction: maximize}
search_space: {x: [1, 2]}
trial:
  command: run {x}
  metrics: ['Accuracy: (\d+)']
)yaml");
  EXPECT_THAT(list.errors,
              ElementsAre(IsError(6, 12, "trial.metrics",
                                  "expected a mapping of metric names to patterns, e.g. "
                                  "{test_loss: 'Average loss: ([0-9.eE+-]+)'}, got a list")));
}

// budget.KEY: 2 in a study with several objectives and in one whose trials are asked for: each an
// error at the value, saying why.
void ExpectRefusedWithSeveralObjectivesOrAskedTrials(const std::string& key) {
  const std::string two_objectives =
      "name: s\nobjectives:\n  - {metric: loss, direction: minimize}\n"
      "  - {metric: ms, direction: minimize}\nsearch_space: {x: {type: float, low: 0, high: 1}}\n"
      "trial: {command: \"true\"}\nbudget: {" +
      key + ": 2}\n";
  EXPECT_THAT(Parse(two_objectives).errors,
              ElementsAre(IsError(7, 21, "budget." + key, "this study has several objectives")));
  const std::string asked =
      "name: s\nobjective: {metric: loss, direction: minimize}\n"
      "search_space: {x: {type: float, low: 0, high: 1}}\nbudget: {" +
      key + ": 2}\n";
  EXPECT_THAT(Parse(asked).errors,
              ElementsAre(IsError(4, 21, "budget." + key, "hyperpack enqueue")));
}

TEST(StudyFileTest, ReadsFinalistsAndRejectsThemWhereTheyCannotWork) {
  ParseOutcome out = Parse(StudyYaml().str() + "budget: {max_trials: 20, finalists: 3}\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->budget.finalists, 3);
  EXPECT_THAT(DescribeStudy(*out.spec), HasSubstr("the best 3 trained again at the end"));
  EXPECT_EQ(Parse(StudyYaml().str()).spec->budget.finalists, 0) << "none unless asked";
  EXPECT_THAT(out.warnings, IsEmpty());
  ParseOutcome large = Parse(StudyYaml().str() + "budget: {max_trials: 8, finalists: 3}\n");
  ASSERT_THAT(large.errors, IsEmpty()) << large.ErrorText();
  EXPECT_EQ(large.spec->budget.finalists, 3) << "valid, and said";
  EXPECT_THAT(large.WarningText(),
              HasSubstr("budget.finalists: warning: 3 of max_trials 8 re-run more than a third"));

  EXPECT_THAT(
      Parse(StudyYaml().str() + "budget: {max_trials: 20, finalists: 20}\n").errors,
      ElementsAre(IsError(5, 37, "budget.finalists", "must be between 0 and max_trials - 1 (19)")));
  EXPECT_THAT(Parse(StudyYaml().str() + "budget: {finalists: some}\n").errors,
              ElementsAre(IsError(5, 21, "budget.finalists", "expected a whole number")));
  ExpectRefusedWithSeveralObjectivesOrAskedTrials("finalists");
}

TEST(StudyFileTest, ReadsRerunTopAndRejectsItWhereItCannotWork) {
  ParseOutcome out = Parse(StudyYaml().str() + "budget: {max_trials: 20, rerun_top: 5}\n");
  ASSERT_THAT(out.errors, IsEmpty()) << out.ErrorText();
  EXPECT_EQ(out.spec->budget.rerun_top, 5);
  EXPECT_THAT(DescribeStudy(*out.spec),
              HasSubstr("each configuration among the best 5 trained again as it ranks"));
  EXPECT_EQ(Parse(StudyYaml().str()).spec->budget.rerun_top, 0) << "none unless asked";
  EXPECT_THAT(Parse(StudyYaml().str() + "budget: {rerun_top: 101}\n").errors,
              ElementsAre(IsError(5, 21, "budget.rerun_top", "must be between 0 and 100")));
  EXPECT_THAT(Parse(StudyYaml().str() + "budget: {rerun_top: 2.5}\n").errors,
              ElementsAre(IsError(5, 21, "budget.rerun_top", "expected a whole number")));
  EXPECT_THAT(
      Parse(StudyYaml().str() + "budget: {max_trials: 20, finalists: 2, rerun_top: 5}\n").errors,
      ElementsAre(IsError(5, 51, "budget.rerun_top", "give one (rerun_top re-runs each as it")));
  ExpectRefusedWithSeveralObjectivesOrAskedTrials("rerun_top");
}

// Re-runs of hyperpack-trainer repeat themselves unless its seed comes from the trial: said before
// the study runs, at the budget's field; a script's seed is its own affair.
TEST(StudyFileTest, WarnsWhereReRunsOfHyperpackTrainerWouldRepeatThemselves) {
  const std::string budget = "budget: {max_trials: 20, finalists: 2}\n";
  ParseOutcome plain = Parse(StudyYaml().Command("hyperpack-trainer --lr {x}").str() + budget);
  ASSERT_THAT(plain.errors, IsEmpty()) << plain.ErrorText();
  EXPECT_THAT(plain.WarningText(),
              HasSubstr("budget.finalists: warning: re-runs configurations, and "
                        "hyperpack-trainer's seed is fixed (0, as the command passes no --seed)"));
  EXPECT_THAT(
      Parse(StudyYaml().Command("build/trainer/hyperpack-trainer --seed 3 --lr {x}").str() +
            "budget: {max_trials: 20, rerun_top: 5}\n")
          .WarningText(),
      HasSubstr("budget.rerun_top: warning: re-runs configurations, and hyperpack-trainer's seed "
                "is fixed (--seed 3), so a re-run repeats its first run"));
  for (const char* command : {"hyperpack-trainer --seed {trial} --lr {x}",
                              "hyperpack-trainer --lr {x} --seed={trial}", "python3 train.py {x}"})
    EXPECT_THAT(Parse(StudyYaml().Command(command).str() + budget).warnings, IsEmpty()) << command;
  EXPECT_THAT(Parse(StudyYaml().Command("hyperpack-trainer --lr {x}").str()).warnings, IsEmpty())
      << "no re-runs";
}

// ---- finalists (study/finalists.h) --------------------------------------------------------------

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<CompletedRun> Runs(const std::vector<std::tuple<int, double, double>>& v) {
  std::vector<CompletedRun> out;
  for (const auto& [number, x, value] : v)
    out.push_back({number, Config{{"x", Value{x}}}, value, false});
  return out;
}

TEST(FinalistsTest, NextFinalistsAreDistinctConfigurationsByTheirBestRunSkippingThoseTaken) {
  Objective minimize;
  const auto runs = Runs(
      {{0, 0.1, 0.5}, {1, 0.2, 0.2}, {2, 0.2, 0.9}, {3, 0.3, kInf}, {4, 0.4, 0.3}, {5, 0.5, 0.3}});
  EXPECT_THAT(NextFinalists(runs, {}, minimize, 3), ElementsAre(1, 4, 5)) << "ties: lower number";
  EXPECT_THAT(NextFinalists(runs, {Config{{"x", Value{0.2}}}}, minimize, 2), ElementsAre(4, 5));
  EXPECT_THAT(NextFinalists(runs, {}, minimize, 10), ElementsAre(1, 4, 5, 0))
      << "no configuration twice, none without a finite value";
  Objective maximize;
  maximize.direction = Direction::kMaximize;
  EXPECT_THAT(NextFinalists(runs, {}, maximize, 2), ElementsAre(2, 0));
}

// The same choice as ranking every run and taking the first n distinct configurations not taken
// (how it was computed before one pass replaced the sort), on random runs with repeated
// configurations, tied values and non-finite ones.
TEST(FinalistsTest, NextFinalistsMatchesRankingEveryRun) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> pick(0, 5);
  for (int round = 0; round < 300; ++round) {
    Objective objective;
    if (round % 2) objective.direction = Direction::kMaximize;
    std::vector<std::tuple<int, double, double>> rows;
    for (int i = 0; i < 12; ++i)
      rows.emplace_back(i, 0.1 * pick(rng), pick(rng) == 0 ? kInf : 0.25 * pick(rng));
    const auto runs = Runs(rows);
    const std::vector<Config> taken = {Config{{"x", Value{0.1 * pick(rng)}}}};
    const int n = pick(rng);
    std::vector<size_t> order;
    for (size_t i = 0; i < runs.size(); ++i)
      if (std::isfinite(runs[i].value)) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return objective.Better(runs[a].value, runs[b].value);
    });
    std::vector<size_t> expected;
    std::vector<Config> seen = taken;
    for (size_t i : order) {
      if (static_cast<int>(expected.size()) >= n) break;
      if (std::find(seen.begin(), seen.end(), runs[i].config) != seen.end()) continue;
      seen.push_back(runs[i].config);
      expected.push_back(i);
    }
    ASSERT_EQ(NextFinalists(runs, taken, objective, n), expected) << "round " << round;
  }
}

TEST(FinalistsTest, TheBestIsTheBestRunUntilAFinalistCompletesThenTheBestMeanOfTheReRun) {
  Objective minimize;
  EXPECT_FALSE(ChooseBest({}, minimize));
  // Trial 3 proposed trial 0's configuration again by chance (a small discrete space): that is
  // not a finalist, and trial 0's configuration is no candidate for it.
  auto runs = Runs({{0, 0.1, 0.5}, {1, 0.2, 0.2}, {2, 0.3, 0.3}, {3, 0.1, 0.9}});
  std::optional<BestChoice> best = ChooseBest(runs, minimize);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trial, 1);
  EXPECT_EQ(best->runs, 1);
  // A finalist trains trial 1's configuration again: 0.2 and 0.6, a mean of 0.4. Trial 2's single
  // 0.3 is not a candidate any more: only configurations a finalist re-ran are.
  runs.push_back({4, Config{{"x", Value{0.2}}}, 0.6, true});
  best = ChooseBest(runs, minimize);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trial, 1);
  EXPECT_DOUBLE_EQ(best->value, 0.4);
  EXPECT_EQ(best->runs, 2);
  runs.push_back({5, Config{{"x", Value{0.3}}}, 0.35, true});
  best = ChooseBest(runs, minimize);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trial, 2);
  EXPECT_DOUBLE_EQ(best->value, 0.325);
}

// Re-runs that return their first runs' values to the last digit: one may be chance, two with none
// that differs are trainings without noise, and the best is then the best single run, a later
// proposal's included.
TEST(FinalistsTest, ReRunsThatRepeatExactlyLeaveTheBestToTheBestSingleRun) {
  Objective minimize;
  auto runs = Runs({{0, 0.1, 0.5}, {1, 0.2, 0.2}, {2, 0.3, 0.3}});
  runs.push_back({3, Config{{"x", Value{0.2}}}, 0.2, true});
  EXPECT_THAT(FindRepeats(runs).same, ElementsAre(std::pair(3, 1)));
  EXPECT_FALSE(FindRepeats(runs).Exact()) << "one repeat may be chance";
  runs.push_back({4, Config{{"x", Value{0.3}}}, kInf, true});  // no value: says nothing
  runs.push_back({5, Config{{"x", Value{0.3}}}, 0.3, true});
  runs.push_back({6, Config{{"x", Value{0.4}}}, 0.1, false});  // a proposal after the finalists
  Repeats repeats = FindRepeats(runs);
  EXPECT_THAT(repeats.same, ElementsAre(std::pair(3, 1), std::pair(5, 2)));
  EXPECT_FALSE(repeats.differs);
  EXPECT_TRUE(repeats.Exact());
  std::optional<BestChoice> best = ChooseBest(runs, minimize);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trial, 6);
  EXPECT_EQ(best->runs, 1);
  // One re-run that differs: the trainings are noisy after all, and the best mean decides.
  runs.push_back({7, Config{{"x", Value{0.1}}}, 0.7, true});
  repeats = FindRepeats(runs);
  EXPECT_TRUE(repeats.differs);
  EXPECT_FALSE(repeats.Exact());
  best = ChooseBest(runs, minimize);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->trial, 1);
  EXPECT_EQ(best->runs, 2);
}

TEST(FinalistsTest, FinalistMeansRankEveryReRunConfigurationByItsMean) {
  Objective minimize;
  auto runs = Runs({{0, 0.1, 0.5}, {1, 0.2, 0.25}, {2, 0.3, 0.3125}, {3, 0.4, 0.125}});
  EXPECT_TRUE(FinalistMeans(runs, minimize).empty()) << "no finalist has completed";
  runs.push_back({4, Config{{"x", Value{0.4}}}, 0.625, true});   // trial 3's: 0.125, 0.625
  runs.push_back({5, Config{{"x", Value{0.2}}}, 0.5, true});     // trial 1's: 0.25, 0.5
  runs.push_back({6, Config{{"x", Value{0.3}}}, 0.3125, true});  // trial 2's: 0.3125 twice
  runs.push_back({7, Config{{"x", Value{0.4}}}, 0.375, true});   // trial 3's again
  runs.push_back({8, Config{{"x", Value{0.1}}}, kInf, true});    // trial 0's, with no value
  const std::vector<BestChoice> means = FinalistMeans(runs, minimize);
  ASSERT_EQ(means.size(), 3u) << "trial 0's configuration has no finite re-run";
  EXPECT_EQ(means[0].trial, 2);
  EXPECT_EQ(means[0].value, 0.3125);
  EXPECT_EQ(means[0].runs, 2);
  // Trials 1's and 3's configurations tie at 0.375 (two runs, three): the earlier first run first.
  EXPECT_EQ(means[1].trial, 1);
  EXPECT_EQ(means[1].value, 0.375);
  EXPECT_EQ(means[1].runs, 2);
  EXPECT_EQ(means[2].trial, 3);
  EXPECT_EQ(means[2].value, 0.375);
  EXPECT_EQ(means[2].runs, 3);
  ASSERT_TRUE(ChooseBest(runs, minimize));
  EXPECT_EQ(ChooseBest(runs, minimize)->trial, means[0].trial);
}

}  // namespace
}  // namespace hyperpack::study
