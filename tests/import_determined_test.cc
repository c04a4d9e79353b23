// Determined experiment configurations written here, covering every hyperparameter type and
// searcher Determined documents, imported and parsed back as hyperpack study files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "hyperpack/study/import.h"
#include "import_util.h"

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;

using testing::Param;
using testing::Text;

StudySpec Imported(const std::string& config, ImportOutcome* outcome = nullptr) {
  return testing::ImportedAs(config, "exp.yaml", SweepFormat::kDetermined, outcome);
}

constexpr char kHead[] = R"(name: mnist tuning
entrypoint: python3 train.py --tag {x}
searcher: {name: random, metric: val_loss, max_trials: 8}
hyperparameters:
)";

TEST(ImportDeterminedTest, EveryHyperparameterTypeBecomesItsHyperpackForm) {
  ImportOutcome out;
  StudySpec s = Imported(std::string(kHead) + R"(  global_batch_size: 64
  seed: {type: const, val: 7}
  layers: {type: int, minval: 1, maxval: 4}
  dropout: {type: double, minval: 0.1, maxval: 0.5}
  lr: {type: log, minval: -4, maxval: -1}
  wd: {type: log, minval: -10, maxval: -3, base: 2}
  opt: {type: categorical, vals: [sgd, adam, true, 3]}
  net:
    depth: {type: int, minval: 2, maxval: 8, count: 4}
    act: relu
)",
                         &out);
  EXPECT_EQ(s.name, "mnist-tuning");
  EXPECT_EQ(s.objective.metric, "val_loss");
  EXPECT_EQ(s.objective.direction, Direction::kMinimize);  // smaller_is_better defaults to true
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kRandom);
  EXPECT_EQ(s.budget.max_trials, 8);
  EXPECT_EQ(Param(s, "global_batch_size").type, ParamType::kFixed);
  EXPECT_EQ(std::get<int64_t>(Param(s, "global_batch_size").value), 64);
  EXPECT_EQ(Param(s, "seed").type, ParamType::kFixed);
  EXPECT_EQ(std::get<int64_t>(Param(s, "seed").value), 7);
  // int bounds are inclusive on both ends, as hyperpack's are.
  EXPECT_EQ(Param(s, "layers").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "layers").low, 1);
  EXPECT_EQ(Param(s, "layers").high, 4);
  EXPECT_EQ(Param(s, "layers").Cardinality(), 4);
  EXPECT_EQ(Param(s, "dropout").type, ParamType::kFloat);
  EXPECT_FALSE(Param(s, "dropout").log);
  EXPECT_EQ(Param(s, "dropout").high, 0.5);
  // log's minval and maxval are exponents of base (10 unless given).
  EXPECT_EQ(Param(s, "lr").type, ParamType::kFloat);
  EXPECT_TRUE(Param(s, "lr").log);
  EXPECT_NEAR(Param(s, "lr").low, std::pow(10.0, -4), 1e-15);
  EXPECT_NEAR(Param(s, "lr").high, std::pow(10.0, -1), 1e-15);
  EXPECT_TRUE(Param(s, "wd").log);
  EXPECT_NEAR(Param(s, "wd").low, std::pow(2.0, -10), 1e-15);
  EXPECT_NEAR(Param(s, "wd").high, std::pow(2.0, -3), 1e-15);
  EXPECT_EQ(Param(s, "opt").type, ParamType::kCategorical);
  EXPECT_EQ(Param(s, "opt").values.size(), 4u);
  // A nested group is flattened.
  EXPECT_EQ(Param(s, "net_depth").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "net_depth").high, 8);
  EXPECT_EQ(std::get<std::string>(Param(s, "net_act").value), "relu");
  // Nothing is appended to the entrypoint; its literal braces are kept.
  EXPECT_EQ(s.trial.command, "python3 train.py --tag {{x}}");
  std::string w = Text(out.warnings);
  EXPECT_THAT(w, HasSubstr("exp.yaml:12:3: hyperparameters.net: warning: nested hyperparameters "
                           "are tuned as net_*; the program gets them nested"));
  EXPECT_THAT(w, HasSubstr("exp.yaml:13:53: hyperparameters.net_depth: warning: count"));
  EXPECT_EQ(out.warnings.size(), 2u) << w;
  // The Core API is served by the shim, which hands the group back nested.
  EXPECT_EQ(s.trial.shim, TrialShim::kDetermined);
  ASSERT_EQ(s.trial.env.size(), 1u);
  EXPECT_EQ(s.trial.env[0].first, "HYPERPACK_DETERMINED_NESTED");
  EXPECT_THAT(out.study_yaml, HasSubstr("# Imported from the Determined experiment exp.yaml"));
  EXPECT_THAT(out.study_yaml, HasSubstr("   # exp.yaml:9\n"));
}

