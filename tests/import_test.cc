// W&B sweep files written here, covering every distribution W&B documents, imported and parsed
// back as hyperpack study files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "hyperpack/study/import.h"
#include "import_util.h"
#include "test_util.h"

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;

using testing::Param;

StudySpec Imported(const std::string& sweep, ImportOutcome* outcome = nullptr) {
  return testing::ImportedAs(sweep, "sweep.yaml", SweepFormat::kWandb, outcome);
}

std::string WarningsText(const ImportOutcome& out) { return testing::Text(out.warnings); }

constexpr char kHead[] = R"(program: train.py
method: bayes
metric: {name: val_accuracy, goal: maximize}
parameters:
)";

TEST(ImportWandbTest, EveryExactDistributionBecomesItsHyperpackForm) {
  ImportOutcome out;
  StudySpec s = Imported(std::string(kHead) + R"(  opt: {values: [sgd, adam]}
  seed: {value: 7}
  layers: {min: 1, max: 4}
  dropout: {min: 0.0, max: 0.5}
  width: {distribution: int_uniform, min: 16, max: 256}
  momentum: {distribution: uniform, min: 0.5, max: 0.99}
  lr: {distribution: log_uniform_values, min: 0.0001, max: 0.1}
  wd: {distribution: log_uniform, min: -9.21, max: -2.3}
  steps: {distribution: q_uniform, min: 0, max: 100, q: 10}
  flag: {distribution: categorical, values: [true, false]}
  const: {distribution: constant, value: fixed-text}
)",
                         &out);
  EXPECT_EQ(s.objective.metric, "val_accuracy");
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kGp);
  EXPECT_EQ(Param(s, "opt").type, ParamType::kCategorical);
  EXPECT_EQ(Param(s, "seed").type, ParamType::kFixed);
  // Integer or float decided by how min and max are written, as W&B decides.
  EXPECT_EQ(Param(s, "layers").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "dropout").type, ParamType::kFloat);
  EXPECT_EQ(Param(s, "width").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "momentum").high, 0.99);
  EXPECT_TRUE(Param(s, "lr").log);
  EXPECT_EQ(Param(s, "lr").low, 0.0001);
  // log_uniform's bounds are natural-log exponents.
  EXPECT_TRUE(Param(s, "wd").log);
  EXPECT_NEAR(Param(s, "wd").low, std::exp(-9.21), 1e-12);
  EXPECT_NEAR(Param(s, "wd").high, std::exp(-2.3), 1e-12);
  EXPECT_EQ(Param(s, "steps").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "steps").step, 10);
  EXPECT_EQ(Param(s, "flag").values.size(), 2u);
  EXPECT_EQ(std::get<std::string>(Param(s, "const").value), "fixed-text");
  // W&B's default command: ${env} ${interpreter} ${program} ${args}.
  EXPECT_THAT(s.trial.command,
              HasSubstr("/usr/bin/env python3 train.py --opt={opt} --seed={seed}"));
  // Nothing approximate: no warning; wandb.* calls are served by the shim.
  EXPECT_TRUE(out.warnings.empty()) << WarningsText(out);
  EXPECT_EQ(s.trial.shim, TrialShim::kWandb);
}

TEST(ImportWandbTest, ApproximateDistributionsAreWarningsAtTheirLines) {
  ImportOutcome out;
  StudySpec s = Imported(std::string(kHead) + R"(  a: {distribution: normal, mu: 1, sigma: 0.5}
  b: {distribution: q_normal, mu: 0, sigma: 1, q: 0.5}
  c: {distribution: log_normal, mu: 0, sigma: 1}
  d: {distribution: q_log_normal, mu: 0, sigma: 1, q: 1}
  e: {distribution: beta, a: 2, b: 5}
  f: {distribution: q_beta, a: 2, b: 5, q: 0.1}
  g: {distribution: q_log_uniform_values, min: 1, max: 1000, q: 1}
  h: {distribution: q_log_uniform, min: 0, max: 6.9, q: 1}
  i: {distribution: q_uniform, min: 0.5, max: 2.5, q: 0.5}
  j: {values: [1, 2], probabilities: [0.9, 0.1]}
)",
                         &out);
  EXPECT_EQ(Param(s, "a").low, 1 - 3 * 0.5);
  EXPECT_EQ(Param(s, "a").high, 1 + 3 * 0.5);
  EXPECT_TRUE(Param(s, "c").log);
  EXPECT_NEAR(Param(s, "c").high, std::exp(3.0), 1e-9);
  EXPECT_EQ(Param(s, "e").high, 1.0);
  EXPECT_TRUE(Param(s, "g").log);
  std::string w = WarningsText(out);
  for (const char* expected :
       {"sweep.yaml:5:6: parameters.a: warning: normal(mu 1, sigma 0.5) has no hyperpack form",
        "sweep.yaml:6:6: parameters.b: warning: q_normal", "sweep.yaml:7:6: parameters.c",
        "sweep.yaml:8:6: parameters.d", "sweep.yaml:9:6: parameters.e: warning: beta",
        "sweep.yaml:10:6: parameters.f",
        "sweep.yaml:11:6: parameters.g: warning: "
        "q_log_uniform_values with q 1",
        "sweep.yaml:12:6: parameters.h",
        "sweep.yaml:13:6: parameters.i: warning: q_uniform with q 0.5",
        "parameters.j: warning: probabilities are not carried over"})
    EXPECT_THAT(w, HasSubstr(expected));
}

