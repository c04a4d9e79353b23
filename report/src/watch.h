// `hyperpack status STUDY --watch`: one frame of the live view of a study, made from what storage
// holds about it. Pure: no I/O and no clock (the caller passes `now` and the runner's state), so
// it is tested on records written by hand; WatchStudy (report.h) is the loop around it.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"
#include "study_text.h"

namespace hyperpack::report {

// The study as read with ViewParts::kTrials (its `now`: when the frame is made), and what the frame
// adds.
struct WatchInput : StudyView {
  // The last report of the objective metric of each running trial that has made one, by trial
  // number.
  std::map<int, storage::MetricPoint> last_report;
  // The caller's (RunnerStateOf), because finding it out asks the system whether the runner
  // still lives.
  RunnerState state = RunnerState::kStopped;
};

// The view for people: a header (study, state, elapsed, clock), trials by state, the best so far,
// the GPUs and CPU slots busy, and a table of the running trials. Ends with a newline.
std::string WatchText(const WatchInput& in);

// The same frame for programs, one object: {"study", "state", "metric", "time", "elapsed_s",
// "trials": {state: count}, "max_trials", "best": {"trial", "value", "params"} or null,
// "running": [{"trial", "attempt", "elapsed_s", "value", "step", "placement"}],
// "busy": {"gpus", "cpus", "trials"}}.
nlohmann::ordered_json WatchJson(const WatchInput& in);

// What a frame says apart from the clock and the elapsed times: when it is the same as the last
// frame's, a log need not get the frame again.
std::string WatchKey(const WatchInput& in);

// True when the frame is the last one: no runner is on the study any more.
bool WatchFinished(const WatchInput& in);

}  // namespace hyperpack::report
