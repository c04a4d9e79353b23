// The runner with real child processes: /bin/sh scripts written for each test.
#include "hyperpack/scheduler/runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio.hpp>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "fake_warm_trainer.h"
#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/scheduler/executor.h"
#include "hyperpack/scheduler/fence.h"
#include "hyperpack/scheduler/local_node.h"
#include "hyperpack/scheduler/process.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/warm.h"
#include "study_run_fixture.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using hyperpack::testing::ExitsWithin;
using hyperpack::testing::ReadFile;
using hyperpack::testing::ShellBarrier;
using hyperpack::testing::StudyYaml;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using ::testing::HasSubstr;

class RunnerTest : public hyperpack::testing::StudyRunFixture {
 protected:
  // A script in the test's directory, run as `sh SCRIPT ARGS`.
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = dir_ / name;
    WriteFile(path, "#!/bin/sh\n" + body, true);
    return path;
  }

  static double X(const TrialRecord& t) { return *ValueAsNumber(t.params.at("x")); }
};

TEST_F(RunnerTest, CompletedTrialsRecordTheirLastObjectiveValueAndEveryMetric) {
  // loss ends at (x - 0.3)^2 after three steps; the trial also echoes what it was given.
  std::string script = Script("train.sh", R"(
x="$1"
printf '%s' "$HYPERPACK_PARAMS" > "$HYPERPACK_TRIAL_DIR/env_params"
cat "$HYPERPACK_PARAMS_FILE" >&2
awk -v x="$x" 'BEGIN { for (s = 1; s <= 3; s++)
  printf "{\"step\": %d, \"loss\": %.17g, \"trial\": %s, \"hp_x\": %s}\n",
         s, (x - 0.3)^2 + (3 - s), ENVIRON["HYPERPACK_TRIAL_ID"], ENVIRON["HP_X"] }'
echo "some ordinary output"
)");
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: -1, high: 1}
  n: {type: int, low: 1, high: 4}
trial: {command: "sh )" +
                   script + R"( {x}"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 6, max_parallel: 2}
)");
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->exit_code, 0);
  EXPECT_EQ(summary->completed, 6);
  EXPECT_EQ(summary->stop_reason, "budget reached");

  auto trials = Trials();
  ASSERT_EQ(trials.size(), 6u);
  std::optional<double> best;
  for (const TrialRecord& t : trials) {
    EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
    double x = X(t);
    ASSERT_TRUE(t.value);
    EXPECT_NEAR(*t.value, (x - 0.3) * (x - 0.3), 1e-12);
    EXPECT_EQ(t.exit_status, 0);
    EXPECT_EQ(t.host, HostName());
    if (!best || *t.value < *best) best = t.value;
    // Every metric, at its step; the trial saw its own number and parameter.
    auto m = Metrics(t.number);
    EXPECT_EQ(m.size(), 9u);
    for (const auto& p : m) {
      if (p.name == "trial") {
        EXPECT_EQ(p.value, t.number);
      }
      if (p.name == "hp_x") {
        EXPECT_EQ(p.value, x);
      }
    }
    // The parameters reached it through the environment and the file, as stored, in the space's
    // order.
    std::string trial_dir = std::filesystem::path(t.log_path).parent_path().string();
    const std::string handed = ConfigToJson(t.params, &spec.space);
    EXPECT_EQ(ReadFile(trial_dir + "/env_params"), handed);
    EXPECT_EQ(handed.find("\"x\""), 1u);
    std::string log = ReadFile(t.log_path);
    EXPECT_THAT(log, HasSubstr(handed));
    EXPECT_THAT(log, HasSubstr("some ordinary output"));
  }
  EXPECT_EQ(summary->best_value, best);
  // Sobol proposals are distinct.
  for (size_t i = 0; i < trials.size(); ++i)
    for (size_t j = i + 1; j < trials.size(); ++j) EXPECT_NE(trials[i].params, trials[j].params);
}

// Nothing to tune (Determined's single searcher, a baseline): the command runs once, as it is,
// whatever the tuner, and the study ends with its space exhausted.
TEST_F(RunnerTest, AnEmptySearchSpaceRunsTheCommandOnce) {
  for (const char* tuner : {"gp", "random", "sobol"}) {
    auto spec = Spec(std::string(R"(
name: e-)") + tuner + R"(
objective: {metric: loss, direction: minimize}
search_space: {}
tuner: {algorithm: )" +
                     tuner + R"(}
trial: {command: "echo loss=2"}
budget: {max_trials: 3, max_parallel: 2}
)");
    ASSERT_EQ(spec.space.size(), 0u);
    auto summary = Run(spec);
    ASSERT_TRUE(summary.ok()) << summary.status().message();
    auto trials = Trials(std::string("e-") + tuner);
    ASSERT_EQ(trials.size(), 1u) << tuner;
    EXPECT_EQ(trials[0].value, 2.0);
    EXPECT_TRUE(trials[0].params.empty());
    EXPECT_THAT(output_.str(), ::testing::HasSubstr("search space exhausted"));
  }
}

// Values that are lists or mappings (a Determined constant list, an NNI choice of mappings) reach
// the program as such in HYPERPACK_PARAMS_FILE, and a resumed study reads them back.
TEST_F(RunnerTest, StructuredValuesReachTheProgramDecoded) {
  std::string program = Script("t.py", R"(import json, os
p = json.load(open(os.environ["HYPERPACK_PARAMS_FILE"]))
assert p["files"] == ["a.yml", "b.yml"], p
combo = p["combo"]
print(json.dumps({"loss": combo["x"] if isinstance(combo, dict) else sum(combo)}))
)");
  const std::string yaml = R"(
name: s
objective: {metric: loss, direction: minimize}
search_space:
  files: {type: fixed, value: [a.yml, b.yml]}
  combo: [[1, 2], {x: 3, y: [4]}]
tuner: {algorithm: random}
trial: {command: "python3 )" +
                           program + R"("}
budget: {max_trials: 2}
)";
  ASSERT_TRUE(Run(Spec(yaml)).ok()) << output_.str();
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  std::set<double> values;
  for (const TrialRecord& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    values.insert(t.value.value_or(-1));
  }
  EXPECT_EQ(values, (std::set<double>{3.0}));  // 1 + 2, and x: 3
  // The stored parameters read back as the space's values: the study resumes.
  ASSERT_TRUE(Run(Spec(yaml)).ok()) << output_.str();
}

TEST_F(RunnerTest, NeverRunsMoreTrialsAtOnceThanMaxParallel) {
  std::string script = Script("t.sh", "sleep 0.2\necho '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() +
                   R"(budget: {max_trials: 7, max_parallel: 3}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 7u);
  int most = 0;
  for (const TrialRecord& t : trials) {
    // How many trials were running at the moment t started (t included)?
    int overlap = 0;
    for (const TrialRecord& u : trials)
      overlap += *u.started <= *t.started && *t.started < *u.ended;
    most = std::max(most, overlap);
  }
  EXPECT_LE(most, 3);
  EXPECT_GE(most, 2);
}

TEST_F(RunnerTest, NonZeroExitFailsTheTrialAndKeepsTheTailOfStderr) {
  std::string script = Script("t.sh", "echo 'Traceback: something broke' >&2\nexit 1\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 2}
)");
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->failed, 2);
  for (const TrialRecord& t : Trials()) {
    EXPECT_EQ(t.state, TrialState::kFailed);
    EXPECT_EQ(t.exit_status, 1);
    EXPECT_THAT(t.error, HasSubstr("something broke"));
    EXPECT_FALSE(t.value);
  }
}

