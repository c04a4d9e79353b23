// The `hyperpack` binary itself: exit codes, output that programs read, and runs that are
// interrupted or killed and then resumed.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "hyperpack/storage/storage.h"
#include "hyperpack/text.h"
#include "local_postgres.h"
#include "test_util.h"

namespace hyperpack {
namespace {

using hyperpack::testing::ExitsWithin;
using hyperpack::testing::ReadFile;
using hyperpack::testing::RunCommand;
using hyperpack::testing::TempDir;
using hyperpack::testing::WriteFile;
using ::testing::HasSubstr;
using Json = nlohmann::json;

class CliTest : public ::testing::Test {
 protected:
  testing::Ran Cli(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    return RunCommand(args, dir_.path().string());
  }

  // Starts `hyperpack ARGS` in the background, output to bg.out in the test directory.
  pid_t Start(std::vector<std::string> args) {
    args.insert(args.begin(), HYPERPACK_CLI);
    return testing::StartInBackground(args, dir_.path().string(), dir_ / "bg.out");
  }

  static int Wait(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Reads `n` newline-terminated tokens from a FIFO that trials write to when they start.
  // Opened read-write so that it neither blocks on open nor sees end-of-file between writers.
  std::vector<std::string> AwaitStarts(const std::string& fifo, int n) {
    if (fifo_fd_ < 0) fifo_fd_ = open(fifo.c_str(), O_RDWR);
    std::vector<std::string> tokens;
    std::string buf;
    char c;
    while (static_cast<int>(tokens.size()) < n && read(fifo_fd_, &c, 1) == 1) {
      if (c == '\n') {
        tokens.push_back(buf);
        buf.clear();
      } else {
        buf += c;
      }
    }
    return tokens;
  }

  void TearDown() override {
    if (fifo_fd_ >= 0) close(fifo_fd_);
  }

  // Runs kQuickStudy on db_ and checks what every read command says of it.
  void ExpectReadCommandsAgree();
  // Runs study "f": 8 trials of x, the last two finalists; an odd trial's draw is 0.5 worse, so a
  // configuration's two runs differ. Each configuration's values, by x; *out the run's output.
  std::map<double, std::vector<double>> RunFinalistsStudy(std::string* out);

  std::string WriteStudy(const std::string& name, const std::string& yaml) {
    std::string path = dir_ / name;
    WriteFile(path, yaml);
    return path;
  }

  std::vector<storage::TrialRecord> Trials(const std::string& study = "s") {
    auto db = storage::Storage::Open(db_).value();
    auto found = db->FindStudy(study).value();
    if (!found) return {};
    return db->ListTrials(found->id).value();
  }

  TempDir dir_;
  std::string db_ = dir_ / "h.db";
  int fifo_fd_ = -1;
};

constexpr char kQuickStudy[] = R"(
name: s
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  opt: {type: categorical, values: [sgd, adam]}
trial: {command: "echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 5, max_parallel: 2}
)";

TEST_F(CliTest, NoCommandOrAnUnknownOneIsAUsageError) {
  auto none = Cli({});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("usage: hyperpack COMMAND"));
  auto unknown = Cli({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'frobnicate'"));
}

TEST_F(CliTest, EveryCommandHasHelp) {
  EXPECT_EQ(Cli({"--help"}).exit_code, 0);
  for (const char* cmd :
       {"run", "validate", "status", "trials", "best", "export", "create", "ask", "tell"}) {
    auto r = Cli({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_THAT(r.out, HasSubstr(std::string("hyperpack ") + cmd)) << cmd;
  }
}

TEST_F(CliTest, AnUnknownFlagOrAMissingArgumentIsAUsageError) {
  auto flag = Cli({"status", "--no-such-flag"});
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_THAT(flag.err, HasSubstr("no-such-flag"));
  EXPECT_EQ(Cli({"best"}).exit_code, 2);
  EXPECT_EQ(Cli({"run"}).exit_code, 2);
}

TEST_F(CliTest, SimulateTakesTheRunnersRelativeGuardAndRefusesANegativeOne) {
  const std::string trace = dir_ / "w.csv";
  ASSERT_EQ(Cli({"simulate", "--generate", "tuning", "--jobs", "200", "-o", trace}).exit_code, 0);
  auto guarded = Cli({"simulate", "--trace", trace, "--cluster", "4x8", "--order", "sjf", "--aging",
                      "0", "--guard-factor", "6", "--json"});
  ASSERT_EQ(guarded.exit_code, 0) << guarded.err;
  EXPECT_EQ(nlohmann::json::parse(guarded.out)["guard_factor"], 6.0);
  auto table = Cli({"simulate", "--trace", trace, "--order", "sjf", "--guard-factor", "6"});
  EXPECT_THAT(table.out, HasSubstr("max wait 6x the typical run time"));
  auto negative = Cli({"simulate", "--trace", trace, "--guard-factor", "-1"});
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_THAT(negative.err, HasSubstr("--guard-factor: -1; expected a number >= 0"));
}

TEST_F(CliTest, ValidatePrintsTheSpaceOrEveryErrorWithItsPosition) {
  std::string good = WriteStudy("good.yaml", kQuickStudy);
  auto ok = Cli({"validate", good});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("x: float [0, 1]"));
  EXPECT_THAT(ok.out, HasSubstr("opt: categorical {sgd, adam}"));

  std::string bad = WriteStudy("bad.yaml", R"(name: s
objective: {metric: loss, direction: minimise}
search_space:
  lr: {type: float, low: 0.0, high: 0.1, log: true}
trial: {command: "train --lr {lr}"}
)");
  auto r = Cli({"validate", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(bad + ":2:"));
  EXPECT_THAT(r.err, HasSubstr("objective.direction"));
  EXPECT_THAT(r.err, HasSubstr("'minimize'"));
  EXPECT_THAT(r.err, HasSubstr(bad + ":4:"));
  EXPECT_THAT(r.err, HasSubstr("search_space.lr.low: must be > 0 when log: true"));
  EXPECT_THAT(r.err, HasSubstr("2 errors"));
}

// batch's step leaves only the value 16: valid, with a warning at line 5, column 47.
constexpr char kOneValueStudy[] = R"(name: s
objective: {metric: loss, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  batch: {type: int, low: 16, high: 32, step: 64}
trial: {command: "echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 2}
)";

TEST_F(CliTest, ValidatePrintsWarningsOnStderrAndStillSucceeds) {
  std::string path = WriteStudy("one.yaml", kOneValueStudy);
  auto r = Cli({"validate", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(path + ": ok"));
  EXPECT_THAT(r.err,
              HasSubstr(path + ":5:47: search_space.batch: warning: step 64 leaves one value (16) "
                               "between low 16 and high 32"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("warning")));
}

TEST_F(CliTest, RunPrintsWarningsAndRunsTheStudy) {
  std::string path = WriteStudy("one.yaml", kOneValueStudy);
  auto r = Cli({"run", path, "--storage", db_});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.err, HasSubstr(path + ":5:47: search_space.batch: warning: step 64"));
  EXPECT_THAT(r.out, HasSubstr("budget reached"));
  EXPECT_EQ(Trials().size(), 2u);
}

TEST_F(CliTest, ValidatePrintsWarningsBesideErrors) {
  std::string study = kOneValueStudy;
  study.replace(study.find("minimize"), 8, "minimise");
  std::string path = WriteStudy("both.yaml", study);
  auto r = Cli({"validate", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ":5:47: search_space.batch: warning: step 64"));
  EXPECT_THAT(r.err, HasSubstr("objective.direction"));
  EXPECT_THAT(r.err, HasSubstr("1 error in " + path));
}

TEST_F(CliTest, ABadStudyFileStopsRunBeforeAnythingIsStored) {
  ASSERT_EQ(Cli({"run", WriteStudy("s.yaml", kQuickStudy), "--storage", db_}).exit_code, 0);
  std::string before = ReadFile(db_);
  std::string broken = WriteStudy("broken.yaml", "name: s\nobjective: [oops\n");
  auto r = Cli({"run", broken, "--storage", db_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(broken + ":"));
  EXPECT_EQ(ReadFile(db_), before);
  // Another space under the same name is refused too, and the stored study stays as it was.
  std::string changed = kQuickStudy;
  changed.replace(changed.find("high: 1"), 7, "high: 9");
  auto r2 = Cli({"run", WriteStudy("changed.yaml", changed), "--storage", db_});
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_THAT(r2.err, HasSubstr("different search space"));
  EXPECT_EQ(Trials().size(), 5u);
}

TEST_F(CliTest, ReadCommandsPrintTablesAndJsonThatParses) { ExpectReadCommandsAgree(); }

// Two objectives and a constraint, run for real: each trial keeps every objective's and the
// constraint's value, one that never reports an objective fails saying which, and `best` prints
// the Pareto set of the trials that meet the constraint, which `trials` marks.
// Promote mode with two objectives: a trial paused at its rung and run again keeps the values it
// reported before the pause, so a `min` strategy still sees its first epoch's value.
TEST_F(CliTest, APromotedTrialKeepsTheValuesItReportedBeforeItsPause) {
  // b's least value comes at epoch 1, before the pause at rung 1; the resumed run reports more.
  // a's value is the mean of its last four reports: all four epochs, across the pause.
  WriteFile(dir_ / "f.sh", R"sh(ck="$HYPERPACK_CHECKPOINT_DIR/state"
e=0
if [ "$HYPERPACK_RESUME" = 1 ] && [ -f "$ck" ]; then e=$(cat "$ck"); fi
echo "$HYPERPACK_TRIAL_ID $((e + 1))" >> starts
while [ $e -lt 4 ]; do
  e=$((e + 1))
  mkdir -p "$HYPERPACK_CHECKPOINT_DIR"; echo $e > "$ck"
  awk -v x="$1" -v e=$e 'BEGIN { printf "{\"epoch\": %d, \"a\": %.6f, \"b\": %.6f}\n", e, x + 1 / e, (e == 1 ? 0.5 - x : 1 - x) }'
  if [ -n "$HYPERPACK_STOP_AT" ] && [ $e -ge "$HYPERPACK_STOP_AT" ]; then exit 0; fi
done)sh");
  std::string path = WriteStudy("promote.yaml", R"(name: s
objectives:
  - {metric: a, direction: minimize, strategy: last-4-avg}
  - {metric: b, direction: minimize, strategy: min}
search_space:
  x: {type: float, low: 0, high: 1}
trial: {command: "sh f.sh {x}"}
tuner: {algorithm: sobol, seed: 4}
budget: {max_trials: 4}
pruner: {algorithm: asha, min_resource: 1, max_resource: 4, reduction_factor: 2, mode: promote,
         in_place: false}
)");
  auto r = Cli({"run", path, "--storage", db_});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string starts = ReadFile(dir_ / "starts");
  int resumed = 0;
  for (const storage::TrialRecord& t : Trials()) {
    if (t.state != storage::TrialState::kCompleted) continue;
    // Started again from a checkpoint: a line "N E" with E > 1.
    if (starts.find(StrCat(t.number, " 1\n")) == std::string::npos ||
        starts.find(StrCat(t.number, " 2\n")) == std::string::npos)
      continue;
    ++resumed;
    const double x = std::get<double>(t.params.at("x"));
    EXPECT_NEAR(t.values.at("b"), 0.5 - x, 1e-5) << "trial " << t.number << "\n" << starts;
    EXPECT_NEAR(t.values.at("a"), x + (1 + 1 / 2. + 1 / 3. + 1 / 4.) / 4, 1e-5) << t.number;
  }
  EXPECT_GT(resumed, 0) << starts << r.out;
}

// hyperpack's own cost as an objective: a trial that holds 2 CPU slots costs twice its run time,
// and the value it keeps is that cost, which a trial never reports itself.
TEST_F(CliTest, CostAsAnObjectiveIsTheTrialsRunTimeTimesTheSlotsItHeld) {
  std::string path = WriteStudy("cost.yaml", R"(name: s
objectives:
  - {metric: loss, direction: minimize}
  - {metric: cost, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
trial: {command: "sleep 0.3; echo '{{\"loss\": {x}}}'"}
resources: {cpus: 2}
tuner: {algorithm: sobol, seed: 1}
budget: {max_trials: 3}
)");
  auto r = Cli({"run", path, "--storage", db_});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const storage::TrialRecord& t : Trials()) {
    ASSERT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    ASSERT_TRUE(t.values.count("cost")) << t.number;
    const double ran = *t.ended - *t.started;
    EXPECT_GT(t.values.at("cost"), 2 * 0.3);
    // The controller's clock and the stored times differ by the writes between them.
    EXPECT_NEAR(t.values.at("cost"), 2 * ran, 0.1) << t.number;
  }
}

// Early stopping with two objectives, for real: each report reaches the pruner with both values
// (kept in the journal, which a resumed run replays), and a trial stopped at a rung is stopped
// for its non-dominated front there.
TEST_F(CliTest, AshaWithTwoObjectivesRanksRungsByFrontAndJournalsBothValues) {
  // a and b trade off along x; y only makes b worse: trials with a large y are dominated.
  WriteFile(dir_ / "f.sh", R"(awk -v x="$1" -v y="$2" 'BEGIN {
  for (e = 1; e <= 4; e++) printf "epoch=%d a=%.6f b=%.6f\n", e, x + 1 / e, 1 - x + y + 1 / e }')");
  std::string path = WriteStudy("mo.yaml", R"(name: s
objectives:
  - {metric: a, direction: minimize}
  - {metric: b, direction: minimize}
search_space:
  x: {type: float, low: 0, high: 1}
  y: {type: float, low: 0, high: 1}
trial: {command: "sh f.sh {x} {y}"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 12}
pruner: {algorithm: asha, min_resource: 1, max_resource: 4, reduction_factor: 2}
)");
  ASSERT_EQ(Cli({"run", path, "--storage", db_, "--max-trials", "6"}).exit_code, 0);
  auto r = Cli({"run", path, "--storage", db_});  // resumed: the journal replayed
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  int pruned = 0, completed = 0;
  for (const storage::TrialRecord& t : Trials()) {
    if (t.state == storage::TrialState::kPruned) {
      ++pruned;
      EXPECT_THAT(t.error, HasSubstr("is in non-dominated front")) << t.number;
    }
    completed += t.state == storage::TrialState::kCompleted;
  }
  EXPECT_GT(pruned, 0);
  EXPECT_GT(completed, 0);
  auto db = storage::Storage::Open(db_).value();
  const int64_t id = db->FindStudy("s").value()->id;
  const auto trials = Trials();
  int reports = 0;
  const std::vector<storage::JournalEntry> journal = db->ListJournal(id).value();
  for (const storage::JournalEntry& e : journal) {
    if (e.kind != storage::JournalKind::kReport) continue;
    ++reports;
    ASSERT_EQ(e.values.size(), 2u);
    const double x = std::get<double>(trials[e.trial].params.at("x"));
    EXPECT_NEAR(e.values[0], x + 1 / e.resource, 1e-5);
    EXPECT_EQ(e.values[0], e.value);
  }
  EXPECT_GE(reports, 12);
}

TEST_F(CliTest, ATwoObjectiveStudyStoresEachValueAndBestPrintsItsParetoSet) {
  // b is left out where x >= 0.8: those trials report one objective of two.
  WriteFile(dir_ / "f.sh", R"(awk -v x="$1" -v y="$2" 'BEGIN {
  if (x < 0.8) printf "{\"a\": %.6f, \"b\": %.6f, \"mem\": %.6f}\n", x, (1 - x) * (1 - x) + y, y
  else printf "{\"a\": %.6f, \"mem\": %.6f}\n", x, y }')");
  std::string path = WriteStudy("mo.yaml", R"(name: s
objectives:
  - {metric: a, direction: minimize}
  - {metric: b, direction: minimize}
constraints: [{metric: mem, max: 0.5}]
search_space:
  x: {type: float, low: 0, high: 1}
  y: {type: float, low: 0, high: 1}
trial: {command: "sh f.sh {x} {y}"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 16, max_failed: 16}
)");
  auto r = Cli({"run", path, "--storage", db_});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  int failed = 0;
  std::vector<storage::TrialRecord> feasible;
  for (const storage::TrialRecord& t : Trials()) {
    const double x = std::get<double>(t.params.at("x")), y = std::get<double>(t.params.at("y"));
    if (x >= 0.8) {
      ++failed;
      EXPECT_EQ(t.state, storage::TrialState::kFailed);
      EXPECT_THAT(t.error, HasSubstr("never reported 'b'"));
      continue;
    }
    ASSERT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    EXPECT_NEAR(t.values.at("a"), x, 1e-5);
    EXPECT_NEAR(t.values.at("b"), (1 - x) * (1 - x) + y, 1e-5);
    EXPECT_NEAR(t.values.at("mem"), y, 1e-5);
    EXPECT_EQ(t.value, t.values.at("a"));
    if (y <= 0.5) feasible.push_back(t);
  }
  EXPECT_GT(failed, 0);
  ASSERT_GE(feasible.size(), 3u);

  auto best = Cli({"best", "s", "--storage", db_, "--json"});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  std::set<int> front;
  const Json set = Json::parse(best.out);
  for (const Json& t : set["front"]) front.insert(t["trial"].get<int>());
  // The front is the feasible trials that no other feasible trial dominates.
  auto dominates = [](const storage::TrialRecord& p, const storage::TrialRecord& q) {
    const double pa = p.values.at("a"), pb = p.values.at("b");
    const double qa = q.values.at("a"), qb = q.values.at("b");
    return pa <= qa && pb <= qb && (pa < qa || pb < qb);
  };
  std::set<int> expected;
  for (const storage::TrialRecord& t : feasible)
    if (std::none_of(feasible.begin(), feasible.end(),
                     [&](const storage::TrialRecord& o) { return dominates(o, t); }))
      expected.insert(t.number);
  EXPECT_EQ(front, expected);
  auto table = Cli({"best", "s", "--storage", db_});
  EXPECT_THAT(table.out, HasSubstr(StrCat("Pareto set: ", expected.size(), " of ")));
  auto status = Cli({"status", "s", "--storage", db_});
  EXPECT_THAT(status.out, HasSubstr("objectives minimize a, minimize b, subject to mem <= 0.5"));
  EXPECT_THAT(status.out,
              HasSubstr(StrCat("front      ", expected.size(), " trials on the Pareto set")));

  // One member chosen: the smallest b among those with a <= 0.5; export writes it, and without a
  // choice export says how to make one.
  int want = -1;
  for (const storage::TrialRecord& t : feasible)
    if (expected.count(t.number) && t.values.at("a") <= 0.5 &&
        (want < 0 || t.values.at("b") < Trials()[want].values.at("b")))
      want = t.number;
  ASSERT_GE(want, 0);
  auto picked = Cli({"best", "s", "--storage", db_, "--json", "--pick", "a<=0.5", "--by", "b"});
  ASSERT_EQ(picked.exit_code, 0) << picked.err;
  EXPECT_EQ(Json::parse(picked.out)["trial"].get<int>(), want);
  auto exported =
      Cli({"export", "s", "--storage", db_, "--format", "json", "--pick", "a<=0.5", "--by", "b"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["x"].get<double>(),
            std::get<double>(Trials()[want].params.at("x")));
  auto unchosen = Cli({"export", "s", "--storage", db_});
  EXPECT_NE(unchosen.exit_code, 0);
  EXPECT_THAT(unchosen.err,
              HasSubstr("choose a member of its Pareto set with --trial N or --pick"));
  auto by_model = Cli({"best", "s", "--storage", db_, "--by-model"});
  EXPECT_EQ(by_model.exit_code, 2);
  EXPECT_THAT(by_model.err, HasSubstr("--by-model recommends by one objective; study 's' has "
                                      "several (choose from its Pareto set with --pick"));

  auto trials = Cli({"trials", "s", "--storage", db_, "--json"});
  ASSERT_EQ(trials.exit_code, 0) << trials.err;
  for (const Json& t : Json::parse(trials.out)) {
    EXPECT_EQ(t["front"].get<bool>(), front.count(t["trial"].get<int>()) > 0) << t.dump();
    if (t["state"] == "completed") {
      EXPECT_EQ(t["feasible"].get<bool>(), t["values"]["mem"].get<double>() <= 0.5) << t.dump();
    }
  }
}

#ifdef HYPERPACK_WITH_POSTGRES
// The same study on PostgreSQL (a throwaway server: local_postgres.h), with export and report.
TEST_F(CliTest, ReadCommandsSayTheSameOnPostgreSQL) {
  std::string error;
  auto server = testing::LocalPostgres::Start(&error);
  if (!server && error.find("install postgresql") != std::string::npos) GTEST_SKIP() << error;
  ASSERT_NE(server, nullptr) << error;
  db_ = server->NewDatabase("cli", &error);
  ASSERT_FALSE(db_.empty()) << error;
  ExpectReadCommandsAgree();
  auto exported = Cli({"export", "s", "--format", "json", "--storage", db_});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(Json::parse(exported.out).contains("x"));
  auto report = Cli({"report", "s", "-o", dir_ / "s.html", "--storage", db_});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(testing::ReadFile(dir_ / "s.html"), HasSubstr("<title>s"));
  // Trial logs go to the current folder, not to one named after the URL.
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "hyperpack_logs/s"));
  // No runner is on the study: one frame, from the tally and the best trial.
  auto watch = Cli({"status", "s", "--watch", "--json", "--storage", db_});
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  const Json frame = Json::parse(watch.out);
  EXPECT_EQ(frame["trials"]["completed"], 5);
  EXPECT_EQ(frame["best"]["trial"],
            Json::parse(Cli({"best", "s", "--json", "--storage", db_}).out)["trial"]);
}
#endif

void CliTest::ExpectReadCommandsAgree() {
  auto run = Cli({"run", WriteStudy("s.yaml", kQuickStudy), "--storage", db_});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(run.out, HasSubstr("budget reached"));
  EXPECT_THAT(run.out, HasSubstr("best loss ="));

  auto trials = Cli({"trials", "s", "--json", "--storage", db_});
  ASSERT_EQ(trials.exit_code, 0) << trials.err;
  Json t = Json::parse(trials.out);
  ASSERT_EQ(t.size(), 5u);
  double best = 2;
  int best_trial = -1;
  for (const Json& row : t) {
    EXPECT_EQ(row["state"], "completed");
    EXPECT_EQ(row["value"].get<double>(), row["params"]["x"].get<double>());
    if (row["value"].get<double>() < best) {
      best = row["value"];
      best_trial = row["trial"];
    }
  }

  auto b = Cli({"best", "s", "--json", "--storage", db_});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  Json bj = Json::parse(b.out);
  EXPECT_EQ(bj["trial"], best_trial);
  EXPECT_EQ(bj["value"], best);
  EXPECT_EQ(bj["params"]["x"], best);
  EXPECT_TRUE(bj["params"].contains("opt"));

  auto status = Cli({"status", "--json", "--storage", db_});
  ASSERT_EQ(status.exit_code, 0);
  Json sj = Json::parse(status.out);
  ASSERT_EQ(sj.size(), 1u);
  EXPECT_EQ(sj[0]["study"], "s");
  EXPECT_EQ(sj[0]["trials"]["completed"], 5);
  EXPECT_EQ(sj[0]["state"], "done");

  auto one = Cli({"status", "s", "--json", "--storage", db_});
  ASSERT_EQ(one.exit_code, 0);
  EXPECT_EQ(Json::parse(one.out)["best"]["trial"], best_trial);

  auto table = Cli({"trials", "s", "--storage", db_});
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("trial  state"));
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 6);
}

// A program that evaluates trials itself: create, then ask and tell, and the read commands see it.
TEST_F(CliTest, AskAndTellRunAStudyWithoutACommand) {
  const std::string study = WriteStudy("q.yaml", R"(name: q
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
tuner: {seed: 2}
)");
  auto run = Cli({"run", study, "--storage", db_});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("hyperpack create"));
  auto ask_first = Cli({"ask", "q", "--storage", db_});
  EXPECT_EQ(ask_first.exit_code, 2) << ask_first.err;  // not created yet
  EXPECT_THAT(ask_first.err, HasSubstr("no study named 'q'"));
  ASSERT_EQ(Cli({"create", study, "--storage", db_}).exit_code, 0);
  for (int i = 0; i < 6; ++i) {
    auto ask = Cli({"ask", "q", "--json", "--storage", db_});
    ASSERT_EQ(ask.exit_code, 0) << ask.err;
    const Json a = Json::parse(ask.out);
    EXPECT_EQ(a["trial"], i);
    const double x = a["params"]["x"].get<double>();
    auto tell = Cli({"tell", "q", std::to_string(i), "--value", FormatDouble((x - 0.3) * (x - 0.3)),
                     "--storage", db_});
    ASSERT_EQ(tell.exit_code, 0) << tell.err;
    EXPECT_THAT(tell.out, HasSubstr("completed"));
  }
  auto again = Cli({"tell", "q", "0", "--value", "1", "--storage", db_});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("not running"));
  EXPECT_EQ(Cli({"tell", "q", "0", "--state", "sleeping", "--storage", db_}).exit_code, 2);
  auto status = Cli({"status", "q", "--json", "--storage", db_});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_EQ(Json::parse(status.out)["trials"]["completed"], 6);
  auto best = Cli({"best", "q", "--json", "--storage", db_});
  ASSERT_EQ(best.exit_code, 0);
  const double bx = Json::parse(best.out)["params"]["x"].get<double>();
  EXPECT_DOUBLE_EQ(Json::parse(best.out)["value"].get<double>(), (bx - 0.3) * (bx - 0.3));
}

// budget.finalists end to end: the last trials train the best configurations again (another
// {trial}, so another draw), and the run, `best` and `report` name the configuration with the
// best mean of its runs.
TEST_F(CliTest, FinalistsTrainTheBestAgainAndBestNamesTheBestMeanOfARunConfiguration) {
  std::string out;
  const std::map<double, std::vector<double>> runs = RunFinalistsStudy(&out);
  ASSERT_EQ(runs.size(), 6u) << "trials 6 and 7 repeat two of the first six configurations";
  double best_mean = 1e9;
  for (const auto& [x, values] : runs)
    if (values.size() == 2) best_mean = std::min(best_mean, (values[0] + values[1]) / 2);
  auto best = Cli({"best", "f", "--json", "--storage", db_});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const Json b = Json::parse(best.out);
  EXPECT_EQ(b["mean"]["runs"], 2);
  EXPECT_NEAR(b["mean"]["value"].get<double>(), best_mean, 1e-6);
  EXPECT_EQ(runs.at(b["params"]["x"].get<double>()).size(), 2u);
  EXPECT_THAT(out, HasSubstr(StrCat("(trial ", b["trial"].get<int>(),
                                    ", the mean of its configuration's 2 runs)")));
  auto status = Cli({"status", "f", "--storage", db_});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out,
              HasSubstr("best       " + FormatShort(b["mean"]["value"].get<double>(), 6)));
  EXPECT_THAT(status.out, HasSubstr("the mean of its configuration's 2 runs"));
  auto listed = Cli({"trials", "f", "--storage", db_});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr(StrCat("finalist: trial ", b["trial"].get<int>(),
                                           "'s configuration again")));
}

// Finalists of a training that repeats itself (no {trial} in its command, as with a fixed seed):
// two re-runs return their first runs' values exactly, so the third finalist's slot goes to a new
// proposal, and `best` names the best single run, not a mean of repeats.
TEST_F(CliTest, FinalistsThatRepeatTheirFirstRunsGiveTheirSlotsBackToTheSearch) {
  const std::string path = WriteStudy("f.yaml", R"(name: f
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "echo '{{\"loss\": {x}}}'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 9, max_parallel: 1, finalists: 3}
)");
  auto run = Cli({"run", path, "--storage", db_});
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(run.out, HasSubstr("the trainings repeat themselves (as with a fixed seed), so no "
                                 "further finalist trains and the search goes on"));
  const std::vector<storage::TrialRecord> trials = Trials("f");
  ASSERT_EQ(trials.size(), 9u);
  std::map<double, int> first_of;
  double lowest = 1e9;
  for (const storage::TrialRecord& t : trials) {
    ASSERT_TRUE(t.value) << t.number;
    const double x = std::get<double>(t.params.at("x"));
    EXPECT_EQ(first_of.count(x) > 0, t.number == 6 || t.number == 7) << "trial " << t.number;
    first_of.emplace(x, t.number);
    lowest = std::min(lowest, *t.value);
  }
  const Json b = Json::parse(Cli({"best", "f", "--json", "--storage", db_}).out);
  EXPECT_FALSE(b.contains("mean")) << b.dump();
  EXPECT_EQ(b["reruns_repeat"], true);
  EXPECT_DOUBLE_EQ(b["value"].get<double>(), lowest);
  EXPECT_EQ(b["trial"], first_of.at(lowest));
  EXPECT_THAT(Cli({"best", "f", "--storage", db_}).out,
              HasSubstr(StrCat("(trial ", first_of.at(lowest),
                               " of 9: the best single run, as the "
                               "re-runs returned their first runs' values exactly)")));
  const std::string status = Cli({"status", "f", "--storage", db_}).out;
  EXPECT_THAT(status, ::testing::Not(HasSubstr("the mean of its configuration's")));
  EXPECT_THAT(status, HasSubstr("the best single run: re-runs repeat their first runs"));
  EXPECT_EQ(
      Json::parse(Cli({"status", "f", "--json", "--storage", db_}).out)["best"]["reruns_repeat"],
      true);
}

// --within in a finalist study compares configurations by their means: a single lucky draw is no
// candidate, and the best it is measured against is the best mean.
TEST_F(CliTest, WithinComparesTheFinalistsConfigurationsByTheirMeans) {
  std::string out;
  const std::map<double, std::vector<double>> runs = RunFinalistsStudy(&out);
  ASSERT_EQ(runs.size(), 6u);
  auto best = Cli({"best", "f", "--json", "--storage", db_});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const Json b = Json::parse(best.out);
  auto within = Cli({"best", "f", "--within", "100%", "--json", "--storage", db_});
  ASSERT_EQ(within.exit_code, 0) << within.err;
  const Json w = Json::parse(within.out);
  EXPECT_EQ(w["mean"]["runs"], 2);
  const std::vector<double>& chosen = runs.at(w["params"]["x"].get<double>());
  ASSERT_EQ(chosen.size(), 2u);
  EXPECT_NEAR(w["mean"]["value"].get<double>(), (chosen[0] + chosen[1]) / 2, 1e-6);
  EXPECT_EQ(w["best"]["trial"], b["trial"]);
  EXPECT_NEAR(w["best"]["value"].get<double>(), b["mean"]["value"].get<double>(), 1e-9);
  EXPECT_EQ(w["best"]["runs"], 2);
  auto within_text = Cli({"best", "f", "--within", "100%", "--storage", db_});
  ASSERT_EQ(within_text.exit_code, 0) << within_text.err;
  EXPECT_THAT(within_text.out, HasSubstr("of the best mean: loss = "));
  EXPECT_THAT(within_text.out, HasSubstr(", the mean of its configuration's 2 runs (trial "));
  auto exported = Cli({"export", "f", "--within", "100%", "--format", "json", "--storage", db_});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["x"], w["params"]["x"]) << exported.out;
}

