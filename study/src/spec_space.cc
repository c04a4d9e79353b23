// search_space: each parameter's range or values, and its condition (spec_parser.h).
#include "spec_parser.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hyperpack/study/template.h"
#include "hyperpack/text.h"

namespace hyperpack::study::internal {

namespace {

// A parameter's `type:` and the keys its mapping may hold.
struct ParamTypeKeys {
  const char* name;
  ParamType type;
  std::vector<std::string> keys;
};

const ParamTypeKeys* FindParamType(const std::string& name) {
  static const ParamTypeKeys kTypes[] = {
      {"float", ParamType::kFloat, {"type", "low", "high", "log", "when"}},
      {"int", ParamType::kInt, {"type", "low", "high", "log", "step", "when"}},
      {"categorical", ParamType::kCategorical, {"type", "values", "when"}},
      {"fixed", ParamType::kFixed, {"type", "value", "when"}}};
  for (const ParamTypeKeys& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

// A condition's parent, operator and value: "PARAM == VALUE", "PARAM != VALUE" or
// "PARAM in [A, B]", with any white space around each part.
struct ConditionParts {
  std::string_view parent;
  Condition::Op op;
  std::string_view value;
};

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

std::optional<ConditionParts> SplitCondition(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size() && IsSpace(text[begin])) ++begin;
  const CharSet first = {.others = "_"}, rest = {.others = "_.-"};
  if (begin == text.size() || !first.Contains(text[begin])) return std::nullopt;
  size_t end = begin + 1;
  while (end < text.size() && rest.Contains(text[end])) ++end;
  // The longest name first, then shorter ones: "a.in [1]" is a condition on "a.".
  for (; end > begin; --end) {
    size_t op = end;
    while (op < text.size() && IsSpace(text[op])) ++op;
    const std::string_view after = text.substr(op);
    ConditionParts parts = {text.substr(begin, end - begin), Condition::Op::kEq, {}};
    if (after.starts_with("!=")) {
      parts.op = Condition::Op::kNe;
    } else if (after.starts_with("in") && !IsWordChar(text[op - 1]) &&
               (after.size() == 2 || !IsWordChar(after[2]))) {
      parts.op = Condition::Op::kIn;  // "in" as a word of its own
    } else if (!after.starts_with("==")) {
      continue;
    }
    parts.value = Trim(after.substr(2));
    if (parts.value.empty() || parts.value.find_first_of("\n\r") != std::string_view::npos)
      continue;
    return parts;
  }
  return std::nullopt;
}

}  // namespace

void Parser::ParseSpace(const Field& field, SearchSpace* space) {
  const YAML::Node& node = field.value;
  // `{}`: nothing to tune, one configuration: the command as it is (a baseline, or what
  // Determined's single searcher runs).
  if (!node.IsMap()) {
    Error(node.IsNull() ? field.key : node, "search_space",
          "expected a mapping of parameter names to their ranges, got ", Describe(node));
    return;
  }
  std::vector<ParamSpec> params;
  std::set<std::string> seen;
  std::map<std::string, std::string> env_names;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      Error(it->first, "search_space", "parameter names must be plain names");
      continue;
    }
    std::string name = it->first.Scalar();
    std::string path = Path("search_space", name);
    if (!IsParamName(name)) {
      Error(it->first, path,
            "not a valid parameter name; use letters, digits, '_', '.' and '-', not starting "
            "with '.' or '-'");
      continue;
    }
    if (!seen.insert(name).second) {
      Error(it->first, path, "duplicate parameter");
      continue;
    }
    // Each parameter reaches the program as HP_<NAME> too: two names may not share one.
    if (auto [other, fresh] = env_names.emplace(ParamEnvName(name), name); !fresh) {
      Error(it->first, path, "'", name, "' and '", other->second, "' would both be passed as ",
            other->first, "; rename one");
      continue;
    }
    if (auto p = ParseParam(name, Field{it->first, it->second}, params)) params.push_back(*p);
    declared_.insert(name);
  }
  *space = SearchSpace(std::move(params));
}