TEST_F(RunnerTest, ExitCodeThreeMarksTheConfigurationInfeasible) {
  std::string script = Script("t.sh", "echo 'CUDA out of memory' >&2\nexit 3\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
)");
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->infeasible, 1);
  auto trials = Trials();
  EXPECT_EQ(trials[0].state, TrialState::kInfeasible);
  EXPECT_THAT(trials[0].error, HasSubstr("out of memory"));
}

TEST_F(RunnerTest, ExitZeroWithoutTheObjectiveIsAFailureThatSaysWhatWasMissing) {
  std::string script = Script("t.sh", "echo '{\"accuracy\": 0.9}'\n");
  auto spec = Spec(StudyYaml("s").Objective("val_loss").Command("sh " + script).str() +
                   R"(budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, HasSubstr("never reported 'val_loss'"));
}

TEST_F(RunnerTest, ATrialKilledByASignalRecordsTheSignal) {
  auto spec = Spec(StudyYaml("s").Command("kill -9 $$").str() + R"(budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_EQ(trials[0].exit_status, 128 + 9);
  EXPECT_THAT(trials[0].error, HasSubstr("signal 9"));
}

TEST_F(RunnerTest, ATimeoutKillsTheTrialsWholeProcessGroup) {
  // The trial leaves a background process behind; the timeout must take it too.
  std::string script = Script("t.sh", R"(
sleep 60 &
echo $! > "$HYPERPACK_TRIAL_DIR/background.pid"
echo '{"loss": 5}'
sleep 60
)");
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                   script + R"(", timeout: 0.5s}
budget: {max_trials: 1}
)");
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kTimeout);
  EXPECT_THAT(trials[0].error, HasSubstr("timeout"));
  EXPECT_EQ(trials[0].value, 5.0);  // what it reported before it was killed
  EXPECT_LT(*trials[0].ended - *trials[0].started, 30.0);
  std::string dir = std::filesystem::path(trials[0].log_path).parent_path().string();
  pid_t bg = std::stoi(ReadFile(dir + "/background.pid"));
  // Gone, or a zombie waiting for its new parent to reap it.
  std::string stat = ReadFile("/proc/" + std::to_string(bg) + "/stat");
  if (!stat.empty()) {
    EXPECT_THAT(stat, HasSubstr(") Z")) << stat;
  }
}

// A study of one trial that runs `script`, its value the loss it reports by `strategy`.
std::string OneTrialStudy(const std::string& strategy, const std::string& script) {
  return StrCat("name: s\nobjective: {metric: loss, direction: minimize, strategy: ", strategy,
                "}\nsearch_space: {x: {type: float, low: 0, high: 1}}\ntrial: {command: \"sh ",
                script, "\"}\nbudget: {max_trials: 1}\n");
}

TEST_F(RunnerTest, KatibStyleLinesAndTheMinStrategy) {
  std::string script = Script("t.sh", R"(
echo "Epoch 1: loss=3.0 acc=0.1"
echo "epoch=2 loss=1.0"
echo "loss=2.0"
)");
  auto spec = Spec(OneTrialStudy("min", script));
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  EXPECT_EQ(trials[0].value, 1.0);
  auto m = Metrics(0);
  // loss, acc, loss and the line's epoch (kept for a pruner's replay), then loss.
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[2].step, 2);  // epoch=2 on its line
  EXPECT_EQ(m[3].name, "epoch");
  EXPECT_EQ(m[3].value, 2.0);
}

TEST_F(RunnerTest, TheLastNAvgStrategyIsTheMeanOfTheLastReports) {
  // As Ray Tune's last-N-avg: the mean of the last three reports; a NaN one is not a report.
  std::string script = Script("t.sh", R"(
echo "loss=9.0"
echo "loss=1.0"
echo "loss=nan"
echo "loss=2.0"
echo "loss=6.0"
)");
  auto spec = Spec(OneTrialStudy("last-3-avg", script));
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  ASSERT_TRUE(trials[0].value.has_value());
  EXPECT_DOUBLE_EQ(*trials[0].value, 3.0);
}

TEST_F(RunnerTest, StopsLaunchingAfterMaxFailedAndExitsWithOne) {
  std::string script = Script("t.sh", "exit 1\n");
  auto spec =
      Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 10, max_failed: 3}
)");
  auto summary = Run(spec);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->exit_code, 1);
  EXPECT_EQ(summary->stop_reason, "too many failed trials");
  EXPECT_EQ(Trials().size(), 3u);
}

TEST_F(RunnerTest, AMissingWorkdirFailsTheTrialWithTheReason) {
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo hi", workdir: does/not/exist}
budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, HasSubstr("cannot enter trial.workdir"));
}

TEST_F(RunnerTest, TheCheckpointDirectoryExistsWhenTheTrialsCommandStarts) {
  // Saves its checkpoint without creating the folder first, as training scripts do.
  std::string script = Script("t.sh", R"(
echo weights > "$HYPERPACK_CHECKPOINT_DIR/model.pt" || exit 1
echo '{"loss": 1}'
)");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted) << trials[0].error;
  std::string dir = std::filesystem::path(trials[0].log_path).parent_path().string();
  EXPECT_EQ(ReadFile(dir + "/checkpoint/model.pt"), "weights\n");
}

TEST_F(RunnerTest, ACheckpointDirectoryThatCannotBeCreatedFailsTheTrialNamingThePath) {
  // A file where the first trial's checkpoint directory would go.
  std::filesystem::path blocked = dir_.path() / "hyperpack_logs/s/trial-0000/checkpoint";
  std::filesystem::create_directories(blocked.parent_path());
  WriteFile(blocked.string(), "not a directory");
  std::string ran = dir_ / "ran";
  std::string script = Script("t.sh", "touch " + ran + "\necho '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error,
              HasSubstr("cannot create the checkpoint directory " + blocked.string() + ": "));
  EXPECT_FALSE(std::filesystem::exists(ran)) << "the trial's command ran";
}

TEST_F(RunnerTest, RunningAgainContinuesTheStudyWithNewConfigurations) {
  std::string script = Script("t.sh", "echo \"{\\\"loss\\\": $1}\"\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script + " {x}").str() +
                   R"(tuner: {algorithm: random, seed: 11}
budget: {max_trials: 3}
)");
  ASSERT_TRUE(Run(spec).ok());
  auto first = Trials();
  ASSERT_EQ(first.size(), 3u);
  RunOptions more;
  more.max_trials = 5;
  auto summary = Run(spec, more);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  auto all = Trials();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(all[i].params, first[i].params);
    EXPECT_EQ(all[i].value, first[i].value);
  }
  for (size_t i = 3; i < 5; ++i)
    for (size_t j = 0; j < 3; ++j) EXPECT_NE(all[i].params, all[j].params);
  // A third run with the budget spent starts nothing.
  ASSERT_TRUE(Run(spec, more).ok());
  EXPECT_EQ(Trials().size(), 5u);
}

