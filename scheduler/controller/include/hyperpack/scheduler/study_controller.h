// The study controller: every decision about one study, made from the events it is given.
//
// A driver turns the world into events (a trial's row was written, rank 0 printed a metric line,
// a rank exited, a node joined or was lost, time passed, the user pressed Ctrl-C) and carries out
// the commands that come back (propose N configurations, teach the tuner an outcome, write these
// rows, launch this plan of ranks, signal a trial, wake me at T, say this line, the run is over).
// The controller does no I/O, starts no process and reads no clock: every event carries the time
// (seconds since the run began), so the same code runs a study live (run/local_driver.cc, and the
// server with its agents), resumes one (the stored rows and journal fed through a fresh
// controller by Start), and plays one in virtual time (virtual_driver.h, which the benchmarks use).
//
// What lives here: the budget (max_trials, max_parallel, max_failed, time_limit), placement on the
// cluster (placement.h), per-trial timeouts, the pruner with its paused and promoted trials, what
// the tuner learns from rungs, requeues after a lost node or an interruption, and how a run ends.
//
// Thread-safety: not thread-safe. One driver owns it and calls it from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hyperpack/placement/fair_share.h"
#include "hyperpack/placement/placement.h"
#include "hyperpack/scheduler/metrics.h"
#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/records.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/tuner/pruner.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::scheduler {

// Why a run stopped launching trials: the stored vocabulary (records.h), since a run_stopped
// event's message names it and the reports read it back.
using storage::ParseStopReason;
using storage::StopReason;
using storage::StopReasonName;

struct RunSummary {
  std::string study;
  int completed = 0;
  int pruned = 0;  // stopped early by the pruner
  int failed = 0;  // failed + timeout
  int infeasible = 0;
  int interrupted = 0;        // in this run
  int preempted = 0;          // stopped to give another study its share (requeued)
  int paused = 0;             // still paused when the run ended
  int promoted = 0;           // promotions in this run (promote mode)
  int promoted_in_place = 0;  // of those, trials that went on without a restart (ContinueCmd)
  int total_finished = 0;
  int max_trials = 0;
  double elapsed_s = 0;
  std::optional<double> best_value;
  std::optional<int> best_trial;
  // best_value is the mean of this many runs of best_trial's configuration (budget.finalists).
  int best_runs = 1;
  // budget.rerun_top: best_value is the best single run; the study's best is a model's pick of
  // every run, which `hyperpack best` names (the controller fits no model).
  bool best_by_model = false;
  StopReason reason = StopReason::kNone;
  std::string stop_reason;  // StopReasonName(reason)
  // 0: stopped normally with a completed trial; 1: stopped by failures (max_failed), an error, or
  // with no trial of the study completed; 130: interrupted.
  int exit_code = 0;
};

// How one rank of a trial ended.
struct RankExit {
  // kTimedOut: a cluster's time limit ended it (Slurm's TIMEOUT); kPreempted: the cluster took its
  // resources for other work (it runs again, like a lost node); kRefused: the cluster will never
  // run it as asked (the trial is infeasible, err_tail says why).
  enum class Kind { kExited, kSignaled, kLost, kNeverStarted, kTimedOut, kPreempted, kRefused };
  Kind kind = Kind::kExited;
  int code = 0;  // kExited: the exit code; kSignaled: the signal number

  bool ok() const { return kind == Kind::kExited && code == 0; }
  static RankExit Exited(int code) { return {Kind::kExited, code}; }
  static RankExit Signaled(int signal) { return {Kind::kSignaled, signal}; }
  static RankExit Lost() { return {Kind::kLost, 0}; }
  static RankExit NeverStarted() { return {Kind::kNeverStarted, 127}; }
  static RankExit TimedOut() { return {Kind::kTimedOut, 0}; }
  static RankExit Preempted() { return {Kind::kPreempted, 0}; }
  static RankExit Refused() { return {Kind::kRefused, 0}; }
  // From a wait status as waitpid gives it.
};

