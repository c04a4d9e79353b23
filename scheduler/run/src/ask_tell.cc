#include "hyperpack/scheduler/ask_tell.h"

#include <cmath>

#include "hyperpack/host.h"
#include "hyperpack/scheduler/study_controller.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/tuner.h"
#include "study_store.h"

namespace hyperpack::scheduler {
namespace {

using storage::TrialRecord;
using storage::TrialState;
using Kind = tuner::TrialOutcome::Kind;

// What the tuner learns from an ended trial; nullopt for one still open.
std::optional<Kind> OutcomeKind(const TrialRecord& t) {
  switch (t.state) {
    case TrialState::kCompleted:
      return t.value ? std::optional<Kind>(Kind::kCompleted) : std::optional<Kind>(Kind::kFailed);
    case TrialState::kPruned:
      return t.value ? std::optional<Kind>(Kind::kPruned) : std::optional<Kind>(Kind::kFailed);
    case TrialState::kInfeasible:
      return Kind::kInfeasible;
    case TrialState::kFailed:
    case TrialState::kTimeout:
    case TrialState::kInterrupted:
    case TrialState::kNodeLost:
      return Kind::kFailed;
    case TrialState::kPending:
    case TrialState::kRunning:
    case TrialState::kPaused:
    case TrialState::kCancelled:
      return std::nullopt;
  }
  return std::nullopt;
}

// The study's tuner with every ended trial observed, from the state the last ask kept
// (`state`); the open ones' configurations in *pending.
Result<std::unique_ptr<tuner::Tuner>> Rebuild(storage::Storage& db,
                                              const storage::StudyRecord& study,
                                              const study::StudySpec& spec,
                                              const std::vector<TrialRecord>& trials,
                                              const std::string& state,
                                              std::vector<Config>* pending) {
  HP_ASSIGN_OR_RETURN(auto tuner, tuner::MakeTuner(spec.space, TunerOptionsFor(spec, study.seed)));
  tuner->RestoreState(state);
  for (const TrialRecord& t : trials) {
    if (t.state == TrialState::kCancelled) continue;  // nothing about it is known
    std::optional<Kind> kind = OutcomeKind(t);
    if (!kind) {
      if (t.state != TrialState::kPaused) pending->push_back(t.params);
      continue;
    }
    tuner::TrialOutcome o;
    o.config = t.params;
    o.kind = *kind;
    if (*kind == Kind::kCompleted || *kind == Kind::kPruned) o.value = t.value;
    study::FillOutcomeValues(spec, t.values, &o);
    if (*kind == Kind::kPruned) {
      // The step it was stopped at, as the objective's last point says.
      HP_ASSIGN_OR_RETURN(auto last, db.LatestMetric(study.id, t.number, study.metric));
      if (last) o.resource = static_cast<double>(last->step);
    }
    tuner->Observe(o);
  }
  return tuner;
}

// The oldest pending enqueue control's first configuration, that control marked as handed out as
// trial `number`; nullopt when none is pending. Enqueued without a runner, each control holds one.
Result<std::optional<storage::ControlTrial>> TakeEnqueued(storage::Storage& db, int64_t study_id,
                                                          int number, double now) {
  HP_ASSIGN_OR_RETURN(auto pending, db.ListControls(study_id, /*pending_only=*/true));
  for (const storage::ControlRecord& c : pending) {
    if (c.kind != storage::ControlKind::kEnqueue || c.trials.empty()) continue;
    HP_RETURN_IF_ERROR(db.FinishControl(c.id, now, false, StrCat("asked as trial ", number)));
    return std::optional<storage::ControlTrial>(c.trials.front());
  }
  return std::optional<storage::ControlTrial>();
}

// The study's next configuration from its tuner, rebuilt from the trials and the state the last
// ask kept (so that it fits as a running study's tuner would, not from scratch); the state the
// tuner leaves is kept for the next ask.
Result<Config> Propose(storage::Storage& db, const storage::StudyRecord& study,
                       const study::StudySpec& spec) {
  HP_ASSIGN_OR_RETURN(auto trials, db.ListTrials(study.id));
  HP_ASSIGN_OR_RETURN(std::string state, db.TunerState(study.id));
  std::vector<Config> pending;
  HP_ASSIGN_OR_RETURN(auto tuner, Rebuild(db, study, spec, trials, state, &pending));
  HP_ASSIGN_OR_RETURN(auto proposed, tuner->Propose(1, pending));
  if (proposed.empty())
    return Status::FailedPrecondition("study '", study.name, "': its search space has no ",
                                      "configuration left that was not asked already");
  const std::string next = tuner->SaveState();
  if (next != state) HP_RETURN_IF_ERROR(db.SetTunerState(study.id, next));
  return proposed.front();
}

// Fails the study's asked trials whose last sign of life (ask or heartbeat) is older than its
// ask_timeout, and offers each one's configuration again (an enqueue control, which the next ask
// takes first) while it has attempts left (budget.max_attempts), as Optuna's RDB heartbeat with
// its retry callback does. Runners' trials have no heartbeat and are never touched.
Status FailStale(storage::Storage& db, const storage::StudyRecord& study,
                 const study::StudySpec& spec, double now) {
  if (!spec.ask_timeout_s) return Status::Ok();
  HP_ASSIGN_OR_RETURN(auto open,
                      db.ListTrialsIn(study.id, std::vector<TrialState>{TrialState::kRunning}));
  for (TrialRecord t : open) {
    if (!t.heartbeat || now - *t.heartbeat <= *spec.ask_timeout_s) continue;
    const bool again = t.attempt < spec.budget.max_attempts;
    t.state = TrialState::kFailed;
    t.ended = now;
    t.error = StrCat(
        "no tell or heartbeat for ", FormatDuration(now - *t.heartbeat), " (ask_timeout ",
        FormatDuration(*spec.ask_timeout_s), "): ",
        again ? "its configuration is asked again"
              : StrCat("not asked again after ", t.attempt, " attempts (budget.max_attempts)"));
    HP_RETURN_IF_ERROR(db.FinishTrial(t));
    HP_RETURN_IF_ERROR(db.AddEvent(
        study.id, {now, t.number, storage::EventKindName(storage::EventKind::kTrialFinished),
                   "failed: " + t.error}));
    if (!again) continue;
    storage::ControlRecord c;
    c.kind = storage::ControlKind::kEnqueue;
    c.created = now;
    c.trials = {storage::ControlTrial{t.params, std::nullopt, t.number}};
    HP_RETURN_IF_ERROR(db.AddControl(study.id, c).status());
  }
  return Status::Ok();
}

// Which run of its configuration a trial that re-runs trial `retry_of` is.
Result<int> AttemptAfter(storage::Storage& db, int64_t study_id, int retry_of) {
  HP_ASSIGN_OR_RETURN(auto all, db.ListTrials(study_id));
  for (const TrialRecord& t : all)
    if (t.number == retry_of) return t.attempt + 1;
  return 1;
}

// One attempt: propose and record, in one transaction.
Result<AskedTrial> AskOnce(storage::Storage& db, const std::string& name, const std::string& host,
                           double now) {
  AskedTrial out;
  Status s = db.Transaction([&]() -> Status {
    HP_ASSIGN_OR_RETURN(auto loaded, LoadStoredStudy(db, name));
    auto& [study, spec] = loaded;
    HP_RETURN_IF_ERROR(CheckNotHeld(study, spec));
    // Every ask before this one committed, and none after it reads until it commits.
    HP_RETURN_IF_ERROR(db.LockStudy(study.id));
    HP_RETURN_IF_ERROR(FailStale(db, study, spec, now));
    HP_ASSIGN_OR_RETURN(out.number, db.NextTrialNumber(study.id));
    // A configuration enqueued (hyperpack enqueue, retry) goes out before any proposal.
    HP_ASSIGN_OR_RETURN(std::optional<storage::ControlTrial> queued,
                        TakeEnqueued(db, study.id, out.number, now));
    TrialRecord t;
    if (queued) {
      out.params = queued->params;
      t.retry_of = queued->retry_of;
      if (t.retry_of) {
        HP_ASSIGN_OR_RETURN(t.attempt, AttemptAfter(db, study.id, *t.retry_of));
      }
    } else {
      HP_ASSIGN_OR_RETURN(out.params, Propose(db, study, spec));
    }
    t.study_id = study.id;
    t.number = out.number;
    t.state = TrialState::kRunning;
    t.params = out.params;
    t.started = now;
    t.heartbeat = now;
    t.host = host;
    HP_RETURN_IF_ERROR(db.InsertTrial(t));
    return db.AddEvent(study.id,
                       {now, out.number, storage::EventKindName(storage::EventKind::kTrialStarted),
                        "asked on " + host});
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace

Result<storage::StudyRecord> CreateStudy(storage::Storage& db, const study::StudySpec& spec,
                                         bool* created) {
  storage::StudyRecord out;
  Status s = db.Transaction([&]() -> Status {
    HP_ASSIGN_OR_RETURN(auto found, db.FindStudy(spec.name));
    *created = !found;
    if (found) {
      out = *found;
      return CheckCompatible(out, spec, db.path());
    }
    HP_ASSIGN_OR_RETURN(out, db.CreateStudy(NewStudyRecord(spec)));
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<AskedTrial> Ask(storage::Storage& db, const std::string& name, const std::string& host,
                       double now) {
  // Another process may take the number between reading it and inserting (PostgreSQL runs
  // transactions side by side): the insert then fails as taken, and the ask is made again.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    Result<AskedTrial> asked = AskOnce(db, name, host, now);
    if (asked.ok() || asked.status().code() != StatusCode::kAlreadyExists || attempt == kAttempts)
      return asked;
  }
}

namespace {

// Why trial `number` cannot be told or beat: what it is instead (a failed one's reason with it),
// or that there is no such trial.
Status NotRunning(storage::Storage& db, int64_t study_id, const std::string& name, int number) {
  HP_ASSIGN_OR_RETURN(auto all, db.ListTrials(study_id));
  for (const TrialRecord& t : all)
    if (t.number == number)
      return Status::FailedPrecondition(
          "trial ", number, " of study '", name, "' is not running: it is ",
          storage::TrialStateName(t.state), t.error.empty() ? "" : " (" + t.error + ")");
  return Status::NotFound("study '", name, "' has no trial ", number);
}

// The value a told trial keeps, from `value` or, in a study that keeps values, from `values`; an
// error naming what is missing or not the study's.
Result<std::optional<double>> ToldValue(const study::StudySpec& spec, const std::string& name,
                                        const Tell& tell, bool scored) {
  if (!scored) return std::optional<double>();
  if (!spec.KeepsValues()) {
    if (!tell.values.empty())
      return Status::Invalid("study '", name, "' has one objective, ", spec.objective.metric,
                             ": tell it with --value V");
    if (!(tell.value && std::isfinite(*tell.value)))
      return Status::Invalid("a ", storage::TrialStateName(tell.state),
                             " trial needs a finite --value (the objective)");
    return tell.value;
  }
  std::vector<std::string> kept;
  for (const study::Objective& o : spec.objectives) kept.push_back(o.metric);
  for (const study::Constraint& c : spec.constraints) kept.push_back(c.metric);
  const std::string expected = StrCat("--values '", Join(kept, "=V,"), "=V'");
  if (tell.value || tell.values.empty())
    return Status::Invalid("study '", name, "' keeps several values: tell them with ", expected,
                           " (from Python: values={...})");
  for (const auto& [metric, v] : tell.values)
    if (!spec.KeepsMetric(metric))
      return Status::Invalid("study '", name, "' keeps no metric '", metric, "'; expected ",
                             expected);
  // A completed trial has every objective's value; a pruned one its first's.
  for (const study::Objective& o : spec.objectives) {
    auto it = tell.values.find(o.metric);
    if (it == tell.values.end() || !std::isfinite(it->second))
      return Status::Invalid("a ", storage::TrialStateName(tell.state), " trial needs a finite ",
                             o.metric, " in --values");
    if (tell.state == TrialState::kPruned) break;
  }
  return std::optional<double>(tell.values.at(spec.objective.metric));
}

}  // namespace

Status TellTrial(storage::Storage& db, const std::string& name, int number, const Tell& tell,
                 double now) {
  const bool scored = tell.state == TrialState::kCompleted || tell.state == TrialState::kPruned;
  if (!scored && tell.state != TrialState::kFailed && tell.state != TrialState::kInfeasible)
    return Status::Invalid("a trial is told completed, pruned, failed or infeasible, not ",
                           storage::TrialStateName(tell.state));
  if (!scored && (tell.value || !tell.values.empty()))
    return Status::Invalid("a ", storage::TrialStateName(tell.state),
                           " trial has no value: leave out --value and --values");
  return db.Transaction([&]() -> Status {
    HP_ASSIGN_OR_RETURN(auto loaded, LoadStoredStudy(db, name));
    const storage::StudyRecord& study = loaded.first;
    HP_ASSIGN_OR_RETURN(const std::optional<double> value,
                        ToldValue(loaded.second, name, tell, scored));
    HP_ASSIGN_OR_RETURN(auto open,
                        db.ListTrialsIn(study.id, std::vector<TrialState>{TrialState::kRunning}));
    const TrialRecord* asked = nullptr;
    for (const TrialRecord& t : open)
      if (t.number == number) asked = &t;
    if (!asked) return NotRunning(db, study.id, name, number);
    TrialRecord t = *asked;
    t.state = tell.state;
    t.value = value;
    t.ended = now;
    t.exit_status = 0;
    std::vector<storage::MetricPoint> points;
    for (const auto& [metric, v] : tell.values)
      if (std::isfinite(v)) {
        t.values[metric] = v;
        points.push_back({tell.step.value_or(0), metric, v, now});
      }
    if (value && tell.values.empty())
      points.push_back({tell.step.value_or(0), study.metric, *value, now});
    if (!points.empty()) HP_RETURN_IF_ERROR(db.AddMetrics(study.id, number, points));
    HP_RETURN_IF_ERROR(db.FinishTrial(t));
    return db.AddEvent(study.id,
                       {now, number, storage::EventKindName(storage::EventKind::kTrialFinished),
                        storage::TrialStateName(tell.state)});
  });
}

Status HeartbeatTrial(storage::Storage& db, const std::string& name, int number, double now) {
  return db.Transaction([&]() -> Status {
    HP_ASSIGN_OR_RETURN(auto loaded, LoadStoredStudy(db, name));
    HP_ASSIGN_OR_RETURN(const bool beat, db.Heartbeat(loaded.first.id, number, now));
    return beat ? Status::Ok() : NotRunning(db, loaded.first.id, name, number);
  });
}

}  // namespace hyperpack::scheduler
