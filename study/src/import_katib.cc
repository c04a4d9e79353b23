// Kubeflow Katib v1beta1 Experiments (kubeflow.org/v1beta1, kind Experiment; katib's "Experiment
// spec" and "Trial template" guides) as hyperpack study files.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/study/import.h"
#include "hyperpack/text.h"
#include "import_common.h"
#include "import_katib.h"

namespace hyperpack::study {
namespace internal {
namespace katib {
namespace {

// What Katib's algorithmName says hyperpack's tuner should be.
enum class Fit { kModel, kSame, kGrid, kHyperband };
struct Algorithm {
  const char* tuner;
  Fit fit;
};

std::optional<Algorithm> LookupAlgorithm(const std::string& name) {
  static const std::map<std::string, Algorithm> kTable = {
      {"random", {"random", Fit::kSame}}, {"sobol", {"sobol", Fit::kSame}},
      {"grid", {"sobol", Fit::kGrid}},    {"bayesianoptimization", {"gp", Fit::kModel}},
      {"tpe", {"gp", Fit::kModel}},       {"multivariate-tpe", {"gp", Fit::kModel}},
      {"cmaes", {"gp", Fit::kModel}},     {"hyperband", {"gp", Fit::kHyperband}},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

enum class ParameterType { kDouble, kInt, kDiscrete, kCategorical };
std::optional<ParameterType> LookupParameterType(const std::string& name) {
  static const std::map<std::string, ParameterType> kTable = {
      {"double", ParameterType::kDouble},
      {"int", ParameterType::kInt},
      {"discrete", ParameterType::kDiscrete},
      {"categorical", ParameterType::kCategorical},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

std::optional<Spread> LookupSpread(const std::string& name) {
  static const std::map<std::string, Spread> kTable = {
      {"uniform", Spread::kUniform},
      {"logUniform", Spread::kLogUniform},
      {"normal", Spread::kNormal},
      {"logNormal", Spread::kLogNormal},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

}  // namespace

YAML::Node Get(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node v = n[key];
  return v ? v : YAML::Node(YAML::NodeType::Undefined);
}

std::string SafeMetric(const std::string& name) {
  std::string out;
  for (char c : name)
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-'
            ? c
            : '_';
  return out;
}

std::string Word(const YAML::Node& n) { return n && n.IsScalar() ? n.Scalar() : ""; }

bool Among(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

void KatibImporter::Convert(const YAML::Node& root) {
  const YAML::Node kind = root["kind"];
  if (!kind || !kind.IsScalar() || kind.Scalar() != "Experiment") {
    Error(kind ? kind : root, "kind", "'", kind && kind.IsScalar() ? kind.Scalar() : "",
          "' is not a Katib Experiment (expected apiVersion: kubeflow.org/v1beta1, kind: "
          "Experiment)");
    return;
  }
  if (const YAML::Node api = root["apiVersion"];
      api && api.IsScalar() && api.Scalar() != "kubeflow.org/v1beta1")
    Warn(api, "apiVersion", api.Scalar(),
         " is read as kubeflow.org/v1beta1, the Katib API hyperpack imports");
  // Kubernetes' own: where the object lives and what became of it; nothing of the search.
  static const std::vector<std::string> kPlumbing = {"apiVersion", "kind", "metadata", "status"};
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.Scalar();
    if (key != "spec" && !Among(kPlumbing, key))
      Warn(it->first, key, "unknown Experiment key '", key, "' is not carried over");
  }
  WriteName(Word(Get(root, "metadata", "name")), "Katib experiment");
  namespace_ = Word(Get(root, "metadata", "namespace"));
  const YAML::Node spec = root["spec"];
  if (!spec || !spec.IsMap()) {
    Error(spec ? spec : root, "spec",
          "an Experiment needs spec: {objective, algorithm, parameters, trialTemplate, ...}");
    return;
  }
  static const std::vector<std::string> kCarried = {
      "objective",           "algorithm",          "parameters",
      "trialTemplate",       "parallelTrialCount", "maxTrialCount",
      "maxFailedTrialCount", "earlyStopping",      "metricsCollectorSpec"};
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    std::string key = it->first.Scalar();
    if (key == "nasConfig")
      Error(it->first, "spec.nasConfig",
            "neural architecture search (nasConfig) cannot be carried over: hyperpack tunes "
            "spec.parameters");
    else if (key == "resumePolicy")
      Warn(it->first, "spec.resumePolicy",
           "resumePolicy is Katib's own: not carried over (a hyperpack study resumes where it "
           "stopped when run again)");
    else if (!Among(kCarried, key))
      Warn(it->first, "spec." + key, "unknown Experiment spec key '", key, "' is not carried over");
  }
  Objective(spec["objective"], spec);
  yaml_ << "search_space:\n";
  const YAML::Node params = spec["parameters"];
  if (!params || !params.IsSequence() || params.size() == 0)
    Error(params ? params : spec, "spec.parameters",
          "an Experiment needs parameters: a list of {name, parameterType, feasibleSpace}");
  else
    Parameters(params);
  MetricsCollector(spec["metricsCollectorSpec"]);  // lines of the trial section
  TrialTemplate(spec["trialTemplate"], spec);
  Algorithm(spec["algorithm"], spec);
  Budget(spec);
  EarlyStopping(spec["earlyStopping"]);
}

void KatibImporter::Objective(const YAML::Node& obj, const YAML::Node& spec) {
  if (!obj || !obj.IsMap()) {
    Error(obj ? obj : spec, "spec.objective",
          "an Experiment needs objective: {type: maximize|minimize, objectiveMetricName: NAME}");
    return;
  }
  const YAML::Node type = obj["type"], metric = obj["objectiveMetricName"];
  std::string t = type && type.IsScalar() ? type.Scalar() : "";
  if (t != "maximize" && t != "minimize") {
    Error(type ? type : obj, "spec.objective.type", "'", t, "' is not maximize or minimize");
    return;
  }
  if (!metric || !metric.IsScalar() || metric.Scalar().empty()) {
    Error(metric ? metric : obj, "spec.objective.objectiveMetricName",
          "the objective needs objectiveMetricName: the metric to optimise");
    return;
  }
  if (obj["goal"])
    Warn(obj["goal"], "spec.objective.goal",
         "hyperpack does not stop a study at a goal; the budget decides");
  // Katib's default strategy for the objective metric is its best value (min or max by type).
  std::string strategy = "best";
  if (const YAML::Node ms = obj["metricStrategies"]; ms && ms.IsSequence()) {
    static const std::map<std::string, std::string> kStrategy = {
        {"min", "min"}, {"max", "max"}, {"latest", "last"}};
    for (const YAML::Node& m : ms) {
      if (Word(Get(m, "name")) != metric.Scalar()) continue;
      auto it = kStrategy.find(Word(Get(m, "value")));
      if (it == kStrategy.end()) {
        Error(Get(m, "value") ? Get(m, "value") : m, "spec.objective.metricStrategies",
              "expected min, max or latest");
        return;
      }
      strategy = it->second;
    }
  }
  metric_names_ = {metric.Scalar()};
  if (const YAML::Node more = obj["additionalMetricNames"]; more && more.IsSequence())
    for (const YAML::Node& n : more)
      if (n.IsScalar()) metric_names_.push_back(n.Scalar());
  const std::optional<std::string> name = ObjectiveName(metric, spec);
  if (!name) return;
  yaml_ << "objective: {metric: " << YamlScalar(YAML::Node(*name)) << ", direction: " << t
        << ", strategy: " << strategy << "}   # spec.objective, " << From(obj) << "\n";
  if (const YAML::Node more = obj["additionalMetricNames"]; more && more.IsSequence()) {
    std::vector<std::string> names;
    for (const YAML::Node& n : more) names.push_back(n.IsScalar() ? n.Scalar() : "?");
    yaml_ << "# additionalMetricNames: " << Join(names, ", ")
          << " (hyperpack records every metric a trial prints)   # " << From(more) << "\n";
  }
}

std::optional<std::string> KatibImporter::ObjectiveName(const YAML::Node& metric,
                                                        const YAML::Node& spec) {
  const std::string name = SafeMetric(metric.Scalar());
  if (name == metric.Scalar()) return name;
  if (!Get(spec, "metricsCollectorSpec", "source", "filter", "metricsFormat")) {
    Error(metric, "spec.objective.objectiveMetricName", "'", metric.Scalar(),
          "' cannot be printed as name=value, which is how Katib's default filter and "
          "hyperpack read metrics; add a metricsFormat filter that reads it");
    return std::nullopt;
  }
  Warn(metric, "spec.objective.objectiveMetricName", "the metric '", metric.Scalar(), "' is named ",
       name, " in hyperpack (its metricsFormat pattern still reads '", metric.Scalar(), "')");
  return name;
}

void KatibImporter::Parameters(const YAML::Node& params) {
  for (const YAML::Node& p : params) {
    if (Word(Get(p, "name")).empty()) {
      Error(p, "spec.parameters", "expected {name, parameterType, feasibleSpace}");
      continue;
    }
    const std::string katib = p["name"].Scalar();
    std::string name;  // hyperpack's names are letters, digits and '_'
    for (char c : katib) name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) name = "p_" + name;
    if (name != katib)
      Warn(p["name"], "spec.parameters." + katib, "parameter ", katib, " is named ", name,
           " (hyperpack's names are letters, digits and '_')");
    names_[katib] = name;  // even after an error: its references are not errors too
    std::string line = Parameter("spec.parameters." + katib, p);
    if (line.empty()) continue;
    yaml_ << "  " << name << ": " << line << "   # " << From(p) << "\n";
  }
}

std::string KatibImporter::Parameter(const std::string& key, const YAML::Node& p) {
  const YAML::Node type = p["parameterType"], space = p["feasibleSpace"];
  std::string t = type && type.IsScalar() ? type.Scalar() : "";
  std::optional<ParameterType> pt = LookupParameterType(t);
  if (!pt) {
    Error(type ? type : p, key, "parameterType '", t,
          "' is not a Katib parameter type (double, int, discrete, categorical)");
    return "";
  }
  if (!space || !space.IsMap()) {
    Error(space ? space : p, key, t, " needs feasibleSpace: {min, max} or {list: [...]}");
    return "";
  }
  if (*pt == ParameterType::kDiscrete || *pt == ParameterType::kCategorical)
    return List(key, t, space, *pt == ParameterType::kDiscrete);
  // Katib writes the bounds as strings ("0.01"); numbers are read the same.
  auto number = [&](const char* field) -> std::optional<double> {
    const YAML::Node v = space[field];
    if (v && v.IsScalar())
      if (auto d = ParseDouble(v.Scalar())) return d;
    Error(v ? v : space, key, t, " needs a number '", field, "'");
    return std::nullopt;
  };
  std::optional<double> lo = number("min"), hi = number("max");
  if (!lo || !hi) return "";
  // min == max is one value (Katib's hyperband example fixes its resource so): a fixed parameter.
  if (*lo == *hi) return "{type: fixed, value: " + FormatDouble(*lo) + "}";
  if (!(*lo < *hi)) {
    Error(space, key, t, ": min must be below max");
    return "";
  }
  std::optional<Spread> spread = RangeSpread(key, space);
  if (!spread) return "";
  const bool log = *spread == Spread::kLogUniform;
  if (log && *lo <= 0) {
    Error(space, key, t, " logUniform: min must be above 0");
    return "";
  }
  const YAML::Node step = space["step"];
  if (*pt == ParameterType::kDouble) {
    if (step)
      Warn(step, key,
           "step on a double is not carried over: values are proposed between min and max "
           "unrounded");
    return StrCat("{type: float, low: ", FormatDouble(*lo), ", high: ", FormatDouble(*hi),
                  log ? ", log: true" : "", "}");
  }
  return IntRange(key, space, log);
}

std::optional<Spread> KatibImporter::RangeSpread(const std::string& key, const YAML::Node& space) {
  const YAML::Node d = space["distribution"];
  if (!d) return Spread::kUniform;
  std::optional<Spread> spread = LookupSpread(d.IsScalar() ? d.Scalar() : "");
  if (!spread) {
    Error(d, key, "distribution '", d.IsScalar() ? d.Scalar() : "",
          "' is not uniform, logUniform, normal or logNormal");
    return std::nullopt;
  }
  if (*spread == Spread::kNormal || *spread == Spread::kLogNormal) {
    Warn(d, key, d.Scalar(), " has no hyperpack form: min..max is searched uniformly",
         *spread == Spread::kLogNormal ? " in log space" : "");
    return *spread == Spread::kLogNormal ? Spread::kLogUniform : Spread::kUniform;
  }
  return spread;
}

std::string KatibImporter::IntRange(const std::string& key, const YAML::Node& space, bool log) {
  if (!IsWholeNumber(space["min"]) || !IsWholeNumber(space["max"])) {
    Error(space, key, "int needs whole numbers for min and max");
    return "";
  }
  const YAML::Node step = space["step"];
  std::string s;
  if (step) {
    if (!IsWholeNumber(step) || *ParseInt(step.Scalar()) < 1) {
      Error(step, key, "int needs a whole step above 0");
      return "";
    }
    if (*ParseInt(step.Scalar()) > 1) {
      if (log)
        Warn(step, key,
             "step with logUniform is not carried over: hyperpack's log int range "
             "has no step");
      else
        s = ", step: " + step.Scalar();
    }
  }
  return StrCat("{type: int, low: ", space["min"].Scalar(), ", high: ", space["max"].Scalar(), s,
                log ? ", log: true" : "", "}");
}

std::string KatibImporter::List(const std::string& key, const std::string& t,
                                const YAML::Node& space, bool numbers) {
  const YAML::Node list = space["list"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    Error(list ? list : space, key, t, " needs feasibleSpace.list: a non-empty list");
    return "";
  }
  std::vector<std::string> values;
  for (const YAML::Node& v : list) {
    if (!v.IsScalar() || (numbers && !ParseDouble(v.Scalar()))) {
      Error(v, key, numbers ? "discrete values must be numbers" : "expected text");
      return "";
    }
    values.push_back(numbers ? FormatDouble(*ParseDouble(v.Scalar()))
                             : nlohmann::json(v.Scalar()).dump());
  }
  return "{type: categorical, values: [" + Join(values, ", ") + "]}";
}

void KatibImporter::Algorithm(const YAML::Node& alg, const YAML::Node& spec) {
  const YAML::Node name = Get(alg, "algorithmName");
  std::string n = name && name.IsScalar() ? name.Scalar() : "";
  std::optional<struct Algorithm> a = LookupAlgorithm(n);
  if (!a) {
    Error(name ? name : (alg ? alg : spec), "spec.algorithm.algorithmName", "'", n,
          "' cannot be carried over (hyperpack imports random, grid, sobol, "
          "bayesianoptimization, tpe, multivariate-tpe, cmaes and hyperband)");
    return;
  }
  if (const YAML::Node settings = Get(alg, "algorithmSettings"))
    Warn(settings, "spec.algorithm.algorithmSettings",
         "algorithmSettings are not carried over: hyperpack's tuner uses its own");
  std::string note;
  switch (a->fit) {
    case Fit::kModel:
      note = StrCat(" (hyperpack's model-based tuner in place of Katib's ", n, ")");
      break;
    case Fit::kGrid:
      Warn(name, "spec.algorithm.algorithmName",
           "grid has no hyperpack form: scrambled Sobol points (tuner: sobol) cover the space "
           "instead");
      break;
    case Fit::kHyperband:
      Warn(name, "spec.algorithm.algorithmName",
           "Katib's hyperband (a tuner that also stops trials early) is not carried over as such: "
           "tuner gp proposes the trials; add pruner: {algorithm: hyperband, max_resource: N} "
           "by hand for early stopping");
      note = " (hyperband's proposals by the model-based tuner)";
      break;
    case Fit::kSame:
      break;
  }
  yaml_ << "tuner: {algorithm: " << a->tuner << "}   # algorithmName: " << n << note << ", "
        << From(name) << "\n";
}

void KatibImporter::Budget(const YAML::Node& spec) {
  auto count = [&](const char* field) -> std::optional<long long> {
    const YAML::Node v = spec[field];
    if (!v) return std::nullopt;
    if (!IsWholeNumber(v) || *ParseInt(v.Scalar()) < 0) {
      Error(v, StrCat("spec.", field), "expected a whole number of trials");
      return std::nullopt;
    }
    return *ParseInt(v.Scalar());
  };
  std::vector<std::string> budget, from;
  if (auto n = count("maxTrialCount")) {
    budget.push_back(StrCat("max_trials: ", *n));
    from.push_back("maxTrialCount");
  } else if (!spec["maxTrialCount"]) {
    Warn(spec, "spec.maxTrialCount",
         "no maxTrialCount: Katib runs until the goal or the algorithm stops; hyperpack's "
         "default budget (100 trials) applies");
  }
  // Katib runs 3 trials at once unless told.
  budget.push_back(StrCat("max_parallel: ", count("parallelTrialCount").value_or(3)));
  from.push_back(spec["parallelTrialCount"] ? "parallelTrialCount" : "Katib's default 3");
  // Katib fails the experiment once more than maxFailedTrialCount trials have failed;
  // hyperpack stops once max_failed have.
  if (auto n = count("maxFailedTrialCount")) {
    budget.push_back(StrCat("max_failed: ", *n + 1));
    from.push_back("maxFailedTrialCount + 1");
  }
  yaml_ << "budget: {" << Join(budget, ", ") << "}   # " << Join(from, ", ") << ", " << From(spec)
        << "\n";
}

void KatibImporter::EarlyStopping(const YAML::Node& es) {
  if (!es) return;
  const YAML::Node name = es["algorithmName"];
  std::string n = name && name.IsScalar() ? name.Scalar() : "";
  if (n != "medianstop") {
    Warn(name ? name : es, "spec.earlyStopping", "early stopping '", n,
         "' is not carried over (hyperpack imports medianstop); no pruner is written");
    return;
  }
  // Katib's defaults: min_trials_required 3, start_step 4.
  std::string startup = "3", warmup = "4";
  if (const YAML::Node settings = es["algorithmSettings"]; settings && settings.IsSequence()) {
    for (const YAML::Node& s : settings) {
      std::string key = Word(Get(s, "name"));
      const YAML::Node v = Get(s, "value");
      std::string* into = key == "min_trials_required" ? &startup
                          : key == "start_step"        ? &warmup
                                                       : nullptr;
      if (!into) {
        Warn(s, "spec.earlyStopping.algorithmSettings", "medianstop setting '", key,
             "' is not carried over");
        continue;
      }
      if (!v || !IsWholeNumber(v) || *ParseInt(v.Scalar()) < 0) {
        Error(v ? v : s, "spec.earlyStopping.algorithmSettings", key, " must be a whole number");
        return;
      }
      *into = v.Scalar();
    }
  }
  yaml_ << "pruner: {algorithm: median, startup_trials: " << startup << ", warmup_steps: " << warmup
        << "}   # medianstop: min_trials_required, start_step (reports counted as steps), "
        << From(es) << "\n";
}

}  // namespace katib

ImportOutcome ImportKatib(const std::string& text, const std::string& filename,
                          const ImportOptions& options) {
  return katib::KatibImporter(filename, options)
      .Run(text, "a Katib Experiment is a mapping with apiVersion, kind: Experiment and spec");
}

}  // namespace internal
}  // namespace hyperpack::study