std::map<double, std::vector<double>> CliTest::RunFinalistsStudy(std::string* out) {
  const std::string script = dir_ / "trial.sh";
  WriteFile(script,
            "awk -v x=\"$1\" -v t=\"$2\" "
            "'BEGIN { printf \"{\\\"loss\\\": %.6f}\\n\", x + (t % 2) * 0.5 }'\n");
  const std::string path = WriteStudy("f.yaml", StrCat(R"(name: f
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial: {command: "sh )",
                                                       script, R"( {x} {trial}"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 8, max_parallel: 1, finalists: 2}
)"));
  auto run = Cli({"run", path, "--storage", db_});
  EXPECT_EQ(run.exit_code, 0) << run.err << run.out;
  *out = run.out;
  const std::vector<storage::TrialRecord> trials = Trials("f");
  EXPECT_EQ(trials.size(), 8u);
  std::map<double, std::vector<double>> runs;
  for (const storage::TrialRecord& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.number;
    if (t.value) runs[std::get<double>(t.params.at("x"))].push_back(*t.value);
  }
  return runs;
}

// Study "s" of kQuickStudy (or `spec`), as `hyperpack run` would create it.
storage::StudyRecord CreateStudyS(storage::Storage& db, const std::string& spec = kQuickStudy) {
  storage::StudyRecord s;
  s.name = "s";
  s.spec_text = spec;
  s.spec_path = "s.yaml";
  s.direction = Direction::kMinimize;
  s.metric = "loss";
  s.created = 1000;
  return db.CreateStudy(s).value();
}

// Study "s" (kQuickStudy's space) with trials completed at `x` scoring `loss`, as a run stores
// them, each of 10 s or of seconds[i] where given.
void StoreCompleted(const std::string& db_path, const std::vector<std::pair<double, double>>& rows,
                    const std::string& spec = kQuickStudy,
                    const std::vector<double>& seconds = {}) {
  auto db = storage::Storage::Open(db_path).value();
  storage::StudyRecord s = CreateStudyS(*db, spec);
  int number = 0;
  for (const auto& [x, loss] : rows) {
    storage::TrialRecord t;
    t.study_id = s.id;
    t.number = number++;
    t.state = storage::TrialState::kRunning;
    t.params = {{"x", x}, {"opt", "sgd"}};
    t.started = 2000;
    ASSERT_TRUE(db->InsertTrial(t).ok());
    t.state = storage::TrialState::kCompleted;
    t.value = loss;
    t.ended = 2000 + (t.number < static_cast<int>(seconds.size()) ? seconds[t.number] : 10);
    ASSERT_TRUE(db->FinishTrial(t).ok());
  }
}

// Noisy single runs of (x - 0.3)^2 and one lucky run at 0.9 that beats them all.
std::vector<std::pair<double, double>> NoisyBowlWithALuckyRun() {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<std::pair<double, double>> rows;
  for (int i = 0; i < 30; ++i) {
    const double x = (i + 0.5) / 30;
    rows.emplace_back(x, (x - 0.3) * (x - 0.3) + noise(rng));
  }
  double lowest = rows.front().second;
  for (const auto& r : rows) lowest = std::min(lowest, r.second);
  rows.emplace_back(0.9, lowest - 0.05);
  return rows;
}

// best --by-model: single trainings of (x - 0.3)^2 with noise, and one lucky run at x = 0.9 that
// beats them all. `best` names the lucky run; the model recommends a trial near 0.3, and export
// writes its configuration.
TEST_F(CliTest, ByModelRecommendsTheBestNeighbourhoodNotALuckyRun) {
  const std::vector<std::pair<double, double>> rows = NoisyBowlWithALuckyRun();
  StoreCompleted(db_, rows);

  EXPECT_EQ(Json::parse(Cli({"best", "s", "--json", "--storage", db_}).out)["trial"], 30);
  auto model = Cli({"best", "s", "--by-model", "--json", "--storage", db_});
  ASSERT_EQ(model.exit_code, 0) << model.err;
  const Json m = Json::parse(model.out);
  EXPECT_EQ(m["chosen_by"], "model");
  EXPECT_NEAR(m["params"]["x"].get<double>(), 0.3, 0.12);
  EXPECT_DOUBLE_EQ(m["value"].get<double>(), rows[m["trial"].get<int>()].second);
  EXPECT_EQ(m["best"]["trial"], 30);
  EXPECT_GT(m["noise_share"].get<double>(), 0.01);

  auto text = Cli({"best", "s", "--by-model", "--storage", db_});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out,
              ::testing::ContainsRegex("the model's pick: loss = [-0-9.e]+ \\(trial " +
                                       std::to_string(m["trial"].get<int>()) + " of 31; "));
  EXPECT_THAT(text.out, HasSubstr("the best: loss = "));
  EXPECT_THAT(text.out, HasSubstr("(trial 30)\n"));
  auto exported = Cli({"export", "s", "--by-model", "--format", "json", "--storage", db_});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["x"], m["params"]["x"]);

  for (const auto& bad :
       std::vector<std::vector<std::string>>{{"best", "s", "--by-model", "--within", "1%"},
                                             {"best", "s", "--by-model", "--trial", "0"},
                                             {"export", "s", "--by-model", "--top", "2"}}) {
    std::vector<std::string> a = bad;
    a.insert(a.end(), {"--storage", db_});
    auto r = Cli(a);
    EXPECT_EQ(r.exit_code, 2) << bad[2] << " " << bad[3];
    EXPECT_THAT(r.err, HasSubstr("--by-model")) << bad[3];
  }
}

