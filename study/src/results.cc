#include "hyperpack/study/results.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hyperpack/config_json.h"
#include "hyperpack/text.h"

namespace hyperpack::study {
namespace {

using Json = nlohmann::json;

bool IsValueKey(const std::string& key, const StudySpec& spec) {
  return key == "value" || key == spec.objective.metric;
}

// The 1-based line of byte `offset` in `text`.
int LineOf(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
}

Status At(const std::string& path, int line, const std::string& what) {
  return Status::Invalid(path, ":", line, ": ", what);
}

// One result's configuration and value, checked against the space.
Result<PriorResult> Make(Config params, std::optional<double> value, int line,
                         const std::string& path, const StudySpec& spec) {
  if (!value || !std::isfinite(*value))
    return At(path, line,
              StrCat("no finite value; give \"value\" (or \"", spec.objective.metric, "\")"));
  auto conformed = spec.space.Conform(std::move(params));
  if (!conformed.ok())
    return At(path, line,
              conformed.status().message() + "; the study's space is:\n" + spec.space.Describe());
  return PriorResult{*std::move(conformed), *value, line};
}

// The line each element of the top-level list starts on.
std::vector<int> ElementLines(const std::string& text) {
  std::vector<int> lines;
  int depth = 0, line = 1;
  bool in_string = false, escaped = false, expecting = false;
  for (char c : text) {
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (depth == 1 && expecting && c != ',' && c != ']' &&
        !std::isspace(static_cast<unsigned char>(c))) {
      lines.push_back(line);
      expecting = false;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') {
      if (++depth == 1) expecting = true;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 1) {
      expecting = true;
    }
  }
  return lines;
}

Result<std::vector<PriorResult>> FromJson(const std::string& text, const std::string& path,
                                          const StudySpec& spec) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return At(path, LineOf(text, e.byte), StrCat("not JSON: ", e.what()));
  }
  if (!doc.is_array())
    return At(path, 1, "expected a list of results: [{\"params\": {...}, \"value\": 0.12}, ...]");
  const std::vector<int> lines = ElementLines(text);
  std::vector<PriorResult> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    const int line = i < lines.size() ? lines[i] : 1;
    const Json& one = doc[i];
    if (!one.is_object()) return At(path, line, "a result is an object");
    Json params = Json::object();
    std::optional<double> value;
    for (const auto& [key, v] : one.items()) {
      if (IsValueKey(key, spec)) {
        if (v.is_number()) value = v.get<double>();
      } else if (key == "params" && v.is_object()) {
        for (const auto& [name, p] : v.items()) params[name] = p;
      } else {
        params[key] = v;
      }
    }
    auto config = ConfigFromJson(params.dump());
    if (!config.ok()) return At(path, line, config.status().message());
    HP_ASSIGN_OR_RETURN(PriorResult r, Make(*std::move(config), value, line, path, spec));
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else if (c != '\r') {
      cells.back() += c;
    }
  }
  return cells;
}

// A cell read as parameter `p`'s type.
std::optional<Value> Cell(const ParamSpec& p, const std::string& cell) {
  switch (p.type) {
    case ParamType::kFloat:
      if (auto d = ParseDouble(cell)) return Value{*d};
      return std::nullopt;
    case ParamType::kInt:
      if (auto i = ParseInt(cell)) return Value{*i};
      if (auto d = ParseDouble(cell); d && *d == std::floor(*d) && std::abs(*d) < 9e15)
        return Value{static_cast<int64_t>(*d)};
      return std::nullopt;
    case ParamType::kCategorical:
      for (const Value& v : p.values) {
        if (FormatValue(v) == cell) return v;
        // pandas writes a bool True or False
        if (const bool* b = std::get_if<bool>(&v); b && cell == (*b ? "True" : "False")) return v;
      }
      return std::nullopt;
    case ParamType::kFixed:
      return FormatValue(p.value) == cell ? std::optional<Value>(p.value) : std::nullopt;
  }
  return std::nullopt;
}

// What a CSV column holds. Optuna's `study.trials_dataframe().to_csv()` is read as it is written:
// its parameters are params_NAME, its state column keeps only COMPLETE rows, and its bookkeeping
// (the index pandas writes, number, times, attributes) is passed over.
enum class Role { kParam, kValue, kState, kIgnored };
struct Column {
  Role role = Role::kIgnored;
  const ParamSpec* param = nullptr;
};

