// Reports, the pruner, pauses and promotions, and the replay that rebuilds them on resume.
//
// Everything the pruner is told goes to the journal as it is told (a trial began, reported a value
// at a resource, could not pause, was promoted, ended), and a resumed study tells a fresh pruner
// the same things in the same order. Nothing is inferred from metric lines after the fact: a line
// printed after a decision, or a NaN that a chart cannot show, changes nothing on replay.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "controller_impl.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler {

using storage::EventKind;
using storage::JournalKind;
using storage::TrialRecord;
using storage::TrialState;
using Kind = tuner::PrunerDecision::Kind;

namespace {
// What a stored trial held (as Launch counts it) from its placement; 1 CPU slot where that is
// missing (schema 3 and older wrote none).
Held StoredUnits(const std::vector<storage::RankRecord>& placement) {
  int gpus = 0, cpus = 0;
  for (const storage::RankRecord& r : placement) {
    gpus += static_cast<int>(r.gpus.size());
    cpus += r.cpus;
  }
  return HeldOf(gpus, cpus);
}
}  // namespace

void StudyController::Impl::On(const MetricReport& e) {
  auto it = running_.find(e.trial);
  if (it == running_.end()) return;
  Trial& t = it->second;
  const MetricLine& m = e.line;
  int64_t step = m.step.value_or(t.metric_lines);
  ++t.metric_lines;
  std::vector<storage::MetricPoint> points;
  bool reported = false;
  for (const auto& [name, value] : m.values) {
    // After a pruner's decision the trial's value stays the one it was judged on.
    if (name == spec_.objective.metric && !t.pruned && !t.pausing) {
      t.objective = Combine(t, value);
      reported = true;
    }
    if (spec_.KeepsValues() && !t.pruned && !t.pausing) KeepValue(t, name, value);
    if (name == env::kPeakGpuMetric) LearnGpuMemory(t, value);
    // SQLite stores NaN as NULL; a NaN point says nothing a chart could show.
    if (!std::isnan(value)) points.push_back({step, name, value, Wall()});
  }
  // The epoch is kept for charts; the pruner's resource goes to the journal.
  if (m.epoch && !points.empty())
    points.push_back({step, env::kEpochMetric, static_cast<double>(*m.epoch), Wall()});
  if (!points.empty()) Write(MetricsRow{t.number, std::move(points)});
  if (reported) OnReport(t, m, e.checkpoint);
}

// A report of the objective from rank 0: the pruner decides, and a trial it stops or pauses is
// signalled at once.
void StudyController::Impl::OnReport(Trial& t, const MetricLine& m, bool checkpoint) {
  if (t.pruned || t.pausing || !t.objective) return;
  t.continued_to.reset();
  // A finalist's reports are kept (its rows); the pruner and the tuner's rungs never see them.
  if (IsFinalist(t.root)) {
    t.resource = ResourceOf(m, t.metric_lines);
    return;
  }
  t.resource = ResourceOf(m, roots_[t.root].reports + 1);
  const std::vector<double> values = ObjectiveValues(t);
  Journal(JournalKind::kReport, t.root, t.resource, *t.objective, false, values);
  tuner::PrunerDecision d =
      Report(t.root, t.config, t.resource, *t.objective, values, &t.rung_observed, CostPerUnit(t));
  if (d.kind == Kind::kPause && !checkpoint) {
    d = pruner_->CannotPause(t.root);
    Journal(JournalKind::kCannotPause, t.root);
    roots_[t.root].seen.decisions.push_back({static_cast<int>(d.kind), d.rung.value_or(-1)});
    roots_[t.root].last = d.kind;
    Log(t.number, EventKind::kCannotPause,
        StrCat("cannot pause at ", study::ResourceName(spec_.pruner.resource), " ",
               FormatShort(t.resource, 6), ": nothing in ", TrialDir(t.root), "/checkpoint",
               "; it runs on and is judged as in mode stop"));
  }
  if (d.kind != Kind::kContinue) {
    Decided(t, d);
  } else if (t.waits_at && t.resource >= *t.waits_at && !StopsAt(*t.waits_at)) {
    // Sent on to the end, it waits there for a word as at any stop (hyperpack-trainer for
    // seconds, a command that blocks on its socket for ever): "continue" to where it is ends it.
    out_.push_back(ContinueCmd{t.number, t.resource});
    t.waits_at.reset();
  }
  // A new value at a rung may let a paused trial be promoted into a free slot.
  if (d.rung && pruner_->pauses()) ++refills_;
}

