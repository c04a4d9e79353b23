// Early stopping through the runner, with real child processes: the /bin/sh learning curve of
// curve_script.h, which checkpoints the way hyperpack-trainer does unless told not to.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>

#include "curve_script.h"
#include "hyperpack/config_json.h"
#include "hyperpack/scheduler/runner.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using hyperpack::testing::ReadFile;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using ::testing::HasSubstr;

class EarlyStopTest : public hyperpack::testing::StudyRunFixture {
 protected:
  void SetUp() override { WriteFile(dir_ / "curve.sh", hyperpack::testing::kCurveScript, true); }

  // `warm`: the script reads its control socket at its rung (and checkpoints).
  std::string StudyYaml(const std::string& pruner, bool checkpoint, int max_trials,
                        const std::string& tuner = "random", bool warm = false) {
    return StrCat("name: s\nobjective: {metric: loss, direction: minimize}\n",
                  "search_space: {x: {type: float, low: 0, high: 1}}\n", "trial: {command: \"sh ",
                  dir_ / "curve.sh", " {x} ",
                  warm         ? "warm"
                  : checkpoint ? "yes"
                               : "no",
                  "\"}\n", "tuner: {algorithm: ", tuner, ", seed: 11}\n",
                  "budget: {max_trials: ", max_trials, ", max_parallel: 1}\n", "pruner: ", pruner,
                  "\n");
  }

  // Each trial's epochs in the order reported.
  std::map<int, std::vector<int>> Epochs() {
    auto db = Storage::Open(db_path_).value();
    int64_t id = db->FindStudy("s").value()->id;
    std::map<int, std::vector<int>> out;
    auto trials = db->ListTrials(id).value();
    for (const TrialRecord& t : trials) {
      auto points = db->TrialMetrics(id, t.number).value();
      for (const auto& p : points)
        if (p.name == "epoch") out[t.number].push_back(static_cast<int>(p.value));
    }
    return out;
  }

  std::vector<storage::EventRecord> Events() {
    auto db = Storage::Open(db_path_).value();
    return db->ListEvents(db->FindStudy("s").value()->id, 100000).value();
  }

  // (FIRST_EPOCH, STOP_AT) of each start the script logged, per trial.
  std::map<int, std::vector<std::pair<int, std::string>>> Starts() {
    std::istringstream in(ReadFile(dir_ / "starts"));
    std::map<int, std::vector<std::pair<int, std::string>>> out;
    int trial, first;
    std::string stop, agent;
    while (in >> trial >> first >> stop >> agent) out[trial].push_back({first, stop});
    return out;
  }

  static double X(const TrialRecord& t) { return *ValueAsNumber(t.params.at("x")); }
};

// Every report continues the curve: epochs 1, 2, ... once each, whatever pauses came between.
void ExpectCurvesContinue(const std::map<int, std::vector<int>>& epochs) {
  for (const auto& [trial, e] : epochs)
    for (size_t i = 0; i < e.size(); ++i)
      EXPECT_EQ(e[i], static_cast<int>(i) + 1) << "trial " << trial << " report " << i;
}

TEST_F(EarlyStopTest, AshaStopModeStopsTrialsOutsideTheTopThirdAtTheirRungWithTheReason) {
  auto spec = Spec(StudyYaml(
      "{algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, mode: stop}", false,
      9));
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 9u);
  int pruned = 0, completed = 0;
  for (const TrialRecord& t : trials) {
    if (t.state == TrialState::kPruned) {
      ++pruned;
      // Judged at a rung (1 or 3), its value the one it was judged on.
      EXPECT_THAT(t.error, HasSubstr("asha:")) << t.error;
      EXPECT_THAT(t.error, HasSubstr("only the top")) << t.error;
      ASSERT_TRUE(t.value.has_value());
      double rung = t.error.find("at rung 1 ") != std::string::npos ? 1 : 3;
      EXPECT_NEAR(*t.value, X(t) + 1 / rung, 1e-5) << t.error;
    } else {
      ASSERT_EQ(t.state, TrialState::kCompleted) << t.error;
      ++completed;
      EXPECT_NEAR(*t.value, X(t) + 1.0 / 9, 1e-5);
    }
  }
  EXPECT_GT(pruned, 0);
  EXPECT_GT(completed, 0);
  EXPECT_EQ(summary->pruned, pruned);
  // The first trial meets empty rungs and always continues; the best one seen so far at a rung
  // is never stopped there.
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  int pruning_events = 0;
  for (const auto& e : Events()) pruning_events += e.kind == "pruning";
  EXPECT_EQ(pruning_events, pruned);
  for (const auto& [trial, starts] : Starts()) EXPECT_EQ(starts.size(), 1u) << trial;
}

