// NNI experiment configurations (nni.readthedocs.io, "Experiment Config Reference", v2 and the
// v1 keys) and their search spaces (`_type` / `_value`) as hyperpack study files.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "import_common.h"

namespace hyperpack::study::internal {
namespace {

namespace fs = std::filesystem;

// NNI matches its keys ignoring case and underscores: trialCommand, trial_command, TrialCommand.
std::string KeyOf(const std::string& key) { return FoldedKey(key); }

// What an NNI `_type` says about the values it gives.
enum class NniShape { kChoice, kRandint, kUniform, kNormal };
struct NniType {
  NniShape shape;
  bool log = false;
  bool quantised = false;
};

std::optional<NniType> LookupType(const std::string& name) {
  static const std::map<std::string, NniType> kTypes = {
      {"choice", {NniShape::kChoice}},
      {"randint", {NniShape::kRandint}},
      {"uniform", {NniShape::kUniform}},
      {"quniform", {NniShape::kUniform, false, true}},
      {"loguniform", {NniShape::kUniform, true}},
      {"qloguniform", {NniShape::kUniform, true, true}},
      {"normal", {NniShape::kNormal}},
      {"qnormal", {NniShape::kNormal, false, true}},
      {"lognormal", {NniShape::kNormal, true}},
      {"qlognormal", {NniShape::kNormal, true, true}},
  };
  auto it = kTypes.find(name);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

class NniImporter : public Importer {
 public:
  NniImporter(std::string filename, const ImportOptions& options)
      : Importer(std::move(filename), options) {}

 private:
  // The experiment's keys by their NNI-normalised name, and each as it was written.
  std::map<std::string, YAML::Node> keys_;
  std::map<std::string, std::string> written_;

  YAML::Node Key(const std::string& normalised) const {
    auto it = keys_.find(normalised);
    return it == keys_.end() ? YAML::Node(YAML::NodeType::Undefined) : it->second;
  }

  void Convert(const YAML::Node& root) override {
    static const std::vector<std::string> kKnown = {"experimentname",
                                                    "name",
                                                    "searchspacefile",
                                                    "searchspacepath",
                                                    "searchspace",
                                                    "trialcommand",
                                                    "trialcodedirectory",
                                                    "trialgpunumber",
                                                    "trialconcurrency",
                                                    "maxtrialnumber",
                                                    "maxtrialnum",
                                                    "maxexperimentduration",
                                                    "maxexecduration",
                                                    "tuner",
                                                    "assessor",
                                                    "trainingservice",
                                                    "trial",
                                                    "useannotation",
                                                    "debug",
                                                    "logdir",
                                                    "experimentworkingdirectory",
                                                    "loglevel",
                                                    "nnimanagerip",
                                                    "tunergpuindices",
                                                    "advisor",
                                                    "authorname",
                                                    "trainingserviceplatform"};
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string key = KeyOf(it->first.Scalar());
      keys_[key] = it->second;
      written_[key] = it->first.Scalar();
      if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end())
        Warn(it->first, it->first.Scalar(), "unknown experiment key '", it->first.Scalar(),
             "' is not carried over");
    }
    for (const char* own : {"trainingservice", "trainingserviceplatform", "nnimanagerip",
                            "experimentworkingdirectory", "logdir", "loglevel", "debug"})
      if (Key(own)) Warn(Key(own), written_[own], "NNI's own setting: not carried over");
    // experimentName, or `name` as NNI's newer configs write it.
    YAML::Node name = Key("experimentname") ? Key("experimentname") : Key("name");
    WriteName(name && name.IsScalar() ? name.Scalar() : "", "NNI experiment");
    Objective();
    SearchSpace();
    Trial();
    Tuner();
    Budget();
    Assessor();
  }

  // NNI's trials report `nni.report_final_result(value)`: the metric is "default".
  void Objective() {
    std::string mode = "maximize";
    YAML::Node args =
        Key("tuner")["classArgs"] ? Key("tuner")["classArgs"] : Key("tuner")["class_args"];
    if (args && args["optimize_mode"]) mode = args["optimize_mode"].Scalar();
    if (mode != "maximize" && mode != "minimize") {
      Error(args["optimize_mode"], "tuner.classArgs.optimize_mode", "'", mode,
            "' is not maximize or minimize");
      return;
    }
    yaml_ << "objective: {metric: default, direction: " << mode << "}   # tuner.classArgs"
          << (args ? ", " + From(args) : std::string(", NNI's default")) << "\n";
  }