// A node trials can be placed on, as the launch plans name it.
struct ClusterNode {
  Node node;
  std::vector<std::string> gpu_names;  // as CUDA_VISIBLE_DEVICES names the node's GPUs
  std::string address;                 // MASTER_ADDR for a gang whose rank 0 runs there
};

// ---- Events in ----------------------------------------------------------------------------------
struct ProposalsReady {
  Result<std::vector<Config>> configs;
  // What each will cost per unit of resource (Tuner::PredictCost), where the tuner knows; empty
  // or shorter than configs: unknown.
  std::vector<std::optional<tuner::CostPrediction>> costs;
};
// The rows a WriteCmd with `ack` carried were committed (or failed).
struct TrialPersisted {
  int trial = 0;
  Status status;
};
// A line of rank 0's standard output that reports metrics. `checkpoint`: the trial's checkpoint
// folder holds something (only looked at when the pruner pauses trials).
struct MetricReport {
  int trial = 0;
  MetricLine line;
  bool checkpoint = false;
};
struct RankExited {
  int trial = 0;
  int rank = 0;
  RankExit exit;
  std::string err_tail;  // the end of its standard error, or why it never started
};
// A cluster that queues work (Slurm) started the trial's ranks after `queued_s` in its queue, on
// `where`. Recorded and shown; it changes no decision.
struct TrialRunning {
  int trial = 0;
  double queued_s = 0;
  std::string where;
};
struct NodeJoined {
  ClusterNode node;
};
struct NodeLost {
  int node = 0;
};
struct Tick {};  // time passed (a WakeCmd fell due)
struct Interrupt {
  bool ctrl_c = false;  // SIGINT; otherwise SIGTERM or the client went away
};
struct StorageFailed {
  Status status;
};
// Someone asked something of the study (hyperpack stop, enqueue, ...: storage::ControlRecord).
// Answered with a ControlDoneRow saying what came of it, and an event.
struct ControlArrived {
  storage::ControlRecord control;
};
// The server runs several studies at once: what this one may hold from now on (fair_share.h).
// Units withheld are never placed on; a study over its limit preempts its youngest trials (they
// end as interrupted and run again from their checkpoints, not counted as failed attempts).
struct ShareChanged {
  ShareGrant grant;
};
using EventPayload =
    std::variant<ProposalsReady, TrialPersisted, MetricReport, RankExited, TrialRunning, NodeJoined,
                 NodeLost, Tick, Interrupt, StorageFailed, ShareChanged, ControlArrived>;
struct Event {
  double now = 0;  // seconds since the run began
  EventPayload what;
};

// ---- Commands out -------------------------------------------------------------------------------
// Ask the tuner for up to `n` configurations (distinct from `pending`); answer with ProposalsReady.
struct ProposeCmd {
  int n = 0;
  std::vector<Config> pending;
  double budget_spent = 0;  // for Tuner::SetBudgetSpent
};
// Teach the tuner an outcome, in order, before any later ProposeCmd.
struct ObserveCmd {
  tuner::TrialOutcome outcome;
};

// Rows to write, in order.
struct InsertTrialRow {
  storage::TrialRecord trial;
};
struct FinishTrialRow {
  storage::TrialRecord trial;
};
struct ResumeTrialRow {
  int trial = 0;
  std::vector<storage::RankRecord> placement;  // where it runs now
};
struct MetricsRow {
  int trial = 0;
  std::vector<storage::MetricPoint> points;
};
struct EventRow {
  storage::EventRecord event;
};
struct JournalRow {
  storage::JournalEntry entry;
};
struct ReleaseStudyRow {};  // the run is over: the study has no runner now
// A control was carried out (or refused, with why): Storage::FinishControl.
struct ControlDoneRow {
  int64_t id = 0;
  bool refused = false;
  std::string outcome;
  double applied = 0;  // seconds since the epoch, on the clock of the run's events
};
using Row = std::variant<InsertTrialRow, FinishTrialRow, ResumeTrialRow, MetricsRow, EventRow,
                         JournalRow, ReleaseStudyRow, ControlDoneRow>;
