// A study with several objectives: parsing `--pick` and choosing one member of its Pareto set
// (study_view.h's PickFromFront). Pure: the view is read by the caller.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "hyperpack/report/report.h"
#include "hyperpack/text.h"
#include "study_view.h"

namespace hyperpack::report {

using storage::TrialRecord;

namespace {

constexpr const char* kPickExpected =
    "expected conditions such as 'val_accuracy>=0.9' or 'val_accuracy>=0.9,latency_ms<20' "
    "(>=, >, <= or <, a number)";

const char* OpText(FrontPick::Op op) {
  switch (op) {
    case FrontPick::Op::kLess:
      return "<";
    case FrontPick::Op::kLessEqual:
      return "<=";
    case FrontPick::Op::kGreater:
      return ">";
    case FrontPick::Op::kGreaterEqual:
      return ">=";
  }
  return "?";
}

bool Meets(const FrontPick::Condition& c, double v) {
  switch (c.op) {
    case FrontPick::Op::kLess:
      return v < c.value;
    case FrontPick::Op::kLessEqual:
      return v <= c.value;
    case FrontPick::Op::kGreater:
      return v > c.value;
    case FrontPick::Op::kGreaterEqual:
      return v >= c.value;
  }
  return false;
}

Result<FrontPick::Condition> ParseCondition(const std::string& text) {
  // The two-character operators first, so that ">=" is not read as ">" and "=0.9".
  static const std::pair<const char*, FrontPick::Op> kOps[] = {{">=", FrontPick::Op::kGreaterEqual},
                                                               {"<=", FrontPick::Op::kLessEqual},
                                                               {">", FrontPick::Op::kGreater},
                                                               {"<", FrontPick::Op::kLess}};
  for (const auto& [op, kind] : kOps) {
    const size_t at = text.find(op);
    if (at == std::string::npos) continue;
    FrontPick::Condition c;
    c.metric = std::string(Trim(text.substr(0, at)));
    c.op = kind;
    const std::string number(Trim(text.substr(at + std::string(op).size())));
    char* end = nullptr;
    c.value = std::strtod(number.c_str(), &end);
    if (c.metric.empty() || c.metric.find_first_of("=!<>") != std::string::npos || number.empty() ||
        *end != '\0' || !std::isfinite(c.value))
      return Status::Invalid("--pick: '", text, "' is not a condition; ", kPickExpected);
    return c;
  }
  return Status::Invalid("--pick: '", text, "' has no comparison; ", kPickExpected);
}

// The metrics a study keeps values of, for what --pick and --by may name.
std::vector<std::string> KeptMetricNames(const study::StudySpec& spec) {
  std::vector<std::string> names;
  for (const study::Objective& o : spec.objectives) names.push_back(o.metric);
  for (const study::Constraint& c : spec.constraints)
    if (std::find(names.begin(), names.end(), c.metric) == names.end()) names.push_back(c.metric);
  return names;
}

Status CheckMetric(const StudyView& l, const std::string& metric, const char* flag) {
  const std::vector<std::string> names = KeptMetricNames(*l.spec);
  if (std::find(names.begin(), names.end(), metric) != names.end()) return Status::Ok();
  auto guess = DidYouMean(metric, names);
  return Status::Invalid(flag, ": study '", l.study.name, "' keeps no metric '", metric,
                         "'; its objectives and constraints are ", Join(names, ", "),
                         guess ? "; did you mean '" + *guess + "'?" : std::string());
}

}  // namespace

Result<FrontPick> ParseFrontPick(const std::string& conditions, const std::string& by) {
  FrontPick pick;
  pick.by = std::string(Trim(by));
  if (Trim(conditions).empty()) return pick;
  size_t from = 0;
  while (from <= conditions.size()) {
    size_t comma = conditions.find(',', from);
    if (comma == std::string::npos) comma = conditions.size();
    HP_ASSIGN_OR_RETURN(FrontPick::Condition c,
                        ParseCondition(std::string(Trim(conditions.substr(from, comma - from)))));
    pick.conditions.push_back(std::move(c));
    from = comma + 1;
  }
  return pick;
}

std::string ConditionsText(const FrontPick& pick) {
  std::vector<std::string> parts;
  for (const FrontPick::Condition& c : pick.conditions)
    parts.push_back(StrCat(c.metric, OpText(c.op), FormatShort(c.value, 6)));
  return Join(parts, ",");
}

Result<const TrialRecord*> PickFromFront(const StudyView& l, const FrontPick& pick) {
  if (!l.spec || !l.spec->MultiObjective())
    return Status::Invalid("--pick chooses among a Pareto set; study '", l.study.name,
                           "' has one objective (hyperpack best prints its best trial)");
  for (const FrontPick::Condition& c : pick.conditions)
    HP_RETURN_IF_ERROR(CheckMetric(l, c.metric, "--pick"));
  const std::string by = pick.by.empty() ? l.spec->objectives[0].metric : pick.by;
  HP_RETURN_IF_ERROR(CheckMetric(l, by, "--by"));
  bool maximize = false;
  for (const study::Objective& o : l.spec->objectives)
    if (o.metric == by) maximize = o.direction == study::Direction::kMaximize;
  const std::vector<const TrialRecord*> front = ParetoSet(l);
  if (front.empty()) return Status::NotFound("study '", l.study.name, "' has no Pareto set yet");
  const TrialRecord* best = nullptr;
  for (const TrialRecord* t : front) {
    bool meets = true;
    for (const FrontPick::Condition& c : pick.conditions) {
      auto it = t->values.find(c.metric);
      meets = meets && it != t->values.end() && Meets(c, it->second);
    }
    auto v = t->values.find(by);
    if (!meets || v == t->values.end()) continue;
    if (!best || (maximize ? v->second > best->values.at(by) : v->second < best->values.at(by)))
      best = t;
  }
  if (best) return best;
  // Say how far the front is from the conditions: each condition's metric's range on it.
  std::vector<std::string> ranges;
  for (const FrontPick::Condition& c : pick.conditions) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const TrialRecord* t : front) {
      auto it = t->values.find(c.metric);
      if (it == t->values.end()) continue;
      lo = std::min(lo, it->second);
      hi = std::max(hi, it->second);
    }
    if (lo <= hi)
      ranges.push_back(StrCat(c.metric, " from ", FormatShort(lo, 6), " to ", FormatShort(hi, 6)));
  }
  return Status::NotFound("none of the ", front.size(), " trials of the Pareto set of study '",
                          l.study.name, "' meets ", ConditionsText(pick),
                          ranges.empty() ? "" : StrCat(" (it has ", Join(ranges, ", "), ")"));
}

}  // namespace hyperpack::report
