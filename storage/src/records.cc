#include "hyperpack/storage/records.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "hyperpack/config_json.h"

namespace hyperpack::storage {

const char* TrialStateName(TrialState state) {
  switch (state) {
    case TrialState::kPending:
      return "pending";
    case TrialState::kRunning:
      return "running";
    case TrialState::kCompleted:
      return "completed";
    case TrialState::kPruned:
      return "pruned";
    case TrialState::kFailed:
      return "failed";
    case TrialState::kInterrupted:
      return "interrupted";
    case TrialState::kTimeout:
      return "timeout";
    case TrialState::kInfeasible:
      return "infeasible";
    case TrialState::kNodeLost:
      return "node_lost";
    case TrialState::kPaused:
      return "paused";
    case TrialState::kCancelled:
      return "cancelled";
  }
  return "?";
}

std::optional<TrialState> ParseTrialState(const std::string& name) {
  static const std::map<std::string, TrialState> kStates = {
      {"pending", TrialState::kPending},     {"running", TrialState::kRunning},
      {"completed", TrialState::kCompleted}, {"pruned", TrialState::kPruned},
      {"failed", TrialState::kFailed},       {"interrupted", TrialState::kInterrupted},
      {"timeout", TrialState::kTimeout},     {"infeasible", TrialState::kInfeasible},
      {"node_lost", TrialState::kNodeLost},  {"paused", TrialState::kPaused},
      {"cancelled", TrialState::kCancelled}};
  auto it = kStates.find(name);
  if (it == kStates.end()) return std::nullopt;
  return it->second;
}

bool IsFinished(TrialState state) {
  switch (state) {
    case TrialState::kCompleted:
    case TrialState::kPruned:
    case TrialState::kFailed:
    case TrialState::kTimeout:
    case TrialState::kInfeasible:
    case TrialState::kCancelled:
      return true;
    default:
      return false;
  }
}

const char* JournalKindName(JournalKind kind) {
  switch (kind) {
    case JournalKind::kBegin:
      return "begin";
    case JournalKind::kReport:
      return "report";
    case JournalKind::kCannotPause:
      return "cannot_pause";
    case JournalKind::kPromoted:
      return "promoted";
    case JournalKind::kEnd:
      return "end";
    case JournalKind::kFinalist:
      return "finalist";
  }
  return "?";
}

std::optional<JournalKind> ParseJournalKind(const std::string& name) {
  static const std::map<std::string, JournalKind> kKinds = {
      {"begin", JournalKind::kBegin},
      {"report", JournalKind::kReport},
      {"cannot_pause", JournalKind::kCannotPause},
      {"promoted", JournalKind::kPromoted},
      {"end", JournalKind::kEnd},
      {"finalist", JournalKind::kFinalist}};
  auto it = kKinds.find(name);
  if (it == kKinds.end()) return std::nullopt;
  return it->second;
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kRunStarted:
      return "run_started";
    case EventKind::kRunResumed:
      return "run_resumed";
    case EventKind::kRunStopped:
      return "run_stopped";
    case EventKind::kTrialStarted:
      return "trial_started";
    case EventKind::kTrialResumed:
      return "trial_resumed";
    case EventKind::kTrialFinished:
      return "trial_finished";
    case EventKind::kTrialPaused:
      return "trial_paused";
    case EventKind::kTimeLimit:
      return "time_limit";
    case EventKind::kPruning:
      return "pruning";
    case EventKind::kPausing:
      return "pausing";
    case EventKind::kCannotPause:
      return "cannot_pause";
    case EventKind::kPromoted:
      return "promoted";
    case EventKind::kTrialRunning:
      return "trial_running";
    case EventKind::kPreempted:
      return "preempted";
    case EventKind::kShare:
      return "share";
    case EventKind::kControl:
      return "control";
    case EventKind::kFinalist:
      return "finalist";
  }
  return "?";
}

std::optional<EventKind> ParseEventKind(const std::string& name) {
  static const std::map<std::string, EventKind> kKinds = {
      {"run_started", EventKind::kRunStarted},
      {"run_resumed", EventKind::kRunResumed},
      {"run_stopped", EventKind::kRunStopped},
      {"trial_started", EventKind::kTrialStarted},
      {"trial_resumed", EventKind::kTrialResumed},
      {"trial_finished", EventKind::kTrialFinished},
      {"trial_paused", EventKind::kTrialPaused},
      {"time_limit", EventKind::kTimeLimit},
      {"pruning", EventKind::kPruning},
      {"pausing", EventKind::kPausing},
      {"cannot_pause", EventKind::kCannotPause},
      {"promoted", EventKind::kPromoted},
      {"trial_running", EventKind::kTrialRunning},
      {"preempted", EventKind::kPreempted},
      {"share", EventKind::kShare},
      {"control", EventKind::kControl},
      {"finalist", EventKind::kFinalist}};
  auto it = kKinds.find(name);
  if (it == kKinds.end()) return std::nullopt;
  return it->second;
}