  void SearchSpace() {
    yaml_ << "search_space:\n";
    if (YAML::Node a = Key("useannotation"); a && YamlBool(a).value_or(false)) {
      Error(a, written_["useannotation"],
            "the search space is written as NNI annotations in the trial's code, which hyperpack "
            "does not read: write it as searchSpace (or a searchSpaceFile) and import again");
      return;
    }
    YAML::Node inline_space = Key("searchspace");
    YAML::Node path = Key("searchspacefile") ? Key("searchspacefile") : Key("searchspacepath");
    if (inline_space) {
      Params(inline_space, "");
      return;
    }
    if (!path) {
      Error(YAML::Node(), "searchSpace", "an experiment needs searchSpace or searchSpaceFile");
      return;
    }
    // Relative to the config file, as NNI reads it; JSON is YAML, with positions.
    fs::path file = fs::path(file_).parent_path() / path.Scalar();
    std::ifstream in(file);
    if (!in) {
      Error(path, "searchSpaceFile", "cannot read ", file.string());
      return;
    }
    std::string config_file = file_;
    file_ = file.string();
    try {
      Params(YAML::LoadFile(file.string()), "");
    } catch (const YAML::Exception& e) {
      errors_.push_back(
          {file_, e.mark.line + 1, e.mark.column + 1, "", StrCat("invalid JSON or YAML: ", e.msg)});
    }
    file_ = config_file;
  }

  void Params(const YAML::Node& space, const std::string& prefix, const std::string& when = "") {
    if (!space.IsMap()) {
      Error(space, "searchSpace", "a search space is a mapping of names to {_type, _value}");
      return;
    }
    if (prefix.empty() && space.size() == 0) {
      Error(space, "searchSpace",
            "the search space is empty: NNI's tuner here makes its own candidates (as network "
            "morphism and customised tuners do), which hyperpack cannot; hyperpack tunes the "
            "parameters of a search space");
      return;
    }
    for (auto it = space.begin(); it != space.end(); ++it) {
      std::string raw = it->first.Scalar();
      if (raw == "_name") continue;  // a nested choice's own label
      std::string name = prefix + raw;
      const YAML::Node spec = it->second;  // a copy: it-> yields a temporary
      if (!spec.IsMap() || !spec["_type"] || !spec["_value"] || !spec["_value"].IsSequence()) {
        Error(spec, name, "expected {\"_type\": ..., \"_value\": [...]}");
        continue;
      }
      Param(name, spec, when);
    }
  }

  void Write(const std::string& name, const std::string& form, const YAML::Node& at,
             const std::string& when) {
    names_.push_back(name);
    std::string body = form.substr(0, form.size() - 1);  // without the closing brace
    yaml_ << "  " << name << ": " << body
          << (when.empty() ? "" : ", when: " + nlohmann::json(when).dump()) << "}   # " << From(at)
          << "\n";
  }

  void Param(const std::string& name, const YAML::Node& s, const std::string& when) {
    const std::string type = s["_type"].Scalar();
    std::optional<NniType> t = LookupType(type);
    if (!t) {
      Error(s["_type"], name, "_type '", type, "' is not one NNI documents");
      return;
    }
    if (t->shape == NniShape::kChoice) {
      Choice(name, s, when);
      return;
    }
    const YAML::Node& v = s["_value"];
    auto number = [&](size_t i) -> std::optional<double> {
      if (i >= v.size() || !v[i].IsScalar()) return std::nullopt;
      return ParseDouble(v[i].Scalar());
    };
    std::optional<double> a = number(0), b = number(1), q = number(2);
    if (!a || !b) {
      Error(v, name, type, " needs numbers in _value, e.g. [0.001, 0.1]");
      return;
    }
    const bool ints = IsWholeNumber(v[0]) && IsWholeNumber(v[1]);
    switch (t->shape) {
      case NniShape::kRandint:
        // NNI's randint excludes the upper bound.
        if (!ints || *b - 1 < *a) {
          Error(v, name, "randint needs whole numbers [lower, upper) with upper > lower");
          return;
        }
        Write(name, RangeText("int", *a, *b - 1, false), s, when);
        return;
      case NniShape::kUniform:
        Uniform(name, s, *t, *a, *b, ints, q, when);
        return;
      case NniShape::kNormal: {
        double lo = *a - 3 * *b, hi = *a + 3 * *b;
        Warn(s, name, type, "(mu ", FormatDouble(*a), ", sigma ", FormatDouble(*b),
             ") has no hyperpack form: the range mu +- 3 sigma", t->log ? " (of the log)" : "",
             " is searched instead, uniformly", t->log ? " in log space" : "");
        Write(name,
              t->log ? RangeText("float", std::exp(lo), std::exp(hi), true)
                     : RangeText("float", lo, hi, false),
              s, when);
        return;
      }
      case NniShape::kChoice:
        return;
    }
  }

