// `hyperpack run` with `cluster: {slurm: ...}` against a real one-node Slurm (local_slurm.h),
// started once for the suite: requests read back from scontrol, a gang's devices and torchrun
// variables, pruning as scancel, a preempted job resumed from its checkpoint, a killed run
// re-attached without duplicates, and a partition Slurm refuses named at its line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "local_slurm.h"
#include "test_util.h"

namespace hyperpack::testing {
namespace {

using storage::TrialRecord;
using storage::TrialState;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

LocalSlurm* cluster = nullptr;

[[maybe_unused]] bool WaitUntil(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (done()) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access("/usr/sbin/slurmctld", X_OK) != 0) return;
    std::string error;
    LocalSlurm::Options o;
    o.preempt_mode = "CANCEL";
    o.gpu_shards = 4;
    cluster_ = LocalSlurm::Start(o, &error);
    error_ = error;
    if (cluster_) {
      cluster = cluster_.get();
      setenv("SLURM_CONF", cluster_->conf().c_str(), 1);
    }
  }
  static void TearDownTestSuite() {
    cluster = nullptr;
    cluster_.reset();
  }
  void SetUp() override {
    if (access("/usr/sbin/slurmctld", X_OK) != 0)
      GTEST_SKIP() << "Slurm is not installed (scripts/test installs slurmctld, slurmd, munge)";
    ASSERT_NE(cluster, nullptr) << "the local Slurm did not start: " << error_;
  }

  Ran Hyperpack(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    return RunCommand(args, dir_.path().string());
  }
  pid_t Start(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    return StartInBackground(args, dir_.path().string(), dir_ / "bg.out");
  }
  static int Wait(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  std::string Study(const std::string& name, const std::string& body) {
    const std::string path = dir_ / (name + ".yaml");
    WriteFile(path, StrCat("name: ", name, "\n", body));
    return path;
  }

  std::vector<TrialRecord> Trials(const std::string& study) {
    auto db = storage::Storage::Open(db_).value();
    auto found = db->FindStudy(study).value();
    if (!found) return {};
    return db->ListTrials(found->id).value();
  }

  std::string Slurm(const std::vector<std::string>& argv) {
    std::string out;
    cluster->Run(argv, &out);
    return out;
  }

  // The study's jobs as squeue shows them (finished ones too): id -> "STATE".
  std::map<std::string, std::string> Jobs(const std::string& study) {
    std::map<std::string, std::string> jobs;
    for (const std::string& line :
         Lines(Slurm({"squeue", "--noheader", "--states=all", "--format=%i|%j|%T"}))) {
      auto a = line.find('|'), b = line.rfind('|');
      if (line.substr(a + 1, b - a - 1).rfind("hp:" + study + ":", 0) == 0)
        jobs[line.substr(0, a)] = line.substr(b + 1);
    }
    return jobs;
  }

  std::string Show(const std::string& job) { return Slurm({"scontrol", "show", "job", job}); }

  static std::unique_ptr<LocalSlurm> cluster_;
  static std::string error_;
  TempDir dir_;
  std::string db_ = dir_ / "h.db";
};
std::unique_ptr<LocalSlurm> SlurmTest::cluster_;
std::string SlurmTest::error_;

#if HYPERPACK_SLURM_SLOW
TEST_F(SlurmTest, ATrialPastItsSlurmTimeLimitIsATimeoutNotAPreemption) {
  const std::string path = Study("late", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'; sleep 600"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 1}
cluster: {slurm: {time_limit: 1, signal: "", poll_interval: 0.5s}}
)");
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // no trial completed
  auto trials = Trials("late");
  ASSERT_EQ(trials.size(), 1u) << "a timeout is not requeued";
  EXPECT_EQ(trials[0].state, TrialState::kTimeout) << trials[0].error;
  auto jobs = Jobs("late");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs.begin()->second, "TIMEOUT");
}
#else
TEST_F(SlurmTest, AStudyOfSmallTrialsCompletesWithTheRequestsItAskedFor) {
  const std::string path = Study("small", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 3, max_parallel: 2}
resources: {cpus: 1}
cluster:
  slurm: {partition: debug, time_limit: 7m, mem: 150M, signal: USR1@30, extra_args: [--nice=5]}
)");
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("small");
  ASSERT_EQ(trials.size(), 3u);
  for (const TrialRecord& t : trials) EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
  auto jobs = Jobs("small");
  ASSERT_EQ(jobs.size(), 3u) << "one job per trial";
  for (const auto& [id, state] : jobs) {
    // The trial ends when its script has; slurmctld may still be cleaning the job up then
    // (COMPLETING: CI read it once), with its exit code already recorded.
    EXPECT_THAT(state, ::testing::AnyOf("COMPLETED", "COMPLETING"));
    const std::string show = Show(id);
    EXPECT_THAT(show, HasSubstr("ExitCode=0:0"));
    EXPECT_THAT(show, HasSubstr("Partition=debug"));
    EXPECT_THAT(show, HasSubstr("TimeLimit=00:07:00"));
    EXPECT_THAT(show, HasSubstr("MinMemoryNode=150M"));
    EXPECT_THAT(show, HasSubstr("Nice=5"));
    EXPECT_THAT(show, HasSubstr("NumNodes=1"));
    EXPECT_THAT(show, HasSubstr("NumTasks=1"));
    EXPECT_THAT(show, HasSubstr("Comment=hyperpack study=small trial="));
    EXPECT_THAT(show, HasSubstr("Requeue=1"));
  }
  // Queue time and run time apart: each trial's start on Slurm is an event.
  EXPECT_THAT(r.out, HasSubstr("in the queue"));
  const std::string log = ReadFile(dir_ / "hyperpack_logs/small/trial-0000/output.log");
  EXPECT_THAT(log, HasSubstr("submitted as Slurm job"));
  EXPECT_THAT(log, HasSubstr("{\"loss\""));
}

