// The vocabulary of what a study stores: trial, journal, submission and event kinds with their
// stored names, and the plain records that storage reads and writes (studies, trials, metric
// points, events). No I/O: the pure study controller and the drivers name these types without
// linking SQLite (storage.h is the interface to the stores).
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hyperpack/direction.h"
#include "hyperpack/space.h"

namespace hyperpack::storage {

enum class TrialState {
  kPending,      // created, not started
  kRunning,      // its process is (or was, if the runner died) running
  kCompleted,    // exited 0 and reported the objective
  kPruned,       // stopped early by a pruner; its value is the last one reported
  kFailed,       // exited non-zero, or never reported the objective
  kInterrupted,  // stopped by Ctrl-C or lost with its runner; run again on resume
  kTimeout,      // killed for passing trial.timeout
  kInfeasible,   // exited with code 3: this configuration cannot run (e.g. out of memory)
  kNodeLost,     // its node (an agent) was lost; run again, up to budget.max_attempts
  kPaused,       // trained to its rung (ASHA promote mode) and stopped, keeping its checkpoint;
                 // promoted later, it runs again under the same number
  kCancelled,    // ended by `hyperpack cancel`; finished, never run again
};
// Every state, in the order people read a study's counts: done well, under way, then the rest.
inline constexpr TrialState kTrialStatesForPeople[] = {
    TrialState::kCompleted,  TrialState::kRunning,     TrialState::kPaused,
    TrialState::kPruned,     TrialState::kFailed,      TrialState::kTimeout,
    TrialState::kInfeasible, TrialState::kInterrupted, TrialState::kNodeLost,
    TrialState::kCancelled,  TrialState::kPending};
const char* TrialStateName(TrialState state);
std::optional<TrialState> ParseTrialState(const std::string& name);
// Completed, pruned, failed, timeout, infeasible and cancelled trials are finished: they count
// against the budget and are never run again. Interrupted ones are run again. Paused ones count
// against the budget but are not finished: they may be promoted.
bool IsFinished(TrialState state);

// Why a run stopped launching trials. A run_stopped event's message is its name, which is how
// `status` and `wait` tell how a study ended.
enum class StopReason {
  kNone,
  kBudgetReached,
  kSearchSpaceExhausted,
  kTimeLimit,
  kTooManyFailed,
  kInterrupted,
  kTunerError,
  kStorageError,
  kStopped,    // hyperpack stop
  kCancelled,  // hyperpack cancel
};
// "budget reached", "search space exhausted", "time limit", "too many failed trials",
// "interrupted", "tuner error", "storage error", "stopped by request", "cancelled"; "" for kNone.
const char* StopReasonName(StopReason reason);
// The reason a run_stopped event names; nullopt for another text.
std::optional<StopReason> ParseStopReason(const std::string& name);

// What someone asked of a study from outside its runner (`hyperpack stop`, `enqueue`, ...), kept
// in storage until the study's runner (or, for a study without one, the command itself or an ask)
// carries it out. The runner polls for them, so a command works the same from another terminal,
// another machine (through the server) or a script.
enum class ControlKind {
  kStop,        // start no more trials; running ones end as they would
  kCancel,      // end running trials too, recorded as cancelled
  kPause,       // stop running trials (they run again from their checkpoints) and start none
  kResume,      // undo a pause
  kUpdate,      // change the budget or priority of the live run
  kEnqueue,     // run these configurations next (`enqueue`, `retry`)
  kAddResults,  // completed trials evaluated elsewhere, for the tuner to learn from
};
// "stop", "cancel", "pause", "resume", "update", "enqueue", "add_results".
const char* ControlKindName(ControlKind kind);
std::optional<ControlKind> ParseControlKind(const std::string& name);

// A configuration a control carries: to run (kEnqueue; retry_of names the trial a retry re-runs)
// or already evaluated (kAddResults, with its value).
struct ControlTrial {
  Config params;
  std::optional<double> value;
  std::optional<int> retry_of;
  bool operator==(const ControlTrial&) const = default;
};

// What a control changes or brings, as its asker gave it: stored as the control's arguments, and
// carried the same way from a client to the server (run/control.h's ControlRequest has them too).
struct ControlArgs {
  // kUpdate: the settings it changes (the others are left as they are).
  std::optional<int> max_trials, max_parallel;
  std::optional<double> time_limit_s, priority;
  std::vector<ControlTrial> trials;  // kEnqueue, kAddResults
  bool operator==(const ControlArgs&) const = default;
};

struct ControlRecord : ControlArgs {
  int64_t id = 0;  // set by storage: controls are carried out in id order
  ControlKind kind = ControlKind::kStop;
  double created = 0;             // seconds since the epoch
  std::optional<double> applied;  // when it was carried out
  bool refused = false;           // carried out as far as it could not be: `outcome` says why
  std::string outcome;            // what it did, for the one who asked
};

// The codec of a control's arguments, as the backends store them and a client sends them: a JSON
// object, {"max_trials", "max_parallel", "time_limit_s", "priority" (each only when set), "trials"
// (only when there are some): [{"params": the stored parameters' text, "value", "retry_of"}...]}.
// Parsing ignores other keys (a request carries its verb beside them) and refuses a field of the
// wrong type, naming it (kInvalidArgument).
std::string EncodeControlArgs(const ControlArgs& args);
Result<ControlArgs> ParseControlArgs(std::string_view text);
// For the backends: the stored arguments of `control`; none when the text is not that shape.
void DecodeControlArgs(const std::string& text, ControlRecord* control);

// What a study's controller fed its pruner, in order: replaying these entries through a fresh
// controller rebuilds every rung, pause and promotion exactly as the live run made them.
enum class JournalKind {
  kBegin,        // a trial (its root number) started or resumed: Pruner::Begin
  kReport,       // an objective report at a resource: Pruner::Report
  kCannotPause,  // it was told to pause but has no checkpoint: Pruner::CannotPause
  kPromoted,     // a paused trial was promoted (resource: the target)
  kEnd,          // it ended for good (completed or not): Pruner::End
  kFinalist,     // a finalist (budget.finalists) started: the pruner is never told of it
};
// "begin", "report", "cannot_pause", "promoted", "end", "finalist": the names stored in the
// journal table.
const char* JournalKindName(JournalKind kind);
std::optional<JournalKind> ParseJournalKind(const std::string& name);

struct JournalEntry {
  int64_t seq = 0;  // set by storage when read: the order the entries were written
  int trial = 0;    // the trial's root number
  JournalKind kind = JournalKind::kReport;
  double time = 0;      // seconds since the epoch
  double resource = 0;  // kReport: the report's resource; kPromoted: the target
  double value = 0;     // kReport: the objective as the pruner saw it; NaN is kept (stored as NULL)
  // kReport in a study with several objectives: each one as the pruner saw it, in order (NaN kept).
  std::vector<double> values;
  bool completed = false;  // kEnd
};

// A study submitted to `hyperpack serve`, kept so that a server started again on the same storage
// carries on with the studies it had, and a client that reconnects can follow its own.
enum class SubmissionState { kQueued, kRunning, kDone };
// "queued", "running", "done".
const char* SubmissionStateName(SubmissionState state);
std::optional<SubmissionState> ParseSubmissionState(const std::string& name);

struct SubmissionRecord {
  int64_t id = 0;  // set by storage; also the run's fencing key on the agents
  std::string study_name;
  std::string spec_text;
  std::string spec_path;
  std::optional<int> max_trials, max_parallel;
  SubmissionState state = SubmissionState::kQueued;
  int exit_code = 0;     // kDone: the run's exit code
  std::string message;   // kDone: why it could not run, if it could not
  double submitted = 0;  // seconds since the epoch
};

// What an event in a study's log is about.
enum class EventKind {
  kRunStarted,
  kRunResumed,
  kRunStopped,
  kTrialStarted,
  kTrialResumed,
  kTrialFinished,
  kTrialPaused,
  kTimeLimit,
  kPruning,
  kPausing,
  kCannotPause,
  kPromoted,
  kTrialRunning,  // a cluster (Slurm) started it after it waited in its queue
  kPreempted,     // stopped to give another study on the server its share
  kShare,         // what the study may hold of a server it shares with other studies
  kControl,       // a control (hyperpack stop, enqueue, ...) was carried out or refused
  kFinalist,      // a trial trains a completed configuration again (budget.finalists)
};
// "run_started", "run_resumed", "run_stopped", "trial_started", "trial_resumed", "trial_finished",
// "trial_paused", "time_limit", "pruning", "pausing", "cannot_pause", "promoted",
// "trial_running", "preempted", "share", "control", "finalist".
const char* EventKindName(EventKind kind);
std::optional<EventKind> ParseEventKind(const std::string& name);

struct StudyRecord {
  int64_t id = 0;
  std::string name;
  std::string spec_text;  // the study file, verbatim
  std::string spec_path;
  Direction direction = Direction::kMinimize;
  std::string metric;
  uint64_t seed = 0;
  double created = 0;  // seconds since the epoch
  // The process running this study, if any (cleared on a clean exit).
  std::optional<int64_t> runner_pid;
  std::string runner_host;
};

// Where one rank of a trial ran: its node, its GPUs there (as the node numbers them) and its CPU
// slots.
struct RankRecord {
  std::string host;
  std::vector<int> gpus;
  int cpus = 0;
  // In (0, 1): the rank holds this part of gpus[0], shared with other trials; 0: whole GPUs.
  double gpu_share = 0;
  bool operator==(const RankRecord&) const = default;
};

struct TrialRecord {
  int64_t study_id = 0;
  int number = 0;  // 0, 1, 2, ... within a study
  TrialState state = TrialState::kPending;
  Config params;  // its configuration: active parameters only
  std::optional<double> value;
  // A study with several objectives or with constraints: every objective's and constraint's
  // metric that the trial reported, by name, as its value (by each objective's strategy; a
  // constraint's last report). `value` is the first objective's. Empty otherwise.
  std::map<std::string, double> values;
  std::optional<double> started;
  std::optional<double> ended;
  // An asked trial's last sign of life: its ask, then each heartbeat (hyperpack heartbeat, or the
  // Python module's). None for a runner's trials.
  std::optional<double> heartbeat;
  std::optional<int> exit_status;  // exit code, or 128 + signal
  std::string error;               // why it failed: the tail of stderr, or a reason
  std::string host;
  int attempt = 1;              // 2 for the first re-run of an interrupted trial, ...
  std::optional<int> retry_of;  // the trial number this one re-runs
  std::string log_path;
  // Where its ranks ran, one per rank (its latest run's, for a promoted trial); none where not
  // recorded (before schema 4).
  std::vector<RankRecord> placement;
};

// A result that add-results brings, as the completed trial `number` of study `study_id`.
TrialRecord AddedResult(int64_t study_id, int number, const ControlTrial& result);

// The codecs between a trial's typed fields and the text every backend stores; only the backends
// call them.
//
// Placement: [{"host": "node1", "gpus": [0, 1], "cpus": 1}, ...]. Bytes of a host name that are
// not UTF-8 are replaced. Decoding gives no ranks for "" (a row written before schema 4) or for
// text that is not that shape (a rank without a host, a GPU that is not a whole number); negative
// CPU counts read as 0.
std::string EncodePlacement(const std::vector<RankRecord>& ranks);
std::vector<RankRecord> DecodePlacement(const std::string& text);
// Parameters: a JSON object, keys sorted; a string holding compact JSON of a list or a mapping (a
// structured parameter's value) is stored as that JSON, as the program was handed it; bytes that
// are not UTF-8 are replaced. Decoding gives back every value encoding wrote, and reads text that
// is not such an object (a damaged row) as no parameters rather than failing the whole read.
std::string EncodeParams(const Config& params);
Config DecodeParams(const std::string& text);
// Values by metric: a JSON object of numbers ("" for none). Non-finite values are left out (JSON
// has no NaN). Decoding reads "" or text that is not such an object as no values, and skips
// members that are not numbers.
std::string EncodeValues(const std::map<std::string, double>& values);
std::map<std::string, double> DecodeValues(const std::string& text);
// A list of numbers (a journal entry's values): a JSON array, NaN as null ("" for none). Decoding
// reads "" or text that is not such an array as none, and null or a non-number as NaN.
std::string EncodeNumbers(const std::vector<double>& numbers);
std::vector<double> DecodeNumbers(const std::string& text);

// What `status` says of a study's trials without reading them: how many are in each state, and
// the span they ran over.
struct TrialTally {
  std::map<TrialState, int> counts;   // states with no trial are absent
  std::optional<double> first_start;  // the earliest start
  std::optional<double> last_end;     // the latest end of a trial that started
  int running_on = 0;                 // trials that started and have no end yet
  int Finished() const;               // trials in a state IsFinished holds for
  // Widens the span by that of some more trials.
  void AddSpan(std::optional<double> first, std::optional<double> last, int running);
  bool operator==(const TrialTally&) const = default;
};
// The tally of `trials`: what every backend's TallyTrials answers, computed here for stores that
// hold rows in memory and for callers that read every trial anyway.
TrialTally TallyOf(const std::vector<TrialRecord>& trials);

struct MetricPoint {
  int64_t step = 0;
  std::string name;
  double value = 0;
  double time = 0;
};

struct EventRecord {
  double time = 0;
  std::optional<int> trial;  // trial number, when the event is about one
  // EventKindName of an EventKind. A string, not the enum, because readers print it and a
  // database may hold kinds written by an older or newer hyperpack.
  std::string kind;
  std::string message;
};

}  // namespace hyperpack::storage