TEST_F(RunnerTest, ATrialLeftRunningByADeadRunnerIsInterruptedAndRunAgain) {
  std::string script = Script("t.sh", "echo \"{\\\"loss\\\": $1}\"\n");
  auto spec =
      Spec(StudyYaml("s").Command("sh " + script + " {x}").str() + R"(budget: {max_trials: 2}
)");
  ASSERT_TRUE(Run(spec).ok());
  // As if a runner had died with trial 2 running.
  {
    auto db = Storage::Open(db_path_).value();
    auto study = db->FindStudy("s").value();
    TrialRecord t;
    t.study_id = study->id;
    t.number = 2;
    t.state = TrialState::kRunning;
    t.params = {{"x", 0.125}};
    t.started = WallNow();
    ASSERT_TRUE(db->InsertTrial(t).ok());
  }
  RunOptions more;
  more.max_trials = 4;
  ASSERT_TRUE(Run(spec, more).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[2].state, TrialState::kInterrupted);
  const TrialRecord& rerun = trials[3];
  EXPECT_EQ(rerun.retry_of, 2);
  EXPECT_EQ(rerun.attempt, 2);
  EXPECT_EQ(X(rerun), 0.125);
  EXPECT_EQ(rerun.state, TrialState::kCompleted);
  EXPECT_EQ(rerun.value, 0.125);
  int finished = 0;
  for (const TrialRecord& t : trials) finished += storage::IsFinished(t.state);
  EXPECT_EQ(finished, 4);
}

// The rerun of a trial whose runner died waits for what the earlier attempt still runs (here a
// process that left its group, which no fence kills), and runs once it has ended: never both.
TEST_F(RunnerTest, ARerunWaitsForWhatItsEarlierAttemptStillRunsAndSaysSo) {
  const std::string order = dir_ / "order";
  std::string script = Script("t.sh", "[ \"$HYPERPACK_TRIAL_ATTEMPT\" = 2 ] && echo rerun >> " +
                                          order + "\necho \"{\\\"loss\\\": $1}\"\n");
  auto spec =
      Spec(StudyYaml("s").Command("sh " + script + " {x}").str() + R"(budget: {max_trials: 2}
)");
  ASSERT_TRUE(Run(spec).ok());
  const std::filesystem::path root =
      std::filesystem::path(Trials()[0].log_path).parent_path().parent_path();
  {
    auto db = Storage::Open(db_path_).value();
    TrialRecord t;
    t.study_id = db->FindStudy("s").value()->id;
    t.number = 2;
    t.state = TrialState::kRunning;
    t.params = {{"x", 0.125}};
    t.started = WallNow();
    ASSERT_TRUE(db->InsertTrial(t).ok());
  }
  // What the dead runner's attempt left: it holds trial 2's lock until the rerun (trial 3) has
  // said that it waits (or 10 s have passed, should it never say so).
  std::filesystem::create_directories(root / "trial-0002");
  SpawnRequest left;
  left.command = "i=0; until grep -q 'still runs' " + (root / "trial-0003/output.log").string() +
                 " 2>/dev/null || [ $i -ge 200 ]; do sleep 0.05; i=$((i + 1)); done; " +
                 "echo holder-end >> " + order;
  left.env = CurrentEnvironment();
  left.lock_path = root / "trial-0002/rank-0.lock";
  auto holder = Spawn(left);
  ASSERT_TRUE(holder.ok()) << holder.status().message();

  RunOptions more;
  more.max_trials = 4;
  ASSERT_TRUE(Run(spec, more).ok());
  int status = 0;
  ASSERT_EQ(waitpid(holder->pid, &status, 0), holder->pid);
  for (int fd : {holder->stdout_fd, holder->stderr_fd}) close(fd);
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 5u);
  EXPECT_EQ(trials[3].retry_of, 2);
  EXPECT_EQ(trials[3].state, TrialState::kCompleted);
  EXPECT_THAT(ReadFile(trials[3].log_path),
              HasSubstr("an earlier attempt of this trial still runs (it holds " +
                        (root / "trial-0002/rank-0.lock").string()));
  EXPECT_EQ(ReadFile(order), "holder-end\nrerun\n");
}

TEST_F(RunnerTest, RefusesToResumeWithADifferentSearchSpaceAndChangesNothing) {
  std::string script = Script("t.sh", "echo '{\"loss\": 1}'\n");
  std::string common = R"(
name: s
objective: {metric: loss, direction: minimize}
trial: {command: "sh )" +
                       script + R"("}
budget: {max_trials: 1}
)";
  ASSERT_TRUE(Run(Spec(common + "search_space: {x: {type: float, low: 0, high: 1}}\n")).ok());
  std::string before = ReadFile(db_path_);
  auto again = Run(Spec(common + "search_space: {x: {type: float, low: 0, high: 2}}\n"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("different search space"));
  EXPECT_EQ(Trials().size(), 1u);
}

TEST_F(RunnerTest, RefusesAStudyThatALiveRunnerHolds) {
  std::string script = Script("t.sh", "echo '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
)");
  ASSERT_TRUE(Run(spec).ok());
  int hold[2];
  ASSERT_EQ(pipe(hold), 0);
  pid_t other = fork();
  if (other == 0) {
    char c;
    close(hold[1]);
    (void)!read(hold[0], &c, 1);  // lives until the test closes the pipe
    _exit(0);
  }
  close(hold[0]);
  {
    auto db = Storage::Open(db_path_).value();
    ASSERT_TRUE(db->SetRunner(db->FindStudy("s").value()->id, other, HostName()).ok());
  }
  RunOptions more;
  more.max_trials = 2;
  auto again = Run(spec, more);
  close(hold[1]);
  waitpid(other, nullptr, 0);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.status().message(), HasSubstr("already running"));
  EXPECT_EQ(Trials().size(), 1u);
  // Once that runner is gone the study can be resumed.
  ASSERT_TRUE(Run(spec, more).ok());
  EXPECT_EQ(Trials().size(), 2u);
}

TEST_F(RunnerTest, WarmStartSeedsTheModelWithAnotherStudysTrials) {
  std::string script =
      Script("t.sh", R"(awk -v x="$1" 'BEGIN { printf "{\"loss\": %.17g}\n", (x - 0.3)^2 }')");
  auto study =
      [&](const std::string& name, const std::string& tuner, int trials) {
        return Spec(R"(
name: )" + name + R"(
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )" +
                    script + R"( {x}"}
tuner: )" + tuner + R"(
budget: {max_trials: )" +
                    std::to_string(trials) + R"(}
)");
      };
  ASSERT_TRUE(Run(study("s", "{algorithm: sobol, seed: 1}", 8)).ok());
  double before = 1e9;
  for (const TrialRecord& t : Trials("s")) before = std::min(before, *t.value);
  output_.str("");
  auto summary = Run(study("b", "{algorithm: gp, seed: 1, warm_start: s}", 2));
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_THAT(output_.str(), HasSubstr("warm start from 8 trials of 's'"));
  // With eight trials to learn from, the model's first proposals already beat all of them;
  // without them the first would be a Sobol point.
  auto trials = Trials("b");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_LT(std::min(*trials[0].value, *trials[1].value), before);
}