std::optional<ParamSpec> Parser::ParseParam(const std::string& name, const Field& field,
                                            const std::vector<ParamSpec>& earlier) {
  std::string path = Path("search_space", name);
  ParamSpec p;
  p.name = name;
  const YAML::Node& node = field.value;
  // Shorthands: a list is a categorical, a scalar a fixed value.
  if (node.IsSequence()) {
    p.type = ParamType::kCategorical;
    if (!ParseValues(field, path, &p)) return std::nullopt;
    return p;
  }
  if (node.IsScalar()) {
    p.type = ParamType::kFixed;
    auto v = ScalarValue(node, field.key, path);
    if (!v) return std::nullopt;
    p.value = *v;
    return p;
  }
  if (!node.IsMap()) {
    Error(node.IsNull() ? field.key : node, path,
          "expected {type: float|int|categorical|fixed, ...}, got ", Describe(node));
    return std::nullopt;
  }
  YAML::Node type_node = node["type"];
  if (!type_node.IsDefined()) {
    Error(field.key, Path(path, "type"), "missing; expected float, int, categorical or fixed");
    return std::nullopt;
  }
  const std::string type = type_node.IsScalar() ? type_node.Scalar() : "";
  const ParamTypeKeys* known = FindParamType(type);
  if (!known) {
    auto guess = DidYouMean(type, {"float", "int", "categorical", "fixed"});
    Error(type_node.IsNull() ? field.key : type_node, Path(path, "type"), "'", type,
          "' is not a parameter type; expected ",
          guess ? "'" + *guess + "'" : std::string("float, int, categorical or fixed"));
    return std::nullopt;
  }
  p.type = known->type;
  const std::vector<std::string>& keys = known->keys;
  size_t errors_before = errors_.size();
  auto fields = Fields(node, path, keys);

  if (p.type == ParamType::kFloat || p.type == ParamType::kInt) {
    ParseRange(field.key, path, fields, &p);
  } else if (p.type == ParamType::kCategorical) {
    if (auto* f = Get(fields, "values")) {
      ParseValues(*f, Path(path, "values"), &p);
    } else {
      Missing(field.key, path, "values", "a list such as [sgd, adamw]");
    }
  } else {
    ParseFixedValue(field, path, fields, &p);
  }
  if (auto* f = Get(fields, "when")) ParseCondition(*f, Path(path, "when"), earlier, &p);
  if (errors_.size() != errors_before) return std::nullopt;
  return p;
}

void Parser::ParseFixedValue(const Field& field, const std::string& path,
                             const std::map<std::string, Field>& fields, ParamSpec* p) {
  if (auto* f = Get(fields, "value")) {
    p->structured = f->value.IsSequence() || f->value.IsMap() || f->value.IsNull();
    if (p->structured)
      p->value = StructuredValue(f->value);
    else if (auto v = ScalarValue(f->value, f->key, Path(path, "value")))
      p->value = *v;
  } else {
    Missing(field.key, path, "value", "the parameter's one value");
  }
}

void Parser::ParseRange(const YAML::Node& owner, const std::string& path,
                        const std::map<std::string, Field>& fields, ParamSpec* p) {
  bool is_int = p->type == ParamType::kInt;
  const Field* low = Get(fields, "low");
  const Field* high = Get(fields, "high");
  if (!low) Missing(owner, path, "low", is_int ? "the smallest value" : "the lower bound");
  if (!high) Missing(owner, path, "high", is_int ? "the largest value" : "the upper bound");
  if (const Field* f = Get(fields, "log")) {
    if (auto b = Bool(*f, Path(path, "log"))) p->log = *b;
  }
  if (const Field* f = Get(fields, "step")) {
    if (auto s = Integer(*f, Path(path, "step"))) {
      if (*s < 1) {
        Error(f->value, Path(path, "step"), "must be >= 1 (got ", *s, ")");
      } else if (p->log && *s != 1) {
        Error(f->value, Path(path, "step"),
              "cannot be combined with log: true; list the values as a categorical instead");
      } else {
        p->step = *s;
      }
    }
  }
  if (!low || !high) return;
  std::optional<double> lo, hi;
  if (is_int) {
    auto l = Integer(*low, Path(path, "low"));
    auto h = Integer(*high, Path(path, "high"));
    if (l) lo = static_cast<double>(*l);
    if (h) hi = static_cast<double>(*h);
  } else {
    lo = Number(*low, Path(path, "low"));
    hi = Number(*high, Path(path, "high"));
  }
  if (!lo || !hi) return;
  p->low = *lo;
  p->high = *hi;
  if (p->log && *lo <= 0) {
    Error(low->value, Path(path, "low"), "must be > 0 when log: true (got ", low->value.Scalar(),
          ")");
    return;
  }
  if (is_int ? *hi < *lo : *hi <= *lo) {
    Error(high->value, Path(path, "high"), "must be ", is_int ? ">=" : ">", " low (",
          low->value.Scalar(), "), got ", high->value.Scalar());
    return;
  }
  if (is_int) WarnIfOneValue(path, *high, Get(fields, "step"), *p);
}