// kQuickStudy with budget.rerun_top: 5.
std::string RerunTopStudy() {
  std::string spec = kQuickStudy;
  spec.replace(spec.find("budget: {max_trials: 5,"), 23, "budget: {rerun_top: 5, max_trials: 40,");
  return spec;
}

// A study with budget.rerun_top: its best, wherever it is read, is the model's pick; before 8
// trials have completed, the best single run. The lucky run, better by its one value and cheaper,
// is no trade-off for status to offer beside the model's pick.
TEST_F(CliTest, ARerunTopStudysBestIsTheModelsPick) {
  const std::string spec = RerunTopStudy();
  const std::vector<std::pair<double, double>> rows = NoisyBowlWithALuckyRun();
  std::vector<double> seconds(rows.size(), 10);
  seconds.back() = 5;
  StoreCompleted(db_, rows, spec, seconds);
  auto best = Cli({"best", "s", "--json", "--storage", db_});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  const Json b = Json::parse(best.out);
  EXPECT_EQ(b["chosen_by"], "model");
  EXPECT_NEAR(b["params"]["x"].get<double>(), 0.3, 0.12);
  EXPECT_EQ(b["trial"],
            Json::parse(Cli({"best", "s", "--by-model", "--json", "--storage", db_}).out)["trial"]);
  const std::string n = std::to_string(b["trial"].get<int>());
  EXPECT_THAT(
      Cli({"best", "s", "--storage", db_}).out,
      HasSubstr("(trial " + n + " of 31: the model's pick of every run, budget.rerun_top)"));
  const std::string status = Cli({"status", "s", "--storage", db_}).out;
  EXPECT_THAT(status, HasSubstr("(trial " + n + ", the model's pick of every run)"));
  EXPECT_THAT(status, ::testing::Not(HasSubstr("cheaper")));
  const Json sj = Json::parse(Cli({"status", "s", "--json", "--storage", db_}).out);
  EXPECT_EQ(sj["best"]["trial"], b["trial"]);
  EXPECT_EQ(sj["best"]["chosen_by"], "model");
  EXPECT_TRUE(sj["cheaper_within_1%"].is_null());
  EXPECT_EQ(Json::parse(Cli({"export", "s", "--format", "json", "--storage", db_}).out)["x"],
            b["params"]["x"]);
}