// The one place a report reaches the pruner and the tuner, live and in replay.
tuner::PrunerDecision StudyController::Impl::Report(int root, const Config& config, double resource,
                                                    double objective,
                                                    std::span<const double> values,
                                                    bool* rung_observed,
                                                    std::optional<double> cost) {
  RootState& rs = roots_[root];
  ++rs.reports;
  tuner::PrunerDecision d = values.empty() ? pruner_->Report(root, resource, Comparable(objective))
                                           : pruner_->ReportObjectives(root, resource, values);
  rs.rung_observed = ObserveRung(root, config, resource, objective, d, cost);
  if (rung_observed) *rung_observed = rs.rung_observed;
  rs.seen.reports = rs.reports;
  rs.seen.resource = resource;
  rs.seen.promoted = false;
  rs.seen.decisions.push_back({static_cast<int>(d.kind), d.rung.value_or(-1)});
  rs.last = d.kind;
  return d;
}

void StudyController::Impl::Decided(Trial& t, const tuner::PrunerDecision& d) {
  const bool pause = d.kind == Kind::kPause;
  (pause ? t.pausing : t.pruned) = true;
  t.prune_reason = d.reason;
  t.decided = now_;
  Log(t.number, pause ? EventKind::kPausing : EventKind::kPruning,
      StrCat(pause ? "pausing" : "pruned", " at ", study::ResourceName(spec_.pruner.resource), " ",
             FormatShort(t.resource, 6), ": ", d.reason));
  // One that can be told to go on waits at its rung until this event's promotions are known.
  if (pause && t.control) {
    t.awaiting = true;
    return;
  }
  Terminate(t);
}

// A report's progress: its epoch (or step), or else how many objective reports came so far.
double StudyController::Impl::ResourceOf(const MetricLine& m, int64_t count) const {
  std::optional<int64_t> r =
      spec_.pruner.resource == study::PrunerResource::kStep ? m.step : m.epoch;
  return static_cast<double>(r.value_or(count));
}

// NaN ranks last, whatever the direction.
double StudyController::Impl::Comparable(double v) const {
  if (!std::isnan(v)) return v;
  return spec_.objective.direction == study::Direction::kMinimize
             ? std::numeric_limits<double>::infinity()
             : -std::numeric_limits<double>::infinity();
}

std::optional<double> StudyController::Impl::Combine(Trial& t, double v) const {
  return CombineFor(spec_.objective, t.objective, v, &t.recent.objective);
}

std::optional<double> StudyController::Impl::CombineFor(const study::Objective& objective,
                                                        std::optional<double> current, double v,
                                                        std::vector<double>* recent) {
  using S = study::ObjectiveStrategy;
  S s = objective.strategy;
  if (s == S::kLastMean) {
    // A NaN report leaves the mean as it was, as it leaves a min or a max.
    if (std::isnan(v)) return current;
    recent->push_back(v);
    const auto window = static_cast<size_t>(std::max(1, objective.window));
    if (recent->size() > window) recent->erase(recent->begin(), recent->end() - window);
    return std::accumulate(recent->begin(), recent->end(), 0.0) / recent->size();
  }
  if (s == S::kBest) s = objective.direction == study::Direction::kMinimize ? S::kMin : S::kMax;
  if (s == S::kLast || !current || std::isnan(*current)) return v;
  if (std::isnan(v)) return current;
  return s == S::kMin ? std::min(*current, v) : std::max(*current, v);
}

void StudyController::Impl::KeepValue(Trial& t, const std::string& name, double value) const {
  auto it = t.values.find(name);
  std::optional<double> current;
  if (it != t.values.end()) current = it->second;
  for (const study::Objective& o : spec_.objectives) {
    if (o.metric != name) continue;
    // Only a last-N-avg objective keeps its recent reports.
    std::vector<double>* recent =
        o.strategy == study::ObjectiveStrategy::kLastMean ? &t.recent.values[name] : nullptr;
    if (auto v = CombineFor(o, current, value, recent)) t.values[name] = *v;
    return;
  }
  for (const study::Constraint& c : spec_.constraints)
    if (c.metric == name) t.values[name] = value;
}

