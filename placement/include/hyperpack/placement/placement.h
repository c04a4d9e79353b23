// Placement: where a trial's ranks run, and which waiting trial runs next.
//
// ClusterState knows every node's free GPUs (by index) and CPU slots. A Demand is a gang: `ranks`
// processes, each needing `gpus_per_rank` GPUs and `cpus_per_rank` CPU slots on one node, all
// started together or not at all (partial reservations are never held). Find puts the whole gang
// on one node when one node can hold it (best fit: the node left with the fewest free GPUs, so that
// large holes stay free), and spreads it over as few nodes as possible only when it must.
//
// Scheduler keeps the waiting jobs, highest priority first (resumed and promoted trials before new
// ones), then in the queue's order: of arrival (Order::kArrival), or shortest predicted run time
// first with aging (Order::kShortestFirst): a job's rank is estimate - aging x (time waited), so
// that a long job is passed only by jobs that arrive within estimate / aging of it; the rank of a
// waiting job against another never changes with time, so the queue is sorted once, by
// estimate + aging x submit. A starvation guard (QueueOptions::max_wait, or max_wait_factor times
// the typical estimate) bounds the tail that aging alone leaves: a job that has waited that long
// goes ahead of every job of its priority that has not, in arrival order, and so gets the backfill
// reservation below. Each pass starts what the
// policy allows:
//   kFifo      strict order, first fit: the first job that does not fit stops the pass;
//   kFirstFit  first fit, with EASY backfill;
//   kBestFit   best fit, with EASY backfill (the default).
// EASY backfill (as in Slurm): the first waiting job gets a reservation at the earliest time the
// running jobs' expected ends leave room for it; a later job may jump ahead only if it fits now and
// either is expected to end before that time or stays off the reserved nodes. So small trials
// fill the gaps and a large trial cannot starve.
//
// A trial that needs less than a GPU asks for a share of one (GpuShare: memory, a fraction, or
// both). Shares pack onto a GPU while its memory and its whole hold them: first onto a GPU that
// already holds shares (best fit: the one left with the least memory), then onto a free GPU, chosen
// as a one-GPU trial's would be. A GPU that holds a share is not free for whole-GPU trials until
// its last share is released. Memory is packed only onto GPUs whose memory a node states.
// Thread-safety: not thread-safe; one owner (the scheduler's io_context thread, or a simulation).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hyperpack/status.h"

namespace hyperpack::scheduler {

struct Node {
  std::string name;
  int gpus = 0;               // devices 0 .. gpus-1 (at most 64)
  int cpus = 0;               // CPU slots
  int64_t gpu_memory_mb = 0;  // each GPU's memory (MiB); 0: not known, no memory share goes there
  bool operator==(const Node&) const = default;
};

// Part of one GPU: `memory_mb` of its memory and/or `milli` thousandths of it (Ray's fractional
// GPUs: four trials of 250 share one).
struct GpuShare {
  int64_t memory_mb = 0;
  int milli = 0;  // 0..1000; 0: only memory counts
  bool any() const { return memory_mb > 0 || milli > 0; }
  bool operator==(const GpuShare&) const = default;
};

// "2048 MiB of one GPU", "25% of one GPU", "2048 MiB and 50% of one GPU".
std::string ShareText(const GpuShare& share);

// The part of a GPU of `gpu_memory_mb` that `share` holds, in (0, 1]: the larger of its fraction
// and its memory's; what a budget in GPU-hours charges it. 1 where neither can be told.
double GpuFraction(const GpuShare& share, int64_t gpu_memory_mb);

struct Demand {
  int ranks = 1;
  int gpus_per_rank = 0;
  int cpus_per_rank = 1;
  // With gpus_per_rank 0 and one rank: the rank holds this share of one GPU.
  GpuShare share = {};
  bool shares_gpu() const { return gpus_per_rank == 0 && share.any(); }
  int total_gpus() const { return ranks * gpus_per_rank; }
  int total_cpus() const { return ranks * cpus_per_rank; }
};

// What a job or trial counts, for Scheduler::Limit, a study's share and a trial's cost: its GPUs,
// or where it holds none its CPU slots (at least 1). One rule for all of them.
struct Held {
  int units = 1;
  bool gpus = false;
};
inline Held HeldOf(int gpus, int cpus) {
  return gpus > 0 ? Held{gpus, true} : Held{std::max(1, cpus), false};
}
// A share of a GPU counts as the GPU it is on (what its trial's cost and a server's fair share
// charge it).
inline Held HeldOf(const Demand& d) {
  return d.shares_gpu() ? Held{1, true} : HeldOf(d.total_gpus(), d.total_cpus());
}

struct RankPlacement {
  int node = 0;
  std::vector<int> gpus;  // device indices on that node
  int cpus = 0;
  GpuShare share = {};  // any(): gpus[0] is shared, and this is the rank's part of it
};

// Rank r runs at ranks[r]; ranks on one node are consecutive and the node of rank 0 comes first.
struct Placement {
  std::vector<RankPlacement> ranks;
  std::vector<int> Nodes() const;  // distinct, in rank order
};

enum class Fit { kBest, kFirst };

class ClusterState {
 public:
  explicit ClusterState(std::vector<Node> nodes);

