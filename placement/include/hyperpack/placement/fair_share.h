// Weighted fair share of one server's nodes between the studies it runs at once.
//
// Each study claims what it holds now and what it would place now beyond that; its priority is
// its weight. Per kind of unit (GPUs; and CPU slots for trials that hold no GPU, at least one per
// trial: Scheduler::Limit's units), the capacity is divided by weighted max-min fairness
// (water-filling): no study gets more than it claims, and what one does not claim goes to the
// others in proportion to their weights. A study's quota becomes its Scheduler::Limit, and the
// nodes' units are split so that no unit is free to two studies: a study keeps what it holds, and
// the free units go to the studies below their quota, the furthest below first, from the nodes
// with the most free first (so that gangs stay on few nodes). Every other unit of a node is
// withheld from it (ClusterState::Withhold). A study that holds more than its quota must give the
// excess back (StudyController preempts its youngest trials); nothing is taken from a study within
// its quota, so a study that claims nothing more never loses anything.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "hyperpack/placement/placement.h"

namespace hyperpack::scheduler {

// Units of one node: GPUs by index, and CPU slots as ClusterState counts them.
struct NodeUnits {
  uint64_t gpus = 0;
  int cpus = 0;
  bool operator==(const NodeUnits&) const = default;
};

// One study, as the server sees it.
struct ShareClaim {
  double weight = 1;                  // its priority, > 0
  std::vector<NodeUnits> held;        // by node, what its placements hold (shorter: nothing there)
  int held_gpus = 0, held_slots = 0;  // in Scheduler::Limit's units
  int wanted_gpus = 0, wanted_slots = 0;  // what it would place now beyond that
  bool operator==(const ShareClaim&) const = default;
};

struct ShareGrant {
  Scheduler::Limit limit;           // its quota
  std::vector<NodeUnits> withheld;  // by node
  bool operator==(const ShareGrant& o) const {
    return limit.gpus == o.limit.gpus && limit.slots == o.limit.slots && withheld == o.withheld;
  }
};

// Weighted max-min fair division of `capacity` whole units: demands[i] or more each, in
// proportion to weights[i] among those whose demand is not met. The units left after whole shares
// go to the largest remainders (ties: the larger weight, then the lower index). Weights > 0.
std::vector<int> WeightedMaxMin(int capacity, const std::vector<double>& weights,
                                const std::vector<int>& demands);

// The grants, one per claim, for `nodes` (a lost node has no GPUs and no CPU slots).
std::vector<ShareGrant> DivideCapacity(const std::vector<Node>& nodes,
                                       const std::vector<ShareClaim>& claims);

}  // namespace hyperpack::scheduler
