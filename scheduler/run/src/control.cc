#include "hyperpack/scheduler/control.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "hyperpack/config_json.h"
#include "hyperpack/host.h"
#include "hyperpack/study/results.h"
#include "hyperpack/text.h"
#include "study_store.h"

namespace hyperpack::scheduler {
namespace {

using storage::ControlKind;
using storage::ControlRecord;
using storage::ControlTrial;
using storage::Storage;
using storage::TrialRecord;
using storage::TrialState;

constexpr std::pair<Verb, const char*> kVerbs[] = {
    {Verb::kStop, "stop"},     {Verb::kCancel, "cancel"},          {Verb::kPause, "pause"},
    {Verb::kResume, "resume"}, {Verb::kUpdate, "update"},          {Verb::kEnqueue, "enqueue"},
    {Verb::kRetry, "retry"},   {Verb::kAddResults, "add-results"}, {Verb::kDelete, "delete"},
};

// How often a caller looks for the runner's answer.
constexpr auto kAnswerPoll = std::chrono::milliseconds(50);

ControlKind KindOf(Verb verb) {
  switch (verb) {
    case Verb::kStop:
      return ControlKind::kStop;
    case Verb::kCancel:
      return ControlKind::kCancel;
    case Verb::kPause:
      return ControlKind::kPause;
    case Verb::kResume:
      return ControlKind::kResume;
    case Verb::kUpdate:
      return ControlKind::kUpdate;
    case Verb::kAddResults:
      return ControlKind::kAddResults;
    case Verb::kEnqueue:
    case Verb::kRetry:
    case Verb::kDelete:
      break;
  }
  return ControlKind::kEnqueue;
}

// The trials a retry runs again, each as a configuration naming the trial it re-runs.
Result<std::vector<ControlTrial>> RetriedTrials(Storage& db, const storage::StudyRecord& study,
                                                const ControlRequest& r) {
  HP_ASSIGN_OR_RETURN(auto trials, db.ListTrials(study.id));
  std::vector<ControlTrial> out;
  for (int number : r.retry_trials) {
    auto it = std::find_if(trials.begin(), trials.end(),
                           [&](const TrialRecord& t) { return t.number == number; });
    if (it == trials.end())
      return Status::NotFound("study '", study.name, "' has no trial ", number);
    out.push_back({it->params, std::nullopt, number});
  }
  if (r.retry_failed)
    for (const TrialRecord& t : trials)
      if (t.state == TrialState::kFailed || t.state == TrialState::kTimeout)
        out.push_back({t.params, std::nullopt, t.number});
  return out;
}

// The configurations and results the request carries as text, parsed.
// *skipped: rows of a results file that are not results (an Optuna export's failed trials).
Result<std::vector<ControlTrial>> TextTrials(const study::StudySpec& spec, const ControlRequest& r,
                                             int* skipped) {
  std::vector<ControlTrial> out;
  if (!r.results_text.empty()) {
    HP_ASSIGN_OR_RETURN(auto results,
                        study::ParseResults(r.results_text, r.results_path, spec, skipped));
    for (study::PriorResult& p : results) out.push_back({std::move(p.params), p.value, {}});
  }
  if (r.params_json.empty()) return out;
  const nlohmann::json j = nlohmann::json::parse(r.params_json, nullptr, false);
  if (!j.is_object() && !j.is_array())
    return Status::Invalid("--params: expected a JSON object of parameters, or a list of them, ",
                           "such as {\"lr\": 0.01, \"batch_size\": 64}");
  const nlohmann::json list = j.is_array() ? j : nlohmann::json::array({j});
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_object())
      return Status::Invalid("--params: entry ", i + 1, " is not an object of parameters");
    HP_ASSIGN_OR_RETURN(Config config, ConfigFromJson(list[i].dump()));
    out.push_back({std::move(config), std::nullopt, std::nullopt});
  }
  return out;
}

