// What people ask of a live run from outside it (storage::ControlRecord, `hyperpack stop` and
// the other lifecycle verbs): each is carried out here, from the event alone, and answered with
// what came of it (a ControlDoneRow) and an event in the study's log.
#include <algorithm>
#include <cmath>

#include "controller_impl.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler {

using storage::ControlKind;
using storage::EventKind;
using storage::TrialRecord;
using storage::TrialState;

namespace {
std::string Trials(size_t n) { return StrCat(n, n == 1 ? " trial" : " trials"); }
}  // namespace

void StudyController::Impl::On(const ControlArrived& e) {
  const storage::ControlRecord& c = e.control;
  ControlOutcome out;
  switch (c.kind) {
    case ControlKind::kStop:
      out = StopByRequest();
      break;
    case ControlKind::kCancel:
      out = Cancel();
      break;
    case ControlKind::kPause:
      out = Pause();
      break;
    case ControlKind::kResume:
      out = Resume();
      break;
    case ControlKind::kUpdate:
      out = Update(c);
      break;
    case ControlKind::kEnqueue:
      out = EnqueueTrials(c.trials);
      break;
    case ControlKind::kAddResults:
      out = AddResults(c.trials);
      break;
  }
  Log(std::nullopt, EventKind::kControl,
      StrCat(storage::ControlKindName(c.kind), out.refused ? " refused: " : ": ", out.text));
  Write(ControlDoneRow{c.id, out.refused, out.text, Wall()});
  ++refills_;
}

StudyController::Impl::ControlOutcome StudyController::Impl::StopByRequest() {
  // A paused study that is stopped ends: its trials wait for the next run.
  if (!StopLaunching(StopReason::kStopped))
    return {true, StrCat("the study is already stopping (", summary_.stop_reason, ")")};
  return {false, StrCat("stopping: no trial starts any more; ", Trials(running_.size()),
                        " running end as they would")};
}

StudyController::Impl::ControlOutcome StudyController::Impl::Cancel() {
  const bool was_stopping = run_.stopped();
  if (!run_.Cancel()) return {true, "the study is already cancelled"};
  StoppedLaunching();
  size_t stopped = 0;
  for (auto& [n, t] : running_) {
    if (t.cancelled) continue;
    t.cancelled = true;
    Terminate(t);
    ++stopped;
  }
  return {false, StrCat("cancelled", was_stopping ? " (it was stopping)" : "", ": ",
                        Trials(stopped), " running stopped, recorded as cancelled")};
}

StudyController::Impl::ControlOutcome StudyController::Impl::Pause() {
  if (run_.stopped()) return {true, StrCat("the study is stopping (", summary_.stop_reason, ")")};
  if (!run_.Hold()) return {true, "the study is already paused"};
  size_t stopped = 0;
  for (auto& [n, t] : running_) {
    if (t.Stopping()) continue;
    t.held = true;
    Terminate(t);
    ++stopped;
  }
  return {false, StrCat("paused: ", Trials(stopped),
                        " running stopped (they run again from their checkpoints on resume); "
                        "nothing starts until hyperpack resume")};
}

StudyController::Impl::ControlOutcome StudyController::Impl::Resume() {
  if (!run_.Release()) return {true, "the study is not paused"};
  return {false,
          StrCat("resumed: placing trials (", Trials(retries_.size()), " paused to run again)")};
}

int StudyController::Impl::BudgetLeft() const {
  return std::max(0, options_.max_trials - finished_ - static_cast<int>(paused_.size()) - Busy() -
                         static_cast<int>(retries_.size()));
}

