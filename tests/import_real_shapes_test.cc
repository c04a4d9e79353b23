// The shapes that broke the importers on the other tools' own example trees (Katib, NNI,
// Determined, W&B; bench/import_corpus.py runs those), each as a fixture written here: the format
// told from the file, Determined's newer searcher lengths, NNI's nested choices that share names,
// names that are not identifiers, v1 worker commands, and refusals that say where.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hyperpack/study/import.h"
#include "hyperpack/study/template.h"
#include "import_util.h"
#include "test_util.h"

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;
using testing::Param;
using testing::Text;

std::optional<SweepFormat> Detected(const std::string& text) {
  auto f = DetectSweepFormat(text, "f.yaml");
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? *f : std::nullopt;
}

TEST(ImportDetectTest, EachToolAndAStudyFileAreToldByTheirKeys) {
  EXPECT_EQ(Detected("apiVersion: kubeflow.org/v1beta1\nkind: Experiment\nspec: {}\n"),
            SweepFormat::kKatib);
  EXPECT_EQ(Detected("searchSpaceFile: s.json\ntrialCommand: python3 t.py\n"), SweepFormat::kNni);
  EXPECT_EQ(Detected("search_space_file: s.json\ntrial_command: python3 t.py\n"),
            SweepFormat::kNni);
  EXPECT_EQ(Detected("trial: {command: python3 t.py, codeDir: .}\nsearchSpacePath: s.json\n"),
            SweepFormat::kNni);
  EXPECT_EQ(Detected("searcher: {name: single, metric: x}\nentrypoint: python3 t.py\n"),
            SweepFormat::kDetermined);
  EXPECT_EQ(Detected("method: bayes\nparameters: {x: {min: 0, max: 1}}\n"), SweepFormat::kWandb);
  EXPECT_EQ(Detected("objective: {metric: loss}\nsearch_space: {x: [1, 2]}\ntrial: {command: t}\n"),
            std::nullopt);
}

TEST(ImportDetectTest, AFileOfNoToolOrOfSeveralIsAnErrorThatSaysWhatWasLookedFor) {
  auto none = DetectSweepFormat("foo: 1\n", "f.yaml");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(),
              HasSubstr("f.yaml:1:1: cannot tell which tool's file this is: looked for a hyperpack "
                        "study (objective or objectives, and search_space), a Katib Experiment"));
  EXPECT_THAT(none.status().message(), HasSubstr("name it with --from wandb|nni|determined|katib"));
  auto both = DetectSweepFormat("method: random\nsearcher: {name: random}\n", "f.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(),
              HasSubstr("f.yaml:1:1: the file's keys fit several formats (determined, wandb)"));
  auto list = DetectSweepFormat("- a\n- b\n", "f.yaml");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("f.yaml:1:1: the file is not a mapping"));
  auto broken = DetectSweepFormat("a: [1,\n", "f.yaml");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("invalid YAML"));
}

// Determined's tutorials: adaptive_asha with max_time and time_metric (no max_length), and
// smaller_is_better written as Python writes booleans.
TEST(ImportRealShapesTest, DeterminedAdaptiveAshaWithMaxTimeAndTimeMetric) {
  ImportOutcome out;
  StudySpec s = testing::ImportedAs(R"(name: adaptive
hyperparameters:
  global_batch_size: 64
  learning_rate: {type: double, minval: .0001, maxval: 1.0}
searcher:
  name: adaptive_asha
  metric: test_loss
  smaller_is_better: False
  max_trials: 50
  time_metric: epochs
  max_time: 20
entrypoint: python3 model_def_adaptive.py --epochs 20
)",
                                    "adaptive.yaml", SweepFormat::kDetermined, &out);
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kAsha);
  EXPECT_EQ(s.pruner.resource, PrunerResource::kEpoch);
  EXPECT_EQ(s.pruner.max_resource, 20);
  EXPECT_EQ(s.budget.max_trials, 50);
}

// Determined's Core API tutorials: a single searcher and no hyperparameters at all.
TEST(ImportRealShapesTest, DeterminedWithNothingToTuneRunsItsProgramOnce) {
  StudySpec s = testing::ImportedAs(R"(name: core-api-stage-0
entrypoint: python3 0_start.py
searcher:
   name: single
   metric: x
)",
                                    "0_start.yaml", SweepFormat::kDetermined);
  EXPECT_EQ(s.space.size(), 0u);
  EXPECT_EQ(s.budget.max_trials, 1);
  EXPECT_EQ(s.trial.command, "python3 0_start.py");
  ImportOutcome list = ImportSweep(
      "hyperparameters: [1, 2]\nsearcher: {name: single, metric: x}\nentrypoint: python3 t.py\n",
      "list.yaml", SweepFormat::kDetermined);
  EXPECT_THAT(Text(list.errors), HasSubstr("list.yaml:1:18: hyperparameters: expected a mapping"));
}

