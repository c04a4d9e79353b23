// What the CLI's read commands print: studies, one study's status, its trials, the best trial,
// and exports of the best configurations. Tables for people, JSON for programs.
//
// Every function reads through a Storage (usually opened read-only while a run writes) and writes
// to `out`; errors (no such study, an unreadable database) come back as a Status.
// Thread-safety: as Storage, one thread per Storage.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"

namespace hyperpack::report {

enum class OutputFormat { kTable, kJson };

// All studies: name, trials by state, best value, whether a runner is on it.
Status ReportStudies(storage::Storage& db, OutputFormat format, std::ostream& out);
// One study: trials by state, best so far, elapsed, the latest events.
Status ReportStudy(storage::Storage& db, const std::string& name, OutputFormat format,
                   std::ostream& out);

// How `status STUDY --watch` shows a study live.
struct WatchOptions {
  double interval_s = 2;  // between frames, in (0, 3600]
  OutputFormat format = OutputFormat::kTable;
  // Text on a terminal: each frame clears the screen and is drawn whole. Otherwise (a pipe, a
  // file, and always with kJson) a frame is written only when what it says changed apart from the
  // clock and the elapsed times, so that a log is not flooded.
  bool redraw = false;
  // Asked several times a second while waiting; true ends the watch (Ctrl-C). May be empty.
  std::function<bool()> stop;
};
// Study `name` live: loads it, writes a frame (text, or one JSON object a line), waits
// `interval_s`, and again, until no runner is on the study any more (it finished, stopped or its
// runner died: the final frame is written) or `stop` says so (a newline is written, except after
// JSON lines that are not on a terminal). A study that is not running gets one frame. Errors: no
// such study (as ReportStudy), an interval out of range, a database that cannot be read, `out`
// failing. The frame itself is report/src/watch.h's.
Status WatchStudy(storage::Storage& db, const std::string& name, const WatchOptions& options,
                  std::ostream& out);

// ---- A study's lifecycle, as `status --json`, `wait` and `logs` read it ----

// Katib's conditions: how a study came to the state it is in. Final ones (succeeded, failed,
// stopped, cancelled) change only when it runs again.
enum class ConditionType {
  kCreated,
  kRunning,
  kPaused,
  kStopping,
  kSucceeded,
  kFailed,
  kStopped,
  kCancelled
};
const char* ConditionTypeName(ConditionType type);  // "Created", "Running", ...
bool IsFinal(ConditionType type);
struct StudyCondition {
  ConditionType type = ConditionType::kCreated;
  std::string reason;   // CamelCase, as Katib writes it: "BudgetReached", "PausedByUser", ...
  std::string message;  // for people
  double time = 0;      // seconds since the epoch
};
// Study `name`'s conditions, oldest first; the last is its state now. Read from its record, its
// trials' tally, the runs' start and stop events and the controls carried out.
Result<std::vector<StudyCondition>> ReadConditions(storage::Storage& db, const std::string& name);
// {"type", "reason", "message", "time"} objects; the time as an ISO 8601 UTC timestamp.
std::string ConditionsJson(const std::vector<StudyCondition>& conditions);
Result<std::vector<StudyCondition>> ParseConditionsJson(const std::string& json);

// `hyperpack wait`: asks `read` for the study's conditions every `poll_s` until the last is final
// or `timeout_s` passes, then prints it (a line, or its JSON object). Returns the exit code: 0
// succeeded, 1 failed, 3 stopped or cancelled, 124 still going at the timeout. `read` is this
// machine's storage (ReadConditions) or a server.
struct WaitOptions {
  std::optional<double> timeout_s;
  double poll_s = 1;
  OutputFormat format = OutputFormat::kTable;
  std::function<bool()> stop;  // asked while waiting; true ends the wait as a timeout would
};
Result<int> WaitForStudy(const std::function<Result<std::vector<StudyCondition>>()>& read,
                         const WaitOptions& options, std::ostream& out);

// A piece of a study's logs from `from` on: without a trial, its event log (`from` counts events,
// a line each); with one, that trial's log file (rank 0's; `from` counts bytes). A piece holds
// about 64 KiB at most, so that it fits a server's reply frame. `over`: nothing more will come (no
// runner is on the study; the trial has ended and its file was read to its end).
struct LogChunk {
  std::string text;
  int64_t next = 0;  // where the next piece starts
  bool over = false;
};
Result<LogChunk> ReadLogs(storage::Storage& db, const std::string& name, std::optional<int> trial,
                          int64_t from);
// `hyperpack logs`: prints what `read` gives from the start and, following, what it adds every
// `poll_s` until it is over or `stop` says so.
Status FollowLogs(const std::function<Result<LogChunk>(int64_t from)>& read, bool follow,
                  double poll_s, const std::function<bool()>& stop, std::ostream& out);

// One row per trial; --json: an array of objects.
Status ReportTrials(storage::Storage& db, const std::string& name, OutputFormat format,
                    std::ostream& out);
// How far from the best value a trial may be to count as good: `amount` in the metric's units,
// or, when relative, that fraction of |best| ("0.2%" is 0.002 relative).
struct Tolerance {
  double amount = 0;
  bool relative = false;
};
// "0.002" (absolute) or "0.2%" (relative). Errors (negative, not finite, not a number) name
// --within and say what would do.
Result<Tolerance> ParseTolerance(const std::string& text);

// The best completed trial: {"trial", "value", "params", "metric", "direction", ...}. With
// `within`, the cheapest completed trial whose value is within that of the best's instead, its
// cost (the time it ran x the GPUs it held, or x its CPU slots where it held none: GPU-seconds
// or CPU-seconds) beside the best's: {..., "cost", "cost_unit", "within", "best": {"trial",
// "value", "cost"}}. A trial that held GPUs counts as dearer than any that held none.
// One member of a study's Pareto set, chosen (`--pick 'val_accuracy>=0.9' --by latency_ms`): of
// the members whose values meet every condition, the best by `by` in its objective's direction
// (the smallest, for a constraint's metric); ties: the earlier trial.
struct FrontPick {
  enum class Op { kLess, kLessEqual, kGreater, kGreaterEqual };
  struct Condition {
    std::string metric;
    Op op = Op::kGreaterEqual;
    double value = 0;
  };
  std::vector<Condition> conditions;
  std::string by;  // empty: the first objective
};
// Conditions "val_accuracy>=0.9,latency_ms<20" ("" for none) and the metric to pick by. Errors
// name --pick and say what would do; the metrics are checked against the study when it is read.
Result<FrontPick> ParseFrontPick(const std::string& conditions, const std::string& by);

// What `best` and `export` choose: the best (`top` of them, for export), or one trial by number,
// or the cheapest within a tolerance of the best, or (several objectives) one member of the
// Pareto set picked, or (by_model) the trial whose configuration a Gaussian process fitted to
// every completed trial, noise learnt, recommends (tuner/recommend.h). At most one of trial,
// within, pick and by_model.
struct Choice {
  int top = 1;
  std::optional<int> trial;
  std::optional<Tolerance> within;
  std::optional<FrontPick> pick;
  bool by_model = false;
};

// The trial `best` names in a study with one objective: the best that meets the constraints; with
// budget.finalists, once one has completed, the first run of the configuration with the best mean
// of its runs; with budget.rerun_top, the model's pick (by_model). `value` is that mean (of `runs`
// runs), or the trial's own value (runs 1). With several objectives, by the first. nullopt before a
// trial has completed. (Python's Study.best.)
struct BestTrial {
  storage::TrialRecord trial;
  double value = 0;
  int runs = 1;
  // budget.rerun_top: the trial a model of every completed run recommends (best --by-model's),
  // not the best single run; false where too few trials have completed for a model.
  bool by_model = false;
  // budget.finalists or rerun_top whose re-runs returned their first runs' values exactly
  // (study::Repeats): the trainings repeat themselves, and the best is the best single run.
  bool reruns_repeat = false;
};
Result<std::optional<BestTrial>> FindBestTrial(storage::Storage& db, const std::string& name);
// The trial `best --by-model` names (Choice::by_model) and the share of the values' spread the
// model reads as noise. Errors as its: several objectives, fewer than 8 completed trials, values
// all equal, no completed trial (NotFound). (Python's Study.recommend.)
struct ModelRecommendation {
  storage::TrialRecord trial;
  double noise_share = 0;
};
Result<ModelRecommendation> RecommendTrial(storage::Storage& db, const std::string& name);

// With several objectives: the Pareto set ({"study", "objectives", "constraints", "front": [...]}
// in JSON), or with `pick` its member picked, or with `trial` that trial.
Status ReportBest(storage::Storage& db, const std::string& name, OutputFormat format,
                  const Choice& choice, std::ostream& out);

enum class ExportFormat {
  kYaml,
  kJson,
  kEnv,
  kArgs,
  // A launcher's own configuration (report/src/launchers.h): one trial at a time.
  kDeepSpeed,
  kTorchrun,
  kHuggingFace,
  kLightning,
  kHydra,
  // Optuna's SQLite schema: a file, not text (ExportOptunaSqlite).
  kOptunaSqlite,
  // TensorBoard logs: a directory, not text (ExportTensorboard).
  kTensorboard,
};
Result<ExportFormat> ParseExportFormat(const std::string& name);
// The best `top` configurations, best first, or with `trial` that trial alone (completed or not),
// or with `within` the cheapest good one (as ReportBest); `within` takes top 1 and no `trial`.
// With one configuration the output is it alone (a YAML or JSON mapping, KEY=VALUE lines, one line
// of --name value arguments, or a launcher's configuration), ready to feed to a training script;
// with top > 1, one entry per trial with its number and value. What a launcher's format cannot
// carry over is written to `warnings`, a line each.
// A study with several objectives has no best: its export needs `trial` or `pick`.
Status ExportBest(storage::Storage& db, const std::string& name, ExportFormat format,
                  const Choice& choice, std::ostream& out, std::ostream& warnings);

// The study page (docs/REPORT.md) of study `name`: its charts (optimisation history, parallel
// coordinates, parameter importance, slices, intermediate values, trials on GPUs and CPU slots
// over time, cost against objective), its trials and its events, in one HTML document with its
// scripts, styles and data inlined: it opens with no network, to attach to a message or an issue.
Status WriteStudyPage(storage::Storage& db, const std::string& name, std::ostream& out);

// What a server of study pages (the dashboard) keeps between requests: each study's parameter
// importance, refitted only when another trial has completed. Thread-safe.
class PageCache {
 public:
  PageCache();
  ~PageCache();
  PageCache(const PageCache&) = delete;
  PageCache& operator=(const PageCache&) = delete;

 private:
  friend struct PageCacheAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The study page served live: it polls `source` (a URL of the same origin; empty: it does not
// poll) for StudyPageJson's data.
Result<std::string> StudyPage(storage::Storage& db, const std::string& name,
                              const std::string& source, PageCache& cache);
// The study page's data (docs/REPORT.md) as JSON text, marked live.
Result<std::string> StudyPageJson(storage::Storage& db, const std::string& name, PageCache& cache);

// Every trial as an Optuna database, and an Optuna storage read back: optuna.h.

// Every trial of study `name` as TensorBoard logs in `dir` (new or empty): the experiment and its
// parameters' domains at the top, one run per trial (trial-NNNN/) with its parameters (the HParams
// plugin's session), its metric points as scalars and its value as `hyperpack/objective`, so
// `tensorboard --logdir DIR` shows the study's HParams table. See report/src/tensorboard_export.cc.
Status ExportTensorboard(storage::Storage& db, const std::string& name, const std::string& dir);

}  // namespace hyperpack::report
