// The YAML under the study file: loading, mappings, typed scalars and diagnostics (spec_parser.h).
#include "spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "yaml_diagnostics.h"

namespace hyperpack::study::internal {

bool IsIdentifier(const std::string& s) {
  return IsToken(s, {.digits = false, .others = "_"}, {.others = "_"});
}

bool IsMetricName(const std::string& s) { return IsToken(s, {.others = "_"}, {.others = "_./-"}); }

bool IsParamName(const std::string& s) { return IsToken(s, {.others = "_"}, {.others = "_.-"}); }

bool Parser::Load(const std::string& text, YAML::Node* root) {
  std::optional<YAML::Node> loaded = LoadYaml(text, file_, &errors_);
  if (!loaded) return false;
  *root = std::move(*loaded);
  return true;
}

Diagnostic Parser::At(const YAML::Node& at, const std::string& key, std::string message) const {
  return DiagnosticAt(file_, at, last_mark_, key, std::move(message));
}

std::string Parser::Describe(const YAML::Node& node) {
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

std::string Parser::Path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::map<std::string, Field> Parser::Fields(const YAML::Node& map, const std::string& path,
                                            const std::vector<std::string>& allowed,
                                            bool list_allowed) {
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

std::map<std::string, Field> Parser::Fields(const Field& section, const std::string& path,
                                            const std::vector<std::string>& allowed,
                                            bool list_allowed) {
  if (section.value.IsNull()) {
    Error(section.key, path, "expected a mapping of keys to values, got nothing");
    return {};
  }
  return Fields(section.value, path, allowed, list_allowed);
}

const Field* Parser::Get(const std::map<std::string, Field>& fields, const std::string& name) {
  auto it = fields.find(name);
  return it == fields.end() ? nullptr : &it->second;
}

void Parser::Missing(const YAML::Node& owner, const std::string& path, const std::string& key,
                     const std::string& expected) {
  Error(owner, Path(path, key), "missing; expected ", expected);
}

std::optional<std::string> Parser::String(const Field& f, const std::string& path) {
  if (!f.value.IsScalar() || f.value.Scalar().empty()) {
    Error(f.value.IsNull() ? f.key : f.value, path, "expected text, got ", Describe(f.value));
    return std::nullopt;
  }
  return f.value.Scalar();
}

std::optional<double> Parser::Number(const Field& f, const std::string& path) {
  if (f.value.IsScalar() && f.value.Tag() != "!") {
    if (auto x = ParseDouble(f.value.Scalar()); x && std::isfinite(*x)) return x;
  }
  Error(f.value.IsNull() ? f.key : f.value, path, "expected a number, got ", Describe(f.value));
  return std::nullopt;
}

std::optional<int64_t> Parser::Integer(const Field& f, const std::string& path) {
  if (f.value.IsScalar() && f.value.Tag() != "!") {
    if (auto x = ParseInt(f.value.Scalar())) return x;
  }
  Error(f.value.IsNull() ? f.key : f.value, path, "expected a whole number, got ",
        Describe(f.value));
  return std::nullopt;
}

std::optional<bool> Parser::Bool(const Field& f, const std::string& path) {
  if (f.value.IsScalar() && f.value.Tag() != "!") {
    std::string s = f.value.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  Error(f.value.IsNull() ? f.key : f.value, path, "expected true or false, got ",
        Describe(f.value));
  return std::nullopt;
}

std::optional<double> Parser::Duration(const Field& f, const std::string& path) {
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

Value Parser::InferValue(const std::string& text, bool quoted) {
  if (!quoted) {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    if (auto i = ParseInt(text)) return *i;
    if (auto d = ParseDouble(text); d && std::isfinite(*d)) return *d;
  }
  return text;
}

nlohmann::json Parser::YamlToJson(const YAML::Node& node) {
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

Value Parser::StructuredValue(const YAML::Node& node) {
  return YamlToJson(node).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Value> Parser::ScalarValue(const YAML::Node& node, const YAML::Node& key,
                                         const std::string& path) {
  if (!node.IsScalar()) {
    Error(node.IsNull() ? key : node, path, "expected a number, text or boolean, got ",
          Describe(node));
    return std::nullopt;
  }
  return InferValue(node.Scalar(), node.Tag() == "!");
}

SourcePos Parser::Position(const YAML::Node& node, std::string key) const {
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

}  // namespace hyperpack::study::internal
