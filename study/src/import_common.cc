#include "import_common.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "hyperpack/study/optuna.h"
#include "yaml_diagnostics.h"

namespace hyperpack::study::internal {

std::string YamlScalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!" || (!ParseDouble(text) && text != "true" && text != "false")) {
    bool plain = !text.empty() && text.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos &&
                 text.front() != ' ' && text.back() != ' ' && text.front() != '-' &&
                 text != "null" && text != "~" && !ParseDouble(text);
    return plain ? text : nlohmann::json(text).dump();
  }
  return text;
}

std::string TemplateLiteral(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '{' ? "{{" : c == '}' ? "}}" : std::string(1, c);
  return out;
}

std::string FoldedKey(const std::string& key) {
  std::string out;
  for (char c : key)
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string FlowYaml(const YAML::Node& node) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << node;
  std::string out = e.c_str();
  for (char& c : out)
    if (c == '\n') c = ' ';
  return out;
}

bool IsWholeNumber(const YAML::Node& n) { return n.IsScalar() && ParseInt(n.Scalar()).has_value(); }

std::optional<bool> YamlBool(const YAML::Node& node) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) return std::nullopt;
  return value;
}

ImportOutcome Importer::Run(const std::string& text, const std::string& what) {
  ImportOutcome out;
  std::optional<YAML::Node> loaded = LoadYaml(text, file_, &out.errors);
  if (!loaded) return out;
  const YAML::Node& root = *loaded;
  if (!root.IsMap()) {
    out.errors.push_back({file_, 1, 1, "", what});
    return out;
  }
  root_mark_ = root.Mark();
  try {
    Convert(root);
  } catch (const YAML::Exception& e) {  // a node of an unexpected kind, read as another
    const YAML::Mark m = e.mark.is_null() ? root_mark_ : e.mark;
    errors_.push_back({file_, m.line + 1, m.column + 1, "",
                       "a value here is not of the kind this format has here (a list where a "
                       "mapping belongs, or the reverse); check it against the tool's reference"});
  } catch (const nlohmann::json::exception&) {  // text that is not UTF-8, written out as JSON
    errors_.push_back({file_, root_mark_.line + 1, root_mark_.column + 1, "",
                       "the file holds bytes that are not UTF-8 text; save it as UTF-8"});
  }
  out.errors = std::move(errors_);
  out.warnings = std::move(warnings_);
  if (out.errors.empty()) out.study_yaml = yaml_.str();
  return out;
}

Diagnostic Importer::At(const YAML::Node& at, const std::string& key, std::string message) const {
  // A missing key is said at the start of the file (Run sets the root's mark before Convert).
  return DiagnosticAt(file_, at, root_mark_, key, std::move(message));
}

bool Importer::CommandGiven(const std::string& replaced) {
  if (!options_.command) return false;
  yaml_ << "trial:\n  command: " << nlohmann::json(*options_.command).dump()
        << "   # --command, in "
        << "place of " << replaced << "\n";
  return true;
}

std::string Importer::From(const YAML::Node& at) const {
  return StrCat(std::filesystem::path(file_).filename().string(), ":",
                at.Mark().is_null() ? 0 : at.Mark().line + 1);
}

void Importer::WriteName(const std::string& wanted, const std::string& tool) {
  std::string name = wanted.empty() ? std::filesystem::path(file_).stem().string() : wanted;
  std::string clean;
  for (char c : name)
    clean +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ? c : '-';
  if (clean.empty() || !std::isalnum(static_cast<unsigned char>(clean.front())))
    clean = "sweep-" + clean;
  yaml_ << "# Imported from the " << tool << " " << file_ << " by hyperpack import.\n";
  yaml_ << "name: " << clean << "\n";
}

}  // namespace hyperpack::study::internal

namespace hyperpack::study {

Result<SweepFormat> ParseSweepFormat(const std::string& name) {
  static constexpr std::pair<const char*, SweepFormat> kNames[] = {
      {"wandb", SweepFormat::kWandb},
      {"nni", SweepFormat::kNni},
      {"determined", SweepFormat::kDetermined},
      {"katib", SweepFormat::kKatib},
      {"optuna", SweepFormat::kOptuna}};
  for (const auto& [text, format] : kNames)
    if (name == text) return format;
  return Status::Invalid("--from: '", name,
                         "' is not a format hyperpack imports; expected auto, wandb, nni, "
                         "determined, katib or optuna");
}

Result<std::optional<SweepFormat>> ParseFromFlag(const std::string& name) {
  if (name == "auto") return std::optional<SweepFormat>();
  HP_ASSIGN_OR_RETURN(SweepFormat format, ParseSweepFormat(name));
  return std::optional<SweepFormat>(format);
}

const char* SweepFormatName(SweepFormat format) {
  switch (format) {
    case SweepFormat::kNni:
      return "nni";
    case SweepFormat::kDetermined:
      return "determined";
    case SweepFormat::kKatib:
      return "katib";
    case SweepFormat::kOptuna:
      return "optuna";
    case SweepFormat::kWandb:
      break;
  }
  return "wandb";
}

namespace {

// What each format is told by (DetectSweepFormat's table, in the order errors list them).
struct Signs {
  bool study = false;
  std::vector<SweepFormat> tools;
};

Signs SignsOf(const YAML::Node& root) {
  std::set<std::string> keys, folded;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) continue;
    keys.insert(it->first.Scalar());
    folded.insert(internal::FoldedKey(it->first.Scalar()));
  }
  auto has = [&](const char* k) { return keys.count(k) > 0; };
  auto folds = [&](const char* k) { return folded.count(k) > 0; };
  const YAML::Node kind = root["kind"], api = root["apiVersion"];
  Signs s;
  s.study = (has("objective") || has("objectives")) && has("search_space");
  if ((kind && kind.IsScalar() && kind.Scalar() == "Experiment") ||
      (api && api.IsScalar() && api.Scalar().rfind("kubeflow.org", 0) == 0))
    s.tools.push_back(SweepFormat::kKatib);
  if (has("searcher") || (has("hyperparameters") && has("entrypoint")))
    s.tools.push_back(SweepFormat::kDetermined);
  const YAML::Node trial = root["trial"];
  if (!s.study &&
      (folds("trialcommand") || folds("searchspace") || folds("searchspacefile") ||
       folds("searchspacepath") || folds("trainingservice") || folds("trialconcurrency") ||
       folds("maxtrialnumber") ||
       (trial && trial.IsMap() && trial["command"] && !has("objective") && !has("objectives"))))
    s.tools.push_back(SweepFormat::kNni);
  if (has("method") || (has("parameters") && (has("metric") || has("program") || has("command"))))
    s.tools.push_back(SweepFormat::kWandb);
  return s;
}

}  // namespace

