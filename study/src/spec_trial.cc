// objective, trial and metrics: the command and its placeholders, how metrics are read
// (spec_parser.h).
#include "spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/regex.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

namespace {

// `last-N-avg`: N reports, 2 to 100; nullopt where `s` is not of that form.
std::optional<int> LastMeanWindow(const std::string& s) {
  constexpr std::string_view kHead = "last-", kTail = "-avg";
  if (s.size() <= kHead.size() + kTail.size() || !s.starts_with(kHead) || !s.ends_with(kTail))
    return std::nullopt;
  const std::string n = s.substr(kHead.size(), s.size() - kHead.size() - kTail.size());
  if (n.size() > 3 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const int window = std::stoi(n);
  if (window < 2 || window > 100) return std::nullopt;
  return window;
}

}  // namespace

void Parser::ParseStrategy(const Field& f, const std::string& path, Objective* objective) {
  auto s = String(f, path);
  if (!s) return;
  static const std::map<std::string, ObjectiveStrategy> kStrategies = {
      {"last", ObjectiveStrategy::kLast},
      {"min", ObjectiveStrategy::kMin},
      {"max", ObjectiveStrategy::kMax},
      {"best", ObjectiveStrategy::kBest}};
  if (auto it = kStrategies.find(*s); it != kStrategies.end()) {
    objective->strategy = it->second;
  } else if (std::optional<int> window = LastMeanWindow(*s)) {
    objective->strategy = ObjectiveStrategy::kLastMean;
    objective->window = *window;
  } else {
    Error(f.value, path, "'", *s,
          "' is not a strategy; expected last, min, max, best or last-N-avg (the mean of the "
          "last N reports, N from 2 to 100, e.g. last-3-avg)");
  }
}

void Parser::ParseObjective(const Field& field, const std::string& path, Objective* objective,
                            std::vector<MetricPattern>* patterns) {
  auto fields = Fields(field, path, {"metric", "direction", "strategy", "regex"});
  if (!field.value.IsMap()) return;
  if (auto* f = Get(fields, "metric")) {
    if (auto m = String(*f, path + ".metric")) {
      if (m->find_first_of(" \t=") != std::string::npos)
        Error(f->value, path + ".metric", "'", *m, "' is not a metric name (no spaces or '=')");
      objective->metric = *m;
    }
  } else {
    Missing(field.key, path, "metric", "the name of a metric the trial reports");
  }
  if (auto* f = Get(fields, "direction")) {
    if (auto d = String(*f, path + ".direction")) {
      if (auto parsed = ParseDirection(*d)) {
        objective->direction = *parsed;
      } else {
        auto guess = DidYouMean(*d, {"minimize", "maximize"});
        Error(f->value, path + ".direction", "'", *d, "' is not a direction; expected ",
              guess ? "'" + *guess + "'" : std::string("minimize or maximize"));
      }
    }
  } else {
    Missing(field.key, path, "direction", "minimize or maximize");
  }
  if (auto* f = Get(fields, "strategy")) ParseStrategy(*f, path + ".strategy", objective);
  if (auto* f = Get(fields, "regex")) {
    if (auto p = MetricRegex(*f, path + ".regex"); p && !objective->metric.empty())
      patterns->push_back({objective->metric, *p});
  }
}

// `objectives:`, a list of 2 to 4 objectives on distinct metrics, each as `objective:` is written.
void Parser::ParseObjectives(const Field& field, std::vector<Objective>* objectives,
                             std::vector<MetricPattern>* patterns) {
  constexpr size_t kMin = 2, kMax = 4;
  if (!field.value.IsSequence() || field.value.size() < kMin || field.value.size() > kMax) {
    Error(field.value.IsNull() ? field.key : field.value, "objectives",
          "expected a list of 2 to 4 objectives, e.g. [{metric: val_loss, direction: minimize}, "
          "{metric: latency_ms, direction: minimize}], got ",
          Describe(field.value),
          "; one objective is written `objective: {metric: ..., "
          "direction: ...}`");
    return;
  }
  for (size_t i = 0; i < field.value.size(); ++i) {
    const std::string path = StrCat("objectives[", i, "]");
    Objective o;
    ParseObjective({field.value[i], field.value[i]}, path, &o, patterns);
    for (const Objective& earlier : *objectives)
      if (!o.metric.empty() && earlier.metric == o.metric)
        Error(field.value[i], path + ".metric", "'", o.metric,
              "' is already an objective; each objective is a different metric");
    // The first objective is what a trial's reports are judged by as they come: one it reports.
    if (i == 0 && o.metric == kCostMetric)
      Error(field.value[i], path + ".metric",
            "cost (hyperpack's own measure of a trial) cannot be the first objective: the first "
            "is one the trial reports; list cost after it");
    objectives->push_back(o);
  }
}

// `constraints:`, a list of bounds {metric: NAME, max: NUMBER} or {metric: NAME, min: NUMBER}.
void Parser::ParseConstraints(const Field& field, std::vector<Constraint>* constraints) {
  static const std::string kExpected =
      "expected a list of bounds on reported metrics, e.g. [{metric: peak_mem_gb, max: 40}, "
      "{metric: val_accuracy, min: 0.9}]";
  if (!field.value.IsSequence() || field.value.size() == 0) {
    Error(field.value.IsNull() ? field.key : field.value, "constraints", kExpected, ", got ",
          Describe(field.value));
    return;
  }
  for (size_t i = 0; i < field.value.size(); ++i) {
    const std::string path = StrCat("constraints[", i, "]");
    const Field item{field.value[i], field.value[i]};
    auto fields = Fields(item, path, {"metric", "max", "min"});
    if (!item.value.IsMap()) continue;
    Constraint c;
    if (auto* f = Get(fields, "metric")) {
      if (auto m = String(*f, path + ".metric")) {
        if (!IsMetricName(*m))
          Error(f->value, path + ".metric", "'", *m, "' is not a metric name (no spaces or '=')");
        c.metric = *m;
      }
    } else {
      Missing(item.value, path, "metric", "the name of a metric the trial reports");
    }
    const Field* max = Get(fields, "max");
    const Field* min = Get(fields, "min");
    if ((max == nullptr) == (min == nullptr)) {
      Error(item.value, path, max ? "both max and min are given" : "no bound is given",
            "; expected exactly one: max: NUMBER (the metric at most that) or min: NUMBER (at "
            "least that); a range is two constraints");
      continue;
    }
    const Field* bound = max ? max : min;
    c.bound = max ? Constraint::Bound::kMax : Constraint::Bound::kMin;
    if (auto v = Number(*bound, StrCat(path, max ? ".max" : ".min"))) {
      if (!std::isfinite(*v)) {
        Error(bound->value, StrCat(path, max ? ".max" : ".min"), "must be a finite number");
        continue;
      }
      c.limit = *v;
      constraints->push_back(c);
    }
  }
}

std::optional<std::string> Parser::MetricRegex(const Field& f, const std::string& path) {
  static const std::string kExpected =
      "expected a regular expression with one capture group around the number, e.g. "
      "'Average loss: ([0-9.eE+-]+)'";
  if (!f.value.IsScalar()) {
    Error(f.value.IsNull() ? f.key : f.value, path, kExpected, ", got ", Describe(f.value));
    return std::nullopt;
  }
  const std::string& text = f.value.Scalar();
  if (text.empty()) {
    Error(f.value, path, "empty pattern; ", kExpected);
    return std::nullopt;
  }
  size_t groups = 0;
  try {
    groups = boost::regex(text, boost::regex::perl).mark_count();
  } catch (const std::exception& e) {  // boost::regex_error; std::bad_alloc
    std::string why = e.what();
    // Boost appends the pattern marked where it stopped; the position says the same, shorter.
    why = why.substr(0, why.find("  The error occurred"));
    if (!why.empty() && why.back() == '.') why.pop_back();
    if (const auto* re = dynamic_cast<const boost::regex_error*>(&e)) {
      const auto at = static_cast<size_t>(re->position());
      why += at < text.size() ? StrCat(" (at character ", at + 1, ")") : " (at the end)";
    }
    Error(f.value, path, "'", text, "' is not a regular expression: ", why);
    return std::nullopt;
  }
  if (groups != 1) {
    Error(f.value, path, "'", text, "' has ", groups, " capture groups; expected exactly one ",
          "capture group ( ... ) around the number (write other groups as (?: ... ))");
    return std::nullopt;
  }
  return text;
}

void Parser::CheckPlaceholders(const YAML::Node& node, const std::string& path,
                               const std::string& text, const SearchSpace& space) {
  auto names = TemplatePlaceholders(text);
  if (!names.ok()) {
    Error(node, path, names.status().message());
    return;
  }
  std::vector<std::string> known = BuiltinPlaceholders();
  for (const ParamSpec& p : space.params()) known.push_back(p.name);
  for (const std::string& n : *names) {
    if (std::find(known.begin(), known.end(), n) != known.end()) continue;
    if (declared_.count(n)) continue;  // a parameter with errors of its own, already reported
    auto guess = DidYouMean(n, known);
    Error(node, path, "'{", n, "}' is not a parameter",
          guess ? "; did you mean '{" + *guess + "}'?" : "; expected one of: " + Join(known, ", "));
  }
}

void Parser::ParseTrial(const Field& field, const SearchSpace& space, TrialSpec* trial,
                        std::vector<MetricPattern>* patterns) {
  auto fields = Fields(field, "trial",
                       {"command", "workdir", "env", "timeout", "metrics", "warm", "metrics_from",
                        "shim", "metrics_path"});
  if (!field.value.IsMap()) return;
  if (auto* f = Get(fields, "command")) {
    if (auto c = String(*f, "trial.command")) {
      trial->command = *c;
      CheckPlaceholders(f->value, "trial.command", *c, space);
    }
  } else {
    Missing(field.key, "trial", "command", "the command that runs one trial");
  }
  if (auto* f = Get(fields, "workdir")) {
    if (auto w = String(*f, "trial.workdir")) {
      namespace fs = std::filesystem;
      fs::path dir(*w);
      if (dir.is_relative()) dir = fs::absolute(fs::path(file_).parent_path() / dir);
      trial->workdir = dir.lexically_normal().string();
    }
  }
  if (auto* f = Get(fields, "env")) {
    if (!f->value.IsMap()) {
      Error(f->value.IsNull() ? f->key : f->value, "trial.env",
            "expected a mapping of variable names to values, got ", Describe(f->value));
    } else {
      for (auto it = f->value.begin(); it != f->value.end(); ++it) {
        std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
        std::string path = Path("trial.env", name);
        if (!IsIdentifier(name)) {
          Error(it->first, "trial.env", "'", name, "' is not a valid environment variable name");
          continue;
        }
        if (!it->second.IsScalar()) {
          Error(it->second.IsNull() ? it->first : it->second, path, "expected a value, got ",
                Describe(it->second));
          continue;
        }
        CheckPlaceholders(it->second, path, it->second.Scalar(), space);
        trial->env.emplace_back(name, it->second.Scalar());
      }
    }
  }
  if (auto* f = Get(fields, "timeout")) trial->timeout_s = Duration(*f, "trial.timeout");
  if (auto* f = Get(fields, "metrics")) ParseMetrics(*f, patterns);
  if (auto* f = Get(fields, "warm"))
    if (auto b = Bool(*f, "trial.warm")) trial->warm = *b;
  OneOf(fields, "trial", "metrics_from",
        {MetricsSource::kStdout, MetricsSource::kOutput, MetricsSource::kTensorboard,
         MetricsSource::kFile},
        MetricsSourceName, &trial->metrics_from);
  ParseMetricsPath(field, fields, space, trial);
  OneOf(fields, "trial", "shim",
        {TrialShim::kNone, TrialShim::kNni, TrialShim::kWandb, TrialShim::kDetermined},
        TrialShimName, &trial->shim);
}

void Parser::ParseMetricsPath(const Field& trial_field, const std::map<std::string, Field>& fields,
                              const SearchSpace& space, TrialSpec* trial) {
  const bool files = trial->metrics_from == MetricsSource::kTensorboard ||
                     trial->metrics_from == MetricsSource::kFile;
  const Field* f = Get(fields, "metrics_path");
  if (!f) {
    if (files)
      Missing(trial_field.key, "trial", "metrics_path",
              trial->metrics_from == MetricsSource::kFile
                  ? "the file the trial appends its metrics to, e.g. '{trial_dir}/metrics.log'"
                  : "the folder the trial's TensorBoard writer logs to, e.g. '{trial_dir}/tb'");
    return;
  }
  if (!files) {
    Error(f->key, "trial.metrics_path",
          "is read only with metrics_from: tensorboard or file (metrics_from is ",
          MetricsSourceName(trial->metrics_from), ")");
    return;
  }
  if (auto text = String(*f, "trial.metrics_path")) {
    CheckPlaceholders(f->value, "trial.metrics_path", *text, space);
    trial->metrics_path = *text;
  }
}

void Parser::ParseMetrics(const Field& field, std::vector<MetricPattern>* patterns) {
  if (!field.value.IsMap() || field.value.size() == 0) {
    Error(field.value.IsNull() ? field.key : field.value, "trial.metrics",
          "expected a mapping of metric names to patterns, e.g. "
          "{test_loss: 'Average loss: ([0-9.eE+-]+)'}, got ",
          Describe(field.value));
    return;
  }
  // objective.regex, when given, is already there.
  const size_t from_objective = patterns->size();
  std::set<std::string> seen;
  for (auto it = field.value.begin(); it != field.value.end(); ++it) {
    YAML::Node key = it->first;
    const std::string name = key.IsScalar() ? key.Scalar() : "";
    const std::string path = Path("trial.metrics", name);
    if (!IsMetricName(name)) {
      Error(key, "trial.metrics", "'", name,
            "' is not a metric name; use letters, digits, '_', '.', '/' and '-', not starting "
            "with '.', '/' or '-'");
      continue;
    }
    if (!seen.insert(name).second) {
      Error(key, path, "duplicate metric");
      continue;
    }
    auto taken = std::find_if(patterns->begin(), patterns->begin() + from_objective,
                              [&](const MetricPattern& p) { return p.name == name; });
    if (taken != patterns->begin() + from_objective) {
      Error(key, path, "'", name,
            "' is the objective's metric, already read by objective.regex; keep one of the two");
      continue;
    }
    if (auto p = MetricRegex(Field{key, it->second}, path)) patterns->push_back({name, *p});
  }
}

}  // namespace hyperpack::study::internal