  const std::vector<Node>& nodes() const { return nodes_; }
  int free_gpus(int node) const { return free_gpus_[node]; }
  int free_cpus(int node) const { return free_cpus_[node]; }
  int total_gpus() const { return total_gpus_; }
  int total_free_gpus() const { return total_free_gpus_; }

  // Where the gang would go now, or nullopt when it does not fit.
  std::optional<Placement> Find(const Demand& demand, Fit fit) const;
  // The same, using no node marked in `avoid`.
  std::optional<Placement> FindAvoiding(const Demand& demand, Fit fit,
                                        const std::vector<bool>* avoid) const;
  // True when the gang could ever fit on this cluster (empty).
  bool Satisfiable(const Demand& demand) const;
  void Allocate(const Placement& p);
  // Releasing ranks on a removed node gives nothing back.
  void Release(const Placement& p);
  // A node that joined: appended, so existing indices stay valid.
  void AddNode(const Node& node);
  // A node that was lost: from now on it has no capacity.
  void RemoveNode(int index);
  // What this owner may not place on `node` (another owner holds it, or is owed it: the studies
  // sharing one server, fair_share.h). Replaces the node's earlier withholding; only what is free
  // now can be withheld, the rest is ignored. Releasing a placement never touches it.
  void Withhold(int node, uint64_t gpu_mask, int cpus);
  // What the placements allocated here hold on `node` now (not what is withheld).
  uint64_t held_gpu_mask(int node) const;
  int held_cpus(int node) const;
  // How many shares GPU `gpu` of `node` holds, and how much of its memory (MiB).
  int sharers(int node, int gpu) const { return Shared(node, gpu).sharers; }
  int64_t shared_memory_mb(int node, int gpu) const { return Shared(node, gpu).memory_mb; }

 private:
  // What the shares on one GPU hold.
  struct SharedGpu {
    int64_t memory_mb = 0;
    int milli = 0;
    int sharers = 0;
  };
  // Nothing, for a removed node or a GPU it does not have.
  const SharedGpu& Shared(int node, int gpu) const {
    static const SharedGpu kNone;
    if (node < 0 || node >= static_cast<int>(shared_.size()) || gpu < 0 ||
        gpu >= static_cast<int>(shared_[node].size()))
      return kNone;
    return shared_[node][gpu];
  }
  std::optional<int> OneNode(int gpus, int cpus, Fit fit, const std::vector<bool>* avoid,
                             int64_t min_gpu_memory_mb = 0) const;
  // Where a one-rank share goes: a GPU that already holds shares, else a free one.
  std::optional<Placement> FindShare(const Demand& d, Fit fit,
                                     const std::vector<bool>* avoid) const;
  bool ShareFits(int node, const SharedGpu& on, const GpuShare& share) const;
  void Reindex(int node, int old_free);
  friend class Scheduler;

