// Metrics a trial writes to files (trial.metrics_from): TensorBoard event files under a folder, as
// a program that only logs to TensorBoard writes them, and lines appended to a file, as Katib's
// File collector reads them; end to end through `hyperpack run`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/tensorboard/events.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

namespace tb = hyperpack::tensorboard;
using hyperpack::testing::StudyYaml;
using hyperpack::testing::WriteFile;
using storage::TrialState;

class MetricFilesTest : public hyperpack::testing::StudyRunFixture {
 protected:
  // An event file as a SummaryWriter leaves it: the version, then loss (and epoch) at steps 1..3,
  // loss = `base` + step. Written to the test's folder for the trial to copy.
  std::string EventFile(double base) {
    std::string bytes = tb::FrameRecord(tb::EncodeFileVersionEvent(1e9));
    for (int step = 1; step <= 3; ++step) {
      const tb::TaggedValue values[] = {{"loss", base + step}, {"epoch", double(step)}};
      bytes += tb::FrameRecord(tb::EncodeScalarsEvent(1e9 + step, step, values));
    }
    const std::string path = dir_ / ("events-" + std::to_string(static_cast<int>(base)) + ".bin");
    WriteFile(path, bytes);
    return path;
  }

  double MetricAt(int trial, const std::string& name, int64_t step) {
    for (const storage::MetricPoint& p : Metrics(trial))
      if (p.name == name && p.step == step) return p.value;
    ADD_FAILURE() << "no " << name << " at step " << step;
    return 0;
  }
};

// The trial writes its event file in two pieces, the first ending inside a record, and prints no
// metric: its value and curve come from the file.
TEST_F(MetricFilesTest, TensorboardEventFilesAreTheTrialsMetrics) {
  const std::string events = EventFile(10);
  WriteFile(dir_ / "t.sh",
            "mkdir -p \"$1\"\nf=\"$1/events.out.tfevents.1.host\"\n"
            "head -c 100 " +
                events + " > \"$f\"\ntail -c +101 " + events +
                " >> \"$f\"\necho 'loss=999 (printed, not read)'\n");
  study::StudySpec spec =
      Spec(StudyYaml("s").Space("{x: [1, 2]}").TrialBlock(R"("sh t.sh {trial_dir}/tb")").str() +
           R"(  metrics_from: tensorboard
  metrics_path: "{trial_dir}/tb"
budget: {max_trials: 2}
)");
  spec.trial.workdir = dir_.path().string();
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
    EXPECT_EQ(t.value, 13.0);  // the last loss, step 3
    EXPECT_EQ(MetricAt(t.number, "loss", 1), 11.0);
  }
}

// A folder shared by the trials: what an earlier trial wrote there is not a later one's.
TEST_F(MetricFilesTest, AnEarlierTrialsEventFilesAreNotALaterOnes) {
  const std::string events = EventFile(20);
  WriteFile(dir_ / "t.sh", "mkdir -p logs\n[ \"$1\" = 1 ] && cp " + events +
                               " logs/events.out.tfevents.1.host\nexit 0\n");
  study::StudySpec spec = Spec(R"(name: s
objective: {metric: loss, direction: minimize}
search_space: {x: [1, 2]}
tuner: {algorithm: sobol}
trial:
  command: "sh t.sh {x}"
  metrics_from: tensorboard
  metrics_path: logs
budget: {max_trials: 2, max_failed: 2}
)");
  spec.trial.workdir = dir_.path().string();
  (void)Run(spec);
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  int completed = 0, failed = 0;
  for (const auto& t : trials) {
    completed += t.state == TrialState::kCompleted;
    failed += t.state == TrialState::kFailed;
  }
  EXPECT_EQ(completed, 1);  // the one that wrote the file
  EXPECT_EQ(failed, 1);     // the other: it never reported, whatever the order
}

// Katib's File collector: JSON lines and name=value lines appended to a file the trial names.
TEST_F(MetricFilesTest, LinesAppendedToAMetricsFileAreTheTrialsMetrics) {
  WriteFile(dir_ / "t.sh",
            R"(for e in 1 2 3; do echo "{\"epoch\": $e, \"accuracy\": 0.$e}" >> "$1"; done
printf 'accuracy=0.95' >> "$1"
)");
  study::StudySpec spec = Spec(StudyYaml("s")
                                   .Objective("accuracy", "maximize")
                                   .Space("{x: [1, 2]}")
                                   .TrialBlock(R"("sh t.sh {trial_dir}/metrics.log")")
                                   .str() +
                               R"(  metrics_from: file
  metrics_path: "{trial_dir}/metrics.log"
budget: {max_trials: 1}
)");
  spec.trial.workdir = dir_.path().string();
  ASSERT_TRUE(Run(spec).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  // The last line has no newline: read once the trial has ended.
  EXPECT_EQ(trials[0].value, 0.95);
  EXPECT_EQ(MetricAt(0, "accuracy", 2), 0.2);
}

}  // namespace
}  // namespace hyperpack::scheduler