TEST_F(RunnerTest, WarmStartFromAStudyThatIsNotThereIsAnError) {
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": 1}}'"}
tuner: {warm_start: nothing}
)");
  auto r = Run(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("no study named 'nothing'"));
  // Nothing was stored for the study that could not start.
  auto db = Storage::Open(db_path_).value();
  EXPECT_FALSE(db->FindStudy("s").value().has_value());
}

// A trial script that records what each rank was given, then reports from rank 0.
constexpr char kRankScript[] = R"(
d="$HYPERPACK_TRIAL_DIR"
echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $CUDA_VISIBLE_DEVICES" > "$d/rank-$RANK.env"
echo "$HYPERPACK_CHECKPOINT_DIR ${HYPERPACK_RESUME:-0}" > "$d/checkpoint.env"
sleep 0.2
if [ "$RANK" = 0 ]; then echo '{"loss": 1}'; fi
)";

TEST_F(RunnerTest, GpuTrialsRunAsGangsWithTheirOwnDevicesAndTorchrunVariables) {
  std::string script = Script("ranks.sh", kRankScript);
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space:
  g: {type: categorical, values: [1, 2, 3]}
  x: {type: float, low: 0, high: 1}
trial: {command: "sh )" +
                   script + R"("}
tuner: {algorithm: random, seed: 4}
budget: {max_trials: 8, max_parallel: 4}
resources: {gpus: "{g}"}
)");
  RunOptions o;
  o.node = FakeGpuNode(4);
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->completed, 8);
  auto trials = Trials();
  struct Use {
    double start, end;
    std::set<std::string> devices;
  };
  std::vector<Use> uses;
  for (const TrialRecord& t : trials) {
    int g = static_cast<int>(std::get<int64_t>(t.params.at("g")));
    std::string dir = std::filesystem::path(t.log_path).parent_path().string();
    std::set<std::string> devices, ports;
    for (int r = 0; r < g; ++r) {
      std::istringstream env(ReadFile(dir + "/rank-" + std::to_string(r) + ".env"));
      int rank, world, local, local_world;
      std::string addr, port, device;
      env >> rank >> world >> local >> local_world >> addr >> port >> device;
      EXPECT_EQ(rank, r);
      EXPECT_EQ(world, g);
      EXPECT_EQ(local, r);
      EXPECT_EQ(local_world, g);
      EXPECT_EQ(addr, "127.0.0.1");
      EXPECT_EQ(device.find(','), std::string::npos) << "one GPU per rank: " << device;
      devices.insert(device);
      ports.insert(port);
    }
    EXPECT_EQ(devices.size(), static_cast<size_t>(g)) << "ranks of one trial share a GPU";
    EXPECT_EQ(ports.size(), 1u);
    uses.push_back({*t.started, *t.ended, devices});
  }
  // No GPU is ever held by two trials at once, and never more than the 4 there are.
  for (size_t i = 0; i < uses.size(); ++i) {
    size_t in_use = uses[i].devices.size();
    for (size_t j = 0; j < uses.size(); ++j) {
      if (i == j || !(uses[j].start <= uses[i].start && uses[i].start < uses[j].end)) continue;
      in_use += uses[j].devices.size();
      for (const std::string& d : uses[i].devices) EXPECT_EQ(uses[j].devices.count(d), 0u) << d;
    }
    EXPECT_LE(in_use, 4u);
  }
}

// Trials that need part of a GPU share one: on two fake GPUs of 8 GiB, trials of 2-4 GiB (a
// template) run as many at once as the memory holds, each told its one GPU; a GPU never holds
// more than its memory. The first four wait for one another, so at least four ran at once.
TEST_F(RunnerTest, TrialsThatNeedPartOfAGpuShareOneByMemory) {
  std::string script = Script("share.sh", ShellBarrier(dir_ / "marks", 4) + R"sh(
echo "$CUDA_VISIBLE_DEVICES" > "$HYPERPACK_TRIAL_DIR/device"
echo '{"loss": 1}'
)sh");
  auto spec = Spec(R"(
name: s
objective: {metric: loss, direction: minimize}
search_space:
  gib: {type: categorical, values: [2, 4]}
  x: {type: float, low: 0, high: 1}
trial: {command: "sh )" +
                   script + R"("}
tuner: {algorithm: random, seed: 3}
budget: {max_trials: 12, max_parallel: 12}
resources: {gpu_memory: "{gib} GiB"}
)");
  RunOptions o;
  o.node = FakeGpuNode(2, 8192);
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->completed, 12);
  struct Use {
    double start, end;
    std::string device;
    int64_t mib;
  };
  std::vector<Use> uses;
  for (const TrialRecord& t : Trials()) {
    std::string device =
        ReadFile((std::filesystem::path(t.log_path).parent_path() / "device").string());
    ASSERT_TRUE(device == "0\n" || device == "1\n") << "one GPU each: " << device;
    uses.push_back({*t.started, *t.ended, device, std::get<int64_t>(t.params.at("gib")) * 1024});
  }
  size_t most_at_once = 0;
  for (const Use& u : uses) {
    std::map<std::string, int64_t> held;
    size_t at_once = 0;
    for (const Use& v : uses) {
      if (!(v.start <= u.start && u.start < v.end)) continue;
      held[v.device] += v.mib;
      ++at_once;
    }
    for (const auto& [device, mib] : held) EXPECT_LE(mib, 8192) << "GPU " << device;
    most_at_once = std::max(most_at_once, at_once);
  }
  EXPECT_GE(most_at_once, 4u);
}

// A share that runs out of GPU memory beside others runs again on a GPU of its own, whatever
// max_attempts says; its peak memory there, past what the study states, sizes the shares after
// it: 3000 MiB against 2 GiB stated makes shares of 3300 MiB, two to the 8 GiB GPU.
TEST_F(RunnerTest, AShareOutOfMemoryRunsAgainAloneAndTeachesThePacker) {
  std::string script = Script("oom.sh", R"sh(
if [ "$HYPERPACK_TRIAL_ID" = 0 ] && [ "$HYPERPACK_TRIAL_ATTEMPT" = 1 ]; then
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
  exit 1
fi
sleep 0.05
if [ "$HYPERPACK_TRIAL_ATTEMPT" = 2 ]; then peak=3000; else peak=1500; fi
echo "{\"loss\": $1, \"peak_gpu_mb\": $peak}"
)sh");
  auto spec = Spec(StudyYaml("s").Command("sh " + script + " {x}").str() +
                   "budget: {max_trials: 10, max_parallel: 8, max_attempts: 1}\n"
                   "resources: {gpu_memory: 2GiB}\n");
  RunOptions o;
  o.node = FakeGpuNode(1, 8192);
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  auto trials = Trials();
  ASSERT_GE(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, HasSubstr("out of GPU memory on a shared GPU (it held 2048 MiB of "
                                         "one GPU); it runs again alone"));
  const TrialRecord* again = nullptr;
  for (const TrialRecord& t : trials)
    if (t.retry_of == 0) again = &t;
  ASSERT_NE(again, nullptr) << "no retry, though max_attempts is 1";
  EXPECT_EQ(again->state, TrialState::kCompleted) << again->error;
  for (const TrialRecord& t : trials) {
    if (&t == again || !t.started || !t.ended) continue;
    EXPECT_FALSE(*t.started < *again->ended && *again->started < *t.ended)
        << "trial " << t.number << " ran beside the retry, which holds the whole GPU";
  }
  // After the retry's report, shares of 3300 MiB: at most two at once.
  for (const TrialRecord& t : trials) {
    if (!t.started || *t.started < *again->ended) continue;
    int at_once = 0;
    for (const TrialRecord& u : trials)
      if (u.started && u.ended && *u.started <= *t.started && *t.started < *u.ended) ++at_once;
    EXPECT_LE(at_once, 2) << "trial " << t.number;
  }
}

