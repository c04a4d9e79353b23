// The study controller with scripted event sequences: no process, no socket, no sleep. And the
// replay property: what a live run wrote, read back from a real SQLite file and fed to a fresh
// controller, rebuilds the same trials, rungs, pauses and promotions.
#include "hyperpack/scheduler/study_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <algorithm>

#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <random>
#include <set>

#include "hyperpack/config_json.h"
#include "hyperpack/scheduler/run_phase.h"
#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"
#include "study_store.h"
#include "test_util.h"

namespace hyperpack::scheduler {
namespace {

using storage::TrialRecord;
using storage::TrialState;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// `budget_more` and `trial_more` go inside those sections.
study::StudySpec Spec(const std::string& extra, int max_trials = 6, int max_parallel = 2,
                      const std::string& budget_more = "", const std::string& trial_more = "") {
  std::string yaml = StrCat("name: s\nobjective: {metric: loss, direction: minimize}\n",
                            "search_space: {x: {type: float, low: 0, high: 1}}\n",
                            "trial: {command: \"train {x}\"", trial_more, "}\n",
                            "budget: {max_trials: ", max_trials, ", max_parallel: ", max_parallel,
                            ", max_failed: 3", budget_more, "}\n", extra);
  study::ParseOutcome parsed = study::ParseStudy(yaml, "s.yaml");
  EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
  return *parsed.spec;
}

MetricLine Line(double loss, std::optional<int64_t> epoch) {
  MetricLine m;
  m.epoch = epoch;
  m.step = epoch;
  m.values = {{"loss", loss}};
  return m;
}

// Drives one controller by hand. Writes are acknowledged and proposals answered (x = 0.01, 0.02,
// ...) at once unless a test says otherwise; everything the controller said is kept.
class Harness {
 public:
  explicit Harness(const study::StudySpec& spec, int nodes = 1, int cpus = 4,
                   bool continue_in_place = false, double preempt_after_s = 0)
      : spec_(spec) {
    ControllerOptions o = Options(spec);
    o.continue_in_place = continue_in_place;
    o.preempt_after_s = preempt_after_s;
    for (int n = 0; n < nodes; ++n)
      o.nodes.push_back({{StrCat("n", n), 0, cpus}, {}, StrCat("10.0.0.", n)});
    controller_ = StudyController::Make(spec, o).value();
  }
  // On these nodes (GPUs, their memory).
  Harness(const study::StudySpec& spec, const std::vector<Node>& nodes) : spec_(spec) {
    ControllerOptions o = Options(spec);
    for (const Node& n : nodes) {
      std::vector<std::string> gpu_names;
      for (int g = 0; g < n.gpus; ++g) gpu_names.push_back(std::to_string(g));
      o.nodes.push_back({n, gpu_names, "10.0.0.1"});
    }
    controller_ = StudyController::Make(spec, o).value();
  }
  static ControllerOptions Options(const study::StudySpec& spec) {
    ControllerOptions o;
    o.study_id = 1;
    o.max_trials = spec.budget.max_trials;
    o.max_parallel = spec.budget.max_parallel;
    o.kill_grace_s = 5;
    o.host = "here";
    o.log_root = "/logs/s";
    return o;
  }

  void Start(const StoredStudy& stored = {}) {
    Take(controller_->Restore(stored).value());
    Take(controller_->Start(now));
  }
  void Feed(EventPayload e) { Take(controller_->Handle({now, std::move(e)})); }
  void At(double t) {
    now = t;
    Feed(Tick{});
  }
  void Report(int trial, double loss, std::optional<int64_t> epoch, bool checkpoint = true) {
    Feed(MetricReport{trial, Line(loss, epoch), checkpoint});
  }
  void Exit(int trial, RankExit how, std::string tail = "") {
    Feed(RankExited{trial, 0, how, std::move(tail)});
  }
  // The trials launched and not yet ended.
  std::set<int> Running() const {
    std::set<int> r = launched_;
    for (int t : ended_) r.erase(t);
    return r;
  }
  bool Signalled(int trial) const {
    for (const SignalCmd& s : signals)
      if (s.trial == trial) return true;
    return false;
  }
  std::optional<TrialState> StateOf(int trial) const {
    std::optional<TrialState> state;
    for (const Row& row : rows) {
      if (auto* i = std::get_if<InsertTrialRow>(&row); i && i->trial.number == trial)
        state = i->trial.state;
      if (auto* f = std::get_if<FinishTrialRow>(&row); f && f->trial.number == trial)
        state = f->trial.state;
      if (auto* r = std::get_if<ResumeTrialRow>(&row); r && r->trial == trial)
        state = TrialState::kRunning;
    }
    return state;
  }
  std::string ErrorOf(int trial) const {
    std::string error;
    for (const Row& row : rows)
      if (auto* f = std::get_if<FinishTrialRow>(&row); f && f->trial.number == trial)
        error = f->trial.error;
    return error;
  }

  // What came of control `id` (ControlDoneRow), if it was answered.
  std::optional<ControlDoneRow> Answer(int64_t id) const {
    std::optional<ControlDoneRow> out;
    for (const Row& row : rows)
      if (auto* c = std::get_if<ControlDoneRow>(&row); c && c->id == id) out = *c;
    return out;
  }
  // Sends a control of `kind` (id: one more than the last) and returns what came of it.
  ControlDoneRow Ask(storage::ControlRecord c) {
    c.id = ++controls_;
    Feed(ControlArrived{c});
    return Answer(c.id).value_or(ControlDoneRow{-1, true, "no answer"});
  }
  ControlDoneRow Ask(storage::ControlKind kind) {
    storage::ControlRecord c;
    c.kind = kind;
    return Ask(c);
  }

  StudyController& controller() { return *controller_; }
  // The first attempt's number of a launched trial.
  int RootOf(int trial) const {
    for (const LaunchPlan& p : launches)
      if (p.trial == trial) return p.root;
    return trial;
  }

  double now = 0;
  bool auto_ack = true;
  std::vector<Row> rows;
  std::vector<LaunchPlan> launches;
  std::vector<SignalCmd> signals;
  std::vector<ContinueCmd> continues;
  std::vector<double> wakes;
  std::vector<std::string> said;
  std::vector<tuner::TrialOutcome> observed;
  std::vector<double> budget_spent;  // as each ProposeCmd told it
  // The tuner's cost predictions for the proposals; unset: none.
  std::function<std::optional<tuner::CostPrediction>(const Config&)> predict;
  std::vector<int> unacked;
  std::optional<RunSummary> summary;

 private:
  void Take(std::vector<Command> commands) {
    std::deque<EventPayload> next;
    for (Command& c : commands) {
      if (auto* p = std::get_if<ProposeCmd>(&c)) {
        budget_spent.push_back(p->budget_spent);
        std::vector<Config> configs;
        for (int i = 0; i < p->n; ++i) configs.push_back({{"x", Value{++proposed_ / 100.0}}});
        std::vector<std::optional<tuner::CostPrediction>> costs;
        if (predict)
          for (const Config& config : configs) costs.push_back(predict(config));
        next.push_back(ProposalsReady{configs, std::move(costs)});
      } else if (auto* o = std::get_if<ObserveCmd>(&c)) {
        observed.push_back(o->outcome);
      } else if (auto* w = std::get_if<WriteCmd>(&c)) {
        rows.insert(rows.end(), w->rows.begin(), w->rows.end());
        if (w->ack && auto_ack) next.push_back(TrialPersisted{*w->ack, Status::Ok()});
        if (w->ack && !auto_ack) unacked.push_back(*w->ack);
      } else if (auto* l = std::get_if<LaunchCmd>(&c)) {
        launches.push_back(l->plan);
        launched_.insert(l->plan.trial);
        ended_.erase(l->plan.trial);
      } else if (auto* s = std::get_if<SignalCmd>(&c)) {
        signals.push_back(*s);
      } else if (auto* k = std::get_if<ContinueCmd>(&c)) {
        continues.push_back(*k);
      } else if (auto* wk = std::get_if<WakeCmd>(&c)) {
        wakes.push_back(wk->at);
      } else if (auto* say = std::get_if<SayCmd>(&c)) {
        said.push_back(say->text);
      } else if (auto* cl = std::get_if<CloseLogsCmd>(&c)) {
        ended_.insert(cl->trial);
      } else if (auto* f = std::get_if<FinishCmd>(&c)) {
        summary = f->summary;
      }
    }
    for (EventPayload& e : next) Feed(std::move(e));
  }

  study::StudySpec spec_;
  std::unique_ptr<StudyController> controller_;
  int proposed_ = 0;
  int64_t controls_ = 0;
  std::set<int> launched_, ended_;
};

// ---- Budget, failures, time --------------------------------------------------------------------

TEST(StudyControllerTest, RunsMaxTrialsAtMostMaxParallelAtATimeThenEndsOnTheBudget) {
  Harness h(Spec("", 5, 2));
  h.Start();
  EXPECT_EQ(h.Running(), (std::set<int>{0, 1}));
  for (int done = 0; done < 5; ++done) {
    ASSERT_FALSE(h.summary);
    int trial = *h.Running().begin();
    EXPECT_LE(h.Running().size(), 2u);
    h.Report(trial, 1.0 - trial * 0.1, std::nullopt);
    h.Exit(trial, RankExit::Exited(0));
  }
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kBudgetReached);
  EXPECT_EQ(h.summary->completed, 5);
  EXPECT_EQ(h.summary->best_trial, 4);
  EXPECT_EQ(h.launches.size(), 5u);
}

TEST(StudyControllerTest, StopsLaunchingAfterMaxFailedAndSaysWhy) {
  Harness h(Spec("", 10, 1));
  h.Start();
  for (int i = 0; i < 3; ++i) h.Exit(*h.Running().begin(), RankExit::Exited(1), "boom\n");
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kTooManyFailed);
  EXPECT_EQ(h.summary->exit_code, 1);
  EXPECT_EQ(h.launches.size(), 3u);
  EXPECT_THAT(h.ErrorOf(0), HasSubstr("exit 1: boom"));
}

TEST(StudyControllerTest, TheTimeLimitStopsLaunchingAndWaitsForRunningTrials) {
  Harness h(Spec("", 50, 2, ", time_limit: 10s"));
  h.Start();
  EXPECT_THAT(h.wakes, ::testing::Contains(10.0));
  h.At(10);
  EXPECT_FALSE(h.summary) << "two trials still run";
  for (int t : h.Running()) {
    h.Report(t, 0.5, std::nullopt);
    h.Exit(t, RankExit::Exited(0));
  }
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kTimeLimit);
  EXPECT_EQ(h.launches.size(), 2u);
}

// ---- Cost -------------------------------------------------------------------------------------

TEST(StudyControllerTest, ATrialCostsItsSlotsTimesItsTimePerUnitOfResource) {
  Harness h(Spec("resources: {cpus: 2}\n", 1, 1));
  h.Start();
  h.At(10);
  h.Report(0, 0.5, 2);
  h.At(12);
  h.Exit(0, RankExit::Exited(0));
  ASSERT_EQ(h.observed.size(), 1u);
  ASSERT_TRUE(h.observed[0].cost.has_value());
  EXPECT_DOUBLE_EQ(*h.observed[0].cost, 12.0 * 2 / 2) << "12 s on 2 CPU slots, 2 epochs";
  // The study declares resources: its tuner weighs cost, unless told not to.
  EXPECT_TRUE(TunerOptionsFor(Spec("resources: {cpus: 2}\n"), 1).cost_aware);
  EXPECT_FALSE(TunerOptionsFor(Spec(""), 1).cost_aware);
  EXPECT_FALSE(
      TunerOptionsFor(Spec("resources: {cpus: 2}\ntuner: {cost_aware: false}\n"), 1).cost_aware);
}

// With a pruner the model waits for two final values per dimension of the space (one here).
TEST(StudyControllerTest, AStudyWithAPrunerDrawsUntilTwoTrialsPerDimensionHaveCompleted) {
  const std::string pruner = "pruner: {algorithm: forecast, max_resource: 9}\n";
  EXPECT_EQ(TunerOptionsFor(Spec(""), 1).initial_full_trials, 0);
  EXPECT_EQ(TunerOptionsFor(Spec(pruner), 1).initial_full_trials,
            study::kPrunedInitialFullPerDim * 1);
  EXPECT_EQ(
      TunerOptionsFor(Spec(pruner + "tuner: {initial_full_trials: 0}\n"), 1).initial_full_trials,
      0);
  EXPECT_EQ(TunerOptionsFor(Spec("tuner: {initial_full_trials: 7}\n"), 1).initial_full_trials, 7);
}

