// Determined experiment configurations (docs.determined.ai, "Experiment Configuration Reference")
// as hyperpack study files.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "hyperpack/study/import.h"
#include "hyperpack/text.h"
#include "import_common.h"

namespace hyperpack::study {
namespace internal {
namespace {

// A Determined hyperparameter's type, parsed once from its `type:`.
enum class HpType { kConst, kCategorical, kInt, kDouble, kLog };
constexpr std::pair<std::string_view, HpType> kHpTypes[] = {{"const", HpType::kConst},
                                                            {"categorical", HpType::kCategorical},
                                                            {"int", HpType::kInt},
                                                            {"double", HpType::kDouble},
                                                            {"log", HpType::kLog}};
std::optional<HpType> ParseHpType(const std::string& text) {
  for (const auto& [name, type] : kHpTypes)
    if (text == name) return type;
  return std::nullopt;
}

class DeterminedImporter : public Importer {
 public:
  DeterminedImporter(std::string filename, const ImportOptions& options)
      : Importer(std::move(filename), options) {}

 private:
  void Convert(const YAML::Node& root) override {
    static const std::vector<std::string> kCarried = {"name",     "description", "hyperparameters",
                                                      "searcher", "entrypoint",  "resources"};
    // Determined's own: where it stores, schedules and runs things; nothing of the search.
    static const std::vector<std::string> kOwn = {"checkpoint_storage",
                                                  "environment",
                                                  "bind_mounts",
                                                  "data",
                                                  "workspace",
                                                  "project",
                                                  "min_validation_period",
                                                  "min_checkpoint_period",
                                                  "records_per_epoch",
                                                  "scheduling_unit",
                                                  "max_restarts",
                                                  "profiling",
                                                  "reproducibility",
                                                  "optimizations",
                                                  "labels",
                                                  "checkpoint_policy",
                                                  "perform_initial_validation",
                                                  "tensorboard_storage",
                                                  "debug",
                                                  "slurm",
                                                  "pbs",
                                                  "integrations",
                                                  "log_policies",
                                                  "retention_policy",
                                                  "internal"};
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = it->first.Scalar();
      if (std::find(kCarried.begin(), kCarried.end(), key) != kCarried.end()) continue;
      if (std::find(kOwn.begin(), kOwn.end(), key) != kOwn.end())
        Warn(it->first, key, key, " is Determined's own: not carried over");
      else
        Warn(it->first, key, "unknown experiment key '", key, "' is not carried over");
    }
    WriteName(root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : "",
              "Determined experiment");
    if (root["description"] && root["description"].IsScalar())
      yaml_ << "description: " << nlohmann::json(root["description"].Scalar()).dump() << "\n";
    const YAML::Node searcher = root["searcher"];
    if (!searcher || !searcher.IsMap()) {
      Error(searcher ? searcher : root, "searcher",
            "an experiment needs searcher: {name: adaptive_asha|random|grid|single, metric: NAME, "
            "smaller_is_better: true|false, ...}");
      return;
    }
    Objective(searcher);
    SearchSpace(root["hyperparameters"]);
    if (Entrypoint(root["entrypoint"], root)) Shim();
    Searcher(searcher);
    Resources(root["resources"]);
  }

  void SearchSpace(const YAML::Node& hps) {
    yaml_ << "search_space:\n";
    if (!hps || (hps.IsMap() && hps.size() == 0)) {
      // Nothing to tune: one configuration, the program as it is (what a single searcher runs).
      yaml_ << "  {}   # no hyperparameters: the entrypoint runs as it is\n";
    } else if (!hps.IsMap()) {
      Error(hps, "hyperparameters", "expected a mapping of names to hyperparameters");
    } else {
      Hyperparameters(hps, "");
    }
  }

  void Objective(const YAML::Node& searcher) {
    const YAML::Node metric = searcher["metric"];
    if (!metric || !metric.IsScalar() || metric.Scalar().empty()) {
      Error(metric ? metric : searcher, "searcher.metric",
            "the searcher needs metric: the name of the validation metric to optimise");
      return;
    }
    bool smaller = true;  // Determined's default
    if (const YAML::Node s = searcher["smaller_is_better"]) {
      std::optional<bool> b = YamlBool(s);
      if (!b) {
        Error(s, "searcher.smaller_is_better", "expected true or false");
        return;
      }
      smaller = *b;
    }
    yaml_ << "objective: {metric: " << YamlScalar(metric)
          << ", direction: " << (smaller ? "minimize" : "maximize")
          << "}   # searcher.metric, smaller_is_better, " << From(metric) << "\n";
  }