Result<std::optional<SweepFormat>> DetectSweepFormat(const std::string& text,
                                                     const std::string& filename) {
  if (LooksLikeOptunaStorage(text)) return std::optional<SweepFormat>(SweepFormat::kOptuna);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(filename, ":", e.mark.line + 1, ":", e.mark.column + 1,
                           ": invalid YAML: ", e.msg);
  }
  static const char* kLookedFor =
      "looked for a hyperpack study (objective or objectives, and search_space), a Katib "
      "Experiment (kind: "
      "Experiment), a Determined experiment (searcher), an NNI experiment (trialCommand, "
      "searchSpace or searchSpaceFile) and a W&B sweep (method, parameters)";
  if (!root.IsMap())
    return Status::Invalid(filename,
                           ":1:1: the file is not a mapping of keys, so its format "
                           "cannot be told; ",
                           kLookedFor);
  const Signs signs = SignsOf(root);
  if (signs.study && signs.tools.empty()) return std::optional<SweepFormat>();
  if (signs.tools.size() == 1 && !signs.study) return std::optional<SweepFormat>(signs.tools[0]);
  const YAML::Mark m = root.Mark();
  const std::string at = StrCat(filename, ":", m.line + 1, ":", m.column + 1, ": ");
  if (signs.tools.empty())
    return Status::Invalid(at, "cannot tell which tool's file this is: ", kLookedFor,
                           "; name it with --from wandb|nni|determined|katib");
  std::vector<std::string> names;
  if (signs.study) names.push_back("a hyperpack study");
  for (SweepFormat f : signs.tools) names.push_back(SweepFormatName(f));
  return Status::Invalid(at, "the file's keys fit several formats (", Join(names, ", "),
                         "): name the tool with --from wandb|nni|determined|katib");
}

ImportOutcome ImportSweep(const std::string& text, const std::string& filename, SweepFormat format,
                          const ImportOptions& options) {
  switch (format) {
    case SweepFormat::kNni:
      return internal::ImportNni(text, filename, options);
    case SweepFormat::kDetermined:
      return internal::ImportDetermined(text, filename, options);
    case SweepFormat::kKatib:
      return internal::ImportKatib(text, filename, options);
    case SweepFormat::kOptuna: {
      ImportOutcome out;
      out.errors.push_back({filename, 0, 0, "",
                            "an Optuna storage holds a study and its trials, not a sweep: store "
                            "it with hyperpack import " +
                                filename + ", then hyperpack run the study file it writes"});
      return out;
    }
    case SweepFormat::kWandb:
      break;
  }
  return internal::ImportWandb(text, filename, options);
}

ParseOutcome LoadSweepFile(const std::string& path, SweepFormat format,
                           const ImportOptions& options) {
  ParseOutcome out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.push_back({path, 0, 0, "", "cannot read the sweep file (does it exist?)"});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  ImportOutcome imported = ImportSweep(text.str(), path, format, options);
  if (!imported.errors.empty()) {
    out.errors = std::move(imported.errors);
    out.warnings = std::move(imported.warnings);
    return out;
  }
  out = ParseStudy(imported.study_yaml, path + " (imported)");
  out.warnings.insert(out.warnings.begin(), imported.warnings.begin(), imported.warnings.end());
  return out;
}

ParseOutcome LoadAnyStudyFile(const std::string& path, std::optional<SweepFormat> format,
                              const ImportOptions& options) {
  if (format) return LoadSweepFile(path, *format, options);
  std::ifstream in(path, std::ios::binary);
  if (!in) return LoadStudyFile(path);  // its error names the file
  std::ostringstream text;
  text << in.rdbuf();
  auto detected = DetectSweepFormat(text.str(), path);
  // A file that is no tool's is read as a study, so its errors are the study file's own.
  if (!detected.ok() || !*detected) return LoadStudyFile(path);
  ParseOutcome out = LoadSweepFile(path, **detected, options);
  out.warnings.insert(out.warnings.begin(),
                      {path, 1, 1, "",
                       StrCat("warning: read as a ", SweepFormatName(**detected),
                              " file (name the tool with --from to say so)")});
  return out;
}

}  // namespace hyperpack::study