namespace {
constexpr std::pair<SubmissionState, const char*> kSubmissionStates[] = {
    {SubmissionState::kQueued, "queued"},
    {SubmissionState::kRunning, "running"},
    {SubmissionState::kDone, "done"},
};
}  // namespace

const char* SubmissionStateName(SubmissionState state) {
  for (const auto& [s, name] : kSubmissionStates)
    if (s == state) return name;
  return "?";
}

std::optional<SubmissionState> ParseSubmissionState(const std::string& name) {
  for (const auto& [s, n] : kSubmissionStates)
    if (name == n) return s;
  return std::nullopt;
}

std::string EncodePlacement(const std::vector<RankRecord>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankRecord& r : ranks) {
    nlohmann::json rank = {{"host", r.host}, {"gpus", r.gpus}, {"cpus", r.cpus}};
    if (r.gpu_share > 0) rank["gpu_share"] = r.gpu_share;  // absent: whole GPUs, as before
    out.push_back(std::move(rank));
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<RankRecord> DecodePlacement(const std::string& text) {
  using nlohmann::json;
  const json ranks = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!ranks.is_array()) return {};
  std::vector<RankRecord> out;
  for (const json& r : ranks) {
    if (!r.is_object()) return {};
    RankRecord rank;
    auto host = r.find("host");
    auto gpus = r.find("gpus");
    auto cpus = r.find("cpus");
    if (host == r.end() || !host->is_string()) return {};
    rank.host = host->get<std::string>();
    if (gpus != r.end()) {
      if (!gpus->is_array()) return {};
      for (const json& g : *gpus) {
        if (!g.is_number_integer()) return {};
        rank.gpus.push_back(g.get<int>());
      }
    }
    if (cpus != r.end()) {
      if (!cpus->is_number_integer()) return {};
      rank.cpus = std::max(0, cpus->get<int>());
    }
    if (auto share = r.find("gpu_share"); share != r.end()) {
      if (!share->is_number()) return {};
      const double f = share->get<double>();
      if (!(f > 0 && f <= 1)) return {};
      rank.gpu_share = f;
    }
    out.push_back(std::move(rank));
  }
  return out;
}

std::string EncodeValues(const std::map<std::string, double>& values) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, v] : values)
    if (std::isfinite(v)) out[name] = v;
  if (out.empty()) return "";
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::map<std::string, double> DecodeValues(const std::string& text) {
  std::map<std::string, double> out;
  if (text.empty()) return out;
  const nlohmann::json values = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!values.is_object()) return out;
  for (const auto& [name, v] : values.items())
    if (v.is_number()) out[name] = v.get<double>();
  return out;
}

std::string EncodeNumbers(const std::vector<double>& numbers) {
  if (numbers.empty()) return "";
  nlohmann::json out = nlohmann::json::array();
  for (double v : numbers) out.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
  return out.dump();
}

std::vector<double> DecodeNumbers(const std::string& text) {
  std::vector<double> out;
  if (text.empty()) return out;
  const nlohmann::json numbers = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!numbers.is_array()) return out;
  for (const nlohmann::json& v : numbers)
    out.push_back(v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN());
  return out;
}

std::string EncodeParams(const Config& params) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : params) {
    const std::string* text = std::get_if<std::string>(&value);
    if (text && !text->empty() && (text->front() == '[' || text->front() == '{')) {
      // Stored decoded only where decoding reads it back to the same text.
      nlohmann::json parsed = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_discarded() && parsed.dump() == *text) {
        out[name] = std::move(parsed);
        continue;
      }
    }
    std::visit([&](const auto& v) { out[name] = v; }, value);
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Config DecodeParams(const std::string& text) {
  Result<Config> config = ConfigFromJson(text);
  return config.ok() ? *std::move(config) : Config();
}

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kNone:
      return "";
    case StopReason::kBudgetReached:
      return "budget reached";
    case StopReason::kSearchSpaceExhausted:
      return "search space exhausted";
    case StopReason::kTimeLimit:
      return "time limit";
    case StopReason::kTooManyFailed:
      return "too many failed trials";
    case StopReason::kInterrupted:
      return "interrupted";
    case StopReason::kTunerError:
      return "tuner error";
    case StopReason::kStorageError:
      return "storage error";
    case StopReason::kStopped:
      return "stopped by request";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "";
}

std::optional<StopReason> ParseStopReason(const std::string& name) {
  constexpr StopReason kAll[] = {StopReason::kBudgetReached, StopReason::kSearchSpaceExhausted,
                                 StopReason::kTimeLimit,     StopReason::kTooManyFailed,
                                 StopReason::kInterrupted,   StopReason::kTunerError,
                                 StopReason::kStorageError,  StopReason::kStopped,
                                 StopReason::kCancelled};
  for (StopReason r : kAll)
    if (name == StopReasonName(r)) return r;
  return std::nullopt;
}