TEST_F(CliTest, ARerunTopStudyWithTooFewRunsForAModelNamesTheBestSingleRun) {
  const std::string spec = RerunTopStudy();
  StoreCompleted(db_, {{0.1, 0.3}, {0.2, 0.2}, {0.5, 0.4}}, spec);
  const Json b = Json::parse(Cli({"best", "s", "--json", "--storage", db_}).out);
  EXPECT_EQ(b["trial"], 1);
  EXPECT_FALSE(b.contains("chosen_by"));
}

// Too few completed trials for a model: a clear error that says what `best` alone names.
TEST_F(CliTest, ByModelWithTooFewTrialsSaysSo) {
  StoreCompleted(db_, {{0.1, 0.3}, {0.2, 0.2}, {0.5, 0.4}});
  auto r = Cli({"best", "s", "--by-model", "--storage", db_});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--by-model: needs 8 runs with a finite value, has 3 (study 's' has 3 "
                        "completed trials); `hyperpack best s` without it names the best run"));
  auto fine = Cli({"best", "s", "--storage", db_});
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_THAT(fine.out, HasSubstr("best loss = 0.2 (trial 1 of 3)"));
}

TEST_F(CliTest, WithinPicksTheCheapestTrialNearlyAsGoodAsTheBest) {
  // Three completed trials written as a run would: the best (loss 0.100) held 2 GPUs for 100 s,
  // trial 1 (0.101) 1 GPU for 60 s, trial 2 (0.150) 1 GPU for 10 s.
  {
    auto db = storage::Storage::Open(db_).value();
    storage::StudyRecord s = CreateStudyS(*db);
    const struct {
      double x, loss, seconds;
      const char* placement;
    } rows[] = {
        {0.1, 0.100, 100, R"([{"host":"h","gpus":[0],"cpus":1},{"host":"h","gpus":[1],"cpus":1}])"},
        {0.2, 0.101, 60, R"([{"host":"h","gpus":[0],"cpus":1}])"},
        {0.3, 0.150, 10, R"([{"host":"h","gpus":[1],"cpus":1}])"}};
    int number = 0;
    for (const auto& r : rows) {
      storage::TrialRecord t;
      t.study_id = s.id;
      t.number = number++;
      t.state = storage::TrialState::kRunning;
      t.params = {{"x", r.x}, {"opt", "sgd"}};
      t.started = 2000;
      t.placement = storage::DecodePlacement(r.placement);
      ASSERT_TRUE(db->InsertTrial(t).ok());
      t.state = storage::TrialState::kCompleted;
      t.value = r.loss;
      t.ended = 2000 + r.seconds;
      ASSERT_TRUE(db->FinishTrial(t).ok());
    }
  }
  auto best = Cli({"best", "s", "--json", "--storage", db_});
  ASSERT_EQ(best.exit_code, 0) << best.err;
  EXPECT_EQ(Json::parse(best.out)["trial"], 0);

  auto within = Cli({"best", "s", "--within", "0.002", "--json", "--storage", db_});
  ASSERT_EQ(within.exit_code, 0) << within.err;
  Json w = Json::parse(within.out);
  EXPECT_EQ(w["trial"], 1);
  EXPECT_DOUBLE_EQ(w["cost"].get<double>(), 60);  // 60 s x 1 GPU
  EXPECT_EQ(w["cost_unit"], "GPU-s");
  EXPECT_EQ(w["best"]["trial"], 0);
  EXPECT_DOUBLE_EQ(w["best"]["cost"].get<double>(), 200);
  EXPECT_EQ(
      Json::parse(Cli({"best", "s", "--within", "60%", "--json", "--storage", db_}).out)["trial"],
      2);

  auto text = Cli({"best", "s", "--within", "1%", "--storage", db_});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("cheapest within 1% of the best: loss = 0.101 (trial 1 of 3)"));
  EXPECT_THAT(text.out, HasSubstr("\ncost 60 GPU-s (1 GPU for"));
  EXPECT_THAT(text.out, HasSubstr("3.33x less than the best's"));

  // status shows the trade-off: trial 1 is within 1% of the best for 3.33x less.
  auto status = Cli({"status", "s", "--storage", db_});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("cheaper    0.101 (trial 1), within 1% of the best: 60 GPU-s "
                                    "against 200 GPU-s (3.33x less)"));
  Json sj = Json::parse(Cli({"status", "s", "--json", "--storage", db_}).out);
  EXPECT_EQ(sj["cheaper_within_1%"]["trial"], 1);
  EXPECT_DOUBLE_EQ(sj["cheaper_within_1%"]["best_cost"].get<double>(), 200);

  auto trials = Cli({"trials", "s", "--json", "--storage", db_});
  ASSERT_EQ(trials.exit_code, 0) << trials.err;
  Json tj = Json::parse(trials.out);
  EXPECT_DOUBLE_EQ(tj[0]["cost"].get<double>(), 200);
  EXPECT_DOUBLE_EQ(tj[2]["cost"].get<double>(), 10);
  EXPECT_EQ(tj[2]["cost_unit"], "GPU-s");
  // The cost model, fitted to these three, predicts each from the other two.
  for (int i = 0; i < 3; ++i) {
    const Json& p = tj[i]["predicted_cost"];
    ASSERT_TRUE(p.is_object()) << tj[i].dump();
    EXPECT_EQ(p["unit"], "GPU-s");
    EXPECT_GT(p["median"].get<double>(), 0);
    EXPECT_LE(p["low"].get<double>(), p["median"].get<double>());
    EXPECT_GE(p["high"].get<double>(), p["median"].get<double>());
  }
  const std::string table = Cli({"trials", "s", "--storage", db_}).out;
  EXPECT_THAT(table, HasSubstr("200 GPU-s"));
  EXPECT_THAT(table, HasSubstr("predicted"));

  auto args = Cli({"export", "s", "--within", "0.002", "--format", "args", "--storage", db_});
  ASSERT_EQ(args.exit_code, 0) << args.err;
  EXPECT_THAT(args.out, HasSubstr("--x 0.2"));

  for (const auto& bad :
       std::vector<std::vector<std::string>>{{"best", "s", "--within", "-1"},
                                             {"best", "s", "--within", "abc"},
                                             {"export", "s", "--within", "0.1", "--top", "2"},
                                             {"export", "s", "--within", "0.1", "--trial", "0"}}) {
    std::vector<std::string> a = bad;
    a.insert(a.end(), {"--storage", db_});
    auto r = Cli(a);
    EXPECT_EQ(r.exit_code, 2) << bad[2] << " " << bad[3];
    EXPECT_THAT(r.err, HasSubstr("--within")) << r.err;
  }
}