  void Hyperparameters(const YAML::Node& hps, const std::string& prefix) {
    for (auto it = hps.begin(); it != hps.end(); ++it) {
      std::string name = prefix + it->first.Scalar();
      const YAML::Node spec = it->second;  // a copy: it-> yields a temporary
      if (spec.IsMap() && !spec["type"]) {
        Warn(it->first, "hyperparameters." + name, "nested hyperparameters are tuned as ", name,
             "_*; the program gets them nested, as Determined gives them");
        path_.push_back(it->first.Scalar());
        Hyperparameters(spec, name + "_");
        path_.pop_back();
        continue;
      }
      std::string line = Hyperparameter(name, spec);
      if (line.empty()) continue;
      if (!path_.empty()) {
        std::vector<std::string> full = path_;
        full.push_back(it->first.Scalar());
        nested_[name] = full;
      }
      yaml_ << "  " << name << ": " << line << "   # " << From(spec) << "\n";
    }
  }

  // An int, double or log hyperparameter (`type`) as a hyperpack range, or "" after an error.
  std::string Range(const std::string& key, HpType kind, const std::string& type,
                    const YAML::Node& s) {
    auto need = [&](const char* field) {
      if (s[field] && s[field].IsScalar() && ParseDouble(s[field].Scalar())) return true;
      Error(s[field] ? s[field] : s, key, type, " needs a number '", field, "'");
      return false;
    };
    auto num = [&](const char* field) { return *ParseDouble(s[field].Scalar()); };
    if (!need("minval") || !need("maxval")) return "";
    double lo = num("minval"), hi = num("maxval");
    if (kind == HpType::kInt && !(IsWholeNumber(s["minval"]) && IsWholeNumber(s["maxval"]))) {
      Error(s, key, "int needs whole numbers for minval and maxval");
      return "";
    }
    if (kind == HpType::kLog) {  // minval and maxval are exponents of base (10 by default)
      double base = 10;
      if (s["base"]) {
        if (!need("base")) return "";
        base = num("base");
      }
      if (!(base > 0) || base == 1) {
        Error(s["base"], key, "log: base must be above 0 and not 1");
        return "";
      }
      lo = std::pow(base, lo);
      hi = std::pow(base, hi);
    }
    if (!(lo < hi)) {
      Error(s, key, type, ": minval must be below maxval");
      return "";
    }
    return StrCat("{type: ", kind == HpType::kInt ? "int" : "float", ", low: ", FormatDouble(lo),
                  ", high: ", FormatDouble(hi), kind == HpType::kLog ? ", log: true" : "", "}");
  }

  // A hyperparameter's hyperpack form, or "" after an error.
  std::string Hyperparameter(const std::string& name, const YAML::Node& s) {
    const std::string key = "hyperparameters." + name;
    if (s.IsScalar()) return "{type: fixed, value: " + YamlScalar(s) + "}";  // a constant
    if (s.IsNull()) return "{type: fixed, value: null}";  // None to the program (structured)
    // A constant list: a structured value, handed to the program as the list it is.
    if (s.IsSequence()) return "{type: fixed, value: " + FlowYaml(s) + "}";
    if (!s.IsMap()) {
      Error(s, key, "expected a hyperparameter: a constant or {type: ...}");
      return "";
    }
    const std::string type = s["type"].IsScalar() ? s["type"].Scalar() : "";
    const std::optional<HpType> kind = ParseHpType(type);
    if (s["count"] && kind != HpType::kConst && kind != HpType::kCategorical)
      Warn(s["count"], key,
           "count (the number of grid points) is not carried over: the range is searched whole");
    if (kind == HpType::kConst) {
      if (!s["val"] || !(s["val"].IsScalar() || s["val"].IsSequence() || s["val"].IsMap())) {
        Error(s["val"] ? s["val"] : s, key,
              "const needs val: a number, text, boolean, list or "
              "mapping");
        return "";
      }
      return "{type: fixed, value: " +
             (s["val"].IsScalar() ? YamlScalar(s["val"]) : FlowYaml(s["val"])) + "}";
    }
    if (kind == HpType::kCategorical) {
      if (!s["vals"].IsSequence() || s["vals"].size() == 0) {
        Error(s["vals"] ? s["vals"] : s, key, "categorical needs vals: a non-empty list");
        return "";
      }
      std::vector<std::string> values;
      for (const auto& v : s["vals"])  // lists and mappings make a structured categorical
        values.push_back(v.IsScalar() ? YamlScalar(v) : FlowYaml(v));
      return "{type: categorical, values: [" + Join(values, ", ") + "]}";
    }
    if (kind) return Range(key, *kind, type, s);
    Error(s["type"] ? s["type"] : s, key, "type '", type,
          "' is not a Determined hyperparameter type (const, int, double, log, categorical)");
    return "";
  }