StudyController::Impl::ControlOutcome StudyController::Impl::Update(
    const storage::ControlRecord& c) {
  if ((c.max_trials && *c.max_trials < 1) || (c.max_parallel && *c.max_parallel < 1) ||
      (c.time_limit_s && !(*c.time_limit_s > 0)) || (c.priority && !(*c.priority > 0)))
    return {true, "max_trials, max_parallel, time_limit and priority must be positive"};
  std::vector<std::string> changed;
  if (c.max_trials) {
    options_.max_trials = summary_.max_trials = *c.max_trials;
    changed.push_back(StrCat("max_trials ", *c.max_trials, " (", finished_, " finished)"));
  }
  if (c.max_parallel) {
    options_.max_parallel = *c.max_parallel;
    changed.push_back(StrCat("max_parallel ", *c.max_parallel));
  }
  if (c.time_limit_s) {
    spec_.budget.time_limit_s = *c.time_limit_s;
    Wake(*c.time_limit_s);
    changed.push_back(
        StrCat("time_limit ", FormatDuration(*c.time_limit_s), " from the run's start"));
  }
  if (c.priority) {
    spec_.priority = *c.priority;
    changed.push_back(StrCat("priority ", FormatShort(*c.priority, 4)));
  }
  if (changed.empty()) return {true, "nothing to update"};
  return {false, StrCat("updated: ", Join(changed, ", "))};
}

StudyController::Impl::ControlOutcome StudyController::Impl::EnqueueTrials(
    const std::vector<storage::ControlTrial>& trials) {
  if (run_.stopped()) return {true, StrCat("the study is stopping (", summary_.stop_reason, ")")};
  std::vector<std::string> bad;
  size_t queued = 0;
  for (const storage::ControlTrial& t : trials) {
    if (Status valid = spec_.space.Validate(t.params); !valid.ok()) {
      bad.push_back(valid.message());
      continue;
    }
    retries_.push_back({t.params, 1, t.retry_of, std::nullopt, std::nullopt});
    ++queued;
  }
  if (queued == 0)
    return {true, StrCat("no configuration fits the search space: ", Join(bad, "; "))};
  const int left = BudgetLeft() + static_cast<int>(retries_.size());
  std::string text =
      StrCat("queued ", queued, queued == 1 ? " configuration" : " configurations", " to run next");
  if (!bad.empty()) text += StrCat(" (", bad.size(), " refused: ", Join(bad, "; "), ")");
  if (left < static_cast<int>(retries_.size()))
    text += StrCat("; max_trials leaves room for ", std::max(0, left),
                   ": raise it with hyperpack update --max-trials");
  return {false, text};
}

// Prior results are completed trials of the study, numbered after the others, which the tuner
// learns as it learns its own; they count against max_trials as every finished trial does.
StudyController::Impl::ControlOutcome StudyController::Impl::AddResults(
    const std::vector<storage::ControlTrial>& trials) {
  std::vector<std::string> bad;
  std::vector<int> added;
  for (const storage::ControlTrial& t : trials) {
    Status valid = spec_.space.Validate(t.params);
    if (valid.ok() && !(t.value && std::isfinite(*t.value)))
      valid = Status::Invalid("no finite value");
    if (!valid.ok()) {
      bad.push_back(valid.message());
      continue;
    }
    const TrialRecord rec = storage::AddedResult(options_.study_id, next_number_++, t);
    Write(InsertTrialRow{rec});
    ++finished_;
    ++summary_.completed;
    NoteCompleted(rec.number, t.params, *t.value, false, RunCost{0, 0, false});
    tuner::TrialOutcome o;
    o.config = t.params;
    o.value = t.value;
    o.kind = tuner::TrialOutcome::Kind::kCompleted;
    Observe(std::move(o));
    added.push_back(rec.number);
  }
  if (added.empty()) return {true, StrCat("no result was added: ", Join(bad, "; "))};
  std::string text = StrCat("added ", Trials(added.size()), " as completed (", added.front(),
                            added.size() > 1 ? StrCat("-", added.back()) : "", ")");
  if (!bad.empty()) text += StrCat("; ", bad.size(), " refused: ", Join(bad, "; "));
  return {false, text};
}

}  // namespace hyperpack::scheduler