TEST_F(CliTest, ExportWritesTheBestConfigurationInEachFormat) {
  ASSERT_EQ(Cli({"run", WriteStudy("s.yaml", kQuickStudy), "--storage", db_}).exit_code, 0);
  Json best = Json::parse(Cli({"best", "s", "--json", "--storage", db_}).out);

  auto json = Cli({"export", "s", "--format", "json", "--storage", db_});
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(Json::parse(json.out), best["params"]);

  auto top = Cli({"export", "s", "--format", "json", "--top", "3", "--storage", db_});
  Json tj = Json::parse(top.out);
  ASSERT_EQ(tj.size(), 3u);
  EXPECT_EQ(tj[0]["trial"], best["trial"]);
  EXPECT_LE(tj[0]["value"].get<double>(), tj[1]["value"].get<double>());

  auto env = Cli({"export", "s", "--format", "env", "--storage", db_});
  EXPECT_THAT(env.out, HasSubstr("HP_OPT=" + best["params"]["opt"].get<std::string>()));
  auto args = Cli({"export", "s", "--format", "args", "--storage", db_});
  EXPECT_THAT(args.out, HasSubstr("--opt " + best["params"]["opt"].get<std::string>()));

  std::string file = dir_ / "best.yaml";
  auto yaml = Cli({"export", "s", "--format", "yaml", "-o", file, "--storage", db_});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(ReadFile(file), HasSubstr("opt: " + best["params"]["opt"].get<std::string>()));

  auto bad = Cli({"export", "s", "--format", "toml", "--storage", db_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("expected yaml, json, env, args, deepspeed, torchrun, hf"));
}

// A study whose parameters play the batch roles under their own names (mbs, ranks) and a common
// one (lr), exported for the launchers: each output holds the trial's values with the batch
// arithmetic done, and refusals are clear.
TEST_F(CliTest, ExportWritesALaunchersConfigurationWithTheBatchArithmeticDone) {
  constexpr char kStudy[] = R"(
name: ds
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.001, high: 0.1, log: true}
  mbs: {type: categorical, values: [8, 16]}
  ranks: {type: categorical, values: [1, 2]}
  precision: {type: categorical, values: [fp16, bf16]}
trial: {command: "echo '{{\"loss\": {lr}}}' # train.py --lr {lr} --mbs {mbs}"}
tuner: {algorithm: sobol, seed: 3}
budget: {max_trials: 4, max_parallel: 2}
export:
  roles: {micro_batch: mbs, data_parallel: ranks, accumulation: 4, optimizer: adamw}
)";
  ASSERT_EQ(Cli({"run", WriteStudy("ds.yaml", kStudy), "--storage", db_}).exit_code, 0);
  Json best = Json::parse(Cli({"best", "ds", "--json", "--storage", db_}).out)["params"];
  const int64_t mbs = best["mbs"], ranks = best["ranks"];

  auto ds = Cli({"export", "ds", "--format", "deepspeed", "--storage", db_});
  ASSERT_EQ(ds.exit_code, 0) << ds.err;
  Json c = Json::parse(ds.out);
  EXPECT_EQ(c["train_micro_batch_size_per_gpu"], mbs);
  EXPECT_EQ(c["gradient_accumulation_steps"], 4);
  EXPECT_EQ(c["train_batch_size"], mbs * 4 * ranks);
  EXPECT_EQ(c["optimizer"]["type"], "AdamW");
  EXPECT_EQ(c["optimizer"]["params"]["lr"], best["lr"]);
  const bool fp16 = best["precision"] == "fp16";
  EXPECT_EQ(c.contains("fp16"), fp16);
  EXPECT_EQ(c.contains("bf16"), !fp16);

  auto hf = Cli({"export", "ds", "--format", "hf", "--storage", db_});
  ASSERT_EQ(hf.exit_code, 0) << hf.err;
  Json h = Json::parse(hf.out);
  EXPECT_EQ(h["per_device_train_batch_size"], mbs);
  EXPECT_EQ(h[fp16 ? "fp16" : "bf16"], true);
  EXPECT_EQ(h["optim"], "adamw_torch");

  auto light = Cli({"export", "ds", "--format", "lightning", "--trial", "0", "--storage", db_});
  ASSERT_EQ(light.exit_code, 0) << light.err;
  EXPECT_THAT(light.out, HasSubstr("accumulate_grad_batches: 4"));

  auto run = Cli({"export", "ds", "--format", "torchrun", "--storage", db_});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("--nproc_per_node=" + std::to_string(ranks)));
  EXPECT_THAT(run.out, HasSubstr("--mbs " + std::to_string(mbs)));

  auto hydra = Cli({"export", "ds", "--format", "hydra", "--storage", db_});
  EXPECT_THAT(hydra.out, HasSubstr("mbs=" + std::to_string(mbs)));

  auto two = Cli({"export", "ds", "--format", "deepspeed", "--top", "2", "--storage", db_});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_THAT(two.err, HasSubstr("a launcher's format holds one configuration"));
  auto none = Cli({"export", "ds", "--format", "json", "--trial", "99", "--storage", db_});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("has no trial 99"));

  // The quick study has no batch size at all: an error that says how to name one.
  ASSERT_EQ(Cli({"run", WriteStudy("s.yaml", kQuickStudy), "--storage", db_}).exit_code, 0);
  auto nobatch = Cli({"export", "s", "--format", "deepspeed", "--storage", db_});
  EXPECT_EQ(nobatch.exit_code, 2);
  EXPECT_THAT(nobatch.err, HasSubstr("no parameter plays the micro batch or the global batch"));
  EXPECT_THAT(nobatch.err, HasSubstr("export: {roles: {global_batch: PARAMETER}}"));
}

