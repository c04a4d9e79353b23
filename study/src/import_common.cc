#include "import_common.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

bool IsWholeNumber(const YAML::Node& n) { return n.IsScalar() && ParseInt(n.Scalar()).has_value(); }

ImportOutcome Importer::Run(const std::string& text, const std::string& what) {
  ImportOutcome out;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    out.errors.push_back(
        {file_, e.mark.line + 1, e.mark.column + 1, "", StrCat("invalid YAML: ", e.msg)});
    return out;
  }
  if (!root.IsMap()) {
    out.errors.push_back({file_, 1, 1, "", what});
    return out;
  }
  try {
    Convert(root);
  } catch (const YAML::Exception& e) {  // a node of an unexpected kind, read as another
    errors_.push_back(
        {file_, e.mark.line + 1, e.mark.column + 1, "", StrCat("unexpected YAML here: ", e.msg)});
  }
  out.errors = std::move(errors_);
  out.warnings = std::move(warnings_);
  if (out.errors.empty()) out.study_yaml = yaml_.str();
  return out;
}

Diagnostic Importer::At(const YAML::Node& at, const std::string& key, std::string message) const {
  YAML::Mark m = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  return {file_, m.is_null() ? 0 : m.line + 1, m.is_null() ? 0 : m.column + 1, key,
          std::move(message)};
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
  if (name == "wandb") return SweepFormat::kWandb;
  if (name == "nni") return SweepFormat::kNni;
  if (name == "determined") return SweepFormat::kDetermined;
  if (name == "katib") return SweepFormat::kKatib;
  return Status::Invalid(
      "--from: '", name,
      "' is not a format hyperpack imports; expected wandb, nni, determined or katib");
}

ImportOutcome ImportSweep(const std::string& text, const std::string& filename,
                          SweepFormat format) {
  switch (format) {
    case SweepFormat::kNni:
      return internal::ImportNni(text, filename);
    case SweepFormat::kDetermined:
      return internal::ImportDetermined(text, filename);
    case SweepFormat::kKatib:
      return internal::ImportKatib(text, filename);
    case SweepFormat::kWandb:
      break;
  }
  return internal::ImportWandb(text, filename);
}

ParseOutcome LoadSweepFile(const std::string& path, SweepFormat format) {
  ParseOutcome out;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    out.errors.push_back({path, 0, 0, "", "cannot read the sweep file (does it exist?)"});
    return out;
  }
  std::ostringstream text;
  text << in.rdbuf();
  ImportOutcome imported = ImportSweep(text.str(), path, format);
  if (!imported.errors.empty()) {
    out.errors = std::move(imported.errors);
    out.warnings = std::move(imported.warnings);
    return out;
  }
  out = ParseStudy(imported.study_yaml, path + " (imported)");
  out.warnings.insert(out.warnings.begin(), imported.warnings.begin(), imported.warnings.end());
  return out;
}

}  // namespace hyperpack::study
