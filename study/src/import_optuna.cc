// optuna.h's ImportOptunaStudy: an Optuna study's distributions made one search space, its
// directions objectives, its trials hyperpack's, and the study file written out.
//
// Distributions are read in every form Optuna's json_to_distribution reads: Float, Int and
// Categorical, the abbreviated {"type": "float", ...} and the names of Optuna 2 (Uniform,
// LogUniform, DiscreteUniform, IntUniform, IntLogUniform) that an upgraded database may keep.
// A parameter's distributions across the trials are merged (the widest range, every choice) as
// Optuna's dynamic ranges allow; a float's step has no counterpart here and is dropped, saying so.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyperpack/study/optuna.h"
#include "hyperpack/text.h"
#include "optuna_internal.h"

namespace hyperpack::study {
namespace {

using internal::At;
using internal::Number;
using internal::StringAt;
using Json = nlohmann::json;

struct Dist {
  enum class Kind { kFloat, kInt, kCategorical };
  Kind kind = Kind::kFloat;
  double low = 0, high = 0;
  bool log = false;
  std::optional<double> step;  // Float: its grid; Int: 1 unless given
  std::vector<Json> choices;   // Categorical
};

// An Optuna 2 name: {kind, log, the attribute holding the step}.
struct OldName {
  const char* name;
  Dist::Kind kind;
  bool log;
  const char* step;
};
constexpr OldName kOldNames[] = {{"UniformDistribution", Dist::Kind::kFloat, false, nullptr},
                                 {"LogUniformDistribution", Dist::Kind::kFloat, true, nullptr},
                                 {"DiscreteUniformDistribution", Dist::Kind::kFloat, false, "q"},
                                 {"IntUniformDistribution", Dist::Kind::kInt, false, "step"},
                                 {"IntLogUniformDistribution", Dist::Kind::kInt, true, "step"}};

Result<Dist> Range(const Json& a, Dist::Kind kind, bool log, const char* step_key) {
  Dist d;
  d.kind = kind;
  const Json log_flag = At(a, "log");
  if (!log_flag.is_null() && !log_flag.is_boolean())
    return Status::Invalid("a range whose 'log' is ", log_flag.dump().substr(0, 40),
                           ", not true or false");
  d.log = log || (log_flag.is_boolean() && log_flag.get<bool>());
  std::optional<double> low = Number(At(a, "low")), high = Number(At(a, "high"));
  if (!low || !high) return Status::Invalid("a range without its low and high");
  d.low = *low;
  d.high = *high;
  if (step_key && !At(a, step_key).is_null()) {
    d.step = Number(At(a, step_key));
    if (!d.step) return Status::Invalid("a step that is not a number");
  }
  if (kind == Dist::Kind::kInt && !d.step) d.step = 1;
  // Integers beyond 2^53 are not whole doubles; Optuna's own are far inside.
  const double bound = kind == Dist::Kind::kInt ? 9007199254740992.0 : HUGE_VAL;
  if (!(std::fabs(d.low) < bound && std::fabs(d.high) < bound && d.low <= d.high))
    return Status::Invalid("a range [", d.low, ", ", d.high, "] that is not one");
  if (d.step && !(*d.step > 0 && *d.step < bound))
    return Status::Invalid("a step of ", *d.step, ", which is not a positive number");
  return d;
}

Result<Dist> DistributionOf(const Json& j, const std::string& text) {
  if (!j.is_object())
    return Status::Invalid("its distribution is not JSON (", text.substr(0, 60), ")");
  const std::string name = StringAt(j, "name");
  const Json a = At(j, "attributes");
  const std::string type = StringAt(j, "type");
  if (name == "CategoricalDistribution" || type == "categorical") {
    Dist d;
    d.kind = Dist::Kind::kCategorical;
    const Json choices = name.empty() ? At(j, "choices") : At(a, "choices");
    if (!choices.is_array() || choices.empty())
      return Status::Invalid("a categorical without choices");
    d.choices.assign(choices.begin(), choices.end());
    return d;
  }
  if (name == "FloatDistribution") return Range(a, Dist::Kind::kFloat, false, "step");
  if (name == "IntDistribution") return Range(a, Dist::Kind::kInt, false, "step");
  if (type == "float" || type == "int")
    return Range(j, type == "int" ? Dist::Kind::kInt : Dist::Kind::kFloat, false, "step");
  for (const OldName& old : kOldNames)
    if (name == old.name) return Range(a, old.kind, old.log, old.step);
  return Status::Invalid("its distribution '", name.empty() ? type : name,
                         "' is not one Optuna writes");
}

// The file's JSON, read with no exception let out (a field of a type Optuna does not write is an
// error value).
Result<Dist> ParseDistribution(const std::string& text) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    return DistributionOf(j, text);
  } catch (const Json::exception& e) {
    return Status::Invalid("its distribution (", text.substr(0, 60),
                           ") has a field of a type "
                           "Optuna does not write: ",
                           e.what());
  }
}

