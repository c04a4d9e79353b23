// Kubeflow Katib v1beta1 Experiments written here (a batch Job and a PyTorchJob trial, every
// parameter type, medianstop early stopping), imported and parsed back as hyperpack study files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hyperpack/study/import.h"
#include "import_util.h"

namespace hyperpack::study {
namespace {

using ::testing::HasSubstr;

using testing::Param;
using testing::Text;

StudySpec Imported(const std::string& config, ImportOutcome* outcome = nullptr) {
  return testing::ImportedAs(config, "exp.yaml", SweepFormat::kKatib, outcome);
}

constexpr char kJob[] = R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata:
  namespace: kubeflow
  name: random-example
spec:
  objective:
    type: maximize
    goal: 0.99
    objectiveMetricName: Validation-accuracy
    additionalMetricNames: [Train-accuracy]
  algorithm:
    algorithmName: bayesianoptimization
  parallelTrialCount: 2
  maxTrialCount: 12
  maxFailedTrialCount: 3
  parameters:
    - name: lr
      parameterType: double
      feasibleSpace: {min: "0.001", max: "0.1", distribution: logUniform}
    - name: num-layers
      parameterType: int
      feasibleSpace: {min: "2", max: "10", step: "2"}
    - name: batch
      parameterType: discrete
      feasibleSpace: {list: ["16", "32", "64"]}
    - name: optimizer
      parameterType: categorical
      feasibleSpace: {list: [sgd, adam, "1"]}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters:
      - {name: learningRate, reference: lr, description: Learning rate}
      - {name: numberLayers, reference: num-layers}
      - {name: batchSize, reference: batch}
      - {name: optimizer, reference: optimizer}
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                image: docker.io/kubeflowkatib/mxnet-mnist:latest
                command: [python3, /opt/mxnet-mnist/mnist.py, '--json={"a": 1}']
                args:
                  - "--lr=${trialParameters.learningRate}"
                  - "--num-layers=${trialParameters.numberLayers}"
                  - "--batch-size=${trialParameters.batchSize}"
                  - "--optimizer=${trialParameters.optimizer}"
            restartPolicy: Never
)";

TEST(ImportKatibTest, BatchJobWithEveryParameterType) {
  ImportOutcome out;
  StudySpec s = Imported(kJob, &out);
  EXPECT_EQ(s.name, "random-example");
  EXPECT_EQ(s.objective.metric, "Validation-accuracy");
  EXPECT_EQ(s.objective.direction, Direction::kMaximize);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kGp);
  EXPECT_EQ(s.budget.max_trials, 12);
  EXPECT_EQ(s.budget.max_parallel, 2);
  EXPECT_EQ(s.budget.max_failed, 4);  // Katib fails once more than 3 have failed
  EXPECT_EQ(Param(s, "lr").type, ParamType::kFloat);
  EXPECT_TRUE(Param(s, "lr").log);
  EXPECT_EQ(Param(s, "lr").low, 0.001);
  EXPECT_EQ(Param(s, "lr").high, 0.1);
  EXPECT_EQ(Param(s, "num_layers").type, ParamType::kInt);
  EXPECT_EQ(Param(s, "num_layers").low, 2);
  EXPECT_EQ(Param(s, "num_layers").high, 10);
  EXPECT_EQ(Param(s, "num_layers").step, 2);
  EXPECT_FALSE(Param(s, "num_layers").log);
  EXPECT_EQ(Param(s, "batch").type, ParamType::kCategorical);
  ASSERT_EQ(Param(s, "batch").values.size(), 3u);
  EXPECT_EQ(std::get<int64_t>(Param(s, "batch").values[2]), 64);  // written as numbers
  EXPECT_EQ(Param(s, "optimizer").type, ParamType::kCategorical);
  ASSERT_EQ(Param(s, "optimizer").values.size(), 3u);
  EXPECT_EQ(std::get<std::string>(Param(s, "optimizer").values[2]), "1");  // kept as text
  EXPECT_EQ(s.trial.command,
            "python3 /opt/mxnet-mnist/mnist.py '--json={{\"a\": 1}}' --lr={lr} "
            "--num-layers={num_layers} --batch-size={batch} --optimizer={optimizer}");
  std::string w = Text(out.warnings);
  EXPECT_THAT(w, HasSubstr("exp.yaml:9:11: spec.objective.goal: warning: hyperpack does not stop"));
  EXPECT_THAT(w, HasSubstr("exp.yaml:21:13: spec.parameters.num-layers: warning: parameter "
                           "num-layers is named num_layers"));
  EXPECT_THAT(w, HasSubstr("exp.yaml:45:24: spec.trialTemplate.image: warning: hyperpack runs the "
                           "command on this host"));
  EXPECT_THAT(w, HasSubstr("spec.trialTemplate: warning: hyperpack reads metrics from the "
                           "program's output as name=value or JSON lines"));
  EXPECT_EQ(out.warnings.size(), 4u) << w;
  EXPECT_THAT(out.study_yaml, HasSubstr("# Imported from the Katib experiment exp.yaml"));
  EXPECT_THAT(out.study_yaml, HasSubstr("# additionalMetricNames: Train-accuracy"));
  EXPECT_THAT(out.study_yaml, HasSubstr("# algorithmName: bayesianoptimization (hyperpack's "
                                        "model-based tuner in place of Katib's "
                                        "bayesianoptimization), exp.yaml:13\n"));
}