TEST(ImportWandbTest, WhatCannotBeCarriedOverIsAnErrorAtItsLine) {
  ImportOutcome out = ImportSweep(
      std::string(kHead) + R"(  a: {distribution: inv_log_uniform_values, min: 1, max: 10}
  b: {distribution: inv_log_uniform, min: 0, max: 2}
  c: {distribution: log_uniform_values, min: 0, max: 1}
  d: {distribution: uniform, min: 0}
  e: {values: [[1, 2], [3]]}
)",
      "sweep.yaml", SweepFormat::kWandb);
  ASSERT_EQ(out.errors.size(), 5u);
  EXPECT_EQ(out.errors[0].ToString(),
            "sweep.yaml:5:21: parameters.a: distribution 'inv_log_uniform_values' cannot be "
            "carried over (hyperpack has uniform and log-uniform ranges, integers and "
            "categoricals)");
  EXPECT_THAT(out.errors[1].ToString(), HasSubstr("sweep.yaml:6:21: parameters.b"));
  EXPECT_THAT(out.errors[2].ToString(),
              HasSubstr("parameters.c: log_uniform_values: min must be below max and above 0"));
  EXPECT_THAT(out.errors[3].ToString(), HasSubstr("parameters.d: uniform needs a number 'max'"));
  EXPECT_THAT(out.errors[4].ToString(), HasSubstr("parameters.e: a value that is a list"));
  EXPECT_TRUE(out.study_yaml.empty());
}

TEST(ImportWandbTest, CommandMacrosMethodsRunCapAndHyperband) {
  ImportOutcome out;
  StudySpec s = Imported(R"(program: fit.py
method: grid
metric: {name: loss}
run_cap: 12
parameters:
  lr: {values: [0.1, 0.01]}
  net: {parameters: {depth: {values: [2, 4]}}}
command:
  - ${env}
  - python3
  - ${program}
  - --epochs
  - "5"
  - ${args_no_hyphens}
early_terminate: {type: hyperband, min_iter: 1, max_iter: 27, eta: 3}
)",
                         &out);
  EXPECT_EQ(s.trial.command,
            "/usr/bin/env python3 fit.py --epochs 5 lr={lr} 'net={{\"depth\": {net_depth}}}'");
  EXPECT_EQ(s.objective.direction, Direction::kMinimize);  // W&B's default goal
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kSobol);
  EXPECT_EQ(s.budget.max_trials, 12);
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kHyperband);
  EXPECT_EQ(s.pruner.max_resource, 27);
  EXPECT_EQ(s.pruner.reduction_factor, 3);
  std::string w = WarningsText(out);
  EXPECT_THAT(w, HasSubstr("sweep.yaml:2:9: method: warning: grid has no hyperpack form"));
  EXPECT_THAT(
      w,
      HasSubstr("net: warning: nested parameters are tuned as net_*; the program gets them as W&B "
                "gives them: one JSON value in ${args}"));
}

TEST(ImportWandbTest, HyperbandWithoutAMaximumIsLeftCommentedOutWithAWarning) {
  ImportOutcome out;
  StudySpec s = Imported(std::string(kHead) + "  lr: {min: 0.001, max: 0.1}\n" +
                             "early_terminate: {type: hyperband, min_iter: 3}\n",
                         &out);
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kNone);
  EXPECT_THAT(out.study_yaml, HasSubstr("# pruner: {algorithm: hyperband, min_resource: 3, "
                                        "max_resource: SET_ME"));
  EXPECT_THAT(WarningsText(out), HasSubstr("needs max_resource"));
}