// A categorical choice as a hyperpack value: Optuna's are None, bool, int, float or str.
Result<Value> Choice(const Json& c) {
  if (c.is_boolean()) return Value(c.get<bool>());
  if (c.is_number_integer()) return Value(c.get<int64_t>());
  if (c.is_number()) return Value(c.get<double>());
  if (c.is_string()) return Value(c.get<std::string>());
  return Status::Invalid("a choice of ", c.dump(),
                         ", which a hyperpack categorical cannot hold (booleans, numbers and "
                         "text only)");
}

// A categorical's internal value (the index of a choice) as an index.
Result<size_t> ChoiceIndex(const Dist& d, double internal) {
  const double index = std::round(internal);
  if (!(index >= 0 && index < static_cast<double>(d.choices.size())))
    return Status::Invalid("choice index ", internal, " is past its ", d.choices.size(),
                           " choices");
  return static_cast<size_t>(index);
}

// The value a trial holds, from its own distribution and Optuna's internal form.
Result<Value> External(const Dist& d, double internal) {
  if (!std::isfinite(internal)) return Status::Invalid("a value of ", internal);
  if (d.kind == Dist::Kind::kFloat) return Value(internal);
  if (d.kind == Dist::Kind::kInt) {
    if (std::fabs(internal) >= 9007199254740992.0)
      return Status::Invalid("an integer ", internal, " past 2^53");
    return Value(static_cast<int64_t>(std::llround(internal)));
  }
  HP_ASSIGN_OR_RETURN(size_t index, ChoiceIndex(d, internal));
  return Choice(d.choices[index]);
}

// One parameter of the space: its distributions merged, and where it is active.
struct Param {
  std::string name;
  Dist dist;
  bool float_step = false;  // a float grid was dropped
  std::string when;         // `when:` text, empty where always active
};

Status Merge(const Dist& d, Param* p) {
  Dist& into = p->dist;
  if (d.kind != into.kind)
    return Status::Invalid("parameter '", p->name, "' is a ",
                           d.kind == Dist::Kind::kCategorical ? "categorical" : "number",
                           " in one trial and not in another");
  if (d.kind == Dist::Kind::kCategorical) {
    for (const Json& c : d.choices)
      if (std::find(into.choices.begin(), into.choices.end(), c) == into.choices.end())
        into.choices.push_back(c);
    return Status::Ok();
  }
  if (d.log != into.log)
    return Status::Invalid("parameter '", p->name,
                           "' is sampled on a log scale in some trials and not in others");
  if (d.kind == Dist::Kind::kInt && d.step != into.step)
    return Status::Invalid("parameter '", p->name, "' has steps ", *into.step, " and ", *d.step,
                           " in different trials");
  into.low = std::min(into.low, d.low);
  into.high = std::max(into.high, d.high);
  if (d.step != into.step) into.step.reset();
  return Status::Ok();
}

