#include "hyperpack/placement/placement.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace hyperpack::scheduler {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// How many ranks of `d` fit in the given free resources.
int Slots(const Demand& d, int free_gpus, int free_cpus) {
  int by_gpu = d.gpus_per_rank > 0 ? free_gpus / d.gpus_per_rank : std::numeric_limits<int>::max();
  int by_cpu = d.cpus_per_rank > 0 ? free_cpus / d.cpus_per_rank : std::numeric_limits<int>::max();
  return std::min(by_gpu, by_cpu);
}

// The smallest gang of one shape (per-rank GPUs and CPUs) that failed to backfill in this pass.
// Capacity only shrinks during a pass, so a shape that failed with r ranks fails with more.
struct Failed {
  int gpus_per_rank, cpus_per_rank;
  GpuShare share;
  int ranks_anywhere, ranks_off_reserved;
};

// Backfill, once the head of the queue is blocked: its reservation, and the failures so far.
struct Backfill {
  double shadow;               // when the head is promised to start
  std::vector<bool> reserved;  // the nodes it is promised
  std::vector<Failed> failed;
};

Failed& FailedFor(std::vector<Failed>& failed, const Demand& d) {
  for (Failed& f : failed)
    if (f.gpus_per_rank == d.gpus_per_rank && f.cpus_per_rank == d.cpus_per_rank &&
        f.share == d.share)
      return f;
  const int never = std::numeric_limits<int>::max();
  failed.push_back({d.gpus_per_rank, d.cpus_per_rank, d.share, never, never});
  return failed.back();
}

// Where `job` may start now, jumping ahead of the head without delaying it; nullopt when nowhere.
std::optional<Placement> BackfillPlacement(const ClusterState& cluster, const Job& job, Fit fit,
                                           double now, Backfill& b) {
  Failed& f = FailedFor(b.failed, job.demand);
  const double cautious = job.estimate_high > 0 ? job.estimate_high : job.estimate;
  bool ends_in_time = job.estimate > 0 && now + cautious <= b.shadow;
  int& threshold = ends_in_time ? f.ranks_anywhere : f.ranks_off_reserved;
  // Skip without searching a gang no smaller than one of its shape that failed, or one larger than
  // what is free.
  if (job.demand.ranks >= threshold || job.demand.total_gpus() > cluster.total_free_gpus())
    return std::nullopt;
  std::optional<Placement> p = ends_in_time ? cluster.Find(job.demand, fit)
                                            : cluster.FindAvoiding(job.demand, fit, &b.reserved);
  if (p) return p;
  threshold = job.demand.ranks;
  if (ends_in_time) f.ranks_off_reserved = std::min(f.ranks_off_reserved, job.demand.ranks);
  return std::nullopt;
}

}  // namespace

double GpuFraction(const GpuShare& share, int64_t gpu_memory_mb) {
  double f = share.milli / 1000.0;
  if (share.memory_mb > 0 && gpu_memory_mb > 0)
    f = std::max(f, static_cast<double>(share.memory_mb) / static_cast<double>(gpu_memory_mb));
  return f > 0 ? std::min(f, 1.0) : 1.0;
}

std::string ShareText(const GpuShare& share) {
  std::string out;
  if (share.memory_mb > 0) out = StrCat(share.memory_mb, " MiB");
  if (share.milli > 0) out += StrCat(out.empty() ? "" : " and ", share.milli / 1000.0 * 100, "%");
  return StrCat(out.empty() ? "nothing" : out, " of one GPU");
}

std::vector<int> Placement::Nodes() const {
  std::vector<int> out;
  for (const RankPlacement& r : ranks)
    if (out.empty() || out.back() != r.node) out.push_back(r.node);
  return out;
}

