#include "hyperpack/config_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace hyperpack {
namespace {

nlohmann::ordered_json ToJson(const Value& v) {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::get<std::string>(v);
}

}  // namespace

std::vector<std::string> ConfigNames(const Config& config, const SearchSpace* space) {
  std::vector<std::string> names;
  if (space != nullptr) {
    for (const ParamSpec& p : space->params())
      if (config.count(p.name)) names.push_back(p.name);
  }
  for (const auto& [name, unused] : config)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

std::string ConfigToJson(const Config& config, const SearchSpace* space) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const std::string& name : ConfigNames(config, space)) {
    const Value& value = config.at(name);
    const ParamSpec* p = space ? space->Find(name) : nullptr;
    const std::string* text = std::get_if<std::string>(&value);
    nlohmann::ordered_json decoded =
        p && p->structured && text
            ? nlohmann::ordered_json::parse(*text, nullptr, false)
            : nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
    out[name] = decoded.is_discarded() ? ToJson(value) : decoded;
  }
  // A value from a study file or an agent need not be UTF-8: its bad bytes are replaced.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Result<Config> ConfigFromJson(const std::string& json) {
  nlohmann::json parsed = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object())
    return Status::Invalid("parameters are not a JSON object: ", json.substr(0, 80));
  Config config;
  for (const auto& [name, v] : parsed.items()) {
    if (v.is_boolean()) {
      config[name] = v.get<bool>();
    } else if (v.is_number_integer()) {
      config[name] = v.get<int64_t>();
    } else if (v.is_number()) {
      config[name] = v.get<double>();
    } else if (v.is_string()) {
      config[name] = v.get<std::string>();
    } else if (v.is_array() || v.is_object()) {
      config[name] = v.dump();  // a structured parameter's value, as its text
    } else {
      return Status::Invalid("parameter '", name, "' is not a number, string or boolean");
    }
  }
  return config;
}

}  // namespace hyperpack