// gpu_memory: auto: the first trial runs on a GPU of its own; once it reports peak_gpu_mb (2000
// MiB) the rest, waiting ones included, share the 16 GiB GPU in shares of 2000 x 1.2 + 1024 =
// 3424 MiB: four at once, never five. The four after the first wait for one another.
TEST_F(RunnerTest, AutoGpuMemoryMeasuresTheFirstTrialAloneThenPacksByItsPeak) {
  std::string script = Script("auto.sh", "if [ \"$HYPERPACK_TRIAL_ID\" != 0 ]; then\n" +
                                             ShellBarrier(dir_ / "marks", 4) + R"sh(fi
echo "{\"loss\": $1, \"peak_gpu_mb\": 2000}"
)sh");
  auto spec = Spec(StudyYaml("s").Command("sh " + script + " {x}").str() +
                   "budget: {max_trials: 9, max_parallel: 8}\nresources: {gpu_memory: auto}\n");
  RunOptions o;
  o.node = FakeGpuNode(1, 16384);
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->completed, 9);
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 9u);
  size_t most = 0;
  for (const TrialRecord& t : trials) {
    size_t at_once = 0;
    for (const TrialRecord& u : trials)
      if (*u.started <= *t.started && *t.started < *u.ended) ++at_once;
    if (t.number == 0) {
      EXPECT_EQ(at_once, 1u) << "the first trial is measured alone";
    }
    EXPECT_LE(at_once, 4u) << "trial " << t.number;
    most = std::max(most, at_once);
  }
  EXPECT_EQ(most, 4u);
}

// A share by memory needs GPUs whose memory is known; a study that asks for one where none is
// says so and runs nothing.
TEST_F(RunnerTest, AShareByMemoryOnGpusOfUnknownMemoryIsRefusedSayingWhy) {
  std::string script = Script("t.sh", "echo '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() +
                   "budget: {max_trials: 2}\nresources: {gpu_memory: 2GiB}\n");
  RunOptions o;
  o.node = FakeGpuNode(1);
  auto summary = Run(spec, o);
  std::string all = summary.ok() ? std::string() : summary.status().message();
  for (const TrialRecord& t : Trials()) {
    EXPECT_NE(t.state, TrialState::kCompleted);
    all += t.error;
  }
  EXPECT_THAT(all, HasSubstr("2048 MiB of one GPU"));
}

TEST_F(RunnerTest, WhenOneRankFailsTheWholeGangIsStopped) {
  std::string script = Script("gang.sh", R"(
if [ "$RANK" = 1 ]; then echo "rank one broke" >&2; exit 1; fi
exec sleep 60
)");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
resources: {gpus: 2}
)");
  RunOptions o;
  o.node = FakeGpuNode(2);
  ASSERT_TRUE(Run(spec, o).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_THAT(trials[0].error, HasSubstr("rank 1: exit 1"));
  EXPECT_THAT(trials[0].error, HasSubstr("rank one broke"));
  EXPECT_LT(*trials[0].ended - *trials[0].started, 30.0);  // rank 0 did not sleep its 60 s
}

TEST_F(RunnerTest, ATrialLargerThanTheMachineIsInfeasibleWithoutRunning) {
  auto spec = Spec(StudyYaml("s")
                       .Space("{g: {type: categorical, values: [8]}}")
                       .Command("echo ran > ran.txt")
                       .str() +
                   R"(budget: {max_trials: 1}
resources: {gpus: "{g}"}
)");
  RunOptions o;
  o.node = FakeGpuNode(4);
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->infeasible, 1);
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kInfeasible);
  EXPECT_THAT(trials[0].error, HasSubstr("more than this cluster has"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ran.txt"));
}

TEST_F(RunnerTest, CpuSlotsBoundHowManyTrialsRunAtOnce) {
  std::string script = Script("t.sh", "sleep 0.3\necho '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() +
                   R"(budget: {max_trials: 4, max_parallel: 4}
resources: {cpus: 2}
)");
  RunOptions o;
  o.node = FakeGpuNode(0);
  o.node->cpus = 4;  // two trials of 2 slots at a time
  ASSERT_TRUE(Run(spec, o).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 4u);
  for (const TrialRecord& t : trials) {
    int overlap = 0;
    for (const TrialRecord& u : trials)
      overlap += *u.started <= *t.started && *t.started < *u.ended;
    EXPECT_LE(overlap, 2);
  }
}

TEST_F(RunnerTest, TheTimeLimitDropsTrialsWaitingForRoomAndTheRunEnds) {
  // One slot, two trials proposed: the second waits in the queue when the limit passes. (The
  // runner once waited for it for ever.)
  std::string script = Script("t.sh", "sleep 1.5\necho '{\"loss\": 1}'\n");
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() +
                   R"(budget: {max_trials: 4, max_parallel: 2, time_limit: 0.5}
resources: {cpus: 1}
)");
  RunOptions o;
  o.node = FakeGpuNode(0);
  o.node->cpus = 1;
  auto summary = Run(spec, o);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_EQ(summary->stop_reason, "time limit");
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
}

TEST_F(RunnerTest, ARerunSharesTheFirstAttemptsCheckpointsAndIsAskedToResume) {
  std::string script = Script("ranks.sh", kRankScript);
  auto spec = Spec(StudyYaml("s").Command("sh " + script).str() + R"(budget: {max_trials: 1}
resources: {gpus: 1}
)");
  RunOptions o;
  o.node = FakeGpuNode(1);
  // As if a runner had died with trial 0 running.
  {
    ASSERT_TRUE(Run(spec, o).ok());
    auto db = Storage::Open(db_path_).value();
    auto study = db->FindStudy("s").value();
    TrialRecord t;
    t.study_id = study->id;
    t.number = 1;
    t.state = TrialState::kRunning;
    t.params = {{"x", 0.5}};
    t.started = WallNow();
    ASSERT_TRUE(db->InsertTrial(t).ok());
  }
  RunOptions more = o;
  more.max_trials = 2;
  ASSERT_TRUE(Run(spec, more).ok());
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[2].retry_of, 1);
  std::string dir = std::filesystem::path(trials[2].log_path).parent_path().string();
  std::istringstream env(ReadFile(dir + "/checkpoint.env"));
  std::string checkpoint, resume;
  env >> checkpoint >> resume;
  EXPECT_THAT(checkpoint, HasSubstr("trial-0001/checkpoint"));
  EXPECT_EQ(resume, "1");
}