ClusterState::ClusterState(std::vector<Node> nodes) : nodes_(std::move(nodes)) {
  const int n = static_cast<int>(nodes_.size());
  removed_.assign(n, false);
  withheld_mask_.assign(n, 0);
  withheld_cpus_.assign(n, 0);
  free_gpus_.resize(n);
  free_cpus_.resize(n);
  free_mask_.resize(n);
  pos_in_bucket_.assign(n, -1);
  shared_.resize(n);
  for (int i = 0; i < n; ++i) shared_[i].resize(nodes_[i].gpus);
  for (const Node& node : nodes_) {
    max_node_gpus_ = std::max(max_node_gpus_, node.gpus);
    max_node_cpus_ = std::max(max_node_cpus_, node.cpus);
  }
  by_free_.resize(max_node_gpus_ + 1);
  for (int i = 0; i < n; ++i) {
    free_gpus_[i] = nodes_[i].gpus;
    free_cpus_[i] = nodes_[i].cpus;
    free_mask_[i] = nodes_[i].gpus >= 64 ? ~0ULL : ((1ULL << nodes_[i].gpus) - 1);
    total_gpus_ += nodes_[i].gpus;
    if (nodes_[i].gpus > 0) {
      pos_in_bucket_[i] = static_cast<int>(by_free_[nodes_[i].gpus].size());
      by_free_[nodes_[i].gpus].push_back(i);
    }
  }
  total_free_gpus_ = total_gpus_;
}

void ClusterState::Reindex(int node, int old_free) {
  if (nodes_[node].gpus == 0 || old_free == free_gpus_[node]) return;
  std::vector<int>& from = by_free_[old_free];
  int pos = pos_in_bucket_[node];
  from[pos] = from.back();
  pos_in_bucket_[from[pos]] = pos;
  from.pop_back();
  std::vector<int>& to = by_free_[free_gpus_[node]];
  pos_in_bucket_[node] = static_cast<int>(to.size());
  to.push_back(node);
}

std::optional<int> ClusterState::OneNode(int gpus, int cpus, Fit fit,
                                         const std::vector<bool>* avoid,
                                         int64_t min_gpu_memory_mb) const {
  auto ok = [&](int i) {
    return free_gpus_[i] >= gpus && free_cpus_[i] >= cpus && !(avoid && (*avoid)[i]) &&
           nodes_[i].gpu_memory_mb >= min_gpu_memory_mb;
  };
  if (gpus > 0 && fit == Fit::kBest) {
    // The node left with the fewest free GPUs: keep the large holes for large gangs.
    for (int k = gpus; k <= max_node_gpus_; ++k)
      for (int i : by_free_[k])
        if (ok(i)) return i;
    return std::nullopt;
  }
  std::optional<int> best;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (!ok(i)) continue;
    if (fit == Fit::kFirst) return i;
    if (!best || free_cpus_[i] < free_cpus_[*best]) best = i;
  }
  return best;
}

std::optional<Placement> ClusterState::Find(const Demand& d, Fit fit) const {
  return FindAvoiding(d, fit, nullptr);
}

bool ClusterState::ShareFits(int node, const SharedGpu& on, const GpuShare& share) const {
  if (on.milli + share.milli > 1000) return false;
  return share.memory_mb == 0 || on.memory_mb + share.memory_mb <= nodes_[node].gpu_memory_mb;
}

