// What every sweep importer (import_*.cc) shares: reading the file as YAML and diagnostics at a
// node's line and column (both yaml_diagnostics.h's, as the study file's parser has them), and the
// study file being written. Internal to hyperpack::study.
// Thread-safety: one importer per thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hyperpack/study/import.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

// A number or text as YAML writes it: strings that YAML would read as something else are quoted.
std::string YamlScalar(const YAML::Node& node);
// A list or mapping in YAML's flow style on one line, for a structured value of the study file.
std::string FlowYaml(const YAML::Node& node);
// `text` as a literal in a hyperpack template (a command, an env value): braces doubled.
std::string TemplateLiteral(const std::string& text);
// A key as NNI matches it: lower case, without underscores (trialCommand, trial_command).
std::string FoldedKey(const std::string& key);
// A scalar that reads as a whole number.
bool IsWholeNumber(const YAML::Node& node);
// A boolean as YAML 1.1 writes it (true, True, TRUE, yes, on, ...), as the tools' Python loaders
// read it; nullopt for anything else.
std::optional<bool> YamlBool(const YAML::Node& node);

class Importer {
 public:
  Importer(std::string filename, ImportOptions options)
      : file_(std::move(filename)), options_(std::move(options)) {}
  virtual ~Importer() = default;

  // Parses `text` as YAML and hands the root mapping to Convert; `what` names the format in the
  // error for a file that is not a mapping.
  ImportOutcome Run(const std::string& text, const std::string& what);

 protected:
  virtual void Convert(const YAML::Node& root) = 0;

  template <typename... Args>
  void Error(const YAML::Node& at, const std::string& key, const Args&... args) {
    errors_.push_back(At(at, key, StrCat(args...)));
  }
  template <typename... Args>
  void Warn(const YAML::Node& at, const std::string& key, const Args&... args) {
    warnings_.push_back(At(at, key, StrCat("warning: ", args...)));
  }
  Diagnostic At(const YAML::Node& at, const std::string& key, std::string message) const;
  // Where the user gave --command: writes the trial section's first line with it in place of
  // what the file says at `replaced` (its key) and returns true.
  bool CommandGiven(const std::string& replaced);
  // "sweep.yaml:12", for the comment on a line of the study file.
  std::string From(const YAML::Node& at) const;
  // `name:` from `wanted` (or the file's stem), cleaned into a study name, with the header comment.
  void WriteName(const std::string& wanted, const std::string& tool);

  std::string file_;
  ImportOptions options_;
  YAML::Mark root_mark_ = YAML::Mark::null_mark();  // where a missing key's error points
  std::ostringstream yaml_;
  std::vector<Diagnostic> errors_, warnings_;
};

// One per format, each in its own import_*.cc.
ImportOutcome ImportWandb(const std::string& text, const std::string& filename,
                          const ImportOptions& options);
ImportOutcome ImportNni(const std::string& text, const std::string& filename,
                        const ImportOptions& options);
ImportOutcome ImportDetermined(const std::string& text, const std::string& filename,
                               const ImportOptions& options);
ImportOutcome ImportKatib(const std::string& text, const std::string& filename,
                          const ImportOptions& options);

}  // namespace hyperpack::study::internal