// W&B's sweeps run by its Optuna or Ax engines declare several objectives as `metrics:`, a list
// of {name, goal} (the shape of W&B's own scheduler tests): they become `objectives:`, in order.
TEST(ImportWandbTest, MetricsBecomeObjectivesInTheirOrder) {
  ImportOutcome out;
  StudySpec s = Imported(R"(program: train.py
method: bayes
metrics:
  - {name: loss, goal: minimize}
  - {name: accuracy, goal: maximize}
  - name: latency_ms
parameters:
  x: {min: 0.0, max: 1.0}
early_terminate: {type: hyperband, min_iter: 1, max_iter: 9}
)",
                         &out);
  ASSERT_EQ(s.objectives.size(), 3u);
  EXPECT_EQ(s.objectives[0].metric, "loss");
  EXPECT_EQ(s.objectives[1].direction, Direction::kMaximize);
  EXPECT_EQ(s.objectives[2].direction, Direction::kMinimize);  // W&B's default goal
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kHyperband);
  EXPECT_TRUE(out.warnings.empty()) << WarningsText(out);
  // One metric in the list is one objective.
  StudySpec one = Imported(
      "program: t.py\nmethod: random\nmetrics: [{name: loss}]\n"
      "parameters: {x: {min: 0.0, max: 1.0}}\n");
  EXPECT_EQ(one.objectives.size(), 1u);
  EXPECT_EQ(one.objective.metric, "loss");
  ImportOutcome bad = ImportSweep(
      "program: t.py\nmethod: random\nmetrics: [{name: a, goal: up}, {goal: minimize}]\n"
      "parameters: {x: {min: 0.0, max: 1.0}}\n",
      "sweep.yaml", SweepFormat::kWandb);
  ASSERT_EQ(bad.errors.size(), 2u) << testing::Text(bad.errors);
  EXPECT_THAT(bad.errors[0].ToString(), HasSubstr("sweep.yaml:3:"));
  EXPECT_THAT(testing::Text(bad.errors), HasSubstr("'up' is not minimize or maximize"));
  EXPECT_THAT(testing::Text(bad.errors), HasSubstr("metrics[1]"));
}

TEST(ImportWandbTest, NotASweepIsAClearError) {
  ImportOutcome yaml = ImportSweep("a: [1,\n", "sweep.yaml", SweepFormat::kWandb);
  ASSERT_EQ(yaml.errors.size(), 1u);
  EXPECT_THAT(yaml.errors[0].ToString(), HasSubstr("sweep.yaml:"));
  EXPECT_THAT(yaml.errors[0].ToString(), HasSubstr("invalid YAML"));
  ImportOutcome list = ImportSweep("- 1\n", "sweep.yaml", SweepFormat::kWandb);
  ASSERT_EQ(list.errors.size(), 1u);
  EXPECT_THAT(list.errors[0].message, HasSubstr("a W&B sweep is a mapping"));
  ImportOutcome nometric = ImportSweep("parameters: {x: {values: [1]}}\nprogram: p.py\n",
                                       "sweep.yaml", SweepFormat::kWandb);
  ASSERT_FALSE(nometric.errors.empty());
  EXPECT_THAT(nometric.errors[0].message, HasSubstr("the sweep names no metric"));
  EXPECT_FALSE(ParseSweepFormat("sigopt").ok());
}

// ---- NNI ----

StudySpec ImportedNni(const std::string& config, ImportOutcome* outcome,
                      const std::string& filename = "config.yml") {
  return testing::ImportedAs(config, filename, SweepFormat::kNni, outcome);
}