// A W&B sweep run unmodified: its program takes W&B's --name=value arguments and prints its
// metric; `import` writes the study file that `run --from wandb` runs.
TEST_F(CliTest, AWandbSweepImportsAndRunsAsIs) {
  WriteFile(dir_ / "train.py", R"(import argparse, json
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--layers", type=int)
a = p.parse_args()
print(json.dumps({"val_loss": a.lr * a.layers}), flush=True)
)");
  WriteFile(dir_ / "sweep.yaml", R"(program: train.py
method: random
name: wb
metric: {name: val_loss, goal: minimize}
run_cap: 4
parameters:
  lr: {distribution: log_uniform_values, min: 0.001, max: 0.1}
  layers: {values: [1, 2, 3]}
)");
  auto imported = Cli({"import", dir_ / "sweep.yaml", "-o", dir_ / "study.yaml"});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_THAT(ReadFile(dir_ / "study.yaml"), HasSubstr("shim: wandb"));
  EXPECT_EQ(Cli({"validate", dir_ / "study.yaml"}).exit_code, 0);

  EXPECT_THAT(imported.err, HasSubstr("sweep.yaml:1:1: warning: read as a wandb file"));

  // No --from: the format is told from the file's keys.
  auto run = Cli({"run", dir_ / "sweep.yaml", "--storage", db_});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json trials = Json::parse(Cli({"trials", "wb", "--json", "--storage", db_}).out);
  ASSERT_EQ(trials.size(), 4u);
  for (const Json& t : trials) {
    EXPECT_EQ(t["state"], "completed") << t.dump();
    EXPECT_DOUBLE_EQ(t["value"].get<double>(),
                     t["params"]["lr"].get<double>() * t["params"]["layers"].get<int>());
  }
  auto bad = Cli({"run", dir_ / "sweep.yaml", "--from", "sigopt", "--storage", db_});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("expected auto, wandb"));
}

// The torchrun export, run for real by python3-torch's torchrun (1.13 here) with one and two
// Gloo processes: every rank gets the best trial's values, those the command took as placeholders
// and those it read from its environment (${HP_MOMENTUM:-0}, HP_BATCH_SIZE, HYPERPACK_PARAMS).
TEST_F(CliTest, TheTorchrunExportRunsUnderTorchrunWithTheBestTrialsValues) {
  if (!std::filesystem::exists("/usr/bin/torchrun")) GTEST_SKIP() << "no torchrun (python3-torch)";
  WriteFile(dir_ / "t.py", R"(import argparse, json, os
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float)
p.add_argument("--momentum", type=float)
a = p.parse_args()
world = int(os.environ.get("WORLD_SIZE", "1"))
if "LOCAL_RANK" in os.environ:
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    world = int(t.item())
    dist.destroy_process_group()
if os.environ.get("EXPORT_OUT"):
    with open(os.environ["EXPORT_OUT"] + "." + os.environ.get("RANK", "0"), "w") as f:
        json.dump({"lr": a.lr, "momentum": a.momentum, "batch": int(os.environ["HP_BATCH_SIZE"]),
                   "params": json.loads(os.environ["HYPERPACK_PARAMS"]), "world": world}, f)
print(json.dumps({"loss": a.lr * (1 + a.momentum)}), flush=True)
)");
  for (int nproc : {1, 2}) {
    const std::string name = "tr" + std::to_string(nproc);
    WriteFile(dir_ / (name + ".yaml"), "name: " + name + R"(
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.01, high: 0.1}
  opt: [sgd, adam]
  momentum: {type: float, low: 0.5, high: 0.9, when: opt == sgd}
  batch_size: [16, 32]
  nproc: {type: fixed, value: )" + std::to_string(nproc) +
                                           R"(}
trial: {command: "/usr/bin/python3 t.py --lr {lr} --momentum ${HP_MOMENTUM:-0}"}
tuner: {algorithm: random, seed: 3}
budget: {max_trials: 4}
)");
    ASSERT_EQ(Cli({"run", dir_ / (name + ".yaml"), "--storage", db_}).exit_code, 0);
    Json best = Json::parse(Cli({"best", name, "--json", "--storage", db_}).out);
    auto exported = Cli({"export", name, "--format", "torchrun", "--storage", db_});
    ASSERT_EQ(exported.exit_code, 0) << exported.err;
    const std::string out = dir_ / (name + ".out");
    auto ran = RunCommand({"/bin/sh", "-c",
                           "export EXPORT_OUT=" + out + " MASTER_PORT=" +
                               std::to_string(testing::FreeLoopbackPort()) + "\n" + exported.out},
                          dir_.path().string());
    ASSERT_EQ(ran.exit_code, 0) << exported.out << ran.err;
    for (int rank = 0; rank < nproc; ++rank) {
      Json got = Json::parse(testing::ReadFile(out + "." + std::to_string(rank)));
      EXPECT_DOUBLE_EQ(got["lr"].get<double>(), best["params"]["lr"].get<double>());
      EXPECT_DOUBLE_EQ(got["momentum"].get<double>(),
                       best["params"].value("momentum", 0.0));  // 0: adam, momentum inactive
      EXPECT_EQ(got["batch"], best["params"]["batch_size"]);
      EXPECT_EQ(got["params"], best["params"]);
      EXPECT_EQ(got["world"], nproc);
    }
  }
}

