// W&B sweep configurations (docs.wandb.ai, "Define sweep configuration") as hyperpack study files.
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "hyperpack/study/import.h"
#include "hyperpack/text.h"
#include "import_common.h"

namespace hyperpack::study {
namespace internal {
namespace {

// What a W&B distribution's name says about the values it gives.
enum class Shape { kCategorical, kConstant, kRange, kNormal, kBeta };
struct Distribution {
  Shape shape;
  bool log = false;        // log_uniform*, log_normal*
  bool exponents = false;  // log_uniform, q_log_uniform: min and max are natural-log exponents
  bool quantised = false;  // q_*
  bool integers = false;   // int_uniform
};

std::optional<Distribution> LookupDistribution(const std::string& name) {
  static const std::map<std::string, Distribution> kTable = {
      {"categorical", {Shape::kCategorical}},
      {"constant", {Shape::kConstant}},
      {"int_uniform", {Shape::kRange, false, false, false, true}},
      {"uniform", {Shape::kRange}},
      {"q_uniform", {Shape::kRange, false, false, true}},
      {"log_uniform_values", {Shape::kRange, true}},
      {"q_log_uniform_values", {Shape::kRange, true, false, true}},
      {"log_uniform", {Shape::kRange, true, true}},
      {"q_log_uniform", {Shape::kRange, true, true, true}},
      {"normal", {Shape::kNormal}},
      {"q_normal", {Shape::kNormal, false, false, true}},
      {"log_normal", {Shape::kNormal, true}},
      {"q_log_normal", {Shape::kNormal, true, false, true}},
      {"beta", {Shape::kBeta}},
      {"q_beta", {Shape::kBeta, false, false, true}},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

using internal::Importer;
using internal::IsWholeNumber;

class WandbImporter : public Importer {
 public:
  WandbImporter(std::string filename, const ImportOptions& options)
      : Importer(std::move(filename), options) {}

 private:
  void Convert(const YAML::Node& root) override {
    static const std::vector<std::string> kKnown = {
        "name",       "description",     "method",     "metric",  "metrics",
        "parameters", "early_terminate", "command",    "program", "run_cap",
        "project",    "entity",          "controller", "job",     "image_uri",
        "resource",   "scheduler"};
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = it->first.Scalar();
      if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end())
        Warn(it->first, key, "unknown sweep key '", key, "' is not carried over");
    }
    for (const char* key :
         {"project", "entity", "controller", "job", "image_uri", "resource", "scheduler"})
      if (root[key])
        Warn(root[key], key, key,
             " is W&B's own (where runs are logged or launched): "
             "not carried over");
    Name(root);
    if (root["metrics"]) {
      if (root["metric"])
        Warn(root["metric"], "metric", "both metric and metrics are given; metrics is used");
      Objectives(root["metrics"]);
    } else {
      Objective(root["metric"]);
    }
    yaml_ << "search_space:\n";
    if (!root["parameters"] || !root["parameters"].IsMap() || root["parameters"].size() == 0) {
      Error(root["parameters"] ? root["parameters"] : root, "parameters",
            "a sweep needs a mapping of parameters");
    } else {
      Parameters(root["parameters"], "");
    }
    Command(root);
    Method(root["method"]);
    if (root["run_cap"]) {
      if (!IsWholeNumber(root["run_cap"]))
        Error(root["run_cap"], "run_cap", "expected a whole number of runs");
      else
        yaml_ << "budget: {max_trials: " << root["run_cap"].Scalar() << "}   # run_cap, "
              << From(root["run_cap"]) << "\n";
    }
    EarlyTerminate(root["early_terminate"]);
  }

  void Name(const YAML::Node& root) {
    WriteName(root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : "", "W&B sweep");
    if (root["description"] && root["description"].IsScalar())
      yaml_ << "description: " << nlohmann::json(root["description"].Scalar()).dump() << "\n";
  }

  void Objective(const YAML::Node& metric) {
    if (!metric || !metric.IsMap() || !metric["name"]) {
      Error(metric, "metric",
            "the sweep names no metric (W&B needs none for grid and random sweeps, which only "
            "log); hyperpack optimises one: add metric: {name: NAME, goal: minimize|maximize}");
      return;
    }
    const std::string goal = metric["goal"] ? metric["goal"].Scalar() : "minimize";
    if (!ParseDirection(goal)) {
      Error(metric["goal"], "metric.goal", "'", goal, "' is not minimize or maximize");
      return;
    }
    if (metric["target"])
      Warn(metric["target"], "metric.target",
           "hyperpack does not stop a study at a target value; the budget decides");
    yaml_ << "objective: {metric: " << internal::YamlScalar(metric["name"])
          << ", direction: " << goal << "}   # metric, " << From(metric) << "\n";
  }

  // `metrics:` (W&B sweeps run by its Optuna or Ax engines): a list of {name, goal}, each an
  // objective; one alone is written as `objective:`.
  void Objectives(const YAML::Node& metrics) {
    if (!metrics.IsSequence() || metrics.size() == 0 || metrics.size() > 4) {
      Error(metrics, "metrics",
            "expected a list of 1 to 4 metrics, each {name: NAME, goal: minimize|maximize}");
      return;
    }
    if (metrics.size() == 1) return Objective(metrics[0]);
    yaml_ << "objectives:   # metrics, " << From(metrics) << "\n";
    for (size_t i = 0; i < metrics.size(); ++i) {
      const YAML::Node m = metrics[i];
      const std::string path = "metrics[" + std::to_string(i) + "]";
      if (!m.IsMap() || !m["name"] || !m["name"].IsScalar()) {
        Error(m, path, "expected {name: NAME, goal: minimize|maximize}");
        continue;
      }
      const std::string goal = m["goal"] && m["goal"].IsScalar() ? m["goal"].Scalar() : "minimize";
      if (!ParseDirection(goal)) {
        Error(m["goal"], path + ".goal", "'", goal, "' is not minimize or maximize");
        continue;
      }
      if (m["target"])
        Warn(m["target"], path + ".target",
             "hyperpack does not stop a study at a target value; the budget decides");
      yaml_ << "  - {metric: " << internal::YamlScalar(m["name"]) << ", direction: " << goal
            << "}\n";
    }
  }

  void Parameters(const YAML::Node& params, const std::string& prefix) {
    for (auto it = params.begin(); it != params.end(); ++it) {
      std::string name = prefix + it->first.Scalar();
      const YAML::Node spec = it->second;  // a copy: it-> yields a temporary
      if (spec.IsMap() && spec["parameters"]) {
        Warn(it->first, name, "nested parameters are tuned as ", name,
             "_*; the program gets them as W&B gives them: one JSON value in ${args} and a "
             "nested mapping in wandb.config");
        if (path_.empty()) top_.push_back(name);
        path_.push_back(it->first.Scalar());
        Parameters(spec["parameters"], name + "_");
        path_.pop_back();
        continue;
      }
      if (!path_.empty()) {
        std::vector<std::string> full = path_;
        full.push_back(it->first.Scalar());
        nested_[name] = full;
      }
      if (!spec.IsMap()) {
        Error(spec, "parameters." + name,
              "expected a mapping such as {values: [...]} or "
              "{min: 0, max: 1}");
        continue;
      }
      std::string line = Parameter(name, spec);
      if (line.empty()) continue;
      names_.push_back(name);
      if (path_.empty()) top_.push_back(name);
      if (!Numeric(spec)) quoted_.insert(name);
      yaml_ << "  " << name << ": " << line << "   # " << From(spec) << "\n";
    }
  }

  // Whether every value a parameter takes is a number or a boolean (bare in JSON).
  static bool Numeric(const YAML::Node& spec) {
    auto plain = [](const YAML::Node& v) {
      return v.IsScalar() && (ParseDouble(v.Scalar()) || YamlBool(v).has_value());
    };
    if (spec["values"] && spec["values"].IsSequence()) {
      for (const YAML::Node& v : spec["values"])
        if (!plain(v)) return false;
      return true;
    }
    return !spec["value"] || plain(spec["value"]);
  }

  // One argument of ${args}: --NAME={NAME}, or for a nested group the JSON W&B's agent passes,
  // its leaves as placeholders, in single quotes for the shell.
  std::string Argument(const std::string& dashes, const std::string& top) const {
    if (std::find(names_.begin(), names_.end(), top) != names_.end() && !nested_.contains(top))
      return dashes + top + "={" + top + "}";
    nlohmann::json tree = nlohmann::json::object();
    for (const auto& [flat, path] : nested_.items()) {
      if (path.empty() || path[0] != top) continue;
      nlohmann::json* at = &tree;
      for (size_t i = 1; i + 1 < path.size(); ++i) at = &(*at)[path[i].get<std::string>()];
      (*at)[path.back().get<std::string>()] = flat;
    }
    return "'" + dashes + top + "=" + JsonTemplate(tree) + "'";
  }

  // `tree` as JSON whose leaves are placeholders: literal braces doubled, text values quoted.
  std::string JsonTemplate(const nlohmann::json& tree) const {
    std::vector<std::string> members;
    for (const auto& [key, value] : tree.items()) {
      const std::string name = value.is_string() ? value.get<std::string>() : "";
      const std::string inner =
          value.is_object() ? JsonTemplate(value)
                            : (quoted_.count(name) ? "\"{" + name + "}\"" : "{" + name + "}");
      members.push_back(nlohmann::json(key).dump() + ": " + inner);
    }
    return "{{" + Join(members, ", ") + "}}";
  }

  // A parameter's hyperpack form, or "" after an error.
  std::string Parameter(const std::string& name, const YAML::Node& s) {
    const std::string key = "parameters." + name;
    std::string dist = s["distribution"] ? s["distribution"].Scalar() : DefaultDistribution(s);
    if (s["probabilities"])
      Warn(s["probabilities"], key,
           "probabilities are not carried over: every value is equally likely to be proposed "
           "first");
    std::optional<Distribution> d = LookupDistribution(dist);
    if (!d) {
      Error(s["distribution"], key, "distribution '", dist,
            "' cannot be carried over (hyperpack has uniform and log-uniform ranges, integers "
            "and categoricals)");
      return "";
    }
    switch (d->shape) {
      case Shape::kCategorical:
        return Categorical(key, s);
      case Shape::kConstant:
        return "{type: fixed, value: " + internal::YamlScalar(s["value"]) + "}";
      case Shape::kRange:
        return Range(key, s, dist, *d);
      case Shape::kNormal:
        return Normal(key, s, dist, *d);
      case Shape::kBeta:
        Warn(s, key, dist, " has no hyperpack form: [0, 1] is searched uniformly instead");
        return RangeText("float", 0, 1, false);
    }
    return "";
  }

  // W&B's choice when a parameter names no distribution.
  static std::string DefaultDistribution(const YAML::Node& s) {
    if (s["values"]) return "categorical";
    if (s["value"]) return "constant";
    if (IsWholeNumber(s["min"]) && IsWholeNumber(s["max"])) return "int_uniform";
    return "uniform";
  }

  static std::string RangeText(const char* type, double lo, double hi, bool log) {
    return StrCat("{type: ", type, ", low: ", FormatDouble(lo), ", high: ", FormatDouble(hi),
                  log ? ", log: true" : "", "}");
  }

  // The number `field` of `s`, or an error naming what `dist` needs.
  std::optional<double> Number(const YAML::Node& s, const std::string& key, const char* field,
                               const std::string& dist) {
    if (s[field] && s[field].IsScalar())
      if (auto v = ParseDouble(s[field].Scalar())) return v;
    Error(s[field] ? s[field] : s, key, dist, " needs a number '", field, "'");
    return std::nullopt;
  }

  std::string Categorical(const std::string& key, const YAML::Node& s) {
    if (!s["values"].IsSequence() || s["values"].size() == 0) {
      Error(s["values"], key, "values must be a non-empty list");
      return "";
    }
    std::vector<std::string> values;
    for (const auto& v : s["values"]) {
      if (!v.IsScalar()) {
        Error(v, key,
              "a value that is a list or a mapping is not carried over; hyperpack's categorical "
              "values are numbers, text or booleans");
        return "";
      }
      values.push_back(internal::YamlScalar(v));
    }
    return "{type: categorical, values: [" + Join(values, ", ") + "]}";
  }

  // uniform, int_uniform, log_uniform(_values) and their q_ forms.
  std::string Range(const std::string& key, const YAML::Node& s, const std::string& dist,
                    const Distribution& d) {
    std::optional<double> lo = Number(s, key, "min", dist), hi = Number(s, key, "max", dist);
    if (!lo || !hi) return "";
    // log_uniform's bounds are natural-log exponents: values are e^min .. e^max.
    if (d.exponents) {
      *lo = std::exp(*lo);
      *hi = std::exp(*hi);
    }
    if (!(*lo < *hi) || (d.log && *lo <= 0)) {
      Error(s, key, dist, ": min must be below max", d.log ? " and above 0" : "");
      return "";
    }
    const bool written_as_ints = IsWholeNumber(s["min"]) && IsWholeNumber(s["max"]);
    if (d.integers && !written_as_ints) {
      Error(s, key, dist, " needs whole numbers for min and max");
      return "";
    }
    const bool ints = d.integers || (written_as_ints && !d.exponents);
    if (d.quantised) {
      std::optional<double> q = s["q"] ? Number(s, key, "q", dist) : 1.0;
      if (!q) return "";
      if (*q == std::floor(*q) && ints && !d.log && std::fmod(*lo, *q) == 0)
        return StrCat("{type: int, low: ", FormatDouble(*lo), ", high: ", FormatDouble(*hi),
                      ", step: ", FormatDouble(*q), "}");
      Warn(s, key, dist, " with q ", FormatDouble(*q), ": hyperpack's ", ints ? "int" : "float",
           " range has no quantisation here; values are proposed between min and max unrounded");
    }
    return RangeText(ints ? "int" : "float", *lo, *hi, d.log);
  }

  // normal, log_normal and their q_ forms: searched as mu +- 3 sigma.
  std::string Normal(const std::string& key, const YAML::Node& s, const std::string& dist,
                     const Distribution& d) {
    std::optional<double> mu = s["mu"] ? Number(s, key, "mu", dist) : 0.0;
    std::optional<double> sigma = s["sigma"] ? Number(s, key, "sigma", dist) : 1.0;
    if (!mu || !sigma) return "";
    double lo = *mu - 3 * *sigma, hi = *mu + 3 * *sigma;
    Warn(s, key, dist, "(mu ", FormatDouble(*mu), ", sigma ", FormatDouble(*sigma),
         ") has no hyperpack form: the range mu +- 3 sigma", d.log ? " (of the log)" : "",
         " is searched instead, uniformly", d.log ? " in log space" : "");
    return d.log ? RangeText("float", std::exp(lo), std::exp(hi), true)
                 : RangeText("float", lo, hi, false);
  }

  // W&B's command macros, expanded as its agent does; the default is ${env} ${interpreter}
  // ${program} ${args}.
  void Command(const YAML::Node& root) {
    if (!CommandGiven("program and command") && !SweepCommand(root)) return;
    Shim();
  }

  // The sweep's command, its macros expanded; false after an error.
  bool SweepCommand(const YAML::Node& root) {
    std::string program = root["program"] ? root["program"].Scalar() : "";
    std::vector<std::string> words = {"${env}", "${interpreter}", "${program}", "${args}"};
    if (root["command"]) {
      if (!root["command"].IsSequence()) {
        Error(root["command"], "command", "expected a list of words");
        return false;
      }
      words.clear();
      for (const auto& w : root["command"]) words.push_back(w.Scalar());
    }
    std::vector<std::string> out;
    for (const std::string& w : words) {
      if (w == "${env}") {
        out.push_back("/usr/bin/env");
      } else if (w == "${interpreter}") {
        out.push_back("python3");
      } else if (w == "${program}") {
        if (program.empty()) {
          Error(root["command"] ? root["command"] : root, "program",
                "the command uses ${program} but the sweep has no program (a Launch sweep's job "
                "runs elsewhere); give the program's command with --command '...'");
          return false;
        }
        out.push_back(program);
      } else if (w == "${args}" || w == "${args_no_boolean_flags}") {
        for (const std::string& n : top_) out.push_back(Argument("--", n));
      } else if (w == "${args_no_hyphens}") {
        for (const std::string& n : top_) out.push_back(Argument("", n));
      } else if (w == "${args_json}") {
        Error(root["command"], "command",
              "${args_json} is not carried over: use ${args}, or read "
              "the parameters from $HYPERPACK_PARAMS_FILE (JSON)");
        return false;
      } else {
        out.push_back(TemplateLiteral(w));
      }
    }
    yaml_ << "trial:\n  command: " << nlohmann::json(Join(out, " ")).dump() << "   # "
          << (root["command"] ? "command, " + From(root["command"]) : std::string("W&B's default"))
          << "\n";
    return true;
  }

  // The W&B client's stand-in and what it is told.
  void Shim() {
    // wandb.init, wandb.config and wandb.log are served by hyperpack's stand-in (shims/wandb),
    // which prints what is logged; should the real client be used instead, it stays offline.
    yaml_ << "  shim: wandb   # wandb.init(), wandb.config, wandb.log() served by hyperpack\n";
    std::string vars = "WANDB_MODE: disabled";
    if (!nested_.empty()) {
      // Braces doubled: env values are templates.
      const std::string layout = TemplateLiteral(nested_.dump());
      vars += ", HYPERPACK_WANDB_NESTED: " + nlohmann::json(layout).dump();
    }
    yaml_ << "  env: {" << vars << "}\n";
  }

  void Method(const YAML::Node& method) {
    std::string m = method ? method.Scalar() : "random";
    if (m == "bayes") {
      yaml_ << "tuner: {algorithm: gp}   # method: bayes, " << From(method) << "\n";
    } else if (m == "random") {
      yaml_ << "tuner: {algorithm: random}\n";
    } else if (m == "grid") {
      Warn(method, "method",
           "grid has no hyperpack form: scrambled Sobol points (tuner: sobol) "
           "cover the space instead");
      yaml_ << "tuner: {algorithm: sobol}   # method: grid, " << From(method) << "\n";
    } else {
      Error(method, "method", "'", m, "' is not grid, random or bayes");
    }
  }

  void EarlyTerminate(const YAML::Node& et) {
    if (!et) return;
    if (!et.IsMap() || !et["type"] || et["type"].Scalar() != "hyperband") {
      Error(et, "early_terminate", "only type: hyperband exists in W&B");
      return;
    }
    double eta = et["eta"] ? ParseDouble(et["eta"].Scalar()).value_or(3) : 3;
    std::optional<double> min_iter, max_iter;
    if (et["min_iter"]) min_iter = ParseDouble(et["min_iter"].Scalar());
    if (et["max_iter"]) max_iter = ParseDouble(et["max_iter"].Scalar());
    if (!max_iter) {
      // W&B's hyperband needs no maximum (it stops runs only at min_iter x eta^k); hyperpack's
      // brackets do: left for the user to set, in a comment.
      Warn(et, "early_terminate",
           "hyperpack's hyperband needs max_resource (a full run's epochs), which the sweep does "
           "not say: the pruner is written commented out; set it and uncomment");
      yaml_ << "# pruner: {algorithm: hyperband, min_resource: "
            << FormatDouble(min_iter.value_or(1))
            << ", max_resource: SET_ME, reduction_factor: " << FormatDouble(eta)
            << "}   # early_terminate, " << From(et) << "\n";
      return;
    }
    if (!min_iter && et["s"]) {
      auto s = ParseDouble(et["s"].Scalar());
      if (s) min_iter = *max_iter / std::pow(eta, *s);
    }
    if (et["strict"]) Warn(et["strict"], "early_terminate.strict", "strict is not carried over");
    yaml_ << "pruner: {algorithm: hyperband, min_resource: " << FormatDouble(min_iter.value_or(1))
          << ", max_resource: " << FormatDouble(*max_iter)
          << ", reduction_factor: " << FormatDouble(eta) << "}   # early_terminate, " << From(et)
          << "\n";
  }

  std::vector<std::string> path_;                     // the nested groups being read
  nlohmann::json nested_ = nlohmann::json::object();  // flat name -> its path in wandb.config
  std::vector<std::string> top_;  // the sweep's top-level parameters and groups, in order
  std::set<std::string> quoted_;  // parameters with text values (quoted in JSON)
  std::vector<std::string> names_;
};

}  // namespace

ImportOutcome ImportWandb(const std::string& text, const std::string& filename,
                          const ImportOptions& options) {
  return WandbImporter(filename, options)
      .Run(text, "a W&B sweep is a mapping with method, metric and parameters");
}

}  // namespace internal

}  // namespace hyperpack::study
