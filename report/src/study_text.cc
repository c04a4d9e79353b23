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
  if (s.runner_pid)
    return storage::RunnerAlive(s) ? RunnerState::kRunning : RunnerState::kRunnerDied;
  if (v.spec && Tally(v).Finished() >= v.spec->budget.max_trials) return RunnerState::kDone;
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

Json ParamsJson(const TrialRecord& t, const SearchSpace* space) {
  return Json::parse(ConfigToJson(t.params, space));
}

std::map<std::string, int> CountStates(const storage::TrialTally& tally) {
  std::map<std::string, int> counts;
  for (const auto& [state, n] : tally.counts) counts[storage::TrialStateName(state)] = n;
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

std::optional<Value> Lookup(const Config& config, const std::string& name) {
  auto it = config.find(name);
  if (it == config.end()) return std::nullopt;
  return it->second;
}

std::string ParamsText(const TrialRecord& t, const SearchSpace* space) {
  std::vector<std::string> parts;
  for (const std::string& name : ConfigNames(t.params, space))
    parts.push_back(name + "=" + DisplayValue(t.params.at(name)));
  return Join(parts, " ");
}

std::string ValueText(const std::optional<double>& v) { return v ? FormatShort(*v, 6) : "-"; }

}  // namespace hyperpack::report