// NNI's mnist-nested-search-space: two options of a choice give their children the same name.
TEST(ImportRealShapesTest, NniNestedOptionsThatShareAChildNameShareOneConditionalParameter) {
  StudySpec s = testing::ImportedAs(R"(searchSpace:
  layer0:
    _type: choice
    _value:
      - {_name: Empty}
      - {_name: Conv, kernel_size: {_type: choice, _value: [1, 2, 3]}}
      - {_name: Max_pool, pooling_size: {_type: choice, _value: [2, 3, 5]}}
      - {_name: Avg_pool, pooling_size: {_type: choice, _value: [2, 3, 5]}}
      - {_name: Dense, width: {_type: choice, _value: [64, 128]}}
      - {_name: Wide, width: {_type: choice, _value: [512, 1024]}}
trialCommand: python3 mnist.py
)",
                                    "config.yml", SweepFormat::kNni);
  EXPECT_EQ(Param(s, "layer0_kernel_size").when->text, "layer0 == Conv");
  EXPECT_EQ(Param(s, "layer0_pooling_size").when->text, "layer0 in [Max_pool, Avg_pool]");
  // The same name with different ranges: one parameter per option.
  EXPECT_EQ(Param(s, "layer0_Dense_width").when->text, "layer0 == Dense");
  EXPECT_EQ(Param(s, "layer0_Wide_width").when->text, "layer0 == Wide");
  EXPECT_EQ(s.space.Find("layer0_width"), nullptr);
}

// NNI's hyperband benchmark names its parameters 0_1; its Kubeflow and FrameworkController v1
// configs put the command under trial.worker and trial.taskRoles.
TEST(ImportRealShapesTest, NniNamesThatAreNotIdentifiersAndV1WorkerCommands) {
  StudySpec s = testing::ImportedAs(R"(searchSpace:
  0_1: {_type: choice, _value: [0, 1]}
trial:
  codeDir: .
  worker: {replicas: 1, command: python3 mnist.py, gpuNum: 0, image: msranni/nni}
)",
                                    "config_kubeflow.yml", SweepFormat::kNni);
  EXPECT_NE(s.space.Find("0_1"), nullptr);
  EXPECT_EQ(ParamEnvName("0_1"), "HP_0_1");
  EXPECT_EQ(s.trial.command, "python3 mnist.py");
  ImportOutcome out;
  StudySpec roles = testing::ImportedAs(R"(searchSpace: {x: {_type: uniform, _value: [0, 1]}}
trial:
  taskRoles:
    - {name: worker, taskNum: 1, command: python3 train.py}
)",
                                        "config_fc.yml", SweepFormat::kNni, &out);
  EXPECT_EQ(roles.trial.command, "python3 train.py");
  EXPECT_THAT(Text(out.warnings), HasSubstr("config_fc.yml:4:7: trial.worker: warning: the "
                                            "worker's command runs here as one process"));
}

TEST(ImportRealShapesTest, NniEmptySpacesAnnotationsAndMissingKeysAreRefusedAtALine) {
  ImportOutcome empty =
      ImportSweep("searchSpace: {}\ntrialCommand: python3 t.py\n", "c.yml", SweepFormat::kNni);
  EXPECT_THAT(Text(empty.errors), HasSubstr("c.yml:1:14: searchSpace: the search space is empty"));
  ImportOutcome annotated =
      ImportSweep("useAnnotation: true\ntrialCommand: python3 t.py\n", "c.yml", SweepFormat::kNni);
  EXPECT_THAT(Text(annotated.errors),
              HasSubstr("c.yml:1:16: useAnnotation: the search space is written as NNI "
                        "annotations"));
  ImportOutcome no_command = ImportSweep("searchSpace: {x: {_type: choice, _value: [1, 2]}}\n",
                                         "c.yml", SweepFormat::kNni);
  ASSERT_FALSE(no_command.errors.empty());
  EXPECT_EQ(no_command.errors[0].line, 1);
  EXPECT_EQ(no_command.errors[0].column, 1);
  ImportOutcome no_metric =
      ImportSweep("program: t.py\nmethod: grid\nparameters: {flag: {values: [true, false]}}\n",
                  "sweep-bool.yaml", SweepFormat::kWandb);
  EXPECT_THAT(Text(no_metric.errors),
              HasSubstr("sweep-bool.yaml:1:1: metric: the sweep names no metric"));
}