  // The Core API's calls (det.get_cluster_info, det.core.init, report_*_metrics, checkpoints) are
  // served by hyperpack's stand-in (shims/determined), nested groups handed back nested.
  void Shim() {
    yaml_ << "  shim: determined   # the Core API served by hyperpack\n";
    if (nested_.empty()) return;
    // Braces doubled: env values are templates.
    const std::string layout = TemplateLiteral(nested_.dump());
    yaml_ << "  env: {HYPERPACK_DETERMINED_NESTED: " << nlohmann::json(layout).dump() << "}\n";
  }

  // The trial section's command; false after an error.
  bool Entrypoint(const YAML::Node& ep, const YAML::Node& root) {
    if (CommandGiven("entrypoint")) return true;
    std::string command;
    if (!ep) {
      Error(root, "entrypoint", "an experiment needs an entrypoint: the command that trains");
      return false;
    }
    if (ep.IsSequence()) {
      std::vector<std::string> words;
      for (const auto& w : ep) words.push_back(w.Scalar());
      command = Join(words, " ");
    } else if (ep.IsScalar()) {
      command = ep.Scalar();
    } else {
      Error(ep, "entrypoint", "expected a command: text or a list of words");
      return false;
    }
    // "model_def:MyTrial" (one word, module:Class) names a Trial class that Determined's harness
    // runs; hyperpack runs commands.
    if (command.find(' ') == std::string::npos && command.find(':') != std::string::npos) {
      Error(ep, "entrypoint", "'", command,
            "' is a Determined Trial class, which hyperpack cannot run: give the command that "
            "trains with --command '...' (e.g. --command 'python3 train.py --lr {learning_rate}'), "
            "a program that reads its hyperparameters from $HYPERPACK_PARAMS_FILE (JSON) and "
            "prints its metrics");
      return false;
    }
    if (command.empty()) {
      Error(ep, "entrypoint", "the entrypoint is empty");
      return false;
    }
    const std::string escaped = TemplateLiteral(command);
    yaml_ << "trial:\n  command: " << nlohmann::json(escaped).dump() << "   # entrypoint, "
          << From(ep) << "\n";
    return true;
  }

