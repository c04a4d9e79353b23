// What the study file's parser (spec_parser.h) and the sweep importers (import_common.h) share
// about the YAML they are given: loading it, with a diagnostic at the line and column where text
// stops being YAML, and pointing a diagnostic at a node. yaml-cpp's exceptions stop here.
// Internal to hyperpack::study. Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "hyperpack/study/spec.h"

namespace hyperpack::study::internal {

// `text` as YAML; nullopt, and one diagnostic in *errors ("invalid YAML: ..." where yaml-cpp
// stopped), when it is not YAML.
std::optional<YAML::Node> LoadYaml(const std::string& text, const std::string& file,
                                   std::vector<Diagnostic>* errors);

// A diagnostic at `at`'s line and column; where `at` has none (a key that is missing), at
// `fallback` (the mapping it is missing from, or the file's root); without a line where neither
// has one.
Diagnostic DiagnosticAt(const std::string& file, const YAML::Node& at, const YAML::Mark& fallback,
                        std::string key, std::string message);

}  // namespace hyperpack::study::internal