std::optional<Placement> ClusterState::FindShare(const Demand& d, Fit fit,
                                                 const std::vector<bool>* avoid) const {
  if (d.ranks != 1) return std::nullopt;  // ranks of a gang need GPUs of their own
  // A GPU that holds shares already; best fit: the one left with the least memory (then the
  // smallest fraction) once this share is on it.
  std::optional<std::pair<int, int>> pick;
  std::pair<int64_t, int> least{std::numeric_limits<int64_t>::max(), 0};
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    if (removed_[i] || (avoid && (*avoid)[i]) || free_cpus_[i] < d.cpus_per_rank) continue;
    for (int g = 0; g < nodes_[i].gpus; ++g) {
      const SharedGpu& on = shared_[i][g];
      if (on.sharers == 0 || !ShareFits(i, on, d.share)) continue;
      const std::pair<int64_t, int> left{nodes_[i].gpu_memory_mb - on.memory_mb, 1000 - on.milli};
      if (fit == Fit::kFirst) return Placement{{{i, {g}, d.cpus_per_rank, d.share}}};
      if (!pick || left < least) pick = {i, g}, least = left;
    }
  }
  if (pick) return Placement{{{pick->first, {pick->second}, d.cpus_per_rank, d.share}}};
  // Else a free GPU, as a one-GPU trial would take it, on a node whose GPUs can hold the memory.
  if (d.share.milli > 1000) return std::nullopt;
  auto node = OneNode(1, d.cpus_per_rank, fit, avoid, d.share.memory_mb);
  if (!node) return std::nullopt;
  return Placement{{{*node, {__builtin_ctzll(free_mask_[*node])}, d.cpus_per_rank, d.share}}};
}

std::optional<Placement> ClusterState::FindAvoiding(const Demand& d, Fit fit,
                                                    const std::vector<bool>* avoid) const {
  if (d.shares_gpu()) return FindShare(d, fit, avoid);
  // Which nodes, and how many ranks on each.
  std::vector<std::pair<int, int>> layout;
  if (auto node = OneNode(d.total_gpus(), d.total_cpus(), fit, avoid)) {
    layout.emplace_back(*node, d.ranks);
  } else if (d.ranks > 1) {
    // As few nodes as possible: the roomiest first; then the last one swapped for the smallest
    // node that still holds the remainder.
    std::vector<std::pair<int, int>> slots;  // (slots, node)
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
      if (avoid && (*avoid)[i]) continue;
      int s = std::min(Slots(d, free_gpus_[i], free_cpus_[i]), d.ranks);
      if (s > 0) slots.emplace_back(s, i);
    }
    if (fit == Fit::kBest) {
      std::stable_sort(slots.begin(), slots.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
    }
    int placed = 0;
    size_t used = 0;
    while (used < slots.size() && placed < d.ranks) placed += slots[used++].first;
    if (placed < d.ranks) return std::nullopt;
    if (fit == Fit::kBest && used >= 1) {
      int before = placed - slots[used - 1].first;
      int need = d.ranks - before;
      size_t pick = used - 1;
      for (size_t j = used; j < slots.size(); ++j)
        if (slots[j].first >= need && slots[j].first < slots[pick].first) pick = j;
      std::swap(slots[used - 1], slots[pick]);
    }
    int left = d.ranks;
    for (size_t j = 0; j < used && left > 0; ++j) {
      int take = std::min(left, slots[j].first);
      layout.emplace_back(slots[j].second, take);
      left -= take;
    }
  } else {
    return std::nullopt;
  }
  Placement p;
  for (const auto& [node, count] : layout) {
    uint64_t mask = free_mask_[node];
    for (int r = 0; r < count; ++r) {
      RankPlacement rp;
      rp.node = node;
      rp.cpus = d.cpus_per_rank;
      for (int g = 0; g < d.gpus_per_rank; ++g) {
        int bit = __builtin_ctzll(mask);  // lowest free device
        mask &= mask - 1;
        rp.gpus.push_back(bit);
      }
      p.ranks.push_back(std::move(rp));
    }
  }
  return p;
}

bool ClusterState::Satisfiable(const Demand& d) const {
  if (d.gpus_per_rank > max_node_gpus_ || d.cpus_per_rank > max_node_cpus_) return false;
  if (d.shares_gpu()) {
    if (d.ranks != 1 || d.share.milli > 1000) return false;
    for (const Node& n : nodes_)
      if (n.gpus > 0 && n.cpus >= d.cpus_per_rank && n.gpu_memory_mb >= d.share.memory_mb)
        return true;
    return false;
  }
  int64_t slots = 0;
  for (const Node& n : nodes_) slots += std::min(Slots(d, n.gpus, n.cpus), d.ranks);
  return slots >= d.ranks;
}

