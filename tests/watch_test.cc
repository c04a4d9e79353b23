// `hyperpack status STUDY --watch`: its frames (report/src/watch.h) on records written here, the
// loop (WatchStudy) on a real database, and the command following a real run to its end.
#include "watch.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "http_util.h"
#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "test_util.h"

namespace hyperpack::report {
namespace {

using hyperpack::testing::Child;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using nlohmann::json;
using storage::MetricPoint;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSpec[] = R"(name: s
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.0001, high: 0.1, log: true}
  batch_size: {type: int, low: 16, high: 256}
trial: {command: "true"}
budget: {max_trials: 12, max_parallel: 4}
)";

TrialRecord Trial(int number, TrialState state, std::optional<double> value,
                  const std::string& placement = "") {
  TrialRecord t;
  t.number = number;
  t.state = state;
  t.value = value;
  t.params = {{"lr", 0.003}, {"batch_size", int64_t{64}}};
  t.started = 1000 + number;
  if (state != TrialState::kRunning) t.ended = 1100 + number;
  t.host = "localhost";
  t.placement = storage::DecodePlacement(placement);  // as a stored row reads
  return t;
}

MetricPoint Report(int64_t step, double value) { return {step, "loss", value, 1200}; }

// Four completed (trial 2 the best), one pruned, one paused, three running: trial 6 on two GPUs
// and a CPU slot, 7 on two CPU slots, 8 recorded without a placement and not reported yet.
WatchInput Input() {
  WatchInput in;
  in.study.name = "s";
  in.study.metric = "loss";
  in.study.direction = Direction::kMinimize;
  study::ParseOutcome parsed = study::ParseStudy(kSpec, "s.yaml");
  EXPECT_TRUE(parsed.errors.empty()) << parsed.ErrorText();
  in.spec = parsed.spec;
  in.state = RunnerState::kRunning;
  in.now = 1300;
  in.trials = {
      Trial(0, TrialState::kCompleted, 0.9),
      Trial(1, TrialState::kCompleted, 0.7),
      Trial(2, TrialState::kCompleted, 0.4123),
      Trial(3, TrialState::kCompleted, 0.8),
      Trial(4, TrialState::kPruned, 1.5),
      Trial(5, TrialState::kPaused, 1.1),
      Trial(6, TrialState::kRunning, std::nullopt,
            R"([{"host":"localhost","gpus":[0,1],"cpus":1}])"),
      Trial(7, TrialState::kRunning, std::nullopt, R"([{"host":"localhost","gpus":[],"cpus":2}])"),
      Trial(8, TrialState::kRunning, std::nullopt)};
  in.last_report[6] = Report(3, 0.512);
  in.last_report[7] = Report(11, 0.734);
  return in;
}

// The table's row of trial `number`, or "" when it has none.
std::string RowOf(const std::string& text, int number) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::string first;
    std::istringstream(line) >> first;
    if (first == std::to_string(number)) return line;
  }
  return "";
}

// A share of a GPU says how much of it the trial holds, in the table and in the JSON.
TEST(WatchTextTest, AShareOfAGpuSaysHowMuchOfItTheTrialHolds) {
  WatchInput in = Input();
  in.trials[6].placement =
      storage::DecodePlacement(R"([{"host":"localhost","gpus":[1],"cpus":1,"gpu_share":0.25}])");
  EXPECT_THAT(RowOf(WatchText(in), 6), HasSubstr("localhost gpus 1 (25% share, 1 cpu)"));
  const json j = json::parse(WatchJson(in).dump());
  EXPECT_EQ(j["running"][0]["placement"][0]["gpu_share"], 0.25);
  EXPECT_FALSE(
      json::parse(WatchJson(Input()).dump())["running"][0]["placement"][0].contains("gpu_share"));
}

TEST(WatchTextTest, SaysTheCountsTheBestAndTheBudget) {
  const std::string text = WatchText(Input());
  EXPECT_THAT(text, HasSubstr("s  running  elapsed 5:00"));
  EXPECT_THAT(text, HasSubstr("4 completed, 3 running, 1 paused, 1 pruned"));
  EXPECT_THAT(text, HasSubstr("[5/12 of the budget]"));  // paused ones are not finished
  EXPECT_THAT(text, HasSubstr("best     0.4123 (trial 2)  lr=0.003 batch_size=64"));
}