TEST(ImportKatibTest, PyTorchJobTakesTheMastersCommand) {
  ImportOutcome out;
  StudySpec s = Imported(R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {name: torch}
spec:
  objective: {type: minimize, objectiveMetricName: loss}
  algorithm: {algorithmName: random}
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.05"}}
  trialTemplate:
    trialParameters: [{name: learningRate, reference: lr}]
    trialSpec:
      apiVersion: kubeflow.org/v1
      kind: PyTorchJob
      spec:
        pytorchReplicaSpecs:
          Master:
            replicas: 1
            template:
              spec:
                containers:
                  - name: pytorch
                    image: docker.io/kubeflowkatib/pytorch-mnist:latest
                    command: [python3, /opt/mnist.py, --epochs=1, "--lr=${trialParameters.learningRate}"]
          Worker:
            replicas: 2
            template:
              spec:
                containers:
                  - name: pytorch
                    command: [python3, /opt/worker.py]
)",
                         &out);
  EXPECT_EQ(s.trial.command, "python3 /opt/mnist.py --epochs=1 --lr={lr}");
  EXPECT_EQ(s.objective.direction, Direction::kMinimize);
  EXPECT_EQ(s.tuner.algorithm, tuner::TunerAlgorithm::kRandom);
  EXPECT_EQ(s.budget.max_parallel, 3);  // Katib's default parallelTrialCount
  std::string w = Text(out.warnings);
  EXPECT_THAT(w,
              HasSubstr("exp.yaml:25:13: spec.trialTemplate.trialSpec: warning: the "
                        "PyTorchJob's Worker replicas are not carried over: the Master's "
                        "command runs as one process; with 2 workers the gang would be 3 ranks"));
  EXPECT_THAT(w, HasSubstr("exp.yaml:5:3: spec.maxTrialCount: warning: no maxTrialCount"));
}

TEST(ImportKatibTest, MedianStopBecomesTheMedianPruner) {
  const std::string text = std::string(kJob) + R"(  earlyStopping:
    algorithmName: medianstop
    algorithmSettings:
      - {name: min_trials_required, value: "2"}
      - {name: start_step, value: "5"}
)";
  StudySpec s = Imported(text);
  EXPECT_EQ(s.pruner.algorithm, tuner::PrunerAlgorithm::kMedian);
  EXPECT_EQ(s.pruner.startup_trials, 2);
  EXPECT_EQ(s.pruner.warmup_steps, 5);
  // Katib's defaults when no settings are given.
  StudySpec d = Imported(std::string(kJob) + "  earlyStopping: {algorithmName: medianstop}\n");
  EXPECT_EQ(d.pruner.startup_trials, 3);
  EXPECT_EQ(d.pruner.warmup_steps, 4);
}