  std::vector<Node> nodes_;
  std::vector<int> free_gpus_, free_cpus_;
  std::vector<uint64_t> free_mask_;  // bit i: GPU i free
  std::vector<uint64_t> withheld_mask_;
  std::vector<int> withheld_cpus_;
  std::vector<std::vector<SharedGpu>> shared_;  // [node][gpu]
  // by_free_[k]: nodes with exactly k free GPUs (GPU nodes only), for best fit in O(max GPUs).
  std::vector<std::vector<int>> by_free_;
  std::vector<int> pos_in_bucket_;
  std::vector<bool> removed_;
  int total_gpus_ = 0, total_free_gpus_ = 0;
  int max_node_gpus_ = 0, max_node_cpus_ = 0;
};

enum class Policy { kBestFit, kFirstFit, kFifo };
Result<Policy> ParsePolicy(const std::string& name);
const char* PolicyName(Policy p);

struct Job {
  uint64_t id = 0;
  Demand demand;
  int priority = 0;     // higher first: resumed and promoted trials above new ones
  double submit = 0;    // arrival, seconds
  double estimate = 0;  // expected run time, for backfill; 0: unknown (never backfilled past)
  // A cautious run time (a prediction's upper end) for backfill's promise that a job jumping
  // ahead ends before the head's reservation; 0: estimate.
  double estimate_high = 0;
};

enum class Order { kArrival, kShortestFirst };
Result<Order> ParseOrder(const std::string& name);  // "fifo" (arrival) | "sjf"
const char* OrderName(Order order);

struct QueueOptions {
  Order order = Order::kArrival;
  // kShortestFirst: seconds of predicted run time forgiven per second waited. 1: a job that
  // waited as long as it is longer than another ranks with it. A job without an estimate ranks
  // as the shortest.
  double aging = 1.0;
  // kShortestFirst: seconds a job may wait before it goes to the head of its priority; 0: no
  // guard (aging alone). Checked at each pass, which is when a job can start anyway.
  double max_wait = 0;
  // kShortestFirst without max_wait: the guard is this many times the typical estimate (the
  // geometric mean of the estimates submitted so far, the median of log-normal run times); 0: none.
  double max_wait_factor = 0;
  // kShortestFirst: a job that would end after everything else even if it started now (its
  // estimate is longer than the time the work already running and waiting needs to drain) goes
  // ahead of its priority, as an overdue job does: the makespan waits on it, and a shortest-first
  // order would leave it to the last.
  bool critical_first = false;
};

class Scheduler {
 public:
  Scheduler(ClusterState* cluster, Policy policy, QueueOptions queue = {})
      : cluster_(cluster), policy_(policy), queue_options_(queue) {}

  // Errors: a demand no node set in this cluster could ever hold.
  Status Submit(const Job& job);
  // Removes a waiting job; false when it is not waiting.
  bool Cancel(uint64_t id);
  // A waiting job needs `demand` instead (a share of a GPU sized again); it keeps its place
  // unless it had been moved ahead. Errors: it is not waiting, or no node could hold the demand
  // (the job is left as it was).
  Status Resubmit(uint64_t id, const Demand& demand);
  struct Started {
    Job job;
    Placement placement;
  };
  // One scheduling pass at time `now`.
  std::vector<Started> Schedule(double now);
  // A running job ended: its resources are free again.
  void Finish(uint64_t id);
  // At most this much held by the running jobs at once, in the units a trial's cost counts: GPUs
  // for jobs that hold any, else CPU slots (at least 1 per job). A job that would pass it waits
  // (it is blocked like one that does not fit). Lowering it stops nothing that runs.
  struct Limit {
    int gpus = std::numeric_limits<int>::max();
    int slots = std::numeric_limits<int>::max();
  };
  void SetLimit(Limit limit) { limit_ = limit; }
  // What the running jobs hold, and what the waiting jobs would, in the same units.
  int held_gpus() const { return held_gpus_; }
  int held_slots() const { return held_slots_; }
  int waiting_gpus() const { return waiting_gpus_; }
  int waiting_slots() const { return waiting_slots_; }