  static std::string RangeText(const char* kind, double lo, double hi, bool log) {
    return StrCat("{type: ", kind, ", low: ", FormatDouble(lo), ", high: ", FormatDouble(hi),
                  log ? ", log: true" : "", "}");
  }

  // uniform, loguniform, quniform, qloguniform.
  void Uniform(const std::string& name, const YAML::Node& s, const NniType& t, double a, double b,
               bool ints, std::optional<double> q, const std::string& when) {
    const std::string type = s["_type"].Scalar();
    if (!(a < b) || (t.log && a <= 0)) {
      Error(s["_value"], name, type, ": low must be below high", t.log ? " and above 0" : "");
      return;
    }
    if (t.quantised) {
      if (!q) {
        Error(s["_value"], name, type, " needs [low, high, q]");
        return;
      }
      if (ints && !t.log && *q == std::floor(*q) && std::fmod(a, *q) == 0) {
        Write(name,
              StrCat("{type: int, low: ", FormatDouble(a), ", high: ", FormatDouble(b),
                     ", step: ", FormatDouble(*q), "}"),
              s, when);
        return;
      }
      Warn(s, name, type, " with q ", FormatDouble(*q),
           ": hyperpack's float range has no quantisation; values are not rounded to q");
    }
    Write(name, RangeText("float", a, b, t.log), s, when);
  }

  // A choice of plain values is a categorical; a nested choice (values that are mappings with a
  // `_name` and parameters of their own) is a categorical of the names whose children are
  // conditional on it, named PARENT_CHILD.
  void Choice(const std::string& name, const YAML::Node& s, const std::string& when) {
    const YAML::Node& v = s["_value"];
    // Mappings without `_name` (and lists) are values in their own right, as NNI's BatchTuner
    // hands them to the program: a structured categorical.
    bool plain_structures = false, nested = false;
    for (const auto& item : v) {
      plain_structures = plain_structures || item.IsSequence() || (item.IsMap() && !item["_name"]);
      nested = nested || (item.IsMap() && item["_name"]);
    }
    if (plain_structures && nested) {
      Error(v, name, "a choice mixes nested options (with \"_name\") and plain mappings or lists");
      return;
    }
    std::vector<std::string> values;
    for (const auto& item : v)
      values.push_back(plain_structures ? FlowYaml(item)
                       : item.IsMap()   ? YamlScalar(item["_name"])
                                        : YamlScalar(item));
    if (values.empty()) {
      Error(v, name, "choice needs at least one value");
      return;
    }
    Write(name, "{type: categorical, values: [" + Join(values, ", ") + "]}", s, when);
    if (!nested) return;
    Warn(s, name, "nested choice: each option's parameters are named ", name,
         "_PARAM and active only when ", name,
         " has that option (NNI passes them nested in one value)");
    // A child of a conditional parameter would need two conditions: hyperpack's `when` takes one.
    if (!when.empty()) {
      Error(s, name, "a nested choice inside a nested choice is not carried over");
      return;
    }
    NestedChildren(name, v);
  }

