// The chaos test: a server and three agents on loopback run a study of short checkpointing
// trials while a seeded script SIGKILLs and SIGSTOPs/SIGCONTs the agents and the server at random
// moments. Afterwards the study must have finished with every trial ended once in a final state,
// the completed values equal to the objective's, no two attempts of a trial running at once, and
// re-runs resumed from their checkpoints.
//
// A second test runs the same script with a standby: two servers on one PostgreSQL database, where
// killing the leader hands the study to the standby. HYPERPACK_CHAOS_SEED (default 1) and
// HYPERPACK_CHAOS_FAULTS (default 8) choose the script; bench/chaos.sh runs many seeds. The test
// prints one JSON line of what it injected and measured.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>

#include "hyperpack/host.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "local_postgres.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::ReadFile;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using Clock = std::chrono::steady_clock;

// A child process whose output a thread collects, so that nothing blocks on a full pipe and the
// test can wait for a line.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& cwd) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      if (chdir(cwd.c_str()) != 0) _exit(126);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        text_.append(buf, n);
        cv_.notify_all();
      }
      close(fd);
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      cv_.notify_all();
    });
  }
  ~Process() {
    Signal(SIGCONT);
    Signal(SIGKILL);
    Reap();
    if (reader_.joinable()) reader_.join();
  }
  Process(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool alive() const { return pid_ > 0 && !reaped_; }
  void Signal(int sig) {
    if (alive()) kill(pid_, sig);
  }
  // Waits for it to end; its wait status.
  int Reap() {
    if (pid_ <= 0 || reaped_) return status_;
    while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    return status_;
  }
  // Waits until its output holds `text` after `from`, for at most `limit`; the offset after it,
  // or npos when the output ended or the time ran out first, so that a process that never says
  // it fails the test with what it did say instead of holding it until ctest's timeout.
  size_t WaitFor(const std::string& text, size_t from = 0,
                 std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto deadline = Clock::now() + limit;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      size_t at = text_.find(text, from);
      if (at != std::string::npos) return at + text.size();
      if (closed_ || Clock::now() >= deadline) return std::string::npos;
      cv_.wait_until(lock, deadline);
    }
  }
  std::string Output() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string text_;
  bool closed_ = false;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// The objective, as the trial script computes it.
double Objective(double x) { return (x - 0.3) * (x - 0.3); }

// Checkpoints every step (written, then renamed) and resumes from the last; holds a lock on the
// trial's checkpoint folder while it runs, so a second attempt running at the same time is seen.
constexpr char kTrialScript[] = R"(#!/bin/sh
ck="$HYPERPACK_CHECKPOINT_DIR"
exec 9>"$ck/lock"
if ! flock -n 9; then
  echo "trial $HYPERPACK_TRIAL_ID attempt $HYPERPACK_TRIAL_ATTEMPT" >> "$OVERLAPS"
  exit 5
fi
step=0
[ -f "$ck/step" ] && step=$(cat "$ck/step")
echo "start $HYPERPACK_TRIAL_ATTEMPT $step" >> "$ck/history"
while [ "$step" -lt 5 ]; do
  sleep 0.1
  step=$((step + 1))
  echo "$step" > "$ck/step.tmp" && mv "$ck/step.tmp" "$ck/step"
  echo "done $HYPERPACK_TRIAL_ATTEMPT $step" >> "$ck/history"
done
awk -v x="$1" 'BEGIN { printf "{\"loss\": %.9f}\n", (x - 0.3) * (x - 0.3) }'
)";

class ChaosTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = dir_ / "token";
    WriteFile(token_, "0123456789abcdef-shared-secret\n");
    chmod(token_.c_str(), 0600);
    storage_ = dir_ / "h.db";
    addresses_ = {StrCat("127.0.0.1:", FreeLoopbackPort())};
    setenv("OVERLAPS", (dir_ / "overlaps").c_str(), 1);
  }

  // Every server's address, as agents and the client are given them.
  std::string Addresses() const { return Join(addresses_, ","); }

  // Starts server `i` and waits until its output says `expect` ("listening on", or "another
  // server leads" for a standby).
  void StartServer(size_t i, const std::string& expect = "listening on") {
    servers_.resize(addresses_.size());
    servers_[i] = std::make_unique<Process>(
        std::vector<std::string>{HYPERPACK_CLI, "serve", "--listen", addresses_[i], "--token-file",
                                 token_, "--storage", storage_, "--heartbeat-timeout", "1.5"},
        dir_.path().string());
    ASSERT_NE(servers_[i]->WaitFor(expect), std::string::npos)
        << "server " << i << " did not say \"" << expect << "\" within 60 s, or ended\n"
        << servers_[i]->Output();
  }
  std::unique_ptr<Process> StartAgent(int i) {
    return std::make_unique<Process>(
        std::vector<std::string>{HYPERPACK_CLI, "agent", "--connect", Addresses(), "--token-file",
                                 token_, "--name", StrCat("c", i), "--fake-gpus", "1",
                                 "--heartbeat", "0.15"},
        dir_.path().string());
  }

  // The leading server is killed. Alone, it is started again on the same storage after at most
  // 0.5 s; with a standby, that one takes over, and the killed one comes back `undo_s` later as
  // the standby.
  void KillLeader(double undo_s) {
    servers_[leader_]->Signal(SIGKILL);
    servers_[leader_]->Reap();
    if (servers_.size() == 1) {
      Pause(std::min(undo_s, 0.5));
      StartServer(0);
      return;
    }
    const size_t other = 1 - leader_;
    ASSERT_NE(servers_[other]->WaitFor("listening on"), std::string::npos)
        << "the standby did not take over (\"listening on\") within 60 s\n"
        << servers_[other]->Output();
    Pause(undo_s);
    StartServer(leader_, "another server leads");
    leader_ = other;
  }

  static void Pause(double s) {
    std::this_thread::sleep_for(std::chrono::duration<double>(s));  // the fault schedule
  }

  // The script: a fault every 0.3 to 1.2 s, each undone (restarted, continued) 0.1 to 2.5 s later
  // (past the heartbeat timeout sometimes), while the client still runs. What it injected, by
  // kind.
  std::map<std::string, int> InjectFaults(Process& client, int seed, int max_faults) {
    std::mt19937 rng(seed);
    auto uniform = [&](double lo, double hi) {
      return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    std::map<std::string, int> injected;
    for (int fault = 0; fault < max_faults && !HasFatalFailure(); ++fault) {
      Pause(uniform(0.3, 1.2));
      if (waitpid(client.pid(), nullptr, WNOHANG) != 0) break;  // done (or gone): no more faults
      const int what = std::uniform_int_distribution<int>(0, 9)(rng);
      const double undo = uniform(0.1, 2.5);
      const int agent = std::uniform_int_distribution<int>(0, 2)(rng);
      if (what < 4) {  // an agent is killed and comes back
        agents_[agent]->Signal(SIGKILL);
        agents_[agent]->Reap();
        ++injected["agent_kill"];
        Pause(undo);
        agents_[agent] = StartAgent(agent);
      } else if (what < 7) {  // an agent stops and continues
        agents_[agent]->Signal(SIGSTOP);
        ++injected["agent_stop"];
        Pause(undo);
        agents_[agent]->Signal(SIGCONT);
      } else if (what < 9) {  // the leading server is killed
        ++injected["server_kill"];
        KillLeader(undo);
      } else {  // the leading server stops and continues
        servers_[leader_]->Signal(SIGSTOP);
        ++injected["server_stop"];
        Pause(undo);
        servers_[leader_]->Signal(SIGCONT);
      }
    }
    return injected;
  }

  void RunStudyUnderChaos();

  TempDir dir_;
  std::string token_;
  std::string storage_;  // a SQLite file, or postgresql://...
  std::vector<std::string> addresses_;
  std::vector<std::unique_ptr<Process>> servers_;
  size_t leader_ = 0;
  std::vector<std::unique_ptr<Process>> agents_;
};

TEST_F(ChaosTest, AStudySurvivesKilledAndStoppedAgentsAndServer) {
  StartServer(0);
  if (HasFatalFailure()) return;
  RunStudyUnderChaos();
}

