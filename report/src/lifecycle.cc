// A study's lifecycle as `status --json`, `wait` and `logs` read it: its conditions (Katib's word)
// from its record, tally, run events and controls; its event log and trials' logs in pieces.
#include <algorithm>
#include <chrono>
#include <climits>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "hyperpack/host.h"
#include "hyperpack/report/report.h"
#include "hyperpack/study/spec.h"
#include "hyperpack/text.h"

namespace hyperpack::report {
namespace {

using storage::ControlKind;
using storage::EventKind;
using storage::StopReason;
using storage::TrialState;

constexpr std::pair<ConditionType, const char*> kTypes[] = {
    {ConditionType::kCreated, "Created"},     {ConditionType::kRunning, "Running"},
    {ConditionType::kPaused, "Paused"},       {ConditionType::kStopping, "Stopping"},
    {ConditionType::kSucceeded, "Succeeded"}, {ConditionType::kFailed, "Failed"},
    {ConditionType::kStopped, "Stopped"},     {ConditionType::kCancelled, "Cancelled"},
};
constexpr int64_t kLogPiece = 64 * 1024;

// How a run that stopped for `reason` leaves the study.
StudyCondition Ended(const std::string& message, const storage::TrialTally& tally, double time) {
  const std::optional<StopReason> reason = storage::ParseStopReason(message);
  const auto completed = tally.counts.find(TrialState::kCompleted);
  const bool any = completed != tally.counts.end() && completed->second > 0;
  auto made = [&](ConditionType type, const char* why) {
    return StudyCondition{type, why, message, time};
  };
  if (!reason) return made(ConditionType::kStopped, "RunStopped");
  switch (*reason) {
    case StopReason::kBudgetReached:
    case StopReason::kSearchSpaceExhausted:
    case StopReason::kTimeLimit:
      if (!any) return made(ConditionType::kFailed, "NoTrialCompleted");
      return made(ConditionType::kSucceeded, *reason == StopReason::kBudgetReached ? "BudgetReached"
                                             : *reason == StopReason::kTimeLimit
                                                 ? "TimeLimitReached"
                                                 : "SearchSpaceExhausted");
    case StopReason::kTooManyFailed:
      return made(ConditionType::kFailed, "TooManyFailedTrials");
    case StopReason::kTunerError:
      return made(ConditionType::kFailed, "TunerError");
    case StopReason::kStorageError:
      return made(ConditionType::kFailed, "StorageError");
    case StopReason::kInterrupted:
      return made(ConditionType::kStopped, "Interrupted");
    case StopReason::kStopped:
      return made(ConditionType::kStopped, "StoppedByUser");
    case StopReason::kCancelled:
      return made(ConditionType::kCancelled, "CancelledByUser");
    case StopReason::kNone:
      break;
  }
  return made(ConditionType::kStopped, "RunStopped");
}

// The conditions a carried-out control makes; nullopt for one that changes no state.
std::optional<StudyCondition> FromControl(const storage::ControlRecord& c) {
  if (!c.applied || c.refused) return std::nullopt;
  switch (c.kind) {
    case ControlKind::kPause:
      return StudyCondition{ConditionType::kPaused, "PausedByUser", c.outcome, *c.applied};
    case ControlKind::kResume:
      return StudyCondition{ConditionType::kRunning, "ResumedByUser", c.outcome, *c.applied};
    case ControlKind::kStop:
      return StudyCondition{ConditionType::kStopping, "StopRequested", c.outcome, *c.applied};
    case ControlKind::kCancel:
      return StudyCondition{ConditionType::kStopping, "CancelRequested", c.outcome, *c.applied};
    default:
      return std::nullopt;
  }
}

// A study no runner ever ran (ask and tell): under way once a trial is asked, over once its
// budget's trials have all ended.
void AskedStudy(const std::optional<study::StudySpec>& spec, const storage::TrialTally& tally,
                std::vector<StudyCondition>* out) {
  if (!tally.first_start) return;
  out->push_back({ConditionType::kRunning, "TrialsAsked", "trials are asked (hyperpack ask)",
                  *tally.first_start});
  if (spec && tally.Finished() >= spec->budget.max_trials && tally.running_on == 0)
    out->push_back(Ended(storage::StopReasonName(StopReason::kBudgetReached), tally,
                         tally.last_end.value_or(*tally.first_start)));
}

std::string IsoTime(double seconds) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

nlohmann::ordered_json ConditionJson(const StudyCondition& c) {
  return {{"type", ConditionTypeName(c.type)},
          {"reason", c.reason},
          {"message", c.message},
          {"time", IsoTime(c.time)},
          {"time_s", c.time}};
}

std::optional<ConditionType> ParseConditionType(const std::string& name) {
  for (const auto& [type, n] : kTypes)
    if (name == n) return type;
  return std::nullopt;
}

Result<std::string> ReadFilePiece(const std::string& path, int64_t from, bool* at_end) {
  std::ifstream in(path, std::ios::binary);
  *at_end = true;
  if (!in) return std::string();  // not written yet, or never started
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (from >= size) return std::string();
  const int64_t n = std::min(kLogPiece, size - from);
  std::string text(static_cast<size_t>(n), '\0');
  in.seekg(from);
  in.read(text.data(), n);
  text.resize(static_cast<size_t>(in.gcount()));
  *at_end = from + static_cast<int64_t>(text.size()) >= size;
  return text;
}

bool Pause(double seconds, const std::function<bool()>& stop) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
  while (std::chrono::steady_clock::now() < end) {
    if (stop && stop()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return stop && stop();
}

}  // namespace

const char* ConditionTypeName(ConditionType type) {
  for (const auto& [t, name] : kTypes)
    if (t == type) return name;
  return "?";
}

bool IsFinal(ConditionType type) {
  return type == ConditionType::kSucceeded || type == ConditionType::kFailed ||
         type == ConditionType::kStopped || type == ConditionType::kCancelled;
}

Result<std::vector<StudyCondition>> ReadConditions(storage::Storage& db, const std::string& name) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found) return Status::NotFound("no study named '", name, "' in ", db.path());
  const storage::StudyRecord& s = *found;
  HP_ASSIGN_OR_RETURN(storage::TrialTally tally, db.TallyTrials(s.id));
  constexpr EventKind kRuns[] = {EventKind::kRunStarted, EventKind::kRunResumed,
                                 EventKind::kRunStopped};
  HP_ASSIGN_OR_RETURN(auto events, db.ListEventsOfKinds(s.id, kRuns));
  HP_ASSIGN_OR_RETURN(auto controls, db.ListControls(s.id, /*pending_only=*/false));
  const std::optional<study::StudySpec> spec = study::ParseStudy(s.spec_text, s.spec_path).spec;