// The request as the control a runner carries out; its configurations conformed to the space.
Result<ControlRecord> ToControl(Storage& db, const storage::StudyRecord& study,
                                const study::StudySpec& spec, const ControlRequest& r,
                                int* skipped) {
  ControlRecord c;
  c.kind = KindOf(r.verb);
  c.created = WallNow();
  static_cast<storage::ControlArgs&>(c) = r;
  c.trials.clear();  // conformed below
  if (r.verb == Verb::kUpdate && !r.max_trials && !r.max_parallel && !r.time_limit_s && !r.priority)
    return Status::Invalid("update: give --max-trials, --max-parallel, --time-limit or --priority");
  if (r.verb == Verb::kRetry) {
    HP_ASSIGN_OR_RETURN(c.trials, RetriedTrials(db, study, r));
    return c;
  }
  HP_ASSIGN_OR_RETURN(std::vector<ControlTrial> given, TextTrials(spec, r, skipped));
  given.insert(given.begin(), r.trials.begin(), r.trials.end());
  for (size_t i = 0; i < given.size(); ++i) {
    ControlTrial t = given[i];
    auto conformed = spec.space.Conform(t.params);
    if (!conformed.ok())
      return Status::Invalid(VerbName(r.verb), ": configuration ", i + 1, " does not fit study '",
                             study.name, "': ", conformed.status().message());
    t.params = *std::move(conformed);
    if (r.verb == Verb::kAddResults && !(t.value && std::isfinite(*t.value)))
      return Status::Invalid("add-results: result ", i + 1, " has no finite value");
    c.trials.push_back(std::move(t));
  }
  return c;
}

// What the runner answered to control `id`, once it has.
Result<std::optional<ControlRecord>> Answered(Storage& db, int64_t study_id, int64_t id) {
  HP_ASSIGN_OR_RETURN(auto all, db.ListControls(study_id, /*pending_only=*/false));
  for (ControlRecord& c : all)
    if (c.id == id && c.applied) return std::optional<ControlRecord>(std::move(c));
  return std::optional<ControlRecord>();
}

// Whether the study's runner is still on it (looked at every few answer polls).
bool RunnerStays(Storage& db, const std::string& name) {
  auto found = db.FindStudy(name);
  return !found.ok() || (*found && storage::RunnerAlive(**found));
}

// Waits for the runner to carry out control `id`; withdraws it when the runner does not answer
// in time (and takes the answer if the runner got there first). nullopt: the run ended before it
// read the control, which is withdrawn, so that the verb is carried out as without a runner.
Result<std::optional<ControlAnswer>> AwaitAnswer(Storage& db, int64_t study_id, int64_t id,
                                                 double within_s, ControlAnswer answer) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(within_s));
  std::optional<ControlRecord> done;
  bool gone = false;
  for (int polls = 1;; ++polls) {
    HP_ASSIGN_OR_RETURN(done, Answered(db, study_id, id));
    if (done || std::chrono::steady_clock::now() >= deadline) break;
    if (polls % 10 == 0 && !RunnerStays(db, answer.study)) {
      gone = true;
      break;
    }
    std::this_thread::sleep_for(kAnswerPoll);
  }
  if (!done) {
    const std::string why =
        gone
            ? std::string("withdrawn: the run ended before it read this")
            : StrCat("the study's runner did not answer in ", FormatShort(within_s, 3),
                     " s; nothing was done (is it stuck? see hyperpack status ", answer.study, ")");
    Status withdrawn = db.FinishControl(id, WallNow(), /*refused=*/true, why);
    if (withdrawn.ok() && gone) return std::optional<ControlAnswer>();
    if (withdrawn.ok()) {
      answer.refused = true;
      answer.outcome = why;
      return std::optional<ControlAnswer>(std::move(answer));
    }
    if (withdrawn.code() != StatusCode::kNotFound) return withdrawn;
    HP_ASSIGN_OR_RETURN(done, Answered(db, study_id, id));  // answered meanwhile
    if (!done) return Status::NotFound("control ", id, " of study '", answer.study, "' is gone");
  }
  answer.refused = done->refused;
  answer.outcome = done->outcome;
  return std::optional<ControlAnswer>(std::move(answer));
}

// Completed trials, numbered after the others, in one transaction with a record of the control.
Status StoreResults(Storage& db, const storage::StudyRecord& study, ControlRecord c,
                    ControlAnswer* answer) {
  return db.Transaction([&]() -> Status {
    HP_RETURN_IF_ERROR(db.LockStudy(study.id));
    HP_ASSIGN_OR_RETURN(int next, db.NextTrialNumber(study.id));
    const int first = next;
    for (const ControlTrial& t : c.trials)
      HP_RETURN_IF_ERROR(db.InsertTrial(storage::AddedResult(study.id, next++, t)));
    answer->outcome =
        StrCat("added ", c.trials.size(), c.trials.size() == 1 ? " trial" : " trials",
               " as completed (", first, next - 1 > first ? StrCat("-", next - 1) : "", ")");
    HP_ASSIGN_OR_RETURN(int64_t id, db.AddControl(study.id, c));
    HP_RETURN_IF_ERROR(db.FinishControl(id, WallNow(), false, answer->outcome));
    return db.AddEvent(
        study.id, {WallNow(), std::nullopt, storage::EventKindName(storage::EventKind::kControl),
                   "add_results: " + answer->outcome});
  });
}