TEST(WatchTextTest, ShowsEachRunningTrialsLastReportAndWhereItRuns) {
  const std::string text = WatchText(Input());
  EXPECT_THAT(text, HasSubstr("trial  running  attempt  loss"));
  const std::string six = RowOf(text, 6), seven = RowOf(text, 7), eight = RowOf(text, 8);
  EXPECT_THAT(six, HasSubstr("0.512"));
  EXPECT_THAT(six, HasSubstr(" 3 "));
  EXPECT_THAT(six, HasSubstr("localhost gpus 0,1 (1 cpu)"));
  EXPECT_THAT(six, HasSubstr("4:54"));  // started at 1006, now 1300
  EXPECT_THAT(seven, HasSubstr("0.734"));
  EXPECT_THAT(seven, HasSubstr(" 11 "));
  EXPECT_THAT(seven, HasSubstr("localhost 2 cpus"));
  EXPECT_THAT(eight, HasSubstr("-"));
  EXPECT_EQ(RowOf(text, 5), "");  // paused: counted, not listed
}

TEST(WatchTextTest, SumsTheBusyGpusAndCpuSlotsFromThePlacements) {
  // A trial without a recorded placement counts as a trial, and holds nothing anyone knows of.
  EXPECT_THAT(WatchText(Input()), HasSubstr("busy     2 GPUs, 3 CPU slots (3 trials)"));
  WatchInput idle = Input();
  idle.trials.resize(6);
  idle.last_report.clear();
  EXPECT_THAT(WatchText(idle), HasSubstr("busy     nothing running"));
  // Without resources a trial holds no slot (only max_parallel bounds it): where, but no count.
  WatchInput bare = Input();
  bare.trials[6].placement = {{"vm", {}, 0}};
  bare.trials[7].placement = bare.trials[6].placement;
  const std::string text = WatchText(bare);
  EXPECT_THAT(text, HasSubstr("busy     3 trials\n"));
  EXPECT_THAT(RowOf(text, 6), ::testing::EndsWith("  vm"));
}

TEST(WatchTextTest, AStudyWithoutTrialsOrItsFileStillHasAFrame) {
  WatchInput in = Input();
  in.trials.clear();
  in.last_report.clear();
  in.spec.reset();
  in.state = RunnerState::kStopped;
  const std::string text = WatchText(in);
  EXPECT_THAT(text, HasSubstr("no trials yet"));
  EXPECT_THAT(text, HasSubstr("best     - (no completed trial yet)"));
  EXPECT_THAT(text, Not(HasSubstr("of the budget")));
  EXPECT_TRUE(WatchFinished(in));
}

TEST(WatchKeyTest, TheClockAloneChangesNothing) {
  WatchInput in = Input();
  const std::string key = WatchKey(in);
  in.now += 3600;
  EXPECT_EQ(WatchKey(in), key);
  EXPECT_NE(WatchText(in), WatchText(Input()));  // the clock and the elapsed times moved
}

TEST(WatchKeyTest, ANewReportTheCountsOrTheStateChangeIt) {
  const std::string key = WatchKey(Input());
  WatchInput stepped = Input();
  stepped.last_report[6] = Report(4, 0.512);
  EXPECT_NE(WatchKey(stepped), key);
  WatchInput valued = Input();
  valued.last_report[7] = Report(11, 0.7);
  EXPECT_NE(WatchKey(valued), key);
  WatchInput finished = Input();
  finished.trials[8].state = TrialState::kFailed;
  EXPECT_NE(WatchKey(finished), key);
  WatchInput done = Input();
  done.state = RunnerState::kStopped;
  EXPECT_NE(WatchKey(done), key);
}

TEST(WatchJsonTest, HoldsTheSameNumbersAsTheText) {
  const json j = json::parse(WatchJson(Input()).dump());
  EXPECT_EQ(j["study"], "s");
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["trials"]["completed"], 4);
  EXPECT_EQ(j["trials"]["running"], 3);
  EXPECT_EQ(j["trials"]["paused"], 1);
  EXPECT_EQ(j["max_trials"], 12);
  EXPECT_EQ(j["best"]["trial"], 2);
  EXPECT_DOUBLE_EQ(j["best"]["value"].get<double>(), 0.4123);
  EXPECT_EQ(j["best"]["params"]["batch_size"], 64);
  ASSERT_EQ(j["running"].size(), 3u);
  EXPECT_EQ(j["running"][0]["trial"], 6);
  EXPECT_EQ(j["running"][0]["attempt"], 1);
  EXPECT_DOUBLE_EQ(j["running"][0]["elapsed_s"].get<double>(), 294);
  EXPECT_DOUBLE_EQ(j["running"][0]["value"].get<double>(), 0.512);
  EXPECT_EQ(j["running"][0]["step"], 3);
  EXPECT_EQ(j["running"][0]["placement"][0]["gpus"], json::array({0, 1}));
  EXPECT_EQ(j["running"][1]["step"], 11);
  EXPECT_TRUE(j["running"][2]["value"].is_null());
  EXPECT_TRUE(j["running"][2]["step"].is_null());
  EXPECT_TRUE(j["running"][2]["placement"].is_null());
  EXPECT_EQ(j["busy"], json({{"gpus", 2}, {"cpus", 3}, {"trials", 3}}));
}

