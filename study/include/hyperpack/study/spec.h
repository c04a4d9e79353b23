// The study file: what a user writes, parsed and validated.
//
// ParseStudy checks everything it can before a single trial runs and reports every problem at
// once, each as `file:line:column: key.path: what is wrong; what is expected`. A StudySpec that
// comes back is complete: every default filled in, every reference resolved. Warnings, in the same
// shape, flag what is valid but probably not meant; they never stop a study.
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/direction.h"
#include "hyperpack/expression.h"
#include "hyperpack/placement/placement.h"
#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/tuner/pruner.h"
#include "hyperpack/tuner/tuner.h"

namespace hyperpack::study {

using hyperpack::Direction;
using hyperpack::DirectionName;

// Which reported value of the objective metric is the trial's value. kLastMean: the mean of the
// last `window` reports (`last-5-avg`, as Ray Tune's scope names it), which one noisy epoch does
// not decide.
enum class ObjectiveStrategy { kLast, kMin, kMax, kBest, kLastMean };

struct Objective {
  std::string metric;
  Direction direction = Direction::kMinimize;
  ObjectiveStrategy strategy = ObjectiveStrategy::kLast;
  int window = 1;  // kLastMean's number of reports, 2 or more

  // As the study file writes it: last, min, max, best, last-N-avg.
  std::string StrategyName() const;