// With `ack`, answer TrialPersisted{ack, status} once the rows are committed: a trial's row is
// stored before its process exists.
struct WriteCmd {
  std::vector<Row> rows;
  std::optional<int> ack;
};

// One process of a trial's gang.
struct RankPlan {
  int node = 0;
  std::vector<std::pair<std::string, std::string>> env;  // set over the inherited environment
  std::string log_path;
  std::string log_header;  // the first lines of its log
  // Held by the rank's processes while they run, and waited for by the same rank of the trial's
  // next attempt (SpawnRequest::lock_path): two attempts never run at once, whatever a fence did.
  std::string lock_path;
};
struct LaunchPlan {
  int trial = 0;
  int root = 0;  // the first attempt's number: its checkpoint folder is shared
  int attempt = 1;
  bool resume = false;  // a promoted trial continuing from its checkpoint
  Config config;
  Placement placement;
  std::string command;  // for /bin/sh -c, rendered
  std::string workdir;
  std::string trial_dir;
  std::string checkpoint_dir;
  std::string params_file;  // the driver writes params_json there before starting anything
  std::string params_json;
  std::string metrics_path;  // trial.metrics_path rendered ("" when metrics come from output)
  std::vector<std::string> clear_env;  // inherited variables to drop first
  bool needs_master_port = false;      // a gang: set MASTER_PORT to a free port on rank 0's node
  bool control = false;                // each rank gets a control socket (env::kControlFd)
  // Not empty: the trial (one rank) runs `hyperpack-trainer` with these words, and a warm trainer
  // may serve it where the executor keeps one (TrialSpec::warm).
  std::vector<std::string> warm_argv;
  std::vector<RankPlan> ranks;
  // budget.finalists: the trial whose configuration this one trains again (its first launch).
  std::optional<int> finalist_of;
};
// Start every rank; a rank that cannot be started is answered RankExited(kNeverStarted).
struct LaunchCmd {
  LaunchPlan plan;
};
enum class SignalKind { kTerminate, kKill };
struct SignalCmd {
  int trial = 0;
  int rank = 0;
  SignalKind kind = SignalKind::kTerminate;
};
// Promote mode: rank 0 of a trial waiting at its rung (LaunchPlan::control) is promoted in place:
// the driver tells it "continue TARGET" on its control socket, and it trains on without a restart.
// Should that fail, the trial exits at its rung and is restarted from its checkpoint instead.
struct ContinueCmd {
  int trial = 0;
  double target = 0;
};
// Send a Tick at `at` (seconds since the run began) or soon after.
struct WakeCmd {
  double at = 0;
};
// A line for the people watching.
struct SayCmd {
  std::string text;
};
// The trial has ended: append `footer` to its ranks' logs and close them.
struct CloseLogsCmd {
  int trial = 0;
  std::string footer;
};
// Nothing runs and nothing will: the run is over.
struct FinishCmd {
  RunSummary summary;
};
using Command = std::variant<ProposeCmd, ObserveCmd, WriteCmd, LaunchCmd, SignalCmd, ContinueCmd,
                             WakeCmd, SayCmd, CloseLogsCmd, FinishCmd>;

// ---- The controller -----------------------------------------------------------------------------
struct ControllerOptions {
  int64_t study_id = 0;
  int max_trials = 0;
  int max_parallel = 1;
  double kill_grace_s = 5.0;  // SIGTERM, then SIGKILL this much later
  double wall_start = 0;      // wall-clock seconds since the epoch when the run began
  std::string host;           // recorded with each trial
  std::string log_root;       // the study's log folder: trial-NNNN/ go there
  std::vector<ClusterNode> nodes;
  // The tuner learns every trial's value at each rung of the first bracket's ladder (false: only
  // at the rungs of its own bracket that the pruner recorded; a benchmark's ablation).
  bool learn_ladder = true;
  std::string start_note;  // appended to the first line (e.g. a warm start)
  std::string storage_path;
  // The driver can write to a trial's control socket (ContinueCmd): a promote-mode trial waits at
  // its rung and, when the pruner promotes it at once, goes on without a restart.
  bool continue_in_place = false;
  // Sharing a server with other studies: its share when it starts (then ShareChanged).
  std::optional<ShareGrant> share;
  // A study over its share first has this long for its trials to end by themselves; those still
  // over it then are preempted (youngest first). 0: at once.
  double preempt_after_s = 0;
};

