#include "hyperpack/scheduler/virtual_driver.h"

#include <signal.h>

#include <chrono>

namespace hyperpack::scheduler {

namespace {
// The tuner's own (real) time, which the benchmarks report beside the virtual time.
template <typename F>
auto TimeTuner(double* seconds, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  auto result = f();
  *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}
}  // namespace

VirtualDriver::VirtualDriver(StudyController& controller, tuner::Tuner& tuner,
                             VirtualWorkload& workload, VirtualOptions options)
    : controller_(controller), tuner_(tuner), workload_(workload), options_(options) {}

Status VirtualDriver::Run(const StoredStudy& stored) {
  HP_ASSIGN_OR_RETURN(std::vector<Command> restored, controller_.Restore(stored));
  Perform(std::move(restored));
  Perform(controller_.Start(now_));
  RunUntil(options_.horizon);
  return Status::Ok();
}

void VirtualDriver::RunUntil(double until) {
  while (!summary_ && !queue_.empty()) {
    Timed next = queue_.top();
    if (next.at > options_.horizon || next.at > until) break;
    queue_.pop();
    now_ = std::max(now_, next.at);
    Play(next);
  }
}

void VirtualDriver::Inject(EventPayload event) { Feed(std::move(event)); }

// What an event raises is handled after it, at the same virtual time.
void VirtualDriver::Feed(EventPayload event) {
  inbox_.push_back(std::move(event));
  if (inbox_.size() > 1) return;
  while (!inbox_.empty()) {
    if (summary_) {
      inbox_.clear();
      return;
    }
    Perform(controller_.Handle({now_, std::move(inbox_.front())}));
    inbox_.pop_front();
  }
}

void VirtualDriver::Perform(std::vector<Command> commands) {
  for (const Command& c : commands) Do(c);
}

void VirtualDriver::Do(const Command& c) {
  if (auto* p = std::get_if<ProposeCmd>(&c)) {
    auto proposals = TimeTuner(&tuner_s_, [&] {
      tuner_.SetBudgetSpent(p->budget_spent);
      return tuner_.Propose(p->n, p->pending);
    });
    std::vector<std::optional<tuner::CostPrediction>> costs;
    if (proposals.ok()) {
      for (const Config& config : *proposals) {
        workload_.Proposed(config, now_);
        costs.push_back(tuner_.PredictCost(config));
      }
    }
    Feed(ProposalsReady{std::move(proposals), std::move(costs)});
  } else if (auto* o = std::get_if<ObserveCmd>(&c)) {
    TimeTuner(&tuner_s_, [&] {
      tuner_.Observe(o->outcome);
      return 0;
    });
    observed_.push_back(o->outcome);
  } else if (auto* w = std::get_if<WriteCmd>(&c)) {
    rows_.insert(rows_.end(), w->rows.begin(), w->rows.end());
    if (w->ack) Feed(TrialPersisted{*w->ack, Status::Ok()});
  } else if (auto* l = std::get_if<LaunchCmd>(&c)) {
    Launch(l->plan);
  } else if (auto* s = std::get_if<SignalCmd>(&c)) {
    Stop(s->trial, RankExit::Signaled(s->kind == SignalKind::kKill ? SIGKILL : SIGTERM));
  } else if (auto* k = std::get_if<ContinueCmd>(&c)) {
    // The step already drawn (its end at the rung) is dropped for the next epoch.
    auto it = running_.find(k->trial);
    if (it != running_.end() && it->second.alive && it->second.sim->Continue(k->target)) {
      ++it->second.generation;
      Schedule(k->trial);
    }
  } else if (auto* wake = std::get_if<WakeCmd>(&c)) {
    queue_.push({wake->at, seq_++, -1, 0});
  } else if (auto* f = std::get_if<FinishCmd>(&c)) {
    summary_ = f->summary;
  }
}

void VirtualDriver::Launch(const LaunchPlan& plan) {
  Running& r = running_[plan.trial];
  r.sim = workload_.Start(plan, now_);
  r.ranks = static_cast<int>(plan.ranks.size());
  r.alive = true;
  ++r.generation;
  Schedule(plan.trial);
}

void VirtualDriver::Schedule(int trial) {
  Running& r = running_[trial];
  r.step = r.sim->Next();
  queue_.push({now_ + r.step.after, seq_++, trial, r.generation});
}

// A signal ends the whole gang at once.
void VirtualDriver::Stop(int trial, RankExit how) {
  auto it = running_.find(trial);
  if (it == running_.end() || !it->second.alive) return;
  it->second.alive = false;
  ++it->second.generation;
  workload_.Ended(trial, now_);
  for (int rank = 0; rank < it->second.ranks; ++rank) Feed(RankExited{trial, rank, how, ""});
}

void VirtualDriver::Play(const Timed& t) {
  if (t.trial < 0) return Feed(Tick{});
  auto it = running_.find(t.trial);
  if (it == running_.end() || it->second.generation != t.generation || !it->second.alive) return;
  VirtualTrial::Step step = std::move(it->second.step);
  if (step.exit) {
    it->second.alive = false;
    workload_.Ended(t.trial, now_);
    for (int rank = 0; rank < it->second.ranks; ++rank)
      Feed(RankExited{t.trial, rank, *step.exit, ""});
    return;
  }
  Schedule(t.trial);
  if (step.line) Feed(MetricReport{t.trial, *step.line, options_.checkpoints});
}

}  // namespace hyperpack::scheduler