  // True when `a` is strictly better than `b` in this direction.
  bool Better(double a, double b) const {
    return direction == Direction::kMinimize ? a < b : a > b;
  }
};

// `constraints:`: a bound on a metric the trial reports. A trial that breaks one, or never reports
// its metric, ran and is kept, but is no candidate: not on the front, not the best.
struct Constraint {
  enum class Bound { kMax, kMin };  // metric <= limit (`max:`), metric >= limit (`min:`)
  std::string metric;
  Bound bound = Bound::kMax;
  double limit = 0;
  // How far `value` is past the bound: > 0 breaks it, <= 0 holds it by that margin.
  double Violation(double value) const {
    return bound == Bound::kMax ? value - limit : limit - value;
  }
};

// hyperpack's own measure of a trial, usable as an objective or in a constraint: its runs' time x
// the GPUs it held (GPU-seconds), or x its CPU slots where it held none (CPU-seconds), as `trials`
// shows it. A trial that reports a metric of this name itself is taken at its word.
inline constexpr char kCostMetric[] = "cost";

// A metric read from lines the trial prints its own way (`objective.regex`, `trial.metrics`): a
// regular expression (Boost.Regex, Perl syntax) with exactly one capture group, around the value.
// Checked when the study file is parsed; compiled and matched by scheduler/metrics.h.
struct MetricPattern {
  std::string name;     // the metric; `epoch` and `step` set a report's epoch and step
  std::string pattern;  // as written, e.g. Accuracy: (\d+)/10000
};

// Where a trial's metrics come from: stdout (the default); stdout and stderr both (`output`), as
// Katib's StdOut collector reads them and as Python's logging writes (stderr); the TensorBoard
// event files under `metrics_path` (`tensorboard`, as Katib's TensorFlowEvent collector); or the
// lines appended to the file `metrics_path` (`file`, as Katib's File collector). The last two
// read no metrics from the output.
enum class MetricsSource { kStdout, kOutput, kTensorboard, kFile };
const char* MetricsSourceName(MetricsSource source);  // "stdout", "output", "tensorboard", "file"

// `trial.shim`: a stand-in for another tool's Python client put first on the trial's PYTHONPATH,
// so that a program written for that tool runs unmodified (shims/ in the source tree).
enum class TrialShim { kNone, kNni, kWandb, kDetermined };
const char* TrialShimName(TrialShim shim);  // "none", "nni", "wandb", "determined"

struct TrialSpec {
  std::string command;  // with {param} placeholders; run by /bin/sh -c
  std::string workdir;  // absolute, or empty for the directory `hyperpack run` starts in
  std::vector<std::pair<std::string, std::string>> env;  // values may hold placeholders
  std::optional<double> timeout_s;
  // Where the runner can (the local one), a `hyperpack-trainer ...` command of plain words that
  // runs as one process is served by a warm hyperpack-trainer: one process per slot runs trial
  // after trial with libtorch and the data loaded once (hyperpack/warm.h). Other commands are
  // unaffected.
  bool warm = true;
  MetricsSource metrics_from = MetricsSource::kStdout;  // `trial.metrics_from`
  // `trial.metrics_path`, for tensorboard and file: a template ({trial_dir}, {trial}, params),
  // relative to the trial's working directory.
  std::string metrics_path;
  TrialShim shim = TrialShim::kNone;  // `trial.shim`
};

struct TunerSpec {
  tuner::TunerAlgorithm algorithm = tuner::TunerAlgorithm::kGp;
  std::optional<uint64_t> seed;  // absent: chosen when the study is created, then stored
  int initial_trials = 0;        // gp: Sobol trials before the model; 0: max(5, dims + 1)
  tuner::Acquisition acquisition = tuner::Acquisition::kEi;  // gp
  std::string warm_start;  // gp: a study whose completed trials seed the model
  // gp: weigh expected improvement by predicted cost (tuner.h, EI-cool). Absent: on when the
  // study declares resources (then a trial's cost is what it holds x how long), off otherwise.
  std::optional<bool> cost_aware;
  // gp: the share of proposals after the initial design made by the Sobol sequence instead of
  // the model (TunerOptions::random_fraction). Absent: kPrunedRandomFraction with a pruner, 0
  // without.
  std::optional<double> random_fraction;
  // gp: proposals drawn until this many trials have completed at the full resource
  // (TunerOptions::initial_full_trials). Absent: kPrunedInitialFullPerDim per dimension of the
  // encoded space with a pruner, 0 without.
  std::optional<int> initial_full_trials;
};

// The default random_fraction of a study with a pruner: on the learning-curve tables half of the
// proposals drawn lowered the final regret of every pruner's GP study (docs/BENCHMARKS.md).
inline constexpr double kPrunedRandomFraction = 0.5;
// The default initial_full_trials of a study with a pruner, per dimension: on the learning-curve
// tables and the synthetic curves, two per dimension drawn before the model proposes reached a
// good configuration as soon as draws alone and ended lower (docs/BENCHMARKS.md).
inline constexpr int kPrunedInitialFullPerDim = 2;

struct BudgetSpec {
  int max_trials = 100;
  int max_parallel = 1;
  int max_failed = 0;    // 0: the default, max(5, max_trials / 4), filled in by the parser
  int max_attempts = 3;  // runs of one configuration whose node was lost, before it fails
  std::optional<double> time_limit_s;
  // Cost budgets: no trial starts once the trials' GPU time (trials that hold GPUs), or their CPU
  // slots' time (trials that hold none), reaches this many hours; running trials finish.
  std::optional<double> gpu_hours;
  std::optional<double> core_hours;
  // The last `finalists` trials of max_trials (or of a time_limit, started when what is left of it
  // is about the longest of their runs) train the best distinct completed configurations once
  // more, new trials the pruner never stops; the study's best is then the re-run configuration
  // with the best mean of its runs. 0: none. One objective; trials the runner starts.
  int finalists = 0;
  // Intensification: once 8 runs have completed, each configuration whose single run ranks among
  // the best `rerun_top` is trained once more as soon as a slot frees (before new proposals; not
  // where the run would end past time_limit), a new trial the pruner never stops; the study's best
  // is then the configuration a model of every completed run recommends (tuner/recommend.h). 0:
  // none. One objective; trials the runner starts; not with finalists.
  int rerun_top = 0;
};

// `queue: {order: sjf, aging: 1, max_wait: 2h}`: the order of the trials waiting for room
// (scheduler/placement.h).
struct QueueSpec {
  // Absent: shortest predicted run time first where the study declares resources (the tuner then
  // predicts run times), arrival order otherwise.
  std::optional<scheduler::Order> order;
  double aging = 1;  // sjf: seconds of predicted run time forgiven per second waited
  // sjf: a trial that waited this long goes to the head; 0: never. Absent: 6 times the typical
  // predicted run time (QueueOptionsFor).
  std::optional<double> max_wait_s;
};

// What a report's progress is: the metric line's `epoch` or `step` (or, where the line has none,
// the count of objective reports so far).
enum class PrunerResource { kEpoch, kStep };
const char* ResourceName(PrunerResource resource);  // "epoch", "step"

// Early stopping (tuner/pruner.h).
struct PrunerSpec {
  tuner::PrunerAlgorithm algorithm = tuner::PrunerAlgorithm::kNone;
  PrunerResource resource = PrunerResource::kEpoch;
  double min_resource = 1;
  double max_resource = 0;  // asha, hyperband: required (a full trial's epochs or steps)
  double reduction_factor = 3;
  tuner::PrunerMode mode = tuner::PrunerMode::kStop;  // asha, hyperband
  double warmup_steps = 0;                            // median
  int startup_trials = 5;                             // median, forecast
  double probability = 0.05;                          // forecast
  // promote: a trial promoted at the rung it has just reached goes on in the same process where
  // the runner can tell it so (HYPERPACK_CONTROL_FD); false: it is always restarted.
  bool in_place = true;
};

// What one trial holds. `gpus`: a whole number of GPUs (a gang of that many ranks), or a fraction
// below 1 (a share of one GPU, packed with others). `gpu_memory`: what a trial needs of one GPU's
// memory, MiB = the expression's value x gpu_memory_unit_mb (`2GiB`, `1500`, `"{batch} * 8 MiB"`);
// the trial shares a GPU with others while their memory fits.
struct ResourceSpec {
  std::optional<Expression> gpus;
  std::optional<Expression> cpus;
  std::optional<Expression> gpu_memory;
  double gpu_memory_unit_mb = 1;
  // `gpu_memory: auto`: learnt from the trials' peak_gpu_mb; a whole GPU until one reports it.
  bool gpu_memory_auto = false;
  bool SharesGpu() const;  // gpu_memory given (or auto), or gpus a constant fraction
};

// Where a key was written, for errors found after parsing (Slurm refusing a partition).
struct SourcePos {
  std::string file;  // the study file, or "--slurm" for the command-line flag
  int line = 0;      // 1-based; 0: unknown
  int column = 0;
  std::string key;  // dotted path: "cluster.slurm.partition"
};

// `cluster: {slurm: {...}}`: each trial runs as one Slurm job (scheduler/slurm/). Absent: the
// trials run on this machine (or on `hyperpack serve`'s agents).
struct SlurmSpec {
  std::string partition;               // --partition; empty: the cluster's default
  std::string account;                 // --account
  std::string qos;                     // --qos
  std::string constraint;              // --constraint
  std::optional<double> time_limit_s;  // --time, whole minutes rounded up; "2h", "90m", "1:30:00"
  std::string mem;        // --mem (per node, as Slurm writes it: "16G"); empty: not asked
  int cpus_per_task = 0;  // --cpus-per-task for a GPU trial's ranks; 0: not asked
  int gpus_per_node =
      0;              // how many GPUs a node has: a gang wider than this spans nodes; 0: one node
  bool gres = false;  // ask --gres=gpu:N instead of --gpus-per-node=N (older clusters)
  // Slurm's shard gres: how many shards each GPU has in the cluster's gres.conf. A trial with a
  // share of a GPU (resources.gpu_memory, or gpus below 1) asks --gres=shard:K, its part of them;
  // 0: not configured, and such a study is refused.
  int gpu_shards = 0;
  // Each GPU's memory on the partition (MiB), to turn resources.gpu_memory into shards; 0: not
  // given, and a study with gpu_memory is refused.
  int64_t gpu_memory_mb = 0;
  std::string signal = "USR1@90";       // --signal: the warning before a time limit or a preemption
  std::vector<std::string> extra_args;  // appended to sbatch's arguments as given
  double poll_s = 2;  // one squeue per this many seconds, for all of the study's jobs
  double pending_limit_s =
      300;  // a job pending this long for a reason that cannot clear is cancelled
  // Where each key was written (key: "partition", "account", ...), to point Slurm's refusals at it.
  std::vector<SourcePos> positions;
  const SourcePos* Position(const std::string& key) const;
};

struct ClusterSpec {
  std::optional<SlurmSpec> slurm;
};

// The part a parameter plays in data-parallel training, for `hyperpack export` to a launcher's
// configuration (DeepSpeed, torchrun, Hugging Face, Lightning). Roles not named in the study file
// are inferred from common parameter names.
enum class TrainingRole {
  kLearningRate,
  kMicroBatch,    // per device per micro-step
  kGlobalBatch,   // micro batch x accumulation x data-parallel degree
  kDataParallel,  // ranks
  kAccumulation,  // micro-steps per optimizer step
  kPrecision,     // fp32 | fp16 | bf16 (and common spellings)
  kWarmupRatio,   // a fraction of the steps
  kWarmupSteps,
  kWeightDecay,
  kMomentum,
  kOptimizer,  // sgd | adam | adamw
};
inline constexpr TrainingRole kAllTrainingRoles[] = {
    TrainingRole::kLearningRate, TrainingRole::kMicroBatch,   TrainingRole::kGlobalBatch,
    TrainingRole::kDataParallel, TrainingRole::kAccumulation, TrainingRole::kPrecision,
    TrainingRole::kWarmupRatio,  TrainingRole::kWarmupSteps,  TrainingRole::kWeightDecay,
    TrainingRole::kMomentum,     TrainingRole::kOptimizer};
const char* TrainingRoleName(TrainingRole role);  // "learning_rate", "micro_batch", ...

// Where a role's value comes from: a parameter of the search space, or a value fixed in the study
// file (a data-parallel degree the command sets, say).
struct RoleSource {
  std::string param;  // empty when fixed
  std::optional<Value> fixed;
};

// `export: {roles: {micro_batch: mbs, data_parallel: 4}}`: the roles that inference would not find.
// A value that names a parameter is that parameter; any other is fixed (a number, or for precision
// fp32|fp16|bf16, for optimizer sgd|adam|adamw, in the spellings training.h reads).
struct ExportSpec {
  std::map<TrainingRole, RoleSource> roles;
};

struct StudySpec {
  std::string name;
  std::string description;
  // Its weight in the fair share of a server that runs several studies at once (fair_share.h):
  // a study of priority 2 is given twice the GPUs (or CPU slots) of one of priority 1 when both
  // want more than their share. 1 unless the file says `priority:`.
  double priority = 1;
  std::string source_path;  // the file it came from, as given
  std::string source_text;  // verbatim; stored with the study
  Objective objective;      // `objective:`, or the first of `objectives:`
  // Every objective, `objective` first: that one alone, or the 2 to 4 of `objectives:`.
  std::vector<Objective> objectives;
  std::vector<Constraint> constraints;
  bool MultiObjective() const { return objectives.size() > 1; }
  // Whether trials keep each objective's and constraint's value (TrialRecord::values).
  bool KeepsValues() const { return MultiObjective() || !constraints.empty(); }
  // Whether `metric` is one of the objectives or constraints whose values trials keep.
  bool KeepsMetric(const std::string& metric) const;
  // `objective.regex` first (named objective.metric), then `trial.metrics` in the file's order.
  // Empty: the trial reports as the metrics protocol says (JSON or name=value lines).
  std::vector<MetricPattern> metric_patterns;
  SearchSpace space;
  TrialSpec trial;
  // `ask_timeout`: a trial handed out by ask that is neither told nor sent a heartbeat for this
  // long is failed, and its configuration offered again (ask_tell.h). Absent: asked trials wait
  // for their tell however long it takes.
  std::optional<double> ask_timeout_s;
  TunerSpec tuner;
  BudgetSpec budget;
  QueueSpec queue;
  ResourceSpec resources;
  PrunerSpec pruner;
  ClusterSpec cluster;
  ExportSpec exports;
};

// One problem in a study file. line and column are 1-based; 0 when the problem has no position
// (e.g. the file cannot be read).
struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key;  // dotted path: "search_space.lr.low"
  std::string message;