TEST_F(SlurmTest, AGangOfTwoRanksGetsDistinctGpusAndTheTorchrunVariables) {
  const std::string path = Study("gang", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial:
  command: >-
    echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT
    $CUDA_VISIBLE_DEVICES" > {trial_dir}/env-$RANK; echo '{{"loss": 1}}'
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 1}
resources: {gpus: 2}
cluster: {slurm: {time_limit: 5m}}
)");
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string trial_dir = dir_ / "hyperpack_logs/gang/trial-0000";
  const auto rank0 = Lines(ReadFile(trial_dir + "/env-0"));
  const auto rank1 = Lines(ReadFile(trial_dir + "/env-1"));
  ASSERT_EQ(rank0.size(), 1u);
  ASSERT_EQ(rank1.size(), 1u);
  std::istringstream a(rank0[0]), b(rank1[0]);
  std::string r0, w0, l0, lw0, addr0, port0, dev0, r1, w1, l1, lw1, addr1, port1, dev1;
  a >> r0 >> w0 >> l0 >> lw0 >> addr0 >> port0 >> dev0;
  b >> r1 >> w1 >> l1 >> lw1 >> addr1 >> port1 >> dev1;
  EXPECT_EQ(r0, "0");
  EXPECT_EQ(r1, "1");
  EXPECT_EQ(w0, "2");
  EXPECT_EQ(w1, "2");
  EXPECT_EQ(l0, "0");
  EXPECT_EQ(l1, "1");
  EXPECT_EQ(lw0, "2");
  EXPECT_EQ(addr0, "localhost");
  EXPECT_EQ(addr1, "localhost");
  EXPECT_EQ(port0, port1);
  EXPECT_FALSE(port0.empty());
  EXPECT_FALSE(dev0.empty());
  EXPECT_FALSE(dev1.empty());
  EXPECT_NE(dev0, dev1) << "each rank sees its own GPU";
  auto jobs = Jobs("gang");
  ASSERT_EQ(jobs.size(), 1u);
  const std::string show = Show(jobs.begin()->first);
  EXPECT_THAT(show, HasSubstr("NumTasks=2"));
  EXPECT_THAT(show, HasSubstr("gpu:2"));
}