// Optuna's own columns by name, read into the role each plays here.
constexpr std::pair<const char*, Role> kOptunaColumns[] = {
    {"state", Role::kState},
    {"", Role::kIgnored},
    {"number", Role::kIgnored},
    {"datetime_start", Role::kIgnored},
    {"datetime_complete", Role::kIgnored},
    {"duration", Role::kIgnored},
};
// The spellings of a completed trial in a state column (Optuna 3's, older Optuna's, ours).
constexpr const char* kCompleteStates[] = {"COMPLETE", "TrialState.COMPLETE", "completed"};

std::optional<Role> OptunaColumn(const std::string& name) {
  for (const auto& [n, role] : kOptunaColumns)
    if (name == n) return role;
  if (name.rfind("user_attrs_", 0) == 0 || name.rfind("system_attrs_", 0) == 0)
    return Role::kIgnored;
  return std::nullopt;
}

Result<Column> ColumnOf(const std::string& name, const std::string& path, const StudySpec& spec) {
  if (IsValueKey(name, spec)) return Column{Role::kValue, nullptr};
  if (const ParamSpec* p = spec.space.Find(name)) return Column{Role::kParam, p};
  if (name.rfind("params_", 0) == 0)
    if (const ParamSpec* p = spec.space.Find(name.substr(7))) return Column{Role::kParam, p};
  if (const std::optional<Role> role = OptunaColumn(name)) return Column{*role, nullptr};
  return At(path, 1,
            StrCat("column '", name, "' is not a parameter of the study (NAME or params_NAME) nor ",
                   "\"value\" or \"", spec.objective.metric, "\""));
}

bool Completed(const std::string& state) {
  return std::find(std::begin(kCompleteStates), std::end(kCompleteStates), state) !=
         std::end(kCompleteStates);
}

Result<std::vector<PriorResult>> FromCsv(const std::string& text, const std::string& path,
                                         const StudySpec& spec, int* skipped) {
  std::istringstream in(text);
  std::string row;
  if (!std::getline(in, row)) return At(path, 1, "empty; the first row names the columns");
  std::vector<Column> columns;
  int value_column = -1;
  for (const std::string& name : SplitCsv(row)) {
    HP_ASSIGN_OR_RETURN(Column c, ColumnOf(name, path, spec));
    if (c.role == Role::kValue) value_column = static_cast<int>(columns.size());
    columns.push_back(c);
  }
  if (value_column < 0)
    return At(path, 1, StrCat("no \"value\" (or \"", spec.objective.metric, "\") column"));
  std::vector<PriorResult> out;
  for (int line = 2; std::getline(in, row); ++line) {
    if (Trim(row).empty()) continue;
    const std::vector<std::string> cells = SplitCsv(row);
    if (cells.size() != columns.size())
      return At(path, line, StrCat(cells.size(), " cells where the header has ", columns.size()));
    Config params;
    bool complete = true;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (columns[c].role == Role::kState) complete = Completed(cells[c]);
      if (columns[c].role != Role::kParam || cells[c].empty()) continue;
      const ParamSpec* p = columns[c].param;
      std::optional<Value> v = Cell(*p, cells[c]);
      if (!v)
        return At(path, line,
                  StrCat("'", cells[c], "' is not a value of ", ParamTypeName(p->type),
                         " parameter ", p->name));
      params[p->name] = *v;
    }
    if (!complete) {
      ++*skipped;  // a failed, pruned or running trial has no result to learn
      continue;
    }
    HP_ASSIGN_OR_RETURN(
        PriorResult r, Make(std::move(params), ParseDouble(cells[value_column]), line, path, spec));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Result<std::vector<PriorResult>> ParseResults(const std::string& text, const std::string& path,
                                              const StudySpec& spec, int* skipped) {
  int none = 0;
  if (!skipped) skipped = &none;
  *skipped = 0;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{'))
    return FromJson(text, path, spec);
  return FromCsv(text, path, spec, skipped);
}

}  // namespace hyperpack::study