TEST_F(EarlyStopTest, PromoteModePausesAtRungsAndResumesFromTheCheckpoint) {
  auto spec = Spec(StudyYaml(
      "{algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, mode: promote}",
      true, 9, "gp"));
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 9u);  // a promotion runs under the trial's own number
  auto epochs = Epochs();
  ExpectCurvesContinue(epochs);
  auto starts = Starts();
  int completed = 0, resumed = 0;
  for (const TrialRecord& t : trials) {
    ASSERT_TRUE(t.state == TrialState::kCompleted || t.state == TrialState::kPruned)
        << t.number << " " << storage::TrialStateName(t.state);
    const auto& s = starts[t.number];
    // First run: to rung 1. Each promotion resumes after the last rung, to the next one.
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s[0], (std::pair<int, std::string>{1, "1"}));
    if (s.size() > 1) {
      ++resumed;
      EXPECT_EQ(s[1], (std::pair<int, std::string>{2, "3"}));
    }
    if (s.size() > 2) {
      EXPECT_EQ(s[2], (std::pair<int, std::string>{4, "none"}));
    }
    if (t.state == TrialState::kCompleted) {
      ++completed;
      EXPECT_EQ(epochs[t.number].size(), 9u);
      EXPECT_EQ(s.size(), 3u);
      EXPECT_NEAR(*t.value, X(t) + 1.0 / 9, 1e-5);
    } else {
      // Paused at a rung and never promoted: the budget ran out.
      EXPECT_THAT(t.error, HasSubstr("not promoted")) << t.error;
      int last = epochs[t.number].back();
      EXPECT_TRUE(last == 1 || last == 3) << last;
    }
  }
  EXPECT_GE(completed, 1);
  EXPECT_GE(resumed, 3);  // 9 trials at rung 1 promote 3 to rung 3
  std::map<std::string, int> kinds;
  for (const auto& e : Events()) kinds[e.kind]++;
  EXPECT_GE(kinds["promoted"], 3);
  EXPECT_EQ(kinds["promoted"], kinds["trial_resumed"]);
  EXPECT_GE(kinds["trial_paused"], kinds["promoted"]);
  // Told to go on at its rung, a script that exits there anyway is resumed: none in place.
  EXPECT_EQ(summary->promoted, kinds["promoted"]);
  EXPECT_EQ(summary->promoted_in_place, 0);
  EXPECT_EQ(kinds["cannot_pause"], 0);
}

// The same study with a command that reads its control socket: a trial promoted at the rung it
// has just reached goes on in the same process; only promotions of trials paused earlier restart
// one. Every promotion is one or the other, and every curve is whole.
TEST_F(EarlyStopTest, APromotedTrialThatReadsItsControlSocketGoesOnWithoutARestart) {
  auto spec = Spec(StudyYaml(
      "{algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, mode: promote}",
      true, 9, "gp", /*warm=*/true));
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  ExpectCurvesContinue(Epochs());
  std::map<std::string, int> kinds;
  for (const auto& e : Events()) kinds[e.kind]++;
  int restarts = 0;
  for (const auto& [trial, starts] : Starts()) restarts += static_cast<int>(starts.size()) - 1;
  EXPECT_EQ(kinds["promoted"], summary->promoted);
  EXPECT_EQ(kinds["trial_resumed"], restarts);
  EXPECT_GE(summary->promoted_in_place, 1);
  EXPECT_EQ(summary->promoted, summary->promoted_in_place + restarts);
  EXPECT_GE(summary->completed, 1);
}