// Every parameter's merged distribution, in the order the trials first suggested them.
Result<std::vector<Param>> Parameters(const OptunaStudy& study) {
  std::vector<Param> params;
  for (const OptunaTrial& t : study.trials) {
    for (const OptunaParam& op : t.params) {
      Result<Dist> d = ParseDistribution(op.distribution);
      if (!d.ok())
        return Status::Invalid("trial ", t.number, ": parameter '", op.name,
                               "': ", d.status().message());
      auto it = std::find_if(params.begin(), params.end(),
                             [&](const Param& p) { return p.name == op.name; });
      if (it == params.end()) {
        params.push_back({op.name, *d, false, ""});
        it = params.end() - 1;
      } else {
        HP_RETURN_IF_ERROR(Merge(*d, &*it));
      }
      if (d->kind == Dist::Kind::kFloat && d->step) it->float_step = true;
    }
  }
  return params;
}

// The trials whose parameters make the space: those that ran, and enqueued ones with theirs.
std::vector<const OptunaTrial*> Ran(const OptunaStudy& study) {
  std::vector<const OptunaTrial*> out;
  for (const OptunaTrial& t : study.trials)
    if (t.state == OptunaState::kComplete || t.state == OptunaState::kPruned ||
        t.state == OptunaState::kFail)
      out.push_back(&t);
  return out;
}

const OptunaParam* ParamOf(const OptunaTrial& t, const std::string& name) {
  for (const OptunaParam& p : t.params)
    if (p.name == name) return &p;
  return nullptr;
}

std::string YamlValue(const Value& v);

// Whether `parent`'s value tells where `child` is set: a `when:` text, or empty. Every trial that
// sets the child sets the parent to one of some values, and no trial that sets the parent to one
// of those leaves the child out.
std::string Condition(const std::vector<const OptunaTrial*>& trials, const Param& parent,
                      const std::string& child) {
  if (parent.dist.kind != Dist::Kind::kCategorical) return "";
  std::vector<Json> in, out;
  for (const OptunaTrial* t : trials) {
    const OptunaParam* c = ParamOf(*t, child);
    const OptunaParam* p = ParamOf(*t, parent.name);
    if (!p) {
      if (c) return "";
      continue;
    }
    Result<Dist> d = ParseDistribution(p->distribution);
    Result<size_t> index = d.ok() ? ChoiceIndex(*d, p->internal) : Result<size_t>(d.status());
    if (!index.ok()) return "";
    const Json& v = d->choices[*index];
    std::vector<Json>& side = c ? in : out;
    if (std::find(side.begin(), side.end(), v) == side.end()) side.push_back(v);
  }
  for (const Json& v : in)
    if (std::find(out.begin(), out.end(), v) != out.end()) return "";
  if (in.empty()) return "";
  std::vector<std::string> texts;
  for (const Json& v : in) {
    Result<Value> value = Choice(v);
    if (!value.ok()) return "";
    texts.push_back(YamlValue(*value));
  }
  if (texts.size() == 1) return parent.name + " == " + texts.front();
  return parent.name + " in [" + Join(texts, ", ") + "]";
}

// The `when:` of each parameter that some trials leave out, from a categorical before it.
Status Conditions(const OptunaStudy& study, std::vector<Param>* params) {
  const std::vector<const OptunaTrial*> trials = Ran(study);
  for (size_t i = 0; i < params->size(); ++i) {
    Param& p = (*params)[i];
    const auto set = std::count_if(trials.begin(), trials.end(),
                                   [&](const OptunaTrial* t) { return ParamOf(*t, p.name); });
    if (set == static_cast<long>(trials.size())) continue;
    for (size_t j = 0; j < i && p.when.empty(); ++j)
      p.when = Condition(trials, (*params)[j], p.name);
    if (p.when.empty())
      return Status::Invalid(
          "parameter '", p.name, "' is set in ", set, " of ", trials.size(),
          " trials and no categorical parameter's value tells which: a space that changes "
          "otherwise (with a number, or at random) has no hyperpack study file");
  }
  return Status::Ok();
}