namespace {
constexpr std::pair<ControlKind, const char*> kControlKinds[] = {
    {ControlKind::kStop, "stop"},
    {ControlKind::kCancel, "cancel"},
    {ControlKind::kPause, "pause"},
    {ControlKind::kResume, "resume"},
    {ControlKind::kUpdate, "update"},
    {ControlKind::kEnqueue, "enqueue"},
    {ControlKind::kAddResults, "add_results"},
};

// An optional number of `j`: left unset when absent; an error when not a number (an integer for
// an integer field, within its range).
template <typename T>
Status ReadOptional(const nlohmann::json& j, const char* key, std::optional<T>* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::Ok();
  bool fits = it->is_number();
  if constexpr (std::is_integral_v<T>) {
    fits = it->is_number_unsigned()  ? std::in_range<T>(it->template get<uint64_t>())
           : it->is_number_integer() ? std::in_range<T>(it->template get<int64_t>())
                                     : false;
  }
  if (!fits)
    return Status::Invalid("a control's '", key, "' is not a ",
                           std::is_integral_v<T> ? "whole number in range" : "number");
  *out = it->template get<T>();
  return Status::Ok();
}
}  // namespace

const char* ControlKindName(ControlKind kind) {
  for (const auto& [k, name] : kControlKinds)
    if (k == kind) return name;
  return "?";
}

std::optional<ControlKind> ParseControlKind(const std::string& name) {
  for (const auto& [k, n] : kControlKinds)
    if (name == n) return k;
  return std::nullopt;
}

TrialRecord AddedResult(int64_t study_id, int number, const ControlTrial& result) {
  TrialRecord rec;
  rec.study_id = study_id;
  rec.number = number;
  rec.state = TrialState::kCompleted;
  rec.params = result.params;
  rec.value = result.value;
  return rec;
}

std::string EncodeControlArgs(const ControlArgs& c) {
  nlohmann::json out = nlohmann::json::object();
  if (c.max_trials) out["max_trials"] = *c.max_trials;
  if (c.max_parallel) out["max_parallel"] = *c.max_parallel;
  if (c.time_limit_s) out["time_limit_s"] = *c.time_limit_s;
  if (c.priority) out["priority"] = *c.priority;
  if (!c.trials.empty()) {
    nlohmann::json trials = nlohmann::json::array();
    for (const ControlTrial& t : c.trials) {
      // The parameters as the trials' rows store them, so both decode alike.
      nlohmann::json one = {{"params", EncodeParams(t.params)}};
      if (t.value) one["value"] = *t.value;
      if (t.retry_of) one["retry_of"] = *t.retry_of;
      trials.push_back(std::move(one));
    }
    out["trials"] = std::move(trials);
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<ControlArgs> ParseControlArgs(std::string_view text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Invalid("a control's arguments are not a JSON object");
  ControlArgs c;
  HP_RETURN_IF_ERROR(ReadOptional(j, "max_trials", &c.max_trials));
  HP_RETURN_IF_ERROR(ReadOptional(j, "max_parallel", &c.max_parallel));
  HP_RETURN_IF_ERROR(ReadOptional(j, "time_limit_s", &c.time_limit_s));
  HP_RETURN_IF_ERROR(ReadOptional(j, "priority", &c.priority));
  auto trials = j.find("trials");
  if (trials == j.end()) return c;
  if (!trials->is_array()) return Status::Invalid("a control's 'trials' is not a list");
  for (const nlohmann::json& one : *trials) {
    if (!one.is_object() || !one.contains("params") || !one["params"].is_string())
      return Status::Invalid("a control's trial has no 'params' text");
    ControlTrial t;
    t.params = DecodeParams(one["params"].get<std::string>());
    HP_RETURN_IF_ERROR(ReadOptional(one, "value", &t.value));
    HP_RETURN_IF_ERROR(ReadOptional(one, "retry_of", &t.retry_of));
    c.trials.push_back(std::move(t));
  }
  return c;
}

void DecodeControlArgs(const std::string& text, ControlRecord* c) {
  Result<ControlArgs> args = ParseControlArgs(text);
  if (args.ok()) static_cast<ControlArgs&>(*c) = *std::move(args);
}

int TrialTally::Finished() const {
  int finished = 0;
  for (const auto& [state, n] : counts) finished += IsFinished(state) ? n : 0;
  return finished;
}

void TrialTally::AddSpan(std::optional<double> first, std::optional<double> last, int running) {
  if (first && (!first_start || *first < *first_start)) first_start = first;
  if (last && (!last_end || *last > *last_end)) last_end = last;
  running_on += running;
}

TrialTally TallyOf(const std::vector<TrialRecord>& trials) {
  TrialTally tally;
  for (const TrialRecord& t : trials) {
    ++tally.counts[t.state];
    if (t.started) tally.AddSpan(t.started, t.ended, t.ended ? 0 : 1);
  }
  return tally;
}

}  // namespace hyperpack::storage