TEST(ImportDeterminedTest, AdaptiveAshaMaximizingWithSlotsPerTrial) {
  ImportOutcome out;
  StudySpec s = Imported(R"(name: cifar
description: ResNet on CIFAR-10
entrypoint: [python3, train.py, --fast]
hyperparameters:
  lr: {type: log, minval: -3, maxval: -1}
searcher:
  name: adaptive_asha
  metric: val_accuracy
  smaller_is_better: false
  max_length: {epochs: 27}
  max_trials: 40
  max_concurrent_trials: 4
resources:
  slots_per_trial: 4
  resource_pool: gpu-pool
)",
                         &out);
  EXPECT_EQ(s.description, "ResNet on CIFAR-10");
  EXPECT_EQ(s.objective.metric, "val_accuracy");
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kGp);
  EXPECT_EQ(s.budget.max_trials, 40);
  EXPECT_EQ(s.budget.max_parallel, 4);
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kAsha);
  EXPECT_EQ(s.pruner.mode, tuner::PrunerMode::kPromote);
  EXPECT_EQ(s.pruner.resource, PrunerResource::kEpoch);
  EXPECT_EQ(s.pruner.max_resource, 27);
  EXPECT_EQ(s.pruner.reduction_factor, 4);  // Determined's default divisor
  // Determined's rungs: 27 / 4^k for the rungs that fit (27, 6.75, 1.6875).
  EXPECT_EQ(s.pruner.min_resource, 27.0 / 16);
  ASSERT_TRUE(s.resources.gpus.has_value());
  EXPECT_EQ(s.resources.gpus->text(), "4");
  EXPECT_EQ(s.trial.command, "python3 train.py --fast");
  EXPECT_THAT(Text(out.warnings), HasSubstr("exp.yaml:15:3: resources.resource_pool: warning: "
                                            "resource_pool is Determined's own"));
}

TEST(ImportDeterminedTest, BatchesAreStepsAndRecordsAreNotCarriedOver) {
  constexpr char kBody[] = R"(entrypoint: python3 train.py
hyperparameters: {lr: {type: double, minval: 0.01, maxval: 0.1}}
searcher: {name: adaptive_asha, metric: loss, max_trials: 16, divisor: 3, stop_once: true,
           max_length: )";
  StudySpec steps = Imported(std::string(kBody) + "{batches: 900}}\n");
  EXPECT_EQ(steps.pruner.resource, PrunerResource::kStep);
  EXPECT_EQ(steps.pruner.max_resource, 900);
  EXPECT_EQ(steps.pruner.reduction_factor, 3);
  EXPECT_EQ(steps.pruner.mode, tuner::PrunerMode::kStop);
  ImportOutcome out;
  StudySpec records = Imported(std::string(kBody) + "{records: 50000}}\n", &out);
  EXPECT_EQ(records.pruner.algorithm, tuner::PrunerAlgorithm::kNone);
  EXPECT_THAT(out.study_yaml, HasSubstr("# pruner: {algorithm: asha"));
  EXPECT_THAT(Text(out.warnings),
              HasSubstr("searcher.max_length: warning: a length in records is not carried over"));
}

TEST(ImportDeterminedTest, GridAndSingleSearchersAreWarnings) {
  ImportOutcome out;
  StudySpec grid = Imported(R"(entrypoint: python3 train.py
hyperparameters: {x: {type: int, minval: 0, maxval: 9, count: 10}}
searcher: {name: grid, metric: loss}
)",
                            &out);
  EXPECT_EQ(grid.tuner.algorithm, tuner::TunerAlgorithm::kSobol);
  EXPECT_THAT(Text(out.warnings),
              HasSubstr("exp.yaml:3:18: searcher.name: warning: grid has no hyperpack form"));
  StudySpec single = Imported(R"(entrypoint: python3 train.py
hyperparameters: {x: 1}
searcher: {name: single, metric: loss, max_length: {epochs: 3}}
)",
                              &out);
  EXPECT_EQ(single.budget.max_trials, 1);
  EXPECT_THAT(Text(out.warnings), HasSubstr("searcher.name: warning: single runs one trial"));
}

