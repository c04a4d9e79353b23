// A trial's life in the controller: placed, its row written, its ranks launched, signalled, and
// how it ended (stored, learnt, counted and told).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "controller_impl.h"
#include "hyperpack/config_json.h"
#include "hyperpack/env_vars.h"
#include "hyperpack/study/template.h"
#include "hyperpack/text.h"
#include "hyperpack/warm.h"

namespace hyperpack::scheduler {

using storage::EventKind;
using storage::TrialRecord;
using storage::TrialState;

namespace {

std::string ParamsLine(const Config& config, const SearchSpace& space) {
  std::vector<std::string> parts;
  for (const ParamSpec& p : space.params()) {
    auto it = config.find(p.name);
    if (it != config.end() && p.type != ParamType::kFixed)
      parts.push_back(p.name + "=" + DisplayValue(it->second));
  }
  return Join(parts, " ");
}

std::string LastLines(const std::string& text, int lines) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  size_t pos = end;
  for (int i = 0; i < lines && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  std::string out = text.substr(pos, end - pos);
  if (!out.empty() && out.front() == '\n') out.erase(0, 1);
  return out;
}

}  // namespace

bool StudyController::Impl::Trial::AllExited() const {
  for (const Rank& r : ranks)
    if (!r.exited) return false;
  return true;
}

double BudgetUnits(const std::vector<storage::RankRecord>& ranks, const Held& held) {
  double shared = 0;
  for (const storage::RankRecord& r : ranks) shared += r.gpu_share;
  return shared > 0 ? shared : held.units;
}

std::string TrialFolderName(int number) {
  char name[32];
  std::snprintf(name, sizeof(name), "trial-%04d", number);
  return name;
}

std::string StudyController::Impl::TrialDir(int number) const {
  return options_.log_root + "/" + TrialFolderName(number);
}

std::vector<storage::RankRecord> StudyController::Impl::Ranks(const Placement& placement) const {
  std::vector<storage::RankRecord> ranks;
  for (const RankPlacement& r : placement.ranks) {
    const Node& node = cluster_.nodes()[r.node];
    ranks.push_back({node.name, r.gpus, r.cpus,
                     r.share.any() ? GpuFraction(r.share, node.gpu_memory_mb) : 0.0});
  }
  return ranks;
}

// ---- Placed: its row first ----------------------------------------------------------------------

// Persist, then act: the trial's row is committed before its process exists, so that storage knows
// of every process a runner started (and a reader never sees a trial that is not there).
void StudyController::Impl::Launch(Queued q, uint64_t job, Placement placement) {
  Trial t;
  const bool resume = q.promoted.has_value();
  t.number = resume ? q.promoted->number : next_number_++;
  t.config = std::move(q.config);
  t.attempt = q.attempt;
  t.retry_of = q.retry_of;
  t.root = q.root.value_or(t.number);
  t.job = job;
  t.started = now_;
  t.plan.placement = std::move(placement);
  int gpus = 0, cpus = 0;
  for (const RankPlacement& r : t.plan.placement.ranks) {
    gpus += static_cast<int>(r.gpus.size());
    cpus += r.cpus;
  }
  const Held held = HeldOf(gpus, cpus);
  t.units = held.units;
  t.on_gpus = held.gpus;
  // Where it runs, as stored; PlanLaunch below keeps the placement.
  std::vector<storage::RankRecord> where_ranks = Ranks(t.plan.placement);
  t.budget_units = BudgetUnits(where_ranks, held);
  if (auto p = predicted_by_job_.find(job); p != predicted_by_job_.end()) {
    roots_[t.root].predicted = p->second;
    predicted_by_job_.erase(p);
  }
  const double target = BeginRoot(t.root, q.finalist_of.has_value());
  t.control = options_.continue_in_place && spec_.pruner.in_place && StopsAt(target);
  if (t.control) t.waits_at = target;
  if (resume) {
    t.resumed_to = target;
    t.objective = q.promoted->value;
    t.values = q.promoted->values;  // so that a min, max or mean strategy keeps what came before
    t.recent = q.promoted->recent;
  }
  t.plan = PlanLaunch(t, target, resume);
  t.plan.finalist_of = q.finalist_of;
  t.ranks.resize(t.plan.ranks.size());

  TrialRecord rec = RecordOf(t, std::move(where_ranks));
  Write(resume ? Row(ResumeTrialRow{t.number, rec.placement}) : Row(InsertTrialRow{rec}));
  std::string where = resume ? StrCat("to ", study::ResourceName(spec_.pruner.resource), " ",
                                      FormatShort(target, 6), " on ", options_.host)
                             : "on " + options_.host;
  Write(EventRow{
      {Wall(), t.number,
       storage::EventKindName(resume ? EventKind::kTrialResumed : EventKind::kTrialStarted),
       where}});
  if (q.finalist_of) LogFinalist(t.number, *q.finalist_of, q.extra_draw);
  int number = t.number;
  running_.emplace(number, std::move(t));
  FlushRows(number);
}

// The stored row of a trial begun now, running where `where` says (nowhere: never launched).
TrialRecord StudyController::Impl::RecordOf(const Trial& t,
                                            std::vector<storage::RankRecord> where) const {
  TrialRecord rec;
  rec.study_id = options_.study_id;
  rec.number = t.number;
  rec.state = TrialState::kRunning;
  rec.params = t.config;
  rec.started = Wall();
  rec.host = options_.host;
  rec.attempt = t.attempt;
  rec.retry_of = t.retry_of;
  if (!t.plan.ranks.empty()) rec.log_path = t.plan.ranks[0].log_path;
  rec.placement = std::move(where);
  return rec;
}

// The gang: one process per rank, with torchrun's variables when the trial asked for GPUs.
LaunchPlan StudyController::Impl::PlanLaunch(const Trial& t, double target, bool resume) const {
  LaunchPlan p;
  p.trial = t.number;
  p.root = t.root;
  p.attempt = t.attempt;
  p.resume = resume;
  p.config = t.config;
  p.placement = t.plan.placement;
  p.trial_dir = TrialDir(t.number);
  p.checkpoint_dir = TrialDir(t.root) + "/checkpoint";
  p.params_file = p.trial_dir + "/params.json";
  p.params_json = ConfigToJson(t.config, &spec_.space);
  p.workdir = spec_.trial.workdir;
  std::map<std::string, std::string> builtins = {{"trial", std::to_string(t.number)},
                                                 {"study", spec_.name},
                                                 {"params_file", p.params_file},
                                                 {"trial_dir", p.trial_dir}};
  p.command = study::RenderTemplate(spec_.trial.command, t.config, builtins);
  if (!spec_.trial.metrics_path.empty())
    p.metrics_path = study::RenderTemplate(spec_.trial.metrics_path, t.config, builtins);
  for (const ParamSpec& param : spec_.space.params())
    p.clear_env.push_back(study::ParamEnvName(param.name));
  for (const char* v :
       {env::kRank, env::kWorldSize, env::kLocalRank, env::kLocalWorldSize, env::kMasterAddr,
        env::kMasterPort, env::kResume, env::kStopAt, env::kControlFd})
    p.clear_env.push_back(v);
  auto common = TrialEnv(t, p, target, resume);
  for (const auto& [name, value] : spec_.trial.env)
    common.emplace_back(name, study::RenderTemplate(value, t.config, builtins));

  const int world = static_cast<int>(p.placement.ranks.size());
  p.needs_master_port = world > 0 && !p.placement.ranks[0].gpus.empty();
  p.control = t.control;
  for (int r = 0; r < std::max(1, world); ++r) p.ranks.push_back(PlanRank(t, p, r, common));
  if (spec_.trial.warm && p.ranks.size() == 1)
    if (auto argv = warm::TrainerArgv(p.command)) p.warm_argv = std::move(*argv);
  return p;
}

// Rank r of the gang: torchrun's variables when the trial asked for GPUs, its own devices, its
// CPU slots, its log.
RankPlan StudyController::Impl::PlanRank(
    const Trial& t, const LaunchPlan& p, int r,
    const std::vector<std::pair<std::string, std::string>>& common) const {
  const auto& ranks = p.placement.ranks;
  const int world = static_cast<int>(ranks.size());
  const bool gang = p.needs_master_port;
  RankPlan rank;
  rank.node = r < world ? ranks[r].node : 0;
  rank.env = common;
  if (gang) {
    // LOCAL_RANK and LOCAL_WORLD_SIZE count the gang's ranks on each node.
    int local = 0, on_node = 0;
    for (int i = 0; i < world; ++i) {
      if (ranks[i].node != rank.node) continue;
      if (i < r) ++local;
      ++on_node;
    }
    rank.env.emplace_back(env::kRank, std::to_string(r));
    rank.env.emplace_back(env::kLocalRank, std::to_string(local));
    rank.env.emplace_back(env::kWorldSize, std::to_string(world));
    rank.env.emplace_back(env::kLocalWorldSize, std::to_string(on_node));
    rank.env.emplace_back(env::kMasterAddr, nodes_[ranks[0].node].address);
  }
  bool any_gpus = false;
  for (const ClusterNode& n : nodes_) any_gpus = any_gpus || !n.gpu_names.empty();
  if (gang || any_gpus) {
    // A trial sees its own GPUs only (none when it asked for none).
    std::vector<std::string> ids;
    if (r < world)
      for (int g : ranks[r].gpus) ids.push_back(nodes_[rank.node].gpu_names[g]);
    rank.env.emplace_back(env::kCudaVisibleDevices, Join(ids, ","));
  }
  if (r < world && ranks[r].cpus > 0)
    rank.env.emplace_back(env::kCpus, std::to_string(ranks[r].cpus));
  rank.log_path = r == 0 ? p.trial_dir + "/output.log" : StrCat(p.trial_dir, "/rank-", r, ".log");
  rank.lock_path = StrCat(TrialDir(t.root), "/rank-", r, ".lock");
  rank.log_header = StrCat("# hyperpack trial ", t.number, " (attempt ", t.attempt, ")",
                           gang ? StrCat(", rank ", r, " of ", world) : std::string(),
                           "\n# command: ", p.command, "\n");
  return rank;
}

// What every rank of a trial is told.
std::vector<std::pair<std::string, std::string>> StudyController::Impl::TrialEnv(
    const Trial& t, const LaunchPlan& p, double target, bool resume) const {
  std::vector<std::pair<std::string, std::string>> e = {
      // Python buffers a pipe's output until exit, which would hold back every metric line.
      {env::kPythonUnbuffered, "1"},
      {env::kStudy, spec_.name},
      {env::kTrialId, std::to_string(t.number)},
      {env::kAttempt, std::to_string(t.attempt)},
      {env::kTrialDir, p.trial_dir},
      {env::kParams, p.params_json},
      {env::kParamsFile, p.params_file},
      // Every attempt of a trial shares the first one's checkpoints, and a re-run resumes there.
      {env::kCheckpointDir, p.checkpoint_dir},
  };
  if (t.attempt > 1 || resume) e.emplace_back(env::kResume, "1");
  // In promote mode a trial trains to its rung, checkpoints and exits (hyperpack-trainer reads
  // this; a command that does not is stopped when it reports the rung), or waits there to be told
  // to go on.
  if (StopsAt(target)) e.emplace_back(env::kStopAt, FormatShort(target, 12));
  if (t.control) e.emplace_back(env::kControlFd, std::to_string(env::kControlFdNumber));
  for (const auto& [name, value] : t.config)
    e.emplace_back(study::ParamEnvName(name), FormatValue(value));
  return e;
}

void StudyController::Impl::On(const TrialPersisted& e) {
  auto it = running_.find(e.trial);
  if (it == running_.end()) return;
  Trial& t = it->second;
  // Stopped (Ctrl-C, a storage error) while its row was being written: it never runs.
  if (t.interrupted) return NeverRan(t, "interrupted before it started");
  if (!e.status.ok()) {
    t.interrupted = true;
    return NeverRan(t, e.status.message());
  }
  for (Rank& r : t.ranks) r.launched = true;
  out_.push_back(LaunchCmd{t.plan});
  std::string where;
  const auto& ranks = t.plan.placement.ranks;
  if (!ranks.empty() && !ranks[0].gpus.empty()) {
    std::vector<std::string> ids;
    for (const auto& r : ranks)
      for (int g : r.gpus) ids.push_back(nodes_[r.node].gpu_names[g]);
    where = StrCat("  [", t.ranks.size(), " rank(s), GPUs ", Join(ids, ","), "]");
  }
  Tell(t.number, t.resumed_to ? StrCat("resumed from its checkpoint to ",
                                       study::ResourceName(spec_.pruner.resource), " ",
                                       FormatShort(*t.resumed_to, 6), where)
                              : StrCat("started  ", ParamsLine(t.config, spec_.space), where));
  if (spec_.trial.timeout_s) {
    t.deadline = now_ + *spec_.trial.timeout_s;
    Wake(*t.deadline);
  }
}

// A trial that cannot run on this cluster at all: recorded as infeasible without a process.
void StudyController::Impl::NeverRuns(Queued q, const std::string& why) {
  Trial t;
  t.number = next_number_++;
  t.config = std::move(q.config);
  t.attempt = q.attempt;
  t.retry_of = q.retry_of;
  t.root = q.root.value_or(t.number);
  t.started = now_;
  t.ranks.resize(1);
  t.ranks[0].exited = true;
  t.ranks[0].exit = RankExit::Exited(3);
  t.ranks[0].err_tail = why;
  Write(InsertTrialRow{RecordOf(t, {})});
  int number = t.number;
  running_.emplace(number, std::move(t));
  Complete(number);
}

// None of its ranks was started.
void StudyController::Impl::NeverRan(Trial& t, const std::string& why) {
  for (Rank& r : t.ranks) {
    r.exited = true;
    r.exit = RankExit::NeverStarted();
  }
  t.ranks[t.failed_rank >= 0 ? t.failed_rank : 0].err_tail = why;
  Complete(t.number);
}

void StudyController::Impl::On(const TrialRunning& e) {
  if (running_.find(e.trial) == running_.end()) return;
  const std::string text =
      StrCat("running on ", e.where, " after ", FormatDuration(e.queued_s), " in the queue");
  Write(EventRow{{Wall(), e.trial, storage::EventKindName(EventKind::kTrialRunning), text}});
  Tell(e.trial, text);
}

void StudyController::Impl::On(const RankExited& e) {
  auto it = running_.find(e.trial);
  if (it == running_.end() || e.rank < 0 || e.rank >= static_cast<int>(it->second.ranks.size()))
    return;
  Trial& t = it->second;
  Rank& r = t.ranks[e.rank];
  if (r.exited) return;
  r.exited = true;
  r.exit = e.exit;
  r.err_tail =
      e.exit.kind == RankExit::Kind::kLost && e.err_tail.empty() ? "its node was lost" : e.err_tail;
  if (!e.exit.ok() && t.failed_rank < 0 && !t.AllExited()) {
    // One rank failed: the gang cannot finish without it.
    t.failed_rank = e.rank;
    Terminate(t);
  }
  if (t.AllExited()) Complete(t.number);
}

// SIGTERM to every rank still running, SIGKILL after the grace period.
void StudyController::Impl::Terminate(Trial& t) {
  bool any = false;
  for (size_t r = 0; r < t.ranks.size(); ++r) {
    if (!t.ranks[r].launched || t.ranks[r].exited) continue;
    out_.push_back(SignalCmd{t.number, static_cast<int>(r), SignalKind::kTerminate});
    any = true;
  }
  if (!any) return;
  t.kill_at = now_ + options_.kill_grace_s;
  Wake(*t.kill_at);
}

void StudyController::Impl::KillAll() {
  for (auto& [n, t] : running_)
    for (size_t r = 0; r < t.ranks.size(); ++r)
      if (t.ranks[r].launched && !t.ranks[r].exited)
        out_.push_back(SignalCmd{n, static_cast<int>(r), SignalKind::kKill});
}

// ---- Ended ------------------------------------------------------------------------------------

void StudyController::Impl::Complete(int number) {
  auto it = running_.find(number);
  Trial t = std::move(it->second);
  running_.erase(it);
  if (t.job) scheduler_.Finish(t.job);
  const double elapsed = now_ - t.started;
  // Promoted in place, but it ended at its rung without another report (a command that exits at
  // HYPERPACK_STOP_AT without reading its control socket, or one the driver could not tell): as
  // for any pausing trial, the decision stands however it ended. It is paused there and already
  // promoted, so it goes back to the queue to resume from its checkpoint.
  if (t.continued_to && !t.pruned) {
    t.pausing = true;
    t.decided = now_;
    promoted_early_[t.root] = *t.continued_to;
    announced_early_.insert(t.root);
    --summary_.promoted_in_place;
  }
  Ending e = Classify(t);
  out_.push_back(CloseLogsCmd{
      t.number, StrCat("# trial ", t.number, " ", storage::TrialStateName(e.record.state), " (",
                       e.how, ") after ", FormatDuration(elapsed), "\n")});
  if (e.record.state == TrialState::kCompleted) {
    durations_.push_back(elapsed);
    final_resources_.push_back(t.resource);
  }
  // Its run is paid for: the root's cost holds it from now on.
  roots_[t.root].spent += elapsed * t.units;
  (t.on_gpus ? gpu_seconds_ : cpu_seconds_) += elapsed * t.budget_units;
  t.started = now_;
  const TrialRecord& rec = e.record;
  Write(FinishTrialRow{rec});
  Write(EventRow{
      {*rec.ended, rec.number,
       storage::EventKindName(rec.state == TrialState::kPaused ? EventKind::kTrialPaused
                                                               : EventKind::kTrialFinished),
       StrCat(storage::TrialStateName(rec.state), rec.value ? " " + FormatDouble(*rec.value) : "",
              e.stopped_after.empty() ? "" : "; " + e.stopped_after)}});
  Account(t, e, elapsed);
  // Another pass: a slot is free (and a trial that could not even start completes inside Fill).
  ++refills_;
}

// The deciding rank's end, as stored (exit status) and told ("rank 1: exit 2"); its exit code,
// or -1 when it has none.
int StudyController::Impl::DescribeExit(const Trial& t, Ending* e) const {
  const Rank& d = t.Deciding();
  const int index = t.failed_rank >= 0 ? t.failed_rank : 0;
  const std::string which = t.ranks.size() > 1 ? StrCat("rank ", index, ": ") : "";
  switch (d.exit.kind) {
    case RankExit::Kind::kExited:
    case RankExit::Kind::kNeverStarted:
      e->record.exit_status = d.exit.code;
      e->how = d.exit.kind == RankExit::Kind::kNeverStarted && t.job
                   ? "never started"
                   : StrCat(which, "exit ", d.exit.code);
      return d.exit.code;
    case RankExit::Kind::kSignaled:
      e->record.exit_status = 128 + d.exit.code;
      e->how = StrCat(which, "killed by signal ", d.exit.code, " (", strsignal(d.exit.code), ")");
      return -1;
    case RankExit::Kind::kLost:
      e->how = StrCat(which, "node lost");
      return -1;
    case RankExit::Kind::kTimedOut:
      e->how = StrCat(which, "the cluster's time limit");
      return -1;
    case RankExit::Kind::kPreempted:
      e->how = StrCat(which, "preempted");
      return -1;
    case RankExit::Kind::kRefused:
      e->how = StrCat(which, "the cluster cannot run it");
      return -1;
  }
  return -1;
}

// A preempted trial is requeued like one whose node was lost: it resumes from its checkpoint.
void StudyController::Impl::Requeued(const Trial& t, RankExit::Kind kind, Ending* e) const {
  const bool again = t.attempt < spec_.budget.max_attempts;
  const char* what = kind == RankExit::Kind::kLost ? "node lost" : "preempted";
  e->record.state = again ? TrialState::kNodeLost : TrialState::kFailed;
  e->record.error = again ? StrCat(what, "; it runs again (attempt ", t.attempt + 1, " of ",
                                   spec_.budget.max_attempts, ")")
                          : StrCat(what, " on each of its ", t.attempt, " attempts");
  e->how = what;
}

// How the trial ended, from its deciding rank and what the controller did to it.
namespace {
// The values storage keeps: the finite ones.
std::map<std::string, double> FiniteOnly(const std::map<std::string, double>& values) {
  std::map<std::string, double> out;
  for (const auto& [name, v] : values)
    if (std::isfinite(v)) out[name] = v;
  return out;
}
}  // namespace

StudyController::Impl::Ending StudyController::Impl::Classify(const Trial& t) const {
  const std::map<std::string, double> values = ValuesWithCost(t);
  Ending e;
  TrialRecord& rec = e.record;
  rec.study_id = options_.study_id;
  rec.number = t.number;
  rec.ended = Wall();
  const Rank& d = t.Deciding();
  const int code = DescribeExit(t, &e);
  const std::string tail = LastLines(d.err_tail, 20);
  // A pruner's decision stands whatever happened after it (the signal it sent, a lost node).
  if (t.pausing || t.pruned) {
    e.stopped_after = StrCat("stopped ", FormatShort(1000 * (now_ - t.decided), 3),
                             " ms after the deciding report");
    e.how = t.pausing ? "paused" : "pruned";
    rec.state = t.pausing ? TrialState::kPaused : TrialState::kPruned;
    rec.error = t.prune_reason;
  } else if ((d.exit.kind == RankExit::Kind::kLost || d.exit.kind == RankExit::Kind::kPreempted) &&
             !t.interrupted) {
    Requeued(t, d.exit.kind, &e);
  } else if (t.cancelled && !(code == 0 && t.objective)) {
    rec.state = TrialState::kCancelled;
    rec.error = "cancelled (hyperpack cancel)";
  } else if (t.interrupted) {
    rec.state = TrialState::kInterrupted;
    rec.error = "interrupted (Ctrl-C or SIGTERM); it runs again when the study is resumed";
  } else if ((t.yielded || t.held) && !(code == 0 && t.objective)) {
    rec.state = TrialState::kInterrupted;
    rec.error = t.held
                    ? "paused (hyperpack pause); it runs again on resume"
                    : "preempted: another study on this server was owed its share; it runs again";
  } else if (t.timed_out) {
    rec.state = TrialState::kTimeout;
    rec.error = StrCat("killed after the timeout of ", FormatDuration(*spec_.trial.timeout_s));
  } else if (d.exit.kind == RankExit::Kind::kTimedOut) {
    rec.state = TrialState::kTimeout;
    rec.error = tail.empty() ? "ended by the cluster's time limit" : tail;
  } else if (d.exit.kind == RankExit::Kind::kRefused) {
    rec.state = TrialState::kInfeasible;
    rec.error = tail.empty() ? e.how : tail;
  } else if (code == 0 && t.objective && std::isfinite(*t.objective) && !MissingObjective(values)) {
    rec.state = TrialState::kCompleted;
    rec.value = t.objective;
  } else if (code == 0) {
    rec.state = TrialState::kFailed;
    rec.error = NoObjectiveError(t, values);
  } else if (RanOutSharing(t, code, tail)) {
    RunsAgainAlone(t, &e);
  } else if (code == 3) {
    rec.state = TrialState::kInfeasible;
    rec.error = tail.empty() ? "exit 3: this configuration cannot run" : tail;
  } else {
    rec.state = TrialState::kFailed;
    rec.error = tail.empty() ? e.how : StrCat(e.how, ": ", tail);
  }
  if (t.objective && rec.state != TrialState::kCompleted && std::isfinite(*t.objective))
    rec.value = t.objective;
  if (spec_.KeepsValues()) rec.values = FiniteOnly(values);
  return e;
}

// Why a trial that exited 0 is not completed: an objective it never reported, or one that is not
// finite (the first objective's first).
std::string StudyController::Impl::NoObjectiveError(
    const Trial& t, const std::map<std::string, double>& values) const {
  const std::string& metric = spec_.objective.metric;
  const study::Objective* missing = MissingObjective(values);
  const std::string& name =
      t.objective && std::isfinite(*t.objective) && missing ? missing->metric : metric;
  auto it = values.find(name);
  if (it == values.end() && !(name == metric && t.objective))
    return StrCat("exited 0 but never reported '", name, "'; print a line such as {\"", name,
                  "\": 0.9}");
  return StrCat("the objective ", name, " is ",
                FormatDouble(name == metric ? *t.objective : it->second));
}

std::map<std::string, double> StudyController::Impl::ValuesWithCost(const Trial& t) const {
  std::map<std::string, double> values = t.values;
  if (KeepsCost() && !values.count(study::kCostMetric)) values[study::kCostMetric] = CostSoFar(t);
  return values;
}

const study::Objective* StudyController::Impl::MissingObjective(
    const std::map<std::string, double>& values) const {
  for (size_t k = 1; k < spec_.objectives.size(); ++k) {
    auto it = values.find(spec_.objectives[k].metric);
    if (it == values.end() || !std::isfinite(it->second)) return &spec_.objectives[k];
  }
  return nullptr;
}

// A finished trial's values for its line: the objective's, or each objective's and constraint's,
// a constraint it breaks marked.
std::string StudyController::Impl::ValuesText(const TrialRecord& rec) const {
  if (!spec_.KeepsValues()) return StrCat(spec_.objective.metric, "=", FormatShort(*rec.value, 6));
  std::vector<std::string> parts;
  for (const study::Objective& o : spec_.objectives) {
    auto it = rec.values.find(o.metric);
    parts.push_back(
        StrCat(o.metric, "=", it == rec.values.end() ? "?" : FormatShort(it->second, 6)));
  }
  for (const study::Constraint& c : spec_.constraints) {
    auto it = rec.values.find(c.metric);
    const bool holds = it != rec.values.end() && c.Violation(it->second) <= 0;
    if (std::none_of(spec_.objectives.begin(), spec_.objectives.end(),
                     [&](const study::Objective& o) { return o.metric == c.metric; }))
      parts.push_back(
          StrCat(c.metric, "=", it == rec.values.end() ? "?" : FormatShort(it->second, 6)));
    if (!holds)
      parts.push_back(StrCat("(breaks ", c.metric,
                             c.bound == study::Constraint::Bound::kMax ? " <= " : " >= ",
                             FormatShort(c.limit, 6), ")"));
  }
  return Join(parts, "  ");
}

void StudyController::Impl::RunsAgainAlone(const Trial& t, Ending* e) const {
  e->record.state = TrialState::kFailed;
  e->record.error = StrCat("out of GPU memory on a shared GPU (it held ",
                           ShareText(t.plan.placement.ranks[0].share), "); it runs again alone");
  e->alone = true;
}

bool StudyController::Impl::RanOutSharing(const Trial& t, int code, const std::string& tail) const {
  const auto& ranks = t.plan.placement.ranks;
  if (ranks.empty() || !ranks[0].share.any() || code == 0) return false;
  std::string lower = tail;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return code == 3 || lower.find("out of memory") != std::string::npos ||
         lower.find("outofmemoryerror") != std::string::npos;
}

// Learn, count, tell.
void StudyController::Impl::Account(const Trial& t, const Ending& e, double elapsed) {
  const TrialRecord& rec = e.record;
  std::string line;
  if (e.alone) {
    // The packer's doing, not the trial's: it runs again whatever max_attempts says.
    Queued again{t.config, t.attempt + 1, t.number, t.root, std::nullopt};
    again.alone = true;
    retries_.push_back(std::move(again));
    line = "out of GPU memory on a shared GPU; requeued to run on a GPU of its own";
  } else if (rec.state == TrialState::kInterrupted && (t.yielded || t.held) && !t.interrupted) {
    // Not its own doing: it runs again whatever max_attempts says.
    if (!t.held) ++summary_.preempted;
    retries_.push_back({t.config, t.attempt + 1, t.number, t.root, std::nullopt});
    line = t.held ? "paused by request; it runs again on resume"
                  : "preempted for another study's share; requeued";
  } else if (rec.state == TrialState::kInterrupted) {
    ++summary_.interrupted;
    retries_.push_back({t.config, t.attempt + 1, t.number, t.root, std::nullopt});
    line = "interrupted";
  } else if (rec.state == TrialState::kNodeLost) {
    // Requeued at once, ahead of new proposals, to resume from its checkpoints.
    retries_.push_back({t.config, t.attempt + 1, t.number, t.root, std::nullopt});
    line = "lost with its node; requeued";
  } else if (rec.state == TrialState::kPaused) {
    line = StrCat("paused at ", study::ResourceName(spec_.pruner.resource), " ",
                  FormatShort(t.resource, 6), "  ", spec_.objective.metric, "=",
                  rec.value ? FormatShort(*rec.value, 6) : "?", "  (", e.stopped_after, ")");
    PausedFor(t.root, {t.number, t.config, t.attempt, t.retry_of, t.root, t.resource, rec.value,
                       t.values, t.recent});
  } else {
    line = LearnFinished(t, e);
  }
  Tell(t.number, StrCat(line, "  [", FormatDuration(elapsed), "]"));
  if (failed_this_run_ >= spec_.budget.max_failed && StopLaunching(StopReason::kTooManyFailed)) {
    summary_.exit_code = 1;
    Say(StrCat("stopping: ", failed_this_run_, " trials failed in this run (budget.max_failed = ",
               spec_.budget.max_failed, "); see the logs under ", options_.log_root));
  }
}

// A trial that ended for good: the pruner and the tuner learn it, and it is counted.
std::string StudyController::Impl::LearnFinished(const Trial& t, const Ending& e) {
  const TrialRecord& rec = e.record;
  const std::string& metric = spec_.objective.metric;
  ++finished_;
  const bool finalist = IsFinalist(t.root);
  if (!finalist) {
    pruner_->End(t.root, rec.state == TrialState::kCompleted);
    Journal(storage::JournalKind::kEnd, t.root, 0, 0, rec.state == TrialState::kCompleted);
  }
  tuner::TrialOutcome o;
  o.config = t.config;
  o.value = rec.value;
  study::FillOutcomeValues(spec_, rec.values, &o);
  o.cost = CostPerUnit(t);
  bool learn = true;
  std::string line;
  switch (rec.state) {
    case TrialState::kPruned:
      o.kind = tuner::TrialOutcome::Kind::kPruned;
      o.resource = t.resource;
      // Its value at the rung that stopped it is learnt already.
      learn = !t.rung_observed && rec.value.has_value();
      ++summary_.pruned;
      line = StrCat("pruned at ", study::ResourceName(spec_.pruner.resource), " ",
                    FormatShort(t.resource, 6), "  ", metric, "=",
                    rec.value ? FormatShort(*rec.value, 6) : "?", "  (", e.stopped_after, ")");
      break;
    case TrialState::kCompleted: {
      o.kind = tuner::TrialOutcome::Kind::kCompleted;
      ++summary_.completed;
      const bool is_best = IsBestCandidate(rec.values) &&
                           NoteCompleted(t.number, t.config, *rec.value, finalist,
                                         RunCost{roots_[t.root].spent / std::max(1, t.units),
                                                 t.budget_units, t.on_gpus});
      line = StrCat("completed  ", ValuesText(rec), BestNote(is_best));
      break;
    }
    case TrialState::kInfeasible:
      o.kind = tuner::TrialOutcome::Kind::kInfeasible;
      ++summary_.infeasible;
      line = "infeasible (exit 3)";
      break;
    case TrialState::kCancelled:
      learn = false;  // nothing about the configuration is known
      line = "cancelled";
      break;
    default:
      o.kind = tuner::TrialOutcome::Kind::kFailed;
      ++summary_.failed;
      ++failed_this_run_;
      line =
          StrCat(storage::TrialStateName(rec.state), " (", e.how, "): ", LastLines(rec.error, 1));
      break;
  }
  if (learn) Observe(std::move(o));
  return line;
}

}  // namespace hyperpack::scheduler