  size_t waiting() const { return queue_.size(); }
  size_t running() const { return running_.size(); }

 private:
  struct Key {
    int priority;
    // waited max_wait, or on the critical path: ahead of the rest of its priority, ranked by submit
    bool overdue;
    double rank;  // lower first: submit, or estimate + aging x submit
    uint64_t id;
    bool operator<(const Key& o) const {
      if (priority != o.priority) return priority > o.priority;
      if (overdue != o.overdue) return overdue;
      if (rank != o.rank) return rank < o.rank;
      return id < o.id;
    }
  };
  struct Running {
    Placement placement;
    Demand demand;
    double expected_end;  // +inf when the job had no estimate
    std::multimap<double, uint64_t>::iterator end_entry;
  };
  // The head's reservation: when it could start and on which nodes.
  bool Reserve(const Job& head, double now, double* when, std::vector<bool>* nodes) const;
  bool Guarded() const {
    return queue_options_.order == Order::kShortestFirst &&
           (queue_options_.max_wait > 0 || queue_options_.max_wait_factor > 0);
  }
  bool CriticalFirst() const {
    return queue_options_.order == Order::kShortestFirst && queue_options_.critical_first;
  }
  // The guard's wait now: max_wait, or max_wait_factor x the typical estimate; +inf while
  // neither is known.
  double MaxWait() const;
  // Moves the jobs that have waited max_wait by `now` ahead of their priority.
  void PromoteOverdue(double now);
  // Moves ahead the waiting jobs that would end last even if they started `now` (critical_first).
  void PromoteCritical(double now);
  void Promote(uint64_t id);
  static double CriticalLength(const Job& job);
  // The work of a job, for critical_first: the pool it draws on ([1] GPUs) and estimate x units.
  static int PoolOf(const Job& job) { return HeldOf(job.demand).gpus ? 1 : 0; }
  static double UnitSeconds(const Job& job) { return job.estimate * HeldOf(job.demand).units; }
  void Dequeued(const Job& job);  // bookkeeping when a job leaves the queue
  bool WithinLimit(const Demand& d) const;

  ClusterState* cluster_;
  Policy policy_;
  QueueOptions queue_options_;
  std::map<Key, Job> queue_;
  std::map<uint64_t, Key> key_of_;
  std::set<std::pair<double, uint64_t>> not_overdue_;  // (submit, id), kept only when Guarded()
  // Per kind of unit a job holds (HeldOf: [0] CPU slots, [1] GPUs): the (cautious estimate, id)
  // of the waiting jobs not yet ahead, kept only with critical_first; and estimate x units over
  // the waiting jobs with an estimate.
  std::set<std::pair<double, uint64_t>> by_estimate_[2];
  double waiting_unit_seconds_[2] = {0, 0};
  double log_estimates_ = 0;  // the sum of log(estimate) over the submitted jobs that had one
  int estimates_ = 0;
  std::map<uint64_t, Running> running_;
  std::multimap<double, uint64_t> ends_;  // expected end -> running job
  int cpu_only_waiting_ = 0;
  Limit limit_;
  int held_gpus_ = 0, held_slots_ = 0;
  int waiting_gpus_ = 0, waiting_slots_ = 0;
  // Adds `sign` x the job's units to held (or waiting) GPUs or slots.
  static void Count(const Demand& d, int sign, int* gpus, int* slots);
};

}  // namespace hyperpack::scheduler