  std::vector<StudyCondition> out = {
      {ConditionType::kCreated, "StudyCreated", StrCat("stored from ", s.spec_path), s.created}};
  // Controls first: one carried out in the same moment as the run stopped came before it.
  std::vector<StudyCondition> timeline;
  for (const storage::ControlRecord& c : controls)
    if (auto made = FromControl(c)) timeline.push_back(*made);
  for (const storage::EventRecord& e : events) {
    const std::optional<EventKind> kind = storage::ParseEventKind(e.kind);
    if (kind == EventKind::kRunStopped)
      timeline.push_back(Ended(e.message, tally, e.time));
    else
      timeline.push_back({ConditionType::kRunning,
                          kind == EventKind::kRunStarted ? "RunStarted" : "RunResumed",
                          "runner " + e.message, e.time});
  }
  std::stable_sort(
      timeline.begin(), timeline.end(),
      [](const StudyCondition& a, const StudyCondition& b) { return a.time < b.time; });
  out.insert(out.end(), timeline.begin(), timeline.end());
  if (events.empty()) AskedStudy(spec, tally, &out);
  if (s.runner_pid && !storage::RunnerAlive(s))
    out.push_back(
        {ConditionType::kStopped, "RunnerDied",
         StrCat("its runner (pid ", *s.runner_pid, ") is gone; run the study again to resume it"),
         WallNow()});
  return out;
}

std::string ConditionsJson(const std::vector<StudyCondition>& conditions) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const StudyCondition& c : conditions) out.push_back(ConditionJson(c));
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::vector<StudyCondition>> ParseConditionsJson(const std::string& json) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return Status::Invalid("conditions: not a JSON list");
  std::vector<StudyCondition> out;
  for (const nlohmann::json& one : j) {
    if (!one.is_object() || !one.value("type", nlohmann::json()).is_string())
      return Status::Invalid("conditions: an entry without a type");
    auto type = ParseConditionType(one["type"].get<std::string>());
    if (!type) return Status::Invalid("conditions: unknown type ", one["type"].dump());
    StudyCondition c{*type, one.value("reason", ""), one.value("message", ""),
                     one.value("time_s", 0.0)};
    out.push_back(std::move(c));
  }
  return out;
}