// Katib's XGBoostJob example: a Master replica whose container gives args to its image's
// entrypoint, and metrics whose names have spaces (LightGBM's "valid_1 auc").
TEST(ImportRealShapesTest, KatibTrainingJobKindsArgsOnlyContainersAndSpacedMetricNames) {
  const std::string job = R"y(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: lgbm, namespace: team}
spec:
  objective: {type: maximize, objectiveMetricName: valid_1 auc}
  metricsCollectorSpec:
    source: {filter: {metricsFormat: ['(\w+\s\w+)\s:\s((-?\d+)(\.\d+)?)']}}
  algorithm: {algorithmName: random}
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.1"}}
  trialTemplate:
    trialParameters:
      - {name: learningRate, reference: lr}
      - {name: ns, reference: "${trialSpec.Namespace}"}
    trialSpec:
      apiVersion: kubeflow.org/v1
      kind: XGBoostJob
      spec:
        xgbReplicaSpecs:
          Master:
            replicas: 1
            template:
              spec:
                containers:
                  - name: xgboost
                    args: ["--learning_rate=${trialParameters.learningRate}", "--ns=${trialParameters.ns}"]
          Worker: {replicas: 2}
)y";
  ImportOutcome refused = ImportSweep(job, "lgbm.yaml", SweepFormat::kKatib);
  EXPECT_THAT(Text(refused.errors),
              HasSubstr("lgbm.yaml:26:27: spec.trialTemplate.args: the container gives args but no "
                        "command"));
  ImportOptions given;
  given.command = "python3 main.py --learning_rate={lr}";
  ImportOutcome out;
  StudySpec s = testing::ImportedAs(job, "lgbm.yaml", SweepFormat::kKatib, &out, given);
  EXPECT_EQ(s.trial.command, "python3 main.py --learning_rate={lr}");
  EXPECT_EQ(s.objective.metric, "valid_1_auc");
  ASSERT_EQ(s.metric_patterns.size(), 1u);
  EXPECT_EQ(s.metric_patterns[0].name, "valid_1_auc");
  EXPECT_THAT(Text(out.warnings),
              HasSubstr("the XGBoostJob's Worker replicas are not carried over"));
  // A TFJob's Chief, a metadata substitution.
  StudySpec tf = testing::ImportedAs(R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: tf, namespace: team}
spec:
  objective: {type: maximize, objectiveMetricName: accuracy}
  algorithm: {algorithmName: random}
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.1"}}
  trialTemplate:
    trialParameters:
      - {name: learningRate, reference: lr}
      - {name: ns, reference: "${trialSpec.Namespace}"}
      - {name: label, reference: "${trialSpec.Labels[team]}"}
    trialSpec:
      kind: TFJob
      metadata: {labels: {team: vision}}
      spec:
        tfReplicaSpecs:
          Chief:
            template: {spec: {containers: [{name: tf, command: [python, mnist.py, "--lr=${trialParameters.learningRate}", "--ns=${trialParameters.ns}", "--label=${trialParameters.label}"]}]}}
          Worker: {replicas: 2}
)",
                                     "tf.yaml", SweepFormat::kKatib);
  EXPECT_EQ(tf.trial.command, "python mnist.py --lr={lr} --ns=team --label=vision");
}

// W&B with Hydra: dotted keys, passed as Hydra overrides by ${args_no_hyphens}.
TEST(ImportRealShapesTest, WandbHydraDottedKeysKeepTheirNames) {
  StudySpec s = testing::ImportedAs(R"(program: main.py
metric: {name: val_loss, goal: minimize}
method: bayes
parameters:
  optimizer.config.learning_rate: {min: !!float 1e-5, max: 0.1}
  optimizer: {values: [sgd, adagrad, adam]}
command: ["${env}", "${interpreter}", "${program}", "${args_no_hyphens}"]
)",
                                    "wandb_sweep.yaml", SweepFormat::kWandb);
  EXPECT_NE(s.space.Find("optimizer.config.learning_rate"), nullptr);
  EXPECT_THAT(s.trial.command, HasSubstr("main.py optimizer.config.learning_rate="
                                         "{optimizer.config.learning_rate} optimizer={optimizer}"));
}

}  // namespace
}  // namespace hyperpack::study