// No runner: what each verb does without one.
Result<ControlAnswer> WithoutRunner(Storage& db, const storage::StudyRecord& study,
                                    const ControlRequest& r, ControlRecord c,
                                    ControlAnswer answer) {
  switch (r.verb) {
    case Verb::kStop:
    case Verb::kCancel:
    case Verb::kPause:
    case Verb::kResume:
      answer.refused = true;
      answer.outcome = StrCat("study '", study.name, "' has no runner: nothing to ",
                              VerbName(r.verb), " (hyperpack status ", study.name, ")");
      return answer;
    case Verb::kAddResults:
      HP_RETURN_IF_ERROR(StoreResults(db, study, std::move(c), &answer));
      return answer;
    case Verb::kDelete:
      HP_RETURN_IF_ERROR(db.DeleteStudy(study.id));
      answer.outcome = StrCat("deleted study '", study.name, "' from ", db.path(),
                              " (its trials' logs, if any, are left where they are)");
      return answer;
    case Verb::kUpdate:
      HP_RETURN_IF_ERROR(db.AddControl(study.id, c).status());
      answer.kept = true;
      answer.outcome = "kept: the study's next run (hyperpack run) starts with it";
      return answer;
    case Verb::kEnqueue:
    case Verb::kRetry:
      break;
  }
  // One control a configuration, so that each ask hands one out.
  HP_RETURN_IF_ERROR(db.Transaction([&]() -> Status {
    for (const ControlTrial& t : c.trials) {
      ControlRecord one = c;
      one.trials = {t};
      HP_RETURN_IF_ERROR(db.AddControl(study.id, one).status());
    }
    return Status::Ok();
  }));
  answer.kept = true;
  answer.outcome = StrCat("queued ", c.trials.size(),
                          c.trials.size() == 1 ? " configuration" : " configurations",
                          ": they run first when the study runs next (hyperpack run), or go to "
                          "the next asks (hyperpack ask)");
  return answer;
}

}  // namespace

const char* VerbName(Verb verb) {
  for (const auto& [v, name] : kVerbs)
    if (v == verb) return name;
  return "?";
}

std::optional<Verb> ParseVerb(const std::string& name) {
  for (const auto& [v, n] : kVerbs)
    if (name == n) return v;
  return std::nullopt;
}

namespace {

// The control `c` carried out: refused when it carries nothing, by the runner when one is live,
// else as WithoutRunner says.
Result<ControlAnswer> Carry(Storage& db, const storage::StudyRecord& study, const ControlRequest& r,
                            ControlRecord c, ControlAnswer answer) {
  if ((r.verb == Verb::kEnqueue || r.verb == Verb::kRetry || r.verb == Verb::kAddResults) &&
      c.trials.empty()) {
    answer.refused = true;
    answer.outcome = r.verb == Verb::kRetry ? "no trial to retry: none failed or timed out"
                                            : "no configuration given";
    return answer;
  }
  if (!storage::RunnerAlive(study))
    return WithoutRunner(db, study, r, std::move(c), std::move(answer));
  if (r.verb == Verb::kDelete) {
    answer.refused = true;
    answer.outcome = StrCat("study '", study.name, "' is running (pid ", *study.runner_pid, " on ",
                            study.runner_host, "): stop or cancel it first");
    return answer;
  }
  HP_ASSIGN_OR_RETURN(int64_t id, db.AddControl(study.id, c));
  ControlAnswer live = answer;
  live.live = true;
  HP_ASSIGN_OR_RETURN(std::optional<ControlAnswer> answered,
                      AwaitAnswer(db, study.id, id, r.answer_within_s, std::move(live)));
  if (answered) return *std::move(answered);
  return WithoutRunner(db, study, r, std::move(c), std::move(answer));
}

}  // namespace

Result<ControlAnswer> ApplyControl(Storage& db, const ControlRequest& r) {
  HP_ASSIGN_OR_RETURN(auto loaded, LoadStoredStudy(db, r.study));
  const auto& [study, spec] = loaded;
  ControlAnswer answer;
  answer.study = study.name;
  answer.verb = r.verb;
  ControlRecord c;
  int skipped = 0;
  if (r.verb != Verb::kDelete) {
    HP_ASSIGN_OR_RETURN(c, ToControl(db, study, spec, r, &skipped));
  }
  HP_ASSIGN_OR_RETURN(answer, Carry(db, study, r, std::move(c), std::move(answer)));
  if (skipped > 0)
    answer.outcome += StrCat("; ", skipped, skipped == 1 ? " row" : " rows", " of ", r.results_path,
                             " not COMPLETE (no result) passed over");
  return answer;
}

}  // namespace hyperpack::scheduler