void ClusterState::Allocate(const Placement& p) {
  for (const RankPlacement& r : p.ranks) {
    int old = free_gpus_[r.node];
    int taken = static_cast<int>(r.gpus.size());
    if (r.share.any()) {
      // A GPU's first share takes it from the free ones; later shares only add to it.
      SharedGpu& on = shared_[r.node][r.gpus[0]];
      taken = on.sharers++ == 0 ? 1 : 0;
      on.memory_mb += r.share.memory_mb;
      on.milli += r.share.milli;
    }
    if (taken > 0)
      for (int g : r.gpus) free_mask_[r.node] &= ~(1ULL << g);
    free_gpus_[r.node] -= taken;
    free_cpus_[r.node] -= r.cpus;
    total_free_gpus_ -= taken;
    Reindex(r.node, old);
  }
}

void ClusterState::AddNode(const Node& node) {
  const int i = static_cast<int>(nodes_.size());
  nodes_.push_back(node);
  removed_.push_back(false);
  withheld_mask_.push_back(0);
  withheld_cpus_.push_back(0);
  shared_.emplace_back(node.gpus);
  max_node_gpus_ = std::max(max_node_gpus_, node.gpus);
  max_node_cpus_ = std::max(max_node_cpus_, node.cpus);
  if (static_cast<int>(by_free_.size()) <= max_node_gpus_) by_free_.resize(max_node_gpus_ + 1);
  free_gpus_.push_back(node.gpus);
  free_cpus_.push_back(node.cpus);
  free_mask_.push_back(node.gpus >= 64 ? ~0ULL : ((1ULL << node.gpus) - 1));
  pos_in_bucket_.push_back(-1);
  total_gpus_ += node.gpus;
  total_free_gpus_ += node.gpus;
  if (node.gpus > 0) {
    pos_in_bucket_[i] = static_cast<int>(by_free_[node.gpus].size());
    by_free_[node.gpus].push_back(i);
  }
}

void ClusterState::RemoveNode(int i) {
  if (removed_[i]) return;
  int old = free_gpus_[i];
  total_free_gpus_ -= free_gpus_[i];
  total_gpus_ -= nodes_[i].gpus;
  free_gpus_[i] = 0;
  free_cpus_[i] = 0;
  free_mask_[i] = 0;
  withheld_mask_[i] = 0;
  withheld_cpus_[i] = 0;
  Reindex(i, old);
  // Out of the buckets altogether, and no longer counted as able to hold anything.
  if (nodes_[i].gpus > 0) {
    std::vector<int>& b = by_free_[0];
    int pos = pos_in_bucket_[i];
    b[pos] = b.back();
    pos_in_bucket_[b[pos]] = pos;
    b.pop_back();
  }
  nodes_[i].gpus = 0;
  nodes_[i].cpus = 0;
  shared_[i].clear();
  removed_[i] = true;
}

void ClusterState::Release(const Placement& p) {
  for (const RankPlacement& r : p.ranks) {
    if (removed_[r.node]) continue;
    int old = free_gpus_[r.node];
    int given = static_cast<int>(r.gpus.size());
    if (r.share.any()) {
      // Free again with its last share.
      SharedGpu& on = shared_[r.node][r.gpus[0]];
      on.memory_mb -= r.share.memory_mb;
      on.milli -= r.share.milli;
      given = --on.sharers == 0 ? 1 : 0;
    }
    if (given > 0)
      for (int g : r.gpus) free_mask_[r.node] |= 1ULL << g;
    free_gpus_[r.node] += given;
    free_cpus_[r.node] += r.cpus;
    total_free_gpus_ += given;
    Reindex(r.node, old);
  }
}

