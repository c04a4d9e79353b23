#include "yaml_diagnostics.h"

#include <utility>

namespace hyperpack::study::internal {

std::optional<YAML::Node> LoadYaml(const std::string& text, const std::string& file,
                                   std::vector<Diagnostic>* errors) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // The mark is yaml-cpp's 0-based position; null (line -1) when it has none.
    const bool placed = !e.mark.is_null();
    errors->push_back({file, placed ? e.mark.line + 1 : 0, placed ? e.mark.column + 1 : 0, "",
                       "invalid YAML: " + e.msg});
    return std::nullopt;
  }
}

Diagnostic DiagnosticAt(const std::string& file, const YAML::Node& at, const YAML::Mark& fallback,
                        std::string key, std::string message) {
  Diagnostic d;
  d.file = file;
  YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
  if (mark.is_null()) mark = fallback;
  if (!mark.is_null()) {
    d.line = mark.line + 1;
    d.column = mark.column + 1;
  }
  d.key = std::move(key);
  d.message = std::move(message);
  return d;
}

}  // namespace hyperpack::study::internal