// `text`'s lines, each indented by four spaces (a block scalar's body in a study file).
std::string Indent(const std::string& text) {
  std::string out;
  for (const std::string& line : Lines(text)) out += "    " + line + "\n";
  return out;
}

// A share of a GPU is a job on Slurm's shards of one: half a GPU of 4 shards asks for 2, and two
// such trials run at once.
TEST_F(SlurmTest, SharesOfAGpuAreJobsOnItsShardsAndRunTogether) {
  const std::string path = Study(
      "shards", StrCat(R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial:
  command: |
)",
                       Indent(testing::ShellBarrier(dir_ / "met", 2)), R"(    ls )", dir_ / "met",
                       R"( | wc -l > {trial_dir}/met
    echo "$CUDA_VISIBLE_DEVICES" > {trial_dir}/devices
    echo '{{"loss": {x}}}'
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 2, max_parallel: 2}
resources: {gpus: 0.5}
cluster: {slurm: {time_limit: 5m, gpu_shards: 4, poll_interval: 0.5s}}
)"));
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("shards");
  ASSERT_EQ(trials.size(), 2u);
  for (const TrialRecord& t : trials) {
    EXPECT_EQ(t.state, TrialState::kCompleted) << t.error;
    const std::string trial_dir = StrCat(dir_ / "hyperpack_logs/shards", "/trial-000", t.number);
    EXPECT_EQ(ReadFile(trial_dir + "/met"), "2\n") << "both trials ran at once";
    EXPECT_NE(ReadFile(trial_dir + "/devices"), "\n") << "Slurm names the shard's GPU";
  }
  auto jobs = Jobs("shards");
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& [id, state] : jobs) {
    const std::string show = Show(id);
    EXPECT_THAT(show, HasSubstr("shard:2"));
    EXPECT_THAT(show, ::testing::Not(HasSubstr("gpu:")));
  }
}