TEST(StudyControllerTest, AStudyWithAPrunerDrawsHalfItsProposalsUnlessTheFileSaysOtherwise) {
  const std::string pruner = "pruner: {algorithm: median, max_resource: 9}\n";
  EXPECT_EQ(TunerOptionsFor(Spec(""), 1).random_fraction, 0.0);
  EXPECT_EQ(TunerOptionsFor(Spec(pruner), 1).random_fraction, study::kPrunedRandomFraction);
  EXPECT_EQ(TunerOptionsFor(Spec(pruner + "tuner: {random_fraction: 0}\n"), 1).random_fraction,
            0.0);
  EXPECT_EQ(TunerOptionsFor(Spec("tuner: {random_fraction: 0.25}\n"), 1).random_fraction, 0.25);
}

TEST(StudyControllerTest, TheCoreHoursBudgetStopsNewTrialsOnceSpentAndRunningOnesFinish) {
  // 0.01 core-hours = 36 core-seconds; trials hold one slot each, two at a time.
  Harness h(Spec("resources: {cpus: 1}\n", 50, 2, ", core_hours: 0.01"));
  h.Start();
  ASSERT_EQ(h.Running(), (std::set<int>{0, 1}));
  EXPECT_EQ(h.budget_spent.at(0), 0.0);
  h.At(10);
  h.Report(0, 0.5, std::nullopt);
  h.Exit(0, RankExit::Exited(0));  // 10 s spent, 10 s running: trial 2 starts
  ASSERT_EQ(h.Running(), (std::set<int>{1, 2}));
  EXPECT_NEAR(h.budget_spent.back(), 20.0 / 36, 1e-9) << "the cost share beats 2 of 50 trials";
  h.At(20);
  h.Report(1, 0.4, std::nullopt);
  h.Exit(1, RankExit::Exited(0));  // 30 s spent and 10 s running: 40 >= 36, nothing new
  EXPECT_EQ(h.Running(), (std::set<int>{2}));
  EXPECT_FALSE(h.summary);
  h.At(25);
  h.Report(2, 0.3, std::nullopt);
  h.Exit(2, RankExit::Exited(0));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kBudgetReached);
  EXPECT_EQ(h.summary->completed, 3);
  EXPECT_EQ(h.launches.size(), 3u);
}

TEST(StudyControllerTest, PredictedRunTimesOrderTheQueueShortestFirst) {
  // One CPU slot and three proposals at once; the tuner predicts x = 0.01 at 30 s per epoch,
  // 0.02 at 10 s and 0.03 at 20 s (9 epochs each: the pruner's full trial). The default where
  // resources are declared is shortest first; `queue: {order: fifo}` turns it off.
  for (const char* queue : {"", "queue: {order: fifo}\n"}) {
    SCOPED_TRACE(queue);
    Harness h(
        Spec(std::string("resources: {cpus: 1}\npruner: {algorithm: asha, max_resource: 9}\n") +
                 queue,
             3, 3),
        1, 1);
    h.predict = [](const Config& c) -> std::optional<tuner::CostPrediction> {
      const double x = std::get<double>(c.at("x"));
      return tuner::CostPrediction{x < 0.015 ? 30.0 : x < 0.025 ? 10.0 : 20.0, 0.1};
    };
    h.Start();
    std::vector<std::string> order;
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(h.Running().size(), 1u) << i;
      const int trial = *h.Running().begin();
      order.push_back(h.launches.back().command);
      h.At(h.now + 10);
      h.Report(trial, 0.5, 9);
      h.Exit(trial, RankExit::Exited(0));
    }
    const std::vector<std::string> fifo = {"train 0.01", "train 0.02", "train 0.03"};
    const std::vector<std::string> sjf = {"train 0.02", "train 0.03", "train 0.01"};
    EXPECT_EQ(order, *queue ? fifo : sjf);
    ASSERT_TRUE(h.summary);
    EXPECT_EQ(h.summary->completed + h.summary->pruned, 3) << "ASHA judges the later two at 9";
  }
  // What the study file says reaches the queue.
  QueueOptions q = QueueOptionsFor(Spec("queue: {order: sjf, aging: 2, max_wait: 1h}\n"));
  EXPECT_EQ(q.order, Order::kShortestFirst) << "sjf without resources, as asked";
  EXPECT_EQ(q.aging, 2.0);
  EXPECT_EQ(q.max_wait, 3600.0);
  EXPECT_EQ(QueueOptionsFor(Spec("resources: {cpus: 1}\n")).max_wait_factor, 6.0)
      << "the default guard: 6x the typical run time";
  EXPECT_TRUE(QueueOptionsFor(Spec("resources: {cpus: 1}\n")).critical_first)
      << "a trial that would end last even if started now goes first";
  QueueOptions off = QueueOptionsFor(Spec("queue: {order: sjf, max_wait: none}\n"));
  EXPECT_EQ(off.max_wait, 0.0);
  EXPECT_EQ(off.max_wait_factor, 0.0);
  EXPECT_TRUE(TunerOptionsFor(Spec("queue: {order: sjf}\n"), 1).predict_costs);
  EXPECT_FALSE(
      TunerOptionsFor(Spec("resources: {cpus: 1}\nqueue: {order: fifo}\n"), 1).predict_costs);
  EXPECT_EQ(QueueOptionsFor(Spec("")).order, Order::kArrival);
}

TEST(StudyControllerTest, ATrialPastItsTimeoutIsTerminatedThenKilledAndEndsTimedOut) {
  Harness h(Spec("", 1, 1, "", ", timeout: 5s"));
  h.Start();
  h.At(5);
  ASSERT_EQ(h.signals.size(), 1u);
  EXPECT_EQ(h.signals[0].kind, SignalKind::kTerminate);
  h.At(10);  // the grace period has passed
  ASSERT_EQ(h.signals.size(), 2u);
  EXPECT_EQ(h.signals[1].kind, SignalKind::kKill);
  h.Exit(0, RankExit::Signaled(SIGKILL));
  EXPECT_EQ(h.StateOf(0), TrialState::kTimeout);
}

// A one-process `hyperpack-trainer` trial may be served by a warm trainer: its plan carries the
// rendered words. Another command, or `trial.warm: false`, runs as its own process.
TEST(StudyControllerTest, AOneProcessTrainerTrialCarriesItsWordsForAWarmTrainer) {
  auto spec_with = [](const std::string& trial) {
    study::ParseOutcome parsed =
        study::ParseStudy(StrCat("name: s\nobjective: {metric: loss, direction: minimize}\n",
                                 "search_space: {x: {type: float, low: 0, high: 1}}\n",
                                 "trial: ", trial, "\n", "budget: {max_trials: 1}\n"),
                          "s.yaml");
    EXPECT_TRUE(parsed.spec) << parsed.ErrorText();
    return *parsed.spec;
  };
  Harness warm(spec_with("{command: \"hyperpack-trainer --lr {x} --epochs 2\"}"));
  warm.Start();
  ASSERT_EQ(warm.launches.size(), 1u);
  EXPECT_EQ(warm.launches[0].warm_argv,
            (std::vector<std::string>{"hyperpack-trainer", "--lr", "0.01", "--epochs", "2"}));
  Harness off(spec_with("{command: \"hyperpack-trainer --lr {x}\", warm: false}"));
  off.Start();
  ASSERT_EQ(off.launches.size(), 1u);
  EXPECT_TRUE(off.launches[0].warm_argv.empty());
  Harness other(spec_with("{command: \"python3 train.py --lr {x}\"}"));
  other.Start();
  ASSERT_EQ(other.launches.size(), 1u);
  EXPECT_TRUE(other.launches[0].warm_argv.empty());
}

TEST(StudyControllerTest, ATrialsRowIsStoredBeforeItIsLaunched) {
  Harness h(Spec("", 1, 1));
  h.auto_ack = false;
  h.Start();
  EXPECT_TRUE(h.launches.empty());
  ASSERT_EQ(h.unacked, (std::vector<int>{0}));
  EXPECT_EQ(h.StateOf(0), TrialState::kRunning);
  h.Feed(TrialPersisted{0, Status::Ok()});
  ASSERT_EQ(h.launches.size(), 1u);
  EXPECT_EQ(h.launches[0].command, "train 0.01");
}

// ---- Interruption and lost nodes ---------------------------------------------------------------

TEST(StudyControllerTest, CtrlCStopsRunningTrialsAndASecondKillsThem) {
  Harness h(Spec("", 10, 2));
  h.Start();
  h.Feed(Interrupt{true});
  EXPECT_EQ(h.signals.size(), 2u);
  h.Feed(Interrupt{true});
  ASSERT_EQ(h.signals.size(), 4u);
  EXPECT_EQ(h.signals[3].kind, SignalKind::kKill);
  for (int t : h.Running()) h.Exit(t, RankExit::Signaled(SIGKILL));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->exit_code, 130);
  EXPECT_EQ(h.summary->interrupted, 2);
  EXPECT_EQ(h.StateOf(0), TrialState::kInterrupted);
}

// ---- Controls: what people ask of a live run ------------------------------------------------

using storage::ControlKind;

// Ends every running trial with `loss`, until none runs or the run is over.
void CompleteRunning(Harness& h, double loss) {
  for (int i = 0; i < 100 && !h.Running().empty() && !h.summary; ++i) {
    const int t = *h.Running().begin();
    h.Report(t, loss, std::nullopt);
    h.Exit(t, RankExit::Exited(0));
  }
}

TEST(StudyControllerTest, StopStartsNothingMoreAndLetsRunningTrialsEnd) {
  Harness h(Spec("", 10, 2));
  h.Start();
  ControlDoneRow answer = h.Ask(ControlKind::kStop);
  EXPECT_FALSE(answer.refused);
  EXPECT_THAT(answer.outcome, HasSubstr("2 trials running end as they would"));
  EXPECT_TRUE(h.signals.empty()) << "running trials are not signalled";
  EXPECT_TRUE(h.Ask(ControlKind::kStop).refused) << "a second stop";
  CompleteRunning(h, 0.5);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kStopped);
  EXPECT_EQ(h.summary->completed, 2);
  EXPECT_EQ(h.summary->exit_code, 0);
  EXPECT_EQ(h.launches.size(), 2u);
}

TEST(StudyControllerTest, CancelStopsRunningTrialsAndRecordsThemCancelled) {
  Harness h(Spec("", 10, 2));
  h.Start();
  ControlDoneRow answer = h.Ask(ControlKind::kCancel);
  EXPECT_FALSE(answer.refused);
  EXPECT_THAT(answer.outcome, HasSubstr("2 trials running stopped"));
  EXPECT_EQ(h.signals.size(), 2u);
  // One finishes with its objective before the signal lands: its result stands.
  h.Report(0, 0.3, std::nullopt);
  h.Exit(0, RankExit::Exited(0));
  h.Exit(1, RankExit::Signaled(SIGTERM));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.StateOf(0), TrialState::kCompleted);
  EXPECT_EQ(h.StateOf(1), TrialState::kCancelled);
  EXPECT_EQ(h.summary->reason, StopReason::kCancelled);
  EXPECT_EQ(h.summary->failed, 0) << "a cancelled trial is not a failure";
  // The tuner learns nothing of the cancelled trial.
  ASSERT_EQ(h.observed.size(), 1u);
  EXPECT_EQ(h.observed[0].kind, tuner::TrialOutcome::Kind::kCompleted);
}

