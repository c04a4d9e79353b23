#include "hyperpack/study/spec.h"

#include <filesystem>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

#include "spec_parser.h"

namespace hyperpack::study {

const char* ResourceName(PrunerResource resource) {
  return resource == PrunerResource::kStep ? "step" : "epoch";
}

const char* MetricsSourceName(MetricsSource source) {
  switch (source) {
    case MetricsSource::kOutput:
      return "output";
    case MetricsSource::kTensorboard:
      return "tensorboard";
    case MetricsSource::kFile:
      return "file";
    case MetricsSource::kStdout:
      break;
  }
  return "stdout";
}

const char* TrialShimName(TrialShim shim) {
  switch (shim) {
    case TrialShim::kNni:
      return "nni";
    case TrialShim::kWandb:
      return "wandb";
    case TrialShim::kDetermined:
      return "determined";
    case TrialShim::kNone:
      break;
  }
  return "none";
}

const char* TrainingRoleName(TrainingRole role) {
  switch (role) {
    case TrainingRole::kLearningRate:
      return "learning_rate";
    case TrainingRole::kMicroBatch:
      return "micro_batch";
    case TrainingRole::kGlobalBatch:
      return "global_batch";
    case TrainingRole::kDataParallel:
      return "data_parallel";
    case TrainingRole::kAccumulation:
      return "accumulation";
    case TrainingRole::kPrecision:
      return "precision";
    case TrainingRole::kWarmupRatio:
      return "warmup_ratio";
    case TrainingRole::kWarmupSteps:
      return "warmup_steps";
    case TrainingRole::kWeightDecay:
      return "weight_decay";
    case TrainingRole::kMomentum:
      return "momentum";
    case TrainingRole::kOptimizer:
      return "optimizer";
  }
  return "?";
}

std::string Objective::StrategyName() const {
  switch (strategy) {
    case ObjectiveStrategy::kLastMean:
      return StrCat("last-", window, "-avg");
    case ObjectiveStrategy::kLast:
      return "last";
    case ObjectiveStrategy::kMin:
      return "min";
    case ObjectiveStrategy::kMax:
      return "max";
    case ObjectiveStrategy::kBest:
      return "best";
  }
  return "?";
}

std::string Diagnostic::ToString() const {
  std::ostringstream out;
  out << file;
  if (line > 0) out << ":" << line << ":" << column;
  out << ": ";
  if (!key.empty()) out << key << ": ";
  out << message;
  return out.str();
}

std::string ParseOutcome::ErrorText() const {
  std::vector<std::string> lines;
  for (const Diagnostic& d : errors) lines.push_back(d.ToString());
  return Join(lines, "\n");
}

std::string ParseOutcome::WarningText() const {
  std::vector<std::string> lines;
  for (const Diagnostic& d : warnings) lines.push_back(d.ToString());
  return Join(lines, "\n");
}

const SourcePos* SlurmSpec::Position(const std::string& key) const {
  for (const SourcePos& p : positions) {
    if (p.key == key || p.key == "cluster.slurm." + key) return &p;
  }
  for (const SourcePos& p : positions) {
    if (p.key == "cluster.slurm") return &p;
  }
  return nullptr;
}

const std::vector<std::string>& BuiltinPlaceholders() {
  static const std::vector<std::string> kBuiltins = {"trial", "study", "params_file", "trial_dir"};
  return kBuiltins;
}

namespace internal {

ParseOutcome Parser::Parse(const std::string& text) {
  ParseOutcome out;
  YAML::Node root;
  if (!Load(text, &root)) {
    out.errors = std::move(errors_);
    return out;
  }
  StudySpec spec;
  spec.source_path = file_;
  spec.source_text = text;
  try {
    ParseRoot(root, &spec);
  } catch (const YAML::Exception& e) {
    // The checks above look at every node's type first; this is a last line of defence.
    errors_.push_back({file_, e.mark.line + 1, e.mark.column + 1, "", e.what()});
  }
  out.errors = std::move(errors_);
  out.warnings = std::move(warnings_);
  if (out.errors.empty()) out.spec = std::move(spec);
  return out;
}

std::vector<Diagnostic> Parser::ParseSlurmOnly(const std::string& text, SlurmSpec* slurm) {
  YAML::Node root;
  if (!Load(text, &root)) return std::move(errors_);
  try {
    if (root.IsMap()) slurm->positions.push_back(Position(root, "cluster.slurm"));
    ParseSlurm(Field{root, root}, "", slurm);
  } catch (const YAML::Exception& e) {
    errors_.push_back({file_, e.mark.line + 1, e.mark.column + 1, "", e.what()});
  }
  return std::move(errors_);
}

void Parser::ParseHeader(const YAML::Node& root, const std::map<std::string, Field>& fields,
                         StudySpec* spec) {
  if (auto* f = Get(fields, "name")) {
    if (auto name = String(*f, "name")) {
      if (!IsToken(*name, {.others = ""}, {.others = "_.-"})) {
        Error(f->value, "name", "'", *name,
              "' is not a valid study name; use letters, digits, '_', '-' and '.'");
      }
      spec->name = *name;
    }
  } else {
    Missing(root, "", "name", "the study's name, e.g. name: fmnist-mlp");
  }
  if (auto* f = Get(fields, "description")) {
    if (auto d = String(*f, "description")) spec->description = *d;
  }

  if (auto* f = Get(fields, "priority")) {
    if (auto v = Number(*f, "priority")) {
      if (!std::isfinite(*v) || *v <= 0 || *v > 1000) {
        Error(f->value, "priority",
              "must be a number > 0 and <= 1000, the study's weight in a server's fair share "
              "(1 unless given; 2 gets twice the share of 1), got ",
              FormatDouble(*v));
      } else {
        spec->priority = *v;
      }
    }
  }
}

void Parser::ParseGoals(const YAML::Node& root, const std::map<std::string, Field>& fields,
                        StudySpec* spec) {
  const Field* one = Get(fields, "objective");
  const Field* several = Get(fields, "objectives");
  if (one && several) {
    Error(several->key, "objectives",
          "both objective and objectives are given; keep objective for one metric, objectives "
          "for 2 to 4");
  } else if (one) {
    ParseObjective(*one, "objective", &spec->objective, &spec->metric_patterns);
    spec->objectives = {spec->objective};
  } else if (several) {
    ParseObjectives(*several, &spec->objectives, &spec->metric_patterns);
    if (!spec->objectives.empty()) spec->objective = spec->objectives.front();
  } else {
    Missing(root, "", "objective", "{metric: NAME, direction: minimize|maximize}");
  }
  if (auto* f = Get(fields, "constraints")) ParseConstraints(*f, &spec->constraints);
}

void Parser::ParseRoot(const YAML::Node& root, StudySpec* spec) {
  if (!root.IsMap()) {
    Error(root, "", "a study file is a mapping with keys name, objective, search_space, trial");
    return;
  }
  static const std::vector<std::string> kKeys = {
      "name",    "description", "objective", "objectives", "constraints", "search_space",
      "trial",   "tuner",       "budget",    "queue",      "resources",   "pruner",
      "cluster", "export",      "priority",  "ask_timeout"};
  auto fields = Fields(root, "", kKeys);

  ParseHeader(root, fields, spec);

  ParseGoals(root, fields, spec);

  if (auto* f = Get(fields, "search_space")) {
    ParseSpace(*f, &spec->space);
  } else {
    Missing(root, "", "search_space", "a mapping of parameter names to their ranges");
  }

  // Without `trial:` the study is one whose trials another program evaluates (ask and tell).
  if (auto* f = Get(fields, "trial"))
    ParseTrial(*f, spec->space, &spec->trial, &spec->metric_patterns);

  if (auto* f = Get(fields, "ask_timeout")) spec->ask_timeout_s = Duration(*f, "ask_timeout");

  if (auto* f = Get(fields, "tuner")) ParseTuner(*f, &spec->tuner);
  if (auto* f = Get(fields, "budget")) {
    ParseBudget(*f, &spec->budget);
    ParseFinalists(*f, *spec, &spec->budget);
    ParseRerunTop(*f, *spec, &spec->budget);
  }
  if (spec->budget.max_failed == 0)
    spec->budget.max_failed = std::max(5, spec->budget.max_trials / 4);
  if (auto* f = Get(fields, "queue")) ParseQueue(*f, &spec->queue);
  if (auto* f = Get(fields, "resources")) ParseResources(*f, spec->space, &spec->resources);
  if (auto* f = Get(fields, "pruner")) {
    ParsePruner(*f, &spec->pruner);
    // The median and the forecast compare one value; asha's and hyperband's rungs rank by
    // non-dominated sorting.
    if (spec->MultiObjective() && (spec->pruner.algorithm == tuner::PrunerAlgorithm::kMedian ||
                                   spec->pruner.algorithm == tuner::PrunerAlgorithm::kForecast))
      Error(f->key, "pruner.algorithm", "the ", tuner::PrunerAlgorithmName(spec->pruner.algorithm),
            " pruner compares one value, and this study has several objectives; "
            "expected asha or hyperband (their rungs rank trials by non-dominated sorting) or "
            "none");
  }
  if (auto* f = Get(fields, "cluster")) ParseCluster(*f, &spec->cluster);
  if (auto* f = Get(fields, "export")) ParseExport(*f, spec->space, &spec->exports);
  if (auto* f = Get(fields, "resources"); f && spec->cluster.slurm) {
    // Slurm may refuse what a trial asks for: its errors point here.
    spec->cluster.slurm->positions.push_back(Position(f->key, "resources"));
  }
}

}  // namespace internal

using internal::Field;
using internal::Parser;

bool ResourceSpec::SharesGpu() const {
  if (gpu_memory || gpu_memory_auto) return true;
  if (!gpus || !gpus->references().empty()) return false;
  auto v = gpus->Evaluate({});
  return v.ok() && *v > 0 && *v < 1;
}

ParseOutcome ParseStudy(const std::string& text, const std::string& filename) {
  return Parser(filename).Parse(text);
}

Result<SlurmSpec> ParseSlurmFlag(const std::string& text) {
  // Without its braces the text would be a block mapping, where "a: b, c: d" is not valid.
  size_t start = text.find_first_not_of(" \t");
  bool wrapped = start == std::string::npos || text[start] != '{';
  SlurmSpec slurm;
  std::vector<Diagnostic> errors =
      Parser("--slurm").ParseSlurmOnly(wrapped ? "{" + text + "}" : text, &slurm);
  // Columns as in the text given, not in its wrapped copy.
  auto unwrap = [&](int line, int* column) {
    if (wrapped && line == 1) *column = std::max(1, *column - 1);
  };
  for (Diagnostic& d : errors) unwrap(d.line, &d.column);
  if (!errors.empty()) {
    std::vector<std::string> lines;
    for (const Diagnostic& d : errors) lines.push_back(d.ToString());
    return Status::Invalid(Join(lines, "\n"));
  }
  for (SourcePos& p : slurm.positions) unwrap(p.line, &p.column);
  return slurm;
}

std::string DescribeStudy(const StudySpec& s) {
  std::ostringstream out;
  out << "study       " << s.name << "\n";
  for (const Objective& o : s.objectives)
    out << "objective   " << DirectionName(o.direction) << " " << o.metric << " ("
        << o.StrategyName() << " reported value)\n";
  for (const Constraint& c : s.constraints)
    out << "constraint  " << c.metric << (c.bound == Constraint::Bound::kMax ? " <= " : " >= ")
        << FormatDouble(c.limit) << "\n";
  out << "tuner       " << tuner::TunerAlgorithmName(s.tuner.algorithm);
  if (s.tuner.seed) out << ", seed " << *s.tuner.seed;
  out << "\nbudget      " << s.budget.max_trials << " trials, " << s.budget.max_parallel
      << " at a time, stop after " << s.budget.max_failed << " failures";
  if (s.budget.time_limit_s) out << ", time limit " << *s.budget.time_limit_s << "s";
  if (s.budget.finalists > 0)
    out << ", the best " << s.budget.finalists << " trained again at the end";
  if (s.budget.rerun_top > 0)
    out << ", each configuration among the best " << s.budget.rerun_top
        << " trained again as it ranks, the best chosen by a model of all runs";
  out << "\ncommand     "
      << (s.trial.command.empty() ? "none: trials are asked for (hyperpack ask and tell)"
                                  : s.trial.command)
      << "\n";
  if (s.trial.timeout_s) out << "timeout     " << *s.trial.timeout_s << "s\n";
  if (s.ask_timeout_s)
    out << "ask timeout " << *s.ask_timeout_s << "s without a tell or heartbeat\n";
  if (s.resources.gpus) out << "gpus        " << s.resources.gpus->text() << "\n";
  if (s.resources.cpus) out << "cpus        " << s.resources.cpus->text() << "\n";
  out << "\nsearch space (" << s.space.size() << " parameters)\n";
  std::istringstream lines(s.space.Describe());
  for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  return out.str();
}

void FillOutcomeValues(const StudySpec& spec, const std::map<std::string, double>& by_metric,
                       tuner::TrialOutcome* outcome) {
  outcome->values.clear();
  outcome->violations.clear();
  if (!spec.KeepsValues()) return;
  if (spec.MultiObjective()) {
    for (const Objective& o : spec.objectives) {
      auto it = by_metric.find(o.metric);
      outcome->values.push_back(it == by_metric.end() ? std::nan("") : it->second);
    }
  }
  for (const Constraint& c : spec.constraints) {
    auto it = by_metric.find(c.metric);
    outcome->violations.push_back(it == by_metric.end() || !std::isfinite(it->second)
                                      ? std::numeric_limits<double>::infinity()
                                      : c.Violation(it->second));
  }
}

bool StudySpec::KeepsMetric(const std::string& metric) const {
  if (!KeepsValues()) return false;
  for (const Objective& o : objectives)
    if (o.metric == metric) return true;
  for (const Constraint& c : constraints)
    if (c.metric == metric) return true;
  return false;
}

bool MeetsConstraints(const StudySpec& spec, const std::map<std::string, double>& values) {
  for (const Constraint& c : spec.constraints) {
    auto it = values.find(c.metric);
    if (it == values.end() || !std::isfinite(it->second) || c.Violation(it->second) > 0)
      return false;
  }
  return true;
}

ParseOutcome LoadStudyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ParseOutcome out;
    out.errors.push_back({path, 0, 0, "", "cannot read the study file (does it exist?)"});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseStudy(text.str(), path);
}

Status CheckRunnable(const StudySpec& spec) {
  if (!spec.trial.command.empty()) return Status::Ok();
  return Status::Invalid(spec.source_path, ": study '", spec.name,
                         "' has no trial: section, so hyperpack has nothing to run; add trial: "
                         "{command: ...}, or have your program ask for trials: hyperpack create ",
                         spec.source_path, ", then hyperpack ask ", spec.name);
}

}  // namespace hyperpack::study
