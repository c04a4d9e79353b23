// Metric patterns end to end: `hyperpack run` of a study whose trial prints its metrics its own way
// (as PyTorch's MNIST example does) and whose objective comes only from objective.regex.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/import.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using hyperpack::testing::WriteFile;
using storage::TrialState;

class MetricPatternRunTest : public hyperpack::testing::StudyRunFixture {
 protected:
  // A script in the test's directory, run as `sh SCRIPT`.
  std::string Script(const std::string& body) {
    std::string path = dir_ / "t.sh";
    WriteFile(path, "#!/bin/sh\n" + body, true);
    return path;
  }

  // The study: accuracy from objective.regex, test_loss and epoch from trial.metrics.
  study::StudySpec MnistSpec(const std::string& script, const std::string& more_metrics = "") {
    return Spec(R"yaml(
name: s
objective: {metric: accuracy, direction: maximize, regex: 'Accuracy: (\d+)/10000'}
search_space: {x: {type: float, low: 0, high: 1}}
trial:
  command: sh )yaml" +
                script + R"yaml(
  metrics:
    test_loss: 'Average loss: ([0-9.eE+-]+)'
    epoch: 'Train Epoch: (\d+)'
)yaml" + more_metrics +
                R"yaml(
budget: {max_trials: 1}
)yaml");
  }

  double MetricValue(const std::string& name) {
    for (const storage::MetricPoint& p : Metrics(0))
      if (p.name == name) return p.value;
    ADD_FAILURE() << "no metric " << name;
    return 0;
  }
};

TEST_F(MetricPatternRunTest, AnObjectiveReadOnlyByItsRegexIsTheTrialsValue) {
  const std::string script = Script(R"(
printf 'Train Epoch: 1 [0/60000 (0%%)]\tLoss: 2.300000\n'
echo 'Test set: Average loss: 0.05, Accuracy: 9898/10000 (99%)'
)");
  ASSERT_TRUE(Run(MnistSpec(script)).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  EXPECT_EQ(trials[0].value, 9898.0);
  EXPECT_EQ(MetricValue("test_loss"), 0.05);
}

// A pattern that backtracks without end, and a hostile 60 KiB line it meets: that pattern gives up
// on the line (Boost's bounded search), the run goes on, and the objective is still read.
TEST_F(MetricPatternRunTest, ABadlyBacktrackingPatternOnAHostileLineDoesNotStopTheRun) {
  const std::string script = Script(R"(
head -c 61440 /dev/zero | tr '\0' a; echo
echo 'Test set: Average loss: 0.05, Accuracy: 9898/10000 (99%)'
)");
  ASSERT_TRUE(Run(MnistSpec(script, "    slow: '(?:a+)+b(\\d)'")).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  EXPECT_EQ(trials[0].value, 9898.0);
}

// A Katib Experiment of its own, shaped like Katib's random.yaml, whose trial prints as Katib's
// pytorch-mnist/mnist.py does: through Python's logging, so on stderr, `name=value` inside a longer
// line, and the final metrics as {metricName: ..., metricValue: ...}.
class KatibRunTest : public MetricPatternRunTest {
 protected:
  study::StudySpec Katib(const std::string& script, const std::string& collector) {
    const std::string path = dir_ / "random.yaml";
    WriteFile(path, R"(apiVersion: kubeflow.org/v1beta1
kind: Experiment
metadata: {namespace: kubeflow, name: s}
spec:
  objective: {type: minimize, goal: 0.001, objectiveMetricName: loss}
  algorithm: {algorithmName: random}
  parallelTrialCount: 1
  maxTrialCount: 2
  parameters:
    - {name: lr, parameterType: double, feasibleSpace: {min: "0.01", max: "0.05"}}
  trialTemplate:
    primaryContainerName: training-container
    trialParameters: [{name: learningRate, reference: lr}]
    trialSpec:
      apiVersion: batch/v1
      kind: Job
      spec:
        template:
          spec:
            containers:
              - name: training-container
                command: [sh, )" +
                        script + R"(, "--lr=${trialParameters.learningRate}"]
)" + collector);
    study::ParseOutcome parsed = study::LoadAnyStudyFile(path, std::nullopt);
    EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
    return parsed.spec ? *parsed.spec : study::StudySpec();
  }

  std::string MnistLikeScript() {
    return Script(R"(
log() { printf '2026-11-26T10:00:00Z INFO     %s\n' "$1" >&2; }
log "Train Epoch: 1 [0/60000 (0%)]	loss=2.3010"
log "Train Epoch: 1 [640/60000 (1%)]	train_loss=0.0100"
log "Train Epoch: 1 [1280/60000 (2%)]	loss=0.5951"
log "{metricName: accuracy, metricValue: 0.8123};{metricName: loss, metricValue: 0.4567}"
)");
  }
};

TEST_F(KatibRunTest, TheStdOutCollectorReadsNameValueAnywhereInWhatLoggingWritesToStderr) {
  ASSERT_TRUE(Run(Katib(MnistLikeScript(), "")).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
    EXPECT_EQ(t.value, 0.5951);  // Katib's default strategy: the best of loss=... (not train_loss)
  }
}

TEST_F(KatibRunTest, AMetricsFormatFilterReadsItsOwnShape) {
  ASSERT_TRUE(Run(Katib(MnistLikeScript(), R"(  metricsCollectorSpec:
    collector: {kind: StdOut}
    source:
      filter:
        metricsFormat: ["{metricName: ([\\w|-]+), metricValue: ((-?\\d+)(\\.\\d+)?)}"]
)"))
                  .ok())
      << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  EXPECT_EQ(trials[0].value, 0.4567);
}

// What the collector's streams change: the same program, its metrics read from stdout alone,
// reports nothing.
TEST_F(KatibRunTest, FromStdoutAloneTheLoggedMetricsAreNotSeen) {
  study::StudySpec spec = Katib(MnistLikeScript(), "");
  spec.trial.metrics_from = study::MetricsSource::kStdout;
  spec.budget.max_failed = 1;
  (void)Run(spec);
  auto trials = Trials();
  ASSERT_FALSE(trials.empty());
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, ::testing::HasSubstr("never reported"));
}

}  // namespace
}  // namespace hyperpack::scheduler
