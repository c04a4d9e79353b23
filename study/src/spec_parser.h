// The study file's parser (spec.h's ParseStudy, ParseSlurmFlag): one Parser over the file's
// sections, each section in a file of its own, the way the study controller is split:
//   spec_reader.cc     the YAML underneath: loading, mappings and their keys, typed scalars,
//                      diagnostics with file, line and column;
//   spec.cc            the root and the names of the spec's enums;
//   spec_space.cc      search_space: ranges, values, conditions;
//   spec_trial.cc      objective, trial (command, placeholders, shim) and metrics;
//   spec_search.cc     tuner, queue, pruner and budget;
//   spec_resources.cc  resources and export;
//   spec_cluster.cc    cluster and Slurm.
// Private to study/. Thread-safety: a Parser is used by one thread, for one text.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

bool IsIdentifier(const std::string& s);

// A metric's name as a name=value line or a JSON member may carry it (val/loss, Validation-acc).
bool IsMetricName(const std::string& s);

// A parameter's name as other tools' users write them: letters, digits, '_', '.' and '-', not
// starting with '.' or '-' (optimizer.config.learning_rate from W&B with Hydra, NNI's 0_1).
bool IsParamName(const std::string& s);

// A key of a YAML mapping together with its value; both keep their positions.
struct Field {
  YAML::Node key;
  YAML::Node value;
};

