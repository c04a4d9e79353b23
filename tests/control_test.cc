// The lifecycle verbs end to end: `hyperpack stop`, cancel, pause, resume, update, enqueue, retry,
// add-results, wait, logs, delete, ask and tell, each on a study that `hyperpack run` runs on this
// machine and on one that `hyperpack serve` runs on its agent (the verbs then go with --server).
// Trials are real processes that announce themselves on a FIFO and wait for a file the test
// writes, so the test waits on events, never on time.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "hyperpack/scheduler/control.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using Child = hyperpack::testing::PipedChild;
using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using storage::TrialState;
using ::testing::HasSubstr;
using Json = nlohmann::json;

enum class Where { kLocal, kServer };

class ControlTest : public ::testing::TestWithParam<Where> {
 protected:
  void SetUp() override {
    ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
    if (GetParam() == Where::kLocal) return;
    WriteFile(token_, "0123456789abcdef-shared-secret\n");
    chmod(token_.c_str(), 0600);
    server_ = testing::StartPiped({HYPERPACK_CLI, "serve", "--listen", "127.0.0.1:0",
                                   "--token-file", token_, "--storage", db_},
                                  dir_.path().string());
    std::string line = server_.Until("listening on");
    ASSERT_NE(line.find("listening on "), std::string::npos) << line;
    address_ = line.substr(line.find("listening on ") + 13);
    address_.erase(address_.find_last_not_of(" \n\r") + 1);
    agent_ = testing::StartPiped({HYPERPACK_CLI, "agent", "--connect", address_, "--token-file",
                                  token_, "--name", "a1", "--fake-gpus", "0"},
                                 dir_.path().string());
    ASSERT_THAT(server_.Until("agent a1 joined"), HasSubstr("joined"));
  }

  void TearDown() override {
    if (fifo_fd_ >= 0) close(fifo_fd_);
    agent_.Stop();
    server_.Stop();
  }