TEST(StudyControllerTest, PauseStopsRunningTrialsUntilResumeWhichRunsThemAgainFirst) {
  Harness h(Spec("", 4, 2));
  h.Start();
  ControlDoneRow paused = h.Ask(ControlKind::kPause);
  EXPECT_FALSE(paused.refused);
  EXPECT_TRUE(h.Ask(ControlKind::kPause).refused);
  EXPECT_EQ(h.signals.size(), 2u);
  h.Exit(0, RankExit::Signaled(SIGTERM));
  h.Exit(1, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(0), TrialState::kInterrupted);
  EXPECT_THAT(h.ErrorOf(0), HasSubstr("pause"));
  EXPECT_TRUE(h.Running().empty());
  EXPECT_FALSE(h.summary) << "a paused run waits";
  h.At(1000);
  EXPECT_EQ(h.launches.size(), 2u) << "nothing starts while paused";

  ControlDoneRow resumed = h.Ask(ControlKind::kResume);
  EXPECT_FALSE(resumed.refused) << resumed.outcome;
  EXPECT_TRUE(h.Ask(ControlKind::kResume).refused);
  ASSERT_EQ(h.launches.size(), 4u);
  EXPECT_EQ(h.launches[2].root, 0);
  EXPECT_EQ(h.launches[2].attempt, 2);
  EXPECT_EQ(h.launches[3].root, 1);
  CompleteRunning(h, 0.4);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->completed, 4);
  EXPECT_EQ(h.summary->failed, 0);
  EXPECT_EQ(h.summary->reason, StopReason::kBudgetReached);
}

TEST(StudyControllerTest, UpdateChangesTheBudgetOfTheLiveRun) {
  Harness h(Spec("", 3, 1));
  h.Start();
  storage::ControlRecord update;
  update.kind = ControlKind::kUpdate;
  update.max_trials = 5;
  update.max_parallel = 2;
  ControlDoneRow answer = h.Ask(update);
  EXPECT_FALSE(answer.refused) << answer.outcome;
  EXPECT_THAT(answer.outcome, HasSubstr("max_trials 5"));
  EXPECT_EQ(h.Running().size(), 2u) << "max_parallel 2 at once";
  storage::ControlRecord bad;
  bad.kind = ControlKind::kUpdate;
  bad.max_parallel = 0;
  EXPECT_TRUE(h.Ask(bad).refused);
  EXPECT_TRUE(h.Ask(ControlKind::kUpdate).refused) << "nothing to update";
  storage::ControlRecord more;
  more.kind = ControlKind::kUpdate;
  more.priority = 3;
  more.time_limit_s = 50;
  ASSERT_FALSE(h.Ask(more).refused);
  EXPECT_DOUBLE_EQ(h.controller().priority(), 3) << "a server weighs its share by it";
  EXPECT_THAT(h.wakes, ::testing::Contains(50.0)) << "woken at the new time limit";
  CompleteRunning(h, 0.5);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->completed, 5);
  EXPECT_EQ(h.summary->max_trials, 5);
}

TEST(StudyControllerTest, ATimeLimitUpdatedBelowTheRunsAgeStopsItAtOnce) {
  Harness h(Spec("", 10, 2));
  h.Start();
  h.now = 20;
  storage::ControlRecord update;
  update.kind = ControlKind::kUpdate;
  update.time_limit_s = 10;
  ASSERT_FALSE(h.Ask(update).refused);
  h.At(20.5);
  CompleteRunning(h, 0.5);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kTimeLimit);
  EXPECT_EQ(h.launches.size(), 2u);
}

TEST(StudyControllerTest, EnqueuedConfigurationsRunNextAndOnesOutsideTheSpaceAreRefused) {
  Harness h(Spec("", 4, 1));
  h.Start();
  storage::ControlRecord enqueue;
  enqueue.kind = ControlKind::kEnqueue;
  enqueue.trials = {{{{"x", 0.77}}, std::nullopt, std::nullopt},
                    {{{"x", 5.0}}, std::nullopt, std::nullopt},
                    {{{"x", 0.66}}, std::nullopt, 0}};
  ControlDoneRow answer = h.Ask(enqueue);
  EXPECT_FALSE(answer.refused) << answer.outcome;
  EXPECT_THAT(answer.outcome, HasSubstr("queued 2 configurations"));
  EXPECT_THAT(answer.outcome, HasSubstr("1 refused"));
  CompleteRunning(h, 0.5);
  ASSERT_TRUE(h.summary);
  ASSERT_EQ(h.launches.size(), 4u);
  EXPECT_EQ(h.launches[1].config.at("x"), Value{0.77}) << "before any new proposal";
  EXPECT_EQ(h.launches[2].config.at("x"), Value{0.66});
  bool retry_recorded = false;
  for (const Row& row : h.rows)
    if (auto* i = std::get_if<InsertTrialRow>(&row); i && i->trial.number == 2)
      retry_recorded = i->trial.retry_of == 0;
  EXPECT_TRUE(retry_recorded) << "a retry names the trial it re-runs";

  Harness all_bad(Spec("", 4, 1));
  all_bad.Start();
  enqueue.trials = {{{{"y", 0.5}}, std::nullopt, std::nullopt}};
  EXPECT_TRUE(all_bad.Ask(enqueue).refused);
}

TEST(StudyControllerTest, AddedResultsAreCompletedTrialsTheTunerLearns) {
  Harness h(Spec("", 6, 1));
  h.Start();
  storage::ControlRecord add;
  add.kind = ControlKind::kAddResults;
  add.trials = {{{{"x", 0.3}}, 0.05, std::nullopt},
                {{{"x", 0.4}}, std::nullopt, std::nullopt},
                {{{"x", 0.5}}, 0.2, std::nullopt}};
  ControlDoneRow answer = h.Ask(add);
  EXPECT_FALSE(answer.refused) << answer.outcome;
  EXPECT_THAT(answer.outcome, HasSubstr("added 2 trials"));
  EXPECT_THAT(answer.outcome, HasSubstr("1 refused"));
  EXPECT_EQ(h.StateOf(1), TrialState::kCompleted) << "numbered after the running trial";
  EXPECT_EQ(h.StateOf(2), TrialState::kCompleted);
  ASSERT_EQ(h.observed.size(), 2u);
  EXPECT_EQ(h.observed[0].value, 0.05);
  CompleteRunning(h, 0.5);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->best_trial, 1) << "an added result can be the best";
  EXPECT_EQ(h.summary->completed, 6) << "they count against max_trials";
}

TEST(StudyControllerTest, ATrialLostWithItsNodeRunsAgainOnAnotherAsItsNextAttempt) {
  Harness h(Spec("resources: {cpus: 1}\n", 1, 1), /*nodes=*/2, /*cpus=*/1);
  h.Start();
  ASSERT_EQ(h.launches.size(), 1u);
  int node = h.launches[0].ranks[0].node;
  h.Feed(NodeLost{node});
  h.Exit(0, RankExit::Lost());
  EXPECT_EQ(h.StateOf(0), TrialState::kNodeLost);
  ASSERT_EQ(h.launches.size(), 2u);
  const LaunchPlan& again = h.launches[1];
  EXPECT_EQ(again.attempt, 2);
  EXPECT_EQ(again.root, 0);
  EXPECT_NE(again.ranks[0].node, node);
  EXPECT_EQ(again.checkpoint_dir, "/logs/s/trial-0000/checkpoint");
  h.Report(again.trial, 0.2, std::nullopt);
  h.Exit(again.trial, RankExit::Exited(0));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->completed, 1);
}

TEST(StudyControllerTest, OccupancyCountsWhatRunsWhatWaitsAndTheSlotsOfTheNodesUp) {
  // Two nodes of two CPU slots; each trial takes two.
  Harness h(Spec("resources: {cpus: 2}\n", 4, 3), /*nodes=*/2, /*cpus=*/2);
  EXPECT_EQ(h.controller().occupancy().cpus, 4);
  EXPECT_EQ(h.controller().occupancy().cpus_busy, 0);
  h.Start();
  Occupancy o = h.controller().occupancy();
  EXPECT_EQ(o.running, 2);  // a third would need a fifth slot
  EXPECT_EQ(o.cpus_busy, 4);
  EXPECT_EQ(o.gpus, 0);
  h.Report(0, 0.5, std::nullopt);
  h.Exit(0, RankExit::Exited(0));
  o = h.controller().occupancy();
  EXPECT_EQ(o.completed, 1);
  EXPECT_EQ(o.finished, 1);
  EXPECT_EQ(o.running, 2);
  // A lost node's slots are neither there nor busy; its trial waits for room to run again.
  const int lost = h.launches[1].ranks[0].node;
  h.Feed(NodeLost{lost});
  h.Exit(1, RankExit::Lost());
  o = h.controller().occupancy();
  EXPECT_EQ(o.cpus, 2);
  EXPECT_LE(o.cpus_busy, 2);
  EXPECT_EQ(o.running + o.waiting, 2) << "the other trial, and trial 1's next attempt";
}

// ---- Sharing a server with other studies (ShareChanged) -----------------------------------------

TEST(StudyControllerTest, AShareBelowWhatItHoldsPreemptsTheYoungestTrialWhichRunsAgainLater) {
  // One node of 4 CPU slots; 3 trials at a time, each declaring none (each counts as one).
  Harness h(Spec("", 6, 3), /*nodes=*/1, /*cpus=*/4);
  h.Start();
  ASSERT_EQ(h.Running(), (std::set<int>{0, 1, 2}));
  ShareClaim alone = h.controller().Claim();
  EXPECT_EQ(alone.held_slots, 3);
  EXPECT_EQ(alone.wanted_slots, 0) << "max_parallel is reached";

  // Another study started: this one may hold 2 slots now. Trial 2 started last.
  h.now = 10;
  ShareGrant grant{{std::numeric_limits<int>::max(), 2}, {NodeUnits{0, 2}}};
  h.Feed(ShareChanged{grant});
  ASSERT_EQ(h.signals.size(), 1u);
  EXPECT_EQ(h.signals[0].trial, 2);
  EXPECT_EQ(h.signals[0].kind, SignalKind::kTerminate);
  EXPECT_EQ(h.Running(), (std::set<int>{0, 1, 2})) << "it stops in its own time";
  // A second share message while it stops asks nothing more of the others.
  h.Feed(ShareChanged{grant});
  EXPECT_EQ(h.signals.size(), 1u);

  h.Exit(2, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(2), TrialState::kInterrupted);
  EXPECT_THAT(h.ErrorOf(2), HasSubstr("another study"));
  EXPECT_EQ(h.Running(), (std::set<int>{0, 1})) << "its next attempt waits within the share";
  ShareClaim claim = h.controller().Claim();
  EXPECT_EQ(claim.held_slots, 2);
  EXPECT_EQ(claim.wanted_slots, 1) << "the requeued trial";

  // A trial that ends frees a place in the share, and the preempted trial takes it first.
  h.Report(0, 0.5, std::nullopt);
  h.Exit(0, RankExit::Exited(0));
  ASSERT_EQ(h.launches.size(), 4u);
  EXPECT_EQ(h.launches[3].root, 2);
  EXPECT_EQ(h.launches[3].attempt, 2);
  EXPECT_EQ(h.Running().size(), 2u);

  // The other study is done: the whole node again.
  h.Feed(ShareChanged{{{}, {NodeUnits{}}}});
  EXPECT_EQ(h.Running().size(), 3u);
  for (int i = 0; i < 10 && !h.summary; ++i) {
    const int t = *h.Running().begin();
    h.Report(t, 0.4, std::nullopt);
    h.Exit(t, RankExit::Exited(0));
  }
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->completed, 6);
  EXPECT_EQ(h.summary->preempted, 1);
  EXPECT_EQ(h.summary->failed, 0);
}

TEST(StudyControllerTest, WithPreemptAfterTrialsOverTheShareHaveThatLongToEndByThemselves) {
  // One node of 4 CPU slots, 3 trials at a time; 30 s of grace.
  Harness h(Spec("", 8, 3), 1, 4, false, /*preempt_after_s=*/30);
  h.Start();
  ASSERT_EQ(h.Running(), (std::set<int>{0, 1, 2}));
  h.now = 10;
  h.Feed(ShareChanged{{{std::numeric_limits<int>::max(), 1}, {NodeUnits{0, 3}}}});
  EXPECT_TRUE(h.signals.empty()) << "nothing is preempted before the grace is over";
  EXPECT_NE(std::find(h.wakes.begin(), h.wakes.end(), 40.0), h.wakes.end());
  EXPECT_TRUE(std::any_of(h.said.begin(), h.said.end(), [](const std::string& s) {
    return s.find("2 CPU slots over it") != std::string::npos;
  }));

  // Trial 0 ends by itself within the grace; nothing starts in its place, over the share.
  h.now = 20;
  h.Report(0, 0.5, std::nullopt);
  h.Exit(0, RankExit::Exited(0));
  EXPECT_EQ(h.Running(), (std::set<int>{1, 2}));
  EXPECT_TRUE(h.signals.empty());

  // At the end of the grace only what is still over is preempted: the youngest, trial 2.
  h.At(40);
  ASSERT_EQ(h.signals.size(), 1u);
  EXPECT_EQ(h.signals[0].trial, 2);
  h.Exit(2, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(2), TrialState::kInterrupted);
  EXPECT_EQ(h.Running(), (std::set<int>{1}));
}