  std::string ToString() const;
};

struct ParseOutcome {
  std::optional<StudySpec> spec;  // set only when errors is empty
  std::vector<Diagnostic> errors;
  // Problems that do not stop the study but are likely mistakes, e.g. an int range whose bounds and
  // step leave a single value. Each message starts with "warning: "; found with or without errors.
  std::vector<Diagnostic> warnings;

  // The errors as one message, a line each.
  std::string ErrorText() const;
  // The warnings as one message, a line each; empty when there are none.
  std::string WarningText() const;
};

// Parses YAML text; `filename` is used in diagnostics and to resolve a relative `trial.workdir`.
ParseOutcome ParseStudy(const std::string& text, const std::string& filename);
// Reads and parses a file.
ParseOutcome LoadStudyFile(const std::string& path);

// A study file may leave out `trial:` when another program evaluates its trials (hyperpack create,
// ask and tell). OK when `spec` has a command to run; kInvalidArgument saying so otherwise.
Status CheckRunnable(const StudySpec& spec);

// What a tuner learns of a trial's values by metric (TrialRecord::values) in a study that keeps
// them: with several objectives, each one's value in order into outcome->values (NaN where the
// trial has none); each constraint's violation into outcome->violations (+inf where its metric is
// missing: broken). Both are left empty for a study that keeps no values.
void FillOutcomeValues(const StudySpec& spec, const std::map<std::string, double>& by_metric,
                       tuner::TrialOutcome* outcome);

// Whether every constraint of `spec` holds for a trial's values by metric; a constraint whose
// metric is missing or not finite does not.
bool MeetsConstraints(const StudySpec& spec, const std::map<std::string, double>& values);

// A parsed study for people, as `hyperpack validate` prints it: name, objectives, constraints,
// tuner, budget, command, timeout and resources, then the search space, a line a parameter. Ends
// with a newline.
std::string DescribeStudy(const StudySpec& spec);

// `hyperpack run --slurm '{partition: gpu, time_limit: 2h}'`: the same keys as the study file's
// `cluster.slurm`, for a study file that has none. Errors name the flag and the column.
Result<SlurmSpec> ParseSlurmFlag(const std::string& text);

// Names allowed in command and env templates besides the parameters.
const std::vector<std::string>& BuiltinPlaceholders();

}  // namespace hyperpack::study