void ClusterState::Withhold(int node, uint64_t gpu_mask, int cpus) {
  if (node < 0 || node >= static_cast<int>(nodes_.size()) || removed_[node]) return;
  const int old = free_gpus_[node];
  // Give back what was withheld, then take what is asked of what is free.
  free_mask_[node] |= withheld_mask_[node];
  free_cpus_[node] += withheld_cpus_[node];
  const uint64_t mask = gpu_mask & free_mask_[node];
  const int take_cpus = std::clamp(cpus, 0, free_cpus_[node]);
  free_mask_[node] &= ~mask;
  free_cpus_[node] -= take_cpus;
  withheld_mask_[node] = mask;
  withheld_cpus_[node] = take_cpus;
  free_gpus_[node] = __builtin_popcountll(free_mask_[node]);
  total_free_gpus_ += free_gpus_[node] - old;
  Reindex(node, old);
}

uint64_t ClusterState::held_gpu_mask(int node) const {
  if (removed_[node]) return 0;
  const uint64_t all = nodes_[node].gpus >= 64 ? ~0ULL : ((1ULL << nodes_[node].gpus) - 1);
  return all & ~free_mask_[node] & ~withheld_mask_[node];
}

int ClusterState::held_cpus(int node) const {
  if (removed_[node]) return 0;
  return nodes_[node].cpus - free_cpus_[node] - withheld_cpus_[node];
}

Result<Policy> ParsePolicy(const std::string& name) {
  if (name == "best-fit") return Policy::kBestFit;
  if (name == "first-fit") return Policy::kFirstFit;
  if (name == "fifo") return Policy::kFifo;
  return Status::Invalid("'", name, "' is not a policy; expected best-fit, first-fit or fifo");
}

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kBestFit:
      return "best-fit";
    case Policy::kFirstFit:
      return "first-fit";
    case Policy::kFifo:
      return "fifo";
  }
  return "?";
}

Result<Order> ParseOrder(const std::string& name) {
  for (Order o : {Order::kArrival, Order::kShortestFirst})
    if (name == OrderName(o)) return o;
  return Status::Invalid("'", name, "' is not a queue order; expected fifo or sjf");
}

const char* OrderName(Order order) { return order == Order::kShortestFirst ? "sjf" : "fifo"; }

Status Scheduler::Submit(const Job& job) {
  if (job.demand.ranks < 1 || job.demand.gpus_per_rank < 0 || job.demand.cpus_per_rank < 0)
    return Status::Invalid("job ", job.id, ": a gang needs at least one rank");
  if (!cluster_->Satisfiable(job.demand) && job.demand.shares_gpu())
    return Status::Invalid("job ", job.id, " needs ", ShareText(job.demand.share), " and ",
                           job.demand.cpus_per_rank,
                           " CPUs, more than any node has (memory is packed only onto GPUs whose "
                           "memory their node states)");
  if (!cluster_->Satisfiable(job.demand))
    return Status::Invalid("job ", job.id, " needs ", job.demand.ranks, " ranks of ",
                           job.demand.gpus_per_rank, " GPUs and ", job.demand.cpus_per_rank,
                           " CPUs, more than this cluster has");
  double rank = job.submit;
  if (queue_options_.order == Order::kShortestFirst)
    rank = std::max(0.0, job.estimate) + queue_options_.aging * job.submit;
  Key k{job.priority, false, rank, job.id};
  queue_.emplace(k, job);
  key_of_[job.id] = k;
  if (Guarded()) not_overdue_.emplace(job.submit, job.id);
  if (job.estimate > 0 && std::isfinite(job.estimate)) {
    log_estimates_ += std::log(job.estimate);
    ++estimates_;
    waiting_unit_seconds_[PoolOf(job)] += UnitSeconds(job);
    if (CriticalFirst()) by_estimate_[PoolOf(job)].emplace(CriticalLength(job), job.id);
  }
  if (job.demand.total_gpus() == 0) ++cpu_only_waiting_;
  Count(job.demand, 1, &waiting_gpus_, &waiting_slots_);
  return Status::Ok();
}