TEST(ImportNniTest, EveryTypeKeysInAnyCaseAndTheBudget) {
  ImportOutcome out;
  StudySpec s = ImportedNni(R"(experiment_name: mnist
trial_command: python3 mnist.py
TrialConcurrency: 2
maxTrialNumber: 10
max_experiment_duration: 1h
tuner: {name: TPE, classArgs: {optimize_mode: minimize}}
searchSpace:
  opt: {_type: choice, _value: [sgd, adam]}
  layers: {_type: randint, _value: [1, 5]}
  dropout: {_type: uniform, _value: [0.0, 0.5]}
  width: {_type: quniform, _value: [32, 512, 32]}
  lr: {_type: loguniform, _value: [0.0001, 0.1]}
  wd: {_type: qloguniform, _value: [0.00001, 0.01, 0.00001]}
  m: {_type: normal, _value: [0.9, 0.03]}
  n: {_type: qnormal, _value: [0, 1, 0.5]}
  s: {_type: lognormal, _value: [0, 1]}
  t: {_type: qlognormal, _value: [0, 1, 1]}
)",
                            &out);
  EXPECT_EQ(s.name, "mnist");
  EXPECT_EQ(s.objective.metric, "default");
  EXPECT_EQ(s.objective.direction, Direction::kMinimize);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kGp);
  EXPECT_EQ(s.budget.max_trials, 10);
  EXPECT_EQ(s.budget.max_parallel, 2);
  EXPECT_EQ(*s.budget.time_limit_s, 3600);
  EXPECT_EQ(s.trial.command, "python3 mnist.py");
  EXPECT_EQ(Param(s, "opt").values.size(), 2u);
  // randint's upper bound is exclusive in NNI.
  EXPECT_EQ(Param(s, "layers").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "layers").high, 4);
  EXPECT_EQ(Param(s, "dropout").type, ParamType::kFloat);
  EXPECT_EQ(Param(s, "width").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "width").step, 32);
  EXPECT_TRUE(Param(s, "lr").log);
  EXPECT_TRUE(Param(s, "wd").log);
  EXPECT_NEAR(Param(s, "m").low, 0.81, 1e-12);
  EXPECT_TRUE(Param(s, "s").log);
  EXPECT_NEAR(Param(s, "s").high, std::exp(3.0), 1e-9);
  std::string w = WarningsText(out);
  EXPECT_THAT(w, HasSubstr("config.yml:13:7: wd: warning: qloguniform with q 1e-05"));
  EXPECT_THAT(w, HasSubstr("config.yml:14:6: m: warning: normal(mu 0.9, sigma 0.03)"));
  EXPECT_THAT(w, HasSubstr("n: warning: qnormal"));
  EXPECT_THAT(w, HasSubstr("t: warning: qlognormal"));
  // nni.get_next_parameter() and nni.report_*_result() are served by the shim.
  EXPECT_EQ(s.trial.shim, TrialShim::kNni);
}

TEST(ImportNniTest, ASearchSpaceFileBesideTheConfigAndANestedChoice) {
  hyperpack::testing::TempDir dir;
  hyperpack::testing::WriteFile(dir / "search_space.json", R"({
  "optimizer": {"_type": "choice", "_value": [
    {"_name": "sgd", "momentum": {"_type": "uniform", "_value": [0.5, 0.99]}},
    {"_name": "adam", "beta1": {"_type": "uniform", "_value": [0.8, 0.95]}}]},
  "lr": {"_type": "loguniform", "_value": [0.001, 0.1]}
})");
  ImportOutcome out;
  StudySpec s = ImportedNni(R"(name: MNIST
searchSpaceFile: search_space.json
trialCommand: python3 train.py
trialCodeDirectory: code
trialGpuNumber: 2
tuner: {name: Random}
assessor: {name: Medianstop, classArgs: {optimize_mode: maximize, start_step: 5}}
)",
                            &out, dir / "config.yml");
  EXPECT_EQ(s.name, "MNIST");  // `name`, as NNI's newer configs write experimentName
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kRandom);
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);  // NNI's default optimize_mode
  EXPECT_EQ(s.trial.workdir, dir / "code");
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kMedian);
  EXPECT_EQ(s.pruner.warmup_steps, 5);
  EXPECT_TRUE(s.resources.gpus.has_value());
  ASSERT_NE(s.space.Find("optimizer_momentum"), nullptr);
  ASSERT_TRUE(Param(s, "optimizer_momentum").when.has_value());
  EXPECT_EQ(Param(s, "optimizer_momentum").when->parent, "optimizer");
  EXPECT_EQ(Param(s, "optimizer_beta1").when->parent, "optimizer");
  // Warnings in the search space file point into it.
  EXPECT_THAT(WarningsText(out), HasSubstr("search_space.json:2:16: optimizer: warning: nested "
                                           "choice"));
}

TEST(ImportNniTest, WhatCannotBeCarriedOverIsAnErrorInTheRightFile) {
  hyperpack::testing::TempDir dir;
  hyperpack::testing::WriteFile(dir / "space.json",
                                "{\"x\": {\"_type\": \"randn\", \"_value\": [0, 1]}}");
  ImportOutcome bad = ImportSweep("searchSpaceFile: space.json\ntrialCommand: python3 t.py\n",
                                  dir / "config.yml", SweepFormat::kNni);
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].ToString(),
            (dir / "space.json") + ":1:17: x: _type 'randn' is not one NNI documents");
  ImportOutcome missing = ImportSweep("searchSpace: {x: {_type: choice, _value: [1]}}\n",
                                      "config.yml", SweepFormat::kNni);
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_THAT(missing.errors[0].message, HasSubstr("an experiment needs trialCommand"));
}

}  // namespace
}  // namespace hyperpack::study