TEST_F(EarlyStopTest, ACommandThatWritesNoCheckpointIsNeverPausedOnlyStopped) {
  auto spec = Spec(StudyYaml(
      "{algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, mode: promote}",
      false, 6));
  ASSERT_TRUE(Run(spec).ok());
  std::map<std::string, int> kinds;
  for (const auto& e : Events()) kinds[e.kind]++;
  EXPECT_EQ(kinds["trial_paused"], 0);
  EXPECT_EQ(kinds["promoted"], 0);
  EXPECT_EQ(kinds["cannot_pause"], 6);
  for (const auto& [trial, starts] : Starts()) EXPECT_EQ(starts.size(), 1u) << trial;
  for (const TrialRecord& t : Trials()) {
    EXPECT_TRUE(t.state == TrialState::kCompleted || t.state == TrialState::kPruned);
    if (t.state == TrialState::kPruned) {
      EXPECT_THAT(t.error, HasSubstr("cannot pause"));
    }
  }
  ExpectCurvesContinue(Epochs());
}

TEST_F(EarlyStopTest, MedianPrunerStopsCurvesBelowTheMedianOfCompletedTrials) {
  auto spec = Spec(StudyYaml("{algorithm: median, startup_trials: 2, warmup_steps: 2}", false, 8));
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  std::vector<double> completed;
  for (const TrialRecord& t : trials) {
    if (t.state == TrialState::kCompleted) {
      completed.push_back(X(t));
      continue;
    }
    ASSERT_EQ(t.state, TrialState::kPruned);
    EXPECT_THAT(t.error, HasSubstr("median:"));
    // Never before the warm-up (the value is the one it was judged on: x + 1/epoch), and only
    // once two trials had completed.
    double epoch = 1 / (*t.value - X(t));
    EXPECT_GE(epoch, 2 - 1e-3);
    EXPECT_LT(epoch, 9);
    EXPECT_GE(t.number, 2);
  }
  EXPECT_GE(completed.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  EXPECT_EQ(trials[1].state, TrialState::kCompleted);
}

TEST_F(EarlyStopTest, WhenTheBudgetIsSpentTheBestPausedTrialTrainsToTheEnd) {
  // Two trials: neither is ever in the top third of its rung, yet the better one completes.
  auto spec = Spec(StudyYaml("{algorithm: asha, max_resource: 9, mode: promote}", true, 2));
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  int better = X(trials[0]) < X(trials[1]) ? 0 : 1;
  EXPECT_EQ(trials[better].state, TrialState::kCompleted);
  EXPECT_EQ(trials[1 - better].state, TrialState::kPruned);
  EXPECT_EQ(Epochs()[better], (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_THAT(output_.str(), HasSubstr("trains to the end"));
}

TEST_F(EarlyStopTest, TheObjectivesStrategyRunsOverEverySegmentOfAPausedTrial) {
  // strategy: max over a falling curve is its first value, reported before the first pause.
  std::string yaml = StudyYaml("{algorithm: asha, max_resource: 9, mode: promote}", true, 2);
  yaml.replace(yaml.find("direction: minimize}"), 20, "direction: minimize, strategy: max}");
  ASSERT_TRUE(Run(Spec(yaml)).ok());
  for (const TrialRecord& t : Trials()) {
    ASSERT_TRUE(t.value.has_value());
    EXPECT_NEAR(*t.value, X(t) + 1, 1e-5) << storage::TrialStateName(t.state);
  }
}

TEST_F(EarlyStopTest, TheMeanOfTheLastReportsRunsOverEverySegmentOfAPausedTrial) {
  // strategy: last-9-avg: the mean of the last nine epochs a trial ran, pauses between them or not
  // (the curve is x + 1/epoch).
  std::string yaml = StudyYaml("{algorithm: asha, max_resource: 9, mode: promote}", true, 2);
  yaml.replace(yaml.find("direction: minimize}"), 20, "direction: minimize, strategy: last-9-avg}");
  ASSERT_TRUE(Run(Spec(yaml)).ok());
  const auto trials = Trials();
  const auto epochs = Epochs();
  ASSERT_EQ(trials.size(), 2u);
  bool spans_a_pause = false;
  for (size_t i = 0; i < trials.size(); ++i) {
    ASSERT_TRUE(trials[i].value.has_value());
    const std::vector<int>& ran = epochs.at(trials[i].number);
    double sum = 0;
    for (int e : ran) sum += 1.0 / e;
    EXPECT_NEAR(*trials[i].value, X(trials[i]) + sum / ran.size(), 1e-5)
        << storage::TrialStateName(trials[i].state);
    spans_a_pause = spans_a_pause || ran.size() == 9;
  }
  EXPECT_TRUE(spans_a_pause);  // the better one paused at epoch 1 and went on to 9
}

TEST_F(EarlyStopTest, ARunnerKilledWhileTrialsArePausedResumesThemFromTheirCheckpoints) {
  std::string yaml = StudyYaml(
      "{algorithm: asha, min_resource: 1, max_resource: 9, reduction_factor: 3, mode: promote}",
      true, 9);
  WriteFile(dir_ / "study.yaml", yaml);
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  WriteFile(dir_ / "block", "");
  // Trials 0-2 pause at rung 1, the best of them is promoted and pauses at rung 3, then trial 3
  // starts and blocks: the runner is killed with three trials paused.
  pid_t run = hyperpack::testing::StartInBackground(
      {HYPERPACK_CLI, "run", dir_ / "study.yaml", "--storage", db_path_}, dir_.path().string(),
      dir_ / "run.out");
  int fifo = open((dir_ / "fifo").c_str(), O_RDWR);
  char c = 0;
  ASSERT_EQ(read(fifo, &c, 1), 1);
  close(fifo);
  kill(run, SIGKILL);
  int status = 0;
  waitpid(run, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto before = Trials();
  ASSERT_EQ(before.size(), 4u);
  int paused = 0;
  for (int n = 0; n < 3; ++n) paused += before[n].state == TrialState::kPaused;
  EXPECT_EQ(paused, 3);
  EXPECT_EQ(before[3].state, TrialState::kRunning);
  auto epochs_before = Epochs();

  std::filesystem::remove(dir_ / "block");
  auto again = Run(Spec(yaml));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_THAT(output_.str(), HasSubstr("3 paused"));
  auto trials = Trials();
  // Trial 3 was interrupted and runs again (first) as a new number; the paused ones keep theirs.
  ASSERT_EQ(trials.size(), 10u);
  EXPECT_EQ(trials[3].state, TrialState::kInterrupted);
  EXPECT_EQ(trials[4].retry_of, 3);
  auto epochs = Epochs();
  ExpectCurvesContinue(epochs);
  for (int n = 0; n < 3; ++n) {
    // What was stored before the crash is still there, and the curve went on from it.
    ASSERT_LE(epochs_before[n].size(), epochs[n].size());
    EXPECT_TRUE(trials[n].state == TrialState::kCompleted ||
                trials[n].state == TrialState::kPruned);
  }
  int completed = 0;
  for (const TrialRecord& t : trials) completed += t.state == TrialState::kCompleted;
  EXPECT_GE(completed, 1);
  // A promoted trial resumed after the crash from its checkpoint, not from epoch 1.
  bool resumed_after_crash = false;
  for (const auto& [trial, s] : Starts())
    for (size_t i = 1; i < s.size(); ++i) resumed_after_crash |= trial < 3 && s[i].first > 1;
  EXPECT_TRUE(resumed_after_crash);
}

}  // namespace
}  // namespace hyperpack::scheduler