std::string YamlText(const std::string& text) {
  const bool plain = !text.empty() && !ParseDouble(text) &&
                     text.find_first_of(":#{}[],&*!|>'\"%@`\\") == std::string::npos &&
                     text != "true" && text != "false" && text != "null" && text != "~" &&
                     text.front() != ' ' && text.back() != ' ' && text.front() != '-' &&
                     text.find_first_of("\n\t") == std::string::npos;
  return plain ? text : Json(text).dump();
}

std::string YamlValue(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return YamlText(*s);
  if (const auto* d = std::get_if<double>(&v)) {
    std::string text = FormatValue(v);
    // A float stays one when read back (3.0, not 3).
    if (std::isfinite(*d) && text.find_first_of(".eE") == std::string::npos) text += ".0";
    return text;
  }
  return FormatValue(v);
}

// The search space as the study file writes it, a line a parameter.
Result<std::string> SpaceYaml(const std::vector<Param>& params,
                              std::vector<std::string>* warnings) {
  std::ostringstream out;
  out << "search_space:\n";
  for (const Param& p : params) {
    const Dist& d = p.dist;
    out << "  " << YamlText(p.name) << ": ";
    const std::string when = p.when.empty() ? "" : ", when: " + YamlText(p.when);
    if (d.kind == Dist::Kind::kCategorical) {
      std::vector<std::string> values;
      for (const Json& c : d.choices) {
        Result<Value> v = Choice(c);
        if (!v.ok()) return Status::Invalid("parameter '", p.name, "': ", v.status().message());
        values.push_back(YamlValue(*v));
      }
      if (values.size() == 1 && when.empty()) {
        out << values.front() << "\n";
        continue;
      }
      out << "{type: categorical, values: [" << Join(values, ", ") << "]" << when << "}\n";
      continue;
    }
    const bool is_int = d.kind == Dist::Kind::kInt;
    auto number = [&](double x) {
      return is_int ? FormatValue(Value(static_cast<int64_t>(x))) : YamlValue(Value(x));
    };
    if (d.low == d.high && when.empty()) {
      out << number(d.low) << "\n";
      continue;
    }
    out << "{type: " << (is_int ? "int" : "float") << ", low: " << number(d.low)
        << ", high: " << number(d.high) << (d.log ? ", log: true" : "")
        << (is_int && d.step && *d.step != 1 ? ", step: " + number(*d.step) : "") << when << "}\n";
    if (p.float_step)
      warnings->push_back(
          StrCat("parameter '", p.name,
                 "': Optuna's step (a grid of floats) is dropped: a hyperpack float "
                 "takes any value in its range"));
  }
  return out.str();
}

// Each objective's metric: the names study.set_metric_names gave, else value, or value_0, ...
std::vector<std::string> MetricNames(const OptunaStudy& study) {
  if (study.metric_names.size() == study.directions.size()) return study.metric_names;
  if (study.directions.size() == 1) return {"value"};
  std::vector<std::string> names;
  for (size_t k = 0; k < study.directions.size(); ++k) names.push_back(StrCat("value_", k));
  return names;
}

// The constraints the trials carry, by name: a list's positions in order, then names in order.
std::vector<std::string> ConstraintNames(const OptunaStudy& study) {
  std::set<std::string> names;
  for (const OptunaTrial& t : study.trials)
    for (const auto& [name, v] : t.constraints) names.insert(name);
  std::vector<std::string> out(names.begin(), names.end());
  auto index = [](const std::string& n) { return ParseInt(n); };
  std::stable_sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) {
    if (index(a).has_value() != index(b).has_value()) return index(a).has_value();
    return index(a) && index(b) ? *index(a) < *index(b) : a < b;
  });
  return out;
}

std::string ConstraintMetric(const std::string& name) { return "constraint_" + name; }

