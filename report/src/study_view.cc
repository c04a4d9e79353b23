#include "study_view.h"

#include <algorithm>
#include <limits>

#include "hyperpack/host.h"
#include "hyperpack/text.h"

namespace hyperpack::report {

using nlohmann::json;
using storage::EventKind;
using storage::TrialRecord;
using storage::TrialState;

Result<StudyView> ReadStudyView(storage::Storage& db, const std::string& name, ViewParts parts) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found) {
    HP_ASSIGN_OR_RETURN(auto all, db.ListStudies());
    std::vector<std::string> names;
    for (const auto& s : all) names.push_back(s.name);
    auto guess = DidYouMean(name, names);
    return Status::NotFound("no study named '", name, "' in ", db.path(),
                            guess ? "; did you mean '" + *guess + "'?" : std::string(""));
  }
  StudyView v;
  v.study = *found;
  HP_ASSIGN_OR_RETURN(v.trials, db.ListTrials(v.study.id));
  v.spec = study::ParseStudy(v.study.spec_text, v.study.spec_path).spec;
  if (parts == ViewParts::kCosts) {
    constexpr EventKind kRuns[] = {EventKind::kTrialPaused, EventKind::kTrialResumed};
    HP_ASSIGN_OR_RETURN(v.events, db.ListEventsOfKinds(v.study.id, kRuns));
  } else if (parts == ViewParts::kEverything) {
    HP_ASSIGN_OR_RETURN(v.journal, db.ListJournal(v.study.id));
    // Every event: the timeline cuts trials at their pauses. The page itself shows the newest.
    HP_ASSIGN_OR_RETURN(v.events, db.ListEvents(v.study.id, std::numeric_limits<int>::max()));
  }
  v.now = WallNow();
  return v;
}

bool Maximize(const storage::StudyRecord& s) { return s.direction == Direction::kMaximize; }

std::vector<const TrialRecord*> Ranked(const StudyView& view) {
  std::vector<const TrialRecord*> out;
  for (const TrialRecord& t : view.trials)
    if (t.state == TrialState::kCompleted && t.value) out.push_back(&t);
  const bool max = Maximize(view.study);
  std::stable_sort(out.begin(), out.end(), [&](const TrialRecord* a, const TrialRecord* b) {
    return max ? *a->value > *b->value : *a->value < *b->value;
  });
  return out;
}

Segments RunSegments(const StudyView& view) {
  std::map<int, std::vector<const storage::EventRecord*>> by_trial;
  for (const storage::EventRecord& e : view.events)
    if (e.trial) by_trial[*e.trial].push_back(&e);
  Segments out;
  for (const TrialRecord& t : view.trials) {
    if (!t.started) continue;
    std::vector<std::pair<double, double>>& segments = out[t.number];
    double open = *t.started;
    bool running = true;
    for (const storage::EventRecord* e : by_trial[t.number]) {
      const std::optional<EventKind> kind = storage::ParseEventKind(e->kind);
      if (kind == EventKind::kTrialPaused && running) {
        segments.emplace_back(open, std::max(open, e->time));
        running = false;
      } else if (kind == EventKind::kTrialResumed && !running) {
        open = e->time;
        running = true;
      }
    }
    if (running) segments.emplace_back(open, std::max(open, t.ended.value_or(view.now)));
  }
  return out;
}

std::map<int, TrialCost> TrialCosts(const StudyView& view, const Segments& segments) {
  std::map<int, TrialCost> out;
  for (const TrialRecord& t : view.trials) {
    auto it = segments.find(t.number);
    if (it == segments.end()) continue;
    TrialCost& c = out[t.number];
    for (const auto& [start, end] : it->second) c.seconds += end - start;
    for (const storage::RankRecord& r : t.placement) {
      c.gpus += static_cast<int>(r.gpus.size());
      c.cpus += r.cpus;
    }
    c.cost = c.seconds * (c.gpu() ? c.gpus : std::max(c.cpus, 1));
  }
  return out;
}

std::map<int, TrialCost> TrialCosts(const StudyView& view) {
  return TrialCosts(view, RunSegments(view));
}

}  // namespace hyperpack::report