TEST(ImportDeterminedTest, DeterminedsOwnAndUnknownKeysAreWarningsAtTheirLines) {
  ImportOutcome out;
  Imported(R"(entrypoint: python3 train.py
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: loss}
checkpoint_storage:
  type: shared_fs
  host_path: /tmp
environment: {image: determinedai/pytorch}
max_restarts: 5
records_per_epoch: 60000
labels: [a, b]
colour: blue
)",
           &out);
  std::string w = Text(out.warnings);
  EXPECT_THAT(w, HasSubstr("exp.yaml:4:1: checkpoint_storage: warning: checkpoint_storage is "
                           "Determined's own: not carried over\n"));
  for (const char* expected :
       {"exp.yaml:7:1: environment: warning:", "exp.yaml:8:1: max_restarts: warning:",
        "exp.yaml:9:1: records_per_epoch: warning:", "exp.yaml:10:1: labels: warning:",
        "exp.yaml:11:1: colour: warning: unknown experiment key 'colour' is not carried over"})
    EXPECT_THAT(w, HasSubstr(expected));
}

TEST(ImportDeterminedTest, WhatCannotBeCarriedOverIsAnErrorAtItsLine) {
  ImportOutcome trial = ImportSweep(R"(entrypoint: model_def:MnistTrial
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: loss}
)",
                                    "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(trial.errors.size(), 1u) << Text(trial.errors);
  EXPECT_EQ(trial.errors[0].ToString(),
            "exp.yaml:1:13: entrypoint: 'model_def:MnistTrial' is a Determined Trial class, which "
            "hyperpack cannot run: give the command that trains with --command '...' (e.g. "
            "--command 'python3 train.py --lr {learning_rate}'), a program that reads its "
            "hyperparameters from $HYPERPACK_PARAMS_FILE (JSON) and prints its metrics");
  EXPECT_TRUE(trial.study_yaml.empty());
  // What the error says to do: --command in place of the Trial class.
  ImportOptions given;
  given.command = "python3 train.py --x {x}";
  StudySpec s = testing::ImportedAs(R"(entrypoint: model_def:MnistTrial
hyperparameters: {x: {type: double, minval: 0, maxval: 1}}
searcher: {name: random, metric: loss}
)",
                                    "exp.yaml", SweepFormat::kDetermined, nullptr, given);
  EXPECT_EQ(s.trial.command, "python3 train.py --x {x}");

  ImportOutcome bad = ImportSweep(R"(entrypoint: python3 train.py
searcher: {name: random, metric: loss}
hyperparameters:
  a: {type: uniform, minval: 0, maxval: 1}
  b: {type: int, minval: 0.5, maxval: 3}
  c: {type: categorical, vals: [[1, 2], 3]}
  d: {type: log, minval: -1, maxval: -3}
  e: {type: double, minval: 0}
)",
                                  "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(bad.errors.size(), 4u) << Text(bad.errors);
  EXPECT_EQ(bad.errors[0].ToString(),
            "exp.yaml:4:13: hyperparameters.a: type 'uniform' is not a Determined hyperparameter "
            "type (const, int, double, log, categorical)");
  EXPECT_THAT(bad.errors[1].ToString(),
              HasSubstr("exp.yaml:5:6: hyperparameters.b: int needs whole numbers"));
  // A list among the values (c) is a structured categorical, not an error.
  EXPECT_THAT(bad.errors[2].ToString(),
              HasSubstr("hyperparameters.d: log: minval must be below maxval"));
  EXPECT_THAT(bad.errors[3].ToString(), HasSubstr("hyperparameters.e: double needs a number"));

  ImportOutcome custom = ImportSweep(R"(entrypoint: python3 train.py
hyperparameters: {x: 1}
searcher: {name: custom, metric: loss}
)",
                                     "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(custom.errors.size(), 1u);
  EXPECT_THAT(custom.errors[0].ToString(), HasSubstr("exp.yaml:3:18: searcher.name: 'custom'"));

  ImportOutcome nosearcher = ImportSweep("entrypoint: python3 t.py\nhyperparameters: {x: 1}\n",
                                         "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(nosearcher.errors.size(), 1u);
  EXPECT_THAT(nosearcher.errors[0].message, HasSubstr("an experiment needs searcher"));
  ImportOutcome nometric =
      ImportSweep("entrypoint: python3 t.py\nhyperparameters: {x: 1}\nsearcher: {name: random}\n",
                  "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(nometric.errors.size(), 1u);
  EXPECT_THAT(nometric.errors[0].ToString(),
              HasSubstr("exp.yaml:3:11: searcher.metric: the searcher needs metric"));
  ImportOutcome list = ImportSweep("- 1\n", "exp.yaml", SweepFormat::kDetermined);
  ASSERT_EQ(list.errors.size(), 1u);
  EXPECT_THAT(list.errors[0].message, HasSubstr("a Determined experiment is a mapping"));
}

}  // namespace
}  // namespace hyperpack::study