void Parser::WarnIfOneValue(const std::string& path, const Field& high, const Field* step,
                            const ParamSpec& p) {
  const auto lo = static_cast<int64_t>(p.low);
  const auto hi = static_cast<int64_t>(p.high);
  if (lo == hi) {
    Warning(high.value, path, "low and high are both ", lo,
            ", so the range holds one value; to tune it, raise high above ", lo,
            "; to pin it, write {type: fixed, value: ", lo, "}");
  } else if (step && p.step > hi - lo) {
    Warning(step->value, path, "step ", p.step, " leaves one value (", lo, ") between low ", lo,
            " and high ", hi, "; to tune it, raise high to at least ", lo + p.step,
            " or lower the step to at most ", hi - lo,
            "; to pin it, write {type: fixed, value: ", lo, "}");
  }
}

bool Parser::ParseValues(const Field& field, const std::string& path, ParamSpec* p) {
  const YAML::Node& list = field.value;
  if (!list.IsSequence() || list.size() == 0) {
    Error(list.IsNull() ? field.key : list, path, "expected a non-empty list of values, got ",
          Describe(list));
    return false;
  }
  bool ok = true;
  // Values that are lists or mappings make every value JSON text (ParamSpec::structured).
  for (YAML::Node item : list) p->structured = p->structured || item.IsSequence() || item.IsMap();
  for (YAML::Node item : list) {
    auto v = p->structured ? std::optional<Value>(StructuredValue(item))
                           : ScalarValue(item, field.key, path);
    if (!v) {
      ok = false;
      continue;
    }
    for (const Value& other : p->values) {
      if (ValuesEqual(other, *v)) {  // 1 and 1.0 are one value to a sampler
        Error(item, path, "duplicate value ", FormatValue(*v));
        ok = false;
      }
    }
    p->values.push_back(*v);
  }
  return ok;
}

bool Parser::ParseConditionValues(const Field& f, const std::string& path, const ParamSpec& parent,
                                  const std::string& rhs, Condition* c) {
  std::vector<std::string> items;
  if (c->op == Condition::Op::kIn) {
    if (rhs.size() < 2 || rhs.front() != '[' || rhs.back() != ']') {
      Error(f.value, path, "expected a list after 'in', e.g. ", c->parent, " in [a, b]");
      return false;
    }
    std::stringstream ss(rhs.substr(1, rhs.size() - 2));
    for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  } else {
    items.push_back(rhs);
  }
  for (std::string item : items) {
    item = std::string(Trim(item));
    bool quoted = item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
                  item.back() == item.front();
    if (quoted) item = item.substr(1, item.size() - 2);
    Value v = InferValue(item, quoted);
    if (!parent.Contains(v)) {
      std::vector<std::string> options;
      for (const Value& o : parent.values) options.push_back(FormatValue(o));
      auto guess = DidYouMean(item, options);
      Error(f.value, path, "'", item, "' is not a value of '", c->parent, "'",
            guess             ? "; did you mean '" + *guess + "'?"
            : options.empty() ? std::string("")
                              : "; expected one of: " + Join(options, ", "));
      return false;
    }
    c->values.push_back(v);
  }
  return true;
}

void Parser::ParseCondition(const Field& f, const std::string& path,
                            const std::vector<ParamSpec>& earlier, ParamSpec* p) {
  auto text = String(f, path);
  if (!text) return;
  auto parts = SplitCondition(*text);
  if (!parts) {
    Error(f.value, path, "'", *text,
          "' is not a condition; expected 'PARAM == VALUE', 'PARAM != VALUE' or "
          "'PARAM in [A, B]'");
    return;
  }
  Condition c;
  c.parent = std::string(parts->parent);
  c.text = *text;
  c.op = parts->op;
  auto parent = std::find_if(earlier.begin(), earlier.end(),
                             [&](const ParamSpec& q) { return q.name == c.parent; });
  if (parent == earlier.end()) {
    if (declared_.count(c.parent)) return;  // declared earlier but invalid: already reported
    std::vector<std::string> names;
    for (const ParamSpec& q : earlier) names.push_back(q.name);
    auto guess = DidYouMean(c.parent, names);
    Error(f.value, path, "'", c.parent, "' is not a parameter declared before '", p->name, "'",
          guess ? "; did you mean '" + *guess + "'?" : std::string(""));
    return;
  }
  if (parent->type == ParamType::kFloat) {
    Error(f.value, path, "conditions on a float parameter ('", c.parent,
          "') are not supported; use a categorical, int or fixed parent");
    return;
  }
  if (!ParseConditionValues(f, path, *parent, std::string(parts->value), &c)) return;
  p->when = std::move(c);
}

}  // namespace hyperpack::study::internal
