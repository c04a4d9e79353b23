// How the read commands describe a study and its trials in words: the runner's state, trials by
// state, a trial's parameters (the ranking is study_view.h's). Shared by report.cc (status,
// trials, best, export) and watch.cc (status --watch), so that both say the same thing.
// Thread-safety: pure functions over values, except RunnerState (see there).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/space.h"
#include "hyperpack/status.h"
#include "hyperpack/storage/storage.h"
#include "study_view.h"

namespace hyperpack::report {

// Whether a runner is on the study: kDone when none is and the budget is spent, kRunnerDied when
// the recorded runner on this host is gone. Asks the system whether that runner still lives, so
// it is not pure.
enum class RunnerState { kRunning, kRunnerDied, kDone, kStopped };
RunnerState RunnerStateOf(const StudyView& view);
// "running", "stopped (runner died)", "done", "stopped".
const char* RunnerStateName(RunnerState state);

// The trial's parameters as the program was handed them: in `space`'s order (when the study's
// file parses), structured values decoded.
nlohmann::ordered_json ParamsJson(const storage::TrialRecord& t, const SearchSpace* space);

// {"completed": 4, "running": 2, ...}: how many trials are in each state.
std::map<std::string, int> CountStates(const storage::TrialTally& tally);
// "4 completed, 2 running, 1 pruned", in a fixed order; "no trials yet" when empty.
std::string CountsText(const std::map<std::string, int>& counts);

// Parameter `name` of `config`, when it has one.
std::optional<Value> Lookup(const Config& config, const std::string& name);
// name=value pairs, in `space`'s order.
std::string ParamsText(const storage::TrialRecord& t, const SearchSpace* space);

// A value for a table: six significant digits, "-" when there is none.
std::string ValueText(const std::optional<double>& v);

}  // namespace hyperpack::report