#ifdef HYPERPACK_WITH_POSTGRES
// The same script with two servers on one PostgreSQL database: the leader, and a standby that
// takes over whenever the leader is killed (which then comes back as the standby). Agents and the
// client are given both addresses.
TEST_F(ChaosTest, AStudySurvivesLeaderKillsWithAStandbyOnPostgreSQL) {
  std::string error;
  auto postgres = testing::LocalPostgres::Start(&error);
  if (!postgres && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(postgres, nullptr) << error;
  storage_ = postgres->NewDatabase("chaos", &error);
  ASSERT_FALSE(storage_.empty()) << error;
  addresses_.push_back(StrCat("127.0.0.1:", FreeLoopbackPort()));
  StartServer(0);
  if (HasFatalFailure()) return;
  StartServer(1, "another server leads");
  if (HasFatalFailure()) return;
  RunStudyUnderChaos();
  servers_.clear();  // before the database goes
  agents_.clear();
}
#endif

// What the stored trials of a chaos study show: each root trial's completions and the
// checkpoint folder its attempts share, and how long each trial lost with its node waited to
// run again.
struct TrialTally {
  std::map<int, int> completed_per_root;
  std::map<int, std::string> checkpoint_of_root;
  std::vector<double> relaunch_s;

  int Completed() const {
    int n = 0;
    for (const auto& [root, count] : completed_per_root) n += count;
    return n;
  }
};

// Every trial ended once, in a final state; the completed ones with the objective's value.
void TallyTrials(const std::vector<storage::TrialRecord>& trials, TrialTally* tally) {
  std::map<int, int> root_of;
  for (const auto& t : trials) {
    root_of[t.number] = t.retry_of ? root_of[*t.retry_of] : t.number;
    EXPECT_TRUE(storage::IsFinished(t.state) || t.state == storage::TrialState::kInterrupted ||
                t.state == storage::TrialState::kNodeLost)
        << "trial " << t.number << " is " << storage::TrialStateName(t.state);
    if (t.retry_of) {
      const auto& lost = trials[*t.retry_of];
      if (lost.state == storage::TrialState::kNodeLost && lost.ended && t.started)
        tally->relaunch_s.push_back(*t.started - *lost.ended);
    }
    if (t.state != storage::TrialState::kCompleted) continue;
    ++tally->completed_per_root[root_of[t.number]];
    ASSERT_TRUE(t.value.has_value());
    EXPECT_NEAR(*t.value, Objective(std::get<double>(t.params.at("x"))), 1e-8) << t.number;
    char root_dir[32];
    std::snprintf(root_dir, sizeof(root_dir), "trial-%04d", root_of[t.number]);
    tally->checkpoint_of_root[root_of[t.number]] =
        (std::filesystem::path(t.log_path).parent_path().parent_path() / root_dir / "checkpoint")
            .string();
  }
}

// Every attempt started from the last checkpoint an earlier one left, never from scratch: how
// many attempts resumed from one.
int CheckResumes(const std::map<int, std::string>& checkpoint_of_root) {
  int resumed = 0;
  for (const auto& [root, ck] : checkpoint_of_root) {
    std::istringstream history(ReadFile(ck + "/history"));
    int best_step = 0;
    std::string kind;
    int attempt, step;
    while (history >> kind >> attempt >> step) {
      if (kind == "start") {
        EXPECT_GE(step, best_step) << "trial " << root << " attempt " << attempt << ": " << ck;
        if (step > 0) ++resumed;
      }
      // A start counts too: an attempt killed between saving step 5 and logging it leaves the
      // next one to start at 5 and finish at once.
      best_step = std::max(best_step, step);
    }
    EXPECT_EQ(best_step, 5) << ck;
  }
  return resumed;
}

// Reaps the client; a study that never ends is a failure, not a hang: the client is killed after
// `limit`.
int ReapWithin(Process& client, std::chrono::seconds limit) {
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool done = false;
  std::thread guard([&] {
    std::unique_lock<std::mutex> lock(done_mu);
    if (!done_cv.wait_for(lock, limit, [&] { return done; })) client.Signal(SIGKILL);
  });
  const int status = client.Reap();
  {
    std::lock_guard<std::mutex> lock(done_mu);
    done = true;
  }
  done_cv.notify_all();
  guard.join();
  return status;
}

// Each trial's number, state, attempt and error: what a failed count shows.
std::string TrialStates(const std::vector<storage::TrialRecord>& trials) {
  std::string states;
  for (const auto& t : trials)
    states += StrCat(t.number, " ", storage::TrialStateName(t.state), " attempt ", t.attempt, " ",
                     t.error.substr(0, 200), "\n");
  return states;
}

// The run in one line of JSON: its faults, its trials and how they came back.
void PrintSummary(int seed, size_t servers, const std::map<std::string, int>& injected,
                  const std::vector<storage::TrialRecord>& trials, int resumed,
                  std::vector<double> relaunch_s) {
  // Attempts that found an earlier one still running and waited for its lock (its fence was
  // late): what would have overlapped without the attempt lock.
  int waited = 0;
  for (const auto& t : trials)
    if (ReadFile(t.log_path).find("an earlier attempt of this trial still runs") !=
        std::string::npos)
      ++waited;
  std::sort(relaunch_s.begin(), relaunch_s.end());
  nlohmann::json summary = {{"seed", seed},
                            {"servers", servers},
                            {"faults", injected},
                            {"trials", trials.size()},
                            {"attempts_resumed_from_checkpoint", resumed},
                            {"attempts_waited_for_lock", waited},
                            {"node_lost_relaunches", relaunch_s.size()}};
  if (!relaunch_s.empty()) {
    summary["relaunch_median_s"] = relaunch_s[relaunch_s.size() / 2];
    summary["relaunch_max_s"] = relaunch_s.back();
  }
  std::cout << "chaos: " << summary.dump() << std::endl;
}

// A study of kTrials checkpointing trials run through the servers while faults are injected;
// then every check of the file's header comment.
void ChaosTest::RunStudyUnderChaos() {
  const int seed = EnvInt("HYPERPACK_CHAOS_SEED", 1);
  const int max_faults = EnvInt("HYPERPACK_CHAOS_FAULTS", 8);
  constexpr int kTrials = 30;
  WriteFile(dir_ / "trial.sh", kTrialScript, true);
  WriteFile(dir_ / "study.yaml",
            StrCat(R"(name: chaos
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                   dir_ / "trial.sh", R"( {x}"}
tuner: {algorithm: random, seed: )",
                   seed, R"(}
budget: {max_trials: )",
                   kTrials, R"(, max_parallel: 3, max_attempts: 20, max_failed: 1000}
resources: {gpus: 1}
)"));
  for (int i = 0; i < 3; ++i) agents_.push_back(StartAgent(i));
  Process client(
      {HYPERPACK_CLI, "run", dir_ / "study.yaml", "--server", Addresses(), "--token-file", token_},
      dir_.path().string());
  ASSERT_NE(client.WaitFor("started"), std::string::npos)
      << "the client did not say \"started\" within 60 s, or ended\n"
      << client.Output();
  const std::map<std::string, int> injected = InjectFaults(client, seed, max_faults);
  if (HasFatalFailure()) return;  // ~Process stops the client, the agents and the servers
  const int status = ReapWithin(client, std::chrono::seconds(90));
  const std::string out = client.Output();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << out;
  EXPECT_THAT(out, ::testing::HasSubstr("budget reached"));

  auto db = storage::OpenStorage(storage_).value();
  auto study = db->FindStudy("chaos").value();
  ASSERT_TRUE(study.has_value());
  auto trials = db->ListTrials(study->id).value();
  TrialTally tally;
  TallyTrials(trials, &tally);
  if (HasFatalFailure()) return;
  EXPECT_EQ(tally.Completed(), kTrials) << out << "\n" << TrialStates(trials);
  for (const auto& [root, n] : tally.completed_per_root) EXPECT_EQ(n, 1) << "root " << root;

  // No two attempts of a trial ran at once.
  EXPECT_EQ(ReadFile(dir_ / "overlaps"), "");
  const int resumed = CheckResumes(tally.checkpoint_of_root);

  PrintSummary(seed, servers_.size(), injected, trials, resumed, std::move(tally.relaunch_s));
}

}  // namespace
}  // namespace hyperpack