// A trial's folder under log_root, "trial-0007": the one spelling every driver and executor uses.
std::string TrialFolderName(int number);

// What storage holds of a study when its run begins.
struct StoredStudy {
  bool resumed = false;
  std::vector<storage::TrialRecord> trials;    // running ones already marked interrupted
  std::vector<storage::JournalEntry> journal;  // in the order written
  std::set<int> checkpoints;                   // roots whose checkpoint folder holds something
  int next_number = 0;
  // Controls not carried out yet (asked while no runner was on the study): carried out by Start,
  // in order, before anything is placed.
  std::vector<storage::ControlRecord> controls;
};

// The study file's sections as the tuner and the pruner take them: the one conversion.
tuner::TunerOptions TunerOptionsFor(const study::StudySpec& spec, uint64_t seed);
// The study's `queue:`; where it names no order, shortest predicted run time first (with aging)
// where the study declares resources, else arrival.
QueueOptions QueueOptionsFor(const study::StudySpec& spec);
tuner::PrunerOptions PrunerOptionsFor(const study::StudySpec& spec);

// What a controller knows of its trials, for tests and the replay check: equal for a live run and
// the same records replayed.
struct ControllerState {
  struct Root {
    int64_t reports = 0;
    double resource = 0;
    std::vector<std::pair<int, double>> decisions;  // per report: PrunerDecision::Kind, rung or -1
    bool promoted = false;                          // promoted from its rung, and no report since
    bool operator==(const Root&) const = default;
  };
  std::map<int, Root> roots;
  std::map<int, double> paused;  // trial number -> its rung
  std::set<int> pausing;         // running trials told to pause, not yet ended
  int finished = 0, completed = 0, pruned = 0, failed = 0, infeasible = 0;
  std::optional<int> best_trial;
  bool operator==(const ControllerState&) const = default;
};

// What a run holds at one moment, for an operator's gauges (hyperpack serve --metrics).
struct Occupancy {
  int running = 0;  // trials with ranks placed
  int waiting = 0;  // trials waiting for room: requeued, promoted, or placed behind others
  int paused = 0;
  int finished = 0, completed = 0, pruned = 0, failed = 0, infeasible = 0;
  int gpus = 0, gpus_busy = 0;  // on the nodes up now
  int cpus = 0, cpus_busy = 0;  // CPU slots on the nodes up now
};

class StudyController {
 public:
  // Errors: the study's pruner settings do not make a pruner.
  static Result<std::unique_ptr<StudyController>> Make(const study::StudySpec& spec,
                                                       ControllerOptions options);
  ~StudyController();

  // Rebuilds what the stored rows and journal say: tuner outcomes come back as ObserveCmds, in
  // order, and rows to write (a trial that was pausing when its runner died is paused). Call once,
  // before Start. Errors: a stored trial's parameters do not parse.
  Result<std::vector<Command>> Restore(const StoredStudy& stored);
  // Starts placing trials.
  std::vector<Command> Start(double now);
  std::vector<Command> Handle(const Event& event);

  // "[m:ss] 3/20 done (2 ok, 1 failed), 2 running, best loss 0.12 (trial 1)" without the time.
  std::string StatusLine() const;
  bool pauses() const;
  bool done() const;
  ControllerState State() const;
  Occupancy occupancy() const;
  // What it holds and would place now, for a server's fair share (its weight is left at 1).
  ShareClaim Claim() const;
  // Its weight on a shared server: the study's `priority:`, or what `hyperpack update` set.
  double priority() const;

 private:
  class Impl;
  explicit StudyController(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The closing lines of a run, for people.
std::string FormatSummary(const RunSummary& summary, const std::string& metric);

}  // namespace hyperpack::scheduler
