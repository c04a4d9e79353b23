// Kubeflow Katib v1beta1 Experiments (kubeflow.org/v1beta1, kind Experiment; katib's "Experiment
// spec" and "Trial template" guides) as hyperpack study files.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "hyperpack/study/import.h"
#include "hyperpack/text.h"
#include "import_common.h"

namespace hyperpack::study {
namespace internal {
namespace {

namespace fs = std::filesystem;

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

// feasibleSpace.distribution: how Katib samples between min and max.
enum class Spread { kUniform, kLogUniform, kNormal, kLogNormal };
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

// metricsCollectorSpec.collector.kind: where Katib reads a trial's metrics.
enum class Collector { kStdOut, kFile, kTensorFlowEvent, kElsewhere };
std::optional<Collector> LookupCollector(const std::string& name) {
  static const std::map<std::string, Collector> kTable = {
      {"StdOut", Collector::kStdOut},
      {"File", Collector::kFile},
      {"TensorFlowEvent", Collector::kTensorFlowEvent},
      {"PrometheusMetric", Collector::kElsewhere},
      {"Custom", Collector::kElsewhere},
      {"None", Collector::kElsewhere},
  };
  auto it = kTable.find(name);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

// A trial job's kind: where its command is (a batch Job's own template, a training job's
// replicas, a TrainJob's trainer), under which key, and which role's command is the trial's, in
// order of preference.
struct JobKind {
  enum class Layout { kJob, kReplicas, kTrainer } layout;
  const char* replicas;
  const char* roles[3];
};
std::optional<JobKind> LookupJobKind(const std::string& kind) {
  using L = JobKind::Layout;
  static const std::map<std::string, JobKind> kTable = {
      {"Job", {L::kJob, nullptr, {nullptr, nullptr, nullptr}}},
      {"PyTorchJob", {L::kReplicas, "pytorchReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"TFJob", {L::kReplicas, "tfReplicaSpecs", {"Chief", "Master", "Worker"}}},
      {"XGBoostJob", {L::kReplicas, "xgbReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"MPIJob", {L::kReplicas, "mpiReplicaSpecs", {"Launcher", nullptr, nullptr}}},
      {"PaddleJob", {L::kReplicas, "paddleReplicaSpecs", {"Master", "Worker", nullptr}}},
      {"JAXJob", {L::kReplicas, "jaxReplicaSpecs", {"Worker", nullptr, nullptr}}},
      {"TrainJob", {L::kTrainer, nullptr, {nullptr, nullptr, nullptr}}},
  };
  auto it = kTable.find(kind);
  if (it == kTable.end()) return std::nullopt;
  return it->second;
}

// fileSystemPath.format: how a File collector's lines are written (TEXT, Katib's default, or JSON).
enum class FileFormat { kText, kJson };
YAML::Node Get(const YAML::Node& n, const char* key);
FileFormat FileFormatOf(const YAML::Node& path) {
  const YAML::Node f = Get(path, "format");
  return f && f.IsScalar() && f.Scalar() == "JSON" ? FileFormat::kJson : FileFormat::kText;
}

// `n[key][more]...`, or an undefined node where a step is missing or not a mapping (yaml-cpp throws
// on a missing node's type).
YAML::Node Get(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node v = n[key];
  return v ? v : YAML::Node(YAML::NodeType::Undefined);
}
template <typename... More>
YAML::Node Get(const YAML::Node& n, const char* key, const char* next, More... more) {
  return Get(Get(n, key), next, more...);
}
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A metric's name as hyperpack's may be: letters, digits, '_', '.', '/' and '-'; others are '_'.
std::string SafeMetric(const std::string& name) {
  std::string out;
  for (char c : name)
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-'
            ? c
            : '_';
  return out;
}

// A scalar's text, or "".
std::string Word(const YAML::Node& n) { return n && n.IsScalar() ? n.Scalar() : ""; }

bool Among(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// A word of a container's command as the shell reads it: single-quoted when it has spaces.
std::string ShellWord(const std::string& w) {
  bool plain = !w.empty() && std::none_of(w.begin(), w.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) || c == '\'' || c == '"';
  });
  if (plain) return w;
  std::string quoted = "'";
  for (char c : w) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// `text` with every character a regular expression gives a meaning escaped.
std::string RegexLiteral(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') out += '\\';
    out += c;
  }
  return out;
}

// The index of the ']' that closes the character class opening at `open`.
size_t ClassEnd(const std::string& re, size_t open) {
  size_t j = open + 1;
  if (j < re.size() && re[j] == '^') ++j;
  if (j < re.size() && re[j] == ']') ++j;  // a leading ']' is literal
  while (j < re.size() && re[j] != ']') j += re[j] == '\\' ? 2 : 1;
  return std::min(j, re.size() - 1);
}

// The index of the ')' that closes the group opening at `open`, past escapes and classes; npos
// when it is not closed.
size_t GroupEnd(const std::string& re, size_t open) {
  int depth = 0;
  for (size_t i = open; i < re.size(); ++i) {
    if (re[i] == '\\') {
      ++i;
    } else if (re[i] == '[') {
      i = ClassEnd(re, i);
    } else if (re[i] == '(') {
      ++depth;
    } else if (re[i] == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string::npos;
}

// A Katib metricsFormat filter, whose first group captures a metric's name and second its value,
// as a pattern for the metric `name` alone: the first group becomes the name itself, the second
// stays the one capture group, every other group is made non-capturing. A name group at the start
// may not begin inside a longer name (train_loss is not loss), as Katib's leftmost match ensures.
std::optional<std::string> FilterForMetric(const std::string& filter, const std::string& name) {
  std::string out;
  int captures = 0;
  for (size_t i = 0; i < filter.size(); ++i) {
    const char c = filter[i];
    if (c == '\\' || c == '[') {  // copied whole: an escape, or a class
      const size_t end = c == '[' ? ClassEnd(filter, i) : std::min(i + 1, filter.size() - 1);
      out += filter.substr(i, end - i + 1);
      i = end;
      continue;
    }
    if (c != '(' || (i + 1 < filter.size() && filter[i + 1] == '?')) {
      out += c;
      continue;
    }
    if (++captures == 1) {
      const size_t end = GroupEnd(filter, i);
      if (end == std::string::npos) return std::nullopt;
      out += (i == 0 ? "(?<![\\w|-])(?:" : "(?:") + RegexLiteral(name) + ")";
      i = end;
      continue;
    }
    out += captures == 2 ? "(" : "(?:";
  }
  if (captures < 2) return std::nullopt;
  return out;
}

class KatibImporter : public Importer {
 public:
  KatibImporter(std::string filename, const ImportOptions& options)
      : Importer(std::move(filename), options) {}

 private:
  void Convert(const YAML::Node& root) override {
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
        Warn(it->first, "spec." + key, "unknown Experiment spec key '", key,
             "' is not carried over");
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

  void Objective(const YAML::Node& obj, const YAML::Node& spec) {
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

  // The objective metric's hyperpack name: as Katib's, or with spaces made '_' ("valid_1 auc", as
  // LightGBM prints it), which only a metricsFormat pattern can read; nullopt after an error.
  std::optional<std::string> ObjectiveName(const YAML::Node& metric, const YAML::Node& spec) {
    const std::string name = SafeMetric(metric.Scalar());
    if (name == metric.Scalar()) return name;
    if (!Get(spec, "metricsCollectorSpec", "source", "filter", "metricsFormat")) {
      Error(metric, "spec.objective.objectiveMetricName", "'", metric.Scalar(),
            "' cannot be printed as name=value, which is how Katib's default filter and "
            "hyperpack read metrics; add a metricsFormat filter that reads it");
      return std::nullopt;
    }
    Warn(metric, "spec.objective.objectiveMetricName", "the metric '", metric.Scalar(),
         "' is named ", name, " in hyperpack (its metricsFormat pattern still reads '",
         metric.Scalar(), "')");
    return name;
  }

  void Parameters(const YAML::Node& params) {
    for (const YAML::Node& p : params) {
      if (Word(Get(p, "name")).empty()) {
        Error(p, "spec.parameters", "expected {name, parameterType, feasibleSpace}");
        continue;
      }
      const std::string katib = p["name"].Scalar();
      std::string name;  // hyperpack's names are letters, digits and '_'
      for (char c : katib)
        name += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
      if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())))
        name = "p_" + name;
      if (name != katib)
        Warn(p["name"], "spec.parameters." + katib, "parameter ", katib, " is named ", name,
             " (hyperpack's names are letters, digits and '_')");
      names_[katib] = name;  // even after an error: its references are not errors too
      std::string line = Parameter("spec.parameters." + katib, p);
      if (line.empty()) continue;
      yaml_ << "  " << name << ": " << line << "   # " << From(p) << "\n";
    }
  }

  // A parameter's hyperpack form, or "" after an error.
  std::string Parameter(const std::string& key, const YAML::Node& p) {
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

  // feasibleSpace.distribution as uniform or log-uniform (the normal ones searched as those, with
  // a warning), or nullopt after an error.
  std::optional<Spread> RangeSpread(const std::string& key, const YAML::Node& space) {
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

  // An int range's form: whole bounds, and its step where hyperpack can carry one; "" after an
  // error.
  std::string IntRange(const std::string& key, const YAML::Node& space, bool log) {
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

  // discrete (numbers) and categorical (text): feasibleSpace.list.
  std::string List(const std::string& key, const std::string& t, const YAML::Node& space,
                   bool numbers) {
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

  void TrialTemplate(const YAML::Node& tt, const YAML::Node& spec) {
    if (!tt || !tt.IsMap()) {
      Error(tt ? tt : spec, "spec.trialTemplate",
            "an Experiment needs trialTemplate: {trialParameters, trialSpec}");
      return;
    }
    // Kubernetes plumbing: which container Katib watches and how it tells that the trial's job
    // finished or failed; hyperpack runs the command and reads its exit status.
    static const std::vector<std::string> kPlumbing = {"primaryContainerName", "successCondition",
                                                       "failureCondition", "primaryPodLabels",
                                                       "retain"};
    for (auto it = tt.begin(); it != tt.end(); ++it) {
      std::string key = it->first.Scalar();
      if (key != "trialParameters" && key != "trialSpec" && !Among(kPlumbing, key))
        Warn(it->first, "spec.trialTemplate." + key, key, " is not carried over");
    }
    const YAML::Node trial_spec = tt["trialSpec"];
    if (!trial_spec || !trial_spec.IsMap()) {
      Error(trial_spec ? trial_spec : tt, "spec.trialTemplate.trialSpec",
            "the trial template must be written inline as trialSpec (a Job or a training job); "
            "a ConfigMap template is not carried over");
      return;
    }
    const std::map<std::string, std::string> placeholders = Placeholders(tt, trial_spec);
    std::string kind = Word(Get(trial_spec, "kind"));
    if (kind.empty()) kind = "Job";
    kind_name_ = kind;
    const std::optional<JobKind> job = LookupJobKind(kind);
    if (!job) {
      Error(Get(trial_spec, "kind"), "spec.trialTemplate.trialSpec.kind", "a trial of kind ", kind,
            " is not carried over (hyperpack imports a batch Job, a Kubeflow training job "
            "(PyTorchJob, TFJob, XGBoostJob, MPIJob, PaddleJob, JAXJob) or a TrainJob)");
      return;
    }
    YAML::Node containers;
    std::string where;
    if (!Replicas(trial_spec, *job, &containers, &where)) return;
    if (!containers || !containers.IsSequence() || containers.size() == 0) {
      Error(trial_spec, "spec.trialTemplate.trialSpec", "no containers found under ", where);
      return;
    }
    // The container Katib watches (primaryContainerName), else the first.
    size_t chosen = 0;
    const std::string primary = Word(Get(tt, "primaryContainerName"));
    for (size_t i = 0; i < containers.size(); ++i)
      if (!primary.empty() && Word(Get(containers[i], "name")) == primary) chosen = i;
    Container(containers[chosen], placeholders);
  }

  // ${trialParameters.NAME} -> {the hyperpack parameter it references}, or the trial's metadata.
  std::map<std::string, std::string> Placeholders(const YAML::Node& tt,
                                                  const YAML::Node& trial_spec) {
    std::map<std::string, std::string> placeholders;
    const YAML::Node tps = tt["trialParameters"];
    if (!tps || !tps.IsSequence()) return placeholders;
    for (const YAML::Node& tp : tps) {
      const YAML::Node name = Get(tp, "name"), ref = Get(tp, "reference");
      if (Word(name).empty() || Word(ref).empty()) {
        Error(tp, "spec.trialTemplate.trialParameters", "expected {name, reference}");
        continue;
      }
      std::string r = ref.Scalar();
      if (std::optional<std::string> meta = Metadata(r, trial_spec)) {
        placeholders[name.Scalar()] = *meta;
      } else if (auto it = names_.find(r); it != names_.end()) {
        placeholders[name.Scalar()] = "{" + it->second + "}";
      } else {
        Error(ref, "spec.trialTemplate.trialParameters", "reference '", r,
              "' is not a parameter of spec.parameters");
      }
    }
    return placeholders;
  }

  // The containers of the replica whose command is the trial's (`where` names their path): a Job's
  // own, a training job's first role that is there (Master before Worker), or a TrainJob's
  // trainer. The other roles are warned of: hyperpack runs one process (or resources' gang).
  bool Replicas(const YAML::Node& trial_spec, const JobKind& job, YAML::Node* containers,
                std::string* where) {
    const YAML::Node spec = Get(trial_spec, "spec");
    if (job.layout == JobKind::Layout::kJob) {
      *where = "spec.template.spec.containers";
      *containers = Get(spec, "template", "spec", "containers");
      return true;
    }
    if (job.layout == JobKind::Layout::kTrainer) return Trainer(spec, containers, where);
    const YAML::Node roles = Get(spec, job.replicas);
    std::string chosen;
    for (const char* role : job.roles)
      if (role && chosen.empty() && Get(roles, role)) chosen = role;
    if (chosen.empty()) {
      Error(roles ? roles : trial_spec, "spec.trialTemplate.trialSpec", "no ", job.roles[0],
            " replica under spec.", job.replicas);
      return false;
    }
    *where = StrCat("spec.", job.replicas, ".", chosen, ".template.spec.containers");
    *containers = Get(roles, chosen.c_str(), "template", "spec", "containers");
    for (auto it = roles.begin(); it != roles.end(); ++it) {
      if (it->first.Scalar() == chosen) continue;
      const YAML::Node n = Get(it->second, "replicas");
      Warn(it->second, "spec.trialTemplate.trialSpec", "the ", kind_name_, "'s ",
           it->first.Scalar(), " replicas are not carried over: the ", chosen,
           "'s command runs as one process",
           n && IsWholeNumber(n) ? StrCat("; with ", n.Scalar(), " ", Lower(it->first.Scalar()),
                                          "s the gang would be ", *ParseInt(n.Scalar()) + 1,
                                          " ranks (resources: {gpus: N} runs a gang of N)")
                                 : "");
    }
    return true;
  }

  // A TrainJob's trainer: its command and args are the container's.
  bool Trainer(const YAML::Node& spec, YAML::Node* containers, std::string* where) {
    const YAML::Node trainer = Get(spec, "trainer");
    *where = "spec.trainer";
    if (trainer) {
      YAML::Node list(YAML::NodeType::Sequence);
      list.push_back(trainer);
      *containers = list;
    }
    if (const YAML::Node n = Get(trainer, "numNodes"); n && IsWholeNumber(n) && n.Scalar() != "1")
      Warn(n, "spec.trialTemplate.trialSpec.spec.trainer.numNodes",
           "the trainer runs here as one process, not on ", n.Scalar(),
           " nodes (resources: {gpus: N} runs a gang of N ranks)");
    return true;
  }

  // Katib's metadata substitution in a trialParameter's reference, as hyperpack's placeholder or
  // the literal value the trialSpec gives; nullopt when `ref` is not one.
  std::optional<std::string> Metadata(const std::string& ref, const YAML::Node& trial_spec) const {
    auto literal = [](const std::string& v) { return TemplateLiteral(v); };
    if (ref == "${trialSpec.Name}") return "{trial}";
    if (ref == "${trialSpec.Namespace}")
      return literal(namespace_.empty() ? "default" : namespace_);
    if (ref == "${trialSpec.Kind}") return literal(Word(Get(trial_spec, "kind")));
    if (ref == "${trialSpec.APIVersion}") return literal(Word(Get(trial_spec, "apiVersion")));
    static constexpr std::pair<const char*, const char*> kMaps[] = {{"Labels", "labels"},
                                                                    {"Annotations", "annotations"}};
    for (const auto& [map, field] : kMaps) {
      const std::string open = StrCat("${trialSpec.", map, "[");
      if (ref.rfind(open, 0) != 0 || ref.size() < open.size() + 2 ||
          ref.compare(ref.size() - 2, 2, "]}") != 0)
        continue;
      const std::string key = ref.substr(open.size(), ref.size() - open.size() - 2);
      const YAML::Node values = Get(trial_spec, "metadata", field);
      const YAML::Node v = values && values.IsMap() ? values[key] : YAML::Node();
      return literal(v && v.IsScalar() ? v.Scalar() : "");
    }
    return std::nullopt;
  }

  // `word` with ${trialParameters.NAME} replaced and literal braces doubled; nullopt after an
  // error.
  std::optional<std::string> Substitute(const YAML::Node& at, const std::string& word,
                                        const std::map<std::string, std::string>& placeholders) {
    static const std::string kOpen = "${trialParameters.";
    std::string out;
    for (size_t i = 0; i < word.size();) {
      if (word.compare(i, kOpen.size(), kOpen) == 0) {
        size_t end = word.find('}', i);
        std::string name = word.substr(i + kOpen.size(), end - i - kOpen.size());
        auto it = placeholders.find(name);
        if (end == std::string::npos || it == placeholders.end()) {
          Error(at, "spec.trialTemplate", "${trialParameters.", name,
                "} names no trialParameters entry");
          return std::nullopt;
        }
        out += it->second;
        i = end + 1;
        continue;
      }
      char ch = word[i++];
      out += ch == '{' ? "{{" : ch == '}' ? "}}" : std::string(1, ch);
    }
    return out;
  }

  void Container(const YAML::Node& c, const std::map<std::string, std::string>& placeholders) {
    if (!CommandGiven("the container's command and args") && !ContainerCommand(c, placeholders))
      return;
    ContainerRest(c, placeholders);
  }

  // The container's command and args as the trial's command; false after an error.
  bool ContainerCommand(const YAML::Node& c,
                        const std::map<std::string, std::string>& placeholders) {
    if (!Get(c, "command") && Get(c, "args")) {
      Error(Get(c, "args"), "spec.trialTemplate.args",
            "the container gives args but no command: Kubernetes runs them with its image's "
            "entrypoint, which hyperpack cannot see; name the program with --command '...' "
            "(placeholders such as {lr} for the parameters)");
      return false;
    }
    std::vector<std::string> words;
    bool ok = true;
    for (const char* field : {"command", "args"}) {
      const YAML::Node list = Get(c, field);
      if (!list) continue;
      if (!list.IsSequence()) {
        Error(list, StrCat("spec.trialTemplate.", field), "expected a list of words");
        return false;
      }
      for (const YAML::Node& w : list) {
        std::optional<std::string> s =
            w.IsScalar() ? Substitute(w, ShellWord(w.Scalar()), placeholders) : std::nullopt;
        if (!w.IsScalar()) Error(w, StrCat("spec.trialTemplate.", field), "expected a word");
        if (s) words.push_back(*s);
        ok = ok && s.has_value();
      }
    }
    if (!ok) return false;
    const YAML::Node at = Get(c, "command") ? Get(c, "command") : Get(c, "args");
    if (words.empty()) {
      Error(c, "spec.trialTemplate", "the trial container has no command or args");
      return false;
    }
    yaml_ << "trial:\n  command: " << nlohmann::json(Join(words, " ")).dump()
          << "   # trialTemplate container command and args, " << From(at) << "\n";
    return true;
  }

  // The rest of the trial section: the container's env, the collector's lines, and warnings.
  void ContainerRest(const YAML::Node& c, const std::map<std::string, std::string>& placeholders) {
    if (const YAML::Node env = Get(c, "env"); env && env.IsSequence()) {
      std::vector<std::string> vars;
      for (const YAML::Node& e : env) {
        if (Word(Get(e, "name")).empty() || !Get(e, "value") || !Get(e, "value").IsScalar()) {
          Warn(e, "spec.trialTemplate.env",
               "an env entry without a value (valueFrom) is not "
               "carried over");
          continue;
        }
        if (auto v = Substitute(e["value"], e["value"].Scalar(), placeholders))
          vars.push_back(e["name"].Scalar() + ": " + nlohmann::json(*v).dump());
      }
      if (!vars.empty())
        yaml_ << "  env: {" << Join(vars, ", ") << "}   # container env, " << From(env) << "\n";
    }
    for (const std::string& line : trial_lines_) yaml_ << line << "\n";
    if (const YAML::Node image = Get(c, "image"))
      Warn(image, "spec.trialTemplate.image",
           "hyperpack runs the command on this host, not "
           "in the image ",
           Word(image), ": install what it needs here");
    for (auto it = c.begin(); it != c.end(); ++it) {
      std::string key = it->first.Scalar();
      if (!Among({"name", "image", "command", "args", "env"}, key))
        Warn(it->first, "spec.trialTemplate." + key, "the container's ", key,
             " is Kubernetes' own: not carried over");
    }
    Warn(Get(c, "command") ? Get(c, "command") : (Get(c, "args") ? Get(c, "args") : c),
         "spec.trialTemplate",
         "hyperpack reads metrics from the program's output as name=value or JSON lines; "
         "Katib's StdOut collector reads name=value too, so a program that prints them so works "
         "unchanged");
  }

  // Katib's metrics collector as lines of the trial section (trial_lines_). StdOut, the default,
  // reads stdout and stderr both; its default filter finds name=value anywhere in a line, as
  // hyperpack's metric lines do; a metricsFormat filter becomes a pattern per metric.
  void MetricsCollector(const YAML::Node& mc) {
    if (!mc) {
      trial_lines_.push_back("  metrics_from: output   # Katib's StdOut collector, its default");
      return;
    }
    const YAML::Node kind = Get(mc, "collector", "kind");
    std::string k = kind && kind.IsScalar() ? kind.Scalar() : "StdOut";
    std::optional<Collector> collector = LookupCollector(k);
    if (!collector) {
      Error(kind, "spec.metricsCollectorSpec.collector.kind", "'", k,
            "' is not a Katib metrics collector");
      return;
    }
    if (*collector == Collector::kElsewhere)
      Warn(kind, "spec.metricsCollectorSpec.collector.kind", "the ", k,
           " collector is not carried over: hyperpack reads metrics from the program's standard "
           "output; the program must print them there");
    if (*collector == Collector::kStdOut)
      trial_lines_.push_back(
          StrCat("  metrics_from: output   # Katib's StdOut collector, ", From(kind ? kind : mc)));
    const YAML::Node path = Get(mc, "source", "fileSystemPath");
    if (*collector == Collector::kFile || *collector == Collector::kTensorFlowEvent) {
      if (!FollowedPath(path, *collector)) return;
    } else if (path) {
      Warn(path, "spec.metricsCollectorSpec.source.fileSystemPath",
           "fileSystemPath is not carried over");
    }
    if (const YAML::Node formats = Get(mc, "source", "filter", "metricsFormat"))
      MetricsFormat(formats);
    else if (*collector == Collector::kFile && FileFormatOf(path) == FileFormat::kJson)
      JsonMetrics();
  }

  // The File and TensorFlowEvent collectors: the path hyperpack follows (metrics_path).
  bool FollowedPath(const YAML::Node& path, Collector collector) {
    const std::string key = "spec.metricsCollectorSpec.source.fileSystemPath";
    const std::string p = Word(Get(path, "path"));
    if (p.empty()) {
      Error(path ? path : YAML::Node(), key, "the collector needs fileSystemPath.path: the ",
            collector == Collector::kFile ? "file" : "folder", " the trial writes its metrics to");
      return false;
    }
    const std::string escaped = TemplateLiteral(p);
    trial_lines_.push_back(StrCat(
        "  metrics_from: ", collector == Collector::kFile ? "file" : "tensorboard", "   # Katib's ",
        collector == Collector::kFile ? "File" : "TensorFlowEvent", " collector, ", From(path)));
    trial_lines_.push_back(StrCat("  metrics_path: ", nlohmann::json(escaped).dump()));
    Warn(Get(path, "path"), key + ".path", "the trial writes its metrics to ", p,
         ", a path in Katib's container: on this host it must be writable (or give the program "
         "and metrics_path another, such as {trial_dir}/",
         fs::path(p).filename().string(), ")");
    return true;
  }

  // A File collector's JSON lines: Katib's values may be strings ("loss": "0.22"), which a
  // pattern per metric reads as numbers too.
  void JsonMetrics() {
    trial_lines_.push_back("  metrics:   # Katib's JSON format: values as numbers or strings");
    for (const std::string& name : metric_names_)
      trial_lines_.push_back(StrCat(
          "    ", nlohmann::json(SafeMetric(name)).dump(), ": ",
          nlohmann::json(StrCat("\"", RegexLiteral(name), "\"\\s*:\\s*\"?([-+0-9.eE]+)")).dump()));
  }

  // metricsFormat: Katib tries each filter (two groups, the name and the value) on every line.
  // hyperpack's pattern for a metric is the first filter with the name written in.
  void MetricsFormat(const YAML::Node& formats) {
    const std::string key = "spec.metricsCollectorSpec.source.filter.metricsFormat";
    if (!formats.IsSequence() || formats.size() == 0 || !formats[0].IsScalar()) {
      Error(formats, key, "expected a list of regular expressions");
      return;
    }
    if (formats.size() > 1)
      Warn(formats[1], key,
           "only the first filter is carried over (hyperpack reads a metric "
           "with one pattern)");
    std::vector<std::string> lines;
    for (const std::string& name : metric_names_) {
      std::optional<std::string> pattern = FilterForMetric(formats[0].Scalar(), name);
      if (!pattern) {
        Error(formats[0], key, "'", formats[0].Scalar(),
              "' is not a filter of two groups, the metric's name and then its value");
        return;
      }
      lines.push_back(StrCat("    ", nlohmann::json(SafeMetric(name)).dump(), ": ",
                             nlohmann::json(*pattern).dump()));
    }
    trial_lines_.push_back(StrCat("  metrics:   # metricsFormat, ", From(formats)));
    trial_lines_.insert(trial_lines_.end(), lines.begin(), lines.end());
  }

  void Algorithm(const YAML::Node& alg, const YAML::Node& spec) {
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
        Warn(
            name, "spec.algorithm.algorithmName",
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

  void Budget(const YAML::Node& spec) {
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

  void EarlyStopping(const YAML::Node& es) {
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
    yaml_ << "pruner: {algorithm: median, startup_trials: " << startup
          << ", warmup_steps: " << warmup
          << "}   # medianstop: min_trials_required, start_step (reports counted as steps), "
          << From(es) << "\n";
  }

  std::map<std::string, std::string> names_;  // Katib's parameter name -> hyperpack's
  std::vector<std::string> metric_names_;     // the objective's, then additionalMetricNames
  std::vector<std::string> trial_lines_;      // the collector's lines of the trial section
  std::string namespace_;                     // metadata.namespace
  std::string kind_name_;                     // the trial job's kind
};

}  // namespace

ImportOutcome ImportKatib(const std::string& text, const std::string& filename,
                          const ImportOptions& options) {
  return KatibImporter(filename, options)
      .Run(text, "a Katib Experiment is a mapping with apiVersion, kind: Experiment and spec");
}

}  // namespace internal
}  // namespace hyperpack::study
