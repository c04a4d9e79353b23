// `hyperpack export`: a study's chosen trials (the best, the best few, one by number, or the
// cheapest within a tolerance of the best) rendered from its StudyView as YAML, JSON, env, args or
// a launcher's format (launchers.h). The database and log formats are optuna_export.cc's and
// tensorboard_export.cc's.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "costs.h"
#include "hyperpack/config_json.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/report/report.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "launchers.h"
#include "study_text.h"
#include "study_view.h"

namespace hyperpack::report {

using storage::Storage;
using storage::TrialRecord;
using study::ParamEnvName;
using Json = nlohmann::ordered_json;

Result<ExportFormat> ParseExportFormat(const std::string& name) {
  static const std::pair<const char*, ExportFormat> kFormats[] = {
      {"yaml", ExportFormat::kYaml},
      {"json", ExportFormat::kJson},
      {"env", ExportFormat::kEnv},
      {"args", ExportFormat::kArgs},
      {"deepspeed", ExportFormat::kDeepSpeed},
      {"torchrun", ExportFormat::kTorchrun},
      {"hf", ExportFormat::kHuggingFace},
      {"lightning", ExportFormat::kLightning},
      {"hydra", ExportFormat::kHydra},
      {"optuna-sqlite", ExportFormat::kOptunaSqlite},
      {"tensorboard", ExportFormat::kTensorboard}};
  std::vector<std::string> names;
  for (const auto& [text, format] : kFormats) {
    if (name == text) return format;
    names.push_back(text);
  }
  return Status::Invalid("--format: '", name, "' is not a format; expected ", Join(names, ", "));
}

namespace {

std::string YamlScalar(const Value& v) {
  std::string text = FormatValue(v);
  if (!std::holds_alternative<std::string>(v)) return text;
  // A string that YAML would read as something else (a number, a boolean, null) is quoted.
  nlohmann::json as_json = std::get<std::string>(v);
  bool plain = !text.empty() && !ParseDouble(text) &&
               text.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos && text != "true" &&
               text != "false" && text != "null" && text != "~" && text.front() != ' ' &&
               text.back() != ' ' && text.front() != '-';
  return plain ? text : as_json.dump();
}

// What `export` writes out: `trial` alone, or the best `top` completed trials.
Result<std::vector<const TrialRecord*>> ChosenTrials(const StudyView& l, const std::string& name,
                                                     int top, std::optional<int> trial) {
  if (trial) {
    for (const TrialRecord& t : l.trials)
      if (t.number == *trial) return std::vector<const TrialRecord*>{&t};
    return Status::NotFound("study '", name, "' has no trial ", *trial, " (it has ",
                            l.trials.size(), ")");
  }
  if (top < 1) return Status::Invalid("--top must be >= 1 (got ", top, ")");
  auto ranked = Ranked(l);
  if (ranked.empty()) return Status::NotFound("study '", name, "' has no completed trial yet");
  if (static_cast<int>(ranked.size()) > top) ranked.resize(top);
  return ranked;
}

// A trial's parameters in the space's order.
Params OrderedParams(const StudyView& l, const TrialRecord& t) {
  Params ordered;
  for (const std::string& name : ConfigNames(t.params, l.space()))
    ordered.emplace_back(name, t.params.at(name));
  return ordered;
}

std::string ChosenValueText(const TrialRecord& t) {
  return t.value ? FormatDouble(*t.value) : StrCat("none (", TrialStateName(t.state), ")");
}

bool IsLauncher(ExportFormat f) {
  return f == ExportFormat::kDeepSpeed || f == ExportFormat::kTorchrun ||
         f == ExportFormat::kHuggingFace || f == ExportFormat::kLightning ||
         f == ExportFormat::kHydra;
}

// One trial in a launcher's format.
Status ExportLauncher(const StudyView& l, const TrialRecord& t, ExportFormat format,
                      std::ostream& out, std::ostream& warnings) {
  Params params = OrderedParams(l, t);
  LauncherOutput result;
  if (format == ExportFormat::kHydra) {
    result = HydraOverrides(params);
  } else {
    if (!l.spec)
      return Status::Invalid(
          "the stored study file no longer parses, so its export.roles are "
          "unknown; run the study once with this version");
    auto setup = ResolveSetup(params, l.spec->exports);
    if (!setup.ok()) return setup.status().WithContext(StrCat("trial ", t.number));
    switch (format) {
      case ExportFormat::kDeepSpeed:
        result = DeepSpeedConfig(*setup);
        NameWhatIsNotCarried(params, *setup, "--format deepspeed", &result);
        break;
      case ExportFormat::kHuggingFace:
        result = HuggingFaceArguments(*setup);
        NameWhatIsNotCarried(params, *setup, "--format hf", &result);
        break;
      case ExportFormat::kLightning:
        result = LightningTrainer(*setup);
        NameWhatIsNotCarried(params, *setup, "--format lightning", &result);
        break;
      default: {
        Config config(params.begin(), params.end());
        std::string command = study::RenderTemplate(l.spec->trial.command, config,
                                                    {{"trial_id", std::to_string(t.number)}});
        std::vector<std::string> names;
        for (const ParamSpec& p : l.spec->space.params()) names.push_back(p.name);
        command = ResolveParamVariables(command, params, names);
        result = TorchrunCommand(*setup, command, params);
      }
    }
  }
  out << result.text;
  for (const std::string& w : result.warnings) warnings << "warning: " << w << "\n";
  return Status::Ok();
}

// `--format args` prints --NAME VALUE; a study whose command took a parameter from its environment
// (HP_<NAME>, HYPERPACK_PARAMS_FILE: hyperpack-trainer, ${HP_X:-0}) and not as a placeholder may
// have a program that reads no such argument: said by name, with the formats that carry it.
void WarnUnplacedArgs(const StudyView& l, const std::vector<Params>& configs,
                      std::ostream& warnings) {
  if (!l.spec || configs.empty()) return;
  auto placed = study::TemplatePlaceholders(l.spec->trial.command);
  if (!placed.ok()) return;
  std::vector<std::string> unplaced;
  for (const auto& [name, value] : configs.front())
    if (std::find(placed->begin(), placed->end(), name) == placed->end()) unplaced.push_back(name);
  if (unplaced.empty()) return;
  warnings << "warning: the study's command took " << Join(unplaced, ", ")
           << " from its environment, not as arguments: the program may read no --NAME for "
              "them; --format env or torchrun carries them as it got them\n";
}

// The plain formats: the configuration alone (`single`), or one entry per trial.
void ExportPlain(const StudyView& l, const std::vector<const TrialRecord*>& chosen,
                 const std::vector<Params>& configs, ExportFormat format, bool single,
                 std::ostream& out) {
  switch (format) {
    case ExportFormat::kJson: {
      if (single) {
        out << ParamsJson(*chosen.front(), l.space()).dump(2) << "\n";
        break;
      }
      Json all = Json::array();
      for (const TrialRecord* t : chosen)
        all.push_back(Json{
            {"trial", t->number}, {"value", *t->value}, {"params", ParamsJson(*t, l.space())}});
      out << all.dump(2) << "\n";
      break;
    }
    case ExportFormat::kYaml:
      for (size_t i = 0; i < chosen.size(); ++i) {
        if (single) {
          out << "# study " << l.study.name << ", trial " << chosen[i]->number << ": "
              << l.study.metric << " = " << ChosenValueText(*chosen[i]) << "\n";
          for (const auto& [k, v] : configs[i]) out << k << ": " << YamlScalar(v) << "\n";
          continue;
        }
        out << "- trial: " << chosen[i]->number << "\n  value: " << ChosenValueText(*chosen[i])
            << "\n  params:\n";
        for (const auto& [k, v] : configs[i]) out << "    " << k << ": " << YamlScalar(v) << "\n";
      }
      break;
    case ExportFormat::kEnv:
      for (size_t i = 0; i < chosen.size(); ++i) {
        if (i) out << "\n";
        out << "# trial " << chosen[i]->number << ": " << l.study.metric << " = "
            << ChosenValueText(*chosen[i]) << "\n";
        for (const auto& [k, v] : configs[i])
          out << ParamEnvName(k) << "=" << ShellQuote(FormatValue(v)) << "\n";
        // As a trial gets them: a program that reads the parameters file's JSON (hyperpack-trainer)
        // reads this where it is given no file.
        out << env::kParams << "=" << ShellQuote(ParamsJson(*chosen[i], l.space()).dump()) << "\n";
      }
      break;
    case ExportFormat::kArgs:
      for (size_t i = 0; i < chosen.size(); ++i) {
        std::vector<std::string> parts;
        for (const auto& [k, v] : configs[i])
          parts.push_back("--" + k + " " + ShellQuote(FormatValue(v)));
        out << Join(parts, " ") << "\n";
      }
      break;
    default:
      break;  // the launchers' formats: ExportLauncher
  }
}

}  // namespace

Status ExportBest(Storage& db, const std::string& name, ExportFormat format, const Choice& choice,
                  std::ostream& out, std::ostream& warnings) {
  const int top = choice.top;
  const std::optional<int>& trial = choice.trial;
  const std::optional<Tolerance>& within = choice.within;
  HP_ASSIGN_OR_RETURN(StudyView l,
                      ReadStudyView(db, name, within ? ViewParts::kCosts : ViewParts::kTrials));
  std::vector<const TrialRecord*> chosen;
  if (choice.pick) {
    if (trial || within || top != 1 || choice.by_model)
      return Status::Invalid(
          "--pick chooses one trial: it goes with none of --top, --trial, --within and "
          "--by-model");
    HP_ASSIGN_OR_RETURN(const TrialRecord* picked, PickFromFront(l, *choice.pick));
    chosen = {picked};
  } else if (l.spec && l.spec->MultiObjective() && !trial) {
    return Status::Invalid("study '", name,
                           "' has several objectives and no single best: choose a member of its "
                           "Pareto set with --trial N or --pick CONDITIONS --by METRIC (hyperpack "
                           "best ",
                           name, " lists it)");
  } else if (choice.by_model) {
    if (trial || within || top != 1)
      return Status::Invalid(
          "--by-model picks one trial, the model's recommendation: it goes with none of --top, "
          "--trial and --within");
    HP_ASSIGN_OR_RETURN(ModelPick model, PickByModel(l));
    chosen = {model.trial};
  } else if (within) {
    if (trial || top != 1)
      return Status::Invalid(
          "--within picks one trial, the cheapest good one: it goes with "
          "neither --top nor --trial");
    std::optional<WithinChoice> w = ChooseWithin(l, TrialCosts(l), *within);
    if (!w) return Status::NotFound("study '", name, "' has no completed trial yet");
    chosen = {w->trial};
  } else {
    HP_ASSIGN_OR_RETURN(chosen, ChosenTrials(l, name, top, trial));
  }
  if (format == ExportFormat::kOptunaSqlite)
    return Status::Invalid("--format optuna-sqlite writes a database file: give -o FILE.db");
  if (format == ExportFormat::kTensorboard)
    return Status::Invalid("--format tensorboard writes a directory of logs: give -o DIR");
  if (IsLauncher(format)) {
    if (chosen.size() > 1)
      return Status::Invalid(
          "a launcher's format holds one configuration: use --top 1 (the "
          "default) or --trial N");
    return ExportLauncher(l, *chosen.front(), format, out, warnings);
  }
  std::vector<Params> configs;
  for (const TrialRecord* t : chosen) {
    configs.push_back(OrderedParams(l, *t));
  }
  ExportPlain(l, chosen, configs, format, /*single=*/chosen.size() == 1 && top == 1, out);
  if (format == ExportFormat::kArgs) WarnUnplacedArgs(l, configs, warnings);
  return Status::Ok();
}

}  // namespace hyperpack::report
