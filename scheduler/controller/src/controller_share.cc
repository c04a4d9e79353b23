// Fair share between the studies of one server: the grant a study is given (ShareChanged), what it
// holds over it and gives back (at once, or after preempt_after_s), and what it claims (Claim).
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "controller_impl.h"
#include "hyperpack/text.h"

namespace hyperpack::scheduler {

using storage::EventKind;

void StudyController::Impl::On(const ShareChanged& e) {
  for (size_t n = 0; n < e.grant.withheld.size() && n < nodes_.size(); ++n)
    cluster_.Withhold(static_cast<int>(n), e.grant.withheld[n].gpus, e.grant.withheld[n].cpus);
  constexpr int kAll = std::numeric_limits<int>::max();
  const Scheduler::Limit& limit = e.grant.limit;
  const bool whole = limit.gpus == kAll && limit.slots == kAll;
  // Told when it changes; not the whole cluster of a study alone from the start, nor a share of
  // nothing (a study that wants nothing yet, or one squeezed out: its preempted trials say so).
  const bool changed =
      share_ ? share_->limit.gpus != limit.gpus || share_->limit.slots != limit.slots : !whole;
  if (changed && (limit.gpus > 0 || limit.slots > 0)) {
    int gpus = 0, cpus = 0;
    for (size_t n = 0; n < cluster_.nodes().size(); ++n) {
      gpus += cluster_.nodes()[n].gpus;
      cpus += cluster_.nodes()[n].cpus;
    }
    std::vector<std::string> parts;
    if (limit.gpus > 0) parts.push_back(StrCat(limit.gpus, " of ", gpus, " GPUs"));
    if (limit.slots > 0) parts.push_back(StrCat(limit.slots, " of ", cpus, " CPU slots"));
    Log(std::nullopt, EventKind::kShare,
        whole ? std::string("share: the whole cluster again (no other study runs on the server)")
              : StrCat("share: ", Join(parts, " and "), " (priority ",
                       FormatShort(spec_.priority, 4), "; other studies run on the server)"));
  }
  share_ = e.grant;
  scheduler_.SetLimit(e.grant.limit);
  GiveBackShare();
  ++refills_;
}

void StudyController::Impl::GiveBackShare() {
  if (options_.preempt_after_s <= 0) return YieldOverShare();
  auto [over_gpus, over_slots] = OverShare();
  if (over_gpus <= 0 && over_slots <= 0) {
    preempt_at_.reset();
    return;
  }
  if (preempt_at_) return;  // the grace runs from when it first went over
  preempt_at_ = now_ + options_.preempt_after_s;
  Wake(*preempt_at_);
  std::vector<std::string> over;
  if (over_gpus > 0) over.push_back(StrCat(over_gpus, over_gpus == 1 ? " GPU" : " GPUs"));
  if (over_slots > 0)
    over.push_back(StrCat(over_slots, over_slots == 1 ? " CPU slot" : " CPU slots"));
  Log(std::nullopt, EventKind::kShare,
      StrCat("share: holding ", Join(over, " and "), " over it; trials still over it in ",
             FormatDuration(options_.preempt_after_s), " are preempted"));
}

std::pair<int, int> StudyController::Impl::OverShare() const {
  if (!share_) return {0, 0};
  int over_gpus = scheduler_.held_gpus() - share_->limit.gpus;
  int over_slots = scheduler_.held_slots() - share_->limit.slots;
  for (const auto& [n, t] : running_)
    if (t.Stopping() && t.job) (t.on_gpus ? over_gpus : over_slots) -= t.units;
  return {over_gpus, over_slots};
}

// The youngest trials lose the least work: they stop first, and run again from their checkpoints
// when the share allows. What is already stopping counts as given back.
void StudyController::Impl::YieldOverShare() {
  auto [over_gpus, over_slots] = OverShare();
  if (over_gpus <= 0 && over_slots <= 0) return;
  std::vector<Trial*> candidates;
  for (auto& [n, t] : running_)
    if (!t.Stopping() && t.job) candidates.push_back(&t);
  // Started last first; of two started at once, the later number.
  std::sort(candidates.begin(), candidates.end(), [](const Trial* a, const Trial* b) {
    if (a->started != b->started) return a->started > b->started;
    return a->number > b->number;
  });
  for (Trial* t : candidates) {
    int& over = t->on_gpus ? over_gpus : over_slots;
    if (over <= 0) continue;
    over -= t->units;
    t->yielded = true;
    Log(t->number, EventKind::kPreempted,
        StrCat("preempted: another study on this server is owed its share (this one may hold ",
               t->on_gpus ? share_->limit.gpus : share_->limit.slots,
               t->on_gpus ? " GPUs" : " CPU slots", "); it runs again from its checkpoint"));
    Terminate(*t);
  }
}

ShareClaim StudyController::Impl::Claim() const {
  ShareClaim c;
  c.held.resize(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (lost_[n]) continue;
    c.held[n] = {cluster_.held_gpu_mask(static_cast<int>(n)),
                 cluster_.held_cpus(static_cast<int>(n))};
  }
  c.held_gpus = scheduler_.held_gpus();
  c.held_slots = scheduler_.held_slots();
  c.wanted_gpus = scheduler_.waiting_gpus();
  c.wanted_slots = scheduler_.waiting_slots();
  // Re-runs and proposals not placed yet: as many as the budget and max_parallel allow.
  if (!run_.stopped()) {
    const Held typical = HeldOf(typical_demand_);
    (typical.gpus ? c.wanted_gpus : c.wanted_slots) += Free() * typical.units;
  }
  return c;
}

}  // namespace hyperpack::scheduler