TEST(StudyControllerTest, WithPreemptAfterAShareGivenBackWithinTheGracePreemptsNothing) {
  Harness h(Spec("", 8, 3), 1, 4, false, /*preempt_after_s=*/30);
  h.Start();
  h.now = 10;
  h.Feed(ShareChanged{{{std::numeric_limits<int>::max(), 1}, {NodeUnits{0, 3}}}});
  // The other study ended before the grace did: the whole node again.
  h.now = 25;
  h.Feed(ShareChanged{{{}, {NodeUnits{}}}});
  h.At(40);
  EXPECT_TRUE(h.signals.empty());
  EXPECT_EQ(h.Running(), (std::set<int>{0, 1, 2}));
  // A later squeeze gets a grace of its own, from then.
  h.now = 50;
  h.Feed(ShareChanged{{{std::numeric_limits<int>::max(), 2}, {NodeUnits{0, 2}}}});
  h.At(79);
  EXPECT_TRUE(h.signals.empty());
  h.At(80);
  ASSERT_EQ(h.signals.size(), 1u);
  EXPECT_EQ(h.signals[0].trial, 2);
}

TEST(StudyControllerTest, WithheldGpusAreNeverPlacedOnIncludingOnANodeThatJoinsLater) {
  study::StudySpec spec = Spec("resources: {gpus: 1}\n", 8, 4);
  ControllerOptions o;
  o.study_id = 1;
  o.max_trials = 8;
  o.max_parallel = 4;
  o.log_root = "/logs/s";
  o.nodes.push_back({{"a", 4, 8}, {"0", "1", "2", "3"}, "10.0.0.1"});
  // GPUs 0 and 1 of node a, and node b when it joins, are another study's.
  o.share = ShareGrant{{2, 0}, {NodeUnits{0x3, 0}, NodeUnits{0xF, 8}}};
  auto controller = StudyController::Make(spec, o).value();
  std::vector<LaunchPlan> launches;
  std::deque<EventPayload> next;
  auto take = [&](std::vector<Command> commands) {
    for (Command& c : commands) {
      if (auto* p = std::get_if<ProposeCmd>(&c)) {
        std::vector<Config> configs;
        for (int i = 0; i < p->n; ++i) configs.push_back({{"x", Value{0.1 * (i + 1)}}});
        next.push_back(ProposalsReady{configs, {}});
      } else if (auto* w = std::get_if<WriteCmd>(&c); w && w->ack) {
        next.push_back(TrialPersisted{*w->ack, Status::Ok()});
      } else if (auto* l = std::get_if<LaunchCmd>(&c)) {
        launches.push_back(l->plan);
      }
    }
  };
  auto drain = [&] {
    while (!next.empty()) {
      EventPayload e = std::move(next.front());
      next.pop_front();
      take(controller->Handle({1, std::move(e)}));
    }
  };
  take(controller->Restore({}).value());
  take(controller->Start(0));
  drain();
  ASSERT_EQ(launches.size(), 2u) << "the limit is 2 GPUs";
  std::set<int> used;
  for (const LaunchPlan& p : launches) used.insert(p.placement.ranks[0].gpus[0]);
  EXPECT_EQ(used, (std::set<int>{2, 3}));
  ShareClaim claim = controller->Claim();
  ASSERT_EQ(claim.held.size(), 1u);
  EXPECT_EQ(claim.held[0].gpus, 0xCu);
  EXPECT_EQ(claim.held_gpus, 2);
  EXPECT_EQ(claim.wanted_gpus, 2);

  // Node b joins, withheld by the share already given; then the share grows into it.
  take(controller->Handle({2, NodeJoined{{{"b", 4, 8}, {"0", "1", "2", "3"}, "10.0.0.2"}}}));
  drain();
  EXPECT_EQ(launches.size(), 2u);
  take(controller->Handle({3, ShareChanged{{{4, 0}, {NodeUnits{0x3, 0}, NodeUnits{0xC, 0}}}}}));
  drain();
  ASSERT_EQ(launches.size(), 4u);
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(launches[i].placement.ranks[0].node, 1);
    EXPECT_LT(launches[i].placement.ranks[0].gpus[0], 2);
  }
}

// ---- Capacity is not feasibility --------------------------------------------------------------

TEST(StudyControllerTest, WithNoNodeUpNothingIsProposedOrJudgedAndTheStudyWaitsUntilOneJoins) {
  Harness h(Spec("resources: {gpus: 2}\n", 2, 1), /*nodes=*/0);
  h.Start();
  EXPECT_TRUE(h.rows.empty() || std::none_of(h.rows.begin(), h.rows.end(), [](const Row& r) {
                return std::holds_alternative<InsertTrialRow>(r);
              }));
  EXPECT_TRUE(h.launches.empty());
  EXPECT_TRUE(h.observed.empty());
  EXPECT_FALSE(h.summary);
  ASSERT_FALSE(h.said.empty());
  EXPECT_THAT(h.said.back(), HasSubstr("waiting for capacity: needs 2 GPUs; 0 agents connected"));
  EXPECT_THAT(h.controller().StatusLine(), HasSubstr("waiting for capacity"));
  h.At(100);  // time passes: still nothing spent
  EXPECT_TRUE(h.launches.empty());

  h.Feed(NodeJoined{{{"big", 2, 4}, {"0", "1"}, "10.0.0.9"}});
  ASSERT_EQ(h.launches.size(), 1u);
  EXPECT_EQ(h.launches[0].ranks.size(), 2u);  // a gang of two, a GPU each
  for (int trial : {0, 1}) {
    ASSERT_EQ(h.launches.size(), static_cast<size_t>(trial + 1));
    h.Report(trial, 0.5, std::nullopt);
    h.Exit(trial, RankExit::Exited(0));
    h.Feed(RankExited{trial, 1, RankExit::Exited(0), ""});
  }
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->completed, 2);
  EXPECT_EQ(h.summary->infeasible, 0);
  EXPECT_EQ(h.summary->exit_code, 0);
}

TEST(StudyControllerTest, AllNodesLostTheRerunWaitsInsteadOfFailing) {
  Harness h(Spec("resources: {cpus: 1}\n", 1, 1), /*nodes=*/1, /*cpus=*/1);
  h.Start();
  ASSERT_EQ(h.launches.size(), 1u);
  h.Feed(NodeLost{0});
  h.Exit(0, RankExit::Lost());
  EXPECT_EQ(h.StateOf(0), TrialState::kNodeLost);
  EXPECT_EQ(h.launches.size(), 1u);  // nowhere to run it: it waits
  EXPECT_FALSE(h.summary);
  EXPECT_THAT(h.said.back(), HasSubstr("waiting for capacity"));
  h.Feed(NodeJoined{{{"back", 0, 1}, {}, "10.0.0.3"}});
  EXPECT_THAT(h.said, Contains(HasSubstr("node back joined: placing trials")));
  ASSERT_EQ(h.launches.size(), 2u);
  EXPECT_EQ(h.launches[1].attempt, 2);
  EXPECT_EQ(h.launches[1].ranks[0].node, 1);
}

// Waiting for a node is said once however many events pass; paused meanwhile, the run places
// nothing when one joins (and says nothing of placing) until it is resumed.
TEST(StudyControllerTest, AStudyPausedWhileNoNodeIsUpPlacesNothingUntilResumed) {
  Harness h(Spec("resources: {cpus: 1}\n", 2, 1), /*nodes=*/1, /*cpus=*/1);
  h.Start();
  ASSERT_EQ(h.launches.size(), 1u);
  h.Feed(NodeLost{0});
  h.Exit(0, RankExit::Lost());
  h.Feed(Tick{});
  h.Feed(Tick{});
  EXPECT_EQ(std::count_if(h.said.begin(), h.said.end(),
                          [](const std::string& s) { return s.find("waiting for capacity") == 0; }),
            1);
  ASSERT_FALSE(h.Ask(ControlKind::kPause).refused);
  h.Feed(NodeJoined{{{"back", 0, 1}, {}, "10.0.0.3"}});
  EXPECT_EQ(h.launches.size(), 1u);
  EXPECT_THAT(h.said, Not(Contains(HasSubstr("joined: placing trials"))));
  ASSERT_FALSE(h.Ask(ControlKind::kResume).refused);
  ASSERT_EQ(h.launches.size(), 2u);
  EXPECT_EQ(h.launches[1].attempt, 2);
  EXPECT_EQ(h.launches[1].ranks[0].node, 1);
}

TEST(StudyControllerTest, ADemandNoKnownNodeCouldHoldIsInfeasibleAtOnce) {
  Harness h(Spec("resources: {cpus: 8}\n", 2, 1), /*nodes=*/1, /*cpus=*/4);
  h.Start();
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->infeasible, 2);
  EXPECT_TRUE(h.launches.empty());
}

// ---- How a run ends ---------------------------------------------------------------------------

TEST(StudyControllerTest, AStudyWithNoCompletedTrialExitsOneAndSaysWhy) {
  Harness h(Spec("", 2, 1));
  h.Start();
  h.Exit(0, RankExit::Exited(1), "boom\n");
  h.Exit(1, RankExit::Exited(1), "boom\n");
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->reason, StopReason::kBudgetReached);
  EXPECT_EQ(h.summary->exit_code, 1);
  EXPECT_THAT(h.said.back(), HasSubstr("no trial of the study completed (2 failed"));
}

// ---- Early stopping ---------------------------------------------------------------------------

TEST(StudyControllerTest, AshaStopModeSignalsATrialOutsideTheTopThirdAndEndsItPruned) {
  Harness h(Spec("pruner: {algorithm: asha, max_resource: 9}\n", 3, 3));
  h.Start();
  h.Report(0, 0.1, 1);
  h.Report(1, 0.2, 1);
  EXPECT_FALSE(h.Signalled(0));
  h.Report(2, 0.9, 1);  // third of three at rung 1: only the top one continues
  EXPECT_TRUE(h.Signalled(2));
  h.Exit(2, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(2), TrialState::kPruned);
  EXPECT_THAT(h.ErrorOf(2), HasSubstr("asha:"));
}

TEST(StudyControllerTest, PromoteModePausesAtTheRungAndResumesThePromotedTrialUnderItsNumber) {
  Harness h(Spec("pruner: {algorithm: asha, max_resource: 9, mode: promote}\n", 3, 1));
  h.Start();
  auto stop_at = [](const LaunchPlan& p) {
    for (const auto& [k, v] : p.ranks[0].env)
      if (k == "HYPERPACK_STOP_AT") return v;
    return std::string("none");
  };
  for (int t = 0; t < 3; ++t) {
    ASSERT_EQ(h.launches.back().trial, t);
    EXPECT_EQ(stop_at(h.launches.back()), "1");
    h.Report(t, 0.1 * (t + 1), 1);
    EXPECT_TRUE(h.Signalled(t)) << "pausing at its rung";
    h.Exit(t, RankExit::Signaled(SIGTERM));
    if (t < 2) {
      EXPECT_EQ(h.StateOf(t), TrialState::kPaused);
    }
  }
  // Three at rung 1: the best of them (trial 0) is promoted to rung 3 and runs again as trial 0.
  const LaunchPlan& promoted = h.launches.back();
  EXPECT_EQ(promoted.trial, 0);
  EXPECT_TRUE(promoted.resume);
  EXPECT_EQ(stop_at(promoted), "3");
  EXPECT_EQ(h.StateOf(0), TrialState::kRunning);
}

