// optuna.h's reading side: Optuna's JournalStorage file replayed, and the system attributes both
// of its storages keep as JSON. The journal is read as Optuna 3.1 to 5.0 replay it
// (optuna/storages/journal/_storage.py, apply_logs): one JSON object a line, `op_code` saying what
// it does; studies and trials by the ids their creation gave them; a change to a trial that has
// finished is passed over; a last line cut short (a writer that died) is passed over, an earlier
// bad one is an error.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "hyperpack/study/optuna.h"
#include "hyperpack/text.h"
#include "optuna_internal.h"

namespace hyperpack::study {
namespace internal {

std::string StrictJson(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const size_t n = std::char_traits<char>::length(token);
      if (text.compare(i, n, token) == 0) {
        out += std::string("\"") + token + "\"";
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

std::optional<double> Number(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (!j.is_string()) return std::nullopt;
  const std::string& s = j.get_ref<const std::string&>();
  if (s == "NaN") return std::nan("");
  if (s == "Infinity") return HUGE_VAL;
  if (s == "-Infinity") return -HUGE_VAL;
  return std::nullopt;
}

}  // namespace internal

using internal::IntAt;
using internal::Number;
using internal::ObjectAt;
using internal::StrictJson;
using Json = nlohmann::json;

std::optional<double> ParseOptunaTime(const std::string& text) {
  std::tm tm{};
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, consumed = 0;
  double second = 0;
  char sep = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d%c%2d:%2d:%lf%n", &year, &month, &day, &sep, &hour,
                  &minute, &second, &consumed) < 7 ||
      (sep != ' ' && sep != 'T'))
    return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  double epoch = static_cast<double>(timegm(&tm)) + second;
  // An offset (+HH:MM, as Optuna 5's journal writes aware times), else UTC.
  int oh = 0, om = 0;
  char sign = 0;
  if (std::sscanf(text.c_str() + consumed, "%c%2d:%2d", &sign, &oh, &om) == 3 &&
      (sign == '+' || sign == '-'))
    epoch -= (sign == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
  return epoch;
}

std::optional<OptunaState> ParseOptunaState(const std::string& name) {
  static constexpr std::pair<const char*, OptunaState> kNames[] = {
      {"RUNNING", OptunaState::kRunning},
      {"COMPLETE", OptunaState::kComplete},
      {"PRUNED", OptunaState::kPruned},
      {"FAIL", OptunaState::kFail},
      {"WAITING", OptunaState::kWaiting}};
  for (const auto& [text, state] : kNames)
    if (name == text) return state;
  return std::nullopt;
}

std::optional<OptunaState> OptunaStateOf(int64_t number) {
  // Optuna's TrialState values: RUNNING 0, COMPLETE 1, PRUNED 2, FAIL 3, WAITING 4.
  static constexpr OptunaState kByNumber[] = {OptunaState::kRunning, OptunaState::kComplete,
                                              OptunaState::kPruned, OptunaState::kFail,
                                              OptunaState::kWaiting};
  if (number < 0 || number > 4) return std::nullopt;
  return kByNumber[number];
}

Status AddOptunaTrialAttr(const std::string& key, const std::string& value_json,
                          OptunaTrial* trial) {
  const bool list = key == "constraints";
  const bool named = key.rfind("constraints:", 0) == 0;
  if (!list && !named && key != "fixed_params") return Status::Ok();
  const Json value = Json::parse(StrictJson(value_json), nullptr, /*allow_exceptions=*/false);
  if (key == "fixed_params") {
    if (!value.is_object())
      return Status::Invalid("trial ", trial->number, ": its enqueued parameters (fixed_params) ",
                             "are not a JSON object");
    trial->fixed_params = value.dump();
    return Status::Ok();
  }
  if (list && value.is_null()) return Status::Ok();  // a constraints_func that raised
  if (named) {
    std::optional<double> v = Number(value);
    if (!v)
      return Status::Invalid("trial ", trial->number, ": constraint '", key.substr(12),
                             "' is not a number (", value_json.substr(0, 40), ")");
    trial->constraints[key.substr(12)] = *v;
    return Status::Ok();
  }
  if (!value.is_array())
    return Status::Invalid("trial ", trial->number, ": its constraints are not a list (",
                           value_json.substr(0, 40), ")");
  for (size_t i = 0; i < value.size(); ++i) {
    std::optional<double> v = Number(value[i]);
    if (!v) return Status::Invalid("trial ", trial->number, ": constraint ", i, " is not a number");
    trial->constraints[std::to_string(i)] = *v;
  }
  return Status::Ok();
}

Status AddOptunaStudyAttr(const std::string& key, const std::string& value_json,
                          OptunaStudy* study) {
  if (key != "study:metric_names") return Status::Ok();
  const Json value = Json::parse(value_json, nullptr, /*allow_exceptions=*/false);
  if (!value.is_array()) return Status::Invalid("study:metric_names is not a list");
  study->metric_names.clear();
  for (const Json& name : value) {
    if (!name.is_string())
      return Status::Invalid("study:metric_names holds a name that is not text");
    study->metric_names.push_back(name.get<std::string>());
  }
  return Status::Ok();
}

namespace {

// The journal replayed: studies and trials by the ids Optuna gives them as it replays.
class Replay {
 public:
  explicit Replay(std::string path) : path_(std::move(path)) {}