Result<Config> TrialConfig(const OptunaTrial& t) {
  Config config;
  for (const OptunaParam& p : t.params) {
    Result<Dist> d = ParseDistribution(p.distribution);
    Result<Value> v = d.ok() ? External(*d, p.internal) : Result<Value>(d.status());
    if (!v.ok())
      return Status::Invalid("trial ", t.number, ": parameter '", p.name,
                             "': ", v.status().message());
    config[p.name] = *v;
  }
  return config;
}

// The objectives' and constraints' values by metric, for a study that keeps them.
std::map<std::string, double> ValuesByMetric(const OptunaTrial& t,
                                             const std::vector<std::string>& metrics,
                                             const std::vector<std::string>& constraints) {
  std::map<std::string, double> out;
  for (size_t k = 0; k < metrics.size() && k < t.values.size(); ++k)
    if (std::isfinite(t.values[k])) out[metrics[k]] = t.values[k];
  for (const std::string& c : constraints) {
    auto it = t.constraints.find(c);
    if (it != t.constraints.end()) out[ConstraintMetric(c)] = it->second;
  }
  return out;
}

// A trial that ran, as hyperpack keeps it. A COMPLETE trial without every objective's finite
// value is failed (*unscored counts them); a PRUNED one keeps its value, or its last report.
Result<ImportedTrial> Imported(const OptunaTrial& t, const std::vector<std::string>& metrics,
                               const std::vector<std::string>& constraints, int* unscored) {
  ImportedTrial out;
  out.optuna_number = t.number;
  HP_ASSIGN_OR_RETURN(out.params, TrialConfig(t));
  out.started = t.started;
  out.ended = t.ended;
  for (const auto& [step, v] : t.intermediate)
    if (std::isfinite(v)) out.reports.emplace_back(step, v);
  const bool scored =
      t.values.size() == metrics.size() &&
      std::all_of(t.values.begin(), t.values.end(), [](double v) { return std::isfinite(v); });
  out.state = ImportedTrial::State::kFailed;
  if (t.state == OptunaState::kComplete && scored) {
    out.state = ImportedTrial::State::kCompleted;
    out.value = t.values.front();
  } else if (t.state == OptunaState::kComplete) {
    ++*unscored;
  } else if (t.state == OptunaState::kPruned) {
    out.state = ImportedTrial::State::kPruned;
    if (!t.values.empty() && std::isfinite(t.values.front()))
      out.value = t.values.front();
    else if (!out.reports.empty())
      out.value = out.reports.back().second;
  }
  if (out.state != ImportedTrial::State::kFailed && (metrics.size() > 1 || !constraints.empty()))
    out.values = ValuesByMetric(t, metrics, constraints);
  return out;
}

// An enqueued trial's parameters (enqueue_trial's), as a configuration.
Result<Config> Enqueued(const OptunaTrial& t) {
  Config config;
  Json fixed = Json::parse(t.fixed_params, nullptr, /*allow_exceptions=*/false);
  if (!fixed.is_object()) fixed = Json::object();
  for (const auto& [name, v] : fixed.items()) {
    Result<Value> value = Choice(v);
    if (!value.ok())
      return Status::Invalid("enqueued trial ", t.number, ": parameter '", name,
                             "': ", value.status().message());
    config[name] = *value;
  }
  return config;
}