void Scheduler::Dequeued(const Job& job) {
  key_of_.erase(job.id);
  not_overdue_.erase({job.submit, job.id});
  if (job.estimate > 0 && std::isfinite(job.estimate)) {
    waiting_unit_seconds_[PoolOf(job)] -= UnitSeconds(job);
    by_estimate_[PoolOf(job)].erase({CriticalLength(job), job.id});
  }
  if (job.demand.total_gpus() == 0) --cpu_only_waiting_;
  Count(job.demand, -1, &waiting_gpus_, &waiting_slots_);
}

bool Scheduler::Cancel(uint64_t id) {
  auto it = key_of_.find(id);
  if (it == key_of_.end()) return false;
  auto job = queue_.find(it->second);
  Dequeued(job->second);
  queue_.erase(job);
  return true;
}

Status Scheduler::Resubmit(uint64_t id, const Demand& demand) {
  auto it = key_of_.find(id);
  if (it == key_of_.end()) return Status::NotFound("job ", id, " is not waiting");
  if (!cluster_->Satisfiable(demand))
    return Status::Invalid("job ", id, ": no node could hold what it would need");
  Job job = queue_.at(it->second);
  Cancel(id);
  // Counted once: Submit adds its estimate to the typical one again.
  if (job.estimate > 0 && std::isfinite(job.estimate)) {
    log_estimates_ -= std::log(job.estimate);
    --estimates_;
  }
  job.demand = demand;
  return Submit(job);
}

double Scheduler::MaxWait() const {
  if (queue_options_.max_wait > 0) return queue_options_.max_wait;
  if (estimates_ == 0) return std::numeric_limits<double>::infinity();
  return queue_options_.max_wait_factor * std::exp(log_estimates_ / estimates_);
}

void Scheduler::PromoteOverdue(double now) {
  const double max_wait = MaxWait();
  while (!not_overdue_.empty() && now - not_overdue_.begin()->first >= max_wait) {
    Promote(not_overdue_.begin()->second);
  }
}

double Scheduler::CriticalLength(const Job& job) {
  return std::max(job.estimate, job.estimate_high);
}

void Scheduler::PromoteCritical(double now) {
  int capacity[2] = {0, cluster_->total_gpus()};
  for (size_t n = 0; n < cluster_->nodes().size(); ++n)
    if (!cluster_->removed_[n]) capacity[0] += cluster_->nodes()[n].cpus;
  // When the work running and waiting in each pool would be done at the earliest: no running job
  // ends before its expected end, and the pool cannot do the rest faster than all of it at once.
  double running_unit_seconds[2] = {0, 0}, last_end[2] = {now, now};
  for (const auto& [id, r] : running_) {
    if (!std::isfinite(r.expected_end)) continue;
    const Held held = HeldOf(r.demand);
    running_unit_seconds[held.gpus] += std::max(0.0, r.expected_end - now) * held.units;
    last_end[held.gpus] = std::max(last_end[held.gpus], r.expected_end);
  }
  for (int pool : {0, 1}) {
    std::set<std::pair<double, uint64_t>>& waiting = by_estimate_[pool];
    if (capacity[pool] == 0 || waiting.empty()) continue;
    const double work = std::max(0.0, running_unit_seconds[pool] + waiting_unit_seconds_[pool]);
    const double drained = std::max(last_end[pool], now + work / capacity[pool]);
    while (!waiting.empty() && now + waiting.rbegin()->first > drained)
      Promote(waiting.rbegin()->second);
  }
}