  // Where a verb goes: this machine's storage, or the server.
  std::vector<std::string> Target() const {
    if (GetParam() == Where::kLocal) return {"--storage", db_};
    return {"--server", address_, "--token-file", token_};
  }
  testing::Ran Cli(std::vector<std::string> args, bool targeted = true) {
    if (targeted) {
      auto t = Target();
      args.insert(args.end(), t.begin(), t.end());
    }
    args.insert(args.begin(), HYPERPACK_CLI);
    return RunCommand(args, dir_.path().string());
  }
  // `hyperpack run` on this machine or through the server, in the background.
  pid_t StartRun(const std::string& yaml) {
    WriteFile(dir_ / "s.yaml", yaml);
    std::vector<std::string> args = {HYPERPACK_CLI, "run", dir_ / "s.yaml"};
    for (const std::string& a : Target()) args.push_back(a);
    return testing::StartInBackground(args, dir_.path().string(), dir_ / "run.out");
  }
  int RunToEnd(const std::string& yaml) { return Reap(StartRun(yaml)); }
  static int Reap(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // The numbers of the next `n` trials that announce themselves on the FIFO.
  std::vector<int> AwaitStarts(int n) {
    if (fifo_fd_ < 0) fifo_fd_ = open((dir_ / "fifo").c_str(), O_RDWR);
    std::vector<int> out;
    std::string buf;
    char c;
    while (static_cast<int>(out.size()) < n && read(fifo_fd_, &c, 1) == 1) {
      if (c != '\n') {
        buf += c;
        continue;
      }
      out.push_back(std::stoi(buf));
      buf.clear();
    }
    return out;
  }

  // A study whose trials announce themselves and wait for the file `go` (all of them), or, with
  // `first_only`, whose trials numbered below `first_only` announce themselves and wait until
  // they are stopped while the others complete at once.
  std::string Study(int max_trials, int max_parallel, const std::string& body) const {
    return StrCat("name: s\nobjective: {metric: loss, direction: minimize}\n",
                  "search_space: {x: {type: float, low: 0, high: 1}}\n", "trial:\n  command: >-\n",
                  body, "\ntuner: {algorithm: sobol, seed: 1}\n",
                  "budget: {max_trials: ", max_trials, ", max_parallel: ", max_parallel,
                  ", max_failed: 5}\n");
  }
  std::string Gated(int max_trials, int max_parallel) const {
    const std::string dir = dir_.path().string();
    return Study(max_trials, max_parallel,
                 StrCat("    echo {trial} > ", dir, "/fifo;\n    while [ ! -e ", dir,
                        "/go ]; do sleep 0.05; done;\n    echo loss={x}"));
  }
  std::string HeldBelow(int first_only, int max_trials) const {
    return Study(max_trials, 2,
                 StrCat("    if [ {trial} -ge ", first_only,
                        " ]; then echo loss={x}; exit 0; fi;\n    echo {trial} > ",
                        dir_.path().string(), "/fifo; sleep 600 & wait"));
  }
  void Go() { WriteFile(dir_ / "go", ""); }

  std::vector<storage::TrialRecord> Trials() {
    auto db = storage::Storage::Open(db_).value();
    auto found = db->FindStudy("s").value();
    if (!found) return {};
    return db->ListTrials(found->id).value();
  }
  Json Conditions() {
    auto status = Cli({"status", "s", "--json", "--storage", db_}, false);
    EXPECT_EQ(status.exit_code, 0) << status.err;
    return Json::parse(status.out)["conditions"];
  }
  int Count(TrialState state) {
    int n = 0;
    for (const auto& t : Trials()) n += t.state == state;
    return n;
  }

  TempDir dir_;
  std::string db_ = dir_ / "h.db";
  std::string token_ = dir_ / "token";
  std::string address_;
  Child server_, agent_;
  int fifo_fd_ = -1;
};

INSTANTIATE_TEST_SUITE_P(Where, ControlTest, ::testing::Values(Where::kLocal, Where::kServer),
                         [](const ::testing::TestParamInfo<Where>& info) {
                           return std::string(info.param == Where::kLocal ? "local" : "server");
                         });

TEST_P(ControlTest, StopLetsRunningTrialsFinishAndStartsNoMore) {
  pid_t run = StartRun(Gated(6, 2));
  ASSERT_EQ(AwaitStarts(2).size(), 2u);
  // Still going at the timeout: 124.
  EXPECT_EQ(Cli({"wait", "s", "--timeout", "0.1"}).exit_code, 124);
  auto deleted = Cli({"delete", "s", "--yes"});
  EXPECT_EQ(deleted.exit_code, 1) << deleted.out;
  EXPECT_THAT(deleted.err, HasSubstr("is running"));

  auto stop = Cli({"stop", "s", "--json"});
  ASSERT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  Json answer = Json::parse(stop.out);
  EXPECT_EQ(answer["refused"], false);
  EXPECT_EQ(answer["live"], true);
  EXPECT_THAT(answer["outcome"].get<std::string>(), HasSubstr("2 trials running end"));
  auto again = Cli({"stop", "s"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("already stopping"));
  EXPECT_EQ(Conditions().back()["type"], "Stopping");

  Go();
  EXPECT_EQ(Reap(run), 0) << ReadFile(dir_ / "run.out");
  EXPECT_EQ(Trials().size(), 2u) << "nothing started after the stop";
  EXPECT_EQ(Count(TrialState::kCompleted), 2);
  auto wait = Cli({"wait", "s", "--json"});
  EXPECT_EQ(wait.exit_code, 3) << wait.out << wait.err;
  EXPECT_EQ(Json::parse(wait.out)["reason"], "StoppedByUser");
}

TEST_P(ControlTest, CancelEndsRunningTrialsAsCancelled) {
  pid_t run = StartRun(HeldBelow(100, 6));
  ASSERT_EQ(AwaitStarts(2).size(), 2u);
  auto cancel = Cli({"cancel", "s"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err;
  EXPECT_THAT(cancel.out, HasSubstr("recorded as cancelled"));
  EXPECT_EQ(Reap(run), 1) << "no trial completed";
  EXPECT_EQ(Count(TrialState::kCancelled), 2);
  EXPECT_EQ(Trials().size(), 2u);
  EXPECT_EQ(Cli({"wait", "s"}).exit_code, 3);
  EXPECT_EQ(Conditions().back()["type"], "Cancelled");
  // Nothing runs it now: a verb for a live run is refused.
  auto late = Cli({"pause", "s"});
  EXPECT_EQ(late.exit_code, 1);
  EXPECT_THAT(late.err, HasSubstr("has no runner"));
}

TEST_P(ControlTest, PauseStopsTrialsUntilResumeRunsThemAgain) {
  // Trials 0 and 1 wait until stopped; their re-runs (2 and 3) complete at once.
  pid_t run = StartRun(HeldBelow(2, 2));
  ASSERT_EQ(AwaitStarts(2).size(), 2u);
  auto pause = Cli({"pause", "s"});
  ASSERT_EQ(pause.exit_code, 0) << pause.out << pause.err;
  EXPECT_THAT(pause.out, HasSubstr("paused: 2 trials running stopped"));
  EXPECT_EQ(Cli({"pause", "s"}).exit_code, 1) << "already paused";
  Json conditions = Conditions();
  EXPECT_EQ(conditions.back()["type"], "Paused");
  EXPECT_EQ(conditions.back()["reason"], "PausedByUser");

  auto resume = Cli({"resume", "s"});
  ASSERT_EQ(resume.exit_code, 0) << resume.out << resume.err;
  EXPECT_EQ(Reap(run), 0) << ReadFile(dir_ / "run.out");
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_EQ(trials[0].state, TrialState::kInterrupted);
  EXPECT_THAT(trials[0].error, HasSubstr("pause"));
  // Each stopped trial runs again (in the order they stopped), with its configuration.
  std::set<int> rerun;
  for (int n : {2, 3}) {
    EXPECT_EQ(trials[n].state, TrialState::kCompleted);
    ASSERT_TRUE(trials[n].retry_of.has_value());
    rerun.insert(*trials[n].retry_of);
    EXPECT_EQ(trials[n].params, trials[*trials[n].retry_of].params);
  }
  EXPECT_EQ(rerun, (std::set<int>{0, 1}));
  EXPECT_EQ(Cli({"wait", "s"}).exit_code, 0);
}

TEST_P(ControlTest, UpdateAndEnqueueChangeTheLiveRunAndLogsFollowATrial) {
  pid_t run = StartRun(Gated(1, 1));
  ASSERT_EQ(AwaitStarts(1), (std::vector<int>{0}));
  std::vector<std::string> follow = {HYPERPACK_CLI, "logs", "s", "0", "-f"};
  for (const std::string& a : Target()) follow.push_back(a);
  pid_t logs = testing::StartInBackground(follow, dir_.path().string(), dir_ / "logs.out");

  auto update = Cli({"update", "s", "--max-trials", "2"});
  ASSERT_EQ(update.exit_code, 0) << update.out << update.err;
  EXPECT_THAT(update.out, HasSubstr("max_trials 2"));
  EXPECT_EQ(Cli({"update", "s"}).exit_code, 2) << "nothing to update";
  auto outside = Cli({"enqueue", "s", "--params", R"({"x": 7})"});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_THAT(outside.err, HasSubstr("'x'"));
  auto enqueue = Cli({"enqueue", "s", "--params", R"({"x": 0.123})"});
  ASSERT_EQ(enqueue.exit_code, 0) << enqueue.out << enqueue.err;
  EXPECT_THAT(enqueue.out, HasSubstr("queued 1 configuration"));

  Go();
  EXPECT_EQ(Reap(run), 0) << ReadFile(dir_ / "run.out");
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[1].params.at("x"), Value{0.123});
  EXPECT_EQ(Reap(logs), 0);
  const std::string followed = ReadFile(dir_ / "logs.out");
  EXPECT_THAT(followed, HasSubstr("loss="));
  EXPECT_THAT(followed, HasSubstr("trial 0 completed"));
}

TEST_P(ControlTest, WithoutARunnerVerbsWaitForTheNextRunAndResultsAreStoredAtOnce) {
  // Trial 0 fails; trial 1 completes.
  ASSERT_EQ(RunToEnd(Study(2, 1, "    [ {trial} = 0 ] && exit 1; echo loss={x}")), 0)
      << ReadFile(dir_ / "run.out");
  ASSERT_EQ(Count(TrialState::kFailed), 1);
  const Config failed = Trials()[0].params;
  EXPECT_EQ(Cli({"stop", "s"}).exit_code, 1);
  auto retry = Cli({"retry", "s", "--failed"});
  ASSERT_EQ(retry.exit_code, 0) << retry.out << retry.err;
  EXPECT_THAT(retry.out, HasSubstr("run first when the study runs next"));

  WriteFile(dir_ / "r.csv", "x,loss\n0.25,0.0625\n0.5,0.25\n");
  auto added = Cli({"add-results", "s", dir_ / "r.csv"});
  ASSERT_EQ(added.exit_code, 0) << added.out << added.err;
  EXPECT_THAT(added.out, HasSubstr("added 2 trials as completed (2-3)"));
  WriteFile(dir_ / "bad.json", "[{\"x\": 0.1, \"loss\": 1},\n {\"x\": 3, \"loss\": 2}]");
  auto bad = Cli({"add-results", "s", dir_ / "bad.json"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("bad.json:2: parameter 'x'"));
  EXPECT_EQ(Trials().size(), 4u) << "a bad file stores nothing";

  ASSERT_EQ(Cli({"update", "s", "--max-trials", "6"}).exit_code, 0);
  ASSERT_EQ(RunToEnd(Study(2, 1, "    [ {trial} = 0 ] && exit 1; echo loss={x}")), 0)
      << ReadFile(dir_ / "run.out");
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[4].retry_of, 0) << "the retry runs first";
  EXPECT_EQ(trials[4].params, failed);
  EXPECT_EQ(trials[4].state, TrialState::kCompleted);
  EXPECT_EQ(Cli({"wait", "s"}).exit_code, 0);

  auto events = Cli({"logs", "s"});
  EXPECT_THAT(events.out, HasSubstr("control: add_results: added 2 trials"));
  EXPECT_THAT(events.out, HasSubstr("run_stopped: budget reached"));

  // Asked and told through the same door: the enqueued configuration goes out first.
  ASSERT_EQ(Cli({"enqueue", "s", "--params", R"({"x": 0.75})"}).exit_code, 0);
  auto asked = Cli({"ask", "s", "--json"});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  Json a = Json::parse(asked.out);
  EXPECT_EQ(a["params"]["x"], 0.75);
  const std::string number = std::to_string(a["trial"].get<int>());
  auto beat = Cli({"heartbeat", "s", number});
  EXPECT_EQ(beat.exit_code, 0) << beat.err;
  EXPECT_TRUE(Trials().back().heartbeat.has_value());
  auto told = Cli({"tell", "s", number, "--value", "0.5"});
  EXPECT_EQ(told.exit_code, 0) << told.err;
  EXPECT_EQ(Trials().back().state, TrialState::kCompleted);
  auto late = Cli({"heartbeat", "s", number});
  EXPECT_NE(late.exit_code, 0);
  EXPECT_THAT(late.err, HasSubstr("is not running: it is completed"));

  EXPECT_EQ(Cli({"delete", "s"}).exit_code, 2) << "--yes is required";
  auto deleted = Cli({"delete", "s", "--yes"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_TRUE(Trials().empty());
  auto gone = Cli({"wait", "s"});
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_THAT(gone.err, HasSubstr("no study named 's'"));
}

// A runner that does not answer has its control withdrawn: a late answer never surprises anyone.
TEST(ControlUnitTest, AControlARunnerDoesNotAnswerIsWithdrawn) {
  auto db = storage::OpenStorage("memory://withdrawn").value();
  storage::StudyRecord s;
  s.name = "s";
  s.spec_text =
      "name: s\nobjective: {metric: loss, direction: minimize}\nsearch_space: {x: {type: float, "
      "low: 0, high: 1}}\n";
  s.spec_path = "s.yaml";
  const int64_t id = db->CreateStudy(s).value().id;
  // This process stands for a runner that holds the study and never reads its controls.
  ASSERT_TRUE(db->SetRunner(id, getpid(), HostName()).ok());
  scheduler::ControlRequest r;
  r.verb = scheduler::Verb::kStop;
  r.study = "s";
  r.answer_within_s = 0.05;
  auto answer = scheduler::ApplyControl(*db, r);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_TRUE(answer->refused);
  EXPECT_THAT(answer->outcome, HasSubstr("did not answer"));
  EXPECT_TRUE(db->ListControls(id, /*pending_only=*/true)->empty());
  auto all = db->ListControls(id, false).value();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_TRUE(all[0].refused);
}

// A run that ends while a verb waits for its answer: the verb is carried out as without a runner
// (an update kept for the next run), not left to time out.
TEST(ControlUnitTest, AVerbAskedAsTheRunEndsIsCarriedOutAsWithoutARunner) {
  auto db = storage::OpenStorage("memory://run-ends").value();
  storage::StudyRecord s;
  s.name = "s";
  s.spec_text =
      "name: s\nobjective: {metric: loss, direction: minimize}\nsearch_space: {x: {type: float, "
      "low: 0, high: 1}}\n";
  const int64_t id = db->CreateStudy(s).value().id;
  ASSERT_TRUE(db->SetRunner(id, getpid(), HostName()).ok());
  Result<scheduler::ControlAnswer> answer = Status::Internal("not asked");
  std::thread asker([&] {
    auto own = storage::OpenStorage("memory://run-ends").value();
    scheduler::ControlRequest r;
    r.verb = scheduler::Verb::kUpdate;
    r.study = "s";
    r.max_trials = 9;
    r.answer_within_s = 60;
    answer = scheduler::ApplyControl(*own, r);
  });
  // Once the control is stored, the run "ends": its runner is cleared without reading it.
  while (db->ListControls(id, /*pending_only=*/true)->empty()) std::this_thread::yield();
  ASSERT_TRUE(db->SetRunner(id, std::nullopt, "").ok());
  asker.join();
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_FALSE(answer->refused) << answer->outcome;
  EXPECT_TRUE(answer->kept);
  auto all = db->ListControls(id, false).value();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].refused) << "the first is withdrawn";
  EXPECT_THAT(all[0].outcome, HasSubstr("the run ended before it read this"));
  EXPECT_FALSE(all[1].applied.has_value()) << "kept for the next run";
  EXPECT_EQ(all[1].max_trials, 9);
}

// A long study's event log comes in pieces a server's reply frame holds, and whole.
TEST(ControlUnitTest, ALongEventLogComesInPiecesThatFitAFrame) {
  auto db = storage::OpenStorage("memory://long-log").value();
  storage::StudyRecord s;
  s.name = "s";
  s.spec_text = "name: s\n";
  const int64_t id = db->CreateStudy(s).value().id;
  const std::string message(200, 'm');
  ASSERT_TRUE(db->Transaction([&] {
                  for (int i = 0; i < 3000; ++i)
                    HP_RETURN_IF_ERROR(db->AddEvent(id, {1.0 * i, i, "trial_started", message}));
                  return Status::Ok();
                }).ok());
  auto first = report::ReadLogs(*db, "s", std::nullopt, 0);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_LE(first->text.size(), 64u * 1024 + 300);
  EXPECT_FALSE(first->over) << "more is to come";
  std::ostringstream out;
  int reads = 0;
  ASSERT_TRUE(report::FollowLogs(
                  [&](int64_t from) {
                    ++reads;
                    return report::ReadLogs(*db, "s", std::nullopt, from);
                  },
                  /*follow=*/false, 0.1, nullptr, out)
                  .ok());
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3000);
  EXPECT_GE(reads, 10);
  EXPECT_THAT(text, HasSubstr("trial_started trial 2999: mmm"));
}

}  // namespace
}  // namespace hyperpack
