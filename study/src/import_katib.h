// The Katib Experiment importer's class and what its two files share: import_katib.cc reads the
// experiment (objective, parameters, algorithm, budget, early stopping), import_katib_trial.cc the
// trial template (its job, containers and metadata) and the metrics collector. Internal to
// hyperpack::study.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hyperpack/study/import.h"
#include "import_common.h"

namespace hyperpack::study::internal::katib {

// feasibleSpace.distribution: how Katib samples between min and max.
enum class Spread { kUniform, kLogUniform, kNormal, kLogNormal };

// metricsCollectorSpec.collector.kind: where Katib reads a trial's metrics.
enum class Collector { kStdOut, kFile, kTensorFlowEvent, kElsewhere };

// A trial job's kind: where its command is (a batch Job's own template, a training job's
// replicas, a TrainJob's trainer), under which key, and which role's command is the trial's, in
// order of preference.
struct JobKind {
  enum class Layout { kJob, kReplicas, kTrainer } layout;
  const char* replicas;
  const char* roles[3];
};

// `n[key][more]...`, or an undefined node where a step is missing or not a mapping (yaml-cpp throws
// on a missing node's type).
YAML::Node Get(const YAML::Node& n, const char* key);
template <typename... More>
YAML::Node Get(const YAML::Node& n, const char* key, const char* next, More... more) {
  return Get(Get(n, key), next, more...);
}

// A metric's name as hyperpack's may be: letters, digits, '_', '.', '/' and '-'; others are '_'.
std::string SafeMetric(const std::string& name);

// A scalar's text, or "".
std::string Word(const YAML::Node& n);

// Whether `key` is one of `list`.
bool Among(const std::vector<std::string>& list, const std::string& key);

class KatibImporter : public Importer {
 public:
  KatibImporter(std::string filename, const ImportOptions& options)
      : Importer(std::move(filename), options) {}

 private:
  void Convert(const YAML::Node& root) override;

  void Objective(const YAML::Node& obj, const YAML::Node& spec);

  // The objective metric's hyperpack name: as Katib's, or with spaces made '_' ("valid_1 auc", as
  // LightGBM prints it), which only a metricsFormat pattern can read; nullopt after an error.
  std::optional<std::string> ObjectiveName(const YAML::Node& metric, const YAML::Node& spec);

  void Parameters(const YAML::Node& params);

  // A parameter's hyperpack form, or "" after an error.
  std::string Parameter(const std::string& key, const YAML::Node& p);

  // feasibleSpace.distribution as uniform or log-uniform (the normal ones searched as those, with
  // a warning), or nullopt after an error.
  std::optional<Spread> RangeSpread(const std::string& key, const YAML::Node& space);

  // An int range's form: whole bounds, and its step where hyperpack can carry one; "" after an
  // error.
  std::string IntRange(const std::string& key, const YAML::Node& space, bool log);

  // discrete (numbers) and categorical (text): feasibleSpace.list.
  std::string List(const std::string& key, const std::string& t, const YAML::Node& space,
                   bool numbers);

  void TrialTemplate(const YAML::Node& tt, const YAML::Node& spec);

  // ${trialParameters.NAME} -> {the hyperpack parameter it references}, or the trial's metadata.
  std::map<std::string, std::string> Placeholders(const YAML::Node& tt,
                                                  const YAML::Node& trial_spec);

  // The containers of the replica whose command is the trial's (`where` names their path): a Job's
  // own, a training job's first role that is there (Master before Worker), or a TrainJob's
  // trainer. The other roles are warned of: hyperpack runs one process (or resources' gang).
  bool Replicas(const YAML::Node& trial_spec, const JobKind& job, YAML::Node* containers,
                std::string* where);

  // A TrainJob's trainer: its command and args are the container's.
  bool Trainer(const YAML::Node& spec, YAML::Node* containers, std::string* where);

  // Katib's metadata substitution in a trialParameter's reference, as hyperpack's placeholder or
  // the literal value the trialSpec gives; nullopt when `ref` is not one.
  std::optional<std::string> Metadata(const std::string& ref, const YAML::Node& trial_spec) const;

  // `word` with ${trialParameters.NAME} replaced and literal braces doubled; nullopt after an
  // error.
  std::optional<std::string> Substitute(const YAML::Node& at, const std::string& word,
                                        const std::map<std::string, std::string>& placeholders);

  void Container(const YAML::Node& c, const std::map<std::string, std::string>& placeholders);

  // The container's command and args as the trial's command; false after an error.
  bool ContainerCommand(const YAML::Node& c,
                        const std::map<std::string, std::string>& placeholders);

  // The rest of the trial section: the container's env, the collector's lines, and warnings.
  void ContainerRest(const YAML::Node& c, const std::map<std::string, std::string>& placeholders);

  // Katib's metrics collector as lines of the trial section (trial_lines_). StdOut, the default,
  // reads stdout and stderr both; its default filter finds name=value anywhere in a line, as
  // hyperpack's metric lines do; a metricsFormat filter becomes a pattern per metric.
  void MetricsCollector(const YAML::Node& mc);

  // The File and TensorFlowEvent collectors: the path hyperpack follows (metrics_path).
  bool FollowedPath(const YAML::Node& path, Collector collector);

  // A File collector's JSON lines: Katib's values may be strings ("loss": "0.22"), which a
  // pattern per metric reads as numbers too.
  void JsonMetrics();

  // metricsFormat: Katib tries each filter (two groups, the name and the value) on every line.
  // hyperpack's pattern for a metric is the first filter with the name written in.
  void MetricsFormat(const YAML::Node& formats);

  void Algorithm(const YAML::Node& alg, const YAML::Node& spec);

  void Budget(const YAML::Node& spec);

  void EarlyStopping(const YAML::Node& es);

  std::map<std::string, std::string> names_;  // Katib's parameter name -> hyperpack's
  std::vector<std::string> metric_names_;     // the objective's, then additionalMetricNames
  std::vector<std::string> trial_lines_;      // the collector's lines of the trial section
  std::string namespace_;                     // metadata.namespace
  std::string kind_name_;                     // the trial job's kind
};

}  // namespace hyperpack::study::internal::katib