// The tuner learns a trial's value at each level of the first bracket's ladder (min x eta^k, below
// the full resource) that a report reaches, as a pruned outcome at that fidelity: in Hyperband's
// later brackets too, whose own rungs start higher, so that the GP has the same fidelities from
// every trial. Without learn_ladder, only at the rungs the pruner recorded. True when it learnt.
bool StudyController::Impl::ObserveRung(int root, const Config& config, double resource,
                                        double value, const tuner::PrunerDecision& d,
                                        std::optional<double> cost) {
  std::optional<double> level;
  if (options_.learn_ladder) {
    size_t& next = roots_[root].ladder_next;
    while (next < ladder_.size() && resource + 1e-9 >= ladder_[next]) level = ladder_[next++];
  } else {
    level = d.rung;
  }
  if (!level || *level >= spec_.pruner.max_resource * (1 - 1e-9) || !std::isfinite(value))
    return false;
  tuner::TrialOutcome o;
  o.config = config;
  o.kind = tuner::TrialOutcome::Kind::kPruned;
  o.value = value;
  o.resource = *level;
  o.cost = cost;
  Observe(std::move(o));
  return true;
}

std::vector<double> StudyController::Impl::ObjectiveValues(const Trial& t) const {
  std::vector<double> out;
  if (!spec_.MultiObjective()) return out;
  const std::map<std::string, double> values = ValuesWithCost(t);
  for (const study::Objective& o : spec_.objectives) {
    auto it = values.find(o.metric);
    out.push_back(it == values.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
  }
  return out;
}

void StudyController::Impl::Journal(JournalKind kind, int root, double resource, double value,
                                    bool completed, std::vector<double> values) {
  if (run_.restoring()) return;  // replayed: written already
  storage::JournalEntry e;
  e.trial = root;
  e.kind = kind;
  e.time = Wall();
  e.resource = resource;
  e.value = value;
  e.completed = completed;
  e.values = std::move(values);
  Write(JournalRow{e});
}

// ---- Pauses and promotions ----------------------------------------------------------------------

// A paused trial goes back to the queue, ahead of new ones, to resume from its checkpoint.
void StudyController::Impl::Promote(const Paused& p, double target, bool announced) {
  if (!announced)
    Log(p.number, EventKind::kPromoted,
        StrCat("promoted from ", study::ResourceName(spec_.pruner.resource), " ",
               FormatShort(p.rung, 6), " to ", FormatShort(target, 6)));
  Enqueue({p.config, p.attempt, p.retry_of, p.root, p}, std::nullopt, target - p.rung);
}

void StudyController::Impl::MarkPromoted(int root, double target) {
  Journal(JournalKind::kPromoted, root, target);
  roots_[root].seen.promoted = true;
}

// A trial has stopped at its rung; promoted while it was still stopping, it goes straight back to
// the queue.
void StudyController::Impl::PausedFor(int root, Paused p) {
  auto it = promoted_early_.find(root);
  if (it == promoted_early_.end()) {
    paused_[root] = std::move(p);
    return;
  }
  double target = it->second;
  promoted_early_.erase(it);
  Promote(p, target, announced_early_.erase(root) > 0);
}

// The budget is spent and nothing runs: trials still paused will never be promoted.
void StudyController::Impl::FinalizePaused() {
  for (auto& [root, p] : paused_) {
    TrialRecord rec;
    rec.study_id = options_.study_id;
    rec.number = p.number;
    rec.state = TrialState::kPruned;
    rec.value = p.value;
    rec.ended = Wall();
    rec.error = StrCat("paused at ", study::ResourceName(spec_.pruner.resource), " ",
                       FormatShort(p.rung, 6), " and not promoted before the study ended");
    Write(FinishTrialRow{rec});
    Write(EventRow{
        {*rec.ended, rec.number, storage::EventKindName(EventKind::kTrialFinished), rec.error}});
    pruner_->End(root, false);
    Journal(JournalKind::kEnd, root, 0, 0, false);
    ++finished_;
    ++summary_.pruned;
  }
  paused_.clear();
}

// ---- Resume is replay ---------------------------------------------------------------------------

Status StudyController::Impl::Replay(const StoredStudy& stored) {
  origin_ = stored.resumed ? Origin::kResumed : Origin::kNew;
  next_number_ = stored.next_number;
  std::map<int, int> parent;
  std::set<int> has_retry;
  for (const TrialRecord& t : stored.trials)
    if (t.retry_of) {
      has_retry.insert(*t.retry_of);
      parent[t.number] = *t.retry_of;
    }
  auto root_of = [&](int n) {
    for (int hops = 0; parent.count(n) && hops < 100000; ++hops) n = parent[n];
    return n;
  };
  std::map<int, Config> configs, config_of_root;
  for (const TrialRecord& t : stored.trials) {
    configs[t.number] = t.params;
    config_of_root.emplace(root_of(t.number), t.params);
  }
  // Before the reports, so that the tuner relearns each outcome with its cost.
  RestoreCosts(stored, root_of);
  for (const storage::JournalEntry& e : stored.journal) ReplayEntry(e, config_of_root);
  for (const TrialRecord& t : stored.trials)
    RestoreTrial(t, configs[t.number], root_of(t.number), has_retry.count(t.number) > 0, stored);
  // The run that stored them said so when the second repeat came.
  rerun_repeat_logged_ = RerunsRepeat();
  return Status::Ok();
}

// The pruner is told what it was told live, in the same order.
void StudyController::Impl::ReplayEntry(const storage::JournalEntry& e,
                                        const std::map<int, Config>& config_of_root) {
  RootState& rs = roots_[e.trial];
  switch (e.kind) {
    case JournalKind::kBegin:
      pruner_->Begin(e.trial);
      return;
    case JournalKind::kReport: {
      auto it = config_of_root.find(e.trial);
      Report(e.trial, it == config_of_root.end() ? Config{} : it->second, e.resource, e.value,
             e.values, nullptr, rs.stored_cost);
      return;
    }
    case JournalKind::kCannotPause: {
      tuner::PrunerDecision d = pruner_->CannotPause(e.trial);
      rs.seen.decisions.push_back({static_cast<int>(d.kind), d.rung.value_or(-1)});
      rs.last = d.kind;
      return;
    }
    case JournalKind::kPromoted:
      pruner_->Promoted(e.trial);
      rs.seen.promoted = true;
      return;
    case JournalKind::kEnd:
      pruner_->End(e.trial, e.completed);
      return;
    case JournalKind::kFinalist:
      if (finalist_roots_.insert(e.trial).second) {
        auto it = config_of_root.find(e.trial);
        if (it == config_of_root.end()) return;
        const bool again = std::find(finalist_configs_.begin(), finalist_configs_.end(),
                                     it->second) != finalist_configs_.end();
        (again ? extra_draws_ : finalist_configs_).push_back(it->second);
      }
      return;
  }
}

void StudyController::Impl::RestoreTrial(const TrialRecord& t, const Config& config, int root,
                                         bool has_retry, const StoredStudy& stored) {
  const bool rerun =
      (t.state == TrialState::kInterrupted || t.state == TrialState::kNodeLost) && !has_retry;
  const RootState& rs = roots_[root];
  if (storage::IsFinished(t.state)) {
    ++finished_;
    ObserveStored(t, config, root);
  } else if (t.state == TrialState::kPaused ||
             (rerun && rs.last == Kind::kPause && stored.checkpoints.count(root))) {
    // A trial stopped at its rung when the runner died: it was pausing, and is paused now.
    if (t.state != TrialState::kPaused) {
      TrialRecord rec = t;
      rec.state = TrialState::kPaused;
      rec.error = "paused at its rung when the runner stopped";
      Write(FinishTrialRow{rec});
    }
    Paused p{t.number,         config,  t.attempt, t.retry_of, root,
             rs.seen.resource, t.value, t.values,  {}};
    // The cost stored at the pause is hyperpack's measure then: measured afresh when it ends.
    if (KeepsCost()) p.values.erase(study::kCostMetric);
    // Promoted, but it had not reported since: it goes back to the queue as promoted.
    if (rs.seen.promoted) return Enqueue({config, t.attempt, t.retry_of, root, p});
    paused_[root] = std::move(p);
  } else if (rerun) {
    retries_.push_back({config, t.attempt + 1, t.number, root, std::nullopt});
  }
}

void StudyController::Impl::RestoreCosts(const StoredStudy& stored,
                                         const std::function<int(int)>& root_of) {
  // Its runs count against a cost budget. A promoted trial's pauses are counted too: storage keeps
  // its first start and its last end.
  for (const TrialRecord& t : stored.trials) {
    if (!t.started || !t.ended || *t.ended <= *t.started) continue;
    const Held held = StoredUnits(t.placement);
    const double seconds = *t.ended - *t.started;
    roots_[root_of(t.number)].spent += seconds * held.units;
    (held.gpus ? gpu_seconds_ : cpu_seconds_) += seconds * BudgetUnits(t.placement, held);
  }
  // Per unit: over the last resource each root reported, as CostPerUnit prices it live.
  std::map<int, double> resource;
  std::set<int> promoted;
  for (const storage::JournalEntry& e : stored.journal) {
    if (e.kind == JournalKind::kReport) resource[e.trial] = e.resource;
    if (e.kind == JournalKind::kPromoted) promoted.insert(e.trial);
  }
  for (auto& [root, rs] : roots_) {
    if (rs.spent <= 0 || promoted.count(root)) continue;
    auto it = resource.find(root);
    rs.stored_cost = rs.spent / std::max(1.0, it == resource.end() ? 0.0 : it->second);
  }
}

// A finished trial of an earlier run: counted, and learnt by the tuner (its rungs were learnt in
// the journal's replay).
void StudyController::Impl::ObserveStored(const TrialRecord& t, const Config& config, int root) {
  const RootState& rs = roots_[root];
  tuner::TrialOutcome o;
  o.config = config;
  o.value = t.value;
  study::FillOutcomeValues(spec_, t.values, &o);
  o.cost = rs.stored_cost;
  switch (t.state) {
    case TrialState::kCompleted:
      o.kind = tuner::TrialOutcome::Kind::kCompleted;
      ++summary_.completed;
      if (t.value && IsBestCandidate(t.values)) {
        const double seconds = t.started && t.ended ? std::max(0.0, *t.ended - *t.started) : 0.0;
        const Held held = StoredUnits(t.placement);
        NoteCompleted(t.number, config, *t.value, IsFinalist(root),
                      RunCost{seconds, BudgetUnits(t.placement, held), held.gpus});
      }
      break;
    case TrialState::kPruned:
      ++summary_.pruned;
      // A median-pruned value is learnt at its step; a rung's value was learnt already.
      if (rs.rung_observed || rs.seen.resource <= 0 || !t.value) return;
      o.kind = tuner::TrialOutcome::Kind::kPruned;
      o.resource = rs.seen.resource;
      break;
    case TrialState::kInfeasible:
      o.kind = tuner::TrialOutcome::Kind::kInfeasible;
      ++summary_.infeasible;
      break;
    case TrialState::kCancelled:
      return;  // nothing about the configuration is known
    default:
      o.kind = tuner::TrialOutcome::Kind::kFailed;
      ++summary_.failed;
      break;
  }
  Observe(std::move(o));
}

std::string StudyController::Impl::StartLine() const {
  if (origin_ == Origin::kResumed)
    return StrCat(
        "resuming study '", spec_.name, "': ", finished_, " of ", options_.max_trials,
        " trials finished",
        retries_.empty() ? "" : StrCat(", ", retries_.size(), " interrupted to run again"),
        paused_.empty() ? "" : StrCat(", ", paused_.size(), " paused"));
  return StrCat("study '", spec_.name, "': ", options_.max_trials, " trials, up to ",
                options_.max_parallel, " at a time, ", spec_.objective.metric, " (",
                study::DirectionName(spec_.objective.direction), "), tuner ",
                tuner::TunerAlgorithmName(spec_.tuner.algorithm), ", storage ",
                options_.storage_path, options_.start_note);
}

}  // namespace hyperpack::scheduler
