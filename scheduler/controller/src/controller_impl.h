// The study controller's state and steps, shared by its source files:
//   study_controller.cc  events in, scheduling (budget, proposals, placement), how a run ends;
//   controller_trials.cc a trial's life: its launch plan, its ranks' exits, how it ended;
//   controller_pruning.cc reports, the pruner, pauses and promotions, and the replay on resume;
//   controller_controls.cc what people ask of a live run (stop, cancel, pause, resume, update,
//                         enqueue, add results).
//   controller_share.cc   a server's fair share: the grant, preemption, the claim.
// Thread-safety: as StudyController (one owner, one thread).
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "hyperpack/scheduler/run_phase.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/study/finalists.h"

namespace hyperpack::scheduler {

// The median of `v` (not empty): the upper one of an even count.
inline double MedianOf(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// What a budget in GPU- or core-hours charges a trial per second: what it holds (`held`), or for a
// share of a GPU its part of that GPU (RankRecord::gpu_share). The tuner's cost and a server's
// fair share count a share as its whole GPU (HeldOf).
double BudgetUnits(const std::vector<storage::RankRecord>& ranks, const Held& held);

class StudyController::Impl {
 public:
  Impl(const study::StudySpec& spec, ControllerOptions options,
       std::unique_ptr<tuner::Pruner> pruner);

  Result<std::vector<Command>> Restore(const StoredStudy& stored);
  std::vector<Command> Start(double now);
  std::vector<Command> Handle(const Event& event);
  std::string StatusLine() const;
  bool pauses() const { return pruner_->pauses(); }
  bool done() const { return run_.done(); }
  ControllerState State() const;
  Occupancy occupancy() const;
  ShareClaim Claim() const;
  double priority() const { return spec_.priority; }

  // Event handlers (std::visit calls them by payload type).
  void On(const ProposalsReady& e);
  void On(const TrialPersisted& e);
  void On(const MetricReport& e);
  void On(const RankExited& e);
  void On(const TrialRunning& e);
  void On(const NodeJoined& e);
  void On(const NodeLost& e);
  // A time limit's finalists may have fallen due.
  void On(const Tick&) {
    if (FinalistsLeft() > 0 && spec_.budget.time_limit_s) ++refills_;
  }
  void On(const Interrupt& e);
  void On(const StorageFailed& e);
  void On(const ShareChanged& e);
  void On(const ControlArrived& e);

 private:
  // The reports a `last-N-avg` objective's value is the mean of: its last N finite ones, oldest
  // first; the first objective's (Trial::objective), and each of a study's that keeps values.
  // Carried through a pause in memory; a trial paused when the runner stopped starts its mean
  // again from the reports after its promotion.
  struct Recent {
    std::vector<double> objective;
    std::map<std::string, std::vector<double>> values;
  };
  // A trial paused at its rung (promote mode), waiting to be promoted.
  struct Paused {
    int number = 0;
    Config config;
    int attempt = 1;
    std::optional<int> retry_of;
    int root = 0;
    double rung = 0;  // the resource it reached
    std::optional<double> value;
    // A study that keeps values: what the trial reported, as Trial::values (not hyperpack's cost,
    // measured again when the trial ends).
    std::map<std::string, double> values;
    Recent recent;
  };
  // A trial waiting to start: a new proposal, a re-run, or a promoted paused trial (which runs
  // again under its own number; if it never starts it is paused again, as it was).
  struct Queued {
    Config config;
    int attempt = 1;
    std::optional<int> retry_of;
    std::optional<int> root;
    std::optional<Paused> promoted;
    bool alone = false;  // a share that ran out of GPU memory: it runs again on a GPU of its own
    // budget.finalists: the trial whose configuration this one trains again.
    std::optional<int> finalist_of = std::nullopt;
    bool extra_draw = false;  // a finalist's configuration trained a third time (QueueExtraDraws)
  };
  struct Rank {
    bool launched = false;
    bool exited = false;
    RankExit exit;
    std::string err_tail;
  };
  // A trial from its placement until its ranks have all exited.
  struct Trial {
    int number = 0;
    Config config;
    int attempt = 1;
    std::optional<int> retry_of;
    int root = 0;
    uint64_t job = 0;  // the scheduler's job; 0: never placed
    LaunchPlan plan;   // carried out once its row is stored
    double started = 0;
    std::vector<Rank> ranks;
    std::optional<double> deadline;  // trial.timeout
    std::optional<double> kill_at;   // SIGKILL what is left after SIGTERM
    bool timed_out = false, interrupted = false;
    bool yielded = false;    // stopped to give another study its share (ShareChanged)
    bool held = false;       // stopped by `hyperpack pause`: it runs again on resume
    bool cancelled = false;  // stopped by `hyperpack cancel`
    int failed_rank = -1;    // the first rank that failed; the gang was stopped then
    std::optional<double> objective;
    // A study that keeps values (several objectives, constraints): each objective's and
    // constraint's metric as reported so far, combined by its objective's strategy (a
    // constraint's: the last report).
    std::map<std::string, double> values;
    Recent recent;
    int64_t metric_lines = 0;
    double resource = 0;  // of the latest objective report
    bool rung_observed = false;
    bool pruned = false, pausing = false;
    bool control = false;                // it has a control socket (LaunchPlan::control)
    bool awaiting = false;               // pausing, and waiting at its rung for ResolveAwaiting
    std::optional<double> continued_to;  // promoted in place to this rung; no report since
    std::optional<double> waits_at;      // control: the epoch at which it waits for a word
    std::optional<double> resumed_to;
    std::string prune_reason;
    double decided = 0;
    // What it holds, for its cost: its GPUs, or where it holds none its CPU slots (at least 1).
    int units = 1;
    bool on_gpus = false;
    // What a budget in GPU- or core-hours charges per second: units, or a share's part of its GPU.
    double budget_units = 1;

    bool AllExited() const;
    // Already on its way out: what it holds counts as given back to a share.
    bool Stopping() const {
      return yielded || held || cancelled || interrupted || pausing || pruned || timed_out ||
             failed_rank >= 0;
    }
    const Rank& Deciding() const { return ranks[failed_rank >= 0 ? failed_rank : 0]; }
  };
  // How a trial ended, as stored and told.
  struct Ending {
    storage::TrialRecord record;
    std::string how;
    std::string stopped_after;
    bool alone = false;  // it ran out of memory on a shared GPU: it runs again on one of its own
  };
  // Per root (every attempt of a trial is one to the pruner).
  struct RootState {
    int64_t reports = 0;
    size_t ladder_next = 0;
    bool rung_observed = false;  // the tuner learnt the latest report as a rung's value
    ControllerState::Root seen;
    tuner::PrunerDecision::Kind last = tuner::PrunerDecision::Kind::kContinue;
    double spent = 0;  // GPU- or CPU-slot-seconds of its runs that ended
    // On resume: what it cost per unit of resource, as the tuner learnt it live. Unknown for a
    // promoted trial, whose stored run spans its pauses.
    std::optional<double> stored_cost;
    std::optional<tuner::CostPrediction> predicted;  // when it was proposed, per unit
  };

  // ---- study_controller.cc ----
  int Busy() const;
  int Free() const;
  void Settle();
  void Fill();
  void PromoteWhatThePrunerAllows();
  // The pruner's promotion p, of a trial paused (queued now) or still stopping (queued once it
  // has stopped).
  void ApplyPromotion(const tuner::Pruner::Promotion& p);
  // Trials waiting at their rung: promoted at once, they go on in place; else they stop.
  void ResolveAwaiting();
  // Promote mode by epochs, short of the full resource: the trial is told to stop at `target`.
  bool StopsAt(double target) const {
    return pruner_->pauses() && spec_.pruner.resource == study::PrunerResource::kEpoch &&
           target < spec_.pruner.max_resource;
  }
  // `cost`: a new proposal's predicted cost per unit of resource; `segment`: a promotion's
  // resource to train (target - rung).
  void Enqueue(Queued q, std::optional<tuner::CostPrediction> cost = std::nullopt,
               double segment = 0);
  // The run time the queue orders `q` by: its predicted cost per unit x the resource it will
  // train, over what it holds; {median, one sd above}. nullopt where not predicted.
  std::optional<std::pair<double, double>> PredictedSeconds(const Queued& q,
                                                            const tuner::CostPrediction& cost,
                                                            const Demand& demand,
                                                            double segment) const;
  Result<Demand> DemandFor(const Config& config) const;
  // A trial's peak GPU memory (peak_gpu_mb) beside what its share states: the packer learns.
  void LearnGpuMemory(const Trial& t, double peak_mb);
  // The waiting trials' shares sized again, after the packer learnt.
  void ResizeWaitingShares();
  double EstimateSeconds() const;
  // The cost budget: GPU- (or CPU-slot-) seconds spent, running trials until now included; the
  // share of the whole budget spent, for the tuner; whether a cost budget is used up.
  double SpentNow(bool gpus) const;
  double BudgetSpent() const;
  bool CostBudgetSpent() const;
  // What `t`'s root has cost so far per unit of resource (the tuner's TrialOutcome::cost).
  double CostPerUnit(const Trial& t) const;
  void Dispatch();
  int LiveNodes() const;
  std::string WaitingForCapacity() const;
  // Stops launching for `reason`; false where the run had stopped already (for another).
  bool StopLaunching(StopReason reason);
  // What stopping launching does: the summary says why, and what waits for room is dropped.
  void StoppedLaunching();
  void MaybeFinish();
  bool ForcePromotionAtTheEnd();
  void Finish();
  void CheckDeadlines();
  void Say(const std::string& text) { out_.push_back(SayCmd{text}); }
  void Write(Row row) { pending_rows_.push_back(std::move(row)); }
  void FlushRows(std::optional<int> ack = std::nullopt);
  void Observe(tuner::TrialOutcome o) { out_.push_back(ObserveCmd{std::move(o)}); }
  void Wake(double at) { out_.push_back(WakeCmd{at}); }
  void Log(std::optional<int> trial, storage::EventKind kind, const std::string& text);
  void Tell(int trial, const std::string& text) { Say(StrCatTrial(trial, text)); }
  static std::string StrCatTrial(int trial, const std::string& text);
  double Wall() const { return options_.wall_start + now_; }

  // ---- controller_trials.cc ----
  void Launch(Queued q, uint64_t job, Placement placement);
  LaunchPlan PlanLaunch(const Trial& t, double target, bool resume) const;
  storage::TrialRecord RecordOf(const Trial& t, std::vector<storage::RankRecord> where) const;
  RankPlan PlanRank(const Trial& t, const LaunchPlan& p, int r,
                    const std::vector<std::pair<std::string, std::string>>& common) const;
  std::vector<std::pair<std::string, std::string>> TrialEnv(const Trial& t, const LaunchPlan& p,
                                                            double target, bool resume) const;
  void NeverRuns(Queued q, const std::string& why);
  void NeverRan(Trial& t, const std::string& why);
  void Terminate(Trial& t);
  void KillAll();
  void Complete(int number);
  Ending Classify(const Trial& t) const;
  // Whether a trial that held a share of a GPU ended out of its memory (exit 3 or a failure that
  // says "out of memory"): its neighbours may be why, so it runs again alone.
  bool RanOutSharing(const Trial& t, int code, const std::string& tail) const;
  void RunsAgainAlone(const Trial& t, Ending* e) const;
  // A trial whose node was lost or that was preempted: requeued while it has attempts left.
  void Requeued(const Trial& t, RankExit::Kind kind, Ending* e) const;
  int DescribeExit(const Trial& t, Ending* e) const;
  void Account(const Trial& t, const Ending& e, double elapsed);
  std::string LearnFinished(const Trial& t, const Ending& e);
  std::string TrialDir(int number) const;
  // Where `placement`'s ranks run, as TrialRecord::placement.
  std::vector<storage::RankRecord> Ranks(const Placement& placement) const;

  // ---- controller_finalists.cc ----
  // budget.finalists not chosen yet.
  int FinalistsLeft() const {
    return std::max(0, spec_.budget.finalists - static_cast<int>(finalist_configs_.size()));
  }
  bool IsFinalist(int root) const { return finalist_roots_.count(root) > 0; }
  // Of `free` slots, those new proposals may take: none once the finalists are due or chosen.
  int ProposalRoom(int free) const;
  // The finalists are due: max_trials leaves room for them only, what is left of the time limit
  // is about the longest of their runs, or what is left of a gpu_hours or core_hours budget, once
  // the running trials end, is about what their runs cost.
  bool FinalistsDue() const;
  // What one run took: its seconds (over all its pauses), and what it cost a gpu_hours or
  // core_hours budget per second (its GPUs or GPU shares, or its CPU slots).
  struct RunCost {
    double seconds = 0;
    double budget_units = 1;
    bool gpus = false;
  };
  // What the finalists chosen now would take, each with a margin: the longest of their runs'
  // seconds (for a time limit), and the sum of their runs' costs by kind (for gpu_hours and
  // core_hours), in budget units x seconds.
  struct Reserve {
    double seconds = 0;
    double gpu = 0, cpu = 0;
  };
  std::optional<Reserve> FinalistReserve() const;
  // Whether finalists that would take `reserve` are due by the time or cost budget alone.
  bool DueBy(const Reserve& reserve) const;
  // Why finalists that would take `reserve` are not started: they would hold more than a third of
  // a time or cost budget (a search that short gains more from new trials). nullopt when they may
  // start.
  std::optional<std::string> Forgone(const Reserve& reserve) const;
  // The event log says once that finalists were due and forgone, and why.
  void NoteForgone();
  // What a gpu_hours or core_hours budget (`gpus` says which) holds once the running trials of
  // that kind have each run as long as the median completed run; in budget units x seconds.
  double CostLeft(bool gpus) const;
  // Queues finalists into up to `free` slots once they are due, then extra draws; the slots left.
  int QueueFinalists(int free);
  // budget.rerun_top: queues into up to `free` slots the configurations among the best rerun_top
  // not re-run yet; the slots left.
  int QueueReruns(int free);
  // The re-runs (finalists, rerun_top) have repeated their first runs exactly: trainings without
  // noise, so no further re-run is started and the slots go to the search.
  bool RerunsRepeat() const { return repeats_.Exact(); }
  // Says once in the event log why re-runs ended (RerunsRepeat), and `outcome`: what now.
  void LogRepeats(const char* outcome);
  // With a time limit, once every finalist is chosen: a slot that would stay idle until the limit
  // trains a finalist's configuration a third time (each at most once): of those whose longest
  // run fits in what is left, the best mean of its completed runs so far (ties: the first
  // chosen). Its index in finalist_configs_.
  std::optional<size_t> NextExtraDraw() const;
  int QueueExtraDraws(int free);
  // A completed trial that may be the best: the best is chosen again (study/finalists.h). Whether
  // the trial is the best now.
  bool NoteCompleted(int number, const Config& config, double value, bool finalist,
                     const RunCost& cost);
  // With a time limit, a Tick when the finalists chosen now would be due.
  void WakeForFinalists();
  // A free slot, and a proposal or a finalist may take it.
  bool CanPlaceMore() const;
  // A trial's root begins: the pruner is told (and the resource it trains to comes back), or for
  // a finalist (`finalist`: its first run) the journal says it is one.
  double BeginRoot(int root, bool finalist);
  void LogFinalist(int number, int of, bool extra_draw);
  // "  (best so far)", or with finalists "  (best so far: the mean of 2 runs)".
  std::string BestNote(bool is_best) const;

  // ---- controller_share.cc ----
  // Over the share's limit: the youngest trials stop, to run again when there is room.
  void YieldOverShare();
  // Preempts what is over the share now, or once options_.preempt_after_s has passed.
  void GiveBackShare();
  // What it holds beyond its share, less what is already stopping: {GPUs, CPU slots}.
  std::pair<int, int> OverShare() const;

  // ---- controller_controls.cc ----
  // What came of a control: the outcome, and whether it was refused.
  struct ControlOutcome {
    bool refused = false;
    std::string text;
  };
  ControlOutcome StopByRequest();
  ControlOutcome Cancel();
  ControlOutcome Pause();
  ControlOutcome Resume();
  ControlOutcome Update(const storage::ControlRecord& c);
  ControlOutcome EnqueueTrials(const std::vector<storage::ControlTrial>& trials);
  ControlOutcome AddResults(const std::vector<storage::ControlTrial>& trials);
  // How many more trials the budget lets start (max_trials less those finished, paused, running
  // and waiting).
  int BudgetLeft() const;

  // ---- controller_pruning.cc ----
  void OnReport(Trial& t, const MetricLine& line, bool checkpoint);
  void Decided(Trial& t, const tuner::PrunerDecision& d);
  double ResourceOf(const MetricLine& line, int64_t count) const;
  double Comparable(double v) const;
  // The trial's value after one more report `v`, by objective.strategy.
  std::optional<double> Combine(Trial& t, double v) const;
  // The same for any objective (the study's first is the one above); `recent`: its reports that
  // a last-N-avg strategy averages, `v` added (read only for that strategy; else may be null).
  static std::optional<double> CombineFor(const study::Objective& objective,
                                          std::optional<double> current, double v,
                                          std::vector<double>* recent);
  // Whether a completed trial with these values may be the study's best: one objective, and
  // every constraint holds.
  bool IsBestCandidate(const std::map<std::string, double>& values) const {
    return !spec_.MultiObjective() && study::MeetsConstraints(spec_, values);
  }
  // The first objective (beyond the first) that `values` lacks or holds as non-finite; null when
  // every one is there.
  const study::Objective* MissingObjective(const std::map<std::string, double>& values) const;
  std::string ValuesText(const storage::TrialRecord& rec) const;
  // Whether an objective or constraint is hyperpack's own `cost` metric.
  bool KeepsCost() const { return spec_.KeepsMetric(study::kCostMetric); }
  // What the trial has cost until now, as `trials` counts it: its runs' time x what it held.
  double CostSoFar(const Trial& t) const;
  std::string NoObjectiveError(const Trial& t, const std::map<std::string, double>& values) const;
  // t.values, with its cost where the study keeps `cost` and the trial reported none itself.
  std::map<std::string, double> ValuesWithCost(const Trial& t) const;
  // A metric of a report that a study keeping values tracks into Trial::values.
  void KeepValue(Trial& t, const std::string& name, double value) const;
  bool ObserveRung(int root, const Config& config, double resource, double value,
                   const tuner::PrunerDecision& d, std::optional<double> cost);
  // `values`: with several objectives, each one's value (the pruner ranks by them); else empty.
  tuner::PrunerDecision Report(int root, const Config& config, double resource, double objective,
                               std::span<const double> values, bool* rung_observed,
                               std::optional<double> cost = std::nullopt);
  void Journal(storage::JournalKind kind, int root, double resource = 0, double value = 0,
               bool completed = false, std::vector<double> values = {});
  // With several objectives, each one's latest value for the pruner (NaN where not reported).
  std::vector<double> ObjectiveValues(const Trial& t) const;
  // `announced`: its promotion event was logged already (promoted in place, then restarted).
  void Promote(const Paused& p, double target, bool announced = false);
  void MarkPromoted(int root, double target);
  void PausedFor(int root, Paused p);
  void FinalizePaused();
  Status Replay(const StoredStudy& stored);
  void ReplayEntry(const storage::JournalEntry& e, const std::map<int, Config>& config_of_root);
  void RestoreTrial(const storage::TrialRecord& t, const Config& config, int root, bool has_retry,
                    const StoredStudy& stored);
  void ObserveStored(const storage::TrialRecord& t, const Config& config, int root);
  // Adds each stored run's cost to its root and the cost budget, and prices each root per unit.
  void RestoreCosts(const StoredStudy& stored, const std::function<int(int)>& root_of);
  std::string StartLine() const;

  study::StudySpec spec_;
  ControllerOptions options_;
  std::unique_ptr<tuner::Pruner> pruner_;
  std::vector<double> ladder_;  // the first bracket's rungs: the levels the tuner learns
  ClusterState cluster_;
  Scheduler scheduler_;
  std::vector<ClusterNode> nodes_;    // every node that ever joined, as it joined
  std::vector<bool> lost_;            // by node
  std::optional<ShareGrant> share_;   // set by ShareChanged; a node that joins is withheld by it
  std::optional<double> preempt_at_;  // over its share: when what is still over is preempted
  Demand typical_demand_;  // the latest trial's, for what a proposal not made yet will hold
  // What shares by memory are multiplied by: the most a trial's peak GPU memory passed what its
  // study stated for it, with a margin; 1 until one did.
  double share_memory_factor_ = 1;
  // gpu_memory: auto: the most GPU memory a trial reported (peak_gpu_mb); 0 until one did.
  double peak_gpu_mb_ = 0;

  // The event being handled: its time, and what it makes us do.
  double now_ = 0;
  std::vector<Command> out_;
  std::vector<Row> pending_rows_;
  // Reasons the event being handled gave for another Fill pass (a slot freed, a trial queued).
  int refills_ = 0;

  std::map<int, Trial> running_;
  std::map<uint64_t, Queued> waiting_;  // scheduler job -> trial waiting for room
  std::deque<Queued> retries_;
  std::map<int, Paused> paused_;          // by root
  std::map<int, double> promoted_early_;  // promoted while still stopping: root -> target
  std::set<int> announced_early_;         // of those, the ones whose promotion was logged already
  std::map<int, RootState> roots_;
  std::vector<double> durations_;        // of this run's completed trials
  std::vector<double> final_resources_;  // ... and the resource of their last report
  std::map<uint64_t, tuner::CostPrediction> predicted_by_job_;  // new proposals, until launched
  // GPU-seconds and CPU-slot-seconds of the runs that ended (this run's, and stored ones').
  double gpu_seconds_ = 0, cpu_seconds_ = 0;
  uint64_t jobs_ = 0;
  int next_number_ = 0;
  int finished_ = 0;
  int failed_this_run_ = 0;
  int interrupts_ = 0;
  int asked_ = 0;     // configurations asked of the tuner (ProposeCmd) and not answered yet
  RunLifecycle run_;  // the run's phase: launching, held, stopping, ... (run_phase.h)
  std::vector<storage::ControlRecord> start_controls_;  // StoredStudy::controls, for Start
  // Whether this run carries on a study stored before (Restore), for the line it starts with.
  enum class Origin { kNew, kResumed } origin_ = Origin::kNew;
  std::optional<Status> storage_error_;  // the first that stopped the run
  std::optional<double> best_;
  std::optional<int> best_trial_;
  int best_runs_ = 1;  // best_ is the mean of this many runs of its configuration
  // budget.finalists or rerun_top (kept only for a study that has one): the completed runs that may
  // be the best, as they completed, the seconds each trained, the configurations chosen to run
  // again, and the roots of their trials (the pruner never sees them).
  std::vector<study::CompletedRun> runs_;
  std::map<int, RunCost> run_costs_;
  std::vector<Config> finalist_configs_;
  std::vector<Config> extra_draws_;  // finalists' configurations drawn a third time
  std::set<int> finalist_roots_;
  bool proposals_exhausted_ = false;  // the tuner had no configuration left to propose
  bool forgone_logged_ = false;       // NoteForgone has said why finalists wait
  // The re-runs against their first runs (finalists, rerun_top), and whether the event log has
  // said that re-runs ended.
  study::Repeats repeats_;
  bool rerun_repeat_logged_ = false;
  RunSummary summary_;
};

}  // namespace hyperpack::scheduler