  void Searcher(const YAML::Node& s) {
    const YAML::Node name = s["name"];
    std::string n = name && name.IsScalar() ? name.Scalar() : "";
    for (const char* key : {"source_trial_id", "source_checkpoint_uuid"})
      if (s[key])
        Warn(s[key], StrCat("searcher.", key), key,
             " is not carried over: hyperpack trials start from scratch");
    std::optional<int> max_trials;
    if (const YAML::Node mt = s["max_trials"]) {
      if (!IsWholeNumber(mt))
        Error(mt, "searcher.max_trials", "expected a whole number of trials");
      else
        max_trials = static_cast<int>(*ParseInt(mt.Scalar()));
    }
    if (n == "adaptive_asha" || n == "async_halving") {
      yaml_ << "tuner: {algorithm: gp}   # searcher.name: " << n << " (Determined samples at "
            << "random), " << From(name) << "\n";
    } else if (n == "random") {
      yaml_ << "tuner: {algorithm: random}   # searcher.name: random, " << From(name) << "\n";
    } else if (n == "grid") {
      Warn(name, "searcher.name",
           "grid has no hyperpack form: scrambled Sobol points (tuner: sobol) cover the space "
           "instead");
      yaml_ << "tuner: {algorithm: sobol}   # searcher.name: grid, " << From(name) << "\n";
    } else if (n == "single") {
      Warn(name, "searcher.name",
           "single runs one trial: written as max_trials: 1; a const hyperparameter is its value, "
           "a range is sampled once");
      yaml_ << "tuner: {algorithm: random}   # searcher.name: single, " << From(name) << "\n";
      max_trials = 1;
    } else {
      Error(name ? name : s, "searcher.name", "'", n,
            "' cannot be carried over (hyperpack imports adaptive_asha, async_halving, random, "
            "grid and single)");
      return;
    }
    std::vector<std::string> budget;
    if (max_trials) budget.push_back(StrCat("max_trials: ", *max_trials));
    if (const YAML::Node mc = s["max_concurrent_trials"]) {
      if (!IsWholeNumber(mc))
        Error(mc, "searcher.max_concurrent_trials", "expected a whole number of trials");
      else if (*ParseInt(mc.Scalar()) > 0)  // 0: Determined's default, no limit of its own
        budget.push_back("max_parallel: " + mc.Scalar());
    }
    if (!budget.empty())
      yaml_ << "budget: {" << Join(budget, ", ") << "}   # searcher.max_trials, "
            << "max_concurrent_trials, " << From(s) << "\n";
    if (n == "adaptive_asha" || n == "async_halving") Asha(s, n);
  }

  // The length of a full trial: max_length {epochs|batches|records: N} (a bare number in old
  // configurations), or max_time with time_metric in newer ones. Its node, unit and amount as
  // written; nullopt (with the error said) when there is none.
  struct FullLength {
    YAML::Node at;
    std::string unit, amount;
  };
  std::optional<FullLength> FullLengthOf(const YAML::Node& s, const std::string& n) {
    // Each node is copied, never assigned: yaml-cpp throws when a missing node is assigned.
    const YAML::Node max_length = s["max_length"], max_time = s["max_time"];
    FullLength f{max_length ? max_length : max_time, "", ""};
    if (max_length && f.at.IsMap() && f.at.size() == 1) {
      f.unit = f.at.begin()->first.Scalar();
      f.amount = f.at.begin()->second.IsScalar() ? f.at.begin()->second.Scalar() : "";
    } else if (max_length && f.at.IsScalar()) {
      f.unit = "epochs";
      f.amount = f.at.Scalar();
      Warn(f.at, "searcher.max_length",
           "max_length without a unit: taken as epochs (write {epochs: N} or {batches: N})");
    } else if (!max_length && max_time) {
      f.amount = f.at.IsScalar() ? f.at.Scalar() : "";
      f.unit = s["time_metric"] && s["time_metric"].IsScalar() ? s["time_metric"].Scalar() : "";
    } else {
      Error(s, "searcher.max_length", n,
            " needs max_length: {epochs: N} or {batches: N}, a full trial's length");
      return std::nullopt;
    }
    return f;
  }

  // adaptive_asha and async_halving: rungs at max_length / divisor^k, k < the number of rungs.
  // The searcher's divisor and its most rungs, Determined's defaults where absent; nullopt after
  // an error.
  std::optional<std::pair<double, int>> DivisorAndRungs(const YAML::Node& s, const std::string& n) {
    double divisor = 4;  // Determined's default
    if (const YAML::Node d = s["divisor"]) {
      auto v = d.IsScalar() ? ParseDouble(d.Scalar()) : std::nullopt;
      if (!v || *v <= 1) {
        Error(d, "searcher.divisor", "expected a number above 1");
        return std::nullopt;
      }
      divisor = *v;
    }
    const char* rungs_key = n == "adaptive_asha" ? "max_rungs" : "num_rungs";
    int rungs = 5;  // Determined's default max_rungs
    if (const YAML::Node r = s[rungs_key]) {
      if (!IsWholeNumber(r) || *ParseInt(r.Scalar()) < 1) {
        Error(r, StrCat("searcher.", rungs_key), "expected a whole number above 0");
        return std::nullopt;
      }
      rungs = static_cast<int>(*ParseInt(r.Scalar()));
    }
    return std::make_pair(divisor, rungs);
  }