void Scheduler::Promote(uint64_t id) {
  Key& key = key_of_.at(id);
  auto node = queue_.extract(key);
  const Job& job = node.mapped();
  // Out of both promotion lists, whichever promoted it: it is ahead once.
  not_overdue_.erase({job.submit, id});
  if (job.estimate > 0 && std::isfinite(job.estimate))
    by_estimate_[PoolOf(job)].erase({CriticalLength(job), id});
  key.overdue = true;
  key.rank = job.submit;
  node.key() = key;
  queue_.insert(std::move(node));
}

void Scheduler::Count(const Demand& d, int sign, int* gpus, int* slots) {
  const Held held = HeldOf(d);
  *(held.gpus ? gpus : slots) += sign * held.units;
}

bool Scheduler::WithinLimit(const Demand& d) const {
  const Held held = HeldOf(d);
  return held.gpus ? held_gpus_ + held.units <= limit_.gpus
                   : held_slots_ + held.units <= limit_.slots;
}

void Scheduler::Finish(uint64_t id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  Count(it->second.demand, -1, &held_gpus_, &held_slots_);
  cluster_->Release(it->second.placement);
  ends_.erase(it->second.end_entry);
  running_.erase(it);
}

bool Scheduler::Reserve(const Job& head, double now, double* when, std::vector<bool>* nodes) const {
  // Release the running jobs in the order they are expected to end, on a copy, until the head
  // fits: that is when (and where) it is promised to start.
  ClusterState future = *cluster_;
  Fit fit = policy_ == Policy::kBestFit ? Fit::kBest : Fit::kFirst;
  for (const auto& [end, id] : ends_) {
    future.Release(running_.at(id).placement);
    if (auto p = future.Find(head.demand, fit)) {
      // An end that nobody can predict promises nothing: only jobs off the reserved nodes may
      // jump ahead then.
      *when = end == kNever ? now : end;
      nodes->assign(cluster_->nodes().size(), false);
      for (int n : p->Nodes()) (*nodes)[n] = true;
      return true;
    }
  }
  return false;
}

std::vector<Scheduler::Started> Scheduler::Schedule(double now) {
  std::vector<Started> started;
  Fit fit = policy_ == Policy::kBestFit ? Fit::kBest : Fit::kFirst;
  auto start = [&](std::map<Key, Job>::iterator it, Placement p) {
    const Job& job = it->second;
    cluster_->Allocate(p);
    Count(job.demand, 1, &held_gpus_, &held_slots_);
    double end = job.estimate > 0 ? now + job.estimate : kNever;
    Running r{p, job.demand, end, ends_.emplace(end, job.id)};
    running_.emplace(job.id, std::move(r));
    started.push_back({job, std::move(p)});
    Dequeued(job);
    return queue_.erase(it);
  };
  if (Guarded()) PromoteOverdue(now);
  if (CriticalFirst()) PromoteCritical(now);
  bool blocked = false;
  Backfill backfill{now, {}, {}};
  for (auto it = queue_.begin(); it != queue_.end();) {
    const Job& job = it->second;
    // Nothing more can start: every waiting job needs GPUs and none is free.
    if (cluster_->total_free_gpus() == 0 && cpu_only_waiting_ == 0) break;
    std::optional<Placement> p;
    if (!WithinLimit(job.demand)) {
      // Over its share: it waits, as if it did not fit.
    } else if (blocked) {
      // Backfill: jump ahead of the head only without delaying it.
      p = BackfillPlacement(*cluster_, job, fit, now, backfill);
    } else if (job.demand.total_gpus() <= cluster_->total_free_gpus()) {
      p = cluster_->Find(job.demand, fit);
    }
    if (p) {
      it = start(it, std::move(*p));
      continue;
    }
    if (!blocked) {
      // The head does not fit: fifo stops here; the others reserve for it and backfill.
      if (policy_ == Policy::kFifo) break;
      blocked = true;
      if (!Reserve(job, now, &backfill.shadow, &backfill.reserved))
        backfill.reserved.assign(cluster_->nodes().size(), true);
    }
    ++it;
  }
  return started;
}

}  // namespace hyperpack::scheduler