// Without the cluster's shards a share cannot be asked for: the error names the key, and nothing
// is stored.
TEST_F(SlurmTest, AShareWithoutTheClustersShardsIsAnErrorNamingTheKey) {
  const std::string path = Study("noshards", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
budget: {max_trials: 1}
resources: {gpu_memory: 2GiB}
cluster: {slurm: {gpu_shards: 4}}
)");
  Ran r = Hyperpack({"run", path, "--storage", db_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("cluster.slurm.gpu_memory"));
  EXPECT_THAT(r.err, HasSubstr("noshards.yaml:"));
  EXPECT_TRUE(Trials("noshards").empty());
  EXPECT_TRUE(Jobs("noshards").empty());
}

TEST_F(SlurmTest, PruningCancelsTheJobAndTheTrialIsPruned) {
  // Trial 0 does well; trial 1 reports a bad first epoch and would then sleep for a minute.
  WriteFile(dir_ / "curve.sh", R"(
if [ "$1" = 0 ]; then
  for e in 1 2 3; do echo "{\"epoch\": $e, \"loss\": 0.1}"; done
else
  echo '{"epoch": 1, "loss": 5}'; sleep 60; echo '{"epoch": 2, "loss": 5}'
fi
)");
  const std::string path = Study("prune", StrCat(R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                                                 dir_ / "curve.sh", R"( {trial}"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 2, max_parallel: 1}
pruner: {algorithm: median, startup_trials: 1, warmup_steps: 0}
cluster: {slurm: {time_limit: 5m, poll_interval: 0.5s}}
)"));
  const auto start = Clock::now();
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("prune");
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  EXPECT_EQ(trials[1].state, TrialState::kPruned) << trials[1].error;
  EXPECT_LT(took, 45) << "the pruned trial's job was cancelled, not waited for";
  int cancelled = 0;
  for (const auto& [id, state] : Jobs("prune")) cancelled += state == "CANCELLED";
  EXPECT_EQ(cancelled, 1);
}

TEST_F(SlurmTest, APreemptedJobRunsAgainFromItsCheckpoint) {
  // Ten epochs, a checkpoint after each; a run after a preemption starts after the saved one.
  WriteFile(dir_ / "train.sh", R"(
ck="$HYPERPACK_CHECKPOINT_DIR/epoch"
start=0
[ -f "$ck" ] && start=$(cat "$ck")
echo "{\"resumed_from\": $start}"
e=$start
while [ $e -lt 10 ]; do
  e=$((e + 1)); sleep 0.5
  echo $e > "$ck"
  echo "{\"epoch\": $e, \"loss\": $(( 10 - e ))}"
done
# A run that resumes after the last epoch (its predecessor saved it just before the preemption
# landed) still reports where it ends.
echo "{\"loss\": $(( 10 - e ))}"
)");
  const std::string path = Study("preempt", StrCat(R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                                                   dir_ / "train.sh", R"("}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 1}
cluster: {slurm: {partition: debug, time_limit: 5m, poll_interval: 0.5s}}
)"));
  pid_t run = Start({"run", path, "--storage", db_, "--progress", "log"});
  const std::string ck = dir_ / "hyperpack_logs/preempt/trial-0000/checkpoint/epoch";
  ASSERT_TRUE(WaitUntil(
      [&] {
        std::string e = ReadFile(ck);
        return !e.empty() && std::stoi(e) >= 3;
      },
      60))
      << ReadFile(dir_ / "bg.out");
  // A job in the higher partition that needs every CPU of the node preempts the trial's.
  std::string out;
  ASSERT_EQ(cluster->Run({"sbatch", "--partition=high", StrCat("--cpus-per-task=", cluster->cpus()),
                          "--mem=100M", "--wrap=sleep 2"},
                         &out),
            0)
      << out;
  ASSERT_EQ(Wait(run), 0) << ReadFile(dir_ / "bg.out");
  auto trials = Trials("preempt");
  ASSERT_EQ(trials.size(), 2u) << ReadFile(dir_ / "bg.out");
  EXPECT_EQ(trials[0].state, TrialState::kNodeLost);
  EXPECT_THAT(trials[0].error, HasSubstr("preempted"));
  EXPECT_EQ(trials[1].state, TrialState::kCompleted) << trials[1].error;
  EXPECT_EQ(trials[1].attempt, 2);
  const std::string second = ReadFile(dir_ / "hyperpack_logs/preempt/trial-0001/output.log");
  EXPECT_THAT(second, ::testing::Not(HasSubstr("{\"resumed_from\": 0}")));
  EXPECT_THAT(second, HasSubstr("{\"resumed_from\": "));
  EXPECT_THAT(second, ::testing::Not(HasSubstr("{\"epoch\": 1,")));
}

TEST_F(SlurmTest, AScriptThatEndsAfterSlurmsPreemptionNoticeIsPreemptedNotFailed) {
  // The order a slow slurmctld allows: slurmstepd's notice, the step's end, the script's exit
  // file, and only then the job's state, which is then FAILED rather than PREEMPTED. Here the
  // script writes the notice itself, so the order is certain.
  WriteFile(dir_ / "notice.sh", R"(
ck="$HYPERPACK_CHECKPOINT_DIR/ran"
if [ -f "$ck" ]; then echo '{"loss": 1}'; exit 0; fi
touch "$ck"
echo "slurmstepd-localhost: error: *** STEP $SLURM_JOB_ID.0 ON localhost CANCELLED AT 2026-11-25T01:02:57 DUE TO PREEMPTION ***" >&2
exit 143
)");
  const std::string path = Study("notice", StrCat(R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                                                  dir_ / "notice.sh", R"("}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 1}
cluster: {slurm: {time_limit: 5m, poll_interval: 0.5s}}
)"));
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("notice");
  ASSERT_EQ(trials.size(), 2u) << r.err;
  EXPECT_EQ(trials[0].state, TrialState::kNodeLost) << trials[0].error;
  EXPECT_THAT(trials[0].error, HasSubstr("preempted"));
  EXPECT_EQ(trials[1].state, TrialState::kCompleted) << trials[1].error;
  EXPECT_EQ(trials[1].attempt, 2);
}