// Where the driver can tell a trial to go on (a control socket), a trial at its rung waits there;
// when it is the promotion ASHA makes for the slot it holds, it goes on without a restart.
TEST(StudyControllerTest, ATrialPromotedAtItsRungGoesOnInPlace) {
  const std::string asha = "pruner: {algorithm: asha, max_resource: 9, mode: promote}\n";
  Harness h(Spec(asha, 3, 1), 1, 4, /*continue_in_place=*/true);
  h.Start();
  ASSERT_EQ(h.launches.size(), 1u);
  EXPECT_TRUE(h.launches[0].control);
  EXPECT_THAT(h.launches[0].ranks[0].env, ::testing::Contains(std::pair<std::string, std::string>(
                                              "HYPERPACK_CONTROL_FD", "3")));
  // Trials 0 and 1 meet a rung of fewer than three: nothing is promoted, and they stop, paused.
  for (int t = 0; t < 2; ++t) {
    h.Report(t, 0.5 + 0.1 * t, 1);
    EXPECT_TRUE(h.Signalled(t)) << t;
    h.Exit(t, RankExit::Signaled(SIGTERM));
    EXPECT_EQ(h.StateOf(t), TrialState::kPaused) << t;
  }
  EXPECT_TRUE(h.continues.empty());
  // Trial 2 is the best of three at rung 1: promoted to rung 3, in place.
  h.Report(2, 0.1, 1);
  EXPECT_FALSE(h.Signalled(2));
  ASSERT_EQ(h.continues.size(), 1u);
  EXPECT_EQ(h.continues[0].trial, 2);
  EXPECT_EQ(h.continues[0].target, 3.0);
  EXPECT_THAT(h.said, ::testing::Contains(HasSubstr("goes on in place")));
  h.Report(2, 0.09, 2);
  EXPECT_EQ(h.StateOf(2), TrialState::kRunning);
  // Alone at rung 3, with no slot for anything else: it stops there; the budget is spent with no
  // trial completed, so it alone is promoted to the end, from its checkpoint.
  h.Report(2, 0.08, 3);
  EXPECT_TRUE(h.Signalled(2));
  h.Exit(2, RankExit::Signaled(SIGTERM));
  ASSERT_EQ(h.launches.size(), 4u) << "three starts and one restart, none for rung 3";
  EXPECT_EQ(h.launches.back().trial, 2);
  EXPECT_TRUE(h.launches.back().resume);
  h.Report(2, 0.05, 9);
  h.Exit(2, RankExit::Exited(0));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->promoted, 2);
  EXPECT_EQ(h.summary->promoted_in_place, 1);
}

// A trial promoted in place to the end waits there for a word, as at any rung (the protocol
// does not say which stop is its last): at its final report it is told to go on to where it is,
// which ends it, and it completes; before, a command that blocks on its socket hung the study.
TEST(StudyControllerTest, ATrialSentOnToTheEndInPlaceIsToldItIsThereAtItsLastReport) {
  const std::string asha = "pruner: {algorithm: asha, max_resource: 3, mode: promote}\n";
  Harness h(Spec(asha, 3, 1), 1, 4, /*continue_in_place=*/true);
  h.Start();
  for (int t = 0; t < 2; ++t) {
    h.Report(t, 0.5 + 0.1 * t, 1);
    h.Exit(t, RankExit::Signaled(SIGTERM));
  }
  h.Report(2, 0.1, 1);
  ASSERT_EQ(h.continues.size(), 1u);
  EXPECT_EQ(h.continues[0].target, 3.0) << "rung 1 to 3, the end";
  h.Report(2, 0.09, 2);
  EXPECT_EQ(h.continues.size(), 1u) << "not at its stop yet";
  h.Report(2, 0.08, 3);
  ASSERT_EQ(h.continues.size(), 2u);
  EXPECT_EQ(h.continues[1].trial, 2);
  EXPECT_EQ(h.continues[1].target, 3.0);
  EXPECT_FALSE(h.Signalled(2));
  h.Exit(2, RankExit::Exited(0));
  EXPECT_EQ(h.StateOf(2), TrialState::kCompleted);
}

// The promotion for the waiting trial's slot is another trial's: it stops, and that one resumes.
// And a trial told to go on that exits at its rung anyway (it does not read its control socket) is
// paused there and resumed from its checkpoint: a promotion is never lost.
TEST(StudyControllerTest, ATrialNotPromotedAtItsRungStopsAndOneThatCannotHearIsResumed) {
  const std::string asha = "pruner: {algorithm: asha, max_resource: 9, mode: promote}\n";
  for (bool hears : {false, true}) {
    SCOPED_TRACE(hears ? "promoted in place, exits anyway" : "another is promoted");
    Harness h(Spec(asha, 4, 1), 1, 4, /*continue_in_place=*/true);
    h.Start();
    const double values[] = {hears ? 0.5 : 0.1, 0.6, hears ? 0.1 : 0.5};
    for (int t = 0; t < 2; ++t) {
      h.Report(t, values[t], 1);
      h.Exit(t, RankExit::Signaled(SIGTERM));
    }
    h.Report(2, values[2], 1);
    if (!hears) {
      EXPECT_TRUE(h.Signalled(2));
      EXPECT_TRUE(h.continues.empty());
      h.Exit(2, RankExit::Signaled(SIGTERM));
      EXPECT_EQ(h.StateOf(2), TrialState::kPaused);
      EXPECT_EQ(h.launches.back().trial, 0) << "the best at rung 1 resumes";
    } else {
      ASSERT_EQ(h.continues.size(), 1u);
      h.Exit(2, RankExit::Exited(0));
      EXPECT_EQ(h.StateOf(2), TrialState::kRunning) << "paused, then resumed";
      EXPECT_EQ(h.launches.back().trial, 2);
    }
    EXPECT_TRUE(h.launches.back().resume);
    EXPECT_EQ(h.launches.size(), 4u);
  }
}

TEST(StudyControllerTest, ATrialWithoutACheckpointIsJudgedAsInStopModeInstead) {
  Harness h(Spec("pruner: {algorithm: asha, max_resource: 9, mode: promote}\n", 2, 2));
  h.Start();
  h.Report(0, 0.1, 1, /*checkpoint=*/false);
  EXPECT_FALSE(h.Signalled(0)) << "the best at its rung runs on";
  h.Report(1, 0.9, 1, /*checkpoint=*/false);
  EXPECT_TRUE(h.Signalled(1));
  h.Exit(1, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(1), TrialState::kPruned);
  EXPECT_THAT(h.said, ::testing::Contains(HasSubstr("cannot pause")));
}

TEST(StudyControllerTest, MedianPrunerStopsACurveWorseThanTheMedianOfCompletedTrials) {
  Harness h(Spec("pruner: {algorithm: median, startup_trials: 1}\n", 3, 1));
  h.Start();
  for (int e = 1; e <= 3; ++e) h.Report(0, 1.0 / e, e);
  h.Exit(0, RankExit::Exited(0));
  h.Report(1, 2.0, 1);
  EXPECT_TRUE(h.Signalled(1));
  h.Exit(1, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(1), TrialState::kPruned);
  EXPECT_THAT(h.ErrorOf(1), HasSubstr("median:"));
}

// The completed trials' first epochs forecast their ends (about half): a trial far worse after one
// epoch is stopped there, saying what it was forecast; the first trials are never judged.
TEST(StudyControllerTest, ForecastPrunerStopsATrialItsCompletedOnesSayCannotEndBest) {
  Harness h(Spec("pruner: {algorithm: forecast, max_resource: 9, startup_trials: 3}\n", 5, 1));
  h.Start();
  for (int t = 0; t < 3; ++t) {
    h.Report(t, 0.5 + 0.1 * t, 1);
    EXPECT_FALSE(h.Signalled(t)) << "fewer than startup_trials have completed";
    h.Report(t, 0.25 + 0.05 * t + 0.005 * (t % 2), 9);
    h.Exit(t, RankExit::Exited(0));
  }
  h.Report(3, 0.55, 1);
  EXPECT_FALSE(h.Signalled(3)) << "better than the completed trials' median after an epoch";
  h.Report(3, 0.3, 9);
  h.Exit(3, RankExit::Exited(0));
  h.Report(4, 2.0, 1);
  EXPECT_TRUE(h.Signalled(4));
  h.Exit(4, RankExit::Signaled(SIGTERM));
  EXPECT_EQ(h.StateOf(4), TrialState::kPruned);
  EXPECT_THAT(h.ErrorOf(4), HasSubstr("forecast: 2 at rung 1"));
}

// ---- Finalists (budget.finalists) ---------------------------------------------------------------

// The x of each launched trial, by trial number.
std::map<int, double> LaunchedX(const Harness& h) {
  std::map<int, double> x;
  for (const LaunchPlan& p : h.launches) x[p.trial] = std::get<double>(p.config.at("x"));
  return x;
}

bool JournalHas(const Harness& h, storage::JournalKind kind, int root) {
  for (const Row& row : h.rows)
    if (auto* j = std::get_if<JournalRow>(&row);
        j && j->entry.kind == kind && j->entry.trial == root)
      return true;
  return false;
}

// Runs trial by trial (max_parallel 1), 10 s each, each ending with `losses[i]` reported at
// epoch 1.
void RunOneAtATime(Harness& h, const std::vector<double>& losses) {
  for (size_t i = 0; i < losses.size(); ++i) {
    ASSERT_EQ(h.Running(), (std::set<int>{static_cast<int>(i)})) << "trial " << i;
    h.now += 10;
    h.Report(static_cast<int>(i), losses[i], 1);
    h.Exit(static_cast<int>(i), RankExit::Exited(0));
  }
}

TEST(StudyControllerTest, TheLastTrialsOfTheBudgetTrainTheBestConfigurationsAgain) {
  Harness h(Spec("", 6, 1, ", finalists: 2"));
  h.Start();
  // Four proposals (x = 0.01 .. 0.04), then trials 1 and 2's configurations again, best first.
  RunOneAtATime(h, {0.5, 0.2, 0.3, 0.4, 0.6, 0.3});
  ASSERT_TRUE(h.summary);
  const std::map<int, double> x = LaunchedX(h);
  EXPECT_EQ(
      x, (std::map<int, double>{{0, 0.01}, {1, 0.02}, {2, 0.03}, {3, 0.04}, {4, 0.02}, {5, 0.03}}));
  EXPECT_TRUE(JournalHas(h, storage::JournalKind::kFinalist, 4));
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kBegin, 4)) << "the pruner never hears of it";
  EXPECT_THAT(h.said, Contains(HasSubstr("trains trial 1's configuration again")));
  // Trial 1's configuration: 0.2 then 0.6, a mean of 0.4; trial 2's: 0.3 twice. The best is the
  // configuration with the best mean, named by its first run.
  EXPECT_EQ(h.summary->best_trial, 2);
  ASSERT_TRUE(h.summary->best_value);
  EXPECT_DOUBLE_EQ(*h.summary->best_value, 0.3);
  EXPECT_EQ(h.summary->best_runs, 2);
  EXPECT_EQ(h.summary->completed, 6);
  EXPECT_THAT(FormatSummary(*h.summary, "loss"),
              HasSubstr("(trial 2, the mean of its configuration's 2 runs)"));
}

// budget.rerun_top: from the 8th completed run, a configuration among the best 2 by its single run
// trains once more as a slot frees, before new proposals; each once; the search goes on between.
TEST(StudyControllerTest, RerunTopTrainsEachConfigurationThatRanksAgainOnceAsItRanks) {
  Harness h(Spec("", 14, 1, ", rerun_top: 2"));
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.4,  // eight proposals
                    0.6, 0.25,                               // trials 1 and 4's again
                    0.1, 0.5,                                // a new best, then it again
                    0.9, 0.9});
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(LaunchedX(h), (std::map<int, double>{{0, 0.01},
                                                 {1, 0.02},
                                                 {2, 0.03},
                                                 {3, 0.04},
                                                 {4, 0.05},
                                                 {5, 0.06},
                                                 {6, 0.07},
                                                 {7, 0.08},
                                                 {8, 0.02},
                                                 {9, 0.05},
                                                 {10, 0.09},
                                                 {11, 0.09},
                                                 {12, 0.10},
                                                 {13, 0.11}}));
  for (int rerun : {8, 9, 11}) {
    EXPECT_TRUE(JournalHas(h, storage::JournalKind::kFinalist, rerun)) << rerun;
    EXPECT_FALSE(JournalHas(h, storage::JournalKind::kBegin, rerun)) << "the pruner never hears";
  }
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 10));
  EXPECT_THAT(h.said, Contains(HasSubstr("trains trial 10's configuration again: it ranks among "
                                         "the best 2 (budget.rerun_top")));
  // The controller's best is the best single run; the study's is the model's (report's).
  EXPECT_EQ(h.summary->best_trial, 10);
  EXPECT_EQ(h.summary->best_runs, 1);
  EXPECT_TRUE(h.summary->best_by_model);
  EXPECT_THAT(FormatSummary(*h.summary, "loss"),
              HasSubstr("best single run loss = 0.1 (trial 10)\nthe study's best is a model's "
                        "pick of every run (budget.rerun_top): hyperpack best s\n"));
}