// ---- the loop, on a real database ----

class WatchStudyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = Storage::Open(dir_ / "h.db").value();
    storage::StudyRecord s;
    s.name = "s";
    s.spec_text = kSpec;
    s.spec_path = "s.yaml";
    s.direction = Direction::kMinimize;
    s.metric = "loss";
    s.created = WallNow();
    study_ = db_->CreateStudy(s).value();
    TrialRecord t = Trial(0, TrialState::kRunning, std::nullopt);
    t.study_id = study_.id;
    t.started = WallNow();
    ASSERT_TRUE(db_->InsertTrial(t).ok());
  }

  TempDir dir_;
  std::unique_ptr<Storage> db_;
  storage::StudyRecord study_;
};

TEST_F(WatchStudyTest, AStudyWithNoRunnerGetsOneFrame) {
  std::ostringstream out;
  WatchOptions o;
  o.stop = [] {
    ADD_FAILURE() << "it waited";
    return true;
  };
  ASSERT_TRUE(WatchStudy(*db_, "s", o, out).ok());
  EXPECT_THAT(out.str(), HasSubstr("s  stopped"));
  EXPECT_EQ(out.str().find("s  stopped"), out.str().rfind("s  stopped"));
}

TEST_F(WatchStudyTest, ARunnerThatDiedEndsTheWatch) {
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  ASSERT_TRUE(db_->SetRunner(study_.id, gone, HostName()).ok());
  std::ostringstream out;
  WatchOptions o;
  o.format = OutputFormat::kJson;
  ASSERT_TRUE(WatchStudy(*db_, "s", o, out).ok());
  EXPECT_EQ(json::parse(out.str())["state"], "stopped (runner died)");
}

TEST_F(WatchStudyTest, WritesAFrameToALogOnlyWhenSomethingChanged) {
  ASSERT_TRUE(db_->SetRunner(study_.id, getpid(), HostName()).ok());
  std::ostringstream out;
  WatchOptions o;
  o.interval_s = 0.001;
  int asked = 0;
  // The first wait brings a report; the frames after it say nothing new until stop.
  o.stop = [&] {
    if (++asked == 1) {
      MetricPoint p = Report(1, 0.5);
      EXPECT_TRUE(db_->AddMetrics(study_.id, 0, {&p, 1}).ok());
    }
    return asked == 20;
  };
  ASSERT_TRUE(WatchStudy(*db_, "s", o, out).ok());
  const std::string text = out.str();
  EXPECT_THAT(text, Not(HasSubstr("\x1b[")));
  size_t frames = 0;
  for (size_t at = 0; (at = text.find("s  running", at)) != std::string::npos; ++at) ++frames;
  EXPECT_EQ(frames, 2u) << text;
  EXPECT_THAT(text, HasSubstr("\n\ns  running"));  // frames apart by a blank line
  EXPECT_THAT(RowOf(text.substr(text.rfind("s  running")), 0), HasSubstr("0.5"));
  EXPECT_EQ(text.substr(text.size() - 2), "\n\n");  // stopped: a newline after the frame
}

TEST_F(WatchStudyTest, OnATerminalEveryFrameIsRedrawn) {
  ASSERT_TRUE(db_->SetRunner(study_.id, getpid(), HostName()).ok());
  std::ostringstream out;
  WatchOptions o;
  o.interval_s = 0.001;
  o.redraw = true;
  int frames_wanted = 3;
  o.stop = [&] {
    size_t frames = 0;
    for (size_t at = 0; (at = out.str().find("\x1b[H\x1b[2J", at)) != std::string::npos; ++at)
      ++frames;
    return static_cast<int>(frames) >= frames_wanted;
  };
  ASSERT_TRUE(WatchStudy(*db_, "s", o, out).ok());
  EXPECT_EQ(out.str().rfind("\x1b[H\x1b[2J", 0), 0u);
}

TEST_F(WatchStudyTest, RefusesAnIntervalOutOfRangeAndAStudyThatIsNotThere) {
  std::ostringstream out;
  for (double bad : {0.0, -1.0, 3601.0, std::nan("")}) {
    WatchOptions o;
    o.interval_s = bad;
    Status s = WatchStudy(*db_, "s", o, out);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("expected seconds in (0, 3600]"));
  }
  Status missing = WatchStudy(*db_, "t", WatchOptions(), out);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("no study named 't'"));
  EXPECT_EQ(out.str(), "");
}

// ---- the command, following a real run ----

// A line from the FIFO `fd` within `seconds`; "" when none came.
std::string ReadFifoLine(int fd, double seconds) {
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (char c;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    if (read(fd, &c, 1) != 1) return "";
    if (c == '\n') return line;
    line += c;
  }
}