  void Asha(const YAML::Node& s, const std::string& n) {
    const auto shape = DivisorAndRungs(s, n);
    if (!shape) return;
    const auto [divisor, rungs] = *shape;
    if (const YAML::Node m = s["mode"]; m && m.IsScalar() && m.Scalar() != "aggressive")
      Warn(m, "searcher.mode", "mode ", m.Scalar(),
           " runs several brackets in Determined; hyperpack's asha runs one (as mode aggressive)");
    if (s["bracket_rungs"])
      Warn(s["bracket_rungs"], "searcher.bracket_rungs", "bracket_rungs is not carried over");
    bool stop_once = s["stop_once"] && YamlBool(s["stop_once"]).value_or(false);

    std::optional<FullLength> full = FullLengthOf(s, n);
    if (!full) return;
    const YAML::Node& at = full->at;
    const std::string& unit = full->unit;
    const std::string& amount = full->amount;
    auto length = ParseDouble(amount);
    if (!length || *length <= 0) {
      Error(at, "searcher.max_length", "expected a positive number of ",
            unit.empty() ? "epochs" : unit);
      return;
    }
    // Determined's unit as hyperpack's resource; none for records and time.
    static constexpr std::pair<std::string_view, std::string_view> kResources[] = {
        {"epochs", "epoch"}, {"epoch", "epoch"}, {"batches", "step"},
        {"batch", "step"},   {"steps", "step"},  {"step", "step"}};
    std::string resource;
    for (const auto& [from, to] : kResources)
      if (unit == from) resource = to;
    int count = std::min(
        rungs, static_cast<int>(std::floor(std::log(*length) / std::log(divisor) + 1e-9)) + 1);
    double min_resource = *length / std::pow(divisor, std::max(count - 1, 0));
    std::string pruner = StrCat("pruner: {algorithm: asha, mode: ", stop_once ? "stop" : "promote",
                                resource == "step" ? ", resource: step" : "",
                                ", min_resource: ", FormatDouble(min_resource),
                                ", max_resource: ", FormatDouble(*length),
                                ", reduction_factor: ", FormatDouble(divisor), "}");
    std::string from = StrCat("   # searcher ", n, ", max_length in ",
                              unit.empty() ? "epochs" : unit, ", ", From(s), "\n");
    if (resource.empty() || count < 2) {
      if (resource.empty())
        Warn(at, "searcher.max_length", "a length in ", unit.empty() ? "an unnamed unit" : unit,
             " is not carried over: hyperpack's pruner counts epochs or steps; the pruner is "
             "written commented out: set max_resource in epochs or steps and uncomment");
      else
        Warn(at, "searcher.max_length", "max_length ", amount, " makes a single rung at divisor ",
             FormatDouble(divisor), ": no pruner is written (commented out)");
      yaml_ << "# " << pruner << from;
      return;
    }
    yaml_ << pruner << from;
  }

  void Resources(const YAML::Node& r) {
    if (!r) return;
    if (!r.IsMap()) {
      Error(r, "resources", "expected a mapping such as {slots_per_trial: 4}");
      return;
    }
    for (auto it = r.begin(); it != r.end(); ++it) {
      std::string key = it->first.Scalar();
      if (key != "slots_per_trial")
        Warn(it->first, "resources." + key, key, " is Determined's own: not carried over");
    }
    const YAML::Node slots = r["slots_per_trial"];
    if (!slots) return;
    if (!IsWholeNumber(slots) || *ParseInt(slots.Scalar()) < 0) {
      Error(slots, "resources.slots_per_trial", "expected a whole number of slots");
      return;
    }
    if (*ParseInt(slots.Scalar()) == 0) return;  // a CPU trial: one process
    yaml_ << "resources: {gpus: " << slots.Scalar()
          << "}   # slots_per_trial: a gang of that many ranks, one GPU each, " << From(slots)
          << "\n";
  }

  std::vector<std::string> path_;                     // the nested groups being read
  nlohmann::json nested_ = nlohmann::json::object();  // flat name -> its path in hparams
};

}  // namespace

ImportOutcome ImportDetermined(const std::string& text, const std::string& filename,
                               const ImportOptions& options) {
  return DeterminedImporter(filename, options)
      .Run(text,
           "a Determined experiment is a mapping with hyperparameters, searcher and entrypoint");
}

}  // namespace internal
}  // namespace hyperpack::study