// Trainings with a fixed seed: the re-runs of trials 1 and 4 return 0.2 and 0.3 to the last
// digit, so trial 7's configuration is not re-run and the search takes the slots.
TEST(StudyControllerTest, RerunTopStopsReRunningOnceReRunsRepeatTheirFirstRuns) {
  Harness h(Spec("", 13, 1, ", rerun_top: 3"));
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.4, 0.2, 0.3, 0.9, 0.9, 0.9});
  const std::map<int, double> x = LaunchedX(h);
  EXPECT_EQ(x.at(8), 0.02) << "trial 1's configuration again";
  EXPECT_EQ(x.at(9), 0.05) << "trial 4's";
  EXPECT_EQ(x.at(10), 0.09) << "a new proposal, not trial 7's configuration";
  for (int t : {10, 11, 12}) EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, t)) << t;
  EXPECT_THAT(h.said, Contains(HasSubstr("returned trial 4's value to the last digit, as trial 8 "
                                         "did trial 1's: the trainings repeat themselves (as with "
                                         "a fixed seed), so no further configuration is re-run")));
}

// Finalists of trainings with a fixed seed: the re-runs of trials 1 and 4 return 0.2 and 0.3 to
// the last digit, so trial 0's configuration is not trained a third time; the slot goes to a new
// proposal, whose better single run is then the best.
TEST(StudyControllerTest, FinalistsEndOnceTheirReRunsRepeatTheFirstRunsAndTheSearchGoesOn) {
  Harness h(Spec("", 10, 1, ", finalists: 3"));
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.2, 0.3, 0.1});
  const std::map<int, double> x = LaunchedX(h);
  EXPECT_EQ(x.at(7), 0.02) << "trial 1's configuration, the first finalist";
  EXPECT_EQ(x.at(8), 0.05) << "trial 4's";
  EXPECT_EQ(x.at(9), 0.08) << "a new proposal, not trial 0's configuration";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 9));
  EXPECT_THAT(h.said, Contains(HasSubstr("returned trial 4's value to the last digit, as trial 7 "
                                         "did trial 1's: the trainings repeat themselves (as with "
                                         "a fixed seed), so no further finalist trains and the "
                                         "search goes on (budget.finalists)")));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.summary->best_trial, 9);
  EXPECT_EQ(h.summary->best_runs, 1);
}

// One re-run that meets its first run's value by chance, beside one that differs, ends nothing.
TEST(StudyControllerTest, RerunTopGoesOnWhereOneReRunRepeatsByChance) {
  Harness h(Spec("", 12, 1, ", rerun_top: 3"));
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.4, 0.2, 0.35, 0.9, 0.9});
  const std::map<int, double> x = LaunchedX(h);
  EXPECT_EQ(x.at(10), 0.08) << "trial 7's configuration";
  EXPECT_TRUE(JournalHas(h, storage::JournalKind::kFinalist, 10));
  EXPECT_THAT(h.said, Not(Contains(HasSubstr("to the last digit"))));
}

// With a time limit a re-run whose configuration's run would end past it is not started: at 90 s
// of 95, trial 4's configuration (a 10 s run) gives way to a new proposal.
TEST(StudyControllerTest, RerunTopStartsNoReRunThatWouldEndPastTheTimeLimit) {
  Harness h(Spec("", 14, 1, ", rerun_top: 2, time_limit: 95"));
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.4, 0.6, 0.9});
  const std::map<int, double> x = LaunchedX(h);
  EXPECT_EQ(x.at(8), 0.02) << "trial 1's configuration, at 80 s: it ends by 90";
  EXPECT_EQ(x.at(9), 0.09) << "a new proposal at 90 s";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 9));
}

TEST(StudyControllerTest, AFinalistIsNeverStoppedByThePruner) {
  // ASHA in stop mode: a trial outside the top third at epoch 1 is stopped.
  Harness h(Spec("pruner: {algorithm: asha, max_resource: 9}\n", 4, 1, ", finalists: 1"));
  h.Start();
  for (int t = 0; t < 3; ++t) {
    h.Report(t, 0.1 * (t + 1), 1);
    if (!h.Signalled(t)) h.Report(t, 0.1 * (t + 1), 9);
    h.Exit(t, h.Signalled(t) ? RankExit::Signaled(SIGTERM) : RankExit::Exited(0));
  }
  ASSERT_EQ(h.Running(), (std::set<int>{3}));
  EXPECT_EQ(LaunchedX(h).at(3), 0.01) << "trial 0's configuration, the best";
  h.Report(3, 0.99, 1);  // far worse than every rung's value
  EXPECT_FALSE(h.Signalled(3));
  h.Report(3, 0.05, 9);
  h.Exit(3, RankExit::Exited(0));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.StateOf(3), TrialState::kCompleted);
  EXPECT_EQ(h.summary->best_trial, 0);
  EXPECT_EQ(h.summary->best_runs, 2);
}

TEST(StudyControllerTest, WithATimeLimitFinalistsStartWhenWhatIsLeftIsAboutTheirLongestRun) {
  Harness h(Spec("", 100, 1, ", time_limit: 100, finalists: 1"));
  h.Start();
  // Trials of 10 s: the finalist needs 12.5 s with the margin, so it is due at 87.5.
  RunOneAtATime(h, {0.5, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8});
  EXPECT_THAT(h.wakes, Contains(87.5));
  h.At(80);
  ASSERT_EQ(h.Running(), (std::set<int>{7})) << "80 + 12.5 < 100: still proposing";
  h.At(87.5);
  h.Report(7, 0.9, 1);
  h.Exit(7, RankExit::Exited(0));
  ASSERT_EQ(h.Running(), (std::set<int>{8}));
  EXPECT_EQ(LaunchedX(h).at(8), 0.02) << "trial 1's configuration";
  h.At(97);
  h.Report(8, 0.1, 1);
  h.Exit(8, RankExit::Exited(0));
  ASSERT_TRUE(h.summary) << "no finalist is left, and nothing new starts";
  EXPECT_EQ(h.launches.size(), 9u);
  EXPECT_EQ(h.summary->best_trial, 1);
  EXPECT_DOUBLE_EQ(*h.summary->best_value, 0.15);
}

// Ends trial `t` at `at` with `loss` reported at epoch 1.
void EndAt(Harness& h, int t, double at, double loss) {
  h.At(at);
  h.Report(t, loss, 1);
  h.Exit(t, RankExit::Exited(0));
}

// The scenario of the test below, up to the third run's start (t = 78).
void RunToAThirdRun(Harness& h) {
  h.Start();
  EndAt(h, 0, 10, 0.1);
  EndAt(h, 1, 20, 0.2);
  // The two best ran 10 s and 20 s: the finalists need 25 s, due at 75.
  EXPECT_THAT(h.wakes, Contains(75.0));
  ASSERT_EQ(h.Running(), (std::set<int>{2, 3, 4}));
  h.At(75);
  EndAt(h, 2, 76, 0.9);
  EndAt(h, 3, 77, 0.8);
  ASSERT_EQ(h.Running(), (std::set<int>{4, 5, 6}));
  EXPECT_EQ(LaunchedX(h).at(5), 0.01);
  EXPECT_EQ(LaunchedX(h).at(6), 0.02);
  // Every finalist is chosen; the slot that frees at 78 would stay idle until 100: trial 0's
  // configuration (10 s) fits and runs a third time.
  EndAt(h, 4, 78, 0.7);
  ASSERT_EQ(h.Running(), (std::set<int>{5, 6, 7}));
  EXPECT_EQ(LaunchedX(h).at(7), 0.01);
  EXPECT_TRUE(JournalHas(h, storage::JournalKind::kFinalist, 7));
  EXPECT_THAT(h.said, Contains(HasSubstr("trains trial 0's configuration a third time")));
}

TEST(StudyControllerTest, SlotsIdleUntilTheTimeLimitTrainAFinalistsConfigurationAThirdTime) {
  Harness h(Spec("", 100, 3, ", time_limit: 100, finalists: 2"));
  RunToAThirdRun(h);
  // Trial 1's configuration (20 s) no longer fits at 86, and trial 0's has had its third run.
  EndAt(h, 5, 86, 0.3);
  EXPECT_EQ(h.Running(), (std::set<int>{6, 7}));
  EndAt(h, 7, 88, 0.2);
  EXPECT_EQ(h.Running(), (std::set<int>{6}));
  EndAt(h, 6, 97, 0.4);
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.launches.size(), 8u);
  EXPECT_EQ(h.summary->best_trial, 0);
  EXPECT_NEAR(*h.summary->best_value, 0.2, 1e-12) << "0.1, 0.3 and 0.2";
  EXPECT_EQ(h.summary->best_runs, 3);
}

// Two finalists with a time limit of 100: trials 0 and 1 (10 s and 20 s) are the best, and at 77
// their configurations train again as trials 5 and 6, beside trial 4.
void RunToTwoFinalists(Harness& h) {
  h.Start();
  EndAt(h, 0, 10, 0.1);
  EndAt(h, 1, 20, 0.2);
  h.At(75);
  EndAt(h, 2, 76, 0.9);
  EndAt(h, 3, 77, 0.8);
  ASSERT_EQ(h.Running(), (std::set<int>{4, 5, 6}));
}

// With a time limit, once both finalists have repeated their first runs, a slot that would have
// trained a third run goes to a new proposal.
TEST(StudyControllerTest, WithATimeLimitFinalistsThatRepeatLeaveTheThirdRunsSlotsToTheSearch) {
  Harness h(Spec("", 100, 3, ", time_limit: 100, finalists: 2"));
  RunToTwoFinalists(h);
  EndAt(h, 5, 78, 0.1);  // trial 0's configuration, its first run's value: one repeat
  ASSERT_EQ(h.Running(), (std::set<int>{4, 6, 7}));
  EXPECT_EQ(LaunchedX(h).at(7), 0.01) << "one repeat may be chance: a third run";
  EndAt(h, 6, 79, 0.2);  // trial 1's, its first run's value: two, none differing
  ASSERT_EQ(h.Running(), (std::set<int>{4, 7, 8}));
  EXPECT_EQ(LaunchedX(h).at(8), 0.06) << "a new proposal, not trial 1's configuration again";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 8));
  EXPECT_THAT(h.said, Contains(HasSubstr("so no further finalist trains and the search goes on")));
}

TEST(StudyControllerTest, AThirdRunGoesFirstToTheConfigurationWithTheBestMeanSoFar) {
  Harness h(Spec("", 100, 3, ", time_limit: 100, finalists: 2"));
  RunToTwoFinalists(h);
  // Trial 0's configuration, chosen first, draws 0.9 on its second run: its mean (0.5) is now
  // worse than trial 1's 0.2, so trial 1's configuration is the one a third draw may overturn.
  EndAt(h, 5, 77.5, 0.9);
  ASSERT_EQ(h.Running(), (std::set<int>{4, 6, 7}));
  EXPECT_EQ(LaunchedX(h).at(7), 0.02) << "trial 1's configuration, the best mean";
  EXPECT_THAT(h.said, Contains(HasSubstr("trains trial 1's configuration a third time")));
  EndAt(h, 4, 78, 0.7);
  ASSERT_EQ(h.Running(), (std::set<int>{6, 7, 8}));
  EXPECT_EQ(LaunchedX(h).at(8), 0.01) << "then trial 0's, which still fits";
}