  Status Apply(const Json& log, int line) {
    line_ = line;
    if (!log.is_object() || !log.contains("op_code") || !log["op_code"].is_number_integer())
      return Error("not an operation of Optuna's journal (no op_code)");
    switch (log["op_code"].get<int64_t>()) {
      case 0:
        return CreateStudy(log);
      case 1:
        studies_.erase(IntAt(log, "study_id", -1));
        return Status::Ok();
      case 2:
        return Status::Ok();  // a study's user attribute
      case 3:
        return StudyAttr(log);
      case 4:
        return CreateTrial(log);
      case 5:
        return SetParam(log);
      case 6:
        return SetStateValues(log);
      case 7:
        return SetIntermediate(log);
      case 8:
        return Status::Ok();  // a trial's user attribute
      case 9:
        return TrialAttr(log);
      default:
        return Error("op_code ", log["op_code"].get<int64_t>(),
                     " is not one Optuna writes (0 to 9)");
    }
  }

  std::vector<OptunaStudy> Studies() && {
    std::vector<OptunaStudy> out;
    for (auto& [id, study] : studies_) out.push_back(std::move(study));
    return out;
  }

 private:
  template <typename... Args>
  Status Error(const Args&... args) const {
    return Status::Invalid(path_, ":", line_, ": ", args...);
  }

  Status CreateStudy(const Json& log) {
    OptunaStudy study;
    study.name = log.value("study_name", "");
    for (const auto& [id, s] : studies_)
      if (s.name == study.name) return Status::Ok();  // as Optuna: the first one stands
    auto directions = log.find("directions");
    if (directions == log.end() || !directions->is_array())
      return Error("study '", study.name, "' has no directions");
    for (const Json& d : *directions) {
      if (!d.is_number_integer() || (d.get<int64_t>() != 1 && d.get<int64_t>() != 2))
        return Error("study '", study.name, "': a direction that is neither 1 (minimize) nor 2");
      study.directions.push_back(d.get<int64_t>() == 2 ? Direction::kMaximize
                                                       : Direction::kMinimize);
    }
    studies_[next_study_id_++] = std::move(study);
    return Status::Ok();
  }

  Status StudyAttr(const Json& log) {
    auto it = studies_.find(IntAt(log, "study_id", -1));
    if (it == studies_.end()) return Status::Ok();
    for (const auto& [key, value] : ObjectAt(log, "system_attr").items()) {
      Status s = AddOptunaStudyAttr(key, value.dump(), &it->second);
      if (!s.ok()) return Error(s.message());
    }
    return Status::Ok();
  }

  Status CreateTrial(const Json& log);
  Status SetParam(const Json& log);
  Status SetStateValues(const Json& log);
  Status SetIntermediate(const Json& log);
  Status TrialAttr(const Json& log);
  Status Values(const Json& values, OptunaTrial* trial);