  // The options' own parameters. A name that several options share with the same range is one
  // parameter active for all of them (`when: layer in [Max_pool, Avg_pool]`); with different
  // ranges, each option's is its own parameter, NAME_OPTION_CHILD.
  void NestedChildren(const std::string& name, const YAML::Node& options) {
    struct Use {
      std::string option;  // as the study file writes it
      std::string label;   // as NNI's program sees it
      YAML::Node spec;
    };
    nested_[name] = nlohmann::json::object();  // the shim hands even a bare option back nested
    std::vector<std::string> order;
    std::map<std::string, std::vector<Use>> uses;
    for (const auto& item : options) {
      if (!item.IsMap()) continue;
      for (auto it = item.begin(); it != item.end(); ++it) {
        const std::string child = it->first.Scalar();
        if (child == "_name") continue;
        if (!uses.count(child)) order.push_back(child);
        uses[child].push_back({YamlScalar(item["_name"]), item["_name"].Scalar(), it->second});
      }
    }
    for (const std::string& child : order) {
      const std::vector<Use>& u = uses[child];
      bool same = std::all_of(u.begin(), u.end(), [&](const Use& x) {
        return YAML::Dump(x.spec) == YAML::Dump(u.front().spec);
      });
      if (same) {
        std::vector<std::string> opts;
        for (const Use& x : u) {
          opts.push_back(x.option);
          nested_[name][x.label][child] = name + "_" + child;
        }
        ChildParam(
            name + "_" + child, u.front().spec,
            opts.size() == 1 ? name + " == " + opts[0] : name + " in [" + Join(opts, ", ") + "]");
        continue;
      }
      for (const Use& x : u) {
        const std::string flat = name + "_" + SafeWord(x.option) + "_" + child;
        nested_[name][x.label][child] = flat;
        ChildParam(flat, x.spec, name + " == " + x.option);
      }
    }
  }

  void ChildParam(const std::string& name, const YAML::Node& spec, const std::string& when) {
    if (!spec.IsMap() || !spec["_type"] || !spec["_value"] || !spec["_value"].IsSequence()) {
      Error(spec, name, "expected {\"_type\": ..., \"_value\": [...]}");
      return;
    }
    Param(name, spec, when);
  }

  // An option's name as part of a parameter name: letters, digits and '_'.
  static std::string SafeWord(std::string word) {
    if (word.size() >= 2 && word.front() == '"') word = word.substr(1, word.size() - 2);
    for (char& c : word)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    return word;
  }

  // A v1 config's worker on Kubeflow (trial.worker) or FrameworkController (the first of
  // trial.taskRoles), or a null node.
  static YAML::Node V1Worker(const YAML::Node& v1) {
    if (!v1 || !v1.IsMap()) return YAML::Node();
    if (v1["worker"] && v1["worker"].IsMap()) return v1["worker"];
    const YAML::Node roles = v1["taskRoles"];
    if (roles && roles.IsSequence() && roles.size() > 0 && roles[0].IsMap()) return roles[0];
    return YAML::Node();
  }

  void Trial() {
    const YAML::Node v1 = Key("trial");
    if (!CommandGiven("trialCommand") && !TrialCommand(v1)) return;
    TrialRest(v1);
  }

  // trialCommand (or a v1 config's) as the trial's command; false after an error.
  bool TrialCommand(const YAML::Node& v1) {
    const YAML::Node worker = V1Worker(v1);
    const YAML::Node command = Key("trialcommand")                             ? Key("trialcommand")
                               : v1 && v1.IsMap() && v1["command"]             ? v1["command"]
                               : worker && worker.IsMap() && worker["command"] ? worker["command"]
                                                                               : YAML::Node();
    if (!command || !command.IsScalar()) {
      Error(v1 ? v1 : YAML::Node(), "trialCommand",
            "an experiment needs trialCommand (or, in v1 configs, trial.command, "
            "trial.worker.command or trial.taskRoles[0].command), or give one with --command");
      return false;
    }
    if (!Key("trialcommand") && !(v1 && v1.IsMap() && v1["command"]))
      Warn(worker, "trial.worker",
           "the worker's command runs here as one process; its replicas, image, other roles and "
           "parameter servers are NNI's training service's own: not carried over");
    yaml_ << "trial:\n  command: " << nlohmann::json(TemplateLiteral(command.Scalar())).dump()
          << "   # trialCommand, " << From(command) << "\n";
    return true;
  }

  // The trial's folder and the shim, after its command.
  void TrialRest(const YAML::Node& v1) {
    YAML::Node dir = Key("trialcodedirectory") ? Key("trialcodedirectory") : v1["codeDir"];
    // Relative to the config file, as NNI reads it; written absolute, so the study file may go
    // anywhere.
    std::error_code ec;
    fs::path parent = fs::path(file_).parent_path();
    fs::path base = fs::absolute(parent.empty() ? fs::path(".") : parent, ec).lexically_normal();
    fs::path code = dir ? (base / dir.Scalar()).lexically_normal() : base;
    yaml_ << "  workdir: " << nlohmann::json(code.string()).dump() << "   # trialCodeDirectory\n";
    // The program's calls of NNI's trial API are served by hyperpack's stand-in (shims/nni).
    yaml_
        << "  shim: nni   # nni.get_next_parameter(), nni.report_*_result() served by hyperpack\n";
    if (!nested_.empty()) {
      // Braces doubled: env values are templates.
      const std::string layout = TemplateLiteral(nested_.dump());
      yaml_ << "  env: {HYPERPACK_NNI_NESTED: " << nlohmann::json(layout).dump()
            << "}   # the nested choices, handed to the program nested as NNI does\n";
    }
  }

