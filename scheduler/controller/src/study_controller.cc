// Events in, scheduling (budget, proposals, placement) and how a run ends. A trial's own life is in
// controller_trials.cc; reports, the pruner and the replay in controller_pruning.cc; a server's
// fair share in controller_share.cc.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "controller_impl.h"
#include "hyperpack/text.h"
#include "hyperpack/tuner/encoding.h"

namespace hyperpack::scheduler {

using storage::EventKind;

tuner::TunerOptions TunerOptionsFor(const study::StudySpec& spec, uint64_t seed) {
  tuner::TunerOptions o;
  o.algorithm = spec.tuner.algorithm;
  o.seed = seed;
  o.maximize = spec.objective.direction == study::Direction::kMaximize;
  if (spec.MultiObjective())
    for (const study::Objective& objective : spec.objectives)
      o.objectives.push_back(objective.direction == study::Direction::kMaximize);
  o.constraints = static_cast<int>(spec.constraints.size());
  o.initial_trials = spec.tuner.initial_trials;
  // A pruner stops a poor draw at its first rung: exploring by draws costs little.
  o.random_fraction = spec.tuner.random_fraction.value_or(
      spec.pruner.algorithm == tuner::PrunerAlgorithm::kNone ? 0.0 : study::kPrunedRandomFraction);
  // Most trials stop at a low rung: the model waits for final values.
  o.initial_full_trials = spec.tuner.initial_full_trials.value_or(
      spec.pruner.algorithm == tuner::PrunerAlgorithm::kNone
          ? 0
          : study::kPrunedInitialFullPerDim * tuner::Encoder(spec.space).dims());
  o.acquisition = spec.tuner.acquisition;
  // A declared resource is a statement that trials differ in what they hold: weigh it.
  const bool resources = spec.resources.gpus || spec.resources.cpus || spec.resources.gpu_memory;
  o.cost_aware = spec.tuner.cost_aware.value_or(resources);
  // The queue orders by predicted run time.
  o.predict_costs = QueueOptionsFor(spec).order == Order::kShortestFirst;
  return o;
}

QueueOptions QueueOptionsFor(const study::StudySpec& spec) {
  QueueOptions q;
  // Declared resources make trials' run times differ, and the tuner predicts them.
  const bool resources = spec.resources.gpus || spec.resources.cpus || spec.resources.gpu_memory;
  q.order = spec.queue.order.value_or(resources ? Order::kShortestFirst : Order::kArrival);
  q.aging = spec.queue.aging;
  // The starvation guard: on the tuning workload 6x the typical run time keeps the longest trials'
  // p99 wait under 1.8x FIFO's and at least 25% of mean completion time off it, at every level of
  // prediction error measured (docs/BENCHMARKS.md).
  constexpr double kGuardFactor = 6;
  if (spec.queue.max_wait_s) {
    q.max_wait = *spec.queue.max_wait_s;
  } else {
    q.max_wait_factor = kGuardFactor;
  }
  // A trial that would end after all the work in hand even if it started now goes first: on the
  // tuning workload this brings the makespan within 1.01 of its bound at the cost model's error,
  // for 1 point of mean completion time (docs/BENCHMARKS.md).
  q.critical_first = true;
  return q;
}

tuner::PrunerOptions PrunerOptionsFor(const study::StudySpec& spec) {
  tuner::PrunerOptions o;
  o.algorithm = spec.pruner.algorithm;
  o.min_resource = spec.pruner.min_resource;
  o.max_resource = spec.pruner.max_resource;
  o.reduction_factor = spec.pruner.reduction_factor;
  o.mode = spec.pruner.mode;
  o.warmup_steps = spec.pruner.warmup_steps;
  o.startup_trials = spec.pruner.startup_trials;
  o.probability = spec.pruner.probability;
  o.maximize = spec.objective.direction == study::Direction::kMaximize;
  if (spec.MultiObjective())
    for (const study::Objective& objective : spec.objectives)
      o.objectives.push_back(objective.direction == study::Direction::kMaximize);
  return o;
}

// ---- The public face --------------------------------------------------------------------------

Result<std::unique_ptr<StudyController>> StudyController::Make(const study::StudySpec& spec,
                                                               ControllerOptions options) {
  HP_ASSIGN_OR_RETURN(std::unique_ptr<tuner::Pruner> pruner,
                      tuner::MakePruner(PrunerOptionsFor(spec)));
  auto impl = std::make_unique<Impl>(spec, std::move(options), std::move(pruner));
  return std::unique_ptr<StudyController>(new StudyController(std::move(impl)));
}

StudyController::StudyController(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StudyController::~StudyController() = default;

Result<std::vector<Command>> StudyController::Restore(const StoredStudy& stored) {
  return impl_->Restore(stored);
}
std::vector<Command> StudyController::Start(double now) { return impl_->Start(now); }
std::vector<Command> StudyController::Handle(const Event& event) { return impl_->Handle(event); }
std::string StudyController::StatusLine() const { return impl_->StatusLine(); }
bool StudyController::pauses() const { return impl_->pauses(); }
bool StudyController::done() const { return impl_->done(); }
ControllerState StudyController::State() const { return impl_->State(); }
Occupancy StudyController::occupancy() const { return impl_->occupancy(); }
ShareClaim StudyController::Claim() const { return impl_->Claim(); }
double StudyController::priority() const { return impl_->priority(); }

// ---- Events in ----------------------------------------------------------------------------------

namespace {
std::vector<Node> NodesOf(const std::vector<ClusterNode>& nodes) {
  std::vector<Node> out;
  for (const ClusterNode& n : nodes) out.push_back(n.node);
  return out;
}
}  // namespace

StudyController::Impl::Impl(const study::StudySpec& spec, ControllerOptions options,
                            std::unique_ptr<tuner::Pruner> pruner)
    : spec_(spec),
      options_(std::move(options)),
      pruner_(std::move(pruner)),
      ladder_(pruner_->Rungs()),
      cluster_(NodesOf(options_.nodes)),
      scheduler_(&cluster_, Policy::kBestFit, QueueOptionsFor(spec)),
      nodes_(options_.nodes) {
  // A node that holds nothing is up in name only (a server passes the agents it lost that way).
  for (const ClusterNode& n : nodes_) lost_.push_back(n.node.gpus == 0 && n.node.cpus == 0);
  summary_.study = spec_.name;
  summary_.max_trials = options_.max_trials;
}

Result<std::vector<Command>> StudyController::Impl::Restore(const StoredStudy& stored) {
  out_.clear();
  HP_RETURN_IF_ERROR(Replay(stored));
  start_controls_ = stored.controls;
  FlushRows();
  return std::move(out_);
}

std::vector<Command> StudyController::Impl::Start(double now) {
  now_ = now;
  out_.clear();
  run_.Start();
  Say(StartLine());
  if (spec_.budget.time_limit_s) Wake(*spec_.budget.time_limit_s);
  WakeForFinalists();
  if (options_.share) On(ShareChanged{*options_.share});
  for (const storage::ControlRecord& c : start_controls_) On(ControlArrived{c});
  start_controls_.clear();
  ++refills_;
  Settle();
  FlushRows();
  return std::move(out_);
}

std::vector<Command> StudyController::Impl::Handle(const Event& event) {
  out_.clear();
  if (run_.done()) return {};
  now_ = std::max(now_, event.now);
  CheckDeadlines();
  std::visit([this](const auto& payload) { On(payload); }, event.what);
  Settle();
  FlushRows();
  return std::move(out_);
}

void StudyController::Impl::On(const ProposalsReady& e) {
  asked_ = 0;
  if (run_.stopped()) return;
  if (!e.configs.ok()) {
    StopLaunching(StopReason::kTunerError);
    Say("tuner error: " + e.configs.status().message());
    summary_.exit_code = 1;
    return;
  }
  if (e.configs->empty() && running_.empty() && retries_.empty() && waiting_.empty()) {
    // Every configuration has been tried: the finalists train the best again, if there are any.
    if (FinalistsLeft() > 0 && !RerunsRepeat() && !proposals_exhausted_) {
      proposals_exhausted_ = true;
      if (CanPlaceMore()) {
        ++refills_;
        return;
      }
    }
    StopLaunching(StopReason::kSearchSpaceExhausted);
    Say("every configuration of the search space has been tried");
    return;
  }
  // Slots may have been taken by re-runs (or finalists) meanwhile; extra proposals are dropped.
  int free = ProposalRoom(Free());
  for (size_t i = 0; i < e.configs->size(); ++i) {
    if (free-- <= 0) break;
    Enqueue({(*e.configs)[i], 1, std::nullopt, std::nullopt, std::nullopt},
            i < e.costs.size() ? e.costs[i] : std::nullopt);
  }
  ++refills_;
}

void StudyController::Impl::On(const NodeJoined& e) {
  cluster_.AddNode(e.node.node);
  nodes_.push_back(e.node);
  // Shared with other studies: what the server's share already says of this node holds at once.
  if (const size_t n = nodes_.size() - 1; share_ && n < share_->withheld.size())
    cluster_.Withhold(static_cast<int>(n), share_->withheld[n].gpus, share_->withheld[n].cpus);
  lost_.push_back(e.node.node.gpus == 0 && e.node.node.cpus == 0);
  if (run_.NodesBack()) Say(StrCat("node ", e.node.node.name, " joined: placing trials"));
  ++refills_;
}

// Nothing more is placed there; its ranks are reported lost by the driver.
void StudyController::Impl::On(const NodeLost& e) {
  if (e.node < 0 || e.node >= static_cast<int>(nodes_.size()) || lost_[e.node]) return;
  lost_[e.node] = true;
  cluster_.RemoveNode(e.node);
}

// The first: running trials are stopped (and run again when the study resumes). The second: what
// is left is killed at once.
void StudyController::Impl::On(const Interrupt& e) {
  if (interrupts_++ > 0) return KillAll();
  StopLaunching(StopReason::kInterrupted);
  summary_.exit_code = 130;
  Say(StrCat("\n", e.ctrl_c ? "Ctrl-C" : "SIGTERM", ": stopping ", running_.size(),
             " running trials (again to kill them at once); resume with the same command"));
  for (auto& [n, t] : running_) {
    t.interrupted = true;
    Terminate(t);
  }
}

void StudyController::Impl::On(const StorageFailed& e) {
  if (storage_error_) return;
  storage_error_ = e.status;
  Say("storage error: " + e.status.message() + "; stopping the study");
  StopLaunching(StopReason::kStorageError);
  summary_.exit_code = 1;
  for (auto& [n, t] : running_) {
    t.interrupted = true;
    Terminate(t);
  }
}

// Trial timeouts, the SIGKILL after a SIGTERM's grace, and the study's time limit.
void StudyController::Impl::CheckDeadlines() {
  if (preempt_at_) {
    auto [over_gpus, over_slots] = OverShare();
    if (over_gpus <= 0 && over_slots <= 0) {
      preempt_at_.reset();  // its trials ended in time
    } else if (now_ + 1e-9 >= *preempt_at_) {
      preempt_at_.reset();
      YieldOverShare();
    }
  }
  if (spec_.budget.time_limit_s && now_ + 1e-9 >= *spec_.budget.time_limit_s &&
      StopLaunching(StopReason::kTimeLimit)) {
    Log(std::nullopt, EventKind::kTimeLimit,
        StrCat("time limit ", FormatDuration(*spec_.budget.time_limit_s), " reached; waiting for ",
               running_.size(), " running trials"));
  }
  for (auto& [n, t] : running_) {
    if (t.deadline && now_ + 1e-9 >= *t.deadline && !t.AllExited()) {
      t.deadline.reset();
      t.timed_out = true;
      Terminate(t);
    }
    if (t.kill_at && now_ + 1e-9 >= *t.kill_at) {
      t.kill_at.reset();
      for (size_t r = 0; r < t.ranks.size(); ++r)
        if (t.ranks[r].launched && !t.ranks[r].exited)
          out_.push_back(SignalCmd{n, static_cast<int>(r), SignalKind::kKill});
    }
  }
}

// ---- Scheduling ---------------------------------------------------------------------------------

int StudyController::Impl::Busy() const {
  return static_cast<int>(running_.size() + waiting_.size());
}

// Room for new trials. Paused trials count against the budget: they are configurations started,
// and a promotion takes no more of it.
int StudyController::Impl::Free() const {
  if (CostBudgetSpent()) return 0;
  int by_parallel = options_.max_parallel - Busy();
  int by_budget = options_.max_trials - finished_ - static_cast<int>(paused_.size()) - Busy();
  return std::max(0, std::min(by_parallel, by_budget));
}

// Whatever an event freed is filled; a trial that cannot run at all completes at once and asks
// for another pass.
void StudyController::Impl::Settle() {
  ResolveAwaiting();
  for (int passes = 0; refills_ > 0 && !run_.done() && passes < 10000; ++passes) {
    refills_ = 0;
    Fill();
  }
  if (!run_.done()) MaybeFinish();
}

// Re-runs, then promotions (ASHA's rule: they go before new trials), then new proposals, then a
// scheduling pass.
void StudyController::Impl::Fill() {
  if (!run_.placing()) return;
  // Capacity is not feasibility: with no node up, nothing is queued, proposed or judged
  // infeasible; the study waits for one to join (and says so once).
  if (LiveNodes() == 0) {
    if (run_.NoNodes()) Say(WaitingForCapacity());
    return;
  }
  int free = Free();
  while (free > 0 && !retries_.empty()) {
    Queued q = std::move(retries_.front());
    retries_.pop_front();
    Enqueue(std::move(q));
    --free;
  }
  // Once the finalists are due, what frees goes to them: no promotion, no new proposal.
  if (pruner_->pauses() && !FinalistsDue()) {
    PromoteWhatThePrunerAllows();
    free = Free();
  }
  free = ProposalRoom(QueueFinalists(free));
  // New proposals only while nothing waits for room: a proposal made now is better informed than
  // one that would sit in the queue.
  if (free > 0 && asked_ == 0 && scheduler_.waiting() == 0) {
    asked_ = free;
    ProposeCmd p{free, {}, BudgetSpent()};
    for (const auto& [n, t] : running_) p.pending.push_back(t.config);
    for (const auto& [id, q] : waiting_) p.pending.push_back(q.config);
    out_.push_back(std::move(p));
  }
  Dispatch();
}

// Promotions need a slot, not budget: trials started, not cost, which a promotion spends too.
void StudyController::Impl::PromoteWhatThePrunerAllows() {
  if (CostBudgetSpent()) return;
  for (int slots = options_.max_parallel - Busy(); slots > 0; --slots) {
    auto p = pruner_->NextPromotion();
    if (!p) break;
    ApplyPromotion(*p);
  }
}

void StudyController::Impl::ApplyPromotion(const tuner::Pruner::Promotion& p) {
  MarkPromoted(p.trial, p.target);
  ++summary_.promoted;
  auto it = paused_.find(p.trial);
  if (it == paused_.end()) {
    promoted_early_[p.trial] = p.target;  // still stopping; queued once it has
    return;
  }
  Paused paused = std::move(it->second);
  paused_.erase(it);
  Promote(paused, p.target);
}

// A trial waiting at its rung holds a slot that is free the moment it stops. ASHA's rule for a
// free slot is the best promotion first: if that is the waiting trial itself, it goes on in place
// (no process start, no data or checkpoint to load again); otherwise it stops, paused, and the
// promotion, if any, takes its slot. Decided in the event that brought the rung's report, so the
// trial waits milliseconds.
void StudyController::Impl::ResolveAwaiting() {
  for (auto& [number, t] : running_) {
    if (!t.awaiting) continue;
    t.awaiting = false;
    std::optional<tuner::Pruner::Promotion> p;
    if (!run_.stopped() && !CostBudgetSpent() && !FinalistsDue()) p = pruner_->NextPromotion();
    if (!p || p->trial != t.root) {
      Terminate(t);
      if (p) ApplyPromotion(*p);
      continue;
    }
    MarkPromoted(t.root, p->target);
    ++summary_.promoted;
    ++summary_.promoted_in_place;
    Log(t.number, EventKind::kPromoted,
        StrCat("promoted from ", study::ResourceName(spec_.pruner.resource), " ",
               FormatShort(t.resource, 6), " to ", FormatShort(p->target, 6),
               "; it goes on in place"));
    t.pausing = false;
    t.prune_reason.clear();
    t.continued_to = p->target;
    t.waits_at = p->target;
    out_.push_back(ContinueCmd{t.number, p->target});
  }
}

// gpu_memory: auto: a share is the most GPU memory a trial reported times this, plus this much
// (the CUDA context, some 500 MiB, and the caching allocator's slack are not in peak_gpu_mb).
constexpr double kAutoShareFactor = 1.2;
constexpr int64_t kAutoShareSlackMb = 1024;

// What one trial needs: resources.gpus G makes a gang of G ranks with a GPU each (launched with
// torchrun's variables); a fraction of a GPU, or resources.gpu_memory, one rank holding a share of
// one GPU; otherwise one process with resources.cpus CPU slots. Without resources a trial takes no
// slot and only max_parallel bounds it.
Result<Demand> StudyController::Impl::DemandFor(const Config& config) const {
  const study::ResourceSpec& res = spec_.resources;
  Demand d{1, 0, 0};
  auto value = [&](const Expression& e, const char* key) -> Result<double> {
    HP_ASSIGN_OR_RETURN(double v, e.Evaluate(config));
    if (!(v >= 0) || v > 1e6)
      return Status::Invalid("resources.", key, " = ", e.text(), " is ", FormatDouble(v),
                             "; expected a number >= 0");
    return v;
  };
  double gpus = 0;
  if (res.gpus) {
    HP_ASSIGN_OR_RETURN(gpus, value(*res.gpus, "gpus"));
    if (gpus > 1 && gpus != std::floor(gpus))
      return Status::Invalid("resources.gpus = ", res.gpus->text(), " is ", FormatDouble(gpus),
                             "; expected a whole number of GPUs, or a fraction below 1");
    if (gpus >= 1) d = Demand{static_cast<int>(gpus), 1, 0};
    if (gpus > 0 && gpus < 1)
      d.share.milli = std::max(1, static_cast<int>(std::lround(gpus * 1000)));
  }
  if ((res.gpu_memory || res.gpu_memory_auto) && gpus >= 1)
    return Status::Invalid("resources.gpu_memory packs trials that need less than a GPU, and ",
                           "resources.gpus is ", FormatDouble(gpus), " here (whole GPUs)");
  // auto: measured alone first; then the most any trial used, with room for the CUDA context
  // and the allocator's cache (peak_gpu_mb counts allocated memory only).
  const bool measure_alone = res.gpu_memory_auto && peak_gpu_mb_ <= 0;
  if (res.gpu_memory_auto && !measure_alone)
    d.share.memory_mb =
        static_cast<int64_t>(std::ceil(peak_gpu_mb_ * kAutoShareFactor)) + kAutoShareSlackMb;
  if (res.gpu_memory) {
    HP_ASSIGN_OR_RETURN(double m, value(*res.gpu_memory, "gpu_memory"));
    d.share.memory_mb =
        static_cast<int64_t>(std::ceil(m * res.gpu_memory_unit_mb * share_memory_factor_));
  }
  if (res.cpus) {
    HP_ASSIGN_OR_RETURN(double c, value(*res.cpus, "cpus"));
    if (c != std::floor(c))
      return Status::Invalid("resources.cpus = ", res.cpus->text(), " is ", FormatDouble(c),
                             "; expected a whole number >= 0");
    const int cpus = static_cast<int>(c);
    d.cpus_per_rank = d.gpus_per_rank > 0 ? (cpus + d.ranks - 1) / d.ranks : cpus;
  }
  if (measure_alone) return Demand{1, 1, d.cpus_per_rank};
  return d;
}

void StudyController::Impl::LearnGpuMemory(const Trial& t, double peak_mb) {
  if (!(peak_mb > 0) || !std::isfinite(peak_mb)) return;
  const study::ResourceSpec& res = spec_.resources;
  if (res.gpu_memory_auto) {
    if (peak_mb <= peak_gpu_mb_) return;
    const bool first = peak_gpu_mb_ <= 0;
    peak_gpu_mb_ = peak_mb;
    ResizeWaitingShares();
    Tell(t.number,
         StrCat("peak GPU memory ", FormatShort(peak_mb, 6), " MiB; ",
                first ? "trials now share GPUs, " : "", "each share sized ",
                static_cast<int64_t>(std::ceil(peak_mb * kAutoShareFactor)) + kAutoShareSlackMb,
                " MiB"));
    return;
  }
  if (!res.gpu_memory) return;
  auto stated = res.gpu_memory->Evaluate(t.config);
  if (!stated.ok() || !(*stated > 0)) return;
  const double stated_mb = *stated * res.gpu_memory_unit_mb;
  // A tenth more than the most seen, so that the next one like it fits.
  const double factor = 1.1 * peak_mb / stated_mb;
  if (!(factor > share_memory_factor_)) return;
  share_memory_factor_ = factor;
  ResizeWaitingShares();
  Tell(t.number, StrCat("peak GPU memory ", FormatShort(peak_mb, 6), " MiB, more than the ",
                        FormatShort(stated_mb, 6), " MiB resources.gpu_memory states; shares are ",
                        "sized ", FormatShort(factor, 3), "x from now on"));
}

// The waiting trials too, or those proposed already would be packed by the old size; a size
// past what any GPU holds takes a whole GPU.
void StudyController::Impl::ResizeWaitingShares() {
  for (const auto& [job, q] : waiting_) {
    if (q.alone) continue;
    auto d = DemandFor(q.config);
    if (d.ok() && d->shares_gpu() && !scheduler_.Resubmit(job, *d).ok())
      (void)scheduler_.Resubmit(job, Demand{1, 1, d->cpus_per_rank});
  }
}

void StudyController::Impl::Enqueue(Queued q, std::optional<tuner::CostPrediction> cost,
                                    double segment) {
  auto demand = DemandFor(q.config);
  Job job;
  job.id = ++jobs_;
  // Promotions, then re-runs, before new proposals.
  job.priority = q.promoted ? 2 : q.attempt > 1 ? 1 : 0;
  job.submit = now_;
  job.estimate = EstimateSeconds();
  // A re-run or a promotion keeps the prediction made when it was proposed.
  if (!cost && q.root) {
    auto it = roots_.find(*q.root);
    if (it != roots_.end()) cost = it->second.predicted;
  }
  // Out of memory beside others, or sized past what a GPU holds by what the packer learnt: a GPU
  // of its own.
  const bool learnt = share_memory_factor_ > 1 || spec_.resources.gpu_memory_auto;
  if (demand.ok() && demand->shares_gpu() &&
      (q.alone || (learnt && !cluster_.Satisfiable(*demand))))
    demand = Demand{1, 1, demand->cpus_per_rank};
  Status s = demand.ok() ? Status::Ok() : demand.status();
  if (demand.ok()) {
    job.demand = *demand;
    typical_demand_ = *demand;
    if (cost) {
      if (auto predicted = PredictedSeconds(q, *cost, *demand, segment)) {
        job.estimate = predicted->first;
        job.estimate_high = predicted->second;
      }
      predicted_by_job_[job.id] = *cost;
    }
    s = scheduler_.Submit(job);
  }
  // It can never run here: the tuner learns it as infeasible.
  if (!s.ok()) return NeverRuns(std::move(q), s.message());
  waiting_.emplace(job.id, std::move(q));
}

int StudyController::Impl::LiveNodes() const {
  return static_cast<int>(std::count(lost_.begin(), lost_.end(), false));
}

// Why nothing is placed: what a trial needs (when it can be told without a configuration) and
// which nodes there are.
std::string StudyController::Impl::WaitingForCapacity() const {
  std::string needs;
  Config probe = retries_.empty() ? Config{} : retries_.front().config;
  if (auto d = DemandFor(probe); d.ok()) {
    needs = d->shares_gpu() ? StrCat("needs ", ShareText(d->share), "; ")
            : d->gpus_per_rank > 0
                ? StrCat("needs ", d->total_gpus(), d->total_gpus() == 1 ? " GPU; " : " GPUs; ")
                : StrCat("needs ", std::max(1, d->cpus_per_rank), " CPU slot",
                         d->cpus_per_rank > 1 ? "s; " : "; ");
  }
  const std::string nodes =
      nodes_.empty() ? "0 agents connected"
                     : StrCat("all ", nodes_.size(), nodes_.size() == 1 ? " node" : " nodes",
                              " lost; waiting for one to join");
  return StrCat("waiting for capacity: ", needs, nodes);
}

std::optional<std::pair<double, double>> StudyController::Impl::PredictedSeconds(
    const Queued& q, const tuner::CostPrediction& cost, const Demand& demand,
    double segment) const {
  // The resource this run will train: a promotion's segment; a new trial's first rung when the
  // pruner pauses at rungs; a full trial's where one is declared; else what this run's completed
  // trials reached (the median).
  double resource = segment;
  if (resource <= 0 && !q.promoted) {
    if (pruner_->pauses() && !ladder_.empty()) {
      resource = ladder_.front();
    } else if (spec_.pruner.max_resource > 0) {
      resource = spec_.pruner.max_resource;
    } else if (!final_resources_.empty()) {
      resource = MedianOf(final_resources_);
    }
  }
  if (!(resource > 0) || !(cost.median > 0)) return std::nullopt;
  const Held held = HeldOf(demand);
  const double seconds = cost.median * std::max(1.0, resource) / held.units;
  return std::pair{seconds, seconds * std::exp(cost.log_sd)};
}

// The median duration of this run's completed trials: the scheduler's estimate for backfill.
double StudyController::Impl::EstimateSeconds() const {
  if (durations_.empty()) return spec_.trial.timeout_s.value_or(0.0);
  return MedianOf(durations_);
}

double StudyController::Impl::SpentNow(bool gpus) const {
  double spent = gpus ? gpu_seconds_ : cpu_seconds_;
  for (const auto& [n, t] : running_)
    if (t.on_gpus == gpus) spent += (now_ - t.started) * t.budget_units;
  return spent;
}

// The largest share spent of any budget the study has.
double StudyController::Impl::BudgetSpent() const {
  double share = 0;
  if (options_.max_trials > 0) {
    const int started = finished_ + static_cast<int>(paused_.size()) + Busy();
    share = static_cast<double>(started) / options_.max_trials;
  }
  const study::BudgetSpec& b = spec_.budget;
  if (b.time_limit_s && *b.time_limit_s > 0) share = std::max(share, now_ / *b.time_limit_s);
  if (b.gpu_hours) share = std::max(share, SpentNow(true) / (*b.gpu_hours * 3600));
  if (b.core_hours) share = std::max(share, SpentNow(false) / (*b.core_hours * 3600));
  return std::min(share, 1.0);
}

bool StudyController::Impl::CostBudgetSpent() const {
  const study::BudgetSpec& b = spec_.budget;
  return (b.gpu_hours && SpentNow(true) >= *b.gpu_hours * 3600) ||
         (b.core_hours && SpentNow(false) >= *b.core_hours * 3600);
}

// Per unit of resource, so that a trial stopped at its first rung and one that ran to the end are
// priced alike; a trial that reported no resource is priced whole.
double StudyController::Impl::CostSoFar(const Trial& t) const {
  auto it = roots_.find(t.root);
  const double before = it == roots_.end() ? 0.0 : it->second.spent;
  return before + (now_ - t.started) * t.units;
}

double StudyController::Impl::CostPerUnit(const Trial& t) const {
  return CostSoFar(t) / std::max(1.0, t.resource);
}

void StudyController::Impl::Dispatch() {
  if (!run_.placing()) return;
  for (auto& started : scheduler_.Schedule(now_)) {
    auto it = waiting_.find(started.job.id);
    Queued q = std::move(it->second);
    waiting_.erase(it);
    Launch(std::move(q), started.job.id, std::move(started.placement));
  }
}

// ---- How a run ends ---------------------------------------------------------------------------

bool StudyController::Impl::StopLaunching(StopReason reason) {
  if (!run_.Stop(reason)) return false;
  StoppedLaunching();
  return true;
}

void StudyController::Impl::StoppedLaunching() {
  summary_.reason = run_.stop_reason();
  summary_.stop_reason = StopReasonName(summary_.reason);
  // Nothing that waits for room starts now (the run would otherwise wait for it for ever). A
  // promoted trial stays paused; new and re-run trials had no row yet.
  for (auto& [job, q] : waiting_) {
    scheduler_.Cancel(job);
    predicted_by_job_.erase(job);
    if (q.promoted) paused_[q.promoted->root] = std::move(*q.promoted);
  }
  waiting_.clear();
}

void StudyController::Impl::MaybeFinish() {
  if (run_.done() || !running_.empty() || asked_ > 0 || !waiting_.empty()) return;
  if (!run_.stopped() && (run_.held() || CanPlaceMore())) return;
  if (!run_.stopped() && ForcePromotionAtTheEnd()) return;
  StopLaunching(StopReason::kBudgetReached);
  // Nothing runs, so no report can promote a paused trial any more. (Stopped for another reason,
  // paused trials stay paused and a resumed study may promote them.)
  if (summary_.reason == StopReason::kBudgetReached ||
      summary_.reason == StopReason::kSearchSpaceExhausted)
    FinalizePaused();
  Finish();
}

// The budget is spent with every trial stopped at a rung: the best of the highest rung trains on
// to the end, so that the study has one fully trained configuration.
bool StudyController::Impl::ForcePromotionAtTheEnd() {
  if (summary_.completed > 0 || paused_.empty()) return false;
  auto p = pruner_->ForcePromotion();
  if (!p || !paused_.count(p->trial)) return false;
  MarkPromoted(p->trial, p->target);
  ++summary_.promoted;
  Paused paused = std::move(paused_[p->trial]);
  paused_.erase(p->trial);
  Say(StrCat("the budget is spent and no trial has completed: trial ", paused.number,
             ", the best at the highest rung, trains to the end"));
  Promote(paused, p->target);
  Dispatch();
  return true;
}

void StudyController::Impl::Finish() {
  run_.Finish();
  summary_.total_finished = finished_;
  summary_.best_value = best_;
  summary_.best_trial = best_trial_;
  summary_.best_runs = best_runs_;
  summary_.best_by_model = spec_.budget.rerun_top > 0;
  summary_.paused = static_cast<int>(paused_.size());
  summary_.elapsed_s = now_;
  // A study with nothing to show for itself is a failure people should see in the exit code.
  if (summary_.exit_code == 0 && !best_ && summary_.completed == 0) {
    summary_.exit_code = 1;
    Say(StrCat("no trial of the study completed (", summary_.failed, " failed, ",
               summary_.infeasible, " infeasible, ", summary_.pruned,
               " pruned); see hyperpack trials ", spec_.name, " and the logs under ",
               options_.log_root));
  }
  Write(EventRow{{Wall(), std::nullopt, storage::EventKindName(EventKind::kRunStopped),
                  summary_.stop_reason}});
  Write(ReleaseStudyRow{});
  FlushRows();
  out_.push_back(FinishCmd{summary_});
}

// ---- Small things -------------------------------------------------------------------------------

void StudyController::Impl::FlushRows(std::optional<int> ack) {
  if (pending_rows_.empty() && !ack) return;
  out_.push_back(WriteCmd{std::move(pending_rows_), ack});
  pending_rows_.clear();
}

// An event stored in the study's log and told to the people watching.
void StudyController::Impl::Log(std::optional<int> trial, EventKind kind, const std::string& text) {
  Write(EventRow{{Wall(), trial, storage::EventKindName(kind), text}});
  Say(trial ? StrCatTrial(*trial, text) : text);
}

std::string StudyController::Impl::StrCatTrial(int trial, const std::string& text) {
  return StrCat("trial ", trial, " ", text);
}

std::string StudyController::Impl::StatusLine() const {
  std::string best =
      best_ ? StrCat("best ", spec_.objective.metric, " ", FormatShort(*best_, 5), " (trial ",
                     *best_trial_, best_runs_ > 1 ? StrCat(", mean of ", best_runs_, " runs") : "",
                     ")")
            : "no result yet";
  std::string waiting;
  if (LiveNodes() == 0 && !run_.stopped())
    waiting = WaitingForCapacity() + ", ";
  else if (!waiting_.empty())
    waiting = StrCat(waiting_.size(), " waiting for room, ");
  return StrCat(finished_, "/", options_.max_trials, " done (", summary_.completed, " ok, ",
                summary_.failed + summary_.infeasible, " failed), ", running_.size(), " running, ",
                waiting, best);
}

ControllerState StudyController::Impl::State() const {
  ControllerState s;
  for (const auto& [root, r] : roots_)
    if (r.seen.reports > 0 || !r.seen.decisions.empty()) s.roots[root] = r.seen;
  for (const auto& [root, p] : paused_) s.paused[p.number] = p.rung;
  for (const auto& [number, t] : running_)
    if (t.pausing) s.pausing.insert(number);
  s.finished = finished_;
  s.completed = summary_.completed;
  s.pruned = summary_.pruned;
  s.failed = summary_.failed;
  s.infeasible = summary_.infeasible;
  s.best_trial = best_trial_;
  return s;
}

Occupancy StudyController::Impl::occupancy() const {
  Occupancy o;
  o.running = static_cast<int>(running_.size());
  o.waiting = static_cast<int>(waiting_.size() + retries_.size());
  o.paused = static_cast<int>(paused_.size());
  o.finished = finished_;
  o.completed = summary_.completed;
  o.pruned = summary_.pruned;
  o.failed = summary_.failed;
  o.infeasible = summary_.infeasible;
  // A lost node's capacity is zero in cluster_, so only the nodes up now count.
  for (size_t i = 0; i < cluster_.nodes().size(); ++i) {
    if (lost_[i]) continue;
    const Node& n = cluster_.nodes()[i];
    const int node = static_cast<int>(i);
    o.gpus += n.gpus;
    o.gpus_busy += n.gpus - cluster_.free_gpus(node);
    o.cpus += n.cpus;
    o.cpus_busy += n.cpus - cluster_.free_cpus(node);
  }
  return o;
}

std::string FormatSummary(const RunSummary& s, const std::string& metric) {
  std::ostringstream text;
  text << "study '" << s.study << "' " << s.stop_reason << " after " << FormatDuration(s.elapsed_s)
       << ": " << s.total_finished << "/" << s.max_trials << " trials finished (" << s.completed
       << " completed, " << (s.pruned ? StrCat(s.pruned, " pruned, ") : std::string()) << s.failed
       << " failed, " << s.infeasible << " infeasible)";
  if (s.paused) text << ", " << s.paused << " paused";
  if (s.interrupted) text << ", " << s.interrupted << " interrupted";
  if (s.preempted) text << ", " << s.preempted << " preempted for other studies";
  if (s.promoted)
    text << "; " << s.promoted << " promotions, " << s.promoted_in_place << " of them in place";
  text << "\n";
  if (s.best_value) {
    text << (s.best_by_model ? "best single run " : "best ") << metric << " = "
         << FormatShort(*s.best_value, 6) << " (trial " << *s.best_trial;
    if (s.best_runs > 1) text << ", the mean of its configuration's " << s.best_runs << " runs";
    text << ")\n";
    if (s.best_by_model)
      text << "the study's best is a model's pick of every run (budget.rerun_top): hyperpack best "
           << s.study << "\n";
    text << "next: hyperpack best " << s.study << "   |   hyperpack export " << s.study
         << " --format yaml\n";
  }
  return text.str();
}

}  // namespace hyperpack::scheduler