  // The trial `log` changes, where it exists and has not finished (nullptr otherwise).
  OptunaTrial* Updatable(const Json& log) {
    auto it = trials_.find(IntAt(log, "trial_id", -1));
    if (it == trials_.end()) return nullptr;
    auto study = studies_.find(it->second.first);
    if (study == studies_.end()) return nullptr;
    OptunaTrial& t = study->second.trials[it->second.second];
    const bool finished = t.state == OptunaState::kComplete || t.state == OptunaState::kPruned ||
                          t.state == OptunaState::kFail;
    return finished ? nullptr : &t;
  }

  std::string path_;
  int line_ = 0;
  std::map<int64_t, OptunaStudy> studies_;
  int64_t next_study_id_ = 0;
  int64_t next_trial_id_ = 0;
  std::map<int64_t, std::pair<int64_t, size_t>> trials_;  // trial id: (study id, index)
};

Status Replay::Values(const Json& values, OptunaTrial* trial) {
  if (values.is_null()) return Status::Ok();
  if (!values.is_array()) return Error("trial ", trial->number, ": values are not a list");
  trial->values.clear();
  for (const Json& v : values) {
    std::optional<double> x = Number(v);
    if (!x) return Error("trial ", trial->number, ": a value that is not a number");
    trial->values.push_back(*x);
  }
  return Status::Ok();
}

Status Replay::CreateTrial(const Json& log) {
  auto study = studies_.find(IntAt(log, "study_id", -1));
  if (study == studies_.end()) return Status::Ok();
  OptunaTrial t;
  t.number = static_cast<int>(study->second.trials.size());
  const bool typed = !log.contains("state") || log["state"].is_number_integer();
  const std::optional<OptunaState> state = OptunaStateOf(typed ? IntAt(log, "state", 0) : -1);
  if (!state) return Error("trial ", t.number, ": state ", log["state"].dump(), " is not Optuna's");
  t.state = *state;
  const Json& distributions = ObjectAt(log, "distributions");
  for (const auto& [name, internal] : ObjectAt(log, "params").items()) {
    std::optional<double> x = Number(internal);
    if (!x || !distributions.contains(name) || !distributions[name].is_string())
      return Error("trial ", t.number, ": parameter '", name, "' has no distribution or value");
    t.params.push_back({name, distributions[name].get<std::string>(), *x});
  }
  if (log.contains("value") && !log["value"].is_null())
    HP_RETURN_IF_ERROR(Values(Json::array({log["value"]}), &t));
  if (log.contains("values")) HP_RETURN_IF_ERROR(Values(log["values"], &t));
  for (const auto& [step, v] : ObjectAt(log, "intermediate_values").items()) {
    std::optional<int64_t> s = ParseInt(step);
    std::optional<double> x = Number(v);
    if (s && x) t.intermediate[*s] = *x;
  }
  for (const auto& [key, value] : ObjectAt(log, "system_attrs").items()) {
    Status s = AddOptunaTrialAttr(key, value.dump(), &t);
    if (!s.ok()) return Error(s.message());
  }
  if (log.contains("datetime_start") && log["datetime_start"].is_string())
    t.started = ParseOptunaTime(log["datetime_start"].get<std::string>());
  if (log.contains("datetime_complete") && log["datetime_complete"].is_string())
    t.ended = ParseOptunaTime(log["datetime_complete"].get<std::string>());
  trials_[next_trial_id_++] = {study->first, study->second.trials.size()};
  study->second.trials.push_back(std::move(t));
  return Status::Ok();
}

Status Replay::SetParam(const Json& log) {
  OptunaTrial* t = Updatable(log);
  if (!t) return Status::Ok();
  std::optional<double> x = Number(log.value("param_value_internal", Json()));
  const std::string name = log.value("param_name", "");
  if (!x || name.empty() || !log.contains("distribution") || !log["distribution"].is_string())
    return Error("trial ", t->number, ": a parameter without its name, value or distribution");
  for (OptunaParam& p : t->params)
    if (p.name == name) return Status::Ok();  // Optuna sets a parameter once
  t->params.push_back({name, log["distribution"].get<std::string>(), *x});
  return Status::Ok();
}

Status Replay::SetStateValues(const Json& log) {
  OptunaTrial* t = Updatable(log);
  if (!t) return Status::Ok();
  const std::optional<OptunaState> state = OptunaStateOf(IntAt(log, "state", -1));
  if (!state) return Error("trial ", t->number, ": a state that is not Optuna's");
  if (*state == OptunaState::kRunning && t->state == OptunaState::kRunning) return Status::Ok();
  t->state = *state;
  if (log.contains("datetime_start") && log["datetime_start"].is_string())
    t->started = ParseOptunaTime(log["datetime_start"].get<std::string>());
  if (log.contains("datetime_complete") && log["datetime_complete"].is_string())
    t->ended = ParseOptunaTime(log["datetime_complete"].get<std::string>());
  return Values(log.value("values", Json()), t);
}

Status Replay::SetIntermediate(const Json& log) {
  OptunaTrial* t = Updatable(log);
  if (!t) return Status::Ok();
  std::optional<double> x = Number(log.value("intermediate_value", Json()));
  if (!x || !log.contains("step") || !log["step"].is_number_integer())
    return Error("trial ", t->number, ": an intermediate value without its step or value");
  t->intermediate[log["step"].get<int64_t>()] = *x;
  return Status::Ok();
}

Status Replay::TrialAttr(const Json& log) {
  OptunaTrial* t = Updatable(log);
  if (!t) return Status::Ok();
  for (const auto& [key, value] : ObjectAt(log, "system_attr").items()) {
    Status s = AddOptunaTrialAttr(key, value.dump(), t);
    if (!s.ok()) return Error(s.message());
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<OptunaStudy>> ParseOptunaJournal(const std::string& text,
                                                    const std::string& path) {
  Replay replay(path);
  size_t at = 0;
  for (int line = 1; at < text.size(); ++line) {
    const size_t end = text.find('\n', at);
    const std::string one = text.substr(at, end == std::string::npos ? end : end - at);
    at = end == std::string::npos ? text.size() : end + 1;
    const bool last = at >= text.size();
    if (one.find_first_not_of(" \t\r") == std::string::npos) continue;
    const Json log = Json::parse(StrictJson(one), nullptr, /*allow_exceptions=*/false);
    if (log.is_discarded() || end == std::string::npos) {
      if (last) break;  // a line cut short by a writer that died, as Optuna passes it over
      return Status::Invalid(path, ":", line,
                             ": not a line of Optuna's journal (JSON, one operation a line)");
    }
    try {
      HP_RETURN_IF_ERROR(replay.Apply(log, line));
    } catch (const Json::exception& e) {  // a field of another type than Optuna writes
      return Status::Invalid(path, ":", line, ": an operation whose fields are not Optuna's (",
                             e.what(), ")");
    }
  }
  return std::move(replay).Studies();
}

bool LooksLikeOptunaStorage(const std::string& head) {
  if (head.compare(0, 16, std::string("SQLite format 3\0", 16)) == 0) return true;
  const size_t start = head.find_first_not_of(" \t\r\n");
  if (start == std::string::npos || head[start] != '{') return false;
  const std::string line = head.substr(start, head.find('\n', start) - start);
  const Json first = Json::parse(StrictJson(line), nullptr, /*allow_exceptions=*/false);
  return first.is_object() && first.contains("op_code");
}

Result<OptunaStudy> ChooseOptunaStudy(std::vector<OptunaStudy> studies, const std::string& wanted,
                                      const std::string& path) {
  std::vector<std::string> names;
  for (OptunaStudy& s : studies) {
    if (!wanted.empty() && s.name == wanted) return std::move(s);
    names.push_back("'" + s.name + "'");
  }
  if (studies.empty()) return Status::NotFound(path, " holds no Optuna study");
  if (wanted.empty() && studies.size() == 1) return std::move(studies.front());
  if (wanted.empty())
    return Status::Invalid(path, " holds ", studies.size(), " Optuna studies (", Join(names, ", "),
                           "): name one with --study");
  return Status::NotFound(path, " holds no Optuna study '", wanted, "'; it holds ",
                          Join(names, ", "));
}

}  // namespace hyperpack::study