// Katib's StdOut collector reads stdout and stderr (where Python's logging writes); a metricsFormat
// filter of two groups becomes a pattern per metric with the name written in.
TEST(ImportKatibTest, TheStdOutCollectorReadsBothStreamsAndMetricsFormatBecomesPatterns) {
  StudySpec plain = Imported(kJob);
  EXPECT_EQ(plain.trial.metrics_from, MetricsSource::kOutput);
  EXPECT_TRUE(plain.metric_patterns.empty());
  StudySpec s = Imported(std::string(kJob) + R"y(  metricsCollectorSpec:
    collector: {kind: StdOut}
    source:
      filter:
        metricsFormat: ["{metricName: ([\\w|-]+), metricValue: ((-?\\d+)(\\.\\d+)?)}"]
)y");
  EXPECT_EQ(s.trial.metrics_from, MetricsSource::kOutput);
  ASSERT_EQ(s.metric_patterns.size(), 2u);
  EXPECT_EQ(s.metric_patterns[0].name, "Validation-accuracy");
  EXPECT_EQ(s.metric_patterns[0].pattern,
            "{metricName: (?:Validation\\-accuracy), metricValue: ((?:-?\\d+)(?:\\.\\d+)?)}");
  EXPECT_EQ(s.metric_patterns[1].name, "Train-accuracy");
  // A name group at the start may not match inside a longer name.
  StudySpec d = Imported(std::string(kJob) + R"y(  metricsCollectorSpec:
    source:
      filter:
        metricsFormat: ["([\\w|-]+)\\s*=\\s*([+-]?\\d*(\\.\\d+)?([Ee][+-]?\\d+)?)"]
)y");
  ASSERT_EQ(d.metric_patterns.size(), 2u);
  EXPECT_EQ(
      d.metric_patterns[0].pattern,
      "(?<![\\w|-])(?:Validation\\-accuracy)\\s*=\\s*([+-]?\\d*(?:\\.\\d+)?(?:[Ee][+-]?\\d+)?)");
  ImportOutcome bad = ImportSweep(std::string(kJob) + R"y(  metricsCollectorSpec:
    source: {filter: {metricsFormat: ["accuracy=(\\d+)"]}}
)y",
                                  "exp.yaml", SweepFormat::kKatib);
  EXPECT_THAT(Text(bad.errors), HasSubstr("exp.yaml:54:39: spec.metricsCollectorSpec.source.filter."
                                          "metricsFormat: 'accuracy=(\\d+)' is not a filter of two "
                                          "groups"));
  // The File and TensorFlowEvent collectors: the path they read is followed.
  StudySpec file = Imported(std::string(kJob) + R"y(  metricsCollectorSpec:
    collector: {kind: File}
    source: {fileSystemPath: {path: /katib/mnist.json, kind: File, format: JSON}}
)y");
  EXPECT_EQ(file.trial.metrics_from, MetricsSource::kFile);
  EXPECT_EQ(file.trial.metrics_path, "/katib/mnist.json");
  ASSERT_EQ(file.metric_patterns.size(), 2u);  // JSON values may be strings: a pattern each
  StudySpec events = Imported(std::string(kJob) + R"y(  metricsCollectorSpec:
    collector: {kind: TensorFlowEvent}
    source: {fileSystemPath: {path: /logs/test, kind: Directory}}
)y");
  EXPECT_EQ(events.trial.metrics_from, MetricsSource::kTensorboard);
  EXPECT_EQ(events.trial.metrics_path, "/logs/test");
  ImportOutcome nopath =
      ImportSweep(std::string(kJob) + "  metricsCollectorSpec: {collector: {kind: File}}\n",
                  "exp.yaml", SweepFormat::kKatib);
  EXPECT_THAT(Text(nopath.errors), HasSubstr("the collector needs fileSystemPath.path"));
}