// A size's unit at the end of `text` ("2GiB", "{batch} * 16 MiB"), in MiB, and the text before
// it; a plain number is MiB.
std::pair<std::string, double> SplitSizeUnit(const std::string& text);

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  ParseOutcome Parse(const std::string& text);

  // Text that holds only what `cluster.slurm` holds, e.g. `{partition: gpu, time_limit: 2h}`.
  // Diagnostics name the bare keys ("time_limit"); the positions are keyed as in a study file.
  std::vector<Diagnostic> ParseSlurmOnly(const std::string& text, SlurmSpec* slurm);

 private:
  // Loads YAML text into `root`; false, with the error recorded, when it is not YAML.
  bool Load(const std::string& text, YAML::Node* root);

  // ---- diagnostics ------------------------------------------------------------------------
  template <typename... Args>
  void Error(const YAML::Node& at, const std::string& key, const Args&... args) {
    errors_.push_back(At(at, key, StrCat(args...)));
  }

  // Valid, but probably not what the author meant.
  template <typename... Args>
  void Warning(const YAML::Node& at, const std::string& key, const Args&... args) {
    warnings_.push_back(At(at, key, StrCat("warning: ", args...)));
  }

  // A diagnostic at `at`, or where the last mapping began when `at` has no position.
  Diagnostic At(const YAML::Node& at, const std::string& key, std::string message) const;

  static std::string Describe(const YAML::Node& node);

  static std::string Path(const std::string& parent, const std::string& key);

  // The fields of a mapping; reports unknown and duplicate keys. `allowed` lists the valid keys;
  // with `list_allowed` an unknown key's error lists them even when it has a likely correction.
  std::map<std::string, Field> Fields(const YAML::Node& map, const std::string& path,
                                      const std::vector<std::string>& allowed,
                                      bool list_allowed = false);

  // The fields of a section's value. An empty value (`trial:` and nothing after it) is reported at
  // its key: yaml-cpp marks an empty node where the next token starts, on a later line.
  std::map<std::string, Field> Fields(const Field& section, const std::string& path,
                                      const std::vector<std::string>& allowed,
                                      bool list_allowed = false);

  static const Field* Get(const std::map<std::string, Field>& fields, const std::string& name);

  // `owner` is the key whose mapping lacks `key` (the root mapping itself at the top level): a
  // block mapping's own position is its first entry, a line that is not the one at fault.
  void Missing(const YAML::Node& owner, const std::string& path, const std::string& key,
               const std::string& expected);

  // ---- typed scalars ----------------------------------------------------------------------
  std::optional<std::string> String(const Field& f, const std::string& path);

  std::optional<double> Number(const Field& f, const std::string& path);

  std::optional<int64_t> Integer(const Field& f, const std::string& path);

  std::optional<bool> Bool(const Field& f, const std::string& path);

  std::optional<double> Duration(const Field& f, const std::string& path);

  // A scalar as a parameter value: quoted scalars are strings; plain ones are booleans, integers
  // or floats when they read as such, strings otherwise.
  static Value InferValue(const std::string& text, bool quoted);

  // A list or mapping as JSON (keys sorted), its scalars typed as InferValue types them.
  static nlohmann::json YamlToJson(const YAML::Node& node);

  // A structured parameter's value: the JSON text of `node`.
  // Bytes that are not UTF-8 (the file is untrusted) become U+FFFD rather than an exception.
  static Value StructuredValue(const YAML::Node& node);

  std::optional<Value> ScalarValue(const YAML::Node& node, const YAML::Node& key,
                                   const std::string& path);

  // ---- sections ---------------------------------------------------------------------------
  // The study's name, description and priority (the root's `fields`).
  void ParseHeader(const YAML::Node& root, const std::map<std::string, Field>& fields,
                   StudySpec* spec);

  void ParseRoot(const YAML::Node& root, StudySpec* spec);

  // `objective:` or `objectives:`, and `constraints:` (the root's `fields`).
  void ParseGoals(const YAML::Node& root, const std::map<std::string, Field>& fields,
                  StudySpec* spec);

  // An objective's `strategy:`: last, min, max, best, last-N-avg.
  void ParseStrategy(const Field& f, const std::string& path, Objective* objective);
  // `objective:` (path "objective"), or one of `objectives:` (path "objectives[K]").
  void ParseObjective(const Field& field, const std::string& path, Objective* objective,
                      std::vector<MetricPattern>* patterns);
  void ParseObjectives(const Field& field, std::vector<Objective>* objectives,
                       std::vector<MetricPattern>* patterns);
  void ParseConstraints(const Field& field, std::vector<Constraint>* constraints);

  // A metric's pattern: a regular expression with exactly one capture group, checked with the
  // library and the syntax the scheduler matches with (Boost.Regex, Perl).
  std::optional<std::string> MetricRegex(const Field& f, const std::string& path);

  void ParseSpace(const Field& field, SearchSpace* space);

  std::optional<ParamSpec> ParseParam(const std::string& name, const Field& field,
                                      const std::vector<ParamSpec>& earlier);

  // A `type: fixed` parameter's `value`: a scalar, or a list or mapping kept as JSON.
  void ParseFixedValue(const Field& field, const std::string& path,
                       const std::map<std::string, Field>& fields, ParamSpec* p);

  void ParseRange(const YAML::Node& owner, const std::string& path,
                  const std::map<std::string, Field>& fields, ParamSpec* p);

  // An int range that holds a single value is valid (the study runs) but rarely meant: the
  // parameter is never tuned. A float range cannot collapse (high must be > low) and has no step.
  void WarnIfOneValue(const std::string& path, const Field& high, const Field* step,
                      const ParamSpec& p);

  bool ParseValues(const Field& field, const std::string& path, ParamSpec* p);

  void ParseCondition(const Field& f, const std::string& path,
                      const std::vector<ParamSpec>& earlier, ParamSpec* p);
  // The values a condition on `parent` names after its operator (`rhs`: one value, or a list
  // for `in`), each one of the parent's; false after an error.
  bool ParseConditionValues(const Field& f, const std::string& path, const ParamSpec& parent,
                            const std::string& rhs, Condition* c);

  void CheckPlaceholders(const YAML::Node& node, const std::string& path, const std::string& text,
                         const SearchSpace& space);

  void ParseTrial(const Field& field, const SearchSpace& space, TrialSpec* trial,
                  std::vector<MetricPattern>* patterns);

  // `trial.metrics_path`: given exactly when metrics come from files.
  void ParseMetricsPath(const Field& trial_field, const std::map<std::string, Field>& fields,
                        const SearchSpace& space, TrialSpec* trial);

  // `trial.metrics: {NAME: PATTERN, ...}`: metrics read from lines the trial prints its own way.
  void ParseMetrics(const Field& field, std::vector<MetricPattern>* patterns);

  // A text field that must be one of `allowed`; left as it was when absent or wrong.
  // One of `choices`, by the name `name_of` gives it.
  template <typename E>
  void OneOf(const std::map<std::string, Field>& fields, const char* section, const char* key,
             std::initializer_list<E> choices, const char* (*name_of)(E), E* out) {
    const Field* f = Get(fields, key);
    if (!f) return;
    std::string path = Path(section, key);
    auto v = String(*f, path);
    if (!v) return;
    std::vector<std::string> allowed;
    for (E choice : choices) {
      if (*v == name_of(choice)) {
        *out = choice;
        return;
      }
      allowed.push_back(name_of(choice));
    }
    auto guess = DidYouMean(*v, allowed);
    Error(f->value, path, "'", *v, "' is not one of ", Join(allowed, ", "),
          guess ? "; did you mean '" + *guess + "'?" : std::string(""));
  }

  void ParseTuner(const Field& field, TunerSpec* tuner);

  void ParseQueue(const Field& field, QueueSpec* queue);

  void ParsePruner(const Field& field, PrunerSpec* pruner);
  // asha, hyperband and forecast judge at rungs: max_resource is required, above min_resource.
  void CheckPrunerRungs(const Field& field, const std::map<std::string, Field>& fields,
                        const Field* max, const PrunerSpec& spec);
  // mode: promote with an algorithm that never pauses (forecast, median, none) is an error.
  void CheckPrunerMode(const std::map<std::string, Field>& fields, const PrunerSpec& pruner);
  // A field the chosen algorithm never reads (probability with asha, warmup_steps with forecast):
  // a warning that names the algorithms that do.
  void WarnUnreadPrunerFields(const std::map<std::string, Field>& fields,
                              tuner::PrunerAlgorithm algorithm);

  void ParseBudget(const Field& field, BudgetSpec* budget);
  // budget.finalists: below max_trials, one objective, trials the runner starts.
  void ParseFinalists(const Field& field, const StudySpec& spec, BudgetSpec* budget);
  void ParseRerunTop(const Field& field, const StudySpec& spec, BudgetSpec* budget);
  // budget.finalists and rerun_top re-run configurations by their value: one objective, trials the
  // runner starts. False, with the error, where they cannot work.
  bool RerunsCanWork(const Field& f, const StudySpec& spec, const char* path);
  // A re-run is another draw only where the training's seed comes from the trial: warns where
  // the command is hyperpack-trainer with a seed that does not (re-runs would repeat).
  void WarnOfAFixedSeed(const Field& f, const StudySpec& spec, const char* path);

  void ParseResources(const Field& field, const SearchSpace& space, ResourceSpec* resources);
  void CheckGpuShare(const std::map<std::string, Field>& fields, const ResourceSpec& resources);

  // `export: {roles: {ROLE: PARAM or VALUE}}`.
  void ParseExport(const Field& field, const SearchSpace& space, ExportSpec* exports);

  // Empty when `value` is a valid fixed value of `role`; else what such a value would be.
  static std::string FixedRoleProblem(TrainingRole role, const Value& value);

  // `cluster:`: where the trials run; absent, on this machine or `hyperpack serve`'s agents.
  void ParseCluster(const Field& field, ClusterSpec* cluster);

  // The keys of `cluster.slurm` (and of `--slurm`, where `path` is empty). Each key present gets a
  // SourcePos at its value, keyed "cluster.slurm.NAME" whatever `path` is.
  void ParseSlurm(const Field& field, const std::string& path, SlurmSpec* slurm);
  // cluster.slurm's poll_interval and pending_limit: how often and how long to wait on Slurm.
  void ParseSlurmWaits(const std::map<std::string, Field>& fields, const std::string& path,
                       SlurmSpec* slurm);

  // An amount of memory as Slurm writes it: digits, then K, M, G or T (megabytes without one).
  // Checked by hand, not with std::regex, whose recursion a long value would overflow.
  std::optional<std::string> Memory(const Field& f, const std::string& key);

  // cluster.slurm's gpu_shards and gpu_memory: how the cluster shares a GPU (Slurm's shard gres).
  void ParseSlurmShards(const std::map<std::string, Field>& fields, const std::string& path,
                        SlurmSpec* slurm);

  // sbatch options, each one item that starts with '-'.
  std::vector<std::string> ExtraArgs(const Field& f, const std::string& key);

  // A Slurm time limit in seconds: a duration as elsewhere in the file (2h, 90m, 1h30m, 1d) or
  // one as Slurm writes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. As to Slurm, a bare
  // number is minutes: "90" is an hour and a half.
  std::optional<double> TimeLimit(const Field& f, const std::string& path);

  // sbatch --signal: [B:]NAME@SECONDS (USR1@90, B:SIGUSR1@120); "", false or none for no signal.
  std::optional<std::string> Signal(const Field& f, const std::string& path);

  // Where `node` was written, for errors found after parsing.
  SourcePos Position(const YAML::Node& node, std::string key) const;

  std::string file_;
  std::vector<Diagnostic> errors_;
  std::vector<Diagnostic> warnings_;
  // Every parameter name declared so far, including those dropped from the space for their own
  // errors: a reference to one of those is not reported again as an unknown parameter.
  std::set<std::string> declared_;
  YAML::Mark last_mark_ = YAML::Mark::null_mark();
};

}  // namespace hyperpack::study::internal
