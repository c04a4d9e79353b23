// The study page's data: one JSON document (its schema is in docs/REPORT.md) holding everything the
// page draws, made from what storage holds about a study. Pure: no I/O and no clock (the caller
// passes `now`), so it is tested on records written by hand.
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hyperpack/storage/storage.h"
#include "hyperpack/study/spec.h"

namespace hyperpack::report {

struct PageInput {
  storage::StudyRecord study;
  std::vector<storage::TrialRecord> trials;
  std::optional<study::StudySpec> spec;  // absent if the stored file no longer parses
  std::vector<storage::JournalEntry> journal;
  std::vector<storage::EventRecord> events;  // oldest first
  double now = 0;     // seconds since the epoch: when the data is made; running trials end here
  bool live = false;  // the dashboard serves it, and the page polls for more
  // PageImportance(*this) when a caller kept it from before (a GP fit takes a while); computed
  // when absent.
  std::optional<nlohmann::json> importance;
};

// The most events the page is given (the newest ones): a long study logs thousands.
inline constexpr int kPageEvents = 500;

// A trial's ranks as its placement_json recorded them; empty when it was not recorded or does not
// parse (a row written before schema 4).
struct RankUse {
  std::string host;
  std::vector<int> gpus;
  int cpus = 0;
};
std::vector<RankUse> ParsePlacement(const std::string& placement_json);

// What a trial cost: the time it ran (from its start to its end, `now` while it runs, less the
// stretches it spent paused) x the GPUs it held, or x its CPU slots where it held no GPU (one slot
// where no placement was recorded). By trial number; a trial that never started has none.
struct TrialCost {
  double seconds = 0;
  int gpus = 0, cpus = 0;
  double cost = 0;  // GPU-seconds when gpus > 0, else CPU-seconds
  bool gpu() const { return gpus > 0; }
};
std::map<int, TrialCost> TrialCosts(const PageInput& in);

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
// Where and when each trial ran. A trial runs from its start until it pauses (a trial_paused
// event), again from each trial_resumed event, and finally until it ended (or `now`). GPUs are
// lanes of their own; CPU slots are counts, so each CPU segment takes the lowest-numbered slots of
// its host free at its start (a trial recorded without a placement takes one slot).
Timeline BuildTimeline(const PageInput& in);

// {"importance": ..., "importance_note": ...} as PageData() holds them: a GP fitted to the
// completed trials. It changes only when a trial completes (ScoredTrials counts them).
nlohmann::json PageImportance(const PageInput& in);
int ScoredTrials(const PageInput& in);

nlohmann::json PageData(const PageInput& in);

}  // namespace hyperpack::report