std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ImportKatibTest, WhatCannotBeCarriedOverIsAnErrorAtItsLine) {
  ImportOutcome type = ImportSweep(Replaced(kJob, "parameterType: discrete", "parameterType: set"),
                                   "exp.yaml", SweepFormat::kKatib);
  ASSERT_EQ(type.errors.size(), 1u) << Text(type.errors);
  EXPECT_EQ(type.errors[0].ToString(),
            "exp.yaml:25:22: spec.parameters.batch: parameterType 'set' is not a Katib parameter "
            "type (double, int, discrete, categorical)");
  EXPECT_TRUE(type.study_yaml.empty());

  ImportOutcome range =
      ImportSweep(Replaced(kJob, R"(min: "0.001", max: "0.1")", R"(min: "0.2", max: "0.1")"),
                  "exp.yaml", SweepFormat::kKatib);
  ASSERT_GE(range.errors.size(), 1u);
  EXPECT_EQ(range.errors[0].ToString(),
            "exp.yaml:20:22: spec.parameters.lr: double: min must be below max");
  // min == max is one value, as Katib's own hyperband example writes its resource: fixed.
  StudySpec one = testing::ImportedAs(
      Replaced(kJob, R"(min: "0.001", max: "0.1")", R"(min: "0.1", max: "0.1")"), "exp.yaml",
      SweepFormat::kKatib);
  EXPECT_EQ(testing::Param(one, "lr").type, ParamType::kFixed);

  ImportOutcome word =
      ImportSweep(Replaced(kJob, "${trialParameters.batchSize}", "${trialParameters.batch_size}"),
                  "exp.yaml", SweepFormat::kKatib);
  ASSERT_EQ(word.errors.size(), 1u) << Text(word.errors);
  EXPECT_EQ(word.errors[0].ToString(),
            "exp.yaml:50:21: spec.trialTemplate: ${trialParameters.batch_size} names no "
            "trialParameters entry");

  ImportOutcome kind = ImportSweep(Replaced(kJob, "kind: Experiment", "kind: Suggestion"),
                                   "exp.yaml", SweepFormat::kKatib);
  ASSERT_EQ(kind.errors.size(), 1u);
  EXPECT_EQ(kind.errors[0].ToString(),
            "exp.yaml:2:7: kind: 'Suggestion' is not a Katib Experiment (expected apiVersion: "
            "kubeflow.org/v1beta1, kind: Experiment)");

  ImportOutcome text =
      ImportSweep(Replaced(kJob, R"(max: "10")", R"(max: "ten")"), "exp.yaml", SweepFormat::kKatib);
  ASSERT_GE(text.errors.size(), 1u);
  EXPECT_EQ(text.errors[0].ToString(),
            "exp.yaml:23:38: spec.parameters.num-layers: int needs a number 'max'");

  ImportOutcome space = ImportSweep(Replaced(kJob, R"(      feasibleSpace: {list: [sgd, adam, "1"]}
)",
                                             ""),
                                    "exp.yaml", SweepFormat::kKatib);
  ASSERT_GE(space.errors.size(), 1u);
  EXPECT_THAT(space.errors[0].ToString(),
              HasSubstr("exp.yaml:27:7: spec.parameters.optimizer: categorical needs "
                        "feasibleSpace"));

  ImportOutcome algorithm =
      ImportSweep(Replaced(kJob, "bayesianoptimization", "enas"), "exp.yaml", SweepFormat::kKatib);
  ASSERT_EQ(algorithm.errors.size(), 1u);
  EXPECT_THAT(algorithm.errors[0].ToString(),
              HasSubstr("exp.yaml:13:20: spec.algorithm.algorithmName: 'enas' cannot be carried"));
}

TEST(ImportKatibTest, TheFormatIsNamedKatib) {
  EXPECT_EQ(*ParseSweepFormat("katib"), SweepFormat::kKatib);
  EXPECT_EQ(*ParseSweepFormat("optuna"), SweepFormat::kOptuna);
  EXPECT_THAT(ParseSweepFormat("ray").status().message(),
              HasSubstr("expected auto, wandb, nni, determined, katib or optuna"));
}

}  // namespace
}  // namespace hyperpack::study
