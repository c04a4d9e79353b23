// The study page's data: one JSON document (its schema is in docs/REPORT.md) holding everything the
// page draws, rendered from a StudyView read with ViewParts::kEverything. Pure: no I/O and no
// clock (the view carries `now`), so it is tested on records written by hand.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "study_view.h"

namespace hyperpack::report {

// The most events the page is given (the newest ones): a long study logs thousands.
inline constexpr int kPageEvents = 500;

// One bar of the timeline: a trial on one lane (a GPU, or a CPU slot) from start to end.
struct TimelineBar {
  std::string lane;  // "node1/gpu0", "node1/cpu2"
  int trial = 0;
  double start = 0, end = 0;
};
struct TimelineLane {
  std::string id;
  std::string host;
  std::string label;  // "node1 gpu 0"
};
struct Timeline {
  std::vector<TimelineLane> lanes;  // by host in order of first use; GPUs, then CPU slots
  std::vector<TimelineBar> bars;
};
// Where and when each trial ran: its segments (RunSegments) on its placement. GPUs are lanes of
// their own; CPU slots are counts, so each CPU segment takes the lowest-numbered slots of
// its host free at its start (a trial recorded without a placement takes one slot).
Timeline BuildTimeline(const StudyView& in);

// {"importance": ..., "importance_note": ...} as PageData() holds them: a GP fitted to the
// completed trials. It changes only when a trial completes (ScoredTrials counts them).
nlohmann::json PageImportance(const StudyView& in);
int ScoredTrials(const StudyView& in);

nlohmann::json PageData(const StudyView& in);

}  // namespace hyperpack::report