  void Tuner() {
    YAML::Node tuner = Key("tuner");
    std::string name = tuner["name"]               ? tuner["name"].Scalar()
                       : tuner["builtinTunerName"] ? tuner["builtinTunerName"].Scalar()
                                                   : "TPE";
    std::string lower = KeyOf(name);
    if (lower == "random") {
      yaml_ << "tuner: {algorithm: random}\n";
    } else if (lower == "gridsearch") {
      Warn(tuner, "tuner",
           "GridSearch has no hyperpack form: scrambled Sobol points cover the "
           "space instead");
      yaml_ << "tuner: {algorithm: sobol}   # tuner: GridSearch\n";
    } else {
      // TPE, Anneal, Evolution, SMAC, BOHB, GP, Metis, DNGO, PBT: model-based or evolutionary
      // searches; hyperpack's is its Gaussian process.
      yaml_ << "tuner: {algorithm: gp}   # tuner: " << name << "\n";
      if (lower != "tpe" && lower != "gp" && lower != "gptuner")
        Warn(tuner, "tuner", "tuner ", name, " becomes hyperpack's Gaussian-process tuner");
    }
  }

  void Budget() {
    std::vector<std::string> parts;
    YAML::Node trials = Key("maxtrialnumber") ? Key("maxtrialnumber") : Key("maxtrialnum");
    if (trials) parts.push_back("max_trials: " + trials.Scalar());
    if (Key("trialconcurrency"))
      parts.push_back("max_parallel: " + Key("trialconcurrency").Scalar());
    YAML::Node duration =
        Key("maxexperimentduration") ? Key("maxexperimentduration") : Key("maxexecduration");
    if (duration) parts.push_back("time_limit: " + duration.Scalar());
    if (!parts.empty()) yaml_ << "budget: {" << Join(parts, ", ") << "}\n";
    YAML::Node gpus = Key("trialgpunumber") ? Key("trialgpunumber") : Key("trial")["gpuNum"];
    if (gpus && gpus.IsScalar() && gpus.Scalar() != "0") {
      yaml_ << "resources: {gpus: " << gpus.Scalar() << "}   # trialGpuNumber, " << From(gpus)
            << "\n";
      Warn(gpus, "trialGpuNumber", "hyperpack starts a trial with gpus: ", gpus.Scalar(),
           " as that many ranks with one GPU each (torchrun's contract), not one process with ",
           gpus.Scalar(), " GPUs");
    }
  }

  void Assessor() {
    YAML::Node assessor = Key("assessor");
    if (!assessor) return;
    std::string name = assessor["name"]                  ? assessor["name"].Scalar()
                       : assessor["builtinAssessorName"] ? assessor["builtinAssessorName"].Scalar()
                                                         : "";
    if (KeyOf(name) == "medianstop") {
      YAML::Node args = assessor["classArgs"];
      std::string start = args && args["start_step"] ? args["start_step"].Scalar() : "0";
      yaml_ << "pruner: {algorithm: median, warmup_steps: " << start << "}   # assessor, "
            << From(assessor) << "\n";
      return;
    }
    Warn(assessor, "assessor", "assessor ", name,
         " has no hyperpack form and is not carried over (hyperpack has median, asha and "
         "hyperband pruners)");
  }

  std::vector<std::string> names_;
  // Each nested choice: option -> child -> the flat parameter (HYPERPACK_NNI_NESTED).
  nlohmann::json nested_ = nlohmann::json::object();
};

}  // namespace

ImportOutcome ImportNni(const std::string& text, const std::string& filename,
                        const ImportOptions& options) {
  return NniImporter(filename, options)
      .Run(text,
           "an NNI experiment config is a mapping with searchSpace(File), trialCommand, tuner");
}

}  // namespace hyperpack::study::internal