TEST_F(SlurmTest, AKilledRunStartedAgainReattachesToItsJobsWithoutDuplicates) {
  // Each trial waits for a file the test writes after it has killed and restarted the run.
  const std::string go = dir_ / "go";
  const std::string path =
      Study("again", StrCat(R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "while [ ! -f )",
                            go, R"( ]; do sleep 0.1; done; echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 2, max_parallel: 2}
cluster: {slurm: {time_limit: 5m, poll_interval: 0.5s}}
)"));
  pid_t first = Start({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto jobs = Jobs("again");
        int running = 0;
        for (const auto& [id, state] : jobs) running += state == "RUNNING";
        return running == 2;
      },
      60))
      << ReadFile(dir_ / "bg.out");
  kill(first, SIGKILL);
  Wait(first);
  pid_t second = Start({"run", path, "--storage", db_, "--progress", "log"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(dir_ / "bg.out").find("re-attached") != std::string::npos ||
               Trials("again").size() >= 4;
      },
      60));
  WriteFile(go, "");
  ASSERT_EQ(Wait(second), 0) << ReadFile(dir_ / "bg.out");
  EXPECT_EQ(Jobs("again").size(), 2u) << "no job was submitted twice";
  int completed = 0;
  for (const TrialRecord& t : Trials("again")) completed += t.state == TrialState::kCompleted;
  EXPECT_EQ(completed, 2);
}

TEST_F(SlurmTest, TheSlurmFlagRunsAStudyFileThatHasNoClusterOnSlurm) {
  const std::string path = Study("flag", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
budget: {max_trials: 1}
)");
  Ran bad = Hyperpack({"run", path, "--storage", db_, "--slurm", "{mem: lots}"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--slurm:1:7: mem"));
  EXPECT_TRUE(Trials("flag").empty());
  Ran r = Hyperpack({"run", path, "--storage", db_, "--progress", "log", "--slurm",
                     "{partition: high, time_limit: 6m}"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto jobs = Jobs("flag");
  ASSERT_EQ(jobs.size(), 1u);
  const std::string show = Show(jobs.begin()->first);
  EXPECT_THAT(show, HasSubstr("Partition=high"));
  EXPECT_THAT(show, HasSubstr("TimeLimit=00:06:00"));
  // A file that has cluster.slurm already is not overridden behind its back.
  const std::string both =
      Study("both",
            "objective: {metric: loss, direction: minimize}\nsearch_space: {x: {type: "
            "float, low: 0, high: 1}}\ntrial: {command: \"true\"}\n"
            "cluster: {slurm: {partition: debug}}\n");
  Ran twice = Hyperpack({"run", both, "--storage", db_, "--slurm", "{partition: high}"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_THAT(twice.err, HasSubstr("has cluster.slurm already"));
}

TEST_F(SlurmTest, APartitionSlurmRefusesIsAnErrorAtItsLineAndNothingIsStored) {
  const std::string path = Study("bad", R"(objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
cluster:
  slurm:
    partition: nope
)");
  Ran r = Hyperpack({"run", path, "--storage", db_});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:7:16: cluster.slurm.partition"));
  EXPECT_THAT(r.err, HasSubstr("invalid partition"));
  EXPECT_TRUE(Trials("bad").empty());
  EXPECT_TRUE(Jobs("bad").empty());
}
#endif  // HYPERPACK_SLURM_SLOW

}  // namespace
}  // namespace hyperpack::testing