// The study file's head: where it came from, its name and what it optimises.
std::string HeadYaml(const OptunaStudy& study, const OptunaImportOptions& options,
                     const std::vector<std::string>& metrics,
                     const std::vector<std::string>& constraints) {
  std::ostringstream out;
  out << "# The Optuna study '" << study.name << "' of " << options.source
      << ", imported with its trials by hyperpack import.\n";
  std::string clean;
  for (char c : study.name)
    clean +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '-';
  if (clean.empty() || !std::isalnum(static_cast<unsigned char>(clean.front())))
    clean = "optuna-" + clean;
  out << "name: " << clean << "\n";
  auto objective = [&](size_t k) {
    return StrCat("{metric: ", YamlText(metrics[k]),
                  ", direction: ", DirectionName(study.directions[k]), "}");
  };
  if (metrics.size() == 1) {
    out << "objective: " << objective(0) << "\n";
  } else {
    out << "objectives:\n";
    for (size_t k = 0; k < metrics.size(); ++k) out << "  - " << objective(k) << "\n";
  }
  if (!constraints.empty()) {
    out << "constraints:   # Optuna's: <= 0 holds\n";
    for (const std::string& c : constraints)
      out << "  - {metric: " << YamlText(ConstraintMetric(c)) << ", max: 0}\n";
  }
  return out.str();
}

std::string TailYaml(const OptunaImportOptions& options, size_t imported) {
  std::ostringstream out;
  if (options.command) {
    out << "trial:\n  command: " << Json(*options.command).dump() << "\n";
  } else {
    out << "# No trial.command: hyperpack ask and tell (or hyperpack.load_study in Python) go on\n"
        << "# with it; add the command that evaluates a trial for hyperpack run.\n";
  }
  out << "budget: {max_trials: " << imported + static_cast<size_t>(std::max(0, options.more_trials))
      << "}   # the " << imported << " imported and " << options.more_trials << " more\n";
  return out.str();
}

// Each trial of the study that goes over, or a warning for those that do not.
Status Trials(const OptunaStudy& study, const std::vector<std::string>& metrics,
              const std::vector<std::string>& constraints, OptunaImport* out) {
  int running = 0, unscored = 0, empty = 0;
  for (const OptunaTrial& t : study.trials) {
    if (t.state == OptunaState::kRunning) {
      ++running;
    } else if (t.state == OptunaState::kWaiting) {
      HP_ASSIGN_OR_RETURN(Config config, Enqueued(t));
      if (config.empty()) ++empty;
      if (!config.empty()) out->waiting.push_back(std::move(config));
    } else {
      HP_ASSIGN_OR_RETURN(ImportedTrial imported, Imported(t, metrics, constraints, &unscored));
      out->trials.push_back(std::move(imported));
    }
  }
  if (running > 0)
    out->warnings.push_back(StrCat(running,
                                   " trial(s) RUNNING in Optuna are left out: their "
                                   "processes are Optuna's, and may still end there"));
  if (unscored > 0)
    out->warnings.push_back(StrCat(unscored,
                                   " COMPLETE trial(s) without a finite value for "
                                   "every objective are imported as failed"));
  if (empty > 0)
    out->warnings.push_back(StrCat(empty, " enqueued trial(s) without parameters are left out"));
  return Status::Ok();
}

}  // namespace

Result<OptunaImport> ImportOptunaStudy(const OptunaStudy& study,
                                       const OptunaImportOptions& options) {
  if (study.directions.empty() || study.directions.size() > 4)
    return Status::Invalid("Optuna study '", study.name, "' has ", study.directions.size(),
                           " objectives; hyperpack studies have 1 to 4");
  HP_ASSIGN_OR_RETURN(std::vector<Param> params, Parameters(study));
  if (params.empty())
    return Status::Invalid("Optuna study '", study.name,
                           "' has no trial with parameters, so its search space is unknown: run "
                           "a trial in Optuna first, or write the study file by hand");
  HP_RETURN_IF_ERROR(Conditions(study, &params));
  OptunaImport out;
  HP_ASSIGN_OR_RETURN(std::string space, SpaceYaml(params, &out.warnings));
  const std::vector<std::string> metrics = MetricNames(study);
  const std::vector<std::string> constraints = ConstraintNames(study);
  HP_RETURN_IF_ERROR(Trials(study, metrics, constraints, &out));
  out.study_yaml =
      HeadYaml(study, options, metrics, constraints) + space + TailYaml(options, out.trials.size());
  return out;
}

}  // namespace hyperpack::study
