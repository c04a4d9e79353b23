#include "study_text.h"

#include <algorithm>

#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/text.h"

namespace hyperpack::report {

using storage::StudyRecord;
using storage::TrialRecord;
using storage::TrialState;
using Json = nlohmann::ordered_json;

RunnerState RunnerStateOf(const StudyView& v) {
  const StudyRecord& s = v.study;
  if (s.runner_pid) {
    if (s.runner_host == HostName() && !ProcessAlive(*s.runner_pid))
      return RunnerState::kRunnerDied;
    return RunnerState::kRunning;
  }
  if (v.spec) {
    int finished = 0;
    for (const TrialRecord& t : v.trials) finished += storage::IsFinished(t.state);
    if (finished >= v.spec->budget.max_trials) return RunnerState::kDone;
  }
  return RunnerState::kStopped;
}

const char* RunnerStateName(RunnerState state) {
  switch (state) {
    case RunnerState::kRunning:
      return "running";
    case RunnerState::kRunnerDied:
      return "stopped (runner died)";
    case RunnerState::kDone:
      return "done";
    case RunnerState::kStopped:
      return "stopped";
  }
  return "stopped";
}

Json ParamsJson(const TrialRecord& t) {
  Json p = Json::parse(t.params_json, nullptr, false);
  return p.is_discarded() ? Json::object() : p;
}

std::map<std::string, int> CountStates(const std::vector<TrialRecord>& trials) {
  std::map<std::string, int> counts;
  for (const TrialRecord& t : trials) counts[storage::TrialStateName(t.state)]++;
  return counts;
}

std::string CountsText(const std::map<std::string, int>& counts) {
  std::vector<std::string> parts;
  for (storage::TrialState state : storage::kTrialStatesForPeople) {
    const char* name = storage::TrialStateName(state);
    if (auto it = counts.find(name); it != counts.end())
      parts.push_back(StrCat(it->second, " ", name));
  }
  return parts.empty() ? "no trials yet" : Join(parts, ", ");
}

std::optional<Value> Lookup(const Result<Config>& config, const std::string& name) {
  if (!config.ok()) return std::nullopt;
  auto it = config->find(name);
  if (it == config->end()) return std::nullopt;
  return it->second;
}

std::string ParamsText(const TrialRecord& t) {
  auto config = ConfigFromJson(t.params_json);
  std::vector<std::string> parts;
  Json params = ParamsJson(t);  // kept alive: items() refers into it
  for (const auto& [k, unused] : params.items()) {
    if (auto v = Lookup(config, k)) parts.push_back(k + "=" + DisplayValue(*v));
  }
  return Join(parts, " ");
}

std::string ValueText(const std::optional<double>& v) { return v ? FormatShort(*v, 6) : "-"; }

}  // namespace hyperpack::report