// The softmax example's torchrun export, run as it prints from the repository root: its
// ${HP_MOMENTUM:-0} resolved, it trains to the best trial's accuracy.
TEST_F(CliTest, TheSoftmaxExamplesTorchrunExportTrainsToTheBestTrialsAccuracy) {
  if (!std::filesystem::exists("/usr/bin/torchrun")) GTEST_SKIP() << "no torchrun (python3-torch)";
  const std::string root = HYPERPACK_SOURCE_DIR;
  auto run = RunCommand({HYPERPACK_CLI, "run", "examples/fmnist_softmax/study.yaml", "--storage",
                         db_, "--max-trials", "3", "--progress", "quiet"},
                        root);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json best = Json::parse(Cli({"best", "fmnist-softmax", "--json", "--storage", db_}).out);
  auto line = Cli({"export", "fmnist-softmax", "--format", "torchrun", "--storage", db_});
  ASSERT_EQ(line.exit_code, 0) << line.err;
  EXPECT_THAT(line.out, ::testing::Not(HasSubstr("HP_MOMENTUM:-")));
  auto trained = RunCommand(
      {"/bin/sh", "-c",
       "export MASTER_PORT=" + std::to_string(testing::FreeLoopbackPort()) + "\n" + line.out},
      root);
  ASSERT_EQ(trained.exit_code, 0) << line.out << trained.err;
  // torchrun --tee prefixes each line with its rank: the last JSON line is the final epoch's.
  const size_t at = trained.out.rfind("{\"epoch\"");
  ASSERT_NE(at, std::string::npos) << trained.out;
  Json last = Json::parse(trained.out.substr(at, trained.out.find('\n', at) - at));
  EXPECT_DOUBLE_EQ(last["val_accuracy"].get<double>(), best["value"].get<double>());
}

// The Hydra overrides and the Lightning config read by the consumers' own parser, OmegaConf
// (python3-omegaconf, which Hydra and LightningCLI's YAML both go through): every value is the
// best trial's, with its type.
TEST_F(CliTest, HydraAndLightningExportsParseWithOmegaConfToTheBestTrialsValues) {
  if (RunCommand({"/usr/bin/python3", "-c", "import omegaconf"}).exit_code != 0)
    GTEST_SKIP() << "no python3-omegaconf";
  ASSERT_EQ(Cli({"run", WriteStudy("om.yaml", R"(
name: om
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.00001, high: 0.1, log: true}
  mbs: [8, 16]
  ranks: [1, 2]
  opt: [adam, "sgd nesterov"]
trial: {command: "echo '{{\"loss\": {lr}}}'"}
tuner: {algorithm: sobol, seed: 5}
budget: {max_trials: 4}
export:
  roles: {micro_batch: mbs, data_parallel: ranks}
)"),
                 "--storage", db_})
                .exit_code,
            0);
  Json best = Json::parse(Cli({"best", "om", "--json", "--storage", db_}).out)["params"];
  auto hydra = Cli({"export", "om", "--format", "hydra", "--storage", db_});
  ASSERT_EQ(hydra.exit_code, 0) << hydra.err;
  auto parsed = RunCommand(
      {"/bin/sh", "-c",
       "/usr/bin/python3 -c 'import json, sys; from omegaconf import OmegaConf; "
       "print(json.dumps(OmegaConf.to_container(OmegaConf.from_dotlist(sys.argv[1:]))))' " +
           hydra.out});
  ASSERT_EQ(parsed.exit_code, 0) << hydra.out << parsed.err;
  EXPECT_EQ(Json::parse(parsed.out), best) << hydra.out;
  auto light = Cli({"export", "om", "--format", "lightning", "--storage", db_});
  ASSERT_EQ(light.exit_code, 0) << light.err;
  WriteFile(dir_ / "light.yaml", light.out);
  auto config =
      RunCommand({"/usr/bin/python3", "-c",
                  "import json, sys; from omegaconf import OmegaConf; "
                  "print(json.dumps(OmegaConf.to_container(OmegaConf.load(sys.argv[1]))))",
                  dir_ / "light.yaml"});
  ASSERT_EQ(config.exit_code, 0) << light.out << config.err;
  Json l = Json::parse(config.out);
  EXPECT_EQ(l["trainer"]["devices"], best["ranks"]);
  EXPECT_EQ(l["data"]["batch_size"], best["mbs"]);
  EXPECT_DOUBLE_EQ(l["model"]["learning_rate"].get<double>(), best["lr"].get<double>());
}

// --format args prints --NAME VALUE: a parameter the command took from its environment instead of
// a placeholder is named in a warning, with the formats that carry it.
TEST_F(CliTest, ArgsExportNamesWhatTheCommandTookFromItsEnvironment) {
  ASSERT_EQ(Cli({"run", WriteStudy("ar.yaml", R"(
name: ar
objective: {metric: loss, direction: minimize}
search_space:
  lr: {type: float, low: 0.01, high: 0.1}
  opt: [sgd, adam]
trial: {command: "echo loss={lr} opt=$HP_OPT"}
budget: {max_trials: 2}
)"),
                 "--storage", db_})
                .exit_code,
            0);
  auto args = Cli({"export", "ar", "--format", "args", "--storage", db_});
  ASSERT_EQ(args.exit_code, 0) << args.err;
  EXPECT_THAT(args.out, HasSubstr("--opt "));
  EXPECT_THAT(args.err, HasSubstr("warning: the study's command took opt from its environment, "
                                  "not as arguments"));
  EXPECT_THAT(args.err, ::testing::Not(HasSubstr("took lr")));
}

// A file of no tool is refused with what was looked for; a hyperpack study is not imported again.
TEST_F(CliTest, ImportWithoutFromSaysWhatItLookedFor) {
  WriteFile(dir_ / "odd.yaml", "steps: 3\n");
  auto odd = Cli({"import", dir_ / "odd.yaml"});
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_THAT(odd.err, HasSubstr(dir_ / "odd.yaml:1:1: cannot tell which tool's file this is"));
  EXPECT_THAT(odd.err, HasSubstr("name it with --from wandb|nni|determined|katib"));
  WriteFile(dir_ / "study.yaml", R"(name: s
objective: {metric: loss}
search_space: {x: [1, 2]}
trial: {command: "echo loss={x}"}
)");
  auto study = Cli({"import", dir_ / "study.yaml"});
  EXPECT_EQ(study.exit_code, 2);
  EXPECT_THAT(study.err, HasSubstr("study.yaml:1:1: this is already a hyperpack study file"));
  auto katib = Cli({"import", dir_ / "odd.yaml", "--from", "katib"});
  EXPECT_EQ(katib.exit_code, 2);
  EXPECT_THAT(katib.err, HasSubstr("is not a Katib Experiment"));
}

TEST_F(CliTest, AMissingStudyOrDatabaseIsReportedClearly) {
  auto nodb = Cli({"status", "--storage", dir_ / "nothing.db"});
  EXPECT_EQ(nodb.exit_code, 2);
  EXPECT_THAT(nodb.err, HasSubstr("no hyperpack database"));
  ASSERT_EQ(Cli({"run", WriteStudy("s.yaml", kQuickStudy), "--storage", db_}).exit_code, 0);
  auto typo = Cli({"best", "z", "--storage", db_});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("no study named 'z'"));
  // The storage can come from the environment.
  setenv("HYPERPACK_STORAGE", db_.c_str(), 1);
  auto from_env = Cli({"best", "s"});
  unsetenv("HYPERPACK_STORAGE");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
}

// A study whose trials, once `block` exists, announce themselves on a FIFO and then wait.
std::string BlockingStudy(const std::string& dir, int max_trials) {
  return R"(
name: s
objective: {metric: loss, direction: minimize}
search_space: {x: {type: float, low: 0, high: 1}}
trial:
  command: >-
    echo '{{"step": 1, "loss": {x}}}';
    if [ -e )" +
         dir + R"(/block ]; then sleep 60 & echo {trial} $$ $! > )" + dir +
         R"(/fifo; wait; fi
tuner: {algorithm: sobol, seed: 1}
budget: {max_trials: )" +
         std::to_string(max_trials) + R"(, max_parallel: 2}
)";
}