TEST(StudyControllerTest, WithACoreHourBudgetFinalistsStartWhenRunningTrialsLeaveAboutTheirCost) {
  // 81 core-seconds; two trials at a time on a CPU slot each.
  Harness h(Spec("resources: {cpus: 1}\n", 100, 2, ", core_hours: 0.0225, finalists: 1"));
  h.Start();
  ASSERT_EQ(h.Running(), (std::set<int>{0, 1}));
  h.At(10);
  h.Report(0, 0.1, 1);  // the best, 10 s: the finalist will need 12.5 core-seconds
  h.Exit(0, RankExit::Exited(0));
  ASSERT_EQ(h.Running(), (std::set<int>{1, 2})) << "61 left once trial 1 has run its 10 s";
  h.At(20);
  h.Report(1, 0.5, 1);
  h.Exit(1, RankExit::Exited(0));
  ASSERT_EQ(h.Running(), (std::set<int>{2, 3})) << "spent 40, and trial 2's 10 more: 31 left";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 3));
  h.At(30);
  h.Report(2, 0.6, 1);
  h.Exit(2, RankExit::Exited(0));
  // Spent 60 (10 + 20 + 20, and trial 3's 10 so far); the median run is 20 s, so trial 3 is
  // expected to spend 10 more: 11 left, less than the finalist's 12.5. Without that expectation
  // 21 would be left and a new trial proposed.
  ASSERT_EQ(h.Running(), (std::set<int>{3, 4}));
  EXPECT_EQ(LaunchedX(h).at(4), 0.01) << "trial 0's configuration";
  EXPECT_TRUE(JournalHas(h, storage::JournalKind::kFinalist, 4));
  h.At(40);
  h.Report(3, 0.7, 1);
  h.Exit(3, RankExit::Exited(0));
  EXPECT_EQ(h.Running(), (std::set<int>{4})) << "the finalist is chosen: nothing new starts";
  h.At(42);
  h.Report(4, 0.3, 1);
  h.Exit(4, RankExit::Exited(0));
  ASSERT_TRUE(h.summary);
  EXPECT_EQ(h.launches.size(), 5u);
  EXPECT_EQ(h.summary->best_trial, 0);
  EXPECT_DOUBLE_EQ(*h.summary->best_value, 0.2);
  EXPECT_EQ(h.summary->best_runs, 2);
}

TEST(StudyControllerTest, FinalistsThatWouldHoldMoreThanAThirdOfTheTimeLimitLeaveItToTheSearch) {
  Harness h(Spec("", 100, 1, ", time_limit: 60, finalists: 1"));
  h.Start();
  EndAt(h, 0, 20, 0.2);
  // The finalist would need 25 s of the 60: due at 35, and it would fit, but it would hold more
  // than a third of the time limit. The search goes on, and the log says why once it is due.
  ASSERT_EQ(h.Running(), (std::set<int>{1}));
  EXPECT_THAT(h.said, Not(Contains(HasSubstr("no finalists")))) << "not due before 35";
  EndAt(h, 1, 40, 0.3);
  ASSERT_EQ(h.Running(), (std::set<int>{2}));
  EXPECT_EQ(LaunchedX(h).at(2), 0.03) << "a new proposal, not trial 0's configuration again";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 2));
  EXPECT_EQ(std::count_if(h.said.begin(), h.said.end(),
                          [](const std::string& s) {
                            return s.find(
                                       "no finalists: their runs (25 s with a margin) "
                                       "would hold more than a third of time_limit") !=
                                   std::string::npos;
                          }),
            1)
      << "said once";
}

TEST(StudyControllerTest, FinalistsThatWouldHoldMoreThanAThirdOfACostBudgetAreNotStarted) {
  // 81 core-seconds; two trials at a time on a CPU slot each, 30 s each.
  Harness h(Spec("resources: {cpus: 1}\n", 100, 2, ", core_hours: 0.0225, finalists: 1"));
  h.Start();
  ASSERT_EQ(h.Running(), (std::set<int>{0, 1}));
  // Spent 60 of 81: the finalist (37.5 core-seconds with the margin) is due, but it would hold
  // more than 27, a third of the budget.
  EndAt(h, 0, 30, 0.1);
  ASSERT_EQ(h.Running(), (std::set<int>{1, 2}));
  EXPECT_EQ(LaunchedX(h).at(2), 0.03) << "a new proposal, not trial 0's configuration again";
  EXPECT_FALSE(JournalHas(h, storage::JournalKind::kFinalist, 2));
  EXPECT_THAT(h.said, Contains(HasSubstr("would hold more than a third of core_hours")));
}

TEST(StudyControllerTest, FinalistsNeedACompletedTrialAndEndTheRunWithoutOne) {
  Harness h(Spec("", 3, 1, ", finalists: 1"));
  h.Start();
  h.Exit(0, RankExit::Exited(1), "boom\n");
  h.Exit(1, RankExit::Exited(1), "boom\n");
  ASSERT_TRUE(h.summary) << "two failed and the last slot is a finalist's: nothing to re-run";
  EXPECT_EQ(h.launches.size(), 2u);
  EXPECT_EQ(h.summary->exit_code, 1);
}

// ---- Resume is replay -------------------------------------------------------------------------

// What storage holds after the rows a controller wrote: applied to a real SQLite file and read
// back as a new run would (unfinished trials interrupted). Trials whose root is in `no_checkpoint`
// left nothing in their checkpoint folder.
StoredStudy StoreAndReadBack(const std::vector<Row>& rows, const std::string& path,
                             const std::set<int>& no_checkpoint) {
  auto db = storage::Storage::Open(path).value();
  storage::StudyRecord study;
  study.name = "s";
  study.direction = Direction::kMinimize;
  study.metric = "loss";
  int64_t id = db->CreateStudy(study).value().id;
  EXPECT_TRUE(ApplyRows(*db, id, rows).ok());
  EXPECT_TRUE(db->InterruptUnfinished(id, 0, "the runner stopped").ok());
  StoredStudy stored;
  stored.resumed = true;
  stored.trials = db->ListTrials(id).value();
  stored.journal = db->ListJournal(id).value();
  stored.next_number = db->NextTrialNumber(id).value();
  for (const TrialRecord& t : stored.trials)
    if (!no_checkpoint.count(t.number)) stored.checkpoints.insert(t.number);
  return stored;
}

// The tuner's outcomes in a comparable form, in any order.
std::multiset<std::string> Outcomes(const std::vector<tuner::TrialOutcome>& v) {
  std::multiset<std::string> out;
  for (const auto& o : v)
    out.insert(StrCat(static_cast<int>(o.kind), " ", o.value ? FormatDouble(*o.value) : "-", " @",
                      o.resource, " ", ConfigToJson(o.config, nullptr)));
  return out;
}

// The live controller's state against a fresh one that replays what it stored.
void ExpectReplayMatches(Harness& live, const study::StudySpec& spec, const std::string& path,
                         const std::set<int>& no_checkpoint = {}) {
  StoredStudy stored = StoreAndReadBack(live.rows, path, no_checkpoint);
  Harness replayed(spec, 2, 2);
  Result<std::vector<Command>> restored = replayed.controller().Restore(stored);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  std::vector<tuner::TrialOutcome> taught;
  for (const Command& c : *restored)
    if (auto* o = std::get_if<ObserveCmd>(&c)) taught.push_back(o->outcome);
  ControllerState a = live.controller().State(), b = replayed.controller().State();
  EXPECT_EQ(a.roots, b.roots) << "reports, resources and pruner decisions per trial";
  EXPECT_EQ(a.finished, b.finished);
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.pruned, b.pruned);
  EXPECT_EQ(a.failed, b.failed);
  EXPECT_EQ(a.infeasible, b.infeasible);
  EXPECT_EQ(a.best_trial, b.best_trial);
  // A trial told to pause that had not yet ended is paused after the replay when its checkpoint
  // is there (and goes back to the queue if it was promoted meanwhile); every other paused trial
  // is paused in both, at the same rung.
  std::map<int, double> expect_paused = a.paused;
  for (int n : a.pausing) {
    const ControllerState::Root& root = a.roots.at(live.RootOf(n));
    if (!no_checkpoint.count(live.RootOf(n)) && !root.promoted) expect_paused[n] = root.resource;
  }
  EXPECT_EQ(expect_paused, b.paused);
  EXPECT_EQ(Outcomes(live.observed), Outcomes(taught)) << "what the tuner learnt";
}

class StudyControllerReplayTest : public ::testing::Test {
 protected:
  std::string Db(const std::string& name) { return (dir_.path() / name).string(); }
  hyperpack::testing::TempDir dir_;
};

// A NaN report counts as a report (count-based resources) both live and replayed; its point is
// not stored as a metric, which a replay from metrics used to miss.
TEST_F(StudyControllerReplayTest, ANaNReportCountsTheSameLiveAndReplayed) {
  study::StudySpec spec = Spec("pruner: {algorithm: asha, max_resource: 9}\n", 3, 3);
  Harness h(spec);
  h.Start();
  h.Report(0, kNaN, std::nullopt);  // no epoch: the resource is the count of reports
  h.Report(0, 0.5, std::nullopt);
  h.Report(1, 0.4, std::nullopt);
  h.Report(1, 0.3, std::nullopt);
  h.Report(0, 0.2, std::nullopt);  // its third report: rung 3 after two
  ASSERT_EQ(h.controller().State().roots.at(0).reports, 3);
  ExpectReplayMatches(h, spec, Db("nan.db"));
}

// A resumed study's tuner relearns each trial with what it cost, as it learnt it live: the cost
// model (and the queue's predictions) do not start from nothing after a restart.
TEST_F(StudyControllerReplayTest, AResumedStudyTeachesTheTunerWhatEachTrialCost) {
  study::StudySpec spec = Spec("resources: {cpus: 2}\n", 2, 1);
  Harness h(spec);
  h.Start();
  h.At(10);
  h.Report(0, 0.5, 2);
  h.At(12);
  h.Exit(0, RankExit::Exited(0));
  ASSERT_EQ(h.observed.size(), 1u);
  ASSERT_TRUE(h.observed[0].cost.has_value());
  StoredStudy stored = StoreAndReadBack(h.rows, Db("cost.db"), {});
  Harness replayed(spec, 2, 2);
  Result<std::vector<Command>> restored = replayed.controller().Restore(stored);
  ASSERT_TRUE(restored.ok()) << restored.status().message();
  std::vector<tuner::TrialOutcome> taught;
  for (const Command& c : *restored)
    if (auto* o = std::get_if<ObserveCmd>(&c)) taught.push_back(o->outcome);
  ASSERT_EQ(taught.size(), 1u);
  ASSERT_TRUE(taught[0].cost.has_value()) << "the stored run's time x its slots, per epoch";
  EXPECT_NEAR(*taught[0].cost, *h.observed[0].cost, 1e-6);
}

// A resumed study knows which finalists' configurations had their third run: the replay of the
// journal's finalist entries tells a first re-run from a third.
TEST_F(StudyControllerReplayTest, AResumedStudyKnowsWhichConfigurationsRanAThirdTime) {
  study::StudySpec spec = Spec("", 100, 3, ", time_limit: 100, finalists: 2");
  Harness h(spec);
  RunToAThirdRun(h);
  EndAt(h, 5, 86, 0.3);
  ExpectReplayMatches(h, spec, Db("third.db"));
  // Resumed, trials 6 and 7 (interrupted) run again, and the slot left takes the one finalist's
  // configuration that has not had its third run: trial 1's, not trial 0's once more.
  Harness resumed(spec, 2, 2);
  resumed.Start(StoreAndReadBack(h.rows, Db("third2.db"), {}));
  std::vector<double> xs;
  for (const LaunchPlan& p : resumed.launches) xs.push_back(std::get<double>(p.config.at("x")));
  std::sort(xs.begin(), xs.end());
  EXPECT_EQ(xs, (std::vector<double>{0.01, 0.02, 0.02}));
}

// A resumed rerun_top study whose re-runs had repeated their first runs re-runs nothing more, and
// does not say so again: the run that stored them said it.
TEST_F(StudyControllerReplayTest, AResumedStudyWhoseReRunsRepeatedSaysSoOnceAndReRunsNothing) {
  study::StudySpec spec = Spec("", 13, 1, ", rerun_top: 3");
  Harness h(spec);
  h.Start();
  RunOneAtATime(h, {0.5, 0.2, 0.6, 0.7, 0.3, 0.8, 0.9, 0.4, 0.2, 0.3});
  ASSERT_THAT(h.said, Contains(HasSubstr("to the last digit")));
  Harness resumed(spec);
  resumed.Start(StoreAndReadBack(h.rows, Db("repeat.db"), {}));
  ASSERT_EQ(resumed.Running(), (std::set<int>{11})) << "trial 10, interrupted, runs again";
  resumed.Report(11, 0.9, 1);
  resumed.Exit(11, RankExit::Exited(0));
  ASSERT_EQ(resumed.Running(), (std::set<int>{12}));
  EXPECT_FALSE(JournalHas(resumed, storage::JournalKind::kFinalist, 12))
      << "a new proposal, not trial 7's configuration again";
  EXPECT_THAT(resumed.said, Not(Contains(HasSubstr("to the last digit"))));
}