TEST(WatchCommandTest, FollowsARunningTrialsReportsAndEndsWithTheStudy) {
  TempDir dir;
  const std::string db = dir / "h.db";
  ASSERT_EQ(mkfifo((dir / "started").c_str(), 0600), 0);
  // Reports step 1, says so, and waits (a minute at most) for the test's go.
  WriteFile(dir / "trial.sh",
            "echo '{\"step\": 1, \"loss\": 0.5}'\n"
            "echo started > " +
                dir / "started" +
                "\n"
                "i=0\n"
                "while [ ! -f " +
                dir / "go" +
                " ] && [ $i -lt 1200 ]; do\n"
                "  sleep 0.05; i=$((i+1))\n"
                "done\n"
                "echo '{\"step\": 2, \"loss\": 0.25}'\n");
  WriteFile(dir / "s.yaml",
            "name: s\n"
            "objective: {metric: loss, direction: minimize}\n"
            "search_space:\n"
            "  x: {type: float, low: 0, high: 1}\n"
            "trial: {command: \"sh " +
                dir / "trial.sh" +
                "\"}\n"
                "tuner: {algorithm: random, seed: 1}\n"
                "budget: {max_trials: 1, max_parallel: 1}\n");
  // Read-write: opening it does not wait for a writer.
  const int fifo = open((dir / "started").c_str(), O_RDWR);
  ASSERT_GE(fifo, 0);
  Child run({HYPERPACK_CLI, "run", dir / "s.yaml", "--storage", db}, dir.path().string());
  const std::string started = ReadFifoLine(fifo, 60);
  close(fifo);
  ASSERT_EQ(started, "started") << "the trial did not start";

  Child watch(
      {HYPERPACK_CLI, "status", "s", "--watch", "--interval", "0.1", "--json", "--storage", db});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto seconds_left = [&] {
    return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
  };
  bool reported = false;
  while (!reported && seconds_left() > 0) {
    auto line = watch.WaitForLine("{", seconds_left());
    if (!line) break;
    const json frame = json::parse(*line);
    ASSERT_EQ(frame["state"], "running") << *line;
    const json& running = frame["running"];
    reported = running.size() == 1 && running[0]["trial"] == 0 && running[0]["step"] == 1 &&
               running[0]["value"] == 0.5;
  }
  ASSERT_TRUE(reported) << watch.output();

  // Ctrl-C ends a watch between frames, with a newline and exit code 0.
  {
    Child text({HYPERPACK_CLI, "status", "s", "--watch", "--storage", db});
    ASSERT_TRUE(text.WaitForLine("s  running", seconds_left())) << text.output();
    EXPECT_EQ(text.Stop(SIGINT), 0) << text.output();
    EXPECT_THAT(text.output(), ::testing::EndsWith("\n\n"));
  }

  WriteFile(dir / "go", "");
  std::string last;
  while (auto line = watch.WaitForLine("{", seconds_left())) last = *line;
  ASSERT_GT(seconds_left(), 0) << "the watch did not end: " << watch.output();
  EXPECT_EQ(watch.Wait(), 0) << watch.output();
  const json frame = json::parse(last);
  EXPECT_EQ(frame["state"], "done") << last;
  EXPECT_EQ(frame["trials"], json({{"completed", 1}})) << last;
  EXPECT_EQ(frame["best"]["trial"], 0);
  EXPECT_EQ(frame["best"]["value"], 0.25);
  EXPECT_TRUE(frame["running"].empty());
  EXPECT_EQ(run.Wait(), 0) << run.output();

  // Watching a study that has ended: one frame, and done.
  auto once = RunCommand({HYPERPACK_CLI, "status", "s", "--watch", "--storage", db});
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_THAT(once.out, HasSubstr("s  done"));
  EXPECT_THAT(once.out, HasSubstr("1 completed"));
}

TEST(WatchCommandTest, ItsFlagsAreCheckedWithClearErrors) {
  TempDir dir;
  const std::string db = dir / "h.db";
  ASSERT_TRUE(Storage::Open(db).ok());
  auto no_study = RunCommand({HYPERPACK_CLI, "status", "--watch", "--storage", db});
  EXPECT_EQ(no_study.exit_code, 2);
  EXPECT_THAT(no_study.err, HasSubstr("--watch follows one study"));
  auto zero =
      RunCommand({HYPERPACK_CLI, "status", "s", "--watch", "--interval", "0", "--storage", db});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_THAT(zero.err, HasSubstr("--interval 0 is out of range"));
  auto alone = RunCommand({HYPERPACK_CLI, "status", "s", "--interval", "5", "--storage", db});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_THAT(alone.err, HasSubstr("--interval goes with --watch"));
  auto missing = RunCommand({HYPERPACK_CLI, "status", "s", "--watch", "--storage", db});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("no study named 's'"));
}

}  // namespace
}  // namespace hyperpack::report