// The environment a trial inherits (the local driver, the Slurm job script and slurm-task).
// The local executor's control socket: a rank started with one finds it at fd 3 and nothing else
// of the runner's; a line told reaches it; telling a rank that has ended is an error, not a
// SIGPIPE. A rank started without one has no fd 3.
TEST(LocalExecutorTest, AControlSocketCarriesALineToTheRankAndNothingElseLeaks) {
  boost::asio::io_context io;
  std::map<int, std::vector<std::string>> lines;
  std::map<int, RankExit> exits;
  auto executor = MakeLocalExecutor(
      io, {[&](RankId id, bool is_err, const std::string& line) {
             if (!is_err) lines[id.trial].push_back(line);
           },
           [&](RankId id, RankExit exit) { exits[id.trial] = exit; }, nullptr, nullptr});
  ASSERT_TRUE(executor->CanTell());
  SpawnRequest told;
  told.command = "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; read -r a b <&3; echo \"$a $b\"";
  told.env = CurrentEnvironment();
  told.control = true;
  SpawnRequest plain = told;
  plain.control = false;
  plain.command = "if [ -e /proc/self/fd/3 ]; then echo fd3; else echo none; fi";
  ASSERT_TRUE(executor->Start({1, 0}, 0, told).ok());
  ASSERT_TRUE(executor->Start({2, 0}, 0, plain).ok());
  EXPECT_TRUE(executor->Tell({1, 0}, "continue 9").ok());
  EXPECT_FALSE(executor->Tell({2, 0}, "continue 9").ok()) << "it has no socket";
  EXPECT_FALSE(executor->Tell({7, 0}, "continue 9").ok()) << "no such rank";
  while (exits.size() < 2) io.run_one();
  ASSERT_EQ(lines[1].size(), 2u);
  // ls's own directory handle is the only descriptor past 3.
  std::istringstream fds(lines[1][0]);
  std::vector<int> open;
  for (int fd; fds >> fd;) open.push_back(fd);
  ASSERT_GE(open.size(), 4u) << lines[1][0];
  EXPECT_EQ(std::vector<int>(open.begin(), open.begin() + 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_LE(open.size(), 5u) << lines[1][0];
  EXPECT_EQ(lines[1][1], "continue 9");
  EXPECT_EQ(lines[2], std::vector<std::string>{"none"});
  EXPECT_EQ(exits[1].kind, RankExit::Kind::kExited);
  EXPECT_EQ(exits[1].code, 0);
  EXPECT_FALSE(executor->Tell({1, 0}, "continue 10").ok()) << "it has ended";
  executor->Shutdown();
}

// Warm trainers in the local executor: trial after trial in one process, each with its own output,
// folder and environment, each ending as its own process would have (an exit code, a signal),
// a line told reaching the trial being served; a SIGKILL takes the process with its trial, and
// the next trial gets a new one; two trials at once get two; a request too large for a packet
// runs as its own process; Shutdown leaves no process behind.
TEST(LocalExecutorTest, AWarmTrainerServesTrialAfterTrialEachEndingAsItsOwnProcessWould) {
  TempDir dir;
  const std::string fake = dir / "fake-trainer";
  WriteFile(fake, testing::kFakeWarmTrainer);
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  boost::asio::io_context io;
  std::map<int, std::vector<std::string>> lines;
  std::map<int, RankExit> exits;
  std::map<int, int> group;
  auto executor =
      MakeLocalExecutor(io, {[&](RankId id, bool is_err, const std::string& line) {
                               if (!is_err) lines[id.trial].push_back(line);
                             },
                             [&](RankId id, RankExit exit) { exits[id.trial] = exit; },
                             [&](RankId id, int pgid) { group[id.trial] = pgid; }, nullptr});
  auto request = [&](std::vector<std::string> words, const std::string& x) {
    SpawnRequest r;
    r.command = "echo cold";  // what runs where no warm trainer can
    r.workdir = dir.path().string();
    r.env = CurrentEnvironment();
    r.env.push_back("X=" + x);
    r.warm_argv = {fake};
    r.warm_argv.insert(r.warm_argv.end(), words.begin(), words.end());
    return r;
  };
  auto until = [&](const std::function<bool()>& done) {
    while (!done()) io.run_one();
  };
  auto served = [&](int n, int pid, const std::string& x) {
    return StrCat("served ", n, " by ", pid, " in ", dir.path().string(), " with X=", x);
  };

  ASSERT_TRUE(executor->Start({1, 0}, 0, request({"exit", "0"}, "one")).ok());
  until([&] { return exits.count(1) > 0; });
  ASSERT_TRUE(executor->Start({2, 0}, 0, request({"exit", "3"}, "two")).ok());
  until([&] { return exits.count(2) > 0; });
  const int first = group[1];
  EXPECT_EQ(group[2], first) << "the second trial is served by the first one's process";
  EXPECT_EQ(lines[1], std::vector<std::string>{served(1, first, "one")});
  EXPECT_EQ(lines[2], std::vector<std::string>{served(2, first, "two")});
  EXPECT_TRUE(exits[1].ok());
  EXPECT_EQ(exits[2].kind, RankExit::Kind::kExited);
  EXPECT_EQ(exits[2].code, 3);

  ASSERT_TRUE(executor->Start({3, 0}, 0, request({"wait"}, "three")).ok());
  until([&] { return lines[3].size() == 1; });
  ASSERT_TRUE(executor->Tell({3, 0}, "continue 5").ok());
  until([&] { return lines[3].size() == 2; });
  EXPECT_EQ(lines[3][1], "told continue 5");
  executor->Signal({3, 0}, SIGTERM);
  until([&] { return exits.count(3) > 0; });
  EXPECT_EQ(exits[3].kind, RankExit::Kind::kSignaled);
  EXPECT_EQ(exits[3].code, SIGTERM);
  EXPECT_FALSE(executor->Tell({3, 0}, "continue 6").ok()) << "it has ended";
  ASSERT_TRUE(executor->Start({4, 0}, 0, request({"exit", "0"}, "four")).ok());
  until([&] { return exits.count(4) > 0; });
  EXPECT_EQ(lines[4], std::vector<std::string>{served(4, first, "four")})
      << "a trial's SIGTERM ends the trial, not the process";

  ASSERT_TRUE(executor->Start({5, 0}, 0, request({"wait"}, "five")).ok());
  until([&] { return lines[5].size() == 1; });
  executor->Signal({5, 0}, SIGKILL);
  until([&] { return exits.count(5) > 0; });
  EXPECT_EQ(exits[5].kind, RankExit::Kind::kSignaled);
  EXPECT_EQ(exits[5].code, SIGKILL);
  ASSERT_TRUE(executor->Start({6, 0}, 0, request({"exit", "0"}, "six")).ok());
  until([&] { return exits.count(6) > 0; });
  const int second = group[6];
  EXPECT_NE(second, first);
  EXPECT_EQ(lines[6], std::vector<std::string>{served(1, second, "six")});

  ASSERT_TRUE(executor->Start({7, 0}, 0, request({"wait"}, "seven")).ok());
  ASSERT_TRUE(executor->Start({8, 0}, 0, request({"wait"}, "eight")).ok());
  until([&] { return lines[7].size() == 1 && lines[8].size() == 1; });
  EXPECT_NE(group[7], group[8]) << "two trials at once, two processes";
  executor->Signal({7, 0}, SIGTERM);
  executor->Signal({8, 0}, SIGTERM);
  until([&] { return exits.count(7) > 0 && exits.count(8) > 0; });

  ASSERT_TRUE(
      executor->Start({9, 0}, 0, request({"exit", "0"}, std::string(warm::kMaxMessage, 'x'))).ok());
  until([&] { return exits.count(9) > 0; });
  EXPECT_EQ(lines[9], std::vector<std::string>{"cold"}) << "too large a request: its own process";

  executor->Shutdown();
  for (int pid : {group[7], group[8]}) {
    EXPECT_EQ(kill(pid, 0), -1) << "warm process " << pid << " outlived the executor";
    EXPECT_EQ(errno, ESRCH);
  }
}

// What a trial started itself (a shell's background job, a launcher's ranks) is out of reach of
// PR_SET_PDEATHSIG; the executor's fence kills the trial's whole group when the executor goes, as
// it does when the executor's process dies
// (CliTest.ARunKilledWithSigkillResumesWithoutLosingAnything).
TEST(LocalExecutorTest, WhatATrialStartedDiesWhenItsExecutorGoes) {
  boost::asio::io_context io;
  std::vector<std::string> lines;
  pid_t group = -1;
  auto executor = MakeLocalExecutor(
      io, {[&](RankId, bool is_err, const std::string& line) {
             if (!is_err) lines.push_back(line);
           },
           [](RankId, RankExit) {}, [&](RankId, int pgid) { group = pgid; }, nullptr});
  SpawnRequest r;
  r.command = "sleep 300 & echo $!; wait";
  r.env = CurrentEnvironment();
  ASSERT_TRUE(executor->Start({1, 0}, 0, r).ok());
  while (lines.empty()) io.run_one();
  const pid_t background = std::stoi(lines[0]);
  EXPECT_FALSE(ExitsWithin(background, 0)) << "it runs while its executor does";
  executor.reset();
  EXPECT_TRUE(ExitsWithin(background, 20000)) << "the trial's background job outlived its executor";
  const bool shell_gone = ExitsWithin(group, 20000);
  EXPECT_TRUE(shell_gone) << "the trial's shell outlived its executor";
  if (!shell_gone) killpg(group, SIGKILL);  // so that the test ends either way
  int status = 0;
  EXPECT_EQ(waitpid(group, &status, 0), group);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

// The agent's lease: groups still held when it runs out are killed, one dropped before is not.
TEST(FenceTest, ALeaseThatRunsOutKillsTheGroupsItHoldsAndNoOther) {
  SpawnRequest r;
  r.command = "exec sleep 300";
  r.env = CurrentEnvironment();
  auto held = Spawn(r);
  auto dropped = Spawn(r);
  ASSERT_TRUE(held.ok() && dropped.ok());
  for (const Spawned& s : {*held, *dropped})
    for (int fd : {s.stdout_fd, s.stderr_fd}) close(fd);
  auto fence = Fence::Start();
  ASSERT_TRUE(fence.ok()) << fence.status().message();
  (*fence)->Add(held->pid);
  (*fence)->Add(dropped->pid);
  (*fence)->Remove(dropped->pid);
  (*fence)->RenewUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  EXPECT_TRUE(ExitsWithin(held->pid, 20000)) << "the lease ran out";
  EXPECT_FALSE(ExitsWithin(dropped->pid, 0)) << "it was dropped from the fence";
  killpg(dropped->pid, SIGKILL);
  for (pid_t pid : {held->pid, dropped->pid}) {
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
}

// A runner tells its fence of a trial's group in before_run; the command must not have run yet, or
// what it starts could escape a lease that runs out before the fence hears of it.
TEST(SpawnTest, NothingOfTheCommandRunsBeforeTheRunnerHasSeenItsGroup) {
  TempDir dir;
  const std::string marker = dir / "ran";
  SpawnRequest r;
  r.command = "echo ran > " + marker;
  r.env = CurrentEnvironment();
  bool ran_early = true;
  pid_t seen = -1;
  auto spawned = Spawn(r, [&](pid_t pid) {
    seen = pid;
    EXPECT_EQ(getpgid(pid), pid) << "its group exists before the runner hands it on";
    ran_early = ExitsWithin(pid, 500) || access(marker.c_str(), F_OK) == 0;
  });
  ASSERT_TRUE(spawned.ok()) << spawned.status().message();
  EXPECT_EQ(seen, spawned->pid);
  EXPECT_FALSE(ran_early) << "the command ran before before_run returned";
  for (int fd : {spawned->stdout_fd, spawned->stderr_fd}) close(fd);
  int status = 0;
  ASSERT_EQ(waitpid(spawned->pid, &status, 0), spawned->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(access(marker.c_str(), F_OK), 0) << "it runs once before_run has returned";
}

// A runner that dies between the fork and its go-ahead leaves a child that never runs its command,
// even where PR_SET_PDEATHSIG cannot stop it: a runner that handles SIGTERM itself (as one with an
// Asio signal_set does) passes its handler on to the child until exec.
TEST(SpawnTest, AChildWhoseRunnerDiesBeforeItsGoAheadNeverRuns) {
  TempDir dir;
  const std::string marker = dir / "ran";
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t runner = fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    close(report[0]);
    signal(SIGTERM, [](int) {});
    SpawnRequest r;
    r.command = "echo ran > " + marker;
    r.env = CurrentEnvironment();
    (void)Spawn(r, [&](pid_t pid) {
      (void)!write(report[1], &pid, sizeof(pid));
      (void)ExitsWithin(pid, 300);  // long enough for the child to pass its own checks
      _exit(0);                     // the runner dies before the child may run
    });
    _exit(1);
  }
  close(report[1]);
  pid_t child = -1;
  const bool reported = read(report[0], &child, sizeof(child)) == sizeof(child);
  close(report[0]);
  int status = 0;
  ASSERT_EQ(waitpid(runner, &status, 0), runner);
  ASSERT_TRUE(reported) << "the runner never reached before_run";
  EXPECT_TRUE(ExitsWithin(child, 20000)) << "the child outlived its runner";
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the child ran without its go-ahead";
}

// What a Spawn test reads from a child: one line of `fd`, up to its newline (blocking).
std::string ReadLineFrom(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

// An earlier attempt that holds the lock: a shell whose background child, which inherited the
// lock, waits on the control socket after the shell itself has exited.
Result<Spawned> SpawnLockHolder(const std::string& lock, const std::string& order) {
  SpawnRequest holder;
  holder.command = "sh -c 'read -r x <&3; echo holder-end >> " + order + "' & echo started";
  holder.env = CurrentEnvironment();
  holder.control = true;
  holder.lock_path = lock;
  return Spawn(holder);
}

// Two attempts of a trial never run at once: the second, with the same lock, runs nothing of its
// command while anything of the first (here a background child of its shell) still runs; it says
// on stderr that it waits, without holding up the runner, and runs once the first has ended.
TEST(SpawnTest, AnAttemptRunsOnlyOnceEverythingOfTheEarlierOneHasEnded) {
  TempDir dir;
  const std::string lock = dir / "rank-0.lock", order = dir / "order";
  auto first = SpawnLockHolder(lock, order);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(ReadLineFrom(first->stdout_fd), "started");
  int status = 0;
  ASSERT_EQ(waitpid(first->pid, &status, 0), first->pid) << "its shell has exited";

  SpawnRequest second;
  second.command = "echo second >> " + order;
  second.env = CurrentEnvironment();
  second.lock_path = lock;
  auto spawned = Spawn(second);  // returns while the lock is held: the runner is not held up
  ASSERT_TRUE(spawned.ok()) << spawned.status().message();
  EXPECT_THAT(ReadLineFrom(spawned->stderr_fd),
              HasSubstr("an earlier attempt of this trial still runs (it holds " + lock));
  EXPECT_NE(access(order.c_str(), F_OK), 0) << "nothing of either has written yet";

  close(first->control_fd);  // the background child reads end of file and ends
  ASSERT_EQ(waitpid(spawned->pid, &status, 0), spawned->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(ReadFile(order), "holder-end\nsecond\n");
  for (int fd : {first->stdout_fd, first->stderr_fd, spawned->stdout_fd, spawned->stderr_fd})
    close(fd);
}

// The wait is bounded: an attempt whose lock is still held after lock_wait_s exits
// kLockedOutExit, having run nothing, and says why.
TEST(SpawnTest, AnAttemptThatCannotHaveItsLockInTimeRunsNothingAndSaysWhy) {
  TempDir dir;
  const std::string lock = dir / "rank-0.lock", order = dir / "order";
  auto first = SpawnLockHolder(lock, order);
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ(ReadLineFrom(first->stdout_fd), "started");

  SpawnRequest second;
  second.command = "echo second >> " + order;
  second.env = CurrentEnvironment();
  second.lock_path = lock;
  second.lock_wait_s = 0.2;
  auto spawned = Spawn(second);
  ASSERT_TRUE(spawned.ok()) << spawned.status().message();
  int status = 0;
  ASSERT_EQ(waitpid(spawned->pid, &status, 0), spawned->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kLockedOutExit) << status;
  ReadLineFrom(spawned->stderr_fd);  // the line that says it waits
  EXPECT_THAT(ReadLineFrom(spawned->stderr_fd),
              HasSubstr("still ran after 0.2 s (it holds " + lock + "); this attempt ran nothing"));
  EXPECT_NE(access(order.c_str(), F_OK), 0) << "the second ran its command";

  close(first->control_fd);
  ASSERT_EQ(waitpid(first->pid, &status, 0), first->pid);
  for (int fd : {first->stdout_fd, first->stderr_fd, spawned->stdout_fd, spawned->stderr_fd})
    close(fd);
}

// A warm trainer serving an attempt holds its lock until the trial ends (the runner hands it the
// locked file with the trial); a rank whose lock an earlier attempt still holds is not handed to
// a warm trainer but runs as its own process, which waits for it.
TEST(LocalExecutorTest, AWarmTrainerHoldsTheAttemptLockAndAHeldLockStartsItsOwnProcess) {
  TempDir dir;
  const std::string fake = dir / "fake-trainer", lock = dir / "rank-0.lock";
  WriteFile(fake, testing::kFakeWarmTrainer);
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  boost::asio::io_context io;
  std::map<int, std::vector<std::string>> out, err;
  std::map<int, RankExit> exits;
  auto executor = MakeLocalExecutor(
      io, {[&](RankId id, bool is_err, const std::string& line) {
             (is_err ? err : out)[id.trial].push_back(line);
           },
           [&](RankId id, RankExit exit) { exits[id.trial] = exit; }, nullptr, nullptr});
  SpawnRequest warm;
  warm.command = "echo cold";
  warm.env = CurrentEnvironment();
  warm.warm_argv = {fake, "wait"};
  warm.lock_path = lock;
  ASSERT_TRUE(executor->Start({1, 0}, 0, warm).ok());
  while (out[1].empty()) io.run_one();
  ASSERT_THAT(out[1][0], HasSubstr("served 1 by")) << "a warm trainer serves it";
  SpawnRequest next;
  next.command = "true";
  next.env = CurrentEnvironment();
  next.lock_path = lock;
  next.lock_wait_s = 0.2;
  auto blocked = Spawn(next);
  ASSERT_TRUE(blocked.ok());
  int status = 0;
  ASSERT_EQ(waitpid(blocked->pid, &status, 0), blocked->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == kLockedOutExit)
      << "the warm trainer holds the lock while it serves the trial";
  for (int fd : {blocked->stdout_fd, blocked->stderr_fd}) close(fd);
  executor->Signal({1, 0}, SIGTERM);
  while (!exits.count(1)) io.run_one();
  auto after = Spawn(next);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(waitpid(after->pid, &status, 0), after->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "released when the trial ended";
  for (int fd : {after->stdout_fd, after->stderr_fd}) close(fd);

  auto holder = SpawnLockHolder(lock, dir / "order");
  ASSERT_TRUE(holder.ok());
  ASSERT_EQ(ReadLineFrom(holder->stdout_fd), "started");
  ASSERT_TRUE(executor->Start({2, 0}, 0, warm).ok());
  while (err[2].empty()) io.run_one();
  EXPECT_THAT(err[2][0], HasSubstr("an earlier attempt of this trial still runs"));
  close(holder->control_fd);
  while (!exits.count(2)) io.run_one();
  EXPECT_EQ(out[2], std::vector<std::string>{"cold"}) << "its own process, not the warm one";
  EXPECT_TRUE(exits[2].ok());
  waitpid(holder->pid, &status, 0);
  for (int fd : {holder->stdout_fd, holder->stderr_fd}) close(fd);
  executor->Shutdown();
}

TEST(EnvironmentMapTest, SplitsAtTheFirstEqualsSoAValueMayHoldMore) {
  const std::map<std::string, std::string> want = {
      {"PATH", "/usr/bin:/bin"}, {"OPTS", "a=1,b=2"}, {"EMPTY", ""}};
  EXPECT_EQ(EnvironmentMap({"PATH=/usr/bin:/bin", "OPTS=a=1,b=2", "EMPTY="}), want);
}

TEST(EnvironmentMapTest, LeavesOutEntriesWithoutEqualsKeepsAnEmptyNameAndTheLastOfARepeat) {
  const std::map<std::string, std::string> want = {{"", "x"}, {"A", "2"}};
  EXPECT_EQ(EnvironmentMap({"NOEQUALS", "", "=x", "A=1", "A=2"}), want);
}

}  // namespace
}  // namespace hyperpack::scheduler