// A budget in GPU-hours charges a share of a GPU its part of the GPU (by fraction or by memory),
// live and after a restart: four quarter-GPU trials for 10 s are 10 GPU-seconds, not 40.
TEST_F(StudyControllerReplayTest, AShareOfAGpuIsChargedItsPartOfTheGpuAgainstGpuHours) {
  for (const char* resources : {"resources: {gpus: 0.25}\n", "resources: {gpu_memory: 4GiB}\n"}) {
    SCOPED_TRACE(resources);
    // 0.01 GPU-hours = 36 GPU-seconds; one GPU of 16 GiB.
    study::StudySpec spec = Spec(resources, 50, 4, ", gpu_hours: 0.01");
    const std::vector<Node> gpu = {{"g", 1, 8, 16384}};
    Harness h(spec, gpu);
    h.Start();
    ASSERT_EQ(h.Running(), (std::set<int>{0, 1, 2, 3})) << "four shares on the one GPU";
    h.At(10);
    h.Report(0, 0.5, std::nullopt);
    h.Exit(0, RankExit::Exited(0));
    EXPECT_NEAR(h.budget_spent.back(), 10.0 / 36, 1e-9) << "4 x 10 s x a quarter";
    h.At(20);
    for (int t : {1, 2, 3, 4}) {
      h.Report(t, 0.4, std::nullopt);
      h.Exit(t, RankExit::Exited(0));
    }
    // Trials 1-3 ran 20 s, trial 4 10 s: 10 + 3 x 10 x 0.25 + 10 x 0.25 more = 20 GPU-seconds.
    EXPECT_NEAR(h.budget_spent.back(), 20.0 / 36, 1e-9);
    // Storage keeps each share's part of its GPU, and a restarted run charges what it kept.
    StoredStudy stored =
        StoreAndReadBack(h.rows, Db(StrCat("share", std::strlen(resources), ".db")), {});
    StoredStudy ended;
    for (TrialRecord t : stored.trials) {
      ASSERT_EQ(t.placement.size(), 1u);
      EXPECT_DOUBLE_EQ(t.placement[0].gpu_share, 0.25) << t.number;
      if (t.state == TrialState::kCompleted) ended.trials.push_back(t);
    }
    ASSERT_EQ(ended.trials.size(), 5u);
    ended.resumed = true;
    ended.next_number = 5;
    Harness replayed(spec, gpu);
    replayed.Start(ended);
    ASSERT_FALSE(replayed.budget_spent.empty());
    EXPECT_NEAR(replayed.budget_spent.front(), 20.0 / 36, 1e-6);
  }
}

// Lines printed after a stop decision are stored as metrics but were never the pruner's: the
// replay does not feed them to it.
TEST_F(StudyControllerReplayTest, LinesAfterAStopDecisionAreNotReplayedToThePruner) {
  study::StudySpec spec = Spec("pruner: {algorithm: asha, max_resource: 9}\n", 3, 3);
  Harness h(spec);
  h.Start();
  h.Report(0, 0.1, 1);
  h.Report(1, 0.2, 1);
  h.Report(2, 0.9, 1);
  ASSERT_TRUE(h.Signalled(2));
  h.Report(2, 0.01, 2);  // printed before the SIGTERM landed
  h.Report(2, 0.01, 3);
  h.Exit(2, RankExit::Signaled(SIGTERM));
  ASSERT_EQ(h.controller().State().roots.at(2).reports, 1);
  ExpectReplayMatches(h, spec, Db("stop.db"));
}

// A paused trial that printed one more line before its SIGTERM is replayed as paused, not as
// promoted (a replay that inferred promotions from reports past the rung got this wrong).
TEST_F(StudyControllerReplayTest, APausedTrialsLastLineDoesNotMakeItPromotedOnReplay) {
  study::StudySpec spec = Spec("pruner: {algorithm: asha, max_resource: 9, mode: promote}\n", 4, 1);
  Harness h(spec);
  h.Start();
  h.Report(0, 0.5, 1);
  ASSERT_TRUE(h.Signalled(0));
  h.Report(0, 0.4, 2);  // one more epoch before the signal landed
  h.Exit(0, RankExit::Signaled(SIGTERM));
  ASSERT_EQ(h.StateOf(0), TrialState::kPaused);
  ASSERT_EQ(h.controller().State().paused.count(0), 1u);
  ExpectReplayMatches(h, spec, Db("paused.db"));
}

// Seeded random event streams (pruners and modes, promotions in place or not, NaNs, lines after
// decisions, failures, lost nodes, time passing) run live; at a random moment the run "crashes" and
// a fresh controller replays what was stored.
TEST_F(StudyControllerReplayTest, RandomEventStreamsReplayToTheSameState) {
  const std::vector<std::string> pruners = {
      "",
      "pruner: {algorithm: median, startup_trials: 2}\n",
      "pruner: {algorithm: asha, max_resource: 9}\n",
      "pruner: {algorithm: asha, max_resource: 9, mode: promote}\n",
      "pruner: {algorithm: hyperband, max_resource: 9, mode: promote}\n",
      "pruner: {algorithm: asha, max_resource: 9, resource: step, mode: promote}\n",
  };
  int checked = 0, with_finalists = 0;
  for (int seed = 0; seed < 240; ++seed) {
    SCOPED_TRACE(StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };
    // Every third seed, the last three trials are finalists.
    study::StudySpec spec = Spec(pruners[seed % pruners.size()] + "resources: {cpus: 1}\n", 12, 3,
                                 seed % 3 == 2 ? ", finalists: 3" : "");
    // Every other round of the pruners, promotions at a trial's rung go on in place.
    Harness h(spec, 2, 2, /*continue_in_place=*/(seed / pruners.size()) % 2 == 1);
    h.Start();
    std::map<int, int> epoch;
    std::set<int> no_checkpoint;
    const int steps = std::uniform_int_distribution<>(5, 120)(rng);
    for (int step = 0; step < steps && !h.summary; ++step) {
      std::set<int> running = h.Running();
      if (running.empty()) break;
      auto it = running.begin();
      std::advance(it, std::uniform_int_distribution<size_t>(0, running.size() - 1)(rng));
      int t = *it;
      h.now += chance(0.3) ? 1.0 : 0.0;
      const int root = h.RootOf(t);
      if (!epoch.count(root) && chance(0.1)) no_checkpoint.insert(root);
      if (h.Signalled(t) && chance(0.6)) {
        h.Exit(t, RankExit::Signaled(SIGTERM));
      } else if (chance(0.75)) {
        double v = chance(0.08) ? kNaN : std::uniform_real_distribution<>(0, 1)(rng);
        std::optional<int64_t> e = ++epoch[root];
        if (chance(0.15)) e.reset();  // a line without an epoch
        h.Report(t, v, e, !no_checkpoint.count(root));
      } else if (chance(0.5)) {
        h.Exit(t, RankExit::Exited(chance(0.7) ? 0 : chance(0.5) ? 1 : 3));
      } else if (chance(0.3)) {
        h.Exit(t, RankExit::Lost());
      } else {
        h.Feed(Tick{});
      }
    }
    ExpectReplayMatches(h, spec, Db(StrCat("r", seed, ".db")), no_checkpoint);
    ++checked;
    for (const Row& row : h.rows)
      if (auto* j = std::get_if<JournalRow>(&row);
          j && j->entry.kind == storage::JournalKind::kFinalist) {
        ++with_finalists;
        break;
      }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_EQ(checked, 240);
  EXPECT_GE(with_finalists, 10) << "streams that reached their finalists";
}

}  // namespace
}  // namespace hyperpack::scheduler

namespace hyperpack::scheduler {
namespace {

// The run's lifecycle against the diagram in run_phase.h: from every phase, every transition
// either moves to the phase drawn there or changes nothing.
TEST(RunLifecycleTest, EachTransitionMovesOnlyWhereTheDiagramSays) {
  using P = RunPhase;
  using storage::StopReason;
  struct Transition {
    const char* name;
    std::function<bool(RunLifecycle&)> apply;
    std::map<P, P> moves;  // from -> to; from any other phase it does not apply
  };
  const std::vector<Transition> transitions = {
      {"Start", [](RunLifecycle& r) { return r.Start(); }, {{P::kRestoring, P::kLaunching}}},
      {"NoNodes",
       [](RunLifecycle& r) { return r.NoNodes(); },
       {{P::kLaunching, P::kWaitingForNodes}}},
      {"NodesBack",
       [](RunLifecycle& r) { return r.NodesBack(); },
       {{P::kWaitingForNodes, P::kLaunching}}},
      {"Hold",
       [](RunLifecycle& r) { return r.Hold(); },
       {{P::kLaunching, P::kHeld}, {P::kWaitingForNodes, P::kHeld}}},
      {"Release", [](RunLifecycle& r) { return r.Release(); }, {{P::kHeld, P::kLaunching}}},
      {"Stop",
       [](RunLifecycle& r) { return r.Stop(StopReason::kStopped); },
       {{P::kRestoring, P::kStopping},
        {P::kLaunching, P::kStopping},
        {P::kWaitingForNodes, P::kStopping},
        {P::kHeld, P::kStopping}}},
      {"Cancel",
       [](RunLifecycle& r) { return r.Cancel(); },
       {{P::kRestoring, P::kStopping},
        {P::kLaunching, P::kStopping},
        {P::kWaitingForNodes, P::kStopping},
        {P::kHeld, P::kStopping},
        {P::kStopping, P::kStopping}}},
      {"Finish", [](RunLifecycle& r) { return r.Finish(); }, {{P::kStopping, P::kDone}}},
  };
  // A lifecycle in each phase, reached by transitions alone (kStopping: stopped by request).
  auto in = [](P phase) {
    RunLifecycle r;
    if (phase == P::kRestoring) return r;
    if (phase == P::kStopping || phase == P::kDone) {
      r.Stop(StopReason::kStopped);
      if (phase == P::kDone) r.Finish();
      return r;
    }
    r.Start();
    if (phase == P::kWaitingForNodes) r.NoNodes();
    if (phase == P::kHeld) r.Hold();
    return r;
  };
  const std::vector<P> phases = {P::kRestoring, P::kLaunching, P::kWaitingForNodes,
                                 P::kHeld,      P::kStopping,  P::kDone};
  for (P from : phases) {
    ASSERT_EQ(in(from).phase(), from) << RunPhaseName(from);
    for (const Transition& t : transitions) {
      RunLifecycle r = in(from);
      auto it = t.moves.find(from);
      const bool applies = it != t.moves.end();
      EXPECT_EQ(t.apply(r), applies) << t.name << " from " << RunPhaseName(from);
      EXPECT_EQ(r.phase(), applies ? it->second : from) << t.name << " from " << RunPhaseName(from);
    }
  }
}

TEST(RunLifecycleTest, TheStopReasonIsTheFirstOnesUnlessACancelFollows) {
  RunLifecycle r;
  EXPECT_EQ(r.stop_reason(), storage::StopReason::kNone);
  EXPECT_FALSE(r.Stop(storage::StopReason::kNone));  // a stop names why
  r.Start();
  EXPECT_TRUE(r.Stop(storage::StopReason::kTimeLimit));
  EXPECT_FALSE(r.Stop(storage::StopReason::kBudgetReached));
  EXPECT_EQ(r.stop_reason(), storage::StopReason::kTimeLimit);
  EXPECT_TRUE(r.stopped());
  EXPECT_FALSE(r.placing());
  EXPECT_TRUE(r.Cancel());
  EXPECT_EQ(r.stop_reason(), storage::StopReason::kCancelled);
  EXPECT_FALSE(r.Cancel());  // cancelled once
  EXPECT_TRUE(r.Finish());
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.Cancel());  // nothing changes once done
  EXPECT_EQ(r.stop_reason(), storage::StopReason::kCancelled);
}

}  // namespace
}  // namespace hyperpack::scheduler
