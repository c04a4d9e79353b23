#include "hyperpack/study/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <boost/regex.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

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

const char* StrategyName(ObjectiveStrategy s) {
  switch (s) {
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

namespace {

bool IsIdentifier(const std::string& s) {
  static const std::regex kIdent("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s, kIdent);
}

// A metric's name as a name=value line or a JSON member may carry it (val/loss, Validation-acc).
bool IsMetricName(const std::string& s) {
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_./\\-]*");
  return std::regex_match(s, kName);
}

// A parameter's name as other tools' users write them: letters, digits, '_', '.' and '-', not
// starting with '.' or '-' (optimizer.config.learning_rate from W&B with Hydra, NNI's 0_1).
bool IsParamName(const std::string& s) {
  static const std::regex kName("[A-Za-z0-9_][A-Za-z0-9_.\\-]*");
  return std::regex_match(s, kName);
}

// A key of a YAML mapping together with its value; both keep their positions.
struct Field {
  YAML::Node key;
  YAML::Node value;
};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  ParseOutcome Parse(const std::string& text) {
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

  // Text that holds only what `cluster.slurm` holds, e.g. `{partition: gpu, time_limit: 2h}`.
  // Diagnostics name the bare keys ("time_limit"); the positions are keyed as in a study file.
  std::vector<Diagnostic> ParseSlurmOnly(const std::string& text, SlurmSpec* slurm) {
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

 private:
  // Loads YAML text into `root`; false, with the error recorded, when it is not YAML.
  bool Load(const std::string& text, YAML::Node* root) {
    try {
      *root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      errors_.push_back({file_, e.mark.line + 1, e.mark.column + 1, "", "invalid YAML: " + e.msg});
      return false;
    } catch (const YAML::Exception& e) {
      errors_.push_back({file_, 0, 0, "", std::string("invalid YAML: ") + e.what()});
      return false;
    }
    return true;
  }

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
  Diagnostic At(const YAML::Node& at, const std::string& key, std::string message) const {
    Diagnostic d;
    d.file = file_;
    YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    if (!mark.is_null()) {
      d.line = mark.line + 1;
      d.column = mark.column + 1;
    } else if (!last_mark_.is_null()) {
      d.line = last_mark_.line + 1;
      d.column = last_mark_.column + 1;
    }
    d.key = key;
    d.message = std::move(message);
    return d;
  }

  static std::string Describe(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Null:
        return "nothing";
      case YAML::NodeType::Scalar:
        return "'" + node.Scalar() + "'";
      case YAML::NodeType::Sequence:
        return node.size() == 0 ? "an empty list" : "a list";
      case YAML::NodeType::Map:
        return node.size() == 0 ? "an empty mapping" : "a mapping";
      default:
        return "nothing";
    }
  }

  static std::string Path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  // The fields of a mapping; reports unknown and duplicate keys. `allowed` lists the valid keys;
  // with `list_allowed` an unknown key's error lists them even when it has a likely correction.
  std::map<std::string, Field> Fields(const YAML::Node& map, const std::string& path,
                                      const std::vector<std::string>& allowed,
                                      bool list_allowed = false) {
    std::map<std::string, Field> fields;
    if (!map.IsMap()) {
      Error(map, path, "expected a mapping of keys to values, got ", Describe(map));
      return fields;
    }
    if (!map.Mark().is_null()) last_mark_ = map.Mark();
    for (auto it = map.begin(); it != map.end(); ++it) {
      YAML::Node key = it->first;  // a copy: it-> yields a temporary
      if (!key.IsScalar()) {
        Error(key, path, "keys must be plain names");
        continue;
      }
      std::string name = key.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        auto guess = DidYouMean(name, allowed);
        if (guess) {
          Error(key, path, "unknown key '", name, "'; did you mean '", *guess, "'?",
                list_allowed ? " expected one of: " + Join(allowed, ", ") : std::string());
        } else {
          Error(key, path, "unknown key '", name, "'; expected one of: ", Join(allowed, ", "));
        }
        continue;
      }
      if (fields.count(name)) {
        Error(key, Path(path, name), "duplicate key");
        continue;
      }
      fields[name] = Field{key, it->second};
    }
    return fields;
  }

  // The fields of a section's value. An empty value (`trial:` and nothing after it) is reported at
  // its key: yaml-cpp marks an empty node where the next token starts, on a later line.
  std::map<std::string, Field> Fields(const Field& section, const std::string& path,
                                      const std::vector<std::string>& allowed,
                                      bool list_allowed = false) {
    if (section.value.IsNull()) {
      Error(section.key, path, "expected a mapping of keys to values, got nothing");
      return {};
    }
    return Fields(section.value, path, allowed, list_allowed);
  }

  static const Field* Get(const std::map<std::string, Field>& fields, const std::string& name) {
    auto it = fields.find(name);
    return it == fields.end() ? nullptr : &it->second;
  }

  // `owner` is the key whose mapping lacks `key` (the root mapping itself at the top level): a
  // block mapping's own position is its first entry, a line that is not the one at fault.
  void Missing(const YAML::Node& owner, const std::string& path, const std::string& key,
               const std::string& expected) {
    Error(owner, Path(path, key), "missing; expected ", expected);
  }

  // ---- typed scalars ----------------------------------------------------------------------
  std::optional<std::string> String(const Field& f, const std::string& path) {
    if (!f.value.IsScalar() || f.value.Scalar().empty()) {
      Error(f.value.IsNull() ? f.key : f.value, path, "expected text, got ", Describe(f.value));
      return std::nullopt;
    }
    return f.value.Scalar();
  }

  std::optional<double> Number(const Field& f, const std::string& path) {
    if (f.value.IsScalar() && f.value.Tag() != "!") {
      if (auto x = ParseDouble(f.value.Scalar()); x && std::isfinite(*x)) return x;
    }
    Error(f.value.IsNull() ? f.key : f.value, path, "expected a number, got ", Describe(f.value));
    return std::nullopt;
  }

  std::optional<int64_t> Integer(const Field& f, const std::string& path) {
    if (f.value.IsScalar() && f.value.Tag() != "!") {
      if (auto x = ParseInt(f.value.Scalar())) return x;
    }
    Error(f.value.IsNull() ? f.key : f.value, path, "expected a whole number, got ",
          Describe(f.value));
    return std::nullopt;
  }

  std::optional<bool> Bool(const Field& f, const std::string& path) {
    if (f.value.IsScalar() && f.value.Tag() != "!") {
      std::string s = f.value.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
    }
    Error(f.value.IsNull() ? f.key : f.value, path, "expected true or false, got ",
          Describe(f.value));
    return std::nullopt;
  }

  std::optional<double> Duration(const Field& f, const std::string& path) {
    if (!f.value.IsScalar()) {
      Error(f.value.IsNull() ? f.key : f.value, path,
            "expected a duration such as 30s, 10m or 1h30m, got ", Describe(f.value));
      return std::nullopt;
    }
    auto d = ParseDuration(f.value.Scalar());
    if (!d.ok()) {
      Error(f.value, path, d.status().message());
      return std::nullopt;
    }
    return *d;
  }

  // A scalar as a parameter value: quoted scalars are strings; plain ones are booleans, integers
  // or floats when they read as such, strings otherwise.
  static Value InferValue(const std::string& text, bool quoted) {
    if (!quoted) {
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
      if (auto i = ParseInt(text)) return *i;
      if (auto d = ParseDouble(text); d && std::isfinite(*d)) return *d;
    }
    return text;
  }

  // A list or mapping as JSON (keys sorted), its scalars typed as InferValue types them.
  static nlohmann::json YamlToJson(const YAML::Node& node) {
    if (node.IsSequence()) {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    if (node.IsMap()) {
      nlohmann::json out = nlohmann::json::object();
      for (auto it = node.begin(); it != node.end(); ++it)
        out[it->first.Scalar()] = YamlToJson(it->second);
      return out;
    }
    if (!node.IsScalar()) return nullptr;
    return std::visit([](const auto& v) { return nlohmann::json(v); },
                      InferValue(node.Scalar(), node.Tag() == "!"));
  }

  // A structured parameter's value: the JSON text of `node`.
  // Bytes that are not UTF-8 (the file is untrusted) become U+FFFD rather than an exception.
  static Value StructuredValue(const YAML::Node& node) {
    return YamlToJson(node).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  std::optional<Value> ScalarValue(const YAML::Node& node, const YAML::Node& key,
                                   const std::string& path) {
    if (!node.IsScalar()) {
      Error(node.IsNull() ? key : node, path, "expected a number, text or boolean, got ",
            Describe(node));
      return std::nullopt;
    }
    return InferValue(node.Scalar(), node.Tag() == "!");
  }

  // ---- sections ---------------------------------------------------------------------------
  void ParseRoot(const YAML::Node& root, StudySpec* spec) {
    if (!root.IsMap()) {
      Error(root, "", "a study file is a mapping with keys name, objective, search_space, trial");
      return;
    }
    static const std::vector<std::string> kKeys = {
        "name",  "description", "objective", "search_space", "trial",  "tuner",   "budget",
        "queue", "resources",   "pruner",    "cluster",      "export", "priority"};
    auto fields = Fields(root, "", kKeys);

    if (auto* f = Get(fields, "name")) {
      if (auto name = String(*f, "name")) {
        static const std::regex kName("[A-Za-z0-9][A-Za-z0-9_.-]*");
        if (!std::regex_match(*name, kName)) {
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

    if (auto* f = Get(fields, "objective")) {
      ParseObjective(*f, &spec->objective, &spec->metric_patterns);
    } else {
      Missing(root, "", "objective", "{metric: NAME, direction: minimize|maximize}");
    }

    if (auto* f = Get(fields, "search_space")) {
      ParseSpace(*f, &spec->space);
    } else {
      Missing(root, "", "search_space", "a mapping of parameter names to their ranges");
    }

    if (auto* f = Get(fields, "trial")) {
      ParseTrial(*f, spec->space, &spec->trial, &spec->metric_patterns);
    } else {
      Missing(root, "", "trial", "{command: ...}, the command that runs one trial");
    }

    if (auto* f = Get(fields, "tuner")) ParseTuner(*f, &spec->tuner);
    if (auto* f = Get(fields, "budget")) ParseBudget(*f, &spec->budget);
    if (spec->budget.max_failed == 0)
      spec->budget.max_failed = std::max(5, spec->budget.max_trials / 4);
    if (auto* f = Get(fields, "queue")) ParseQueue(*f, &spec->queue);
    if (auto* f = Get(fields, "resources")) ParseResources(*f, spec->space, &spec->resources);
    if (auto* f = Get(fields, "pruner")) ParsePruner(*f, &spec->pruner);
    if (auto* f = Get(fields, "cluster")) ParseCluster(*f, &spec->cluster);
    if (auto* f = Get(fields, "export")) ParseExport(*f, spec->space, &spec->exports);
    if (auto* f = Get(fields, "resources"); f && spec->cluster.slurm) {
      // Slurm may refuse what a trial asks for: its errors point here.
      spec->cluster.slurm->positions.push_back(Position(f->key, "resources"));
    }
  }

  void ParseObjective(const Field& field, Objective* objective,
                      std::vector<MetricPattern>* patterns) {
    auto fields = Fields(field, "objective", {"metric", "direction", "strategy", "regex"});
    if (!field.value.IsMap()) return;
    if (auto* f = Get(fields, "metric")) {
      if (auto m = String(*f, "objective.metric")) {
        if (m->find_first_of(" \t=") != std::string::npos)
          Error(f->value, "objective.metric", "'", *m, "' is not a metric name (no spaces or '=')");
        objective->metric = *m;
      }
    } else {
      Missing(field.key, "objective", "metric", "the name of a metric the trial reports");
    }
    if (auto* f = Get(fields, "direction")) {
      if (auto d = String(*f, "objective.direction")) {
        if (auto parsed = ParseDirection(*d)) {
          objective->direction = *parsed;
        } else {
          auto guess = DidYouMean(*d, {"minimize", "maximize"});
          Error(f->value, "objective.direction", "'", *d, "' is not a direction; expected ",
                guess ? "'" + *guess + "'" : std::string("minimize or maximize"));
        }
      }
    } else {
      Missing(field.key, "objective", "direction", "minimize or maximize");
    }
    if (auto* f = Get(fields, "strategy")) {
      if (auto s = String(*f, "objective.strategy")) {
        static const std::map<std::string, ObjectiveStrategy> kStrategies = {
            {"last", ObjectiveStrategy::kLast},
            {"min", ObjectiveStrategy::kMin},
            {"max", ObjectiveStrategy::kMax},
            {"best", ObjectiveStrategy::kBest}};
        auto it = kStrategies.find(*s);
        if (it == kStrategies.end()) {
          Error(f->value, "objective.strategy", "'", *s,
                "' is not a strategy; expected last, min, max or best");
        } else {
          objective->strategy = it->second;
        }
      }
    }
    if (auto* f = Get(fields, "regex")) {
      if (auto p = MetricRegex(*f, "objective.regex"); p && !objective->metric.empty())
        patterns->push_back({objective->metric, *p});
    }
  }

  // A metric's pattern: a regular expression with exactly one capture group, checked with the
  // library and the syntax the scheduler matches with (Boost.Regex, Perl).
  std::optional<std::string> MetricRegex(const Field& f, const std::string& path) {
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

  void ParseSpace(const Field& field, SearchSpace* space) {
    const YAML::Node& node = field.value;
    // `{}`: nothing to tune, one configuration: the command as it is (a baseline, or what
    // Determined's single searcher runs).
    if (!node.IsMap()) {
      Error(node.IsNull() ? field.key : node, "search_space",
            "expected a mapping of parameter names to their ranges, got ", Describe(node));
      return;
    }
    std::vector<ParamSpec> params;
    std::set<std::string> seen;
    std::map<std::string, std::string> env_names;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        Error(it->first, "search_space", "parameter names must be plain names");
        continue;
      }
      std::string name = it->first.Scalar();
      std::string path = Path("search_space", name);
      if (!IsParamName(name)) {
        Error(it->first, path,
              "not a valid parameter name; use letters, digits, '_', '.' and '-', not starting "
              "with '.' or '-'");
        continue;
      }
      if (!seen.insert(name).second) {
        Error(it->first, path, "duplicate parameter");
        continue;
      }
      // Each parameter reaches the program as HP_<NAME> too: two names may not share one.
      if (auto [other, fresh] = env_names.emplace(ParamEnvName(name), name); !fresh) {
        Error(it->first, path, "'", name, "' and '", other->second, "' would both be passed as ",
              other->first, "; rename one");
        continue;
      }
      if (auto p = ParseParam(name, Field{it->first, it->second}, params)) params.push_back(*p);
      declared_.insert(name);
    }
    *space = SearchSpace(std::move(params));
  }

  std::optional<ParamSpec> ParseParam(const std::string& name, const Field& field,
                                      const std::vector<ParamSpec>& earlier) {
    std::string path = Path("search_space", name);
    ParamSpec p;
    p.name = name;
    const YAML::Node& node = field.value;
    // Shorthands: a list is a categorical, a scalar a fixed value.
    if (node.IsSequence()) {
      p.type = ParamType::kCategorical;
      if (!ParseValues(field, path, &p)) return std::nullopt;
      return p;
    }
    if (node.IsScalar()) {
      p.type = ParamType::kFixed;
      auto v = ScalarValue(node, field.key, path);
      if (!v) return std::nullopt;
      p.value = *v;
      return p;
    }
    if (!node.IsMap()) {
      Error(node.IsNull() ? field.key : node, path,
            "expected {type: float|int|categorical|fixed, ...}, got ", Describe(node));
      return std::nullopt;
    }
    YAML::Node type_node = node["type"];
    if (!type_node.IsDefined()) {
      Error(field.key, Path(path, "type"), "missing; expected float, int, categorical or fixed");
      return std::nullopt;
    }
    std::string type = type_node.IsScalar() ? type_node.Scalar() : "";
    std::vector<std::string> keys;
    if (type == "float") {
      p.type = ParamType::kFloat;
      keys = {"type", "low", "high", "log", "when"};
    } else if (type == "int") {
      p.type = ParamType::kInt;
      keys = {"type", "low", "high", "log", "step", "when"};
    } else if (type == "categorical") {
      p.type = ParamType::kCategorical;
      keys = {"type", "values", "when"};
    } else if (type == "fixed") {
      p.type = ParamType::kFixed;
      keys = {"type", "value", "when"};
    } else {
      auto guess = DidYouMean(type, {"float", "int", "categorical", "fixed"});
      Error(type_node.IsNull() ? field.key : type_node, Path(path, "type"), "'", type,
            "' is not a parameter type; expected ",
            guess ? "'" + *guess + "'" : std::string("float, int, categorical or fixed"));
      return std::nullopt;
    }
    size_t errors_before = errors_.size();
    auto fields = Fields(node, path, keys);

    if (p.type == ParamType::kFloat || p.type == ParamType::kInt) {
      ParseRange(field.key, path, fields, &p);
    } else if (p.type == ParamType::kCategorical) {
      if (auto* f = Get(fields, "values")) {
        ParseValues(*f, Path(path, "values"), &p);
      } else {
        Missing(field.key, path, "values", "a list such as [sgd, adamw]");
      }
    } else {
      if (auto* f = Get(fields, "value")) {
        p.structured = f->value.IsSequence() || f->value.IsMap() || f->value.IsNull();
        if (p.structured)
          p.value = StructuredValue(f->value);
        else if (auto v = ScalarValue(f->value, f->key, Path(path, "value")))
          p.value = *v;
      } else {
        Missing(field.key, path, "value", "the parameter's one value");
      }
    }
    if (auto* f = Get(fields, "when")) ParseCondition(*f, Path(path, "when"), earlier, &p);
    if (errors_.size() != errors_before) return std::nullopt;
    return p;
  }

  void ParseRange(const YAML::Node& owner, const std::string& path,
                  const std::map<std::string, Field>& fields, ParamSpec* p) {
    bool is_int = p->type == ParamType::kInt;
    const Field* low = Get(fields, "low");
    const Field* high = Get(fields, "high");
    if (!low) Missing(owner, path, "low", is_int ? "the smallest value" : "the lower bound");
    if (!high) Missing(owner, path, "high", is_int ? "the largest value" : "the upper bound");
    if (const Field* f = Get(fields, "log")) {
      if (auto b = Bool(*f, Path(path, "log"))) p->log = *b;
    }
    if (const Field* f = Get(fields, "step")) {
      if (auto s = Integer(*f, Path(path, "step"))) {
        if (*s < 1) {
          Error(f->value, Path(path, "step"), "must be >= 1 (got ", *s, ")");
        } else if (p->log && *s != 1) {
          Error(f->value, Path(path, "step"),
                "cannot be combined with log: true; list the values as a categorical instead");
        } else {
          p->step = *s;
        }
      }
    }
    if (!low || !high) return;
    std::optional<double> lo, hi;
    if (is_int) {
      auto l = Integer(*low, Path(path, "low"));
      auto h = Integer(*high, Path(path, "high"));
      if (l) lo = static_cast<double>(*l);
      if (h) hi = static_cast<double>(*h);
    } else {
      lo = Number(*low, Path(path, "low"));
      hi = Number(*high, Path(path, "high"));
    }
    if (!lo || !hi) return;
    p->low = *lo;
    p->high = *hi;
    if (p->log && *lo <= 0) {
      Error(low->value, Path(path, "low"), "must be > 0 when log: true (got ", low->value.Scalar(),
            ")");
      return;
    }
    if (is_int ? *hi < *lo : *hi <= *lo) {
      Error(high->value, Path(path, "high"), "must be ", is_int ? ">=" : ">", " low (",
            low->value.Scalar(), "), got ", high->value.Scalar());
      return;
    }
    if (is_int) WarnIfOneValue(path, *high, Get(fields, "step"), *p);
  }

  // An int range that holds a single value is valid (the study runs) but rarely meant: the
  // parameter is never tuned. A float range cannot collapse (high must be > low) and has no step.
  void WarnIfOneValue(const std::string& path, const Field& high, const Field* step,
                      const ParamSpec& p) {
    const auto lo = static_cast<int64_t>(p.low);
    const auto hi = static_cast<int64_t>(p.high);
    if (lo == hi) {
      Warning(high.value, path, "low and high are both ", lo,
              ", so the range holds one value; to tune it, raise high above ", lo,
              "; to pin it, write {type: fixed, value: ", lo, "}");
    } else if (step && p.step > hi - lo) {
      Warning(step->value, path, "step ", p.step, " leaves one value (", lo, ") between low ", lo,
              " and high ", hi, "; to tune it, raise high to at least ", lo + p.step,
              " or lower the step to at most ", hi - lo,
              "; to pin it, write {type: fixed, value: ", lo, "}");
    }
  }

  bool ParseValues(const Field& field, const std::string& path, ParamSpec* p) {
    const YAML::Node& list = field.value;
    if (!list.IsSequence() || list.size() == 0) {
      Error(list.IsNull() ? field.key : list, path, "expected a non-empty list of values, got ",
            Describe(list));
      return false;
    }
    bool ok = true;
    // Values that are lists or mappings make every value JSON text (ParamSpec::structured).
    for (YAML::Node item : list) p->structured = p->structured || item.IsSequence() || item.IsMap();
    for (YAML::Node item : list) {
      auto v = p->structured ? std::optional<Value>(StructuredValue(item))
                             : ScalarValue(item, field.key, path);
      if (!v) {
        ok = false;
        continue;
      }
      for (const Value& other : p->values) {
        if (ValuesEqual(other, *v)) {  // 1 and 1.0 are one value to a sampler
          Error(item, path, "duplicate value ", FormatValue(*v));
          ok = false;
        }
      }
      p->values.push_back(*v);
    }
    return ok;
  }

  void ParseCondition(const Field& f, const std::string& path,
                      const std::vector<ParamSpec>& earlier, ParamSpec* p) {
    auto text = String(f, path);
    if (!text) return;
    static const std::regex kCond(
        R"(^\s*([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*(==|!=|\bin\b)\s*(.+?)\s*$)");
    std::smatch m;
    if (!std::regex_match(*text, m, kCond)) {
      Error(f.value, path, "'", *text,
            "' is not a condition; expected 'PARAM == VALUE', 'PARAM != VALUE' or "
            "'PARAM in [A, B]'");
      return;
    }
    Condition c;
    c.parent = m[1];
    c.text = *text;
    std::string op = m[2];
    std::string rhs = m[3];
    c.op = op == "==" ? Condition::Op::kEq : op == "!=" ? Condition::Op::kNe : Condition::Op::kIn;
    auto parent = std::find_if(earlier.begin(), earlier.end(),
                               [&](const ParamSpec& q) { return q.name == c.parent; });
    if (parent == earlier.end()) {
      if (declared_.count(c.parent)) return;  // declared earlier but invalid: already reported
      std::vector<std::string> names;
      for (const ParamSpec& q : earlier) names.push_back(q.name);
      auto guess = DidYouMean(c.parent, names);
      Error(f.value, path, "'", c.parent, "' is not a parameter declared before '", p->name, "'",
            guess ? "; did you mean '" + *guess + "'?" : std::string(""));
      return;
    }
    if (parent->type == ParamType::kFloat) {
      Error(f.value, path, "conditions on a float parameter ('", c.parent,
            "') are not supported; use a categorical, int or fixed parent");
      return;
    }
    std::vector<std::string> items;
    if (c.op == Condition::Op::kIn) {
      if (rhs.size() < 2 || rhs.front() != '[' || rhs.back() != ']') {
        Error(f.value, path, "expected a list after 'in', e.g. ", c.parent, " in [a, b]");
        return;
      }
      std::stringstream ss(rhs.substr(1, rhs.size() - 2));
      for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
    } else {
      items.push_back(rhs);
    }
    for (std::string item : items) {
      item = std::regex_replace(item, std::regex(R"(^\s+|\s+$)"), "");
      bool quoted = item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
                    item.back() == item.front();
      if (quoted) item = item.substr(1, item.size() - 2);
      Value v = InferValue(item, quoted);
      if (!parent->Contains(v)) {
        std::vector<std::string> options;
        for (const Value& o : parent->values) options.push_back(FormatValue(o));
        auto guess = DidYouMean(item, options);
        Error(f.value, path, "'", item, "' is not a value of '", c.parent, "'",
              guess             ? "; did you mean '" + *guess + "'?"
              : options.empty() ? std::string("")
                                : "; expected one of: " + Join(options, ", "));
        return;
      }
      c.values.push_back(v);
    }
    p->when = std::move(c);
  }

  void CheckPlaceholders(const YAML::Node& node, const std::string& path, const std::string& text,
                         const SearchSpace& space) {
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
      Error(
          node, path, "'{", n, "}' is not a parameter",
          guess ? "; did you mean '{" + *guess + "}'?" : "; expected one of: " + Join(known, ", "));
    }
  }

  void ParseTrial(const Field& field, const SearchSpace& space, TrialSpec* trial,
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

  // `trial.metrics_path`: given exactly when metrics come from files.
  void ParseMetricsPath(const Field& trial_field, const std::map<std::string, Field>& fields,
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

  // `trial.metrics: {NAME: PATTERN, ...}`: metrics read from lines the trial prints its own way.
  void ParseMetrics(const Field& field, std::vector<MetricPattern>* patterns) {
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

  void ParseTuner(const Field& field, TunerSpec* tuner) {
    auto fields =
        Fields(field, "tuner",
               {"algorithm", "seed", "initial_trials", "acquisition", "warm_start", "cost_aware"});
    using tuner::Acquisition;
    using tuner::TunerAlgorithm;
    OneOf(fields, "tuner", "algorithm",
          {TunerAlgorithm::kGp, TunerAlgorithm::kRandom, TunerAlgorithm::kSobol},
          tuner::TunerAlgorithmName, &tuner->algorithm);
    OneOf(fields, "tuner", "acquisition", {Acquisition::kEi, Acquisition::kUcb},
          tuner::AcquisitionName, &tuner->acquisition);
    if (auto* f = Get(fields, "seed")) {
      if (auto s = Integer(*f, "tuner.seed")) {
        if (*s < 0) {
          Error(f->value, "tuner.seed", "must be >= 0 (got ", *s, ")");
        } else {
          tuner->seed = static_cast<uint64_t>(*s);
        }
      }
    }
    if (auto* f = Get(fields, "initial_trials")) {
      if (auto n = Integer(*f, "tuner.initial_trials")) {
        if (*n < 1 || *n > 100000) {
          Error(f->value, "tuner.initial_trials", "must be between 1 and 100000 (got ", *n, ")");
        } else {
          tuner->initial_trials = static_cast<int>(*n);
        }
      }
    }
    if (auto* f = Get(fields, "warm_start")) {
      if (auto w = String(*f, "tuner.warm_start")) tuner->warm_start = *w;
    }
    if (auto* f = Get(fields, "cost_aware")) tuner->cost_aware = Bool(*f, "tuner.cost_aware");
  }

  void ParseQueue(const Field& field, QueueSpec* queue) {
    auto fields = Fields(field, "queue", {"order", "aging", "max_wait"});
    if (!field.value.IsMap()) return;
    using scheduler::Order;
    if (Get(fields, "order")) {
      Order order = Order::kShortestFirst;  // overwritten, or the file has an error
      OneOf(fields, "queue", "order", {Order::kArrival, Order::kShortestFirst},
            scheduler::OrderName, &order);
      queue->order = order;
    }
    if (auto* f = Get(fields, "aging")) {
      if (auto v = Number(*f, "queue.aging")) {
        if (!std::isfinite(*v) || *v < 0 || *v > 1e6) {
          Error(f->value, "queue.aging",
                "must be a number >= 0, the seconds of predicted run time forgiven per second "
                "waited, e.g. 1 (got ",
                FormatDouble(*v), ")");
        } else {
          queue->aging = *v;
        }
      }
    }
    if (auto* f = Get(fields, "max_wait")) {
      // 0 or none turns the starvation guard off.
      if (f->value.IsScalar() && (f->value.Scalar() == "0" || f->value.Scalar() == "none")) {
        queue->max_wait_s = 0;
      } else {
        queue->max_wait_s = Duration(*f, "queue.max_wait");
      }
    }
  }

  void ParsePruner(const Field& field, PrunerSpec* pruner) {
    auto fields =
        Fields(field, "pruner",
               {"algorithm", "resource", "min_resource", "max_resource", "reduction_factor", "mode",
                "warmup_steps", "startup_trials", "in_place"});
    if (!field.value.IsMap()) return;
    using tuner::PrunerAlgorithm;
    using tuner::PrunerMode;
    OneOf(fields, "pruner", "algorithm",
          {PrunerAlgorithm::kNone, PrunerAlgorithm::kMedian, PrunerAlgorithm::kAsha,
           PrunerAlgorithm::kHyperband},
          tuner::PrunerAlgorithmName, &pruner->algorithm);
    OneOf(fields, "pruner", "resource", {PrunerResource::kEpoch, PrunerResource::kStep},
          ResourceName, &pruner->resource);
    OneOf(fields, "pruner", "mode", {PrunerMode::kStop, PrunerMode::kPromote},
          tuner::PrunerModeName, &pruner->mode);
    auto number = [&](const char* key, double low, bool inclusive, const char* expected,
                      double* out) -> const Field* {
      const Field* f = Get(fields, key);
      if (!f) return nullptr;
      std::string path = Path("pruner", key);
      auto v = Number(*f, path);
      if (!v) return nullptr;
      if (!std::isfinite(*v) || (inclusive ? *v < low : *v <= low)) {
        Error(f->value, path, "must be ", expected, " (got ", FormatDouble(*v), ")");
        return nullptr;
      }
      *out = *v;
      return f;
    };
    number("min_resource", 0, false, "> 0", &pruner->min_resource);
    const Field* max = number("max_resource", 0, false, "> 0", &pruner->max_resource);
    number("reduction_factor", 1, false, "> 1, e.g. 3", &pruner->reduction_factor);
    number("warmup_steps", 0, true, ">= 0", &pruner->warmup_steps);
    if (const Field* f = Get(fields, "startup_trials")) {
      if (auto n = Integer(*f, "pruner.startup_trials")) {
        if (*n < 0 || *n > 1000000) {
          Error(f->value, "pruner.startup_trials", "must be between 0 and 1000000 (got ", *n, ")");
        } else {
          pruner->startup_trials = static_cast<int>(*n);
        }
      }
    }
    if (const Field* f = Get(fields, "in_place")) {
      if (auto b = Bool(*f, "pruner.in_place")) pruner->in_place = *b;
    }
    bool rungs = pruner->algorithm == tuner::PrunerAlgorithm::kAsha ||
                 pruner->algorithm == tuner::PrunerAlgorithm::kHyperband;
    if (rungs && !Get(fields, "max_resource")) {
      Missing(field.key, "pruner", "max_resource",
              "the epochs (or steps) a full trial trains, e.g. max_resource: 27");
    } else if (rungs && max && pruner->max_resource <= pruner->min_resource) {
      Error(max->value, "pruner.max_resource", "must be greater than min_resource (",
            FormatDouble(pruner->min_resource), ")");
    }
  }

  void ParseBudget(const Field& field, BudgetSpec* budget) {
    auto fields = Fields(field, "budget",
                         {"max_trials", "max_parallel", "max_failed", "max_attempts", "time_limit",
                          "gpu_hours", "core_hours"});
    auto positive = [&](const char* key, int* out) {
      const Field* f = Get(fields, key);
      if (!f) return;
      std::string path = Path("budget", key);
      auto v = Integer(*f, path);
      if (!v) return;
      if (*v < 1 || *v > 1000000) {
        Error(f->value, path, "must be between 1 and 1000000 (got ", *v, ")");
        return;
      }
      *out = static_cast<int>(*v);
    };
    positive("max_trials", &budget->max_trials);
    positive("max_parallel", &budget->max_parallel);
    positive("max_failed", &budget->max_failed);
    positive("max_attempts", &budget->max_attempts);
    if (auto* f = Get(fields, "time_limit"))
      budget->time_limit_s = Duration(*f, "budget.time_limit");
    auto hours = [&](const char* key, std::optional<double>* out) {
      const Field* f = Get(fields, key);
      if (!f) return;
      std::string path = Path("budget", key);
      auto v = Number(*f, path);
      if (!v) return;
      if (!std::isfinite(*v) || *v <= 0 || *v > 1e9) {
        Error(f->value, path, "must be a number of hours > 0, e.g. 40 (got ", FormatDouble(*v),
              ")");
        return;
      }
      *out = *v;
    };
    hours("gpu_hours", &budget->gpu_hours);
    hours("core_hours", &budget->core_hours);
  }

  void ParseResources(const Field& field, const SearchSpace& space, ResourceSpec* resources) {
    auto fields = Fields(field, "resources", {"gpus", "cpus"});
    auto expr = [&](const char* key) -> std::optional<Expression> {
      const Field* f = Get(fields, key);
      if (!f) return std::nullopt;
      std::string path = Path("resources", key);
      if (!f->value.IsScalar()) {
        Error(f->value.IsNull() ? f->key : f->value, path,
              "expected a number or an expression such as \"{data_parallel}\", got ",
              Describe(f->value));
        return std::nullopt;
      }
      auto e = Expression::Parse(f->value.Scalar());
      if (!e.ok()) {
        Error(f->value, path, e.status().message());
        return std::nullopt;
      }
      for (const std::string& ref : e->references()) {
        const ParamSpec* p = space.Find(ref);
        if (p == nullptr && declared_.count(ref)) return std::nullopt;  // already reported
        if (p == nullptr) {
          std::vector<std::string> names;
          for (const ParamSpec& q : space.params()) names.push_back(q.name);
          auto guess = DidYouMean(ref, names);
          Error(f->value, path, "'{", ref, "}' is not a parameter",
                guess ? "; did you mean '{" + *guess + "}'?" : std::string(""));
          return std::nullopt;
        }
        if (p->when) {
          Error(f->value, path, "'{", ref, "}' is conditional (", p->when->text,
                ") and has no value in some trials");
          return std::nullopt;
        }
      }
      if (e->references().empty()) {
        auto v = e->Evaluate({});
        if (!v.ok() || *v < 0) {
          Error(f->value, path, "must be >= 0");
          return std::nullopt;
        }
      }
      return *e;
    };
    resources->gpus = expr("gpus");
    resources->cpus = expr("cpus");
  }

  // `export: {roles: {ROLE: PARAM or VALUE}}`.
  void ParseExport(const Field& field, const SearchSpace& space, ExportSpec* exports) {
    auto fields = Fields(field, "export", {"roles"}, /*list_allowed=*/true);
    const Field* f = Get(fields, "roles");
    if (!f) return;
    std::vector<std::string> names;
    for (TrainingRole role : kAllTrainingRoles) names.push_back(TrainingRoleName(role));
    for (const auto& [name, entry] : Fields(*f, "export.roles", names, /*list_allowed=*/true)) {
      // Fields() admitted only the roles' names. An init-capture: clang before 16 (the fuzzers'
      // compiler) cannot capture a structured binding itself.
      TrainingRole role =
          *std::find_if(std::begin(kAllTrainingRoles), std::end(kAllTrainingRoles),
                        [&key = name](TrainingRole r) { return key == TrainingRoleName(r); });
      std::string path = "export.roles." + name;
      auto value = ScalarValue(entry.value, entry.key, path);
      if (!value) continue;
      if (auto* text = std::get_if<std::string>(&*value); text && space.Find(*text)) {
        exports->roles[role] = RoleSource{*text, std::nullopt};
        continue;
      }
      if (std::string why = FixedRoleProblem(role, *value); !why.empty()) {
        std::vector<std::string> params;
        for (const ParamSpec& p : space.params()) params.push_back(p.name);
        Error(entry.value, path, "'", entry.value.Scalar(),
              "' is not a parameter of search_space (", Join(params, ", "), ") nor ", why);
        continue;
      }
      exports->roles[role] = RoleSource{"", *value};
    }
  }

  // Empty when `value` is a valid fixed value of `role`; else what such a value would be.
  static std::string FixedRoleProblem(TrainingRole role, const Value& value) {
    const double* d = std::get_if<double>(&value);
    const int64_t* i = std::get_if<int64_t>(&value);
    const std::string* text = std::get_if<std::string>(&value);
    double number = d ? *d : i ? static_cast<double>(*i) : std::nan("");
    switch (role) {
      case TrainingRole::kMicroBatch:
      case TrainingRole::kGlobalBatch:
      case TrainingRole::kDataParallel:
      case TrainingRole::kAccumulation:
        return i && *i >= 1 ? "" : "a whole number >= 1";
      case TrainingRole::kWarmupSteps:
        return i && *i >= 0 ? "" : "a whole number >= 0";
      case TrainingRole::kWarmupRatio:
        return number >= 0 && number < 1 ? "" : "a fraction in [0, 1)";
      case TrainingRole::kLearningRate:
      case TrainingRole::kWeightDecay:
      case TrainingRole::kMomentum:
        return number >= 0 ? "" : "a number >= 0";
      case TrainingRole::kPrecision:
        return text && (*text == "fp32" || *text == "fp16" || *text == "bf16")
                   ? ""
                   : "a precision: fp32, fp16 or bf16";
      case TrainingRole::kOptimizer:
        return text && (*text == "sgd" || *text == "adam" || *text == "adamw")
                   ? ""
                   : "an optimizer: sgd, adam or adamw";
    }
    return "a valid value";
  }

  // `cluster:`: where the trials run; absent, on this machine or `hyperpack serve`'s agents.
  void ParseCluster(const Field& field, ClusterSpec* cluster) {
    auto fields = Fields(field, "cluster", {"slurm"}, /*list_allowed=*/true);
    const Field* f = Get(fields, "slurm");
    if (!f) return;
    if (f->value.IsNull()) {
      Error(f->key, "cluster.slurm",
            "expected a mapping of keys to values, got nothing; for the cluster's defaults write "
            "slurm: {}");
      return;
    }
    SlurmSpec slurm;
    slurm.positions.push_back(Position(f->key, "cluster.slurm"));
    ParseSlurm(*f, "cluster.slurm", &slurm);
    cluster->slurm = std::move(slurm);
  }

  // The keys of `cluster.slurm` (and of `--slurm`, where `path` is empty). Each key present gets a
  // SourcePos at its value, keyed "cluster.slurm.NAME" whatever `path` is.
  void ParseSlurm(const Field& field, const std::string& path, SlurmSpec* slurm) {
    static const std::vector<std::string> kKeys = {
        "partition",  "account",       "qos",           "constraint", "time_limit",
        "mem",        "cpus_per_task", "gpus_per_node", "gres",       "signal",
        "extra_args", "poll_interval", "pending_limit"};
    auto fields = Fields(field, path, kKeys, /*list_allowed=*/true);
    for (const std::string& name : kKeys) {
      if (const Field* f = Get(fields, name))
        slurm->positions.push_back(
            Position(f->value.IsNull() ? f->key : f->value, "cluster.slurm." + name));
    }
    auto text = [&](const char* key, std::string* out) {
      if (const Field* f = Get(fields, key)) {
        if (auto v = String(*f, Path(path, key))) *out = *v;
      }
    };
    text("partition", &slurm->partition);
    text("account", &slurm->account);
    text("qos", &slurm->qos);
    text("constraint", &slurm->constraint);
    if (const Field* f = Get(fields, "time_limit"))
      slurm->time_limit_s = TimeLimit(*f, Path(path, "time_limit"));
    if (const Field* f = Get(fields, "mem")) {
      if (auto m = Memory(*f, Path(path, "mem"))) slurm->mem = *m;
    }
    auto count = [&](const char* key, int* out) {
      const Field* f = Get(fields, key);
      if (!f) return;
      std::string key_path = Path(path, key);
      auto v = Integer(*f, key_path);
      if (!v) return;
      if (*v < 1 || *v > 1000000) {
        Error(f->value, key_path, "must be between 1 and 1000000 (got ", *v, ")");
        return;
      }
      *out = static_cast<int>(*v);
    };
    count("cpus_per_task", &slurm->cpus_per_task);
    count("gpus_per_node", &slurm->gpus_per_node);
    if (const Field* f = Get(fields, "gres")) {
      if (auto g = Bool(*f, Path(path, "gres"))) slurm->gres = *g;
    }
    if (const Field* f = Get(fields, "signal")) {
      if (auto s = Signal(*f, Path(path, "signal"))) slurm->signal = *s;
    }
    if (const Field* f = Get(fields, "extra_args"))
      slurm->extra_args = ExtraArgs(*f, Path(path, "extra_args"));
    if (const Field* f = Get(fields, "poll_interval")) {
      std::string key = Path(path, "poll_interval");
      if (auto d = Duration(*f, key)) {
        if (*d < 0.2) {
          Error(f->value, key, "must be at least 0.2s (got ", FormatDouble(*d), "s)");
        } else {
          slurm->poll_s = *d;
        }
      }
    }
    if (const Field* f = Get(fields, "pending_limit")) {
      if (auto d = Duration(*f, Path(path, "pending_limit"))) slurm->pending_limit_s = *d;
    }
  }

  // An amount of memory as Slurm writes it: digits, then K, M, G or T (megabytes without one).
  // Checked by hand, not with std::regex, whose recursion a long value would overflow.
  std::optional<std::string> Memory(const Field& f, const std::string& key) {
    bool ok = f.value.IsScalar();
    if (ok) {
      const std::string& v = f.value.Scalar();
      size_t digits = 0;
      while (digits < v.size() && std::isdigit(static_cast<unsigned char>(v[digits]))) ++digits;
      const size_t rest = v.size() - digits;
      ok = digits > 0 && (rest == 0 || (rest == 1 && std::strchr("KMGT", v.back()) != nullptr));
    }
    if (ok) return f.value.Scalar();
    Error(f.value.IsNull() ? f.key : f.value, key,
          f.value.IsScalar() ? "'" + f.value.Scalar() + "' is not an amount of memory"
                             : "expected an amount of memory, got " + Describe(f.value),
          "; write it as Slurm does, e.g. 16G, 512M or 4000 (megabytes)");
    return std::nullopt;
  }

  // sbatch options, each one item that starts with '-'.
  std::vector<std::string> ExtraArgs(const Field& f, const std::string& key) {
    std::vector<std::string> args;
    if (!f.value.IsSequence()) {
      Error(f.value.IsNull() ? f.key : f.value, key,
            "expected a list of sbatch options such as [--exclusive], got ", Describe(f.value));
      return args;
    }
    for (YAML::Node item : f.value) {
      if (!item.IsScalar() || item.Scalar().empty() || item.Scalar()[0] != '-') {
        Error(item, key, Describe(item),
              " is not an sbatch option; each item starts with '-' and holds its value too, "
              "e.g. --exclusive or --nodelist=n01");
        continue;
      }
      args.push_back(item.Scalar());
    }
    return args;
  }

  // A Slurm time limit in seconds: a duration as elsewhere in the file (2h, 90m, 1h30m, 1d) or
  // one as Slurm writes it: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS. As to Slurm, a bare
  // number is minutes: "90" is an hour and a half.
  std::optional<double> TimeLimit(const Field& f, const std::string& path) {
    static const std::string kExpected =
        "expected e.g. 2h, 90m or 1h30m, or as Slurm writes it: 90 (minutes), 1:30:00 or "
        "1-12:00:00";
    if (!f.value.IsScalar()) {
      Error(f.value.IsNull() ? f.key : f.value, path, kExpected, ", got ", Describe(f.value));
      return std::nullopt;
    }
    const std::string& text = f.value.Scalar();
    static const std::regex kSlurm(R"((?:([0-9]+)-)?([0-9]+)(?::([0-9]+))?(?::([0-9]+))?)");
    std::smatch m;
    if (std::regex_match(text, m, kSlurm)) {
      std::vector<double> parts;  // the numbers after the days, in order
      for (int i = 2; i <= 4; ++i) {
        if (!m[i].matched) continue;
        auto n = ParseInt(m[i].str());
        if (!n) {
          Error(f.value, path, "'", text, "' is too long a time limit");
          return std::nullopt;
        }
        parts.push_back(static_cast<double>(*n));
      }
      double seconds = 0;
      if (m[1].matched) {  // D-HH, D-HH:MM, D-HH:MM:SS
        auto days = ParseInt(m[1].str());
        if (!days) {
          Error(f.value, path, "'", text, "' is too long a time limit");
          return std::nullopt;
        }
        static const double kUnits[] = {3600, 60, 1};
        seconds = static_cast<double>(*days) * 86400;
        for (size_t i = 0; i < parts.size(); ++i) seconds += parts[i] * kUnits[i];
      } else if (parts.size() == 1) {  // MM
        seconds = parts[0] * 60;
      } else if (parts.size() == 2) {  // MM:SS
        seconds = parts[0] * 60 + parts[1];
      } else {  // HH:MM:SS
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2];
      }
      if (seconds <= 0) {
        Error(f.value, path, "must be > 0 (got ", text,
              "); leave time_limit out for the partition's default");
        return std::nullopt;
      }
      return seconds;
    }
    if (auto x = ParseDouble(text)) {
      if (*x <= 0) {
        Error(f.value, path, "must be > 0 (got ", text,
              "); leave time_limit out for the partition's default");
      } else {
        Error(f.value, path, "'", text,
              "' is not a time limit: a bare number is whole minutes, as Slurm reads it; ",
              kExpected);
      }
      return std::nullopt;
    }
    auto d = ParseDuration(text);
    if (!d.ok()) {
      Error(f.value, path, "'", text, "' is not a time limit; ", kExpected);
      return std::nullopt;
    }
    return *d;
  }

  // sbatch --signal: [B:]NAME@SECONDS (USR1@90, B:SIGUSR1@120); "", false or none for no signal.
  std::optional<std::string> Signal(const Field& f, const std::string& path) {
    static const std::string kExpected =
        "expected [B:]NAME@SECONDS such as USR1@90 or B:SIGUSR1@120, or false for no signal";
    if (!f.value.IsScalar()) {
      Error(f.value.IsNull() ? f.key : f.value, path, kExpected, ", got ", Describe(f.value));
      return std::nullopt;
    }
    const std::string& text = f.value.Scalar();
    if (text.empty() || text == "none" || text == "false" || text == "False" || text == "FALSE")
      return std::string();
    static const std::regex kSignal("(B:)?([A-Z][A-Z0-9]*|[0-9]+)@([0-9]+)");
    std::smatch m;
    if (!std::regex_match(text, m, kSignal)) {
      Error(f.value, path, "'", text, "' is not a signal; ", kExpected);
      return std::nullopt;
    }
    auto seconds = ParseInt(m[3].str());
    if (!seconds || *seconds > 65535) {
      Error(f.value, path, "the warning must come at most 65535 seconds ahead (got ", m[3].str(),
            ")");
      return std::nullopt;
    }
    return text;
  }

  // Where `node` was written, for errors found after parsing.
  SourcePos Position(const YAML::Node& node, std::string key) const {
    SourcePos pos;
    pos.file = file_;
    YAML::Mark mark = node.Mark();
    if (!mark.is_null()) {
      pos.line = mark.line + 1;
      pos.column = mark.column + 1;
    }
    pos.key = std::move(key);
    return pos;
  }

  std::string file_;
  std::vector<Diagnostic> errors_;
  std::vector<Diagnostic> warnings_;
  // Every parameter name declared so far, including those dropped from the space for their own
  // errors: a reference to one of those is not reported again as an unknown parameter.
  std::set<std::string> declared_;
  YAML::Mark last_mark_ = YAML::Mark::null_mark();
};

}  // namespace

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

}  // namespace hyperpack::study
