#include "hyperpack/placement/fair_share.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace hyperpack::scheduler {
namespace {

uint64_t AllGpus(const Node& n) {
  if (n.gpus <= 0) return 0;
  return n.gpus >= 64 ? ~0ULL : ((1ULL << n.gpus) - 1);
}

NodeUnits HeldOn(const ShareClaim& c, size_t node) {
  return node < c.held.size() ? c.held[node] : NodeUnits{};
}

}  // namespace

std::vector<int> WeightedMaxMin(int capacity, const std::vector<double>& weights,
                                const std::vector<int>& demands) {
  const size_t n = demands.size();
  std::vector<int> quota(n, 0);
  std::vector<size_t> active;
  for (size_t i = 0; i < n; ++i)
    if (demands[i] > 0) active.push_back(i);
  int remaining = std::max(0, capacity);
  while (remaining > 0 && !active.empty()) {
    double total = 0;
    for (size_t i : active) total += weights[i];
    // Those whose whole demand is within their fair part are given it; the rest share again.
    std::vector<size_t> unmet;
    int given = 0;
    for (size_t i : active) {
      if (demands[i] <= remaining * weights[i] / total) {
        quota[i] = demands[i];
        given += demands[i];
      } else {
        unmet.push_back(i);
      }
    }
    if (given > 0) {
      remaining -= given;
      active = std::move(unmet);
      continue;
    }
    // No one is met: whole shares, then the units left to the largest remainders.
    std::vector<std::pair<double, size_t>> rest;
    int left = remaining;
    for (size_t i : active) {
      const double fair = remaining * weights[i] / total;
      quota[i] = static_cast<int>(std::floor(fair));
      left -= quota[i];
      rest.emplace_back(fair - quota[i], i);
    }
    std::sort(rest.begin(), rest.end(), [&](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      if (weights[a.second] != weights[b.second]) return weights[a.second] > weights[b.second];
      return a.second < b.second;
    });
    for (size_t k = 0; k < rest.size() && left > 0; ++k, --left) ++quota[rest[k].second];
    break;
  }
  return quota;
}

namespace {

// Per study, by node: the free units it is given.
using Given = std::vector<std::vector<NodeUnits>>;

// What no study holds, by node.
std::vector<NodeUnits> FreeUnits(const std::vector<Node>& nodes,
                                 const std::vector<ShareClaim>& claims) {
  std::vector<NodeUnits> free(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    free[n] = {AllGpus(nodes[n]), std::max(0, nodes[n].cpus)};
    for (const ShareClaim& c : claims) {
      const NodeUnits h = HeldOn(c, n);
      free[n].gpus &= ~h.gpus;
      free[n].cpus = std::max(0, free[n].cpus - h.cpus);
    }
  }
  return free;
}

// `want` free GPUs, then CPU slots, for one study, from the nodes with the most free first.
void Give(int want_gpus, int want_slots, std::vector<NodeUnits>& free,
          std::vector<NodeUnits>& given) {
  std::vector<size_t> by_room(free.size());
  std::iota(by_room.begin(), by_room.end(), 0);
  if (want_gpus > 0) {
    std::stable_sort(by_room.begin(), by_room.end(), [&](size_t a, size_t b) {
      return __builtin_popcountll(free[a].gpus) > __builtin_popcountll(free[b].gpus);
    });
    for (size_t n : by_room) {
      while (want_gpus > 0 && free[n].gpus) {
        const uint64_t bit = free[n].gpus & (~free[n].gpus + 1);  // the lowest free GPU
        free[n].gpus &= ~bit;
        given[n].gpus |= bit;
        --want_gpus;
      }
    }
  }
  if (want_slots > 0) {
    std::stable_sort(by_room.begin(), by_room.end(),
                     [&](size_t a, size_t b) { return free[a].cpus > free[b].cpus; });
    for (size_t n : by_room) {
      const int take = std::min(want_slots, free[n].cpus);
      free[n].cpus -= take;
      given[n].cpus += take;
      want_slots -= take;
    }
  }
}

// A GPU trial's ranks take CPU slots too: what is left of a node goes with its free GPUs, split in
// proportion to the GPUs each study was given there (the remainder to the first in `order`).
void GiveCpusWithGpus(const std::vector<size_t>& order, std::vector<NodeUnits>& free,
                      Given& given) {
  for (size_t n = 0; n < free.size(); ++n) {
    int given_gpus = 0;
    for (const auto& g : given) given_gpus += __builtin_popcountll(g[n].gpus);
    if (given_gpus == 0 || free[n].cpus == 0) continue;
    const int left = free[n].cpus;
    std::optional<size_t> first;
    for (size_t s : order) {
      const int g = __builtin_popcountll(given[s][n].gpus);
      if (g == 0) continue;
      if (!first) first = s;
      const int take = left * g / given_gpus;
      given[s][n].cpus += take;
      free[n].cpus -= take;
    }
    given[*first][n].cpus += free[n].cpus;
    free[n].cpus = 0;
  }
}

}  // namespace

std::vector<ShareGrant> DivideCapacity(const std::vector<Node>& nodes,
                                       const std::vector<ShareClaim>& claims) {
  const size_t s_count = claims.size();
  int gpus = 0, slots = 0;
  for (const Node& n : nodes) {
    gpus += std::max(0, n.gpus);
    slots += std::max(0, n.cpus);
  }
  std::vector<double> weights;
  std::vector<int> gpu_demand, slot_demand;
  for (const ShareClaim& c : claims) {
    weights.push_back(c.weight > 0 ? c.weight : 1);
    gpu_demand.push_back(c.held_gpus + c.wanted_gpus);
    slot_demand.push_back(c.held_slots + c.wanted_slots);
  }
  const std::vector<int> gpu_quota = WeightedMaxMin(gpus, weights, gpu_demand);
  const std::vector<int> slot_quota = WeightedMaxMin(slots, weights, slot_demand);

  // Free units to the studies below their quota, the furthest below first.
  std::vector<NodeUnits> free = FreeUnits(nodes, claims);
  auto gpu_room = [&](size_t s) { return gpu_quota[s] - claims[s].held_gpus; };
  auto slot_room = [&](size_t s) { return slot_quota[s] - claims[s].held_slots; };
  std::vector<size_t> order(s_count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (gpu_room(a) != gpu_room(b)) return gpu_room(a) > gpu_room(b);
    return slot_room(a) > slot_room(b);
  });
  Given given(s_count, std::vector<NodeUnits>(nodes.size()));
  for (size_t s : order) Give(gpu_room(s), slot_room(s), free, given[s]);
  GiveCpusWithGpus(order, free, given);

  // Everything a study neither holds nor was given is withheld from it.
  std::vector<ShareGrant> grants(s_count);
  for (size_t s = 0; s < s_count; ++s) {
    grants[s].limit = {gpu_quota[s], slot_quota[s]};
    grants[s].withheld.resize(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      const NodeUnits h = HeldOn(claims[s], n);
      grants[s].withheld[n] = {AllGpus(nodes[n]) & ~h.gpus & ~given[s][n].gpus,
                               std::max(0, nodes[n].cpus - h.cpus - given[s][n].cpus)};
    }
  }
  return grants;
}

}  // namespace hyperpack::scheduler
