// Metric patterns end to end: `hyperpack run` of a study whose trial prints its metrics its own way
// (as PyTorch's MNIST example does) and whose objective comes only from objective.regex.
#include <gtest/gtest.h>

#include <string>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
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

}  // namespace
}  // namespace hyperpack::scheduler