TEST_F(CliTest, StatusAnswersWhileARunGoesAndCtrlCInterruptsTrialsForLater) {
  std::string dir = dir_.path().string();
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  WriteFile(dir_ / "block", "");
  std::string study = WriteStudy("s.yaml", BlockingStudy(dir, 4));
  pid_t run = Start({"run", study, "--storage", db_});
  auto started = AwaitStarts(dir_ / "fifo", 2);
  ASSERT_EQ(started.size(), 2u);

  // Both trials are running now; another process reads the study meanwhile.
  auto status = Cli({"status", "s", "--json", "--storage", db_});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  Json sj = Json::parse(status.out);
  EXPECT_EQ(sj["state"], "running");
  EXPECT_EQ(sj["trials"]["running"], 2);

  kill(run, SIGINT);
  EXPECT_EQ(Wait(run), 130);
  EXPECT_THAT(ReadFile(dir_ / "bg.out"), HasSubstr("resume with the same command"));
  auto trials = Trials();
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) EXPECT_EQ(t.state, storage::TrialState::kInterrupted) << t.error;

  // Resumed without the block, the interrupted configurations run again and the budget is met.
  std::filesystem::remove(dir_ / "block");
  auto again = Cli({"run", study, "--storage", db_});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  trials = Trials();
  ASSERT_EQ(trials.size(), 6u);
  EXPECT_EQ(trials[2].retry_of, 0);
  EXPECT_EQ(trials[3].retry_of, 1);
  EXPECT_EQ(trials[2].params, trials[0].params);
  int completed = 0;
  for (const auto& t : trials) completed += t.state == storage::TrialState::kCompleted;
  EXPECT_EQ(completed, 4);
}

TEST_F(CliTest, ARunKilledWithSigkillResumesWithoutLosingAnything) {
  std::string dir = dir_.path().string();
  ASSERT_EQ(mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  std::string study = WriteStudy("s.yaml", BlockingStudy(dir, 8));
  // Four trials complete, then the block appears and the next two wait.
  std::string gate = WriteStudy("gate.yaml", BlockingStudy(dir, 4));
  ASSERT_EQ(Cli({"run", gate, "--storage", db_}).exit_code, 0);
  WriteFile(dir_ / "block", "");
  pid_t run = Start({"run", study, "--storage", db_});
  auto started = AwaitStarts(dir_ / "fifo", 2);
  ASSERT_EQ(started.size(), 2u);
  // Trials 4 and 5 are running ("NUMBER SHELL SLEEP"): the trial's shell and the sleep it started
  // in the background must die with the runner, the sleep though PR_SET_PDEATHSIG does not reach
  // it (the executor's fence kills the trial's group).
  std::vector<pid_t> pids;
  for (const std::string& s : started) {
    EXPECT_TRUE(s.rfind("4 ", 0) == 0 || s.rfind("5 ", 0) == 0) << s;
    std::istringstream words(s);
    int number;
    pid_t shell, sleeper;
    ASSERT_TRUE(words >> number >> shell >> sleeper) << s;
    pids.push_back(shell);
    pids.push_back(sleeper);
  }
  kill(run, SIGKILL);
  EXPECT_EQ(Wait(run), 128 + SIGKILL);
  for (pid_t pid : pids) EXPECT_TRUE(ExitsWithin(pid, 20000)) << pid << " outlived its runner";

  // What had been stored before the kill.
  auto snapshot = Trials();
  ASSERT_EQ(snapshot.size(), 6u);
  std::map<int, std::vector<storage::MetricPoint>> metrics;
  {
    auto db = storage::Storage::Open(db_).value();
    int64_t id = db->FindStudy("s").value()->id;
    for (const auto& t : snapshot) metrics[t.number] = db->TrialMetrics(id, t.number).value();
  }
  for (int n = 0; n < 4; ++n) EXPECT_EQ(snapshot[n].state, storage::TrialState::kCompleted);
  EXPECT_EQ(snapshot[4].state, storage::TrialState::kRunning);
  EXPECT_EQ(snapshot[5].state, storage::TrialState::kRunning);

  std::filesystem::remove(dir_ / "block");
  auto again = Cli({"run", study, "--storage", db_});
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("resuming study 's'"));

  auto trials = Trials();
  auto db = storage::Storage::Open(db_).value();
  int64_t id = db->FindStudy("s").value()->id;
  for (int n = 0; n < 4; ++n) {
    EXPECT_EQ(trials[n].state, storage::TrialState::kCompleted);
    EXPECT_EQ(trials[n].value, snapshot[n].value);
    EXPECT_EQ(trials[n].params, snapshot[n].params);
    auto m = db->TrialMetrics(id, n).value();
    ASSERT_EQ(m.size(), metrics[n].size());
    for (size_t k = 0; k < m.size(); ++k) EXPECT_EQ(m[k].value, metrics[n][k].value);
  }
  EXPECT_EQ(trials[4].state, storage::TrialState::kInterrupted);
  EXPECT_EQ(trials[5].state, storage::TrialState::kInterrupted);
  int finished = 0;
  std::set<int> reruns;
  for (const auto& t : trials) {
    finished += storage::IsFinished(t.state);
    if (t.retry_of) {
      reruns.insert(*t.retry_of);
      EXPECT_EQ(t.params, trials[*t.retry_of].params);
      EXPECT_EQ(t.state, storage::TrialState::kCompleted);
    }
  }
  EXPECT_EQ(finished, 8);
  EXPECT_EQ(reruns, (std::set<int>{4, 5}));
}

TEST_F(CliTest, TheExampleStudyRunsAsWritten) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/test installs it)";
  std::string example = std::string(HYPERPACK_SOURCE_DIR) + "/examples/fmnist_softmax/study.yaml";
  std::vector<std::string> args = {HYPERPACK_CLI, "run",          example, "--storage",
                                   db_,           "--max-trials", "2"};
  auto r = RunCommand(args, HYPERPACK_SOURCE_DIR);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("fmnist-softmax");
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    // Softmax regression on Fashion-MNIST: better than chance whatever the configuration.
    EXPECT_GT(*t.value, 0.3);
    EXPECT_LE(*t.value, 1.0);
  }
}

// And each trial's torchrun export (trial 0 has one rank, trial 1 two, with seed 1), run as printed
// under Debian's torchrun with the trial's CPU slots, trains to that trial's accuracy: every value
// the trainer read from its parameters file travelled in the line.
TEST_F(CliTest, TheTrainerStudyRunsAsWrittenAndItsTorchrunExportsTrainToEachTrialsAccuracy) {
  // The examples name the trainer as hyperpack-trainer: the one built beside this hyperpack
  // (build/trainer/, where scripts/ build it) comes first on a trial's PATH.
  std::string trainer = std::string(HYPERPACK_SOURCE_DIR) + "/build/trainer/hyperpack-trainer";
  if (!std::filesystem::exists(trainer))
    GTEST_SKIP() << "hyperpack-trainer is not built (no libtorch): " << trainer;
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/test installs it)";
  std::string example = std::string(HYPERPACK_SOURCE_DIR) + "/examples/fmnist/quickstart.yaml";
  auto r = RunCommand({HYPERPACK_CLI, "run", example, "--storage", db_, "--max-trials", "2"},
                      dir_.path().string());  // anywhere: nothing in it is relative
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto trials = Trials("fmnist-quickstart");
  ASSERT_EQ(trials.size(), 2u);
  for (const auto& t : trials) {
    EXPECT_EQ(t.state, storage::TrialState::kCompleted) << t.error;
    EXPECT_GE(*t.value, 0.0);
    EXPECT_LE(*t.value, 1.0);
  }
  if (!std::filesystem::exists("/usr/bin/torchrun")) GTEST_SKIP() << "no torchrun (python3-torch)";
  std::set<int64_t> ranks;
  for (const auto& t : trials) {
    const int64_t data_parallel = std::get<int64_t>(t.params.at("data_parallel"));
    ranks.insert(data_parallel);
    auto line = Cli({"export", "fmnist-quickstart", "--format", "torchrun", "--trial",
                     std::to_string(t.number), "--storage", db_});
    ASSERT_EQ(line.exit_code, 0) << line.err;
    const std::string dir = std::filesystem::path(trainer).parent_path().string();
    auto trained =
        RunCommand({"/bin/sh", "-c",
                    "export PATH=" + dir +
                        ":$PATH MASTER_PORT=" + std::to_string(testing::FreeLoopbackPort()) +
                        " HYPERPACK_CPUS=" + std::to_string(data_parallel) + "\n" + line.out},
                   dir_.path().string());
    ASSERT_EQ(trained.exit_code, 0) << line.out << trained.err;
    // Rank 0's last epoch (torchrun --tee prefixes each line with its rank).
    const size_t at = trained.out.rfind("[default0]:{\"epoch\"");
    ASSERT_NE(at, std::string::npos) << trained.out;
    const size_t from = trained.out.find('{', at);
    Json last = Json::parse(trained.out.substr(from, trained.out.find('\n', from) - from));
    EXPECT_DOUBLE_EQ(last["val_accuracy"].get<double>(), *t.value) << line.out;
    EXPECT_EQ(last["global_batch"].get<int64_t>(), std::get<int64_t>(t.params.at("batch_size")));
  }
  EXPECT_EQ(ranks, (std::set<int64_t>{1, 2})) << "seed 1 no longer gives one trial of each";
}

}  // namespace
}  // namespace hyperpack