Result<int> WaitForStudy(const std::function<Result<std::vector<StudyCondition>>()>& read,
                         const WaitOptions& options, std::ostream& out) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    HP_ASSIGN_OR_RETURN(auto conditions, read());
    if (conditions.empty()) return Status::Internal("a study without conditions");
    const StudyCondition& now = conditions.back();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool final = IsFinal(now.type);
    const bool timed_out = options.timeout_s && waited >= *options.timeout_s;
    bool stopped = false;
    if (!final && !timed_out) stopped = Pause(options.poll_s, options.stop);
    if (!final && !timed_out && !stopped) continue;
    if (options.format == OutputFormat::kJson) {
      out << ConditionJson(now).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
    } else {
      out << ConditionTypeName(now.type) << " (" << now.reason << "): " << now.message
          << (final ? "" : "; still going") << "\n";
    }
    if (!final) return 124;
    if (now.type == ConditionType::kSucceeded) return 0;
    return now.type == ConditionType::kFailed ? 1 : 3;
  }
}

Result<LogChunk> ReadLogs(storage::Storage& db, const std::string& name, std::optional<int> trial,
                          int64_t from) {
  HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(name));
  if (!found) return Status::NotFound("no study named '", name, "' in ", db.path());
  const storage::StudyRecord& s = *found;
  const bool runner = storage::RunnerAlive(s);
  LogChunk chunk;
  if (!trial) {
    HP_ASSIGN_OR_RETURN(auto events, db.ListEvents(s.id, INT_MAX));
    // A piece ends past kLogPiece bytes too: a long study's log comes in several.
    size_t i = static_cast<size_t>(std::max<int64_t>(0, from));
    for (; i < events.size() && static_cast<int64_t>(chunk.text.size()) < kLogPiece; ++i) {
      const storage::EventRecord& e = events[i];
      chunk.text += FormatTimestamp(e.time) + "  " + e.kind;
      if (e.trial) chunk.text += StrCat(" trial ", *e.trial);
      if (!e.message.empty()) chunk.text += ": " + e.message;
      chunk.text += "\n";
    }
    chunk.next = std::max<int64_t>(from, static_cast<int64_t>(i));
    chunk.over = !runner && i >= events.size();
    return chunk;
  }
  HP_ASSIGN_OR_RETURN(auto trials, db.ListTrials(s.id));
  auto it = std::find_if(trials.begin(), trials.end(),
                         [&](const storage::TrialRecord& t) { return t.number == *trial; });
  if (it == trials.end()) return Status::NotFound("study '", name, "' has no trial ", *trial);
  if (it->log_path.empty()) {
    chunk.over = true;
    chunk.text = StrCat("(trial ", *trial, " has no log: ",
                        it->host.empty() ? "it was added or asked" : "none was recorded", ")\n");
    return chunk;
  }
  const bool open = it->state == TrialState::kRunning || it->state == TrialState::kPending;
  bool at_end = true;
  HP_ASSIGN_OR_RETURN(chunk.text, ReadFilePiece(it->log_path, from, &at_end));
  chunk.next = from + static_cast<int64_t>(chunk.text.size());
  chunk.over = at_end && (!open || !runner);
  return chunk;
}

Status FollowLogs(const std::function<Result<LogChunk>(int64_t from)>& read, bool follow,
                  double poll_s, const std::function<bool()>& stop, std::ostream& out) {
  int64_t from = 0;
  for (;;) {
    HP_ASSIGN_OR_RETURN(LogChunk chunk, read(from));
    out << chunk.text;
    out.flush();
    if (!out) return Status::Io("cannot write the logs");
    const bool more = chunk.next > from && !chunk.text.empty();
    from = chunk.next;
    if (more) continue;  // a long file comes in pieces
    if (!follow || chunk.over) return Status::Ok();
    if (Pause(poll_s, stop)) return Status::Ok();
  }
}

}  // namespace hyperpack::report
